"""Identity normalisation (CONVENTIONS "Identifiers and data").

`phone`, `whatsapp` and `wa_id` share one number space: digits with country code, no plus sign. E-mails are trimmed
and lower-cased, Instagram handles lower-cased without `@`, external ids are unique per `(source, value)`, WhatsApp
business-scoped user ids (`whatsapp_user_id`, e.g. `US.13491208655302741918`) are kept exactly as Meta sends them. Each
normalised identity has one sentinel key, the database's guarantee that it belongs to at most one contact.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from switchboard.billing.catalogue import COUNTRIES
from switchboard.errors import ValidationFailed
from switchboard.store import keys

if TYPE_CHECKING:
    from switchboard.store import Store

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
_NATIONAL = re.compile(r"\d{3,17}")
_DIGITS = re.compile(r"\+?\d+")


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


# Every refusal of a number ends with the form that always works.
PHONE_HINT = "write it in international form, e.g. +14155552671"
# ISO 3166-1 alpha-2 codes with no numbering plan of their own in libphonenumber (uninhabited, or served by another
# country's plan): not a region a number can be read in.
_NO_NUMBERING_PLAN = frozenset({"AQ", "BV", "GS", "HM", "PN", "TF", "UM"})
# What an organization's `default_phone_region` may be: the ISO 3166-1 alpha-2 codes libphonenumber has a plan for
# (tests/unit/test_contact_identifiers.py checks the list against libphonenumber's).
PHONE_REGIONS: tuple[str, ...] = tuple(sorted(COUNTRIES - _NO_NUMBERING_PLAN))


class Numbers:
    """How the numbers of one request are read (CONVENTIONS "Identifiers and data"):

    - `+…` or `00…`: international; bare digits (nothing else, no leading `0`): the spec's digits with country code;
      anything else (separators without `+`/`00`, a leading trunk `0`) is a national form, read in the
      organization's `default_phone_region` and refused without one;
    - the number must be valid for its country (libphonenumber's `is_valid_number`), not only of a possible length.

    `region` is looked up on first need only (a number in national form), at most once. `trusted`: numbers a
    provider reported (an inbound sender, a channel's number from Meta) are the provider's word: read as digits
    with country code and only checked to be possible, so a customer is never lost to libphonenumber's metadata
    lagging a new range. `possible_only`: the forms are read as above but the number need only be possible: a
    channel's own number, which its provider assigns and vouches for (Meta's test numbers are `+1 555 …`, a range
    libphonenumber calls invalid)."""

    __slots__ = ("_lookup", "_region", "possible_only", "trusted")

    def __init__(
        self,
        region: str | None = None,
        *,
        lookup: Callable[[], str | None] | None = None,
        trusted: bool = False,
        possible_only: bool = False,
    ) -> None:
        self._region, self._lookup = region, lookup
        self.trusted, self.possible_only = trusted, possible_only or trusted

    def region(self) -> str | None:
        if self._lookup is not None:
            self._region, self._lookup = self._lookup(), None
        return self._region


STRICT = Numbers()  # no default region: a national form is refused
TRUSTED = Numbers(trusted=True)


def numbers_for(store: Store, org_id: str, *, possible_only: bool = False) -> Numbers:
    """The rules for numbers an organization's caller gives, national forms read in its `default_phone_region` (the
    organization item, read only when a number in national form needs it). `possible_only`: see `Numbers`."""

    def lookup() -> str | None:
        item = store.get(keys.organization(org_id)) or {}
        region = item.get("default_phone_region")
        return str(region) if region else None

    return Numbers(lookup=lookup, possible_only=possible_only)


def normalize_phone(raw: str, field: str = "phone", numbers: Numbers | None = None) -> str:
    """Any common form of a number → digits with country code (`+1 415-555-2671`, `0014155552671`,
    `14155552671`, `14155552671@s.whatsapp.net`; `(415) 555-2671` in an organization whose default region is US),
    or 400 naming `field` (`Numbers` says how each form is read). libphonenumber's answers are kept per input."""
    rules = numbers or STRICT
    text = _WA_SUFFIX.sub("", str(raw).strip())
    text = text.split(":", 1)[0] if "@" not in text else text  # whatsapp device suffix `1415…:12`
    compact = _SEPARATORS.sub("", text)
    if not _DIGITS.fullmatch(compact):
        raise _invalid(field, f"is not a phone number: {PHONE_HINT}")
    if compact.startswith("00"):
        compact = "+" + compact[2:]
    bare = compact == text and compact.isdigit() and not compact.startswith("0")
    if compact.startswith("+") or bare or rules.trusted:
        compact = compact if compact.startswith("+") else "+" + compact
        if not _INTERNATIONAL.fullmatch(compact):
            raise _invalid(field, f"is not a phone number: {PHONE_HINT}")
        verdict = _libphonenumber(compact, None, rules.possible_only)
    else:
        region = rules.region()
        if region is None:
            raise _invalid(
                field,
                f"has no country code: {PHONE_HINT}, or set the organization's default_phone_region "
                "(PATCH /v1/organization) to read national numbers in its country",
            )
        if not _NATIONAL.fullmatch(compact):
            raise _invalid(field, f"is not a phone number: {PHONE_HINT}")
        verdict = _libphonenumber(compact, region, rules.possible_only)
    if verdict == _UNPARSABLE:
        raise _invalid(field, f"is not a phone number: {PHONE_HINT}")
    if verdict == _IMPOSSIBLE:
        raise _invalid(field, f"is not a possible phone number for its country code: {PHONE_HINT}")
    if verdict == _INVALID:
        raise _invalid(field, f"is not a valid phone number for its country (libphonenumber): {PHONE_HINT}")
    return verdict


