"""Pure webhook rules: which addresses and URLs may be called (SSRF), the retry schedule, the event catalogue."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from switchboard import netguard
from switchboard.webhooks import catalogue, schedule


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("100.64.0.1", "non-public"),
        ("100.100.100.200", "metadata"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "address"),  # reserved (Python counts it as private)
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("fd00:ec2::254", "metadata"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:10.1.2.3", "private"),
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 of 169.254.169.254
        ("64:ff9b:1::a9fe:a9fe", "NAT64"),  # local-use NAT64 prefix: refused whatever it carries
        ("64:ff9b:1::5db8:d822", "NAT64"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
        ("2002:a00:1::", "private"),  # 6to4 of 10.0.0.1
        ("ff02::1", "multicast"),
    ],
)
def test_non_public_addresses_are_refused(address, reason):
    refusal = netguard.refusal(ipaddress.ip_address(address))
    assert refusal is not None and reason in refusal


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:2800:220:1:248:1893:25c8:1946"])
def test_public_addresses_are_allowed(address):
    assert netguard.refusal(ipaddress.ip_address(address)) is None


def test_parse_keeps_path_and_query_and_knows_the_host_header():
    target = netguard.parse("https://Hooks.Example.com:8443/in/bound?x=1&y=2#frag", allow_local=False)
    assert (target.scheme, target.host, target.port, target.path) == (
        "https",
        "hooks.example.com",
        8443,
        "/in/bound?x=1&y=2",
    )
    assert target.host_header == "hooks.example.com:8443"
    assert target.url_for("93.184.216.34") == "https://93.184.216.34:8443/in/bound?x=1&y=2"
    v6 = netguard.parse("https://[2606:2800:220:1::1]/", allow_local=False)
    assert v6.is_ip_literal and v6.host_header == "[2606:2800:220:1::1]"
    assert v6.url_for("2606:2800:220:1::1") == "https://[2606:2800:220:1::1]/"


@pytest.mark.parametrize(
    ("url", "allow_local", "message"),
    [
        ("http://hooks.example.com/", False, "https"),
        ("http://127.0.0.1:8080/", False, "https"),
        ("http://localhost:8080/", True, "https"),  # the local exception is the literal 127.0.0.1 only
        ("https://user:secret@hooks.example.com/", False, "credentials"),
        ("hooks.example.com/path", False, "absolute"),
        ("https:///path", False, "absolute"),
        ("https://hooks.example.com:99999/", False, "valid"),
        ("https://" + "a" * 2100 + ".com/", False, "at most"),
    ],
)
def test_bad_urls_are_refused(url, allow_local, message):
    with pytest.raises(netguard.UnsafeUrl, match=message):
        netguard.parse(url, allow_local=allow_local)


def test_local_stack_may_use_127_0_0_1_over_http():
    target = netguard.parse("http://127.0.0.1:8080/hook", allow_local=True)
    assert netguard.checked_address(target, allow_local=True) == "127.0.0.1"
    with pytest.raises(netguard.UnsafeUrl, match="loopback"):
        netguard.check_url("https://127.0.0.1/hook", allow_local=False)


def test_every_resolved_address_must_be_public(monkeypatch):
    answers = {"ok.test": ["93.184.216.34"], "mixed.test": ["93.184.216.34", "10.0.0.5"], "v6.test": ["::1"]}

    def fake(host, port, *args, **kwargs):
        if host not in answers:
            raise OSError("no such host")
        return [(2, 1, 6, "", (a, port)) for a in answers[host]]

    monkeypatch.setattr(netguard, "getaddrinfo", fake)
    assert (
        netguard.checked_address(netguard.parse("https://ok.test/", allow_local=False), allow_local=False)
        == "93.184.216.34"
    )
    with pytest.raises(netguard.UnsafeUrl, match=r"private address: mixed.test \(10.0.0.5\)"):
        netguard.check_url("https://mixed.test/", allow_local=False)
    with pytest.raises(netguard.UnsafeUrl, match="loopback"):
        netguard.check_url("https://v6.test/", allow_local=True)
    with pytest.raises(netguard.UnsafeUrl, match="does not resolve"):
        netguard.check_url("https://missing.test/", allow_local=False)


# Schedule ---------------------------------------------------------------------------------------------------------
def test_schedule_is_immediately_then_5s_5min_30min_2h_5h_10h_10h():
    assert schedule.SCHEDULE == (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
    assert schedule.MAX_ATTEMPTS == 8
    for made, base in enumerate(schedule.SCHEDULE[1:], start=1):
        low = schedule.next_delay(made, rand=lambda: 0.0)
        high = schedule.next_delay(made, rand=lambda: 0.999999)
        assert low == pytest.approx(base * 0.9) and high == pytest.approx(base * 1.1, rel=1e-5)
    assert schedule.next_delay(8) is None


def test_retry_after_can_delay_but_never_hasten_and_is_capped_at_the_longest_step():
    mid = lambda: 0.5  # noqa: E731 - no jitter
    assert schedule.next_delay(1, retry_after=60, rand=mid) == 60
    assert schedule.next_delay(2, retry_after=60, rand=mid) == 300
    assert schedule.next_delay(1, retry_after=10**9, rand=mid) == 36000


def test_local_time_scale_multiplies_every_delay():
    assert schedule.next_delay(2, scale=0.001, rand=lambda: 0.5) == pytest.approx(0.3)


def test_retry_after_parsing_and_visibility():
    now = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    assert schedule.parse_retry_after("120", now) == 120
    assert schedule.parse_retry_after(format_datetime(now + timedelta(minutes=2), usegmt=True), now) == 120
    assert schedule.parse_retry_after("soon", now) is None
    assert schedule.parse_retry_after(None, now) is None
    assert schedule.visibility_timeout(4.99) == 4
    assert schedule.visibility_timeout(-1) == 0
    assert schedule.visibility_timeout(10**6) == 43199


# Catalogue --------------------------------------------------------------------------------------------------------
def test_filters_subscribe_only_to_published_events():
    assert catalogue.subscribed([], "crm.deal.stage_changed")
    assert catalogue.subscribed(None, "commerce.order.updated")
    assert catalogue.subscribed(["message.new"], "message.new")
    assert not catalogue.subscribed(["message.new"], "message.sent")
    assert not catalogue.subscribed([], "message.queued")  # internal events are never published
