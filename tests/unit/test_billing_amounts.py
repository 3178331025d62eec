"""Invoice arithmetic (pure): every line is quantity x unit price rounded half-up to the currency's minor unit, the
subtotal is the sum of the lines, the tax is rounded once on the subtotal, and the total is their sum — for every
plan, currency and usage (property test), with the rounding cases spelled out."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from switchboard.billing import catalogue, invoices
from switchboard.billing.models import ChannelUsage


def _channels(*counts: int) -> list[ChannelUsage]:
    return [
        ChannelUsage(channel_id=f"ch_{n}", channel_name=f"Line {n}", platform="sandbox", messages_sent=c)
        for n, c in enumerate(counts)
    ]


def test_rounding_half_up_to_the_minor_unit():
    assert catalogue.round_money(Decimal("92.5875"), "USD") == Decimal("92.59")
    assert catalogue.round_money(Decimal("0.005"), "EUR") == Decimal("0.01")
    assert catalogue.round_money(Decimal("-0.005"), "EUR") == Decimal("-0.01")
    assert catalogue.round_money(Decimal("1234.5"), "JPY") == Decimal("1235")


def test_lines_for_usage_above_the_allowances():
    plan = catalogue.PLANS["starter"]
    lines = invoices.build_lines(plan, "EUR", "2026-10", _channels(12_345, 0, 3), contacts=5_101)
    assert [(line["line_type"], line["quantity"], line["unit_amount"], line["line_total"]) for line in lines] == [
        ("subscription", "1", "45.00", "45.00"),
        ("usage", "12345", "0.0075", "92.59"),  # 92.5875
        ("usage", "3", "0.0075", "0.02"),  # 0.0225; the idle channel has no line
        ("credit", "10000", "-0.0075", "-75.00"),
        ("usage", "101", "0.0035", "0.35"),  # 0.3535
    ]
    assert [line["position"] for line in lines] == [1, 2, 3, 4, 5]
    assert invoices.totals(lines, Decimal("20"), "EUR") == {
        "subtotal_amount": "62.96",
        "tax_amount": "12.59",  # 12.592
        "total_amount": "75.55",
    }


def test_yen_invoices_have_no_minor_unit():
    lines = invoices.build_lines(catalogue.PLANS["growth"], "JPY", "2026-10", _channels(100_001), contacts=0)
    assert [line["line_total"] for line in lines] == ["45000", "75001", "-75000"]  # 100001 x 0.75 = 75000.75
    assert invoices.totals(lines, Decimal("10"), "JPY")["total_amount"] == "49501"  # 45001 + 4500.1


@given(
    plan=st.sampled_from(sorted(catalogue.PLANS)),
    currency=st.sampled_from(sorted(catalogue.CURRENCIES)),
    counts=st.lists(st.integers(min_value=0, max_value=10**7), max_size=5),
    contacts=st.integers(min_value=0, max_value=10**6),
    tax=st.decimals(min_value=0, max_value=100, places=3, allow_nan=False, allow_infinity=False),
)
def test_amounts_are_always_consistent(plan, currency, counts, contacts, tax):
    lines = invoices.build_lines(catalogue.PLANS[plan], currency, "2026-10", _channels(*counts), contacts)
    unit = catalogue.minor_unit(currency)
    for line in lines:
        total = Decimal(line["line_total"])
        assert total == total.quantize(unit)
        assert total == catalogue.round_money(Decimal(line["quantity"]) * Decimal(line["unit_amount"]), currency)
    amounts = {k: Decimal(v) for k, v in invoices.totals(lines, tax, currency).items()}
    assert amounts["subtotal_amount"] == sum(Decimal(line["line_total"]) for line in lines)
    assert amounts["subtotal_amount"] >= 0  # the included-messages credit never exceeds the usage it offsets
    assert amounts["tax_amount"] == catalogue.round_money(amounts["subtotal_amount"] * tax / 100, currency)
    assert amounts["total_amount"] == amounts["subtotal_amount"] + amounts["tax_amount"]


def test_the_credit_never_offsets_more_than_sub_cent_usage_lines():
    """Growth in GBP costs 0.0040 a message: two channels of one message each round to 0.00 apiece, while the credit
    for both, rounded over their sum (0.008), would be -0.01. It is capped at the usage it offsets (a case found by
    the property test above)."""
    lines = invoices.build_lines(catalogue.PLANS["growth"], "GBP", "2026-10", _channels(1, 1), contacts=0)
    assert [(line["line_type"], line["quantity"], line["unit_amount"], line["line_total"]) for line in lines] == [
        ("subscription", "1", "239.00", "239.00"),
        ("usage", "1", "0.0040", "0.00"),
        ("usage", "1", "0.0040", "0.00"),
        ("credit", "1", "0.00", "0.00"),
    ]
    assert lines[-1]["description"] == "Included messages (2 of 100000 per period)"
    assert invoices.totals(lines, Decimal(0), "GBP")["subtotal_amount"] == "239.00"
    # Where the rounded credit fits inside the usage, it stays quantity x unit price.
    plain = invoices.build_lines(catalogue.PLANS["growth"], "GBP", "2026-10", _channels(3), contacts=0)
    assert (plain[-1]["quantity"], plain[-1]["unit_amount"], plain[-1]["line_total"]) == ("3", "-0.0040", "-0.01")
