"""The one guard of every outbound HTTP request to a URL a tenant chose: webhook deliveries and provider APIs.

A URL must use `https` and its host must resolve only to public addresses: never loopback, private (RFC 1918,
unique-local IPv6), link-local, shared (CGNAT), multicast, reserved, unspecified or a cloud metadata address — IPv4
and IPv6 alike, IPv4 embedded in IPv6 (mapped, well-known NAT64 `64:ff9b::/96`, 6to4) judged as the IPv4 it carries,
and the local-use NAT64 prefix `64:ff9b:1::/48` and Teredo `2001::/32` refused whole. The check runs against the
addresses DNS gives at the moment of each request (no verdict is remembered per host name: a name may later resolve
to a private address), and the request connects to the checked address (`pinned_client`: the URL's host only names
the TLS server through SNI and the `Host` header), never to a second lookup's answer, and never follows a redirect.
Only the local stack (stage `local` or `test`) may use the literal `127.0.0.1`, over http or https.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import ssl
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import certifi

from switchboard.errors import ValidationFailed

if TYPE_CHECKING:
    import ssl

LOCAL_LOOPBACK = "127.0.0.1"
MAX_URL_LENGTH = 2048
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud instance metadata services (AWS IPv4 and IPv6, Alibaba, Oracle's legacy); most are link-local anyway.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "192.0.0.192")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Prefixes whose embedded IPv4 sits where the operator chose (local-use NAT64, RFC 8215) or is obfuscated (Teredo):
# nothing public is reached through them from a Lambda, so they are refused whatever they carry.
_REFUSED_V6 = (ipaddress.ip_network("64:ff9b:1::/48"), ipaddress.ip_network("2001::/32"))


def getaddrinfo(*args: Any, **kwargs: Any) -> list[Any]:
    """The system resolver, looked up at each call (tests substitute this function or `socket.getaddrinfo`)."""
    return socket.getaddrinfo(*args, **kwargs)


class UnsafeUrl(Exception):
    """The URL (or the address it resolves to) may not be called; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unresolvable(UnsafeUrl):
    """The host has no address now (DNS failure): may be temporary, unlike the other refusals."""


@dataclass(frozen=True)
class Target:
    """A parsed endpoint URL."""

    scheme: str
    host: str  # lower-case, IDNA (ASCII), IPv6 without brackets
    port: int | None
    path: str  # path and query, at least "/"

    @property
    def is_ip_literal(self) -> bool:
        return _ip(self.host) is not None

    @property
    def effective_port(self) -> int:
        return self.port or (443 if self.scheme == "https" else 80)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}" if self.port else host

    def url_for(self, address: str) -> str:
        """The URL with the host replaced by a (checked) address: the connection goes exactly there."""
        host = f"[{address}]" if ":" in address else address
        port = f":{self.port}" if self.port else ""
        return f"{self.scheme}://{host}{port}{self.path}"


def _ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(ip: IPAddress) -> str | None:
    """Why this address may not be called, or None when it is a public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in net for net in _REFUSED_V6):
            return "a NAT64 local-use or Teredo address"
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return refusal(embedded)
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private:
        return "a private address"
    if ip.is_reserved or not ip.is_global:
        return "a reserved or non-public address"
    return None


def parse(url: str, *, allow_local: bool) -> Target:
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeUrl(f"must be at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise UnsafeUrl("is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeUrl("must be an absolute https URL")
    if parts.username is not None or parts.password is not None:
        raise UnsafeUrl("must not contain credentials")
    try:
        host = parts.hostname.rstrip(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise UnsafeUrl("has an invalid host name") from None
    if not host:
        raise UnsafeUrl("must be an absolute https URL")
    local = allow_local and host == LOCAL_LOOPBACK
    if scheme != "https" and not local:
        raise UnsafeUrl("must use https")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(scheme=scheme, host=host, port=port, path=path)


def resolve(host: str, port: int) -> list[str]:
    """Every address of `host` (an IP literal is its own answer)."""
    literal = _ip(host)
    if literal is not None:
        return [str(literal)]
    try:
        infos = getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise Unresolvable(f"host {host} does not resolve") from None
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise Unresolvable(f"host {host} does not resolve")
    return addresses


def checked_address(target: Target, *, allow_local: bool) -> str:
    """Resolve the host and check every address; the first one is where the request goes."""
    if allow_local and target.host == LOCAL_LOOPBACK:
        return LOCAL_LOOPBACK
    addresses = resolve(target.host, target.effective_port)
    for address in addresses:
        ip = _ip(address)
        reason = "not an IP address" if ip is None else refusal(ip)
        if reason is not None:
            shown = target.host if target.host == address else f"{target.host} ({address})"
            raise UnsafeUrl(f"resolves to {reason}: {shown}")
    return addresses[0]


def check_url(url: str, *, allow_local: bool) -> Target:
    """At creation/update: the URL is acceptable now (https, resolvable, only public addresses)."""
    target = parse(url, allow_local=allow_local)
    checked_address(target, allow_local=allow_local)
    return target


def require_safe_url(url: str, field: str, *, allow_local: bool) -> str:
    """The one rule for a URL a tenant gives for something to fetch or call (a webhook endpoint, a message's
    `media.url`): `check_url`, a refusal answered as 400 `validation_failed` on `field`; the URL trimmed."""
    try:
        check_url(url, allow_local=allow_local)
    except UnsafeUrl as err:
        raise ValidationFailed.field(field, err.message) from None
    return url.strip()


def sni(target: Target) -> dict[str, Any]:
    """The request extensions that make TLS verify the URL's host name while connecting to the checked address."""
    return {"sni_hostname": target.host} if target.scheme == "https" and not target.is_ip_literal else {}


# Pinned clients -----------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """The CA bundle, loaded once per container: building it costs more than a whole request to a fast server."""

    return ssl.create_default_context(cafile=certifi.where())


MAX_CLIENTS = 64
KEEPALIVE_CONNECTIONS = 10
_clients: OrderedDict[tuple[str, str, int, str, float], tuple[Any, Any]] = OrderedDict()
_clients_lock = threading.Lock()


def pinned_client(target: Target, address: str, timeout: float) -> tuple[Any, Any]:
    """A keep-alive httpx client and its transport per (scheme, checked address, port, TLS host name, timeout), kept
    for the container's life (the 64 most recently used): the next request to the same server reuses its connection.
    A connection only ever serves the address it was opened to and the host name its certificate was verified for,
    since both are in the key. No proxies from the environment, no redirects. The client builds requests (headers,
    timeouts); callers send them through the transport (`transport.handle_request`) to the URL `target.url_for(
    address)` with the `Host` header `target.host_header` and the extensions `sni(target)`."""
    import httpx  # on first use: keeps httpx off the cold start

    key = (target.scheme, address, target.effective_port, target.host if target.scheme == "https" else "", timeout)
    with _clients_lock:
        kept = _clients.get(key)
        if kept is not None:
            _clients.move_to_end(key)
            return kept
        transport = httpx.HTTPTransport(
            verify=tls_context(),
            trust_env=False,
            limits=httpx.Limits(
                max_connections=20, max_keepalive_connections=KEEPALIVE_CONNECTIONS, keepalive_expiry=30.0
            ),
        )
        kept = (httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False, transport=transport), transport)
        _clients[key] = kept
        if len(_clients) > MAX_CLIENTS:
            _clients.popitem(last=False)  # not closed: a request may still be using it; its sockets close with it
        return kept


def reset_clients() -> None:
    """Forget the kept clients (tests that change the trusted CAs)."""
    with _clients_lock:
        _clients.clear()
