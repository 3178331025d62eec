"""Base classes of every request and resource model (a module of its own: importing it costs almost nothing)."""

from __future__ import annotations

import types
import typing
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, ConfigDict, Field, PlainSerializer
from pydantic import BaseModel as _PydanticModel
from pydantic import Strict as StrictMode

from switchboard import clock

# Fields that mean the same in every model, described once: a field's own `description` wins.
COMMON_FIELDS = {
    "id": "Unique id of this resource",
    "organization_id": "The organization it belongs to (`org_…`)",
    "created_at": "When it was created (ISO 8601, UTC)",
    "updated_at": "When it last changed (ISO 8601, UTC)",
    "expires_at": "When it expires (ISO 8601, UTC)",
    "version": "Increases by one with every change",
    "channel_id": "The channel's id (`ch_…`)",
    "contact_id": "The contact's id (`ct_…`)",
    "conversation_id": "The conversation's id (`cv_…`)",
    "user_id": "The user's id (`usr_…`)",
    "team_id": "The team's id",
    "message_id": "The message's id",
    "endpoint_id": "The webhook endpoint's id",
    "delivery_id": "The webhook delivery's id: the `webhook-id` of its attempts",
    "event_id": "The event's id",
    "event_type": "The event's name (`message.sent`, …)",
    "progress_id": "The onboarding flow's id (`wbp_…`)",
    "user_email": "The user's e-mail address",
    "user_name": "The user's name",
    "email": "E-mail address",
    "name": "Display name",
    "enabled": "Whether it is active",
}


def _document_examples(schema: dict[str, Any], model: type[Any]) -> None:
    """`json_schema_extra` of every model: the model's own `openapi_examples` (a ClassVar, not inherited: a subclass
    with more required fields documents its own) become the schema's `examples`; fields of COMMON_FIELDS without a
    description of their own get that one."""
    examples = model.__dict__.get("openapi_examples")
    if examples:
        schema["examples"] = list(examples)
    for name, prop in schema.get("properties", {}).items():
        if name in COMMON_FIELDS and "description" not in prop:
            prop["description"] = COMMON_FIELDS[name]


class BaseModel(_PydanticModel):
    """Schemas are built on first use, not at import: a cold start pays only for the models its route needs.
    `openapi_examples`: whole-object examples for the document (each must validate against the model's schema)."""

    model_config = ConfigDict(defer_build=True, json_schema_extra=_document_examples)
    openapi_examples: ClassVar[tuple[dict[str, Any], ...]] = ()


def _members(annotation: Any) -> set[Any]:
    args = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    return {a for a in args if a is not type(None)} or {annotation}


def _numeric_only(annotation: Any) -> bool:
    """A number field that takes no boolean: `int`, `float`, `int | None`… (not `bool`, not `int | bool`)."""
    members = _members(annotation)
    return bool(members) and members <= {int, float}


def _boolean_only(annotation: Any) -> bool:
    """A boolean field: `bool` or `bool | None` (it takes only JSON `true` / `false`, or null where optional)."""
    return _members(annotation) == {bool}


# `exactly_one_of` of a request model: groups of field names of which exactly one must be given.
Choices = tuple[tuple[str, ...], ...]


def _given(schema: dict[str, Any], model: type[Any], name: str) -> dict[str, Any]:
    """What a given `name` is: `true` for a boolean; else its non-null type when that is one plain JSON type (so
    typed clients read `to: string`, not `unknown`), or just "not null"."""
    if model.model_fields[name].annotation is bool:
        return {"const": True}
    prop = schema.get("properties", {}).get(name, {})
    kinds = [a.get("type") for a in prop.get("anyOf", []) if a.get("type") != "null"]
    return {"type": kinds[0]} if len(kinds) == 1 and isinstance(kinds[0], str) else {"not": {"type": "null"}}


