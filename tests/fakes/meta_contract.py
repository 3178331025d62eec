"""Meta's own OpenAPI description of the WhatsApp Business Platform as the contract of the fake Graph API.

`tests/data/meta/` holds the vendored document (source, licence and the repairs below in its README). Every request
the fake Graph server receives is validated with openapi-core against the repaired reading; a request that does not
validate is answered like Graph answers an invalid parameter and recorded, and the fake fails the test that used it.

Repairs (each one a defect of the document, not a relaxation of our adapter):
1. `allOf` members with `additionalProperties: false` forbid the properties of the other members (19 of the
   document's own 50 send examples fail): each such member's `additionalProperties: false` is read as
   `unevaluatedProperties: false` on the combined schema.
2. Read receipts and the typing indicator are sent to `POST /{Phone-Number-ID}/messages` but the document's `Message`
   schema has no shape for them: they are checked against Meta's documented bodies (`READ_RECEIPT`,
   `TYPING_INDICATOR` below) as further alternatives of that request body.
3. The inbound `/whatsapp/webhooks` examples reuse outbound message schema names; they are replayed as bodies (see
   `webhook_examples`), not validated against those outbound schemas.
4. `User-Agent` is not held to the SDK's pattern (the header is optional and ours is not Meta's SDK).
5. Media-type parameters of `Content-Type` (`; charset=utf-8`, a multipart `boundary`) are ignored when the header
   parameter is checked against its enum.
6. The interactive `cta_url` type is missing from `InteractiveObject` and `ActionObject`: added with Meta's documented
   action `{"name": "cta_url", "parameters": {"display_text", "url"}}` (`CTA_URL_ACTION`).
7. A multipart body's `format: binary` string (OpenAPI 3.0's spelling of a file) is read as OpenAPI 3.1 reads a
   file, any bytes (3.1 has no `format: binary`; the validator would ask the file to be text).
8. The interactive `order_details` and `order_status` types (Payments API) are missing from `InteractiveObject` and
   `ActionObject`, though the document's own examples "Send Order Details Message" and "Send Order Status Message"
   send them: added with Meta's documented actions, `review_and_pay` (`ORDER_DETAILS_ACTION`) and `review_order`
   (`ORDER_STATUS_ACTION`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DOC_PATH = Path(__file__).resolve().parents[1] / "data" / "meta" / "meta-business-messaging-api_v23.0.yaml"
HOST = "https://graph.facebook.com"

# Meta's documented bodies ("Mark messages as read", "Typing indicators") for repair 2.
READ_RECEIPT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["messaging_product", "status", "message_id"],
    "properties": {
        "messaging_product": {"type": "string", "enum": ["whatsapp"]},
        "status": {"type": "string", "enum": ["read"]},
        "message_id": {"type": "string", "minLength": 1},
    },
}
TYPING_INDICATOR: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["messaging_product", "status", "message_id", "typing_indicator"],
    "properties": {
        **READ_RECEIPT["properties"],
        "typing_indicator": {
            "type": "object",
            "additionalProperties": False,
            "required": ["type"],
            "properties": {"type": {"type": "string", "enum": ["text"]}},
        },
    },
}
CTA_URL_ACTION: dict[str, Any] = {
    "required": ["name", "parameters"],
    "properties": {
        "name": {"type": "string", "enum": ["cta_url"]},
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "required": ["display_text", "url"],
            "properties": {"display_text": {"type": "string", "maxLength": 20}, "url": {"type": "string"}},
        },
    },
}

# Meta's Payments API reference ("Receive payments via payment gateways", "Send order status message") for repair 8:
# amounts are `{value, offset}` integers (value / offset is the amount).
_AMOUNT_PROPERTIES: dict[str, Any] = {"value": {"type": "integer"}, "offset": {"type": "integer"}}


def _amount(**extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["value", "offset"],
        "properties": {**_AMOUNT_PROPERTIES, **extra},
    }


ORDER_DETAILS_ACTION: dict[str, Any] = {
    "required": ["name", "parameters"],
    "properties": {
        "name": {"type": "string", "enum": ["review_and_pay"]},
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "required": ["reference_id", "type", "currency", "total_amount", "order"],
            "properties": {
                "reference_id": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,35}$"},
                "type": {"type": "string", "enum": ["digital-goods", "physical-goods"]},
                "payment_type": {"type": "string"},
                "payment_configuration": {"type": "string"},
                "payment_settings": {"type": "array", "items": {"type": "object"}},
                "currency": {"type": "string"},
                "total_amount": _amount(),
                "order": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["status", "items", "subtotal", "tax"],
                    "properties": {
                        "status": {"type": "string", "enum": ["pending"]},
                        "catalog_id": {"type": "string"},
                        "expiration": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["timestamp", "description"],
                            "properties": {"timestamp": {"type": "string"}, "description": {"type": "string"}},
                        },
                        "items": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["retailer_id", "name", "amount", "quantity"],
                                "properties": {
                                    "retailer_id": {"type": "string"},
                                    "name": {"type": "string", "maxLength": 60},
                                    "amount": _amount(),
                                    "sale_amount": _amount(),
                                    "quantity": {"type": "integer", "minimum": 1},
                                    "country_of_origin": {"type": "string"},
                                    "importer_name": {"type": "string"},
                                    "importer_address": {"type": "object"},
                                },
                            },
                        },
                        "subtotal": _amount(),
                        "tax": _amount(description={"type": "string"}),
                        "shipping": _amount(description={"type": "string"}),
                        "discount": _amount(description={"type": "string"}, discount_program_name={"type": "string"}),
                    },
                },
            },
        },
    },
}
ORDER_STATUS_ACTION: dict[str, Any] = {
    "required": ["name", "parameters"],
    "properties": {
        "name": {"type": "string", "enum": ["review_order"]},
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "required": ["reference_id", "order"],
            "properties": {
                "reference_id": {"type": "string"},
                "order": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["status"],
                    "properties": {
                        "status": {
                            "type": "string",
                            "enum": ["pending", "processing", "partially-shipped", "shipped", "completed", "canceled"],
                        },
                        "description": {"type": "string", "maxLength": 120},
                    },
                },
            },
        },
    },
}


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    """The vendored document as published."""
    with DOC_PATH.open() as f:
        return yaml.load(f, Loader=yaml.CSafeLoader)  # type: ignore[no-any-return]


def _unevaluated(node: Any) -> None:
    """Repair 1, everywhere in the document."""
    if isinstance(node, dict):
        members = node.get("allOf")
        if isinstance(members, list):
            for member in members:
                if isinstance(member, dict) and member.get("additionalProperties") is False:
                    del member["additionalProperties"]
                    node["unevaluatedProperties"] = False
        for value in node.values():
            _unevaluated(value)
    elif isinstance(node, list):
        for value in node:
            _unevaluated(value)


def _multipart_bodies(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for item in doc["paths"].values():
        for op in item.values():
            if isinstance(op, dict):
                content = (op.get("requestBody") or {}).get("content") or {}
                if "multipart/form-data" in content:
                    yield content["multipart/form-data"]


def _binary_is_bytes(schema: Any) -> None:
    """Repair 7."""
    if isinstance(schema, dict):
        for prop in (schema.get("properties") or {}).values():
            if isinstance(prop, dict) and prop.get("type") == "string" and prop.get("format") == "binary":
                prop.clear()


@lru_cache(maxsize=1)
def repaired() -> dict[str, Any]:
    doc = copy.deepcopy(document())
    _unevaluated(doc)
    schemas = doc["components"]["schemas"]
    schemas["ReadReceipt"] = READ_RECEIPT
    schemas["TypingIndicator"] = TYPING_INDICATOR
    send = doc["paths"]["/{Version}/{Phone-Number-ID}/messages"]["post"]["requestBody"]["content"]["application/json"]
    send["schema"] = {
        "oneOf": [
            {"$ref": "#/components/schemas/Message"},
            {"$ref": "#/components/schemas/ReadReceipt"},
            {"$ref": "#/components/schemas/TypingIndicator"},
        ]
    }
    doc["components"]["parameters"]["UserAgent"]["schema"].pop("pattern", None)
    for content in _multipart_bodies(doc):
        _binary_is_bytes(content.get("schema"))
    schemas["InteractiveObject"]["properties"]["type"]["enum"].append("cta_url")
    schemas["ActionObject"]["oneOf"].append(CTA_URL_ACTION)
    schemas["InteractiveObject"]["properties"]["type"]["enum"].extend(["order_details", "order_status"])
    schemas["ActionObject"]["oneOf"].extend([ORDER_DETAILS_ACTION, ORDER_STATUS_ACTION])
    return doc


@lru_cache(maxsize=1)
def openapi() -> Any:
    from openapi_core import Config, OpenAPI

    return OpenAPI.from_dict(repaired(), config=Config(spec_validator_cls=None))


def operation_id(method: str, template: str) -> str:
    op = repaired()["paths"][template][method.lower()]
    return str(op.get("operationId") or f"{method.upper()} {template}")


@dataclass
class _Request:
    """openapi-core's request protocol (with `path_pattern`, so ambiguous templates are not guessed)."""

    method: str
    path: str
    path_pattern: str
    body: bytes | None
    content_type: str
    path_params: dict[str, str]
    query: dict[str, str]
    headers: dict[str, str]
    host_url: str = HOST
    parameters: Any = field(init=False)

    def __post_init__(self) -> None:
        from openapi_core.datatypes import RequestParameters
        from werkzeug.datastructures import Headers, ImmutableMultiDict

        headers = dict(self.headers)
        for name in list(headers):
            if name.lower() == "content-type":  # repair 5
                headers[name] = headers[name].split(";", 1)[0].strip()
        self.parameters = RequestParameters(
            path=self.path_params,
            query=ImmutableMultiDict(self.query),
            header=Headers(headers),
            cookie=ImmutableMultiDict(),
        )


