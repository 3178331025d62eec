"""Invoices: one per organization and billing period (a calendar month, UTC), built from metered usage.

States: `draft → open | void`, `open → paid | void | uncollectible`, `uncollectible → paid | void`; `paid` and
`void` are final. Anything else is 409 `conflict`. Only a draft can be edited (`notes`); finalizing (`draft →
open`) issues it (`issued_at`, `due_at` after the payment terms), snapshots the billing profile and e-mails it.

Generation is idempotent per period: the sentinel `INVPERIOD#<YYYY-MM>` is put with `attribute_not_exists` in the
transaction that writes the invoice, so two concurrent requests for a period make one invoice and the second answers
it. Voiding an invoice releases its period, so a corrected one can be generated. Invoice numbers come from a
per-organization counter (`BILLING#invoice_seq`) advanced in the same transaction (conditional on the value read):
numbers have no gaps and never repeat.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from aws_lambda_powertools import Logger

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.billing import catalogue, models, service
from switchboard.errors import Conflict, ValidationFailed
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_id
from switchboard.mail import Mail, enqueue, mail_puts
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.store import Delete, Put, Store, TxOp, Update, keys, versioned

Item = dict[str, Any]
TRANSITIONS: dict[str, frozenset[str]] = {
    "draft": frozenset({"open", "void"}),
    "open": frozenset({"paid", "void", "uncollectible"}),
    "uncollectible": frozenset({"paid", "void"}),
    "paid": frozenset(),
    "void": frozenset(),
}
ISSUE_REQUIRES = ("legal_name", "billing_email", "address_line_1", "country_code")
AMOUNTS = ("subtotal_amount", "tax_amount", "total_amount")
LINE_AMOUNTS = ("quantity", "unit_amount", "line_total")
# Invoice mails written in the issuing transaction (its other operations: the invoice, its audit entry and event);
# any further recipients' mails are queued in transactions of their own right after it.
MAILS_IN_TRANSACTION = 90


def invoice_key(org: str, invoice_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"INVOICE#{invoice_id}")


def period_key(org: str, period: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"INVPERIOD#{period}")


def sequence_key(org: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), "BILLING#invoice_seq")


class _PeriodTaken(Conflict):
    """Another request generated this period's invoice first."""


class _SequenceMoved(Conflict):
    """Another invoice took the number read: read it again."""


# Views ---------------------------------------------------------------------------------------------------------------
def view(item: Item) -> models.Invoice:
    """Amounts are stored as decimal strings (exact) and shown as JSON numbers."""
    data = {**item, **{k: Decimal(str(item[k])) for k in AMOUNTS}}
    data["lines"] = [{**line, **{k: Decimal(str(line[k])) for k in LINE_AMOUNTS}} for line in item["lines"]]
    data["billing_profile"] = item.get("billing_profile") or {}
    return models.Invoice.model_validate(data)


def get_item(store: Store, org: str, invoice_id: str, *, consistent: bool = False) -> Item:
    return store.require(invoice_key(org, invoice_id), "No such invoice.", consistent=consistent)


def get(store: Store, auth: AuthContext, invoice_id: str) -> models.Invoice:
    return view(get_item(store, auth.org_id, invoice_id))


def list_invoices(
    store: Store, auth: AuthContext, limit: int, cursor: str | None, status: str | None
) -> tuple[list[models.Invoice], str | None]:
    """Newest first (ids are time-ordered); a status filter keeps reading (bounded) until the page is full."""
    org = auth.org_id
    fingerprint = query_fingerprint("invoices", {"status": status})
    items, nxt = cursor_page(
        store, org, fingerprint, cursor, limit=limit, sk_prefix="INVOICE#", forward=False, filters={"status": status}
    )
    return [view(i) for i in items], nxt


# Generation ----------------------------------------------------------------------------------------------------------
def _line(position: int, description: str, line_type: str, quantity: int, unit: Decimal, currency: str) -> Item:
    total = catalogue.round_money(Decimal(quantity) * unit, currency)
    return {
        "description": description,
        "line_type": line_type,
        "position": position,
        "quantity": str(quantity),
        "unit_amount": format(unit, "f"),
        "line_total": format(total, "f"),
    }


