"""The small HTTP client the remote adapters share (whatsapp_cloud, whatsapp_web).

- httpx is imported on first use, never at import time (the registry imports every adapter on cold start).
- One process-wide client, so warm Lambda invocations reuse TCP and TLS connections to the provider.
- No redirects followed; every request has a timeout (10 s per connect/read/write, and the same as a total deadline
  for the whole exchange, bodies included); response bodies are capped.
- Failures map onto the provider protocol: timeouts, connection errors, 429 and 5xx → `ProviderUnavailable` (retry
  later); other 4xx → `ProviderRejected` carrying the provider's own message (the adapter's `read_error` extracts it,
  and may declare a 4xx transient, as Graph does for its rate limits); 3xx → `ProviderRejected` (a misconfigured
  `base_url`, retrying will not help).
- Destinations come from the channel's (user-supplied) config, so outside the local and test stages a URL must be
  `https` and resolve only to public addresses: no loopback, private, link-local or cloud-metadata targets.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from switchboard.providers.base import ProviderRejected, ProviderUnavailable

if TYPE_CHECKING:
    import httpx

DEFAULT_TIMEOUT = 10.0
MAX_BODY = 4 * 1024 * 1024  # API answers
MAX_MEDIA = 100 * 1024 * 1024  # WhatsApp's largest media (documents)
MEDIA_DEADLINE = 60.0  # a whole media download; every single read still has DEFAULT_TIMEOUT
_HOST_OK_FOR = 300.0  # seconds a destination host that resolved to public addresses is trusted

_client: httpx.Client | None = None
_public_hosts: dict[tuple[str, int], float] = {}


def segment(value: str) -> str:
    """One path segment, percent-encoded (ids from callers can never climb out of their path)."""
    return quote(str(value), safe="")


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]  # lower-case names
    content: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.content)
        except ValueError:
            return None

    def text(self, limit: int = 300) -> str:
        return self.content[:limit].decode("utf-8", "replace").strip()


@dataclass(frozen=True)
class ProviderError:
    """What `read_error` makes of a 4xx answer."""

    message: str
    transient: bool = False
    details: dict[str, Any] = field(default_factory=dict)


ErrorReader = Callable[[Reply], ProviderError]


def default_error(reply: Reply) -> ProviderError:
    return ProviderError(reply.text() or f"HTTP {reply.status}")


def client() -> httpx.Client:
    global _client
    if _client is None:
        import httpx

        _client = httpx.Client(
            follow_redirects=False,
            timeout=DEFAULT_TIMEOUT,
            headers={"User-Agent": "Switchboard/1.0", "Accept": "application/json"},
        )
    return _client


def check_destination(url: str, provider: str) -> None:
    """Refuse URLs that could reach our own network (SSRF), except on the local and test stages."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise ProviderRejected(f"{provider}: {url!r} is not a valid http(s) URL; check config.base_url.")
    from switchboard.config import get_settings

    if get_settings().is_local:
        return
    if parts.scheme != "https":
        raise ProviderRejected(f"{provider}: only https URLs are allowed; check config.base_url.")
    host, port = parts.hostname, parts.port or 443
    now = time.monotonic()
    if _public_hosts.get((host, port), 0.0) > now:
        return
    import ipaddress
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        raise ProviderUnavailable(f"{provider}: cannot resolve {host}: {err}") from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        mapped = getattr(address, "ipv4_mapped", None)
        if not address.is_global or (mapped is not None and not mapped.is_global):
            raise ProviderRejected(f"{provider}: {host} resolves to a non-public address; check config.base_url.")
    _public_hosts[(host, port)] = now + _HOST_OK_FOR


class HttpApi:
    """A provider's HTTP API: base URL, auth headers, error reader. `timeout` may be lowered (tests)."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        read_error: ErrorReader = default_error,
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout
        self.read_error = read_error

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        max_bytes: int = MAX_BODY,
        deadline: float | None = None,
        form: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
    ) -> Reply:
        """`path` is relative to the base URL, or an absolute URL (a media link the provider handed out)."""
        import httpx

        url = path if path.startswith(("https://", "http://")) else f"{self.base_url}{path}"
        check_destination(url, self.provider)
        total = max(deadline or self.timeout, self.timeout)
        started = time.monotonic()
        try:
            with client().stream(
                method,
                url,
                json=json_body,
                data=dict(form) if form else None,
                files=dict(files) if files else None,
                params=dict(params) if params else None,
                headers=self.headers,
                timeout=self.timeout,
            ) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise ProviderRejected(f"{self.provider}: the answer is larger than {max_bytes} bytes.")
                    if time.monotonic() - started > total:
                        raise ProviderUnavailable(f"{self.provider} did not finish answering within {total:g} s.")
                    chunks.append(chunk)
                reply = Reply(
                    status=response.status_code,
                    headers={k.lower(): v for k, v in response.headers.items()},
                    content=b"".join(chunks),
                )
        except httpx.TimeoutException:
            raise ProviderUnavailable(f"{self.provider} did not answer within {self.timeout:g} s.") from None
        except httpx.HTTPError as err:
            raise ProviderUnavailable(f"{self.provider} could not be reached ({type(err).__name__}).") from None
        return self._check(reply)

    def call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        form: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
    ) -> dict[str, Any]:
        """A request whose successful answer is a JSON object (an empty body counts as `{}`); `form` and `files`
        make a multipart body."""
        reply = self.request(method, path, json_body=json_body, params=params, form=form, files=files)
        if not reply.content.strip():
            return {}
        data = reply.json()
        if not isinstance(data, dict):
            raise ProviderUnavailable(f"{self.provider} answered HTTP {reply.status} with a body that is not JSON.")
        return data

    def _check(self, reply: Reply) -> Reply:
        status = reply.status
        if status < 300:
            return reply
        if status == 429 or status >= 500:
            detail = self.read_error(reply).message if reply.content else ""
            retry = f" (Retry-After {reply.headers['retry-after']})" if "retry-after" in reply.headers else ""
            raise ProviderUnavailable(
                f"{self.provider} answered HTTP {status}{retry}" + (f": {detail}" if detail else ".")
            )
        if status < 400:
            raise ProviderRejected(
                f"{self.provider} answered with a redirect (HTTP {status}); check config.base_url.",
                details=[{"provider": self.provider, "http_status": status}],
            )
        error = self.read_error(reply)
        if error.transient:
            raise ProviderUnavailable(f"{self.provider} answered HTTP {status}: {error.message}")
        raise ProviderRejected(
            f"{self.provider}: {error.message}",
            details=[{"provider": self.provider, "http_status": status, **error.details}],
        )
