"""The platform secret (`CursorSecret` in Secrets Manager), read at run time.

Functions get the secret's ARN (`CURSOR_SECRET_ARN`), never its value: the value is read with Powertools Parameters
(`SecretsProvider`, the `get_secret` utility with this module's client) on first use and kept `MAX_AGE` seconds, so
a new value reaches every container within `MAX_AGE` of `put-secret-value`, without a deploy. The local and test
stages may give the value itself instead (`CURSOR_SECRET`, no ARN): then there is one key and no rotation.

Every key of the platform is derived from this secret: cursor MACs (`paging`), idempotency records
(`api.idempotency`), the sealing of secrets at rest and `lookup_hash` (`sealed`), the webhook secrets of linked-device
channels (`providers.whatsapp_web`). Each signs or seals with the current version (AWSCURRENT) and verifies or opens
with `candidates()`: the current version, then the previous one (AWSPREVIOUS, read only when the current one did not
fit), then — when this container's copy may be stale, at most every `REFRESH_AFTER` — both read again. So a rotation
breaks nothing signed or sealed under the previous version while it is AWSPREVIOUS, that is until the next rotation;
`switchboard.reseal` re-seals what is stored under it (docs/operations.md "Platform secret").

Powertools' parameters module is imported on first use (about 20 ms of the cold start otherwise).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from switchboard import aws
from switchboard.config import get_settings
from switchboard.errors import ServiceUnavailable

MAX_AGE = 300  # seconds a read value is kept (Powertools' cache)
REFRESH_AFTER = 30.0  # a value nothing fits is read again at most this often per container
PREVIOUS = "AWSPREVIOUS"

_lock = threading.Lock()
_providers: dict[str, Any] = {}  # "current" / "previous" → a SecretsProvider (each has its own cache)
_absent_until: dict[str, float] = {}  # ARN → no AWSPREVIOUS version: not asked again before this (monotonic)
_refreshed_at = float("-inf")  # when this container last read both versions again (monotonic)


def _provider(which: str) -> Any:
    """A Powertools SecretsProvider per version stage (its cache is keyed by the secret's name alone, so the current
    and the previous version each need one of their own), on this process's Secrets Manager client."""
    client = aws.client("secretsmanager")
    provider = _providers.get(which)
    if provider is None or provider.client is not client:
        # on first use: keeps Powertools' parameters module off the cold start
        from aws_lambda_powertools.utilities.parameters import SecretsProvider

        with _lock:
            provider = SecretsProvider(boto3_client=client)
            _providers[which] = provider
    return provider


def _arn() -> str | None:
    return get_settings().cursor_secret_arn


def current() -> bytes:
    """The current version (AWSCURRENT), or the stage's own value where it has no ARN."""
    return _read_current(force=False)


def _read_current(*, force: bool) -> bytes:
    arn = _arn()
    if arn is None:
        value = get_settings().cursor_secret
        assert value is not None  # the settings require one of the two
        return value.get_secret_value().encode()
    # on first use: keeps Powertools' parameters module off the cold start
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    try:
        return str(_provider("current").get(arn, max_age=MAX_AGE, force_fetch=force)).encode()
    except GetParameterError:
        raise ServiceUnavailable("The platform secret could not be read; retry shortly.") from None


def previous(*, force: bool = False) -> bytes | None:
    """The previous version (AWSPREVIOUS), None before the first rotation (or without an ARN)."""
    arn = _arn()
    if arn is None or (not force and time.monotonic() < _absent_until.get(arn, 0.0)):
        return None
    # on first use: keeps Powertools' parameters module off the cold start
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    try:
        value = _provider("previous").get(arn, max_age=MAX_AGE, force_fetch=force, VersionStage=PREVIOUS)
    except GetParameterError as err:
        if _not_found(err):
            _absent_until[arn] = time.monotonic() + MAX_AGE
        return None  # unreadable now (throttled): nothing is cached, the next caller asks again
    return str(value).encode()


def _not_found(err: Exception) -> bool:
    """Powertools wraps every failure in GetParameterError; the client's own error is the one it was raised from."""
    cause = err.__cause__ or err.__context__
    code = getattr(cause, "response", {}).get("Error", {}).get("Code") if cause is not None else None
    return code == "ResourceNotFoundException" or "ResourceNotFoundException" in str(err)


def candidates() -> Iterator[bytes]:
    """The keys to verify or open with, in order, each read only when the caller asks for the next: the current
    version, the previous one, then — when this container last read them more than `REFRESH_AFTER` ago — both read
    again (another container may already see a newer value)."""
    global _refreshed_at
    tried: list[bytes] = []
    for key in (current(), previous()):
        if key is not None and key not in tried:
            tried.append(key)
            yield key
    now = time.monotonic()
    if _arn() is None or now - _refreshed_at < REFRESH_AFTER:
        return
    _refreshed_at = now
    for key in (_read_current(force=True), previous(force=True)):
        if key is not None and key not in tried:
            tried.append(key)
            yield key


def reset() -> None:
    """Forget what was read (tests change the secret or the stage's settings)."""
    global _refreshed_at
    with _lock:
        _providers.clear()
    _absent_until.clear()
    _refreshed_at = float("-inf")
