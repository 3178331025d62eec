"""Lazily created, cached boto3 clients: nothing is created at import time.

Endpoints come from the standard AWS_ENDPOINT_URL variables, so the local stack and tests point every client at
moto without code changes.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3
from botocore.config import Config

_clients: dict[str, Any] = {}
_lock = threading.Lock()
_session: boto3.session.Session | None = None  # one per process: its loader keeps the service models once read


cached_client = _clients.get  # a client already made, or None: one call less on the hot path (`Store.client`)


def session() -> boto3.session.Session:
    """The process's one boto3 session (made on first use), which every client of `client()` comes from. A handler
    registered on its `events` (botocore's event system) before a client is made sees that client's calls: the
    tests and the local stack check each call against the calling function's IAM grants that way (local/iam.py)."""
    global _session
    with _lock:
        if _session is None:
            _session = boto3.session.Session()
        return _session


def client(service: str) -> Any:
    cached = _clients.get(service)
    if cached is not None:
        return cached
    made = session()
    with _lock:
        cached = _clients.get(service)
        if cached is None:
            config = Config(
                retries={"mode": "standard", "max_attempts": 4},
                connect_timeout=3,
                read_timeout=10,
                tcp_keepalive=True,
                # S3 presigned URLs: botocore signs them with SigV2 by default where S3 still takes it, which buckets
                # created since 2020 refuse and which leaves some parameters (the response overrides) unsigned.
                signature_version="s3v4" if service == "s3" else None,
            )
            cached = made.client(service, config=config)  # type: ignore[call-overload]
            _clients[service] = cached
    return cached


def reset_clients() -> None:
    """Drop cached clients (tests switch between moto contexts); the session stays, with the models it has read."""
    with _lock:
        _clients.clear()
