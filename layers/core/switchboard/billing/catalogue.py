"""Static billing data and money arithmetic: currencies (minor units), the plan catalogue, ISO 3166 country codes.

Amounts are `Decimal` from end to end: unit prices may carry up to four decimals (a message costs fractions of a
cent), every computed amount is rounded half-up to the currency's minor unit (2 for USD/EUR/GBP, 0 for JPY).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

# ISO 4217 minor units of the currencies we invoice in.
CURRENCIES: dict[str, int] = {"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0}


def minor_unit(currency: str) -> Decimal:
    return Decimal(1).scaleb(-CURRENCIES[currency])


def round_money(amount: Decimal, currency: str) -> Decimal:
    """Half-up to the currency's minor unit (`12.345` USD → `12.35`, `1234.5` JPY → `1235`)."""
    return amount.quantize(minor_unit(currency), rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Price:
    monthly: Decimal  # the plan's base fee per period
    per_message: Decimal  # each message sent beyond the included ones
    per_contact: Decimal  # each stored contact beyond the included ones


@dataclass(frozen=True)
class Plan:
    id: str
    name: str
    description: str
    included_messages: int
    included_contacts: int
    prices: dict[str, Price]


def _p(monthly: str, per_message: str, per_contact: str) -> Price:
    return Price(Decimal(monthly), Decimal(per_message), Decimal(per_contact))


PLANS: dict[str, Plan] = {
    plan.id: plan
    for plan in (
        Plan(
            "free",
            "Free",
            "One sandbox workspace to try the API.",
            included_messages=1_000,
            included_contacts=500,
            prices={
                "USD": _p("0", "0.0100", "0.0050"),
                "EUR": _p("0", "0.0090", "0.0045"),
                "GBP": _p("0", "0.0080", "0.0040"),
                "JPY": _p("0", "1.5", "0.75"),
            },
        ),
        Plan(
            "starter",
            "Starter",
            "Small teams on one or two channels.",
            included_messages=10_000,
            included_contacts=5_000,
            prices={
                "USD": _p("49.00", "0.0080", "0.0040"),
                "EUR": _p("45.00", "0.0075", "0.0035"),
                "GBP": _p("39.00", "0.0065", "0.0030"),
                "JPY": _p("7400", "1.2", "0.6"),
            },
        ),
        Plan(
            "growth",
            "Growth",
            "Several channels, higher volumes, lower unit prices.",
            included_messages=100_000,
            included_contacts=50_000,
            prices={
                "USD": _p("299.00", "0.0050", "0.0020"),
                "EUR": _p("275.00", "0.0046", "0.0018"),
                "GBP": _p("239.00", "0.0040", "0.0016"),
                "JPY": _p("45000", "0.75", "0.3"),
            },
        ),
    )
}
DEFAULT_PLAN = "free"
DEFAULT_CURRENCY = "USD"

# ISO 3166-1 alpha-2 (officially assigned codes).
COUNTRIES = frozenset(
    " ".join(
        (
            "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ",
            "BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM",
            "DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS",
            "GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN",
            "KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ",
            "MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM",
            "PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV",
            "SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI",
            "VN VU WF WS YE YT ZA ZM ZW",
        )
    ).split()
)