def build_lines(
    plan: catalogue.Plan, currency: str, period: str, channels: list[models.ChannelUsage], contacts: int
) -> list[Item]:
    """The base fee, one usage line per channel, the included messages as a credit, contacts above the allowance."""
    price = plan.prices[currency]
    lines = [_line(1, f"{plan.name} plan, {period}", "subscription", 1, price.monthly, currency)]
    for ch in channels:
        if ch.messages_sent:
            name = ch.channel_name or ch.channel_id
            description = f"Messages sent on {name} ({ch.platform or 'unknown platform'})"
            lines.append(_line(len(lines) + 1, description, "usage", ch.messages_sent, price.per_message, currency))
    sent = sum(ch.messages_sent for ch in channels)
    if sent and plan.included_messages:
        included = min(sent, plan.included_messages)
        description = f"Included messages ({plan.included_messages} per period)"
        credit = _line(len(lines) + 1, description, "credit", included, -price.per_message, currency)
        # Each channel's line is rounded on its own, so a few sub-cent lines can add up to less than the credit
        # rounded over their sum: the credit never offsets more than the usage it stands for (one line of that sum).
        usage = sum((Decimal(line["line_total"]) for line in lines if line["line_type"] == "usage"), Decimal(0))
        if -Decimal(credit["line_total"]) > usage:
            description = f"Included messages ({included} of {plan.included_messages} per period)"
            credit = _line(len(lines) + 1, description, "credit", 1, -usage, currency)
        lines.append(credit)
    if contacts > plan.included_contacts:
        description = f"Contacts stored above the {plan.included_contacts} included"
        extra = contacts - plan.included_contacts
        lines.append(_line(len(lines) + 1, description, "usage", extra, price.per_contact, currency))
    return lines


def totals(lines: list[Item], tax_rate: Decimal, currency: str) -> dict[str, str]:
    subtotal = sum((Decimal(line["line_total"]) for line in lines), Decimal(0))
    subtotal = catalogue.round_money(subtotal, currency)
    tax = catalogue.round_money(subtotal * tax_rate / 100, currency)
    return {
        "subtotal_amount": format(subtotal, "f"),
        "tax_amount": format(tax, "f"),
        "total_amount": format(subtotal + tax, "f"),
    }


def _existing(store: Store, org: str, period: str) -> Item | None:
    sentinel = store.get(period_key(org, period), consistent=True)
    return get_item(store, org, sentinel["invoice_id"], consistent=True) if sentinel else None


def generate(store: Store, auth: AuthContext, body: models.InvoiceGenerate) -> tuple[models.Invoice, bool]:
    """A draft invoice for the period from its metered usage; `(invoice, False)` when the period has one already."""
    org, now = auth.org_id, clock.now()
    period = body.period or service.previous_period(now)
    start, end = service.period_bounds(period)
    if start > now:
        raise ValidationFailed.field("body.period", "is in the future")
    existing = _existing(store, org, period)
    if existing:
        return view(existing), False
    settings = service.read_settings(store, org, consistent=True)
    plan, currency = catalogue.PLANS[settings["plan"]], settings["currency"]
    measured = service.usage_of(store, org, period, plan)
    lines = build_lines(plan, currency, period, measured.channels, measured.contacts_stored)
    amounts = totals(lines, Decimal(settings["tax_rate"]), currency)
    invoice_id, stamp = new_id("inv"), clock.iso(now)
    for _ in range(5):
        seq_item = store.get(sequence_key(org), consistent=True)
        last = int((seq_item or {}).get("last") or 0)
        item: Item = {
            **invoice_key(org, invoice_id),
            "entity": "Invoice",
            "id": invoice_id,
            "organization_id": org,
            "invoice_number": f"INV-{org[-6:].upper()}-{last + 1:05d}",
            "status": "draft",
            "currency": currency,
            **amounts,
            "tax_rate": settings["tax_rate"],
            "period": period,
            "period_start": clock.iso(start),
            "period_end": clock.iso(end),
            "target_plan": plan.id,
            "payment_terms_days": settings["payment_terms_days"],
            "notes": body.notes,
            "billing_profile": settings["billing_profile"],
            "lines": lines,
            "usage": {"messages_sent": measured.messages_sent, "contacts_stored": measured.contacts_stored},
            "created_at": stamp,
            "updated_at": stamp,
            "version": 1,
        }
        seq = Update(
            key=sequence_key(org),
            expression="SET #last = :n, #e = :e",
            condition="attribute_not_exists(#last)" if not last else "#last = :prev",
            names={"#last": "last", "#e": "entity"},
            values={":n": last + 1, ":e": "InvoiceSequence", **({":prev": last} if last else {})},
            error=_SequenceMoved(),
        )
        try:
            store.transact(
                [
                    Put(
                        item={**period_key(org, period), "entity": "InvoicePeriod", "invoice_id": invoice_id},
                        condition="attribute_not_exists(PK)",
                        error=_PeriodTaken(),
                    ),
                    seq,
                    Put(item=item, condition="attribute_not_exists(PK)"),
                    audit_put(
                        auth,
                        "invoice.created",
                        "invoice",
                        invoice_id,
                        after={"period": period, "invoice_number": item["invoice_number"], **amounts},
                    ),
                    outbox_put(org, "billing.invoice.created", _event(item)),
                ]
            )
        except _PeriodTaken:
            winner = _existing(store, org, period)
            if winner is None:  # taken and released (voided) in between: try again
                continue
            return view(winner), False
        except _SequenceMoved:
            continue
        return view(item), True
    raise Conflict("Invoices were being generated concurrently; retry.")


