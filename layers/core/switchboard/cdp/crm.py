"""Comments on contact objects and relationships between a contact object and another record (object or contact).

Keys (under `ORG#<org>`): `CDPCMT#<obj_id>#<cmt_id>` a comment (ids are ULIDs: a record's comments read oldest first
with one Query); `CDPREL#<obj_id>#<related_id>` a link, written in both directions when the related record is an
object too (each side lists its links with one Query); a link to a contact carries GSI1 `ORG#<org>#CONTACTLINKS#<ct>`
/ `<obj_id>`, so the contact's erasure finds it. Every real change emits one event in its own transaction:
`crm.comment.created|deleted`, `crm.relationship.linked|unlinked` (relinking with another label is an update, not
a link; unlinking what is not linked is a 404).
"""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.cdp import models
from switchboard.cdp.objects import get_object_item, object_key, record_event, type_entry_delete
from switchboard.contacts import repository as contact_repo
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_id
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.store import ConditionCheck, Delete, Put, Store, TxOp, keys

Item = dict[str, Any]


def comment_key(org: str, object_id: str, comment_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPCMT#{object_id}#{comment_id}")


def link_key(org: str, object_id: str, related_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPREL#{object_id}#{related_id}")


def contact_links_pk(org: str, contact_id: str) -> str:
    """GSI1 partition of the links whose related record is this contact."""
    return f"ORG#{org}#CONTACTLINKS#{contact_id}"


def _record_exists(org: str, object_id: str) -> ConditionCheck:
    return ConditionCheck(
        key=object_key(org, object_id), condition="attribute_exists(PK)", error=NotFound("No such contact object.")
    )


# Comments -------------------------------------------------------------------------------------------------------------
def _comment_event(org: str, event: str, comment: Item) -> Put:
    return outbox_put(
        org,
        event,
        {
            "comment_id": comment["id"],
            "record_id": comment["record_id"],
            "object_kind": comment["object_kind"],
            "contact_id": comment["contact_id"],
            "author_id": comment.get("author_id"),
            "organization_id": org,
        },
    )


def add_comment(store: Store, auth: AuthContext, object_id: str, body: models.CommentCreate) -> models.Comment:
    org = auth.org_id
    record = get_object_item(store, org, object_id)
    comment_id = new_id("cmt")
    comment: Item = {
        **comment_key(org, object_id, comment_id),
        "entity": "Comment",
        "id": comment_id,
        "record_id": object_id,
        "object_kind": record["object_kind"],
        "contact_id": record["contact_id"],
        "body": body.body,
        "author_id": auth.user_id or auth.principal_id,
        "created_at": clock.now_iso(),
    }
    store.transact(
        [
            Put(item=comment, condition="attribute_not_exists(PK)"),
            _record_exists(org, object_id),
            _comment_event(org, "crm.comment.created", comment),
        ]
    )
    return models.Comment.model_validate(comment)


def list_comments(
    store: Store, auth: AuthContext, object_id: str, *, limit: int, cursor: str | None
) -> tuple[list[models.Comment], str | None]:
    """Oldest first."""
    org = auth.org_id
    get_object_item(store, org, object_id)
    fingerprint = query_fingerprint("cdp.comments", {"record": object_id})
    rows, next_cursor = cursor_page(store, org, fingerprint, cursor, sk_prefix=f"CDPCMT#{object_id}#", limit=limit)
    return [models.Comment.model_validate(i) for i in rows], next_cursor


def delete_comment(store: Store, auth: AuthContext, object_id: str, comment_id: str) -> None:
    org = auth.org_id
    comment = store.require(comment_key(org, object_id, comment_id), "No such comment.", consistent=True)
    store.transact(
        [
            Delete(
                key=comment_key(org, object_id, comment_id),
                condition="attribute_exists(PK)",
                error=NotFound("No such comment."),
            ),
            _comment_event(org, "crm.comment.deleted", comment),
        ]
    )


# Relationships --------------------------------------------------------------------------------------------------------
def _related(store: Store, org: str, related_id: str) -> tuple[Item, str]:
    """The related record and its kind (`contact` or an object kind); 404 when it does not exist here."""
    if related_id.startswith("obj_"):
        return get_object_item(store, org, related_id), "object"
    if related_id.startswith("ct_"):
        contact = store.get(contact_repo.contact_key(org, related_id))
        if contact is not None:
            return contact, "contact"
    raise NotFound("No such record to link: give a contact object id (obj_…) or a contact id (ct_…).")


def _link_event(org: str, event: str, link: Item) -> Put:
    return outbox_put(
        org,
        event,
        {
            "record_id": link["record_id"],
            "object_kind": link["object_kind"],
            "related_id": link["related_id"],
            "related_kind": link["related_kind"],
            "label": link.get("label"),
            "organization_id": org,
        },
    )


def _view_link(item: Item) -> models.Relationship:
    return models.Relationship.model_validate(item)


def set_link(
    store: Store, auth: AuthContext, object_id: str, related_id: str, body: models.RelationshipSet
) -> tuple[models.Relationship, bool]:
    """Links the record to another one (→ created?). Linking again only updates the label, without an event."""
    org = auth.org_id
    if related_id == object_id:
        raise ValidationFailed.field("path.relatedID", "cannot link a record to itself")
    record = get_object_item(store, org, object_id)
    related, space = _related(store, org, related_id)
    related_kind = "contact" if space == "contact" else str(related["object_kind"])
    now = clock.now_iso()
    existing = store.get(link_key(org, object_id, related_id), consistent=True)
    link: Item = {
        **link_key(org, object_id, related_id),
        "entity": "Relationship",
        "record_id": object_id,
        "object_kind": record["object_kind"],
        "related_id": related_id,
        "related_kind": related_kind,
        "label": body.label,
        "created_at": existing["created_at"] if existing else now,
        "updated_at": now,
    }
    mirror: Item | None = None
    if space == "contact":  # findable from the contact (its erasure unlinks it): GSI1
        link |= {"GSI1PK": contact_links_pk(org, related_id), "GSI1SK": object_id}
    if space == "object":
        mirror = {
            **link,
            **link_key(org, related_id, object_id),
            "record_id": related_id,
            "object_kind": related_kind,
            "related_id": object_id,
            "related_kind": record["object_kind"],
        }
    if existing is not None:
        if existing.get("label") == body.label:
            return _view_link(existing), False
        ops: list[TxOp] = [
            Put(item=link, condition="attribute_exists(PK)", error=Conflict("The link changed concurrently; retry."))
        ]
        if mirror:
            ops.append(Put(item=mirror))
        store.transact(ops)
        return _view_link(link), False
    gone = Conflict("The records were linked concurrently; read the link again.")
    ops = [Put(item=link, condition="attribute_not_exists(PK)", error=gone), _record_exists(org, object_id)]
    if mirror:
        ops += [Put(item=mirror, condition="attribute_not_exists(PK)", error=gone), _record_exists(org, related_id)]
    else:
        ops.append(
            ConditionCheck(
                key=contact_repo.contact_key(org, related_id),
                condition="attribute_exists(PK)",
                error=NotFound("No such contact."),
            )
        )
    ops.append(_link_event(org, "crm.relationship.linked", link))
    store.transact(ops)
    return _view_link(link), True


def unlink(store: Store, auth: AuthContext, object_id: str, related_id: str) -> None:
    org = auth.org_id
    link = store.require(link_key(org, object_id, related_id), "The records are not linked.", consistent=True)
    store.transact(_unlink_ops(org, link))


def _unlink_ops(org: str, link: Item) -> list[TxOp]:
    ops: list[TxOp] = [
        Delete(
            key=link_key(org, link["record_id"], link["related_id"]),
            condition="attribute_exists(PK)",
            error=NotFound("The records are not linked."),
        )
    ]
    if link["related_id"].startswith("obj_"):
        ops.append(Delete(key=link_key(org, link["related_id"], link["record_id"])))
    ops.append(_link_event(org, "crm.relationship.unlinked", link))
    return ops


def list_links(
    store: Store, auth: AuthContext, object_id: str, *, limit: int, cursor: str | None
) -> tuple[list[models.Relationship], str | None]:
    org = auth.org_id
    get_object_item(store, org, object_id)
    fingerprint = query_fingerprint("cdp.links", {"record": object_id})
    rows, next_cursor = cursor_page(store, org, fingerprint, cursor, sk_prefix=f"CDPREL#{object_id}#", limit=limit)
    return [_view_link(i) for i in rows], next_cursor


def remove_dependents(store: Store, org: str, record: Item) -> None:
    """After a record's delete: its comments go silently (the record's `crm.record.deleted` covers them), each of its
    links goes with `crm.relationship.unlinked` (the other record changed too). Re-running it is harmless."""
    object_id = record["id"]
    comments = store.query_all(keys.org_pk(org), sk_prefix=f"CDPCMT#{object_id}#")
    drops: list[TxOp] = [Delete(key={"PK": c["PK"], "SK": c["SK"]}) for c in comments]
    for start in range(0, len(drops), 100):
        store.transact(drops[start : start + 100])
    for link in store.query_all(keys.org_pk(org), sk_prefix=f"CDPREL#{object_id}#"):
        try:
            store.transact(_unlink_ops(org, link))
        except NotFound:
            continue


def delete_object(store: Store, auth: AuthContext, object_id: str) -> None:
    """The record, then its comments and its links (`crm.relationship.unlinked` for each link)."""
    org = auth.org_id
    record = get_object_item(store, org, object_id)
    store.transact(
        [
            Delete(key=object_key(org, object_id), condition="attribute_exists(PK)", error=NotFound("No such record.")),
            type_entry_delete(org, record),
            record_event(org, "crm.record.deleted", record),
        ]
    )
    remove_dependents(store, org, record)
