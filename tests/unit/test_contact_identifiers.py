"""Identity normalisation: every accepted way of writing a phone gives the same digits (property-based)."""

from __future__ import annotations

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchboard.contacts.identifiers import normalize, normalize_phone
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
