"""Messaging routes: channels, messages, conversations, and the providers' inbound callbacks."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from switchboard.api.app import PUBLIC, create_resolver, make_handler
from switchboard.api.auth import public, requires
from switchboard.api.context import current_auth, seconds_left
from switchboard.api.envelope import Data, ListData, Meta, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.errors import ValidationFailed
from switchboard.identity.passwords import hash_password
from switchboard.models import MEDIA_ID_MAX, MEDIA_ID_PATTERN
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.catalog import models as catalog_models
    from switchboard.commerce import models as commerce_models
    from switchboard.commerce import service as commerce
    from switchboard.groups import models as group_models
    from switchboard.messaging import callbacks, channels, cloud_webhook, conversations, media, messages, models
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    callbacks = lazy_module("switchboard.messaging.callbacks")
    catalog_models = lazy_module("switchboard.catalog.models")
    channels = lazy_module("switchboard.messaging.channels")
    cloud_webhook = lazy_module("switchboard.messaging.cloud_webhook")
    commerce = lazy_module("switchboard.commerce.service")
    commerce_models = lazy_module("switchboard.commerce.models")
    conversations = lazy_module("switchboard.messaging.conversations")
    group_models = lazy_module("switchboard.groups.models")
    media = lazy_module("switchboard.messaging.media")
    messages = lazy_module("switchboard.messaging.messages")
    models = lazy_module("switchboard.messaging.models")

app = create_resolver()
# The spec: "Path parameter messageID (string, required, UUID)"; message ids are UUIDv7 (CONVENTIONS).
MessageId = Annotated[
    str,
    Path(
        pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
        description="the message's id (a UUID)",
    ),
]
CH = ["channels"]
MSG = ["messages"]
CONV = ["conversations"]
ORD = ["orders"]


def _example(description: str, data: dict[str, Any] | list[dict[str, Any]]) -> dict[int, Any]:
    """The documented 200 of a route that answers a free-form document (or a page of them), with an example."""
    if isinstance(data, list):
        page = {"data": data, "meta": {"has_more": False, "limit": 20}}
        content = {"model": ListData[dict[str, Any]], "examples": {"example": {"value": page}}}
    else:
        content = {"model": Data[dict[str, Any]], "examples": {"example": {"value": {"data": data}}}}
    return {200: {"description": description, "content": {"application/json": content}}}


PROXY_EXAMPLE = _example(
    "The proxy settings (password masked)",
    {
        "enabled": True,
        "protocol": "socks5",
        "host": "proxy.example.com",
        "port": 1080,
        "username": "sb",
        "password": "••••",
    },
)


# Channels ----------------------------------------------------------------------------------------------------------
@app.post(
    "/v1/channels",
    middlewares=requires("admin"),
    tags=CH,
    status_code=201,
    summary="Create a channel",
    description=(
        "Creates a channel on `sandbox`, `whatsapp_cloud` or `whatsapp_web`; it starts `disconnected`, so "
        "`connect` it next. `config` holds the platform's settings (the engine, its address and credentials; "
        "at most 50 keys). A `phone_number_id` already claimed by another channel is 409 `conflict`; a "
        "`config` the platform cannot use is 400 `validation_failed`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def create_channel(body: Annotated[models.ChannelCreate, Body()]) -> Data[models.Channel]:
    return Data(data=channels.create(get_store(), current_auth(app), body))


@app.get(
    "/v1/channels",
    middlewares=requires("viewer"),
    tags=CH,
    summary="List channels",
    description=(
        "The organization's channels, a page at a time: `limit` (1-100, default 20) and "
        "`offset`; `meta.total` counts them all.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_channels(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    offset: Annotated[int, Query(ge=0, description="Items to skip")] = 0,
) -> ListData[models.Channel]:
    items, total = channels.list_channels(get_store(), current_auth(app), limit, offset)
    return ListData(data=items, meta=Meta(has_more=offset + limit < total, limit=limit, offset=offset, total=total))


@app.get(
    "/v1/channels/<channelID>",
    middlewares=requires("viewer"),
    tags=CH,
    summary="Get a channel",
    description=(
        "One channel; 404 `not_found` when it is not in the caller's organization.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_channel(channelID: str) -> Data[models.Channel]:
    return Data(data=channels.view(channels.get_item(get_store(), current_auth(app).org_id, channelID)))


@app.patch(
    "/v1/channels/<channelID>",
    middlewares=requires("admin"),
    tags=CH,
    summary="Update a channel",
    description=(
        "Changes the fields sent (absent fields stay; an explicit `null` name is refused). A new `config` "
        "is checked like at creation; 404 `not_found`, 409 `conflict` for a claimed `phone_number_id`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def update_channel(channelID: str, body: Annotated[models.ChannelUpdate, Body()]) -> Data[models.Channel]:
    return Data(data=channels.update(get_store(), current_auth(app), channelID, body))


@app.delete(
    "/v1/channels/<channelID>",
    middlewares=requires("admin"),
    tags=CH,
    status_code=204,
    summary="Delete a channel",
    description=(
        "Disconnects the channel from its provider and deletes it; its messages and conversations stay. "
        "404 `not_found` when it is not in the caller's organization.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def delete_channel(channelID: str) -> None:
    channels.delete(get_store(), current_auth(app), channelID)


@app.post(
    "/v1/channels/<channelID>/connect",
    middlewares=requires("admin"),
    tags=CH,
    summary="Connect a channel",
    description=(
        "Sandbox channels connect at once; `whatsapp_cloud` connects through Meta's Cloud API; "
        "`whatsapp_web` starts the engine's session and goes to `pairing`, serving `/qr` and "
        "`/pairing-code` until the phone links. Answers the channel. 422 `provider_rejected` when the "
        "provider refuses.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def connect_channel(channelID: str) -> Data[models.Channel]:
    return Data(data=channels.connect(get_store(), current_auth(app), channelID))


@app.post(
    "/v1/channels/<channelID>/disconnect",
    middlewares=requires("admin"),
    tags=CH,
    summary="Disconnect a channel",
    description=(
        "Stops the provider session; the channel is `disconnected` and refuses sends (409 `conflict`) "
        "until connected again. Answers the channel.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def disconnect_channel(channelID: str) -> Data[models.Channel]:
    return Data(data=channels.disconnect(get_store(), current_auth(app), channelID))


@app.post(
    "/v1/channels/<channelID>/reconnect",
    middlewares=requires("admin"),
    tags=CH,
    summary="Reconnect a channel",
    description=(
        "Connects the channel again with its current provider session. Answers the channel.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def reconnect_channel(channelID: str) -> Data[models.Channel]:
    return Data(data=channels.reconnect(get_store(), current_auth(app), channelID, force=False))


@app.post(
    "/v1/channels/<channelID>/reconnect/force",
    middlewares=requires("admin"),
    tags=CH,
    summary="Force a reconnection",
    description=(
        "Drops the provider session and connects again (a linked device must pair again). Answers the "
        "channel.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def force_reconnect_channel(channelID: str) -> Data[models.Channel]:
    return Data(data=channels.reconnect(get_store(), current_auth(app), channelID, force=True))


@app.get(
    "/v1/channels/<channelID>/status",
    middlewares=requires("viewer"),
    tags=CH,
    summary="Get a channel's connection status",
    description=(
        "The channel's `status`, whether it is active, its last connection time and last error.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def channel_status(channelID: str) -> Data[models.ChannelStatusView]:
    return Data(data=channels.status(get_store(), current_auth(app), channelID))


@app.get(
    "/v1/channels/<channelID>/capabilities",
    middlewares=requires("viewer"),
    tags=CH,
    summary="List a channel's capabilities",
    description=(
        "What the channel's provider supports (message types, groups, newsletters, profile…); anything "
        "else answers 400 `unsupported_by_provider`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def channel_capabilities(channelID: str) -> Data[models.Capabilities]:
    item, adapter = channels.provider(get_store(), current_auth(app), channelID)
    return Data(
        data=models.Capabilities(channel_id=item["id"], platform=item["platform"], capabilities=adapter.capabilities())
    )


@app.get(
    "/v1/channels/<channelID>/logs",
    middlewares=requires("viewer"),
    tags=CH,
    summary="List a channel's connection log",
    description=(
        "Connection events of the channel (connects, disconnects, errors), newest first; `limit` (1-100) "
        "and `cursor` from `meta.cursor`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def channel_logs(
    channelID: str,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
) -> ListData[models.ChannelLog]:
    items, nxt = channels.logs(get_store(), current_auth(app), channelID, limit, cursor)
    return cursor_list(items, limit, nxt)


@app.get(
    "/v1/channels/<channelID>/qr",
    middlewares=requires("admin"),
    tags=CH,
    summary="Get the pairing QR code",
    description=(
        "The engine's raw QR value to link a `whatsapp_web` channel in `pairing`; 400 "
        "`unsupported_by_provider` on other platforms.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def channel_qr(channelID: str) -> Data[models.QrCode]:
    item, adapter = channels.provider(get_store(), current_auth(app), channelID)
    qr = adapter.qr()
    return Data(data=models.QrCode(channel_id=item["id"], qr=qr["qr"], expires_in=qr.get("expires_in")))


@app.post(
    "/v1/channels/<channelID>/pairing-code",
    middlewares=requires("admin"),
    tags=CH,
    summary="Request a pairing code",
    description=(
        "A code to type on the phone instead of scanning the QR (`whatsapp_web` in `pairing`); the phone "
        "number is normalised. 400 `unsupported_by_provider` on other platforms.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def channel_pairing_code(
    channelID: str, body: Annotated[models.PairingCodeRequest, Body()]
) -> Data[models.PairingCode]:
    return Data(data=channels.pairing_code(get_store(), current_auth(app), channelID, body.phone_number))


def _document(channel_id: str, name: str) -> Data[dict[str, Any]]:
    return Data(data=channels.get_document(get_store(), current_auth(app), channel_id, name))


def _put_document(channel_id: str, name: str, body: dict[str, Any]) -> Data[dict[str, Any]]:
    return Data(data=channels.put_document(get_store(), current_auth(app), channel_id, name, body))


@app.get(
    "/v1/channels/<channelID>/settings/advanced",
    middlewares=requires("viewer"),
    tags=CH,
    summary="Get advanced channel settings",
    description=(
        "The channel's advanced settings document. The document is free-form (at most 100 keys, values "
        "DynamoDB can store); 404 `not_found` when the channel is not in the caller's organization.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example("The advanced settings document", {"auto_read_receipts": False, "reject_calls": True}),
)
def get_advanced(channelID: str) -> Data[dict[str, Any]]:
    return _document(channelID, "advanced")


@app.put(
    "/v1/channels/<channelID>/settings/advanced",
    middlewares=requires("admin"),
    tags=CH,
    summary="Replace advanced channel settings",
    description=(
        "Replaces the advanced settings document. The document is free-form (at most 100 keys, values "
        "DynamoDB can store); 404 `not_found` when the channel is not in the caller's organization.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example("The advanced settings document", {"auto_read_receipts": False, "reject_calls": True}),
)
def put_advanced(
    channelID: str,
    body: Annotated[
        models.Document,
        Body(openapi_examples={"example": {"value": {"auto_read_receipts": False, "reject_calls": True}}}),
    ],
) -> Data[dict[str, Any]]:
    return _put_document(channelID, "advanced", body.model_dump())


@app.get(
    "/v1/channels/<channelID>/settings/phone",
    middlewares=requires("viewer"),
    tags=CH,
    summary="Get phone settings",
    description=(
        "The channel's phone settings document. The document is free-form (at most 100 keys, values "
        "DynamoDB can store); 404 `not_found` when the channel is not in the caller's organization.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The phone settings document", {"display_name": "Acme Support", "business_hours": "09:00-17:00"}
    ),
)
def get_phone_settings(channelID: str) -> Data[dict[str, Any]]:
    return _document(channelID, "phone")


@app.put(
    "/v1/channels/<channelID>/settings/phone",
    middlewares=requires("admin"),
    tags=CH,
    summary="Replace phone settings",
    description=(
        "Replaces the phone settings document. The document is free-form (at most 100 keys, values "
        "DynamoDB can store); 404 `not_found` when the channel is not in the caller's organization.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The phone settings document", {"display_name": "Acme Support", "business_hours": "09:00-17:00"}
    ),
)
def put_phone_settings(
    channelID: str,
    body: Annotated[
        models.Document,
        Body(
            openapi_examples={"example": {"value": {"display_name": "Acme Support", "business_hours": "09:00-17:00"}}}
        ),
    ],
) -> Data[dict[str, Any]]:
    return _put_document(channelID, "phone", body.model_dump())


@app.get(
    "/v1/channels/<channelID>/settings/phone/two-step",
    middlewares=requires("admin"),
    tags=CH,
    summary="Get two-step verification",
    description=(
        "Whether two-step verification is on and its recovery e-mail; the PIN is never shown.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example("Whether two-step verification is on", {"enabled": True, "email": "it@example.com"}),
)
def get_two_step(channelID: str) -> Data[dict[str, Any]]:
    doc = channels.get_document(get_store(), current_auth(app), channelID, "two_step")
    return Data(data={"enabled": bool(doc.get("enabled")), "email": doc.get("email")})


@app.put(
    "/v1/channels/<channelID>/settings/phone/two-step",
    middlewares=requires("admin"),
    tags=CH,
    summary="Update two-step verification",
    description=(
        "Changes the two-step settings document; a `pin` here is 400 `validation_failed` (set it with "
        "`two-step/enable`).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example("The two-step settings document", {"enabled": True, "email": "it@example.com"}),
)
def put_two_step(
    channelID: str, body: Annotated[models.Document, Body(openapi_examples={"example": {"value": {"enabled": False}}})]
) -> Data[dict[str, Any]]:
    doc = body.model_dump()
    if "pin" in doc:
        raise ValidationFailed.field("body.pin", "set the PIN with POST .../two-step/enable")
    return _put_document(channelID, "two_step", doc)


@app.post(
    "/v1/channels/<channelID>/settings/phone/two-step/enable",
    middlewares=requires("admin"),
    tags=CH,
    summary="Enable two-step verification",
    description=(
        "Sets a 6-digit PIN (stored only as a hash, never shown again) and an optional recovery e-mail.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example("Two-step verification is on", {"enabled": True, "email": "it@example.com"}),
)
def enable_two_step(channelID: str, body: Annotated[models.TwoStepEnable, Body()]) -> Data[dict[str, Any]]:
    doc = {"enabled": True, "email": body.email, "pin_hash": hash_password(body.pin)}
    channels.put_document(get_store(), current_auth(app), channelID, "two_step", doc)
    return Data(data={"enabled": True, "email": body.email})


@app.get(
    "/v1/channels/<channelID>/profile",
    middlewares=requires("viewer"),
    tags=CH,
    summary="Get the channel's profile",
    description=(
        "The account profile at the provider (name, about, picture). 400 `unsupported_by_provider` when "
        "the provider has none.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The account profile at the provider", {"name": "Acme Support", "about": "Here to help, 9-5 weekdays"}
    ),
)
def get_channel_profile(channelID: str) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "profile", None))


@app.put(
    "/v1/channels/<channelID>/profile",
    middlewares=requires("admin"),
    tags=CH,
    summary="Update the channel's profile",
    description=(
        "Sets the account profile at the provider and answers it. 400 `unsupported_by_provider` when the "
        "provider has none.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The account profile at the provider", {"name": "Acme Support", "about": "Here to help, 9-5 weekdays"}
    ),
)
def put_channel_profile(
    channelID: str,
    body: Annotated[
        models.Document,
        Body(openapi_examples={"example": {"value": {"name": "Acme Support", "about": "Here to help, 9-5 weekdays"}}}),
    ],
) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "profile", body.model_dump()))


@app.get(
    "/v1/channels/<channelID>/profile/business",
    middlewares=requires("viewer"),
    tags=CH,
    summary="Get the business profile",
    description=(
        "The business profile at the provider (description, address, e-mail, websites, vertical).\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The business profile at the provider",
        {
            "description": "Outdoor gear",
            "email": "support@acme.example",
            "websites": ["https://acme.example"],
            "vertical": "RETAIL",
        },
    ),
)
def get_business_profile(channelID: str) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "business_profile", None))


@app.put(
    "/v1/channels/<channelID>/profile/business",
    middlewares=requires("admin"),
    tags=CH,
    summary="Update the business profile",
    description=(
        "Sets the business profile at the provider and answers it.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The business profile at the provider",
        {
            "description": "Outdoor gear",
            "email": "support@acme.example",
            "websites": ["https://acme.example"],
            "vertical": "RETAIL",
        },
    ),
)
def put_business_profile(
    channelID: str,
    body: Annotated[
        models.Document,
        Body(
            openapi_examples={
                "example": {
                    "value": {
                        "description": "Outdoor gear",
                        "email": "support@acme.example",
                        "websites": ["https://acme.example"],
                        "vertical": "RETAIL",
                    }
                }
            }
        ),
    ],
) -> Data[dict[str, Any]]:
    return Data(
        data=channels.account_document(get_store(), current_auth(app), channelID, "business_profile", body.model_dump())
    )


@app.get(
    "/v1/channels/<channelID>/privacy",
    middlewares=requires("viewer"),
    tags=CH,
    summary="Get the channel's privacy settings",
    description=(
        "The account's privacy settings at the provider.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The account's privacy settings", {"last_seen": "contacts", "profile_photo": "everyone", "read_receipts": True}
    ),
)
def get_channel_privacy(channelID: str) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "privacy", None))


@app.put(
    "/v1/channels/<channelID>/privacy",
    middlewares=requires("admin"),
    tags=CH,
    summary="Update the channel's privacy settings",
    description=(
        "Sets the account's privacy settings at the provider.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The account's privacy settings", {"last_seen": "contacts", "profile_photo": "everyone", "read_receipts": True}
    ),
)
def put_channel_privacy(
    channelID: str,
    body: Annotated[
        models.Document,
        Body(
            openapi_examples={
                "example": {"value": {"last_seen": "contacts", "profile_photo": "everyone", "read_receipts": True}}
            }
        ),
    ],
) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "privacy", body.model_dump()))


@app.get(
    "/v1/channels/<channelID>/proxy",
    middlewares=requires("admin"),
    tags=CH,
    summary="Get the proxy settings",
    description=(
        "The proxy the engine uses for this channel (password masked).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=PROXY_EXAMPLE,
)
def get_proxy(channelID: str) -> Data[dict[str, Any]]:
    return _document(channelID, "proxy")


@app.put(
    "/v1/channels/<channelID>/proxy",
    middlewares=requires("admin"),
    tags=CH,
    summary="Replace the proxy settings",
    description=(
        "Sets the proxy the engine uses for this channel (`protocol` http, https or socks5).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=PROXY_EXAMPLE,
)
def put_proxy(channelID: str, body: Annotated[models.Proxy, Body()]) -> Data[dict[str, Any]]:
    return _put_document(channelID, "proxy", body.model_dump())


@app.get(
    "/v1/channels/<channelID>/network/proxy",
    middlewares=requires("admin"),
    tags=CH,
    summary="Get the network proxy",
    description=(
        "The network-level proxy settings of the channel.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The network proxy settings", {"enabled": False, "protocol": "http", "host": "proxy.example.com", "port": 3128}
    ),
)
def get_network_proxy(channelID: str) -> Data[dict[str, Any]]:
    return _document(channelID, "network_proxy")


@app.put(
    "/v1/channels/<channelID>/network/proxy",
    middlewares=requires("admin"),
    tags=CH,
    summary="Replace the network proxy",
    description=(
        "Sets the network-level proxy settings of the channel.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The network proxy settings", {"enabled": False, "protocol": "http", "host": "proxy.example.com", "port": 3128}
    ),
)
def put_network_proxy(channelID: str, body: Annotated[models.Proxy, Body()]) -> Data[dict[str, Any]]:
    return _put_document(channelID, "network_proxy", body.model_dump())


@app.get(
    "/v1/channels/<channelID>/blocked-contacts",
    middlewares=requires("viewer"),
    tags=CH,
    summary="List numbers blocked on a channel",
    description=(
        "Numbers blocked at the provider through this channel, with when they were blocked.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_blocked_on_channel(channelID: str) -> ListData[models.BlockedOnChannel]:
    return whole_list(media.blocked_on_channel(get_store(), current_auth(app), channelID))


@app.post(
    "/v1/channels/<channelID>/blocked-contacts",
    middlewares=requires("member"),
    tags=CH,
    summary="Block or unblock a number on a channel",
    description=(
        "Blocks (`blocked: true`, the default) or unblocks a number at the provider, for providers that "
        "support it (400 `unsupported_by_provider` otherwise).\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The number's block state at the provider",
        {"channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab", "phone": "14155550188", "blocked": True},
    ),
)
def block_on_channel(channelID: str, body: Annotated[models.BlockOnChannel, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.block_on_channel(get_store(), current_auth(app), channelID, body))


@app.get(
    "/v1/channels/<channelID>/contacts",
    middlewares=requires("viewer"),
    responses=_example(
        "A page of contacts",
        [
            {
                "id": "ct_01jd80a0z9y8x7w6v5t4s3r2qp",
                "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
                "name": "Ada",
                "phone": "14155550188",
                "created_at": "2026-11-21T10:02:00.000Z",
                "updated_at": "2026-11-21T10:02:00.000Z",
            }
        ],
    ),
    tags=CH,
    summary="List a channel's contacts",
    description=(
        "The stored contacts that have a conversation on this channel, a page at a time (by contact id); "
        "`limit` (1-100) and `cursor` from `meta.cursor`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def channel_contacts(
    channelID: str,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
) -> ListData[dict[str, Any]]:
    items, nxt = media.channel_contacts(get_store(), current_auth(app), channelID, limit, cursor)
    return cursor_list(items, limit, nxt)


@app.post(
    "/v1/channels/<channelID>/contacts/lookup",
    middlewares=requires("member"),
    tags=CH,
    summary="Look up a number at the provider",
    description=(
        "The provider's profile lookup for a phone number (not the stored contacts); 400 "
        "`unsupported_by_provider` when the provider cannot.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The provider's profile of the number",
        {"phone": "14155550188", "exists": True, "name": "Ada", "picture_url": None},
    ),
)
def channel_contact_lookup(channelID: str, body: Annotated[models.PhoneLookup, Body()]) -> Data[dict[str, Any]]:
    return Data(data=channels.lookup_contact(get_store(), current_auth(app), channelID, body.phone))


@app.get(
    "/v1/channels/<channelID>/groups",
    middlewares=requires("viewer"),
    tags=CH,
    summary="List a channel's groups",
    description=(
        "The channel's active groups (`/v1/groups` records); 400 `unsupported_by_provider` on a provider "
        "without groups.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def channel_groups(channelID: str) -> ListData[group_models.Group]:
    # on first use: keeps switchboard.groups.service off the cold start
    from switchboard.groups import service as groups

    return whole_list(groups.channel_groups(get_store(), current_auth(app), channelID))


@app.get(
    "/v1/channels/<channelID>/media/<mediaID>",
    middlewares=requires("member"),
    tags=CH,
    summary="Download media of a channel",
    description=(
        "Fetches a media object by its provider id through the channel and keeps a copy: up to 4 MiB the "
        "answer carries it base64-encoded in `data`; a larger file is answered with `data` empty and `source_url` "
        "a presigned URL of the copy, valid 15 minutes (`expires_at`). 404 `not_found` for an unknown channel or "
        "media; 503 `service_unavailable` when the provider does not deliver it in time.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def channel_media(
    channelID: str,
    mediaID: Annotated[str, Path(min_length=1, max_length=MEDIA_ID_MAX, pattern=MEDIA_ID_PATTERN)],
    message_id: Annotated[str, Query(min_length=1, max_length=256)] = "-",
) -> Data[media.DownloadedMediaView]:
    auth, left = current_auth(app), seconds_left(app)
    return Data(data=media.download(get_store(), auth, channelID, mediaID, message_id, "{}", seconds_left=left))


@app.post(
    "/v1/channels/<channelID>/sandbox/inbound",
    middlewares=requires("member"),
    tags=CH,
    status_code=202,
    summary="Simulate an inbound message",
    description=(
        "Sandbox channels only: a customer writes to the channel, a `text` or an `order` (a cart from the "
        "catalogue, Meta's inbound `order` object). The message is stored, resolved to a contact (created if "
        "new), threaded into a conversation, and emits `message.new`; an `order` also makes a `pending` order "
        "(`order_id`, `commerce.order.updated`). 400 `unsupported_by_provider` on a non-sandbox channel.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def sandbox_inbound(channelID: str, body: Annotated[models.SandboxInbound, Body()]) -> Data[models.InboundAccepted]:
    return Data(data=callbacks.sandbox_inbound(get_store(), current_auth(app), channelID, body))


# Messages ----------------------------------------------------------------------------------------------------------
@app.post(
    "/v1/messages",
    middlewares=requires("member"),
    tags=MSG,
    status_code=202,
    summary="Send a message",
    description=(
        "Sends a message on a channel to `to` (a phone in any common form, normalised), `contact_id`, "
        "`conversation_id` (a conversation of the channel: its contact, or a group conversation's chat) or "
        "`group_id` (a group of the channel, `grp_…` or its JID / Cloud group id: the group's chat); exactly one "
        "of them, else 400 `validation_failed`. The body carries the object named by `type` (`text` by default): "
        "`text`, `media`, `template`, `location`, `interactive` or `contacts`. Accepted as `pending` and queued "
        "(202); statuses follow as `message.status_update` events. Errors: 409 `conflict` when the "
        "channel is not `connected`; 409 `recipient_blocked`, `recipient_suppressed` or "
        "`recipient_opted_out`; 409 `group_pending` for a group Meta has not created yet; 404 `not_found` for an "
        "unknown channel, contact, conversation or group; with an "
        "`Idempotency-Key`, a repeat answers the first result. An `interactive` `order_details` (a bill) or "
        "`order_status` message (to a contact, not a group) is checked against Meta's object (400 "
        "`validation_failed` naming the field, totals included) and makes, refreshes or moves the order of its "
        "`reference_id` in the same write (`/v1/orders`; 404 for an `order_status` naming no order of the channel, "
        "409 `invalid_order_transition` or `order_has_payment` when the order cannot move so).\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def send_message(body: Annotated[models.SendMessage, Body()]) -> Data[models.Message]:
    return Data(data=messages.send(get_store(), current_auth(app), body))


@app.get(
    "/v1/messages/<messageID>",
    middlewares=requires("viewer"),
    tags=MSG,
    summary="Get a message",
    description=(
        "A sent message's record and current status; 404 `not_found` when it is not in the caller's "
        "organization. `status` is one of `pending`, `sent`, `delivered`, `read`, `failed` and the list "
        "may grow (e.g. `played`): clients must accept unknown values.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_message(messageID: MessageId) -> Data[models.Message]:
    return Data(data=messages.get(get_store(), current_auth(app), messageID))


@app.get(
    "/v1/messages/<messageID>/status",
    middlewares=requires("viewer"),
    tags=MSG,
    summary="Get a message's status history",
    description=(
        "The current status with every status change recorded (late or out-of-order ones included).\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_message_status(messageID: MessageId) -> Data[models.MessageStatus]:
    return Data(data=messages.status_of(get_store(), current_auth(app), messageID))


@app.post(
    "/v1/messages/media/download",
    middlewares=requires("member"),
    tags=MSG,
    summary="Download a message's media",
    description=(
        "Fetches the media through the channel's provider and keeps a copy in S3. Up to 4 MiB the answer "
        "carries it base64-encoded in `data` with its MIME type and size; a larger file is answered with `data` "
        "empty and `source_url` a presigned HTTPS URL of the copy, valid 15 minutes (`expires_at`): GET it "
        "without credentials. A viewer reads what is stored; the download makes the provider work, so it "
        "needs a member. 404 `not_found` for an unknown channel or message; 503 `service_unavailable` when "
        "the provider does not deliver the file in the time the request has.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def download_media(body: Annotated[media.MediaDownloadRequest, Body()]) -> Data[media.DownloadedMediaView]:
    auth, left = current_auth(app), seconds_left(app)
    return Data(
        data=media.download(
            get_store(), auth, body.channel_id, body.media_id, body.message_id, body.message_payload, seconds_left=left
        )
    )


@app.post(
    "/v1/messages/edit",
    middlewares=requires("member"),
    tags=MSG,
    summary="Edit a sent message",
    description=(
        "Changes the text of a message we sent, at the provider; 400 `unsupported_by_provider` when it "
        "cannot.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The message as edited",
        {
            "message_id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d",
            "action": "edit",
            "text": "Your order shipped today.",
            "edited_at": "2026-11-21T10:04:00.000Z",
        },
    ),
)
def edit_message(body: Annotated[media.EditRequest, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.message_action(get_store(), current_auth(app), "edit", body))


@app.post(
    "/v1/messages/delete",
    middlewares=requires("member"),
    tags=MSG,
    summary="Delete a message for everyone",
    description=(
        "Deletes a message we sent at the provider; its record stays with `deleted: true`.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The message, deleted for everyone",
        {
            "message_id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d",
            "action": "delete",
            "deleted": True,
            "deleted_at": "2026-11-21T10:04:00.000Z",
        },
    ),
)
def delete_message(body: Annotated[media.MessageRef, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.message_action(get_store(), current_auth(app), "delete", body))


@app.post(
    "/v1/messages/react",
    middlewares=requires("member"),
    tags=MSG,
    summary="React to a message",
    description=(
        "Sets (or with an empty emoji, removes) our reaction to a message of the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The reaction set", {"message_id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d", "action": "react", "reaction": "👍"}
    ),
)
def react_message(body: Annotated[media.ReactRequest, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.message_action(get_store(), current_auth(app), "react", body))


@app.post(
    "/v1/messages/read",
    middlewares=requires("member"),
    tags=MSG,
    summary="Mark a message read",
    description=(
        "Sends a read receipt for an inbound message.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The read receipt sent",
        {"message_id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d", "action": "read", "read_at": "2026-11-21T10:04:00.000Z"},
    ),
)
def read_message(body: Annotated[media.MessageRef, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.message_action(get_store(), current_auth(app), "read", body))


@app.post(
    "/v1/messages/presence",
    middlewares=requires("member"),
    tags=MSG,
    summary="Send a presence update",
    description=(
        "Shows typing, recording or online presence to a chat through the channel.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
    responses=_example(
        "The presence sent", {"channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab", "to": "14155550188", "state": "typing"}
    ),
)
def presence(body: Annotated[media.PresenceRequest, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.presence(get_store(), current_auth(app), body))


@app.post(
    "/v1/messages/uploads/image",
    middlewares=requires("member"),
    tags=MSG,
    status_code=201,
    summary="Upload an image to send",
    description=(
        "A presigned S3 upload for an image (PNG, JPEG or WebP, up to 5 MiB); send it with "
        "`media.asset_id`. A non-image `content_type` is 400 `validation_failed`.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def upload_image(body: Annotated[media.ImageUploadRequest, Body()]) -> Data[media.UploadTicket]:
    if not body.content_type.startswith("image/"):
        raise ValidationFailed.field("body.content_type", "must be an image type")
    return Data(data=media.create_upload(get_store(), current_auth(app), body))


@app.post(
    "/v1/media/uploads",
    middlewares=requires("member"),
    tags=["media"],
    status_code=201,
    summary="Create a media upload",
    description=(
        "A presigned S3 upload; the asset is usable in messages (`media.asset_id`) once uploaded.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def create_upload(body: Annotated[media.UploadRequest, Body()]) -> Data[media.UploadTicket]:
    return Data(data=media.create_upload(get_store(), current_auth(app), body))


@app.get(
    "/v1/media/assets",
    middlewares=requires("viewer"),
    tags=["media"],
    summary="List media assets",
    description=(
        "The organization's uploaded media, newest first; `limit` (1-100) and `cursor` from "
        "`meta.cursor`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_assets(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
) -> ListData[media.Asset]:
    items, nxt = media.list_assets(get_store(), current_auth(app), limit, cursor)
    return cursor_list(items, limit, nxt)


@app.get(
    "/v1/media/assets/<assetID>",
    middlewares=requires("viewer"),
    tags=["media"],
    summary="Get a media asset",
    description=(
        "One uploaded asset (type, size, file name); 404 `not_found`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_asset(assetID: str) -> Data[media.Asset]:
    return Data(data=media.get_asset(get_store(), current_auth(app), assetID))


@app.delete(
    "/v1/media/assets/<assetID>",
    middlewares=requires("member"),
    tags=["media"],
    status_code=204,
    summary="Delete a media asset",
    description=(
        "Deletes the asset and its object; 404 `not_found`.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def delete_asset(assetID: str) -> None:
    media.delete_asset(get_store(), current_auth(app), assetID)


# Conversations -----------------------------------------------------------------------------------------------------
@app.get(
    "/v1/conversations",
    middlewares=requires("viewer"),
    tags=CONV,
    summary="List conversations",
    description=(
        "Conversations, most recent activity first, a page at a time (`limit` 1-100, `cursor`). Filters: "
        "`status` (`open`/`closed`), `assignee` (a user or team id, or `none`), `label`, `channel_id`, "
        "`unread`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_conversations(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
    status: Annotated[Literal["open", "closed"] | None, Query(description="Only open or closed conversations")] = None,
    assignee: Annotated[str | None, Query(max_length=64, description="user or team id, or `none`")] = None,
    label: Annotated[str | None, Query(max_length=64)] = None,
    channel_id: Annotated[str | None, Query(max_length=64)] = None,
    unread: Annotated[bool | None, Query()] = None,
) -> ListData[models.Conversation]:
    items, nxt = conversations.list_conversations(
        get_store(),
        current_auth(app),
        limit=limit,
        cursor=cursor,
        status=status,
        assignee=assignee,
        label=label,
        channel_id=channel_id,
        unread=unread,
    )
    return cursor_list(items, limit, nxt)


@app.get(
    "/v1/conversations/<convID>",
    middlewares=requires("viewer"),
    tags=CONV,
    summary="Get a conversation",
    description=(
        "One conversation; 404 `not_found`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_conversation(convID: str) -> Data[models.Conversation]:
    return Data(data=conversations.get(get_store(), current_auth(app), convID))


@app.get(
    "/v1/conversations/<convID>/messages",
    middlewares=requires("viewer"),
    tags=CONV,
    summary="List a conversation's messages",
    description=(
        "Inbound and outbound messages, newest first; `limit` (1-100) and `cursor` from `meta.cursor`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def conversation_messages(
    convID: str,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
) -> ListData[models.ConversationMessage]:
    items, nxt = conversations.messages(get_store(), current_auth(app), convID, limit, cursor)
    return cursor_list(items, limit, nxt)


def _action(conv_id: str, action: str) -> Data[models.Conversation]:
    return Data(data=conversations.act(get_store(), current_auth(app), conv_id, action))


@app.post(
    "/v1/conversations/<convID>/archive",
    middlewares=requires("member"),
    tags=CONV,
    summary="Archive a conversation",
    description=(
        "Sets `archived`; answers the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def archive(convID: str) -> Data[models.Conversation]:
    return _action(convID, "archive")


@app.post(
    "/v1/conversations/<convID>/unarchive",
    middlewares=requires("member"),
    tags=CONV,
    summary="Unarchive a conversation",
    description=(
        "Clears `archived`; answers the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def unarchive(convID: str) -> Data[models.Conversation]:
    return _action(convID, "unarchive")


@app.post(
    "/v1/conversations/<convID>/close",
    middlewares=requires("member"),
    tags=CONV,
    summary="Close a conversation",
    description=(
        "Sets `status: closed`; answers the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def close(convID: str) -> Data[models.Conversation]:
    return _action(convID, "close")


@app.post(
    "/v1/conversations/<convID>/reopen",
    middlewares=requires("member"),
    tags=CONV,
    summary="Reopen a conversation",
    description=(
        "Sets `status: open`; answers the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def reopen(convID: str) -> Data[models.Conversation]:
    return _action(convID, "reopen")


@app.post(
    "/v1/conversations/<convID>/pin",
    middlewares=requires("member"),
    tags=CONV,
    summary="Pin a conversation",
    description=(
        "Sets `pinned`; answers the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def pin(convID: str) -> Data[models.Conversation]:
    return _action(convID, "pin")


@app.post(
    "/v1/conversations/<convID>/unpin",
    middlewares=requires("member"),
    tags=CONV,
    summary="Unpin a conversation",
    description=(
        "Clears `pinned`; answers the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def unpin(convID: str) -> Data[models.Conversation]:
    return _action(convID, "unpin")


@app.post(
    "/v1/conversations/<convID>/unmute",
    middlewares=requires("member"),
    tags=CONV,
    summary="Unmute a conversation",
    description=(
        "Clears the mute; answers the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def unmute(convID: str) -> Data[models.Conversation]:
    return _action(convID, "unmute")


@app.post(
    "/v1/conversations/<convID>/mute",
    middlewares=requires("member"),
    tags=CONV,
    summary="Mute a conversation",
    description=(
        "Mutes until `until` (ISO 8601), or for good without a body; answers the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def mute(convID: str, body: Annotated[models.MuteRequest | None, Body()] = None) -> Data[models.Conversation]:
    return Data(data=conversations.mute(get_store(), current_auth(app), convID, body or models.MuteRequest()))


@app.post(
    "/v1/conversations/<convID>/read",
    middlewares=requires("member"),
    tags=CONV,
    summary="Mark a conversation read",
    description=(
        "Sets `unread_count` to 0; answers the conversation.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def mark_read(convID: str) -> Data[models.Conversation]:
    return _action(convID, "read")


@app.post(
    "/v1/conversations/<convID>/assign",
    middlewares=requires("member"),
    tags=CONV,
    summary="Assign a conversation",
    description=(
        '`{"user_id"}` (a member) or `{"team_id"}` (a team), or `{}` to unassign; 404 `not_found` for an '
        "unknown member or team.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def assign(convID: str, body: Annotated[models.AssignRequest, Body()]) -> Data[models.Conversation]:
    return Data(data=conversations.assign(get_store(), current_auth(app), convID, body))


@app.post(
    "/v1/conversations/<convID>/lock",
    middlewares=requires("member"),
    tags=CONV,
    summary="Claim or refresh the conversation lock",
    description=(
        "Claims the lock for the caller (the user, or the API key) or refreshes it; it lasts 120 s from "
        "the last refresh (`expires_at`). Another owner's unexpired lock is 409 `lock_held` with the "
        "current lock in `details`.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def claim_lock(convID: str, body: Annotated[models.LockRequest, Body()]) -> Data[models.ConversationLock]:
    return Data(data=conversations.claim_lock(get_store(), current_auth(app), convID, body))


@app.delete(
    "/v1/conversations/<convID>/lock",
    middlewares=requires("member"),
    tags=CONV,
    status_code=204,
    summary="Release the conversation lock",
    description=(
        "Releases the lock (its owner, or an admin); 204 also when there is none. Another owner's "
        "unexpired lock, released by a non-admin, is 403 `forbidden`.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def release_lock(convID: str) -> None:
    conversations.release_lock(get_store(), current_auth(app), convID)


# Conversation labels and history sync (rules in switchboard.catalog) -----------------------------------------------
@app.get(
    "/v1/conversations/<convID>/labels",
    middlewares=requires("viewer"),
    tags=CONV,
    summary="List a conversation's labels",
    description=(
        "The labels attached to the conversation.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def conversation_labels(convID: str) -> ListData[catalog_models.Label]:
    # on first use: keeps switchboard.catalog.labels off the cold start
    from switchboard.catalog import labels

    return whole_list(labels.conversation_labels(get_store(), current_auth(app), convID))


@app.post(
    "/v1/conversations/<convID>/labels",
    middlewares=requires("member"),
    tags=CONV,
    summary="Label a conversation",
    description=(
        "`{label_id}` or `{name}` (a new name joins `/v1/labels`); answers the conversation's labels.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def add_conversation_label(
    convID: str, body: Annotated[catalog_models.ConversationLabelAdd, Body()]
) -> ListData[catalog_models.Label]:
    # on first use: keeps switchboard.catalog.labels off the cold start
    from switchboard.catalog import labels

    return whole_list(labels.add_to_conversation(get_store(), current_auth(app), convID, body))


@app.delete(
    "/v1/conversations/<convID>/labels/<labelID>",
    middlewares=requires("member"),
    tags=CONV,
    status_code=204,
    summary="Remove a label from a conversation",
    description=(
        "Detaches the label; 404 `not_found`.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def remove_conversation_label(convID: str, labelID: str) -> None:
    # on first use: keeps switchboard.catalog.labels off the cold start
    from switchboard.catalog import labels

    labels.attach_conversation(get_store(), current_auth(app), labelID, convID, attach=False)


@app.post(
    "/v1/conversations/<convID>/history-sync",
    middlewares=requires("member"),
    tags=CONV,
    summary="Request a history sync",
    description=(
        "Records a history sync request; the sandbox completes it at once with the messages already "
        "stored.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def conversation_history_sync(convID: str) -> Data[catalog_models.HistorySync]:
    # on first use: keeps switchboard.catalog.chats off the cold start
    from switchboard.catalog import chats

    return Data(data=chats.history_sync(get_store(), current_auth(app), convID))


@app.get(
    "/v1/conversations/<convID>/history-sync",
    middlewares=requires("viewer"),
    tags=CONV,
    summary="Get the latest history sync",
    description=(
        "The latest history sync request of the conversation; 404 `not_found` when there is none.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def last_conversation_history_sync(convID: str) -> Data[catalog_models.HistorySync]:
    # on first use: keeps switchboard.catalog.chats off the cold start
    from switchboard.catalog import chats

    return Data(data=chats.last_history_sync(get_store(), current_auth(app), convID))


# Provider callbacks (public: authenticated by the provider's signature) --------------------------------------------
@app.get(
    "/v1/providers/<channelID>/callback",
    security=PUBLIC,
    middlewares=public(),
    tags=["providers"],
    summary="Provider subscription handshake",
    description=(
        "The provider's subscription handshake for one channel (Meta's `hub.challenge`, echoed as text "
        "when the verify token matches; 403 otherwise).\n\n"
        "Who may call: the channel's provider; no credential, the provider's signature is checked."
    ),
)
def provider_subscription(
    channelID: str,
    mode: Annotated[str | None, Query(alias="hub.mode", max_length=64, description="Meta: `subscribe`")] = None,
    verify_token: Annotated[
        str | None, Query(alias="hub.verify_token", max_length=512, description="Meta: the channel's verify token")
    ] = None,
    challenge: Annotated[
        str | None, Query(alias="hub.challenge", max_length=512, description="Meta: echoed when the token matches")
    ] = None,
) -> Response[str]:
    given = {"hub.mode": mode, "hub.verify_token": verify_token, "hub.challenge": challenge}
    params = {name: value for name, value in given.items() if value is not None}
    return Response(
        status_code=200, content_type="text/plain", body=callbacks.subscription(get_store(), channelID, params)
    )


@app.post(
    "/v1/providers/<channelID>/callback",
    security=PUBLIC,
    middlewares=public(),
    tags=["providers"],
    responses=_example("What the callback stored", {"received": 1, "statuses_applied": 1}),
    summary="Receive a provider callback",
    description=(
        "Inbound messages and delivery statuses from the channel's provider (WAHA, Evolution, Meta), "
        "signature-checked: unsigned or wrongly signed callbacks are 401 and nothing is stored. A "
        "whatsapp_cloud channel's changes are verified and queued, then processed once (`queued`).\n\n"
        "Who may call: the channel's provider; no credential, the provider's signature is checked."
    ),
)
def provider_callback(channelID: str) -> Data[dict[str, Any]]:
    event = app.current_event
    raw = event.body or ""
    body = base64.b64decode(raw) if event.is_base64_encoded else raw.encode()
    return Data(data=callbacks.provider_callback(get_store(), channelID, dict(event.headers or {}), body))


# Orders --------------------------------------------------------------------------------------------------------------
@app.get(
    "/v1/orders",
    middlewares=requires("viewer"),
    tags=ORD,
    summary="List orders",
    description=(
        "Orders, newest first, a page at a time (`limit` 1-100, `cursor`). Filters: `status` and `contact_id` "
        "(each reads a list of its own, so a page costs the same at any number of orders). An order is made by a "
        "customer's cart (an inbound `order` message) or by an outbound `interactive` `order_details` message.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 `forbidden`."
    ),
)
def list_orders(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
    status: Annotated[commerce_models.OrderStatus | None, Query(description="Only orders in this status")] = None,
    contact_id: Annotated[str | None, Query(min_length=1, max_length=64, description="Only this contact's")] = None,
) -> ListData[commerce_models.Order]:
    items, nxt = commerce.list_orders(
        get_store(), current_auth(app), limit=limit, cursor=cursor, status=status, contact_id=contact_id
    )
    return cursor_list(items, limit, nxt)


@app.get(
    "/v1/orders/<orderID>",
    middlewares=requires("viewer"),
    tags=ORD,
    summary="Get an order",
    description=(
        "One order with its items, totals, status and payment status; 404 `not_found` when it is not in the "
        "caller's organization.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 `forbidden`."
    ),
)
def get_order(orderID: str) -> Data[commerce_models.Order]:
    return Data(data=commerce.get(get_store(), current_auth(app), orderID))


@app.post(
    "/v1/orders/<orderID>/status",
    middlewares=requires("member"),
    tags=ORD,
    summary="Change an order's status",
    description=(
        "Moves the order to `status` (`processing`, `partially_shipped`, `shipped`, `completed`, `canceled`) "
        "with an optional `description` for the customer. A billed order (an `order_details` message carried "
        "its `reference_id`) tells the customer with Meta's `order_status` message, queued like any send, in "
        "the same write as the order; a cart that was never billed moves without a message. Errors: 409 "
        "`invalid_order_transition` when the status cannot follow the current one (completed and canceled are "
        "final, a status never goes back), 409 `order_has_payment` when canceling an order whose payment is "
        "pending or captured, the send's errors for a billed order (409 `conflict` when the channel is not "
        "`connected`, `recipient_blocked`, …), 404 `not_found`. Every change emits `commerce.order.updated`.\n\n"
        "Who may call: the `member` role or higher (API key or session), as for sending messages; a lower role "
        "gets 403 `forbidden`."
    ),
)
def change_order_status(
    orderID: str, body: Annotated[commerce_models.OrderStatusChange, Body()]
) -> Data[commerce_models.Order]:
    return Data(data=commerce.set_status(get_store(), current_auth(app), orderID, body))


ERROR_BODY = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}}


@app.get(
    "/v1/providers/whatsapp_cloud/webhook",
    security=PUBLIC,
    middlewares=public(),
    tags=["providers"],
    responses={
        200: {"description": "`hub.challenge`, echoed as text"},
        403: {"description": "No whatsapp_cloud channel has this verify token", **ERROR_BODY},
    },
    summary="WhatsApp Cloud subscription handshake",
    description=(
        "Meta's subscription handshake for the app-level callback of whatsapp_cloud channels: echoes "
        "`hub.challenge` when `hub.verify_token` is the verify token of a whatsapp_cloud channel, else "
        "403.\n\n"
        "Who may call: the channel's provider; no credential, the provider's signature is checked."
    ),
)
def whatsapp_cloud_subscription(
    mode: Annotated[Literal["subscribe"], Query(alias="hub.mode")],
    verify_token: Annotated[str, Query(alias="hub.verify_token", max_length=512)],
    challenge: Annotated[str, Query(alias="hub.challenge", max_length=512)],
) -> Response[str]:
    params = {"hub.mode": mode, "hub.verify_token": verify_token, "hub.challenge": challenge}
    return Response(status_code=200, content_type="text/plain", body=cloud_webhook.subscription(get_store(), params))


@app.post(
    "/v1/providers/whatsapp_cloud/webhook",
    security=PUBLIC,
    middlewares=public(),
    tags=["providers"],
    responses={
        200: {
            "description": "`queued`: the verified changes queued, each processed once after the answer",
            "content": {
                "application/json": {
                    "model": Data[dict[str, Any]],
                    "examples": {"example": {"value": {"data": {"queued": 1, "received": 0, "statuses_applied": 0}}}},
                }
            },
        },
        401: {"description": "Unsigned, or not signed with the app secret of a channel it speaks for", **ERROR_BODY},
    },
    summary="Receive WhatsApp Cloud webhooks",
    description=(
        "The app-level callback of Meta's WhatsApp Cloud API: each change goes to the channel that "
        "claimed its `phone_number_id`, checked with that channel's app secret (`X-Hub-Signature-256`), "
        "and is queued; the answer comes before any is processed, and a change Meta retries is processed "
        "once.\n\n"
        "Who may call: the channel's provider; no credential, the provider's signature is checked."
    ),
)
def whatsapp_cloud_webhook(body: Annotated[models.CloudWebhook, Body()]) -> Data[dict[str, Any]]:
    event = app.current_event  # the signature covers the raw bytes: `body` only documents and pre-checks the shape
    raw = event.body or ""
    payload = base64.b64decode(raw) if event.is_base64_encoded else raw.encode()
    return Data(data=cloud_webhook.receive(get_store(), dict(event.headers or {}), payload))


handler = make_handler(app)
