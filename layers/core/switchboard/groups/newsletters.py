"""Newsletters (WhatsApp channels): one record per newsletter and channel of the organization — created by it
(`owner`) or followed (`subscriber`) — and their posts, read through the channel's provider."""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.groups import common, models
from switchboard.ids import new_id
from switchboard.paging import cursor_page, query_fingerprint, read_page
from switchboard.store import Put, Store, TxOp, keys

Item = dict[str, Any]


def newsletter_key(org: str, jid: str, channel_id: str) -> dict[str, str]:
    return common.org_key(org, f"NEWSLETTER#{jid}#{channel_id}")


def invite_key(org: str, code: str) -> dict[str, str]:
    return common.org_key(org, f"NLINVITE#{code}")


def view(item: Item) -> models.Newsletter:
    return models.Newsletter.model_validate(
        {**item, "id": item["jid"], "invite_link": common.newsletter_link(item.get("invite_code"))}
    )


def _changed() -> Conflict:
    return Conflict("The newsletter changed meanwhile; retry.")


def resolve(store: Store, org: str, jid: str, channel_id: str | None = None, *, consistent: bool = False) -> Item:
    """The organization's record of a newsletter (404 otherwise; on several channels, `channel_id` picks one)."""
    text = jid.strip().lower()
    if not common.NEWSLETTER_JID.match(text):
        raise common.not_found("newsletter")
    if channel_id:
        item = store.get(newsletter_key(org, text, channel_id), consistent=consistent)
    else:
        found = store.query(keys.org_pk(org), sk_prefix=f"NEWSLETTER#{text}#", limit=2, consistent=consistent).items
        if len(found) > 1:
            raise ValidationFailed.field("query.channel_id", "the newsletter is on several of your channels: give one")
        item = found[0] if found else None
    if item is None:
        raise common.not_found("newsletter")
    return item


