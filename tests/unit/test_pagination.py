"""Cursors are bound to the organization and the query, and tamper-evident."""

from __future__ import annotations

import pytest

from switchboard.api.pagination import decode_cursor, encode_cursor, query_fingerprint
from switchboard.errors import ValidationFailed

LAST = {"PK": "ORG#org_a", "SK": "CONTACT#ct_1"}


def test_round_trip():
    fp = query_fingerprint("contacts", {"tag": "vip"})
    token = encode_cursor("org_a", fp, LAST)
    assert token and "ORG#" not in token
    assert decode_cursor(token, "org_a", fp) == LAST


def test_no_more_pages_means_no_cursor():
    assert encode_cursor("org_a", "fp", None) is None
    assert decode_cursor(None, "org_a", "fp") is None


@pytest.mark.parametrize(
    ("org", "params"),
    [("org_b", {"tag": "vip"}), ("org_a", {"tag": "other"}), ("org_a", {})],
)
def test_reuse_elsewhere_is_refused(org, params):
    token = encode_cursor("org_a", query_fingerprint("contacts", {"tag": "vip"}), LAST)
    with pytest.raises(ValidationFailed) as exc:
        decode_cursor(token, org, query_fingerprint("contacts", params))
    assert exc.value.details[0]["field"] == "query.cursor"


@pytest.mark.parametrize(
    "mutate", [lambda t: "x" + t, lambda t: t[:-2] + "AA", lambda t: t.replace(".", ""), str.upper]
)
def test_tampering_is_refused(mutate):
    fp = query_fingerprint("contacts", {})
    token = encode_cursor("org_a", fp, LAST)
    with pytest.raises(ValidationFailed):
        decode_cursor(mutate(token), "org_a", fp)


def test_garbage_is_refused():
    with pytest.raises(ValidationFailed):
        decode_cursor("not-a-cursor", "org_a", "fp")
