"""Identity normalisation (CONVENTIONS "Identifiers and data").

`phone`, `whatsapp` and `wa_id` share one number space: digits with country code, no plus sign. E-mails are trimmed
and lower-cased, Instagram handles lower-cased without `@`, external ids are unique per `(source, value)`, WhatsApp
business-scoped user ids (`whatsapp_user_id`, e.g. `US.13491208655302741918`) are kept exactly as Meta sends them. Each
normalised identity has one sentinel key, the database's guarantee that it belongs to at most one contact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from switchboard.errors import ValidationFailed

IdentityType = Literal["phone", "whatsapp", "wa_id", "email", "external_id", "instagram", "whatsapp_user_id"]
IDENTITY_TYPES: tuple[str, ...] = (
    "phone",
    "whatsapp",
    "wa_id",
    "email",
    "external_id",
    "instagram",
    "whatsapp_user_id",
)
NUMBER_TYPES = ("phone", "whatsapp", "wa_id")
_WA_SUFFIX = re.compile(r"@(s\.whatsapp\.net|c\.us)$", re.IGNORECASE)
_INSTAGRAM = re.compile(r"^[a-z0-9._]{1,30}$")
# Meta's business-scoped user id (BSUID): a two-letter country code, a period, up to 128 letters and digits; a parent
# BSUID (shared by the portfolios of one managed business) has `ENT.` after the country code.
_WHATSAPP_USER_ID = re.compile(r"^[A-Z]{2}\.(?:ENT\.)?[A-Za-z0-9]{1,128}$")
_SOURCE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_SEPARATORS = re.compile(r"[\s().\-/]")
_INTERNATIONAL = re.compile(r"\+\d{4,17}")


@dataclass(frozen=True)
class Identifier:
    type: str
    value: str  # normalised
    source: str | None = None

    @property
    def space(self) -> str:
        """The uniqueness space: every number type is one space."""
        return _space(self.type)

    @property
    def sentinel_sk(self) -> str:
        return sentinel_sk(self.type, self.value, self.source)


def sentinel_sk(type_: str, value: str, source: str | None = None) -> str:
    """The sort key of the sentinel of a normalised identity (of a stored identity record, without building an
    `Identifier`): number types share the `phone` space, external ids are unique per source."""
    if type_ == "external_id":
        return f"IDENT#external_id#{source}#{value}"
    return f"IDENT#{_space(type_)}#{value}"


def _space(type_: str) -> str:
    return "phone" if type_ in NUMBER_TYPES else type_


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"{field}: {message}", details=[{"field": field, "message": message}])


@lru_cache(maxsize=2048)
def normalize_phone(raw: str, field: str = "phone") -> str:
    """Any common international form → digits with country code (`+1 555-0100`, `0015550100`, `15550100…`). Kept
    per input like `normalize` (a send's `to` is a number seen before, mostly); refusals are raised each time."""
    text = _WA_SUFFIX.sub("", str(raw).strip())
    text = text.split(":", 1)[0] if "@" not in text else text  # whatsapp device suffix `1555…:12`
    compact = _SEPARATORS.sub("", text)
    if compact.startswith("00"):
        compact = "+" + compact[2:]
    elif not compact.startswith("+"):
        compact = "+" + compact
    if not _INTERNATIONAL.fullmatch(compact):
        raise _invalid(field, "is not a phone number in international form (country code and number)")
    digits = _libphonenumber(compact)
    if digits == _UNPARSABLE:
        raise _invalid(field, "is not a phone number in international form (country code and number)")
    if digits == _IMPOSSIBLE:
        raise _invalid(field, "is not a possible phone number for its country code")
    return digits


_UNPARSABLE, _IMPOSSIBLE = "unparsable", "impossible"


@lru_cache(maxsize=2048)
def _libphonenumber(compact: str) -> str:
    """`+<digits>` → country code and national number, or why not. libphonenumber's parse is the costliest step of
    a send or a resolution and a pure function of its input; a number is seen more than once (a send
    normalises `to`, then the contact upsert normalises the same number again; replies go to the same numbers), so
    the answers are kept (bounded: 2048 numbers, well under 1 MB)."""
    import phonenumbers  # on first use: keeps phonenumbers off the cold start

    try:
        number = phonenumbers.parse(compact, None)
    except phonenumbers.NumberParseException:
        return _UNPARSABLE
    if not phonenumbers.is_possible_number(number):
        return _IMPOSSIBLE
    return f"{number.country_code}{number.national_number}"


_SIMPLE_EMAIL = re.compile(
    r"^(?=.{3,254}$)[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$"
)
_SPECIAL_USE_TLDS = frozenset({"arpa", "invalid", "local", "localhost", "onion", "test"})


def normalize_email(raw: str, field: str = "email") -> str:
    """Trimmed and lower-cased. Plain ASCII addresses take a strict fast path; anything else (internationalised,
    quoted, special-use domains) goes through email_validator."""
    text = str(raw).strip().lower()
    if (
        _SIMPLE_EMAIL.match(text)
        and len(text.split("@", 1)[0]) <= 64
        and text.rsplit(".", 1)[1] not in _SPECIAL_USE_TLDS
        and "--" not in text.split("@", 1)[1]  # IDNA reserves `--` in 3rd-4th place: email_validator judges
    ):
        return text
    # on first use: keeps email_validator off the cold start
    from email_validator import EmailNotValidError, validate_email

    try:
        return str(validate_email(str(raw).strip(), check_deliverability=False).normalized).lower()
    except EmailNotValidError as err:
        raise _invalid(field, f"is not a valid e-mail address ({err})") from None


@lru_cache(maxsize=2048)
def normalize(type_: str, value: str, source: str | None = None, field: str = "identifier") -> Identifier:
    """One identifier → its normalised form, or 400 naming `field`. A pure function of its arguments whose answers
    (frozen, shared safely) are kept: a send, a resolution or an upsert normalises the numbers and addresses it saw
    before (mostly regular expressions); refusals are raised each time, never kept."""
    if type_ not in IDENTITY_TYPES:
        raise _invalid(f"{field}.type", f"must be one of {', '.join(IDENTITY_TYPES)}")
    value = str(value or "").strip()
    if not value:
        raise _invalid(f"{field}.value", "must not be empty")
    if type_ in NUMBER_TYPES:
        return Identifier(type_, normalize_phone(value, f"{field}.value"))
    if type_ == "email":
        return Identifier(type_, normalize_email(value, f"{field}.value"))
    if type_ == "instagram":
        handle = value.lstrip("@").lower()
        if not _INSTAGRAM.fullmatch(handle):
            raise _invalid(f"{field}.value", "is not an Instagram handle")
        return Identifier(type_, handle)
    if type_ == "whatsapp_user_id":
        if not _WHATSAPP_USER_ID.fullmatch(value):
            raise _invalid(f"{field}.value", "is not a WhatsApp business-scoped user id (e.g. US.13491208655302741918)")
        return Identifier(type_, value)
    # external_id
    if not source:
        raise _invalid(f"{field}.source", "is required for external_id identifiers")
    if not _SOURCE.fullmatch(source):
        raise _invalid(f"{field}.source", "must be 1-64 letters, digits or _ . : -")
    if len(value) > 256:
        raise _invalid(f"{field}.value", "must be at most 256 characters")
    return Identifier(type_, value, source)
