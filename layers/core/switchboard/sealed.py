"""Secrets that must be stored but never kept in plain text (provider access tokens, app secrets).

`seal(value, context)` answers `sealed:v1:<base64url(nonce ‖ AES-256-GCM ciphertext ‖ tag)>`; `unseal` reverses it.
The `context` (the organization id) is authenticated data: a sealed value copied into another organization's item
does not open there. The key is derived with HKDF-SHA256 from the stage's `CURSOR_SECRET` (already a Secrets
Manager secret) under its own label, so this key and the cursor MAC key are independent; rotating that secret makes
sealed values unreadable (the channels holding them need a new token).

`cryptography` is imported on first use only (it is not needed on most cold starts).
"""

from __future__ import annotations

import base64
import os
from functools import lru_cache
from typing import Any

PREFIX = "sealed:v1:"
_INFO = b"switchboard/sealed-secrets/v1"


@lru_cache(maxsize=4)
def _key(secret: str) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret.encode())


def _current_key() -> bytes:
    from switchboard.config import get_settings

    return _key(get_settings().cursor_secret.get_secret_value())


def is_sealed(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def seal(value: str, context: str) -> str:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    blob = AESGCM(_current_key()).encrypt(nonce, value.encode(), context.encode())
    return PREFIX + base64.urlsafe_b64encode(nonce + blob).decode().rstrip("=")


def unseal(value: str, context: str) -> str:
    """The plain value; `ValueError` when it is not a sealed value of this stage and context."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if not is_sealed(value):
        raise ValueError("not a sealed value")
    text = value[len(PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return AESGCM(_current_key()).decrypt(raw[:12], raw[12:], context.encode()).decode()
    except (InvalidTag, ValueError) as err:
        raise ValueError("the sealed value does not open with this stage's key and context") from err


def open_if_sealed(value: Any, context: str) -> Any:
    """`value` itself unless it is sealed (configs may hold plain values an admin typed in)."""
    return unseal(value, context) if is_sealed(value) else value
