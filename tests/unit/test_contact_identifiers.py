"""Identity normalisation: every accepted way of writing a phone gives the same digits (property-based)."""

from __future__ import annotations

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchboard.billing.catalogue import COUNTRIES
from switchboard.contacts.identifiers import (
    PHONE_REGIONS,
    STRICT,
    TRUSTED,
    Numbers,
    normalize,
    normalize_phone,
    stored_number_problem,
)
from switchboard.errors import ValidationFailed

REGIONS = sorted(r for r in phonenumbers.SUPPORTED_REGIONS if phonenumbers.example_number(r) is not None)


def written_forms(number: phonenumbers.PhoneNumber) -> list[str]:
    e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    international = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL)
    digits = e164[1:]
    return [
        e164,
        international,
        international.replace(" ", "-"),
        f"00{digits}",
        f"00 {international[1:]}",
        digits,
        f"{digits}@s.whatsapp.net",
        f"({international[:4]}) {international[4:]}",
    ]


@settings(max_examples=150, deadline=None)
@given(region=st.sampled_from(REGIONS), kind=st.sampled_from(["phone", "whatsapp", "wa_id"]))
def test_every_form_of_a_number_normalises_to_the_same_digits(region: str, kind: str):
    number = phonenumbers.example_number(region)
    expected = f"{number.country_code}{number.national_number}"
    for form in written_forms(number):
        if kind != "whatsapp" and form.endswith("@s.whatsapp.net"):
            continue
        assert normalize(kind, form).value == expected, form
        assert normalize(kind, form).sentinel_sk == f"IDENT#phone#{expected}"


@pytest.mark.parametrize("bad", ["", "abc", "+", "12", "+999 1234", "+1 555 01", "555-0100x"])
def test_impossible_numbers_are_refused_with_the_field(bad: str):
    with pytest.raises(ValidationFailed) as exc:
        normalize_phone(bad, "body.phone")
    assert exc.value.details[0]["field"] == "body.phone"


def _refusal(raw: str, numbers: Numbers = STRICT) -> str:
    with pytest.raises(ValidationFailed) as exc:
        normalize_phone(raw, "body.phone", numbers)
    (detail,) = exc.value.details
    assert detail["field"] == "body.phone" and "international form, e.g. +14155552671" in detail["message"]
    return str(detail["message"])


@pytest.mark.parametrize(
    "raw",
    [
        "+1 555 123 9999",  # possible (ten digits after +1) but no US area code 555: not valid
        "+15551234567",
        "0015550100999",
        "15551234567",  # bare digits are read with their country code: +1 555…
        "5551239999",  # the number as it was stored: +55 51239999, no Brazilian number
        "+44 7700 900123",  # Ofcom's drama range: reserved, never assigned
    ],
)
def test_a_possible_number_that_is_not_valid_for_its_country_is_refused(raw: str):
    assert "not a valid phone number" in _refusal(raw)
    assert stored_number_problem("".join(c for c in raw if c.isdigit()).removeprefix("00")) is not None


@pytest.mark.parametrize("raw", ["(555) 123-9999", "(415) 555-2671", "020 7946 0958", "07911 123456", "415-555-2671"])
def test_a_national_form_without_a_default_region_is_refused_with_the_hint(raw: str):
    message = _refusal(raw)
    assert message.startswith("has no country code") and "default_phone_region" in message


@pytest.mark.parametrize(
    ("raw", "region", "digits"),
    [
        ("(415) 555-2671", "US", "14155552671"),
        ("415-555-2671", "US", "14155552671"),
        ("1 415 555 2671", "US", "14155552671"),  # the national prefix 1 of the NANP
        ("020 7946 0958", "GB", "442079460958"),
        ("07911 123456", "GB", "447911123456"),
        ("030 123456", "DE", "4930123456"),
        ("+1 415 555 2671", "GB", "14155552671"),  # an international form ignores the region
        ("0014155552671", "DE", "14155552671"),
        ("14155552671", "GB", "14155552671"),  # so do bare digits
    ],
)
def test_a_national_form_is_read_in_the_default_region(raw: str, region: str, digits: str):
    assert normalize_phone(raw, "body.phone", Numbers(region)) == digits
    assert normalize("phone", raw, None, "body", Numbers(region)).sentinel_sk == f"IDENT#phone#{digits}"


