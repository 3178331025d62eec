"""Credential extraction and material."""

from __future__ import annotations

import pytest

from switchboard.identity.credentials import display_prefix, extract_credential, hash_token, new_api_key


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"X-Api-Key": "sk_test_abc"}, "sk_test_abc"),
        ({"x-api-key": " sk_test_abc "}, "sk_test_abc"),
        ({"Authorization": "Bearer sess_xyz"}, "sess_xyz"),
        ({"authorization": "bearer sk_live_k"}, "sk_live_k"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, None),
        ({"Authorization": "Bearer "}, None),
        ({}, None),
        (None, None),
    ],
)
def test_extract_credential(headers, expected):
    assert extract_credential(headers) == expected


def test_api_keys_are_random_prefixed_and_hashed():
    live, test = new_api_key("live"), new_api_key("test")
    assert live.startswith("sk_live_") and test.startswith("sk_test_")
    assert len(live) >= len("sk_live_") + 32
    assert new_api_key("test") != test
    assert hash_token(test) != test and len(hash_token(test)) == 64
    assert display_prefix(test) == test[:12]
