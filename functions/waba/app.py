"""Business-account onboarding routes (`/v1/waba`): the WhatsApp Business Platform embedded signup, step by step,
ending with a connected `whatsapp_cloud` channel. Reads: viewer; every step: admin (it sets up a channel).

Order: `oauth/start` → `signup-event` (FINISH; optional) and `exchange-code` → `register-phone` →
`subscribe-webhook` → `sync-meta`; `GET progress/{progressID}` says where a flow stands (`next_step`). The rules live
in `switchboard.waba.service`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.api.context import current_auth
from switchboard.api.envelope import Data, ListData, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.waba import models, service, support
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    models = lazy_module("switchboard.waba.models")
    service = lazy_module("switchboard.waba.service")
    support = lazy_module("switchboard.waba.support")

app = create_resolver()
TAGS = ["business account onboarding"]


@app.post(
    "/v1/waba/oauth/start",
    middlewares=requires("admin"),
    tags=TAGS,
    status_code=201,
    summary="Start a business account onboarding",
    description=(
        "Starts the embedded signup: the progress record, Meta's OAuth dialog URL and the `state` (shown "
        "only here). Next: `signup-event` and `exchange-code`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def oauth_start(body: Annotated[models.OAuthStart, Body()]) -> Data[models.OAuthStarted]:
    return Data(data=service.start(get_store(), current_auth(app), body))


@app.post(
    "/v1/waba/signup-event",
    middlewares=requires("admin"),
    tags=TAGS,
    summary="Record an embedded signup event",
    description=(
        "The embedded signup's `WA_EMBEDDED_SIGNUP` message event: FINISH / FINISH_ONLY_WABA record the "
        "business account (and number), CANCEL ends the flow `canceled`, ERROR ends it `failed` and "
        "records the error. 404 `not_found` for an unknown progress; 409 `conflict` when the flow has "
        "ended.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def signup_event(body: Annotated[models.SignupEvent, Body()]) -> Data[models.Progress]:
    return Data(data=service.signup_event(get_store(), current_auth(app), body))


@app.post(
    "/v1/waba/exchange-code",
    middlewares=requires("admin"),
    tags=TAGS,
    summary="Exchange the signup code",
    description=(
        "Swaps the signup's code for the business token (stored sealed, never returned) and checks its "
        "grants; Graph's refusals are recorded in `/v1/waba/errors` and answered 422 `provider_rejected`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def exchange_code(body: Annotated[models.ExchangeCode, Body()]) -> Data[models.Progress]:
    return Data(data=service.exchange_code(get_store(), current_auth(app), body))


@app.post(
    "/v1/waba/register-phone",
    middlewares=requires("admin"),
    tags=TAGS,
    summary="Register the phone number",
    description=(
        "Registers the number for the Cloud API with a 6-digit two-step verification PIN (not stored).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def register_phone(body: Annotated[models.RegisterPhone, Body()]) -> Data[models.Progress]:
    return Data(data=service.register_phone(get_store(), current_auth(app), body))


@app.post(
    "/v1/waba/subscribe-webhook",
    middlewares=requires("admin"),
    tags=TAGS,
    summary="Subscribe the app to webhooks",
    description=(
        "Subscribes the app to the business account's webhooks with this deployment's app-level callback "
        "(`/v1/providers/whatsapp_cloud/webhook`) and a fresh verify token, and checks Meta lists it.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def subscribe_webhook(body: Annotated[models.ProgressStep, Body()]) -> Data[models.Progress]:
    return Data(data=service.subscribe_webhook(get_store(), current_auth(app), body, _cloud_callback_url()))


def _cloud_callback_url() -> str:
    """This deployment's public URL of the app-level whatsapp_cloud webhook, from the request that reached it
    (API Gateway's domain and, on its default domain, the stage prefix of the path)."""
    event = app.current_event
    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    context = event.raw_event.get("requestContext") or {}
    host = context.get("domainName") or headers.get("host") or "localhost"
    full, route = str(context.get("path") or event.path), event.path
    prefix = full[: -len(route)] if route and full.endswith(route) else ""
    scheme = headers.get("x-forwarded-proto") or "https"
    return f"{scheme}://{host}{prefix}/v1/providers/whatsapp_cloud/webhook"


@app.post(
    "/v1/waba/sync-meta",
    middlewares=requires("admin"),
    tags=TAGS,
    summary="Finish the onboarding",
    description=(
        "Pulls the account, number and template details, creates and connects the whatsapp_cloud channel; "
        "the flow ends `completed` with `channel_id`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def sync_meta(body: Annotated[models.ProgressStep, Body()]) -> Data[models.Progress]:
    return Data(data=service.sync_meta(get_store(), current_auth(app), body))


@app.get(
    "/v1/waba/progress/<progressID>",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="Get an onboarding's progress",
    description=(
        "Where a flow stands: its `status`, the steps done and the `next_step`; 404 `not_found`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_progress(progressID: str) -> Data[models.Progress]:
    return Data(data=service.get(get_store(), current_auth(app), progressID))


@app.get(
    "/v1/waba/errors",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="List onboarding errors",
    description=(
        "Onboarding errors of the organization, newest first (Graph's code, message and trace id, support "
        "label); `limit` (1-100), `cursor`, and `progress_id` to keep one flow's.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_errors(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
    progress_id: Annotated[str | None, Query(max_length=64)] = None,
) -> ListData[models.OnboardingError]:
    items, nxt = service.list_errors(get_store(), current_auth(app), limit, cursor, progress_id)
    return cursor_list(items, limit, nxt)


@app.get(
    "/v1/waba/labels/support",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="List support labels",
    description=(
        "The catalogue of Graph errors an onboarding meets, by what to do about them (the `support_label` "
        "of errors); `code` and `subcode` keep the label of one error.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def support_labels(
    code: Annotated[int | None, Query(ge=0, description="only the label of this Graph error code")] = None,
    subcode: Annotated[int | None, Query(ge=0)] = None,
) -> ListData[models.SupportLabel]:
    labels = support.labels()
    if code is not None:
        wanted = support.label_for(code, subcode)
        labels = [label for label in labels if label.key == wanted]
    return whole_list(labels)


handler = make_handler(app)
