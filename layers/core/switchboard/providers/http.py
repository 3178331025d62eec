"""The small HTTP client the remote adapters share (whatsapp_cloud, whatsapp_web).

- httpx is imported on first use, never at import time (the registry imports every adapter on cold start).
- Destinations come from the channel's (user-supplied) config, so every request goes through `switchboard.netguard`,
  the guard of the webhook sender: outside the local stack the URL must be `https`, every address its host resolves
  to now must be public (no loopback, private, link-local, metadata, NAT64/6to4/mapped forms of those; no verdict
  is remembered per host name), and the connection is pinned to the checked address (TLS still verifies the host
  name, through SNI). Clients are kept per (address, host name, port), so warm invocations reuse connections.
- No redirects followed; every request has a timeout (10 s per connect/read/write, and the same as a total deadline
  for the whole exchange, bodies included; a caller's shorter `deadline` lowers both); response bodies are capped. A
  media body can go to a `sink` chunk by chunk instead of memory (`request(..., sink=)`).
- Failures map onto the provider protocol: timeouts, connection errors, 429 and 5xx → `ProviderUnavailable` (retry
  later); other 4xx → `ProviderRejected` (the adapter's `read_error` reads the provider's error object, and may
  declare a 4xx transient, as Graph does for its rate limits); 3xx → `ProviderRejected` (a misconfigured `base_url`,
  retrying will not help).
- A provider's error body is never echoed to the tenant: what reaches `last_error` and an error's `details` is the
  HTTP status and what `read_error` takes from a JSON error object (the provider's code, its short message, capped);
  a body that is not JSON (an HTML error page of whatever answered) contributes nothing but its status.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from switchboard import netguard
from switchboard.config import get_settings
from switchboard.providers.base import ProviderRejected, ProviderUnavailable, SendUncertain

DEFAULT_TIMEOUT = 10.0
MAX_BODY = 4 * 1024 * 1024  # API answers
MAX_MEDIA = 100 * 1024 * 1024  # WhatsApp's largest media (documents)
# A whole media download (every request of it, bodies included) when the caller names no budget of its own. An API
# route passes what its invocation has left instead (`switchboard.messaging.media.download`): the function's
# timeout and API Gateway's 29 s bound the whole request.
MEDIA_DEADLINE = 10.0
MAX_ERROR_MESSAGE = 200  # characters of a provider's own error message kept
HEADERS = {"User-Agent": "Switchboard/1.0", "Accept": "application/json"}


def media_until(deadline: float | None) -> float:
    """The monotonic time a media download must be done by: `deadline` seconds from now (`MEDIA_DEADLINE` when the
    caller names none)."""
    return time.monotonic() + (MEDIA_DEADLINE if deadline is None else deadline)


def time_left(until: float, provider: str) -> float:
    """Seconds left before `until`; none left is `ProviderUnavailable` (retry later), never a request started late."""
    left = until - time.monotonic()
    if left <= 0:
        raise ProviderUnavailable(f"{provider} did not finish within the time this request has.")
    return left


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
    return ProviderError(f"HTTP {reply.status}")


def _shown(reply: Reply, error: ProviderError) -> ProviderError:
    """What of `read_error`'s answer may reach the tenant: nothing from a body that is not a JSON object (whatever
    answered may be an internal page) nor the raw body itself, and at most `MAX_ERROR_MESSAGE` printable characters
    of a provider's message."""
    if not isinstance(reply.json(), dict) or error.message.strip() == reply.text():
        return ProviderError(f"HTTP {reply.status}", transient=error.transient)
    message = "".join(ch if ch.isprintable() else " " for ch in error.message)[:MAX_ERROR_MESSAGE].strip()
    details = {k: v for k, v in error.details.items() if isinstance(v, str | int | float | bool)}
    return ProviderError(message or f"HTTP {reply.status}", transient=error.transient, details=details)


