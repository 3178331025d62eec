"""Which URLs may receive webhooks, and the address a delivery connects to.

An endpoint URL must use `https` and its host must resolve only to public addresses: never loopback, private
(RFC 1918, unique-local IPv6), link-local, shared (CGNAT), multicast, reserved, unspecified or a cloud metadata
address — IPv4 and IPv6 alike, IPv4 embedded in IPv6 (mapped, NAT64, 6to4) judged as the IPv4 it carries. The check
runs at creation and again before every attempt against the addresses DNS gives then (a name may later resolve to a
private address), and the attempt connects to the checked address (pinned), never to a second lookup's answer.
Only the local stack (stage `local` or `test`) may use the literal `127.0.0.1`, over http or https.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

LOCAL_LOOPBACK = "127.0.0.1"
MAX_URL_LENGTH = 2048
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud instance metadata services (AWS IPv4 and IPv6, Alibaba, Oracle's legacy); most are link-local anyway.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "192.0.0.192")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

getaddrinfo = socket.getaddrinfo  # module attribute so tests can substitute the resolver


class UnsafeUrl(Exception):
    """The URL (or the address it resolves to) may not receive webhooks; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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
        raise UnsafeUrl(f"host {host} does not resolve") from None
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise UnsafeUrl(f"host {host} does not resolve")
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