_UNPARSABLE, _IMPOSSIBLE, _INVALID = "unparsable", "impossible", "invalid"


@lru_cache(maxsize=4096)
def _libphonenumber(text: str, region: str | None, possible_only: bool) -> str:
    """`+<digits>` (or a national number in `region`) → country code and national number, or why not. libphonenumber's
    parse is the costliest step of a send or a resolution and a pure function of its input; a number is seen more
    than once (a send normalises `to`, then the contact upsert normalises the same number again; replies go to the
    same numbers), so the answers are kept (bounded: 4096 answers, well under 1 MB)."""
    import phonenumbers  # on first use: keeps phonenumbers off the cold start

    try:
        number = phonenumbers.parse(text, region)
    except phonenumbers.NumberParseException:
        return _UNPARSABLE
    if not phonenumbers.is_possible_number(number):
        return _IMPOSSIBLE
    if not possible_only and not phonenumbers.is_valid_number(number):
        return _INVALID
    return f"{number.country_code}{number.national_number}"


def stored_number_problem(digits: str) -> str | None:
    """Why a stored number (digits with country code) would be refused today, or None: what the phone check job
    (switchboard.contacts.phone_check) reports."""
    verdict = _libphonenumber("+" + digits, None, False) if digits.isdigit() else _UNPARSABLE
    return {
        _UNPARSABLE: "not a phone number",
        _IMPOSSIBLE: "not a possible phone number for its country code",
        _INVALID: "not a valid phone number for its country",
    }.get(verdict)


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


def normalize(
    type_: str, value: str, source: str | None = None, field: str = "identifier", numbers: Numbers | None = None
) -> Identifier:
    """One identifier → its normalised form, or 400 naming `field`; numbers are read by `numbers` (`Numbers`)."""
    if type_ in NUMBER_TYPES:
        text = str(value or "").strip()
        if not text:
            raise _invalid(f"{field}.value", "must not be empty")
        return Identifier(type_, normalize_phone(text, f"{field}.value", numbers))
    return _normalize_other(type_, value, source, field)


@lru_cache(maxsize=2048)
def _normalize_other(type_: str, value: str, source: str | None, field: str) -> Identifier:
    """An identifier that is not a number → its normalised form. A pure function of its arguments whose answers
    (frozen, shared safely) are kept: a send, a resolution or an upsert normalises the addresses it saw before
    (mostly regular expressions); refusals are raised each time, never kept."""
    if type_ not in IDENTITY_TYPES:
        raise _invalid(f"{field}.type", f"must be one of {', '.join(IDENTITY_TYPES)}")
    value = str(value or "").strip()
    if not value:
        raise _invalid(f"{field}.value", "must not be empty")
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