def check_destination(url: str, provider: str) -> tuple[netguard.Target, str]:
    """The URL and the checked address to connect to (`switchboard.netguard`, the rules of webhook endpoints; the
    local and test stages may also use `127.0.0.1`)."""
    allow_local = get_settings().is_local
    try:
        target = netguard.parse(url, allow_local=allow_local)
        return target, netguard.checked_address(target, allow_local=allow_local)
    except netguard.Unresolvable as err:
        raise ProviderUnavailable(f"{provider}: the {err.message}.") from None
    except netguard.UnsafeUrl as err:
        raise ProviderRejected(f"{provider}: the URL {err.message}; check config.base_url.") from None


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
        delivers: bool = False,
        form: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        sink: Callable[[bytes], None] | None = None,
    ) -> Reply:
        """`path` is relative to the base URL, or an absolute URL (a media link the provider handed out).
        `delivers`: the request hands a message over, so an answer lost after the request left (a read timeout, a
        dropped connection, an answer cut short) is `SendUncertain` — the provider may have it — rather than
        `ProviderUnavailable`, which says nothing was sent. `deadline` (seconds) bounds the whole exchange, bodies
        included (default: the API's timeout); no single connect, read or write waits longer either. With `sink`, a
        successful answer's body goes to it chunk by chunk as it arrives (the reply's `content` stays empty); an
        error answer is read as usual."""
        import httpx  # on first use: keeps httpx off the cold start

        url = path if path.startswith(("https://", "http://")) else f"{self.base_url}{path}"
        target, address = check_destination(url, self.provider)
        total = deadline if deadline is not None else self.timeout
        started = time.monotonic()
        try:
            http, transport = netguard.pinned_client(target, address, self.timeout)
            outgoing = http.build_request(
                method,
                target.url_for(address),
                json=json_body,
                data=dict(form) if form else None,
                files=dict(files) if files else None,
                params=dict(params) if params else None,
                headers={**HEADERS, **self.headers, "host": target.host_header},
                extensions=netguard.sni(target),
                timeout=min(self.timeout, total),
            )
            response = transport.handle_request(outgoing)
            streamed = sink if sink is not None and response.status_code < 300 else None
            try:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise ProviderRejected(f"{self.provider}: the answer is larger than {max_bytes} bytes.")
                    if time.monotonic() - started > total:
                        lost = f"{self.provider} did not finish answering within {total:g} s."
                        raise SendUncertain(lost) if delivers else ProviderUnavailable(lost)
                    if streamed is not None:
                        streamed(chunk)
                    else:
                        chunks.append(chunk)
            finally:
                response.close()
            reply = Reply(
                status=response.status_code,
                headers={k.lower(): v for k, v in response.headers.items()},
                content=b"".join(chunks),
            )
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:  # nothing left: safe to try again
            unsent = "; nothing was sent." if delivers else "."
            raise ProviderUnavailable(f"{self.provider} could not be reached ({type(err).__name__}){unsent}") from None
        except httpx.HTTPError as err:
            if delivers:
                raise SendUncertain(
                    f"{self.provider} may have accepted the message, but its answer was lost ({type(err).__name__})."
                ) from None
            if isinstance(err, httpx.TimeoutException):
                waited = min(self.timeout, total)
                raise ProviderUnavailable(f"{self.provider} did not answer within {waited:g} s.") from None
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
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """A request whose successful answer is a JSON object (an empty body counts as `{}`); `form` and `files`
        make a multipart body."""
        reply = self.request(
            method, path, json_body=json_body, params=params, form=form, files=files, deadline=deadline
        )
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
            detail = _shown(reply, self.read_error(reply)).message if reply.content else ""
            retry = f" (Retry-After {reply.headers['retry-after']})" if "retry-after" in reply.headers else ""
            raise ProviderUnavailable(
                f"{self.provider} answered HTTP {status}{retry}" + (f": {detail}" if detail else ".")
            )
        if status < 400:
            raise ProviderRejected(
                f"{self.provider} answered with a redirect (HTTP {status}); check config.base_url.",
                details=[{"provider": self.provider, "http_status": status}],
            )
        error = _shown(reply, self.read_error(reply))
        if error.transient:
            raise ProviderUnavailable(f"{self.provider} answered HTTP {status}: {error.message}")
        raise ProviderRejected(
            f"{self.provider}: {error.message}",
            details=[{"provider": self.provider, "http_status": status, **error.details}],
        )
