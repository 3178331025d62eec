"""One-time codes: 6 digits, hashed at rest, 10-minute expiry, used once.

A wrong code never voids the right one: anyone who knows an e-mail could otherwise block its owner's code with a
few guesses. Guessing is slowed where it comes from instead (a progressive delay per purpose, e-mail and client IP,
`switchboard.identity.accounts`), and a new code replaces the old one."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from switchboard import clock
from switchboard.errors import Conflict, ValidationFailed
from switchboard.store import Store

CODE_TTL = timedelta(minutes=10)


def _key(purpose: str, email: str) -> dict[str, str]:
    return {"PK": f"OTP#{purpose}#{email}", "SK": "OTP"}


def _digest(salt: str, code: str) -> str:
    return hashlib.sha256(f"{salt}:{code}".encode()).hexdigest()


def issue(store: Store, purpose: str, email: str) -> str:
    """A new code for (purpose, e-mail); replaces any earlier one. Returns the plain code to e-mail."""
    code = f"{secrets.randbelow(1_000_000):06d}"
    salt = secrets.token_hex(8)
    now = clock.now()
    store.put(
        {
            **_key(purpose, email),
            "entity": "OneTimeCode",
            "salt": salt,
            "code_hash": _digest(salt, code),
            "expires_at": clock.epoch(now + CODE_TTL),
            "verified": False,
            "ttl": clock.epoch(now + CODE_TTL + timedelta(days=1)),
        }
    )
    return code


def _invalid() -> ValidationFailed:
    return ValidationFailed(
        "The code is wrong or has expired.",
        code="invalid_otp",
        details=[{"field": "body.otp_code", "message": "invalid"}],
    )


def verify(store: Store, purpose: str, email: str, code: str, *, consume: bool) -> None:
    """Check a code within its lifetime (400 `invalid_otp` otherwise). `consume` uses it up on success."""
    key = _key(purpose, email)
    item = store.get(key, consistent=True)
    now = clock.epoch(clock.now())
    if item is None or int(item["expires_at"]) <= now:
        raise _invalid()
    if not hmac.compare_digest(item["code_hash"], _digest(item["salt"], code)):
        raise _invalid()
    if consume:
        try:
            store.delete(key, condition="code_hash = :h", values={":h": item["code_hash"]})
        except Conflict:
            raise _invalid() from None  # used concurrently by another request


def mark_verified(store: Store, purpose: str, email: str) -> None:
    """Record that (purpose, e-mail) was verified by a code; `consume_verified` uses it once."""
    now = clock.now()
    store.put(
        {
            "PK": f"OTPOK#{purpose}#{email}",
            "SK": "OTPOK",
            "entity": "VerifiedEmail",
            "expires_at": clock.epoch(now + timedelta(hours=1)),
            "ttl": clock.epoch(now + timedelta(hours=2)),
        }
    )


def verified_marker_key(purpose: str, email: str) -> dict[str, str]:
    return {"PK": f"OTPOK#{purpose}#{email}", "SK": "OTPOK"}
