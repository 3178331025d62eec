"""The Graph API calls of the embedded signup, on the shared provider HTTP client (timeouts, no redirects, SSRF
checks, Graph error bodies mapped by `whatsapp_cloud.graph_error`: 4xx → 422 `provider_rejected` with Meta's message,
throttling codes, 429 and 5xx → 503).

- code exchange: `GET /oauth/access_token?client_id&client_secret&code[&redirect_uri]` → `{access_token, token_type,
  expires_in?}` (the embedded signup's business token usually has no expiry);
- token inspection: `GET /debug_token?input_token=` with the app token (`<app_id>|<app_secret>`) →
  `{data: {app_id, is_valid, scopes, granular_scopes: [{scope, target_ids}], expires_at}}`;
- `GET /{waba_id}/phone_numbers`, `POST /{phone_number_id}/register` `{messaging_product, pin}`,
  `POST|GET /{waba_id}/subscribed_apps`, `GET /{waba_id}?fields=…`, `GET /{phone_number_id}?fields=…`,
  `GET /{waba_id}/message_templates`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from switchboard.providers.base import ProviderRejected
from switchboard.providers.http import HttpApi, segment
from switchboard.providers.whatsapp_cloud import graph_error

PROVIDER = "Meta Graph API"
WABA_FIELDS = (
    "id",
    "name",
    "currency",
    "timezone_id",
    "message_template_namespace",
    "account_review_status",
    "business_verification_status",
)
PHONE_FIELDS = (
    "id",
    "display_phone_number",
    "verified_name",
    "quality_rating",
    "code_verification_status",
    "platform_type",
    "throughput",
    "name_status",
)
MANAGEMENT = "whatsapp_business_management"
MESSAGING = "whatsapp_business_messaging"


@dataclass(frozen=True)
class TokenInfo:
    scopes: list[str]
    waba_ids: list[str]  # targets of whatsapp_business_management
    expires_at: int  # 0: never


def _quiet_transport_logs() -> None:
    """httpx writes every request line at INFO, query string included, and Graph takes the app secret and the business
    token as query parameters (code exchange, debug_token): those lines must never reach a log, whatever level the
    function's loggers run at."""
    for name in ("httpx", "httpcore"):
        logger = logging.getLogger(name)
        if logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)


class Graph:
    def __init__(self, base_url: str, token: str | None = None) -> None:
        _quiet_transport_logs()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.api = HttpApi(PROVIDER, base_url, headers, read_error=graph_error)

    def _with_token(self, token: str) -> HttpApi:
        return HttpApi(PROVIDER, self.api.base_url, {"Authorization": f"Bearer {token}"}, read_error=graph_error)

    # Token ------------------------------------------------------------------------------------------------------------
    def exchange_code(self, app_id: str, app_secret: str, code: str, redirect_uri: str | None) -> tuple[str, int]:
        params = {"client_id": app_id, "client_secret": app_secret, "code": code}
        if redirect_uri:
            params["redirect_uri"] = redirect_uri
        data = self.api.call("GET", "/oauth/access_token", params=params)
        token = data.get("access_token")
        if not isinstance(token, str) or not token:
            raise ProviderRejected(f"{PROVIDER} answered the code exchange without an access token.")
        expires_in = data.get("expires_in")
        return token, int(expires_in) if isinstance(expires_in, int) and expires_in > 0 else 0

    def debug_token(self, app_id: str, app_secret: str, token: str) -> TokenInfo:
        api = self._with_token(f"{app_id}|{app_secret}")
        data = api.call("GET", "/debug_token", params={"input_token": token}).get("data")
        if not isinstance(data, dict):
            raise ProviderRejected(f"{PROVIDER} answered debug_token without data.")
        if not data.get("is_valid"):
            raw = data.get("error")
            error: dict[str, Any] = raw if isinstance(raw, dict) else {}
            message = str(error.get("message") or "the access token is not valid")
            raise ProviderRejected(
                f"{PROVIDER}: {message}",
                details=[{"provider": PROVIDER, "provider_code": error.get("code", 190)}],
            )
        if str(data.get("app_id") or app_id) != app_id:
            raise ProviderRejected(f"{PROVIDER}: the access token belongs to another app.")
        scopes = [str(s) for s in data.get("scopes") or []]
        waba_ids: list[str] = []
        for grant in data.get("granular_scopes") or []:
            if isinstance(grant, dict) and grant.get("scope") == MANAGEMENT:
                waba_ids.extend(str(t) for t in grant.get("target_ids") or [])
        expires = data.get("expires_at")
        return TokenInfo(scopes, waba_ids, int(expires) if isinstance(expires, int) else 0)

    # Account ----------------------------------------------------------------------------------------------------------
    def phone_numbers(self, waba_id: str) -> list[dict[str, Any]]:
        fields = "id,display_phone_number,verified_name,quality_rating,code_verification_status"
        data = self.api.call("GET", f"/{segment(waba_id)}/phone_numbers", params={"fields": fields, "limit": "100"})
        return [row for row in data.get("data") or [] if isinstance(row, dict) and row.get("id")]

    def register(self, phone_number_id: str, pin: str) -> None:
        body = {"messaging_product": "whatsapp", "pin": pin}
        data = self.api.call("POST", f"/{segment(phone_number_id)}/register", json_body=body)
        if data.get("success") is False:
            raise ProviderRejected(f"{PROVIDER} did not register the phone number.")

    def subscribe(self, waba_id: str, callback_uri: str | None = None, verify_token: str | None = None) -> None:
        """`POST /{waba_id}/subscribed_apps`; with `callback_uri`, Meta sends this account's webhooks there
        (`override_callback_uri`), after checking it with `verify_token` (its `GET` handshake)."""
        body = {"override_callback_uri": callback_uri, "verify_token": verify_token} if callback_uri else None
        data = self.api.call("POST", f"/{segment(waba_id)}/subscribed_apps", json_body=body)
        if data.get("success") is False:
            raise ProviderRejected(f"{PROVIDER} did not subscribe the app to the business account.")

    def subscribed_app_ids(self, waba_id: str) -> list[str]:
        data = self.api.call("GET", f"/{segment(waba_id)}/subscribed_apps")
        ids = []
        for row in data.get("data") or []:
            app = row.get("whatsapp_business_api_data") if isinstance(row, dict) else None
            if isinstance(app, dict) and app.get("id"):
                ids.append(str(app["id"]))
        return ids

    def waba(self, waba_id: str) -> dict[str, Any]:
        return self.api.call("GET", f"/{segment(waba_id)}", params={"fields": ",".join(WABA_FIELDS)})

    def phone(self, phone_number_id: str) -> dict[str, Any]:
        return self.api.call("GET", f"/{segment(phone_number_id)}", params={"fields": ",".join(PHONE_FIELDS)})

    def templates(self, waba_id: str) -> tuple[list[dict[str, Any]], bool]:
        data = self.api.call(
            "GET",
            f"/{segment(waba_id)}/message_templates",
            params={"fields": "name,status,category,language", "limit": "100"},
        )
        rows = [row for row in data.get("data") or [] if isinstance(row, dict)]
        raw = data.get("paging")
        paging: dict[str, Any] = raw if isinstance(raw, dict) else {}
        return rows, bool(paging.get("next"))