def test_the_default_region_does_not_make_an_invalid_number_valid():
    assert "not a valid phone number" in _refusal("(555) 123-9999", Numbers("US"))


def test_the_region_is_looked_up_once_and_only_for_a_national_form():
    calls: list[int] = []

    def lookup() -> str:
        calls.append(1)
        return "US"

    numbers = Numbers(lookup=lookup)
    assert normalize_phone("+1 415 555 2671", "body.phone", numbers) == "14155552671"
    assert normalize_phone("14155552671@s.whatsapp.net", "body.phone", numbers) == "14155552671"
    assert calls == []
    assert normalize_phone("(415) 555-2671", "body.phone", numbers) == "14155552671"
    assert normalize_phone("(415) 555-0199", "body.phone", numbers) == "14155550199"
    assert calls == [1]


def test_provider_numbers_and_a_channels_own_number_need_only_be_possible():
    """A provider's sender (TRUSTED) and a channel's own number (possible_only: Meta's test numbers are `+1 555 …`)
    are not refused for libphonenumber's validity; an impossible one still is."""
    assert normalize_phone("15550100999", "from", TRUSTED) == "15550100999"
    assert normalize_phone("+1 555-010-0999", "body.phone_number", Numbers(possible_only=True)) == "15550100999"
    assert normalize("whatsapp", "15550100999@s.whatsapp.net", None, "body", TRUSTED).value == "15550100999"
    with pytest.raises(ValidationFailed):
        normalize_phone("12", "from", TRUSTED)
    assert "not a valid phone number" in _refusal("+1 555-010-0999")


def test_stored_numbers_are_judged_by_the_rules_of_today():
    assert stored_number_problem("14155552671") is None
    assert stored_number_problem("5551239999") == "not a valid phone number for its country"
    assert stored_number_problem("999123") == "not a phone number"
    assert stored_number_problem("1555") == "not a possible phone number for its country code"


def test_the_phone_regions_are_the_iso_countries_libphonenumber_has_a_plan_for():
    assert list(PHONE_REGIONS) == sorted(set(COUNTRIES) & phonenumbers.SUPPORTED_REGIONS)


def test_other_identity_types():
    assert normalize("email", "  Ada@Example.COM ").value == "ada@example.com"
    assert normalize("instagram", "@Ada.Lovelace").value == "ada.lovelace"
    ext = normalize("external_id", " 42 ", "shopify")
    assert (ext.value, ext.source, ext.sentinel_sk) == ("42", "shopify", "IDENT#external_id#shopify#42")
    with pytest.raises(ValidationFailed) as exc:
        normalize("external_id", "42")
    assert exc.value.details[0]["field"] == "identifier.source"
    with pytest.raises(ValidationFailed):
        normalize("email", "not-an-email")
    with pytest.raises(ValidationFailed):
        normalize("telegram", "x")


_local = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._+-", min_size=1, max_size=20)
_label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(local=_local, labels=st.lists(_label, min_size=1, max_size=3), tld=st.sampled_from(["com", "io", "org", "de"]))
def test_email_fast_path_agrees_with_email_validator(local: str, labels: list[str], tld: str):
    from email_validator import EmailNotValidError, validate_email

    address = f"{local}@{'.'.join(labels)}.{tld}"
    try:
        expected: str | None = str(validate_email(address, check_deliverability=False).normalized).lower()
    except EmailNotValidError:
        expected = None
    try:
        got: str | None = normalize("email", address.upper()).value
    except ValidationFailed:
        got = None
    assert got == expected, address


@pytest.mark.parametrize("address", ["a@b.local", "x@y.test", "üser@example.com", '"q"@example.com'])
def test_unusual_addresses_take_the_full_validator(address: str):
    from email_validator import EmailNotValidError, validate_email

    try:
        expected: str | None = str(validate_email(address, check_deliverability=False).normalized).lower()
    except EmailNotValidError:
        expected = None
    try:
        got: str | None = normalize("email", address).value
    except ValidationFailed:
        got = None
    assert got == expected