def _event(item: Item, previous: str | None = None) -> Item:
    return {
        "invoice_id": item["id"],
        "invoice_number": item["invoice_number"],
        "status": item["status"],
        "previous_status": previous,
        "total_amount": item["total_amount"],
        "currency": item["currency"],
        "period": item["period"],
        "organization_id": item["organization_id"],
    }


# Changes -------------------------------------------------------------------------------------------------------------
def _write(store: Store, auth: AuthContext, old: Item, new: Item, action: str, extra: list[TxOp] | None = None) -> None:
    changed = [k for k in new if k not in ("updated_at", "version") and new.get(k) != old.get(k)]
    store.transact(
        [
            Put(
                item=new,
                **versioned(old["version"], condition="#s = :s", names={"#s": "status"}, values={":s": old["status"]}),
                error=Conflict("The invoice changed meanwhile; retry."),
            ),
            audit_put(
                auth,
                action,
                "invoice",
                old["id"],
                before={k: old.get(k) for k in changed},
                after={k: new.get(k) for k in changed},
            ),
            outbox_put(new["organization_id"], "billing.invoice.updated", _event(new, old["status"])),
            *(extra or []),
        ]
    )


def update(store: Store, auth: AuthContext, invoice_id: str, body: models.InvoiceUpdate) -> models.Invoice:
    item = get_item(store, auth.org_id, invoice_id, consistent=True)
    if item["status"] != "draft":
        raise Conflict(f"Only a draft invoice can be edited; this one is {item['status']}.")
    if "notes" not in body.model_fields_set or body.notes == item.get("notes"):
        return view(item)
    new = {**item, "notes": body.notes, "updated_at": clock.now_iso(), "version": int(item["version"]) + 1}
    _write(store, auth, item, new, "invoice.updated")
    return view(new)


def _refuse(item: Item, target: str) -> Conflict:
    allowed = sorted(TRANSITIONS[item["status"]])
    return Conflict(
        f"A {item['status']} invoice cannot become {target}.",
        details=[{"status": item["status"], "requested": target, "allowed": allowed}],
    )


