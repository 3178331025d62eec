"""Contacts imports from CSV or JSON lines: validated row by row, committed atomically per batch, reported.

Each row is planned by `contacts.service.plan_upsert` (the contacts rules: custom fields, identity normalisation,
one owner per identity through the sentinels) and its operations join the current batch while it holds at most 100
items; a batch is one `TransactWriteItems`, so its rows land together or not at all (the contact counts follow
from the stream, `contacts.counter`). A batch cancelled because an
identity was claimed or a contact changed meanwhile is planned again once; rows still failing are reported.
A row may not repeat an identity or a contact of an earlier row (reported, never half-merged).

Keys (under `ORG#<org>`): `CDPIMPORT#<imp_id>` the report (ULID ids: newest first with one Query). The report and
`crm.import.committed` are written together once the rows are committed; no event when nothing changed.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from switchboard import clock, jsonbody
from switchboard.access import AuthContext
from switchboard.cdp import fields, models
from switchboard.contacts import models as contact_models
from switchboard.contacts import service as contacts
from switchboard.contacts.identifiers import Numbers, numbers_for
from switchboard.errors import DomainError, ValidationFailed
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_id
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.store import Put, Store, TxOp, keys

Item = dict[str, Any]
MAX_ROWS = 500
MAX_BATCH_ITEMS = 100
MAX_ERRORS = 1000
PROFILE_COLUMNS = ("name", "first_name", "last_name", "email", "phone", "company", "avatar_url")
IDENTITY_COLUMNS = ("whatsapp", "instagram")
_EXTERNAL = re.compile(r"^external_id\.([A-Za-z0-9_.:-]{1,64})$")
_ATTRIBUTE = re.compile(r"^attributes\.([a-z][a-z0-9_]{0,63})$")
_TRUE, _FALSE = {"true", "yes", "y", "1"}, {"false", "no", "n", "0"}


def import_key(org: str, import_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPIMPORT#{import_id}")


class RowError(Exception):
    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__(problems)
        self.problems = problems


# Parsing ------------------------------------------------------------------------------------------------------------
def _column_ok(name: str) -> bool:
    return name in PROFILE_COLUMNS or name in IDENTITY_COLUMNS or bool(_EXTERNAL.match(name) or _ATTRIBUTE.match(name))


def _csv_rows(content: str) -> list[dict[str, str]]:
    reader = csv.reader(io.StringIO(content.lstrip("\ufeff")))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ValidationFailed.field("body.content", "is empty: a header row is required") from None
    except csv.Error as err:
        raise ValidationFailed.field("body.content", f"is not CSV: {err}") from None
    for name in header:
        if not _column_ok(name):
            raise ValidationFailed.field("body.content", f"has an unknown column {name!r} in its header")
    if len(set(header)) != len(header):
        raise ValidationFailed.field("body.content", "repeats a column in its header")
    rows: list[dict[str, str]] = []
    try:
        for values in reader:
            if not any(v.strip() for v in values):
                continue
            if len(values) > len(header):
                rows.append({"__error__": f"has {len(values)} cells for {len(header)} columns"})
                continue
            rows.append({h: v for h, v in zip(header, values, strict=False) if v.strip() != ""})
            if len(rows) > MAX_ROWS:
                break
    except csv.Error as err:
        raise ValidationFailed.field("body.content", f"is not CSV: {err}") from None
    return rows


def _jsonl_rows(content: str) -> list[Any]:
    rows: list[Any] = []
    for line in content.splitlines():
        if not line.strip():
            continue
        try:
            rows.append(jsonbody.loads(line))
        except jsonbody.BodyRefused as err:  # a key twice, a number DynamoDB cannot store
            rows.append({"__error__": str(err)})
        except jsonbody.TooDeep as err:
            rows.append({"__error__": err.msg})
        except ValueError:
            rows.append({"__error__": "is not a JSON object"})
        if len(rows) > MAX_ROWS:
            break
    return rows


def _coerce(definition: Item | None, text: str) -> Any:
    """A CSV cell as the custom field's type expects it (the type's own check happens later)."""
    kind = definition["type"] if definition else "text"
    if kind == "number":
        try:
            return int(text) if re.fullmatch(r"[+-]?\d+", text.strip()) else float(text)
        except ValueError:
            return text
    if kind == "boolean":
        low = text.strip().lower()
        return True if low in _TRUE else False if low in _FALSE else text
    if kind == "multi_select":
        return [v.strip() for v in text.split(";") if v.strip()]
    return text


def _body_of(row: Any, definitions: dict[str, Item], from_csv: bool) -> contact_models.ContactCreate:
    if not isinstance(row, dict):
        raise RowError([("row", "must be a JSON object")])
    if "__error__" in row:
        raise RowError([("row", str(row["__error__"]))])
    body: Item = {}
    attributes: Item = {}
    identities: list[Item] = []
    problems: list[tuple[str, str]] = []
    for name, value in row.items():
        if value is None:
            continue
        if name == "attributes" and not from_csv:
            if not isinstance(value, dict):
                problems.append(("attributes", "must be an object"))
            else:
                attributes.update({k: v for k, v in value.items() if v is not None})
        elif name in PROFILE_COLUMNS:
            body[name] = value
        elif name in IDENTITY_COLUMNS:
            identities.append({"type": name, "value": value})
        elif match := _EXTERNAL.match(name):
            identities.append({"type": "external_id", "value": value, "source": match.group(1)})
        elif match := _ATTRIBUTE.match(name):
            key = match.group(1)
            attributes[key] = _coerce(definitions.get(key), value) if from_csv else value
        else:
            problems.append((name, "is not a column of a contacts import"))
    if problems:
        raise RowError(problems)
    if attributes:
        body["attributes"] = attributes
    if identities:
        body["identities"] = identities
    if not (body.get("email") or body.get("phone") or identities):
        raise RowError([("row", "needs an email, a phone or another identity")])
    try:
        return contact_models.ContactCreate.model_validate(body)
    except ValidationError as err:
        raise RowError(
            [(".".join(str(p) for p in e["loc"]) or "row", str(e["msg"])) for e in err.errors(include_url=False)]
        ) from None


def _field_name(path: str) -> str:
    name = path.removeprefix("row.").removeprefix("row")
    return name.removesuffix(".value") or "row"


# Import -------------------------------------------------------------------------------------------------------------
@dataclass
class _Run:
    store: Store
    auth: AuthContext
    dry_run: bool
    numbers: Numbers  # one organization lookup of the default region for every row (when one needs it)
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    batches: int = 0
    errors: list[models.RejectedRow] = field(default_factory=list)
    rejected_rows: set[int] = field(default_factory=set)
    identities: dict[str, int] = field(default_factory=dict)
    seen_contacts: dict[str, int] = field(default_factory=dict)
    pending: list[tuple[int, contact_models.ContactCreate, contacts.UpsertPlan]] = field(default_factory=list)

    def reject(self, row: int, problems: list[tuple[str, str]]) -> None:
        self.rejected_rows.add(row)
        self.errors.extend(models.RejectedRow(row=row, field=f, message=m) for f, m in problems)

    def plan(self, row: int, body: contact_models.ContactCreate) -> contacts.UpsertPlan | None:
        try:
            plan = contacts.plan_upsert(self.store, self.auth, body, field="row", numbers=self.numbers)
        except contacts.IdentityConflict:
            self.reject(row, [("identities", "belong to different contacts")])
            return None
        except ValidationFailed as err:
            self.reject(row, [(_field_name(d.get("field", "row")), str(d.get("message"))) for d in err.details])
            return None
        for sk in plan.identity_keys:
            if self.identities.get(sk, row) != row:
                self.reject(row, [("identities", f"repeats an identity of row {self.identities[sk]}")])
                return None
        if self.seen_contacts.get(plan.item["id"], row) != row:
            self.reject(row, [("row", f"is the same contact as row {self.seen_contacts[plan.item['id']]}")])
            return None
        return plan

    def add(self, row: int, body: contact_models.ContactCreate) -> None:
        plan = self.plan(row, body)
        if plan is None:
            return
        self.identities |= dict.fromkeys(plan.identity_keys, row)
        self.seen_contacts[plan.item["id"]] = row
        if not plan.ops:
            self.unchanged += 1
            return
        if self.dry_run:
            self._count(plan)
            return
        if len(self._batch_ops([*(op for _, _, p in self.pending for op in p.ops), *plan.ops])) > MAX_BATCH_ITEMS:
            self.flush()
        self.pending.append((row, body, plan))

    def _count(self, plan: contacts.UpsertPlan) -> None:
        if plan.created:
            self.created += 1
        else:
            self.updated += 1

    def _batch_ops(self, ops: list[TxOp]) -> list[TxOp]:
        """One transaction's operations: the rows' own (no shared counter among them)."""
        return ops

    def flush(self) -> None:
        batch, self.pending = self.pending, []
        for attempt in range(2):
            if not batch:
                return
            try:
                self.store.transact(self._batch_ops([op for _, _, plan in batch for op in plan.ops]))
            except DomainError as err:
                if attempt == 1:
                    for row, _, _ in batch:
                        self.reject(row, [("row", f"was not committed: {err.message}")])
                    return
                batch = self._replan(batch)
                continue
            self.batches += 1
            for _, _, plan in batch:
                self._count(plan)
            return

    def _replan(self, batch: list) -> list:
        """Plans the rows of a cancelled batch again against what is stored now."""
        again = []
        for row, body, _ in batch:
            plan = self.plan(row, body)
            if plan is None:
                continue
            if not plan.ops:
                self.unchanged += 1
                continue
            again.append((row, body, plan))
        return again


def run(store: Store, auth: AuthContext, body: models.ImportCreate) -> models.ImportReport:
    org, started = auth.org_id, clock.now_iso()
    rows = _csv_rows(body.content) if body.format == "csv" else _jsonl_rows(body.content)
    if len(rows) > MAX_ROWS:
        raise ValidationFailed.field("body.content", f"holds more than {MAX_ROWS} rows; split the file")
    if not rows:
        raise ValidationFailed.field("body.content", "holds no rows")
    definitions = {d["key"]: d for d in fields.list_definitions(store, org)}
    state = _Run(store, auth, body.dry_run, numbers_for(store, org))
    for n, raw in enumerate(rows, start=1):
        try:
            contact = _body_of(raw, definitions, body.format == "csv")
        except RowError as err:
            state.reject(n, err.problems)
            continue
        state.add(n, contact)
    state.flush()
    import_id = new_id("imp")
    not_committed = any(e.message.startswith("was not committed") for e in state.errors)
    report: Item = {
        **import_key(org, import_id),
        "entity": "ContactsImport",
        "id": import_id,
        "format": body.format,
        "status": "validated" if body.dry_run else "partial" if not_committed else "committed",
        "dry_run": body.dry_run,
        "rows": len(rows),
        "created": state.created,
        "updated": state.updated,
        "unchanged": state.unchanged,
        "rejected": len(state.rejected_rows),
        "batches": state.batches,
        "errors": [e.model_dump(mode="json") for e in state.errors[:MAX_ERRORS]],
        "errors_truncated": len(state.errors) > MAX_ERRORS,
        "created_by": auth.user_id or auth.principal_id,
        "created_at": started,
        "completed_at": clock.now_iso(),
    }
    ops: list[TxOp] = [Put(item=report, condition="attribute_not_exists(PK)")]
    if not body.dry_run and state.created + state.updated:
        ops.append(
            outbox_put(
                org,
                "crm.import.committed",
                {
                    "import_id": import_id,
                    "object_kind": "contact",
                    "rows": len(rows),
                    "created": state.created,
                    "updated": state.updated,
                    "rejected": len(state.rejected_rows),
                    "organization_id": org,
                },
            )
        )
    store.transact(ops)
    return models.ImportReport.model_validate(report)


def get(store: Store, auth: AuthContext, import_id: str) -> models.ImportReport:
    item = store.require(import_key(auth.org_id, import_id), "No such import.")
    return models.ImportReport.model_validate(item)


def list_imports(
    store: Store, auth: AuthContext, *, limit: int, cursor: str | None
) -> tuple[list[models.ImportReport], str | None]:
    """Newest first."""
    org = auth.org_id
    fingerprint = query_fingerprint("cdp.imports", {})
    rows, next_cursor = cursor_page(store, org, fingerprint, cursor, sk_prefix="CDPIMPORT#", forward=False, limit=limit)
    return [models.ImportReport.model_validate(i) for i in rows], next_cursor