def _stripped_min_length(node: dict[str, Any]) -> None:
    """Request strings are trimmed before their length is checked (`Strict`), so `minLength: n` alone would promise
    that n spaces pass: a `pattern` says the trimmed text has at least n characters (joined by look-ahead to a
    pattern the field already has)."""
    for branch in node.get("anyOf", ()):
        _stripped_min_length(branch)
    if isinstance(node.get("items"), dict):
        _stripped_min_length(node["items"])
    size = node.get("minLength", 0)
    if node.get("type") != "string" or size < 1:
        return
    text = r"\S" if size == 1 else rf"\S[\s\S]{{{size - 2},}}\S"
    node["pattern"] = f"(?=[\\s\\S]*{text}){node['pattern']}" if "pattern" in node else text


def _document_choices(schema: dict[str, Any], model: type[Any]) -> None:
    """`json_schema_extra` of request models: each `exactly_one_of` group (declared on the model or a base of it, and
    checked by its own validator) is documented as a `oneOf`, so the document states the rule the validator applies.
    A field counts as given when present and not null (a boolean: when `true`), as the validators count it. Also the
    model's examples, and each trimmed string's `minLength` as a pattern (`_stripped_min_length`)."""
    _document_examples(schema, model)
    for prop in schema.get("properties", {}).values():
        _stripped_min_length(prop)
    groups: list[tuple[str, ...]] = []
    for klass in reversed(model.__mro__):
        for group in klass.__dict__.get("exactly_one_of", ()):
            if group not in groups:
                groups.append(group)
    rules = []
    for group in groups:
        branches = []
        for name in group:
            branches.append({"required": [name], "properties": {name: _given(schema, model, name)}})
        rules.append({"oneOf": branches})
    if rules:
        schema["allOf"] = [*schema.get("allOf", []), *rules]