def _depth(error: Any) -> int:
    return max([len(error.absolute_path), *(_depth(e) for e in error.context or [])])


def _reasons(error: Any) -> list[str]:
    """An error's own reasons; inside `oneOf`/`anyOf`, those of the alternative the value came closest to (its
    errors reach deepest into the value)."""
    if not error.context:
        return [f"{error.message[:300]} at {'/'.join(map(str, error.absolute_path)) or 'body'}"]
    groups: dict[Any, list[Any]] = {}
    for sub in error.context:
        groups.setdefault(sub.schema_path[0] if sub.schema_path else None, []).append(sub)
    closest = max(groups.values(), key=lambda subs: max(_depth(s) for s in subs))
    return [reason for sub in closest for reason in _reasons(sub)]


def _messages(err: BaseException) -> list[str]:
    out: list[str] = []
    for schema_error in getattr(err, "schema_errors", None) or []:
        out.extend(_reasons(schema_error))
    cause = err.__cause__
    if cause is not None and cause is not err:
        out.extend(_messages(cause))
    return out or [f"{type(err).__name__}: {str(err)[:300]}"]


def check(
    method: str,
    template: str,
    path: str,
    path_params: dict[str, str],
    query: dict[str, str],
    headers: dict[str, str],
    body: bytes,
) -> list[str]:
    """Why the request does not validate against `template` of the repaired document ([] when it does)."""
    from openapi_core.exceptions import OpenAPIError

    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    request = _Request(
        method=method.lower(),
        path=path,
        path_pattern=template,
        body=body or None,
        content_type=content_type or "application/json",
        path_params=path_params,
        query=query,
        headers=headers,
    )
    try:
        openapi().validate_request(request)
    except OpenAPIError as err:
        return _messages(err)
    return []


def webhook_examples() -> dict[str, bytes]:
    """Every example body of `POST /whatsapp/webhooks`, as Meta would send it (repair 3: replayed, not validated
    against the outbound schemas it names)."""
    post = document()["paths"]["/whatsapp/webhooks"]["post"]
    examples = post["requestBody"]["content"]["application/json"]["examples"]
    return {name: json.dumps(example["value"]).encode() for name, example in examples.items()}
