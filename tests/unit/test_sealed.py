"""Sealed secrets (provider tokens from onboarding): they open only with this stage's key and the same context, and
any change to the stored text is detected."""

from __future__ import annotations

import os

import pytest

from switchboard import sealed
from switchboard.config import reset_settings

SECRET = "EAAG-business-token-0123456789"


def test_round_trip_and_no_plain_text():
    box = sealed.seal(SECRET, "org_a")
    assert sealed.is_sealed(box) and SECRET not in box
    assert sealed.unseal(box, "org_a") == SECRET
    assert sealed.seal(SECRET, "org_a") != box  # a fresh nonce each time


def test_another_context_does_not_open():
    with pytest.raises(ValueError):
        sealed.unseal(sealed.seal(SECRET, "org_a"), "org_b")


@pytest.mark.parametrize("position", [len(sealed.PREFIX) + 2, -3])
def test_tampering_is_detected(position):
    box = sealed.seal(SECRET, "org_a")
    flipped = "A" if box[position] != "A" else "B"
    tampered = box[:position] + flipped + box[position + 1 :]  # position is never -1
    with pytest.raises(ValueError):
        sealed.unseal(tampered, "org_a")


def test_another_stage_key_does_not_open(monkeypatch):
    box = sealed.seal(SECRET, "org_a")
    original = os.environ["CURSOR_SECRET"]
    monkeypatch.setenv("CURSOR_SECRET", "another-stage-secret-0123456789")
    reset_settings()
    try:
        with pytest.raises(ValueError):
            sealed.unseal(box, "org_a")
    finally:
        monkeypatch.setenv("CURSOR_SECRET", original)
        reset_settings()
    assert sealed.unseal(box, "org_a") == SECRET


def test_plain_values_pass_through():
    assert sealed.open_if_sealed("plain-token", "org_a") == "plain-token"
    assert sealed.open_if_sealed(None, "org_a") is None
    with pytest.raises(ValueError):
        sealed.unseal("plain-token", "org_a")