def create(store: Store, auth: AuthContext, body: models.NewsletterCreate) -> models.Newsletter:
    org = auth.org_id
    channel, provider = common.adapter(store, org, body.channel_id, "newsletters")
    made = provider.newsletters(
        "create", {"key": new_id("nl"), "name": body.name, "description": body.description or ""}
    )
    jid, now = common.jid(str(made["jid"]), "jid", newsletter=True), clock.now_iso()
    item: Item = {
        **newsletter_key(org, jid, channel["id"]),
        "entity": "Newsletter",
        "jid": jid,
        "organization_id": org,
        "channel_id": channel["id"],
        "name": body.name,
        "description": body.description or "",
        "role": "owner",
        "subscribed": True,
        "invite_code": made.get("invite_code"),
        "invite_revision": 0,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    ops: list[TxOp] = [
        Put(item=item, condition="attribute_not_exists(PK)", error=Conflict("This newsletter already exists.")),
        audit_put(auth, "newsletter.created", "newsletter", jid, after={"name": body.name}),
    ]
    if item["invite_code"]:
        ops.append(_invite_put(org, item["invite_code"], jid))
    store.transact(ops)
    return view(item)


def _invite_put(org: str, code: str, jid: str, *, revoked: bool = False) -> Put:
    return Put(item={**invite_key(org, code), "entity": "NewsletterInvite", "jid": jid, "revoked": revoked})


def list_newsletters(
    store: Store,
    auth: AuthContext,
    *,
    limit: int,
    cursor: str | None,
    channel_id: str | None,
    role: str | None,
    subscribed: bool | None,
) -> tuple[list[models.Newsletter], str | None]:
    filters = {"channel_id": channel_id, "role": role, "subscribed": subscribed}
    items, nxt = cursor_page(
        store,
        auth.org_id,
        query_fingerprint("newsletters", filters),
        cursor,
        limit=limit,
        sk_prefix="NEWSLETTER#",
        filters=filters,
    )
    return [view(i) for i in items], nxt


def get(store: Store, auth: AuthContext, jid: str, channel_id: str | None) -> models.Newsletter:
    return view(resolve(store, auth.org_id, jid, channel_id))


def invite_link(
    store: Store, auth: AuthContext, body: models.NewsletterInviteLinkRequest
) -> models.NewsletterInviteLink:
    """400 `unsupported_by_provider` on a channel whose provider has no newsletters (the spec's stable error)."""
    org = auth.org_id
    _, provider = common.adapter(store, org, body.channel_id, "newsletters")
    item = resolve(store, org, body.newsletter_jid, body.channel_id, consistent=True)
    code = item.get("invite_code")
    if body.revoke and item.get("role") != "owner":
        raise Conflict("Only the newsletter's owner can reset its invite link.")
    if body.revoke or not code:
        revision = int(item.get("invite_revision", 0)) + (1 if code and body.revoke else 0)
        new_code = str(provider.newsletters("invite_code", {"jid": item["jid"], "revision": revision})["invite_code"])
        if new_code != code:
            ops: list[TxOp] = [_invite_put(org, new_code, item["jid"])]
            if code:
                ops.append(_invite_put(org, code, item["jid"], revoked=True))
            item, put = common.bump(item, {"invite_code": new_code, "invite_revision": revision}, _changed())
            store.transact([put, *ops])
    return models.NewsletterInviteLink(
        newsletter_jid=item["jid"],
        invite_code=item["invite_code"],
        invite_link=common.newsletter_link(item["invite_code"]) or "",
        revoked=body.revoke and bool(code),
    )


def _target_jid(store: Store, org: str, provider: Any, body: models.NewsletterSubscribe) -> tuple[str, Item]:
    """The newsletter's JID and what the provider says about it (name, description, invite code)."""
    if body.newsletter_jid:
        jid = common.jid(body.newsletter_jid, "body.newsletter_jid", newsletter=True)
        return jid, provider.newsletters("info", {"jid": jid})
    code = common.invite_code(body.invite_code, body.invite_link, "body", newsletter=True)
    invite = store.get(invite_key(org, code), consistent=True)
    if invite and invite.get("revoked"):
        raise NotFound("The invite link is not valid, or it was reset.")
    if invite:
        return str(invite["jid"]), provider.newsletters("info", {"jid": invite["jid"]})
    info = provider.newsletters("resolve_invite", {"invite_code": code})
    return common.jid(str(info["jid"]), "jid", newsletter=True), info


def subscribe(store: Store, auth: AuthContext, body: models.NewsletterSubscribe) -> models.Newsletter:
    """Follows (or with `unsubscribe`, stops following) a newsletter on the channel; the record stays either way.
    The owner follows its own newsletter for good (unsubscribing it is 409 `conflict`)."""
    org = auth.org_id
    channel, provider = common.adapter(store, org, body.channel_id, "newsletters")
    if body.unsubscribe:
        ref = body.newsletter_jid or _target_jid(store, org, provider, body)[0]
        record = resolve(store, org, ref, channel["id"], consistent=True)
        if record.get("role") == "owner":
            raise Conflict("The owner of a newsletter cannot unsubscribe from it.")
        if not record.get("subscribed"):
            return view(record)
        provider.newsletters("unsubscribe", {"jid": record["jid"]})
        new, put = common.bump(record, {"subscribed": False}, _changed())
        store.transact([put])
        return view(new)
    jid, info = _target_jid(store, org, provider, body)
    existing = store.get(newsletter_key(org, jid, channel["id"]), consistent=True)
    if existing and existing.get("subscribed"):
        return view(existing)
    provider.newsletters("subscribe", {"jid": jid})
    if existing:
        new, put = common.bump(existing, {"subscribed": True}, _changed())
        store.transact([put])
        return view(new)
    now = clock.now_iso()
    item: Item = {
        **newsletter_key(org, jid, channel["id"]),
        "entity": "Newsletter",
        "jid": jid,
        "organization_id": org,
        "channel_id": channel["id"],
        "name": info.get("name") or jid,
        "description": info.get("description") or "",
        "role": "subscriber",
        "subscribed": True,
        "invite_code": info.get("invite_code"),
        "invite_revision": 0,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    store.put(item, condition="attribute_not_exists(PK)", error=Conflict("Subscribed meanwhile; retry."))
    return view(item)


def messages(
    store: Store, auth: AuthContext, jid: str, *, channel_id: str, limit: int, cursor: str | None
) -> models.NewsletterMessages:
    """A page of the newsletter's posts, newest first, from the channel's provider. The provider's continuation is
    sealed in our cursor (bound to the organization, the newsletter and the channel)."""
    org = auth.org_id
    _, provider = common.adapter(store, org, channel_id, "newsletters")
    item = resolve(store, org, jid, channel_id)
    fingerprint = query_fingerprint("newsletter-messages", {"jid": item["jid"], "channel_id": channel_id})

    def read(start: dict | None) -> tuple[list[models.NewsletterMessage], dict | None]:
        answer = provider.newsletters(
            "messages", {"jid": item["jid"], "limit": limit, "cursor": (start or {}).get("p")}
        )
        rows = [models.NewsletterMessage.model_validate(m) for m in (answer.get("messages") or [])[:limit]]
        nxt = answer.get("next_cursor")
        return rows, ({"p": nxt} if nxt is not None else None)

    rows, next_cursor = read_page(org, fingerprint, cursor, read)
    return models.NewsletterMessages(messages=rows, next_cursor=next_cursor or "")