class Strict(BaseModel):
    """Request bodies: unknown fields are refused, strings trimmed, a JSON `true`/`false` is not a number and a
    number or a string is not a boolean (pydantic's lax mode would read `true` as 1, and `0`, `"yes"` or `"off"` as
    booleans; the document says `boolean`). A model whose validator wants exactly one of some fields declares them in
    `exactly_one_of` (a ClassVar) so the document says so too."""

    model_config = ConfigDict(
        extra="forbid", str_strip_whitespace=True, defer_build=True, json_schema_extra=_document_choices
    )
    exactly_one_of: ClassVar[Choices] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Every number-only and boolean-only field is validated in pydantic's strict mode (`pydantic.Strict()`):
        a number field takes no boolean and no numeric string, a boolean field only `true` or `false`."""
        super().__pydantic_init_subclass__(**kwargs)
        for field in cls.model_fields.values():
            annotation = field.annotation
            if annotation is None or not (_numeric_only(annotation) or _boolean_only(annotation)):
                continue
            if not any(isinstance(rule, StrictMode) for rule in field.metadata):
                field.metadata.append(StrictMode())


# Names (contacts, channels, organizations, teams, members, labels, tags, segments, templates, …) are shown to other
# people and in lists: no C0 control characters (tab and newline included: a name is one line), no DEL or C1
# controls, and no bidirectional embedding, override or isolate characters (U+202A-U+202E, U+2066-U+2069), which
# can make a name display as something else. A pattern, so the document states the rule (clients, the fuzzer).
NAME_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]*$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]


# A file name someone else will save or show (an upload's `file_name`): a name's rules, no path separator (`/`, `\`)
# and not `.` or `..`, so it never names another place when a client writes it to disk. One pattern (no lookahead,
# so the document states all of it): the first one to three characters say "not only dots".
_FILE_CHAR = r"[^/\\\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
_FILE_START = _FILE_CHAR.replace("[^", "[^.", 1)
FILE_NAME_PATTERN = rf"^(?:{_FILE_START}|\.{_FILE_START}|\.\.{_FILE_CHAR}){_FILE_CHAR}*$"
FileName = Annotated[str, Field(min_length=1, max_length=255, pattern=FILE_NAME_PATTERN)]


def _amount_number(value: Decimal) -> int | float:
    """Amounts are JSON numbers: integral amounts as integers, others with their exact decimal digits."""
    return int(value) if value == value.to_integral_value() else float(value)


# Money in a resource (invoices, orders): exact `Decimal` in the code and in the table (stored as a decimal string),
# a JSON number in answers.
Money = Annotated[Decimal, PlainSerializer(_amount_number, return_type=float, when_used="always")]


# Every `*_at` field of a resource: the API writes ISO 8601 UTC with milliseconds and `Z` (`switchboard.clock.iso`),
# which is RFC 3339, so the document says `format: date-time` and typed clients can read a datetime.
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


def _date_time(value: str) -> str:
    return clock.iso(clock.parse_date_time(value))


# Every date-time a request brings (body field or query parameter): RFC 3339 with its offset (`format: date-time`),
# read as a real calendar time (`2027-13-45T00:00:00Z` is a 400 naming the field), and handed on in the API's own
# form (UTC, milliseconds, `Z`), so what is stored and compared is always `clock.iso` text.
DateTimeIn = Annotated[str, Field(json_schema_extra={"format": "date-time"}), AfterValidator(_date_time)]


# A provider's media id (WhatsApp's digits, a linked-device engine's message-derived id): it becomes part of a
# provider URL and of the S3 key of the kept copy, so it is bounded and has no `/`, `?`, `#`, `%` or spaces.
MEDIA_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._@:=+-]*$"
MEDIA_ID_MAX = 256


def _valid_email(value: str) -> str:
    from email_validator import EmailNotValidError, validate_email  # imported on first use (~25 ms)

    try:
        return str(validate_email(value, check_deliverability=False).normalized)
    except EmailNotValidError as err:
        raise ValueError(f"not a valid e-mail address: {err}") from None


# Documented as `format: email` (what email_validator checks, without a DNS look-up), so clients and fuzzers know the
# field is an address and not any string.
EmailStr = Annotated[str, Field(max_length=320, json_schema_extra={"format": "email"}), AfterValidator(_valid_email)]


DOCUMENT_MAX_DEPTH = 16
# DynamoDB numbers: magnitude 1E-130 to 9.9999999999999999999999999999999999999E+125, 38 significant digits.
NUMBER_MAX_DIGITS = 38
NUMBER_MAX_EXPONENT = 125  # adjusted exponent (the power of ten of the first digit)
NUMBER_MIN_EXPONENT = -130


def unstorable_number(value: int | float | str) -> str | None:
    """Why DynamoDB cannot store this number (a JSON number's text, or a parsed one), or None when it can: more than
    38 significant digits, a magnitude of 1e126 or more, or a non-zero magnitude below 1e-130. The one rule for every
    number a request brings (`switchboard.jsonbody` applies it while parsing each body)."""
    try:
        number = Decimal(str(value) if not isinstance(value, str) else value)
    except InvalidOperation:
        return "not a number"
    if not number.is_finite():
        return "numbers must be finite"
    if not number:
        return None
    digits = "".join(map(str, number.as_tuple().digits)).strip("0")  # exact: `normalize` rounds to 28 digits
    if len(digits) > NUMBER_MAX_DIGITS:
        return f"numbers may have at most {NUMBER_MAX_DIGITS} significant digits"
    if not NUMBER_MIN_EXPONENT <= number.adjusted() <= NUMBER_MAX_EXPONENT:
        return "numbers must be between 1e-130 and 9.99e125 in magnitude"
    return None


def check_storable(value: object, depth: int = 0) -> None:
    """A free-form JSON document (settings, profile, metadata) that DynamoDB can store and give back unchanged:
    no empty map key (the emulator mangles it into an unreadable item), no nesting past `DOCUMENT_MAX_DEPTH` (the item
    nests it further; DynamoDB stops at 32), no number outside DynamoDB's range. Raises ValueError, which pydantic
    turns into a 400 `validation_failed` naming the field."""
    if depth > DOCUMENT_MAX_DEPTH:
        raise ValueError(f"documents nest at most {DOCUMENT_MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not key:
                raise ValueError("keys must not be empty")
            check_storable(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            check_storable(item, depth + 1)
    elif isinstance(value, int | float) and not isinstance(value, bool) and (problem := unstorable_number(value)):
        raise ValueError(problem)


def _storable[T](value: T) -> T:
    check_storable(value)
    return value


# `Annotated[dict[str, Any], Storable]`: a free-form field checked by `check_storable`.
Storable = AfterValidator(_storable)
