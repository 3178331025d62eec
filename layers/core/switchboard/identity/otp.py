"""One-time codes: 6 digits, hashed at rest, 10-minute expiry, used once.

A wrong code never voids the right one: anyone who knows an e-mail could otherwise block its owner's code with a
few guesses. Guessing is slowed where it comes from instead (a progressive delay per purpose, e-mail and client IP,
`switchboard.identity.accounts`), and a new code replaces the old one."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from switchboard import clock
from switchboard.errors import Conflict, ValidationFailed
from switchboard.store import Put, Store

CODE_TTL = timedelta(minutes=10)


def _key(purpose: str, email: str) -> dict[str, str]:
    return {"PK": f"OTP#{purpose}#{email}", "SK": "OTP"}


def _digest(salt: str, code: str) -> str:
    return hashlib.sha256(f"{salt}:{code}".encode()).hexdigest()


@dataclass(frozen=True)
class Issued:
    """A new code: the plain value (to e-mail, never stored), when it expires, and the Put that stores its hash."""

    code: str
    expires_at: datetime
    put: Put


def issue(purpose: str, email: str) -> Issued:
    """A new code for (purpose, e-mail), replacing any earlier one once `put` is written: the caller writes it in the
    transaction that queues the mail carrying the code (switchboard.mail), so neither exists without the other."""
    code = f"{secrets.randbelow(1_000_000):06d}"
    salt = secrets.token_hex(8)
    now = clock.now()
    expires = now + CODE_TTL
    item = {
        **_key(purpose, email),
        "entity": "OneTimeCode",
        "salt": salt,
        "code_hash": _digest(salt, code),
        "expires_at": clock.epoch(expires),
        "verified": False,
        "ttl": clock.epoch(expires + timedelta(days=1)),
    }
    return Issued(code, expires, Put(item=item))


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
