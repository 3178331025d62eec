"""Credential material: API keys and session tokens are random, shown once, stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets

API_KEY_PREFIXES = ("sk_live_", "sk_test_")
SESSION_PREFIX = "sess_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_api_key(mode: str) -> str:
    """`sk_live_` (prod) or `sk_test_` + 40 URL-safe random characters."""
    return f"sk_{'live' if mode == 'live' else 'test'}_{secrets.token_urlsafe(30)}"


def new_session_token() -> str:
    return f"{SESSION_PREFIX}{secrets.token_urlsafe(32)}"


def display_prefix(token: str) -> str:
    """What lists show of a key: its kind and first characters, never enough to use it."""
    return token[:12]


def extract_credential(headers: dict[str, str] | None) -> str | None:
    """The credential of a request: `X-Api-Key`, or `Authorization: Bearer <token>` (header names any case)."""
    found = credential_of(headers)
    return found[0] if found else None


def credential_of(headers: dict[str, str] | None) -> tuple[str, str] | None:
    """(the credential, the header that carried it: `x-api-key` or `bearer`) or None. `X-Api-Key` carries API keys
    only (CONVENTIONS "Requests the service refuses"): the caller checks the kind of what it names."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items() if isinstance(v, str)}
    api_key = (lowered.get("x-api-key") or "").strip()
    if api_key:
        return api_key, "x-api-key"
    authz = (lowered.get("authorization") or "").strip()
    scheme, _, token = authz.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip(), "bearer"
    return None
