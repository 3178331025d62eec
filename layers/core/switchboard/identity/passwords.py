"""Passwords: argon2id with a per-hash salt (argon2-cffi). Imported lazily: only the routes that need it pay."""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _hasher() -> Any:
    from argon2 import PasswordHasher

    # Lambda-friendly cost: ~50 ms at 1 GB, memory-hard (19 MiB), per OWASP's argon2id minimums.
    return PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def hash_password(password: str) -> str:
    return str(_hasher().hash(password))


@lru_cache(maxsize=1)
def dummy_hash() -> str:
    """A hash of a random password with the same parameters: what an unknown e-mail's login is checked against,
    so that it costs the same time as a known one's."""
    import secrets

    return hash_password(secrets.token_urlsafe(24))


def verify_password(stored_hash: str, password: str) -> bool:
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        return bool(_hasher().verify(stored_hash, password))
    except (VerificationError, InvalidHashError):
        return False
