"""Secrets that must be stored but never kept in plain text: provider access tokens and app secrets, channel
credentials (`whatsapp_cloud` `access_token` / `app_secret` / `verify_token`, `whatsapp_web` `api_key`, any config
key the channel view masks), webhook signing secrets, integration secrets (tokens, passwords, webhook URLs).

`seal(value, context)` answers `sealed:v1:<base64url(nonce ‖ AES-256-GCM ciphertext ‖ tag)>`; `unseal` reverses it.
The `context` (the organization id) is authenticated data: a sealed value copied into another organization's item
does not open there. The key is derived with HKDF-SHA256 from the platform secret (`switchboard.platform_secret`,
Secrets Manager) under its own label, so this key and the cursor MAC key are independent. Values are sealed under
the current version of the secret and open under the current or the previous one (AES-GCM tells which: a wrong key
fails authentication), so a rotation leaves everything readable; `rekey` (run over the table by `switchboard.reseal`)
moves a value sealed under the previous version to the current one, which must be done before the next rotation.

Maps of values (a channel's config, an integration's secrets) are sealed with `seal_fields`, which also records a
display hint per sealed path (`••••` and, for values of 16 characters or more, their last four), so that an API view
can mask without opening anything (`mask_fields`); `open_fields` opens them where they are used. A plain value (an
item written before sealing) still reads as itself: it is sealed on the item's next write, or by `switchboard.reseal`.
`lookup_hash` is a keyed hash for finding an item by a secret without storing it (a verify token), under the current
version.

`cryptography` is imported on first use only (it is not needed on most cold starts).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from switchboard import platform_secret

MASK = "••••"

PREFIX = "sealed:v1:"
_INFO = b"switchboard/sealed-secrets/v1"


@lru_cache(maxsize=4)
def _key(secret: bytes) -> bytes:
    # on first use: keeps cryptography off the cold start
    from cryptography.hazmat.primitives import hashes

    # on first use: keeps cryptography off the cold start
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret)


def _current_key() -> bytes:
    return _key(platform_secret.current())


def is_sealed(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def seal(value: str, context: str) -> str:
    # on first use: keeps cryptography off the cold start
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    blob = AESGCM(_current_key()).encrypt(nonce, value.encode(), context.encode())
    return PREFIX + base64.urlsafe_b64encode(nonce + blob).decode().rstrip("=")


def unseal(value: str, context: str) -> str:
    """The plain value; `ValueError` when it is not a sealed value of this stage and context."""
    # on first use: keeps cryptography off the cold start
    from cryptography.exceptions import InvalidTag

    # on first use: keeps cryptography off the cold start
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if not is_sealed(value):
        raise ValueError("not a sealed value")
    text = value[len(PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as err:
        raise ValueError("the sealed value is not base64") from err
    for secret in platform_secret.candidates():
        try:
            return AESGCM(_key(secret)).decrypt(raw[:12], raw[12:], context.encode()).decode()
        except (InvalidTag, ValueError):
            continue
    raise ValueError("the sealed value does not open with this stage's key and context")


def rekey(value: str, context: str) -> str | None:
    """`value` sealed again under the current version of the platform secret when it opens only under another one
    (the previous version, after a rotation); None when it needs nothing (already current) or cannot be opened."""
    # on first use: keeps cryptography off the cold start
    from cryptography.exceptions import InvalidTag

    # on first use: keeps cryptography off the cold start
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if not is_sealed(value):
        return None
    text = value[len(PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        AESGCM(_current_key()).decrypt(raw[:12], raw[12:], context.encode())
        return None
    except (InvalidTag, ValueError):
        pass
    try:
        return seal(unseal(value, context), context)
    except ValueError:
        return None


def open_if_sealed(value: Any, context: str) -> Any:
    """`value` itself unless it is sealed (configs may hold plain values an admin typed in)."""
    return unseal(value, context) if is_sealed(value) else value


@lru_cache(maxsize=512)
def opened(value: str, context: str) -> str:
    """`open_if_sealed` kept per (value, context): a secret used on every delivery is decrypted once per container."""
    return str(open_if_sealed(value, context))


def hint(plain: str) -> str:
    """What a view shows of a secret: only long secrets show their last four characters."""
    return MASK + plain[-4:] if len(plain) >= 16 else MASK


Secret = Callable[[str], bool]  # is this key (of a config map) a secret?


def has_plain(values: Mapping[str, Any], is_secret: Secret) -> bool:
    """Some secret of the map (at any depth) is a plain, non-empty string."""
    for key, value in values.items():
        if isinstance(value, Mapping):
            if has_plain(value, is_secret):
                return True
        elif is_secret(key) and isinstance(value, str) and value and not is_sealed(value):
            return True
    return False


def seal_fields(
    values: Mapping[str, Any], context: str, is_secret: Secret, hints: dict[str, str], path: str = ""
) -> dict[str, Any]:
    """The map with every plain secret string sealed; `hints[<dotted path>]` gets each newly sealed value's hint."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        where = f"{path}{key}"
        if isinstance(value, Mapping):
            out[key] = seal_fields(value, context, is_secret, hints, where + ".")
        elif is_secret(key) and isinstance(value, str) and value and not is_sealed(value):
            out[key] = seal(value, context)
            hints[where] = hint(value)
        else:
            out[key] = value
    return out


def has_sealed(values: Mapping[str, Any]) -> bool:
    return any(has_sealed(v) if isinstance(v, Mapping) else is_sealed(v) for v in values.values())


def open_fields(values: Mapping[str, Any], context: str) -> dict[str, Any]:
    """The map with every sealed value opened (one that does not open stays as it is, and is refused where used)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            out[key] = open_fields(value, context)
        elif is_sealed(value):
            try:
                out[key] = opened(value, context)
            except ValueError:
                out[key] = value
        else:
            out[key] = value
    return out


def mask_fields(
    values: Mapping[str, Any], is_secret: Secret, hints: Mapping[str, str], path: str = ""
) -> dict[str, Any]:
    """The view of a map: every secret replaced by its hint (sealed) or masked (a plain value not sealed yet)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        where = f"{path}{key}"
        if is_secret(key) and value:
            out[key] = hints.get(where, MASK) if is_sealed(value) else hint(str(value))
        elif isinstance(value, Mapping):
            out[key] = mask_fields(value, is_secret, hints, where + ".")
        else:
            out[key] = value
    return out


def lookup_hash(value: str) -> str:
    """A keyed SHA-256 of a secret (HMAC under the platform secret, its own label): an item can be found by
    the secret a caller presents without the secret being stored."""
    return hmac.new(
        platform_secret.current(), b"switchboard/lookup-hash/v1\x00" + value.encode(), hashlib.sha256
    ).hexdigest()