def transition(store: Store, auth: AuthContext, invoice_id: str, target: str, body: Any = None) -> models.Invoice:
    """Move the invoice to `target` if the state table allows it (the status read is the write's condition)."""
    org = auth.org_id
    item = get_item(store, org, invoice_id, consistent=True)
    if target not in TRANSITIONS[item["status"]]:
        raise _refuse(item, target)
    now = clock.now()
    new: Item = {**item, "status": target, "updated_at": clock.iso(now), "version": int(item["version"]) + 1}
    extra: list[TxOp] = []
    later: list[Mail] = []
    if target == "open":
        profile = service.read_settings(store, org, consistent=True)["billing_profile"]
        missing = [f for f in ISSUE_REQUIRES if not profile.get(f)]
        if missing:
            raise Conflict(
                "Complete the billing profile before issuing an invoice.",
                details=[
                    {"field": f"billing_profile.{f}", "message": "is required to issue an invoice"} for f in missing
                ],
            )
        new |= {
            "billing_profile": profile,
            "issued_at": clock.iso(now),
            "due_at": clock.iso(now + timedelta(days=int(item.get("payment_terms_days", 30)))),
        }
        mails = _issued_mails(store, org, new)
        extra += mail_puts(mails[:MAILS_IN_TRANSACTION])
        later = mails[MAILS_IN_TRANSACTION:]
    elif target == "paid":
        paid_at = _paid_at(body.paid_at, item) if body.paid_at else now
        new |= {
            "paid_at": clock.iso(paid_at),
            "latest_reference_id": body.reference_id,
            "latest_session_status": "complete",
        }
    else:  # void, uncollectible
        if body is not None and body.reason:
            new["status_reason"] = body.reason
        if target == "void":
            new["voided_at"] = clock.iso(now)
            if item.get("latest_session_status") == "open":
                new["latest_session_status"] = "expired"
            extra.append(  # the period is free again: a corrected invoice can be generated
                Delete(
                    key=period_key(org, item["period"]),
                    condition="invoice_id = :id",
                    values={":id": invoice_id},
                    error=Conflict("The invoice's period changed meanwhile; retry."),
                )
            )
    _write(store, auth, item, new, f"invoice.{target}", extra)
    if target == "open" and later:
        _enqueue_later(store, later)
    return view(new)


def _paid_at(value: str, item: Item) -> Any:
    at = clock.parse_iso_input(value, "body.paid_at")
    if at > clock.now() + timedelta(minutes=5):
        raise ValidationFailed.field("body.paid_at", "is in the future")
    issued = clock.parse_stored(item.get("issued_at"), "invoice issued_at")
    if issued and at < issued:
        raise ValidationFailed.field("body.paid_at", "is before the invoice was issued")
    return at


def checkout(store: Store, auth: AuthContext, invoice_id: str) -> models.Invoice:
    """Opens a payment session for an open (or uncollectible) invoice: `latest_reference_id` names it and
    `latest_session_status` is `open` until the invoice is paid (`complete`) or voided (`expired`)."""
    item = get_item(store, auth.org_id, invoice_id, consistent=True)
    if item["status"] not in ("open", "uncollectible"):
        raise Conflict(
            f"A {item['status']} invoice cannot be paid.",
            details=[{"status": item["status"], "allowed": ["open", "uncollectible"]}],
        )
    new = {
        **item,
        "latest_reference_id": new_id("bps"),
        "latest_session_status": "open",
        "updated_at": clock.now_iso(),
        "version": int(item["version"]) + 1,
    }
    _write(store, auth, item, new, "invoice.checkout")
    return view(new)


def _issued_mails(store: Store, org: str, invoice: Item) -> list[Mail]:
    """The mails of a new invoice: to the profile's billing e-mail, then every member who wants billing e-mails."""
    # on first use: keeps switchboard.settings.notifications off the cold start
    from switchboard.settings import notifications

    billing = str(invoice["billing_profile"].get("billing_email") or "").lower()
    members = set(notifications.recipients(store, org, "billing")) - {billing}
    amount = f"{invoice['total_amount']} {invoice['currency']}"
    text = f"Invoice {invoice['invoice_number']} for {invoice['period']}: {amount}, due {invoice['due_at'][:10]}."
    subject = f"Invoice {invoice['invoice_number']}"
    return [Mail(to=to, subject=subject, text=text) for to in [billing, *sorted(members)] if to]


def _enqueue_later(store: Store, mails: list[Mail]) -> None:
    """Mails beyond what the invoice's own transaction holds, queued right after it; the invoice is issued already,
    so a failure here is logged, never raised."""
    try:
        enqueue(store, mails)
    except Exception as err:  # noqa: BLE001 - logged, never raised
        Logger(child=True).warning(
            "invoice e-mails not queued", extra={"count": len(mails), "error_type": type(err).__name__}
        )
