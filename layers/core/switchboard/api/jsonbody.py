"""The resolver's `json_body_deserializer`: `switchboard.jsonbody.loads`, a refusal answered as a request
validation error."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from switchboard.jsonbody import BodyRefused, loads

__all__ = ["BodyRefused", "loads", "parse_body"]


def parse_body(text: str) -> Any:
    """The resolver's body reader: `loads`, a refusal raised as the request validation error (400
    `validation_failed` naming the field); malformed JSON stays a `JSONDecodeError` (400 `invalid_json`)."""
    try:
        return loads(text)
    except BodyRefused as err:
        loc = tuple(err.field.split("."))
        error = {"type": "value_error", "loc": loc, "msg": str(err), "input": {}}
        raise RequestValidationError([error]) from None
