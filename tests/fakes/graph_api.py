"""A fake Meta Graph API (WhatsApp Business Platform, Cloud API) for tests.

Speaks the wire format the real service does: `Authorization: Bearer <token>` (missing → 400 code 104, wrong → 401
code 190), Graph error bodies `{"error": {"message", "type", "code", "error_subcode"?, "error_data"?, "fbtrace_id"}}`,
`wamid.` message ids that encode the recipient like real ones, media behind a second, token-protected URL, a seeded
approved `hello_world` template. Requests are validated the way Graph does, so adapter mistakes show up as the
errors Meta would give.

Meta's own OpenAPI document is the contract (`tests/fakes/meta_contract.py`): every request is validated with
openapi-core against the path template of the operation it reaches. A request that does not validate is answered
with Graph's invalid-parameter error, kept in `violations`, and fails the test when the fake stops (a test that sends
an invalid request on purpose clears `violations`). `operations` lists the operation ids reached. The OAuth code
exchange, token debugging and the media download URL are outside the document (`OUTSIDE_DOCUMENT`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from typing import Any

from tests.fakes import FakeServer, HttpError, Request, Response, meta_contract

VERSION = "v23.0"
# Graph routes the adapter uses that Meta's Business Messaging document does not describe (Graph's own OAuth and the
# lookaside media URLs it hands out).
OUTSIDE_DOCUMENT = ("GET /oauth/access_token", "GET /debug_token", "GET /whatsapp_business/attachments/…")
MESSAGE_TYPES = {
    "text",
    "image",
    "audio",
    "video",
    "document",
    "sticker",
    "location",
    "template",
    "reaction",
    "interactive",
    "contacts",
}
MEDIA_TYPES = {"image", "audio", "video", "document", "sticker"}
PHONE_FIELDS = {
    "id",
    "display_phone_number",
    "verified_name",
    "quality_rating",
    "code_verification_status",
    "platform_type",
    "throughput",
    "name_status",
}
PROFILE_FIELDS = {"about", "address", "description", "email", "profile_picture_url", "websites", "vertical"}
PROFILE_WRITABLE = {"about", "address", "description", "email", "websites", "vertical", "profile_picture_handle"}
VERTICALS = {
    "UNDEFINED",
    "OTHER",
    "AUTO",
    "BEAUTY",
    "APPAREL",
    "EDU",
    "ENTERTAIN",
    "EVENT_PLAN",
    "FINANCE",
    "GROCERY",
    "GOVT",
    "HOTEL",
    "HEALTH",
    "NONPROFIT",
    "PROF_SERVICES",
    "RETAIL",
    "TRAVEL",
    "RESTAURANT",
    "NOT_A_BIZ",
}
CATEGORIES = {"MARKETING", "UTILITY", "AUTHENTICATION"}


def make_wamid(phone: str, *, inbound: bool = False) -> str:
    """A message id shaped like Meta's: base64 of a Thrift struct whose first field is the counterpart's number."""
    tail = secrets.token_hex(10 if inbound else 9).upper().encode()
    raw = b"\x1c\x18" + bytes([len(phone)]) + phone.encode() + b"\x15\x02\x00" + bytes([0x12 if inbound else 0x11])
    raw += b"\x18" + bytes([len(tail)]) + tail + b"\x00"
    return "wamid." + base64.b64encode(raw).decode()


def graph_error(
    status: int,
    message: str,
    code: int,
    *,
    type_: str = "OAuthException",
    subcode: int | None = None,
    details: str | None = None,
) -> HttpError:
    error: dict[str, Any] = {"message": message, "type": type_, "code": code}
    if subcode is not None:
        error["error_subcode"] = subcode
    if details is not None:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    error["fbtrace_id"] = "A" + secrets.token_urlsafe(16)
    return HttpError(Response(status, {"error": error}, headers={"WWW-Authenticate": "OAuth"} if status == 401 else {}))


def invalid(details: str, code: int = 100) -> HttpError:
    message = "(#100) Invalid parameter" if code == 100 else f"(#{code}) Parameter value is not valid"
    return graph_error(400, message, code, details=details)


class FakeGraphApi(FakeServer):
    name = "graph"

    def __init__(
        self,
        token: str = "t",
        *,
        phone_number_id: str = "109876543210987",
        waba_id: str = "209876543210987",
        display_phone_number: str = "+1 555-010-0999",
        verified_name: str = "Acme Support",
        quality_rating: str = "GREEN",
        app_secret: str = "app-secret",
        app_id: str = "4455667788990011",
    ) -> None:
        super().__init__()
        self.token = token
        self.app_id = app_id
        self.app_name = "Switchboard Test App"
        # Embedded signup: codes issued by the fake OAuth dialog, the tokens they became, registration, subscriptions.
        self.codes: dict[str, dict[str, Any]] = {}  # code → {"token", "scopes", "waba_ids", "used"}
        self.issued: dict[str, dict[str, Any]] = {}  # token → {"scopes", "waba_ids"}
        self.redirect_uris: dict[str, str | None] = {}
        self.two_step_pin: str | None = None  # a PIN already set on the number: register must give it
        self.registered: dict[str, str] = {}  # phone_number_id → PIN used
        self.subscribed_apps: list[str] = []
        self.extra_phones: list[dict[str, Any]] = []  # more numbers of the WABA
        self.waba = {
            "id": waba_id,
            "name": "Acme WABA",
            "currency": "USD",
            "timezone_id": "1",
            "message_template_namespace": "ns_0a1b2c3d_4e5f",
            "account_review_status": "APPROVED",
            "business_verification_status": "verified",
        }
        self.phone_number_id = phone_number_id
        self.waba_id = waba_id
        self.app_secret = app_secret
        self.phone = {
            "id": phone_number_id,
            "display_phone_number": display_phone_number,
            "verified_name": verified_name,
            "quality_rating": quality_rating,
            "code_verification_status": "VERIFIED",
            "platform_type": "CLOUD_API",
            "throughput": {"level": "STANDARD"},
            "name_status": "APPROVED",
        }
        self.violations: list[str] = []  # requests that do not validate against Meta's document
        self.operations: list[str] = []  # operation ids of Meta's document reached, in order
        self.messages: dict[str, dict[str, Any]] = {}  # wamid → accepted body (ours) or {"inbound": True}
        self.reads: list[str] = []
        self.typing: list[str] = []  # message ids a typing indicator was shown against
        self.blocked: list[str] = []  # users blocked on the number, in order
        self.calls: dict[str, str] = {}  # call id → last action taken on it
        self.reactions: list[dict[str, Any]] = []
        # Groups: Meta creates them asynchronously; `complete_group` plays the `group_lifecycle_update` that follows.
        self.groups: dict[str, dict[str, Any]] = {}  # group id (case-sensitive) → {subject, description, participants…}
        self.group_requests: dict[str, dict[str, Any]] = {}  # request id → the create body, until completed
        self.not_allowed: set[str] = set()  # recipients outside a test number's allowed list → 131030
        self.media: dict[str, tuple[bytes, str]] = {}
        self.corrupt_media: set[str] = set()  # announce a wrong sha256 for these
        self.profile: dict[str, Any] = {
            "about": "Hi there",
            "address": "1 Main St",
            "description": "We sell things",
            "email": "hello@acme.test",
            "profile_picture_url": "https://pps.whatsapp.net/v/acme.jpg",
            "websites": ["https://acme.test/"],
            "vertical": "RETAIL",
        }
        self.templates: list[dict[str, Any]] = [
            {
                "name": "hello_world",
                "language": "en_US",
                "status": "APPROVED",
                "category": "UTILITY",
                "id": "1100000000000001",
                "components": [
                    {"type": "HEADER", "format": "TEXT", "text": "Hello World"},
                    {"type": "BODY", "text": "Welcome and congratulations!!"},
                ],
            }
        ]

    # Test helpers -----------------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"{self.root}/{VERSION}"

    def channel_config(self, **extra: Any) -> dict[str, Any]:
        """A `whatsapp_cloud` channel's config pointing at this fake (its number, account, token and app secret)."""
        return {
            "base_url": self.url,
            "access_token": self.token,
            "phone_number_id": self.phone_number_id,
            "waba_id": self.waba_id,
            "app_secret": self.app_secret,
            **extra,
        }

    def issue_code(
        self,
        token: str | None = None,
        *,
        waba_ids: list[str] | None = None,
        scopes: list[str] | None = None,
        redirect_uri: str | None = None,
    ) -> str:
        """What Meta hands the page after the embedded signup: a one-time code that becomes `token` (a new random
        business token by default) granting `scopes` on `waba_ids`."""
        code = "AQ" + secrets.token_urlsafe(48)
        self.codes[code] = {
            "token": token or "EAAG" + secrets.token_urlsafe(40),
            "scopes": scopes
            if scopes is not None
            else ["whatsapp_business_management", "whatsapp_business_messaging", "public_profile"],
            "waba_ids": waba_ids if waba_ids is not None else [self.waba_id],
            "used": False,
        }
        self.redirect_uris[code] = redirect_uri
        return code

    def add_media(self, data: bytes, mime_type: str) -> str:
        media_id = str(1_000_000_000_000 + len(self.media) + 1)
        self.media[media_id] = (data, mime_type)
        return media_id

    def inbound_message(self, from_phone: str) -> str:
        """A customer's message id, as Graph would have delivered it in a webhook (it can then be read/reacted to)."""
        wamid = make_wamid(from_phone, inbound=True)
        self.messages[wamid] = {"inbound": True, "from": from_phone}
        return wamid

    def signature(self, body: bytes, secret: str | None = None) -> str:
        key = (secret or self.app_secret).encode()
        return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()

    def webhook(self, value: dict[str, Any], field: str = "messages") -> bytes:
        """A webhook body around one change value of `field` (`messages` by default; metadata filled in)."""
        value = {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550100999", "phone_number_id": self.phone_number_id},
            **value,
        }
        doc = {
            "object": "whatsapp_business_account",
            "entry": [{"id": self.waba_id, "changes": [{"value": value, "field": field}]}],
        }
        return json.dumps(doc).encode()

    def payment_status(
        self,
        reference_id: str,
        status: str,
        *,
        to: str,
        amount: tuple[int, int] = (1000, 100),
        currency: str = "INR",
        refunds: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A `statuses[]` entry of Meta's payment status webhook (Payments API, `type: "payment"`): the payment of
        the bill `reference_id` is `status` (`pending`, `captured`, `failed`); `refunds` are the transaction's
        (`{id, amount: {value, offset}, status: "completed"|"pending"|"failed", speed_processed, …}`)."""
        value, offset = amount
        transaction: dict[str, Any] = {
            "id": "order_" + secrets.token_hex(7),
            "type": "razorpay",
            "status": {"captured": "success", "failed": "failed"}.get(status, "pending"),
            "created_timestamp": 1763800000,
            "updated_timestamp": 1763800005,
            "amount": {"value": value, "offset": offset},
            "currency": currency,
            "method": {"type": "upi"},
        }
        if refunds is not None:
            transaction["refunds"] = refunds
        return {
            "id": make_wamid(to),
            "recipient_id": to,
            "status": status,
            "timestamp": "1763800010",
            "type": "payment",
            "payment": {
                "reference_id": reference_id,
                "amount": {"value": value, "offset": offset},
                "currency": currency,
                "transaction": transaction,
            },
        }

    def group_webhook(self, field: str, group: dict[str, Any]) -> bytes:
        """A signed-body-ready webhook around one group change (`Groups` object of Meta's document)."""
        value = {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550100999", "phone_number_id": self.phone_number_id},
            "groups": [group],
        }
        doc = {
            "object": "whatsapp_business_account",
            "entry": [{"id": self.waba_id, "changes": [{"value": value, "field": field}]}],
        }
        return json.dumps(doc).encode()

    def complete_group(self, request_id: str, participants: list[str] | None = None) -> tuple[str, bytes]:
        """Meta finishes a create request: the group exists (a mixed-case id, as Meta's are) and the
        `group_lifecycle_update` webhook announcing it is returned with the id."""
        body = self.group_requests.pop(request_id)
        group_id = "Y2FwaV9ncm91cDo" + base64.urlsafe_b64encode(secrets.token_bytes(18)).decode().rstrip("=")
        members = list(participants or [])
        self.groups[group_id] = {
            "subject": body["subject"],
            "description": body.get("description", ""),
            "participants": members,
            "invite": secrets.token_urlsafe(16),
        }
        event = {
            "timestamp": 1750269342,
            "group_id": group_id,
            "type": "group_create",
            "request_id": request_id,
            "subject": body["subject"],
            "description": body.get("description", ""),
            "added_participants": [{"input": p, "wa_id": p} for p in members],
        }
        return group_id, self.group_webhook("group_lifecycle_update", event)

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if self.violations and exc[0] is None:
            raise AssertionError(
                "requests that do not validate against Meta's OpenAPI document:\n" + "\n".join(self.violations)
            )

    # Contract ---------------------------------------------------------------------------------------------------------
    def _node_kind(self, node: str) -> str | None:
        if node == self.waba_id:
            return "WABA-ID"
        if node == self.phone_number_id or node in (p["id"] for p in self.extra_phones):
            return "Phone-Number-ID"
        if node in self.media:
            return "Media-ID"
        return self._group_kind(node)

    def _group_kind(self, node: str) -> str | None:
        return "group_id" if node in self.groups else None

    def _check_contract(self, request: Request, version: str, node: str, edge: str | None) -> None:
        kind = self._node_kind(node)
        if kind is None:
            return  # an unknown object: Graph's own "does not exist" answer follows
        template = f"/{{Version}}/{{{kind}}}" + (f"/{edge}" if edge else "")
        paths = meta_contract.repaired()["paths"]
        if template not in paths or request.method.lower() not in paths[template]:
            self.violations.append(f"{request.method} {request.path}: no operation {request.method} {template}")
            raise graph_error(400, f"Unsupported {request.method.lower()} request.", 100, type_="GraphMethodException")
        self.operations.append(meta_contract.operation_id(request.method, template))
        errors = meta_contract.check(
            request.method,
            template,
            request.path,
            {"Version": version, kind: node},
            request.query,
            request.headers,
            request.body,
        )
        if errors:
            self.violations.append(f"{request.method} {request.path} ({template}):\n  " + "\n  ".join(errors))
            raise invalid("The request does not match the API's description: " + errors[0][:300])

    # Routing ----------------------------------------------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        if request.path.startswith("/whatsapp_business/attachments/"):
            self._auth(request)
            return self._download(request)
        match = re.fullmatch(r"/(v\d+\.\d+)/([^/]+)(?:/([a-z_]+))?", request.path)
        if not match:
            raise graph_error(400, "Unknown path components: " + request.path, 2500)
        version, node, edge = match.group(1), match.group(2), match.group(3)
        method = request.method
        if node == "oauth" and edge == "access_token" and method == "GET":
            return self._exchange_code(request)
        if node == "debug_token" and edge is None and method == "GET":
            return self._debug_token(request)
        self._auth(request)
        self._check_contract(request, version, node, edge)
        if node == self.waba_id and edge is None and method == "GET":
            return self._waba_node(request)
        if node == self.waba_id and edge == "phone_numbers" and method == "GET":
            return Response(200, {"data": [self.phone, *self.extra_phones], "paging": {"cursors": {}}})
        if node == self.waba_id and edge == "subscribed_apps" and method in ("GET", "POST"):
            return self._subscribed_apps(request)
        numbers = [self.phone_number_id, *(p["id"] for p in self.extra_phones)]
        if node in numbers and edge == "register" and method == "POST":
            return self._register(node, self._body(request))
        if node == self.phone_number_id and edge is None and method == "GET":
            return self._phone_node(request)
        if node == self.phone_number_id and edge == "messages" and method == "POST":
            return self._send(self._body(request))
        if node == self.phone_number_id and edge == "whatsapp_business_profile" and method in ("GET", "POST"):
            return self._profile(request)
        if node == self.waba_id and edge == "message_templates" and method in ("GET", "POST", "DELETE"):
            return self._templates(request)
        if node in self.media and edge is None and method == "GET":
            return self._media_info(node)
        if node == self.phone_number_id and edge == "media" and method == "POST":
            return self._upload(request)
        if node == self.phone_number_id and edge == "block_users" and method in ("GET", "POST", "DELETE"):
            return self._block_users(request)
        if node == self.phone_number_id and edge == "calls" and method == "POST":
            return self._calls(self._body(request))
        if node == self.phone_number_id and edge == "groups" and method in ("GET", "POST"):
            return self._phone_groups(request)
        if node in self.groups:
            return self._group(request, node, edge)
        raise graph_error(
            400,
            f"Unsupported {method.lower()} request. Object with ID '{node}' does not exist, cannot be loaded due to "
            "missing permissions, or does not support this operation. Please read the Graph API documentation at "
            "https://developers.facebook.com/docs/graph-api",
            100,
            type_="GraphMethodException",
            subcode=33,
        )

    def _auth(self, request: Request) -> None:
        header = request.headers.get("authorization", "")
        token = header[7:] if header.lower().startswith("bearer ") else request.query.get("access_token", "")
        if not token:
            raise graph_error(400, "An access token is required to request this resource.", 104)
        if token != self.token and token not in self.issued:
            raise graph_error(401, "Invalid OAuth access token - Cannot parse access token", 190)

    @staticmethod
    def _body(request: Request) -> dict[str, Any]:
        if not request.headers.get("content-type", "").startswith("application/json"):
            raise invalid("Request body must be JSON")
        try:
            body = json.loads(request.body)
        except ValueError:
            raise invalid("Request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise invalid("Request body must be a JSON object")
        return body

    # Embedded signup --------------------------------------------------------------------------------------------------
    def _exchange_code(self, request: Request) -> Response:
        query = request.query
        if query.get("client_id") != self.app_id:
            raise graph_error(400, "Error validating application. Invalid application ID.", 101)
        if query.get("client_secret") != self.app_secret:
            raise graph_error(400, "Error validating client secret.", 1)
        code = query.get("code")
        if not code:
            raise graph_error(400, "Missing authorization code", 100)
        grant = self.codes.get(code)
        if grant is None:
            raise graph_error(400, "Invalid verification code format.", 100, subcode=36007)
        if grant["used"]:
            raise graph_error(400, "This authorization code has been used.", 100, subcode=36009)
        if self.redirect_uris.get(code) != query.get("redirect_uri"):
            raise graph_error(
                400,
                "Error validating verification code. Please make sure your redirect_uri is identical to the one you "
                "used in the OAuth dialog request",
                100,
                subcode=36008,
            )
        grant["used"] = True
        self.issued[grant["token"]] = {"scopes": grant["scopes"], "waba_ids": grant["waba_ids"]}
        return Response(200, {"access_token": grant["token"], "token_type": "bearer"})

    def _debug_token(self, request: Request) -> Response:
        header = request.headers.get("authorization", "")
        caller = header[7:] if header.lower().startswith("bearer ") else request.query.get("access_token", "")
        if not caller:
            raise graph_error(400, "An access token is required to request this resource.", 104)
        if caller != f"{self.app_id}|{self.app_secret}" and caller not in self.issued:
            raise graph_error(400, "Invalid OAuth access token signature.", 190)
        token = request.query.get("input_token", "")
        grant = self.issued.get(token)
        if grant is None:
            return Response(
                200,
                {
                    "data": {
                        "error": {"code": 190, "message": "Invalid OAuth access token."},
                        "is_valid": False,
                        "scopes": [],
                    }
                },
            )
        management = list(grant["waba_ids"]) if "whatsapp_business_management" in grant["scopes"] else []
        granular = [{"scope": "whatsapp_business_management", "target_ids": management}] if management else []
        if "whatsapp_business_messaging" in grant["scopes"]:
            granular.append({"scope": "whatsapp_business_messaging", "target_ids": list(grant["waba_ids"])})
        return Response(
            200,
            {
                "data": {
                    "app_id": self.app_id,
                    "type": "SYSTEM_USER",
                    "application": self.app_name,
                    "data_access_expires_at": 0,
                    "expires_at": 0,
                    "is_valid": True,
                    "issued_at": 1763800000,
                    "scopes": grant["scopes"],
                    "granular_scopes": granular,
                    "user_id": "100000000000001",
                }
            },
        )

    def _waba_node(self, request: Request) -> Response:
        wanted = [f for f in request.query.get("fields", "").split(",") if f] or ["id", "name"]
        for name in wanted:
            if name not in self.waba:
                raise graph_error(
                    400,
                    f"(#100) Tried accessing nonexisting field ({name}) on node type (WhatsAppBusinessAccount)",
                    100,
                )
        return Response(200, {k: self.waba[k] for k in wanted} | {"id": self.waba_id})

    def _register(self, phone_number_id: str, body: dict[str, Any]) -> Response:
        if body.get("messaging_product") != "whatsapp":
            raise graph_error(400, "(#100) The parameter messaging_product is required.", 100)
        pin = body.get("pin")
        if pin is None:
            raise graph_error(400, "(#100) The parameter pin is required.", 100)
        if not isinstance(pin, str) or not re.fullmatch(r"[0-9]{6}", pin):
            raise graph_error(400, "(#100) Param pin must be 6 characters long.", 100)
        if self.two_step_pin is not None and pin != self.two_step_pin:
            raise graph_error(
                400,
                "(#133005) Two step verification PIN Mismatch",
                133005,
                details="Two step verification PIN is incorrect.",
            )
        self.registered[phone_number_id] = pin
        self.two_step_pin = pin  # registering sets the PIN when the number had none
        return Response(200, {"success": True})

    def _subscribed_apps(self, request: Request) -> Response:
        if request.method == "POST":
            if self.app_id not in self.subscribed_apps:
                self.subscribed_apps.append(self.app_id)
            return Response(200, {"success": True})
        rows = [
            {
                "whatsapp_business_api_data": {
                    "link": f"https://www.facebook.com/games/?app_id={app}",
                    "name": self.app_name,
                    "id": app,
                }
            }
            for app in self.subscribed_apps
        ]
        return Response(200, {"data": rows})

    # Nodes ------------------------------------------------------------------------------------------------------------
    def _phone_node(self, request: Request) -> Response:
        wanted = [f for f in request.query.get("fields", "").split(",") if f]
        for name in wanted:
            if name not in PHONE_FIELDS:
                raise graph_error(
                    400,
                    f"(#100) Tried accessing nonexisting field ({name}) on node type (WhatsAppBusinessPhoneNumber)",
                    100,
                )
        fields = wanted or ["verified_name", "code_verification_status", "display_phone_number", "quality_rating"]
        return Response(200, {**{k: self.phone[k] for k in fields}, "id": self.phone_number_id})

    def _media_info(self, media_id: str) -> Response:
        data, mime = self.media[media_id]
        digest = hashlib.sha256(b"corrupt" if media_id in self.corrupt_media else data).hexdigest()
        return Response(
            200,
            {
                "messaging_product": "whatsapp",
                "url": f"{self.root}/whatsapp_business/attachments/?mid={media_id}&ext=1700000000&hash=ATt{media_id}",
                "mime_type": mime,
                "sha256": digest,
                "file_size": len(data),
                "id": media_id,
            },
        )

    def _download(self, request: Request) -> Response:
        media = self.media.get(request.query.get("mid", ""))
        if media is None:
            raise HttpError(Response(404, b"Not Found", content_type="text/plain"))
        return Response(200, media[0], content_type=media[1])

    # Messages ---------------------------------------------------------------------------------------------------------
    def _send(self, body: dict[str, Any]) -> Response:
        if body.get("messaging_product") != "whatsapp":
            raise graph_error(400, "(#100) The parameter messaging_product is required.", 100)
        if body.get("status") is not None:
            return self._mark_read(body)
        to = str(body.get("to") or "")
        if not to:
            raise graph_error(400, "(#100) The parameter to is required.", 100)
        digits = to.removeprefix("+")
        if body.get("recipient_type") == "group":  # Groups API: `to` is the group's id
            if to not in self.groups:
                raise invalid("Invalid group id: the 'to' parameter must be a group this number is in", 131009)
        elif not re.fullmatch(r"[0-9]{7,15}", digits):
            raise invalid("Invalid WhatsApp ID: the 'to' parameter must be a phone number", 131009)
        if digits in self.not_allowed:
            raise graph_error(
                400,
                "(#131030) Recipient phone number not in allowed list",
                131030,
                details="Recipient phone number not in allowed list: Add recipient phone number to recipient list "
                "and try again.",
            )
        if body.get("recipient_type", "individual") not in ("individual", "group"):
            raise invalid("Param recipient_type must be one of {INDIVIDUAL, GROUP}")
        kind = body.get("type", "text")
        if kind not in MESSAGE_TYPES:
            raise graph_error(
                400, f"(#100) Param type must be one of {{{', '.join(sorted(t.upper() for t in MESSAGE_TYPES))}}}", 100
            )
        allowed = {"messaging_product", "recipient_type", "to", "type", "context", "biz_opaque_callback_data", kind}
        for key in body:
            if key not in allowed:
                raise graph_error(400, f"(#100) Param {key} is not a valid parameter for type {kind}", 100)
        part = body.get(kind)
        if kind == "contacts":  # a list of contact cards, each with a formatted name
            if (
                not isinstance(part, list)
                or not part
                or not all(
                    isinstance(c, dict) and isinstance(c.get("name"), dict) and c["name"].get("formatted_name")
                    for c in part
                )
            ):
                raise graph_error(400, "(#100) The parameter contacts['name']['formatted_name'] is required.", 100)
        elif not isinstance(part, dict):
            raise graph_error(400, f"(#100) The parameter {kind} is required.", 100)
        else:
            self._check_part(kind, part)
        context = body.get("context")
        if context is not None and (not isinstance(context, dict) or not isinstance(context.get("message_id"), str)):
            raise graph_error(400, "(#100) The parameter context['message_id'] is required.", 100)
        wamid = make_wamid(digits)
        self.messages[wamid] = body
        if kind == "reaction":
            self.reactions.append(part)
        return Response(
            200,
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": digits}],
                "messages": [{"id": wamid, **({"message_status": "accepted"} if kind == "template" else {})}],
            },
        )

    def _check_part(self, kind: str, part: dict[str, Any]) -> None:
        if kind == "text":
            extra = set(part) - {"body", "preview_url"}
            if extra:
                raise graph_error(400, f"(#100) Param text['{sorted(extra)[0]}'] is not a valid parameter", 100)
            text = part.get("body")
            if not isinstance(text, str) or not text:
                raise graph_error(400, "(#100) The parameter text['body'] is required.", 100)
            if len(text) > 4096:
                raise graph_error(400, "(#100) Param text['body'] must be at most 4096 characters long.", 100)
            if "preview_url" in part and not isinstance(part["preview_url"], bool):
                raise graph_error(400, "(#100) Param text['preview_url'] must be a boolean.", 100)
        elif kind in MEDIA_TYPES:
            keys = {"link", "id", "caption", "filename", "provider"}
            if kind not in ("image", "video", "document"):
                keys.discard("caption")
            if kind != "document":
                keys.discard("filename")
            extra = set(part) - keys
            if extra:
                raise graph_error(400, f"(#100) Param {kind}['{sorted(extra)[0]}'] is not a valid parameter", 100)
            if ("link" in part) == ("id" in part):
                raise graph_error(400, f"(#100) Param {kind} must contain exactly one of link or id", 100)
            if "link" in part and not re.match(r"https?://", str(part["link"])):
                raise invalid(f"Param {kind}['link'] is not a valid URI")
            if "id" in part and str(part["id"]) not in self.media:
                raise invalid(f"Param {kind}['id'] is not a valid media id")
        elif kind == "template":
            name, language = part.get("name"), part.get("language")
            if not isinstance(name, str) or not name:
                raise graph_error(400, "(#100) The parameter template['name'] is required.", 100)
            if not isinstance(language, dict) or not isinstance(language.get("code"), str):
                raise graph_error(400, "(#100) The parameter template['language']['code'] is required.", 100)
            if "components" in part and not isinstance(part["components"], list):
                raise graph_error(400, "(#100) Param template['components'] must be an array.", 100)
            found = [t for t in self.templates if t["name"] == name and t["language"] == language["code"]]
            if not found or found[0]["status"] != "APPROVED":
                raise graph_error(
                    404,
                    "(#132001) Template name does not exist in the translation",
                    132001,
                    details=f"template name ({name}) does not exist in {language['code']}",
                )
        elif kind == "reaction":
            if not isinstance(part.get("message_id"), str) or not isinstance(part.get("emoji"), str):
                raise graph_error(400, "(#100) The parameters reaction['message_id'] and ['emoji'] are required.", 100)
        elif kind == "location":
            for key in ("latitude", "longitude"):  # Graph reads numbers and numeric strings alike
                try:
                    float(part[key])
                except (KeyError, TypeError, ValueError):
                    raise graph_error(400, f"(#100) The parameter location['{key}'] is required.", 100) from None

    @staticmethod
    def form_fields(request: Request) -> dict[str, tuple[str, bytes]]:
        """A multipart/form-data body: each field's (content type, bytes)."""
        from email.parser import BytesParser
        from email.policy import HTTP

        content_type = request.headers.get("content-type", "")
        if not content_type.startswith("multipart/form-data"):
            raise invalid("Uploads are multipart/form-data")
        parsed = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + request.body)
        fields: dict[str, tuple[str, bytes]] = {}
        for part in parsed.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_content_type(), part.get_payload(decode=True))
        return fields

    def _upload(self, request: Request) -> Response:
        fields = self.form_fields(request)
        if fields.get("messaging_product", (None, b""))[1] != b"whatsapp":
            raise graph_error(400, "(#100) The parameter messaging_product is required.", 100)
        if "file" not in fields:
            raise graph_error(400, "(#100) The parameter file is required.", 100)
        mime, data = fields["file"]
        return Response(200, {"id": self.add_media(data, mime)})

    def _block_users(self, request: Request) -> Response:
        if request.method == "GET":
            return Response(200, {"data": [{"user": u} for u in self.blocked], "paging": {"cursors": {}}})
        body = self._body(request)
        users = [str(u.get("user") or "") for u in body.get("block_users") or [] if isinstance(u, dict)]
        if not users or not all(users):
            raise graph_error(400, "(#100) The parameter block_users is required.", 100)
        for user in users:
            if request.method == "POST" and user not in self.blocked:
                self.blocked.append(user)
            elif request.method == "DELETE" and user in self.blocked:
                self.blocked.remove(user)
        key = "added_users" if request.method == "POST" else "removed_users"
        return Response(
            200, {"messaging_product": "whatsapp", "block_users": {key: [{"input": u, "wa_id": u} for u in users]}}
        )

    def _phone_groups(self, request: Request) -> Response:
        if request.method == "POST":
            body = self._body(request)
            request_id = secrets.token_hex(16).upper()
            self.group_requests[request_id] = body
            return Response(200, {"messaging_product": "whatsapp", "request_id": request_id})
        rows = [{"id": gid, "subject": g["subject"], "created_at": "1750269342"} for gid, g in self.groups.items()]
        return Response(200, {"data": {"groups": rows}, "paging": {"cursors": {}}})

    def _group(self, request: Request, group_id: str, edge: str | None) -> Response:
        group, method = self.groups[group_id], request.method
        if edge is None and method == "POST" and request.headers.get("content-type", "").startswith("multipart/"):
            fields = self.form_fields(request)
            if fields.get("messaging_product", ("", b""))[1] != b"whatsapp":
                raise graph_error(400, "(#100) The parameter messaging_product is required.", 100)
            if "file" not in fields:
                raise graph_error(400, "(#100) The parameter file is required.", 100)
            group["photo"] = fields["file"]
            return Response(200, {"success": True})
        if edge is None and method == "POST":
            body = self._body(request)
            for key in ("subject", "description"):
                if key in body:
                    group[key] = body[key]
            return Response(200, {"success": True})
        if edge is None and method == "GET":
            return Response(
                200,
                {
                    "id": group_id,
                    "messaging_product": "whatsapp",
                    "subject": group["subject"],
                    "description": group["description"],
                    "participants": [{"wa_id": p} for p in group["participants"]],
                    "total_participant_count": len(group["participants"]),
                },
            )
        if edge is None and method == "DELETE":
            del self.groups[group_id]
            return Response(200, {"success": True})
        if edge == "participants" and method == "DELETE":
            users = [str(p.get("user") or "") for p in self._body(request).get("participants") or []]
            group["participants"] = [p for p in group["participants"] if p not in users]
            return Response(200, {"messaging_product": "whatsapp"})
        if edge == "invite_link" and method in ("POST", "DELETE"):
            self._body(request)
            group["invite"] = secrets.token_urlsafe(16)
            if method == "DELETE":
                return Response(200, {"messaging_product": "whatsapp", "success": "true"})
            return Response(
                200, {"messaging_product": "whatsapp", "invite_link": f"https://chat.whatsapp.com/{group['invite']}"}
            )
        raise graph_error(400, f"Unsupported {method.lower()} request.", 100, type_="GraphMethodException")

    def _calls(self, body: dict[str, Any]) -> Response:
        call_id, action = body.get("call_id"), body.get("action")
        if not isinstance(call_id, str) or action not in ("pre_accept", "accept", "reject", "terminate"):
            raise graph_error(400, "(#100) The parameters call_id and action are required.", 100)
        if call_id not in self.calls:
            raise graph_error(400, "(#138006) Call not found", 138006)
        self.calls[call_id] = str(action)
        return Response(200, {"messaging_product": "whatsapp", "success": True})

    def _mark_read(self, body: dict[str, Any]) -> Response:
        if body.get("status") != "read":
            raise invalid("Param status must be read")
        message_id = body.get("message_id")
        if not isinstance(message_id, str) or not message_id:
            raise graph_error(400, "(#100) The parameter message_id is required.", 100)
        extra = set(body) - {"messaging_product", "status", "message_id", "typing_indicator"}
        if extra:
            raise graph_error(400, f"(#100) Param {sorted(extra)[0]} is not a valid parameter", 100)
        if message_id not in self.messages:
            raise invalid("Invalid message_id: the message does not exist or is not from this phone number")
        if body.get("typing_indicator") is not None:
            if body["typing_indicator"] != {"type": "text"}:
                raise invalid("typing_indicator.type must be text")
            self.typing.append(message_id)
        self.reads.append(message_id)
        return Response(200, {"success": True})

    # Business profile -------------------------------------------------------------------------------------------------
    def _profile(self, request: Request) -> Response:
        if request.method == "GET":
            wanted = [f for f in request.query.get("fields", "").split(",") if f] or sorted(PROFILE_FIELDS)
            for name in wanted:
                if name not in PROFILE_FIELDS:
                    raise graph_error(
                        400,
                        f"(#100) Tried accessing nonexisting field ({name}) on node type (WhatsAppBusinessProfile)",
                        100,
                    )
            row = {k: self.profile[k] for k in wanted if k in self.profile}
            return Response(200, {"data": [{**row, "messaging_product": "whatsapp"}]})
        body = self._body(request)
        if body.get("messaging_product") != "whatsapp":
            raise graph_error(400, "(#100) The parameter messaging_product is required.", 100)
        for key, value in body.items():
            if key == "messaging_product":
                continue
            if key not in PROFILE_WRITABLE:
                raise graph_error(400, f"(#100) Param {key} is not a valid parameter", 100)
            if key == "about" and (not isinstance(value, str) or not 1 <= len(value) <= 139):
                raise graph_error(400, "(#100) Param about must be between 1 and 139 characters long", 100)
            if key == "websites" and (not isinstance(value, list) or len(value) > 2):
                raise graph_error(400, "(#100) Param websites must be an array with at most 2 elements", 100)
            if key == "vertical" and value not in VERTICALS:
                raise invalid(f"Param vertical must be one of {{{', '.join(sorted(VERTICALS))}}}")
            if key == "email" and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", str(value)):
                raise invalid("Param email is not a valid email address")
        self.profile.update({k: v for k, v in body.items() if k in PROFILE_FIELDS})
        return Response(200, {"success": True})

    # Templates --------------------------------------------------------------------------------------------------------
    def _templates(self, request: Request) -> Response:
        if request.method == "GET":
            rows = [
                t
                for t in self.templates
                if all(request.query.get(k) in (None, t[k]) for k in ("name", "status", "category", "language"))
            ]
            limit = int(request.query.get("limit", "25"))
            start = int(base64.b64decode(request.query["after"]).decode()) if request.query.get("after") else 0
            page = rows[start : start + limit]
            paging: dict[str, Any] = {
                "cursors": {
                    "before": base64.b64encode(str(start).encode()).decode(),
                    "after": base64.b64encode(str(start + len(page)).encode()).decode(),
                }
            }
            if start + limit < len(rows):
                paging["next"] = f"{self.url}/{self.waba_id}/message_templates?limit={limit}&after=..."
            return Response(200, {"data": page, "paging": paging})
        if request.method == "DELETE":
            name = request.query.get("name")
            if not name:
                raise graph_error(400, "(#100) The parameter name is required.", 100)
            before = len(self.templates)
            self.templates = [t for t in self.templates if t["name"] != name]
            if len(self.templates) == before:
                raise graph_error(
                    400, "(#100) Invalid parameter", 100, subcode=2593002, details=f"Template {name} was not found"
                )
            return Response(200, {"success": True})
        body = self._body(request)
        for key in ("name", "language", "category", "components"):
            if key not in body:
                raise graph_error(400, f"(#100) The parameter {key} is required.", 100)
        if not re.fullmatch(r"[a-z0-9_]{1,512}", str(body["name"])):
            raise invalid("Param name must contain only lowercase letters, numbers and underscores")
        if body["category"] not in CATEGORIES:
            raise invalid("Param category must be one of {AUTHENTICATION, MARKETING, UTILITY}")
        components = body["components"]
        if not isinstance(components, list) or not any(
            isinstance(c, dict) and c.get("type") == "BODY" for c in components
        ):
            raise invalid("Param components must contain a BODY component")
        if any(t["name"] == body["name"] and t["language"] == body["language"] for t in self.templates):
            raise graph_error(
                400,
                "(#100) Invalid parameter",
                100,
                subcode=2388024,
                details="Content in this language already exists",
            )
        template = {
            "name": body["name"],
            "language": body["language"],
            "status": "PENDING",
            "category": body["category"],
            "id": str(1_100_000_000_000_001 + len(self.templates)),
            "components": components,
        }
        self.templates.append(template)
        return Response(200, {"id": template["id"], "status": "PENDING", "category": template["category"]})
