"""What groups, communities and newsletters share: keys, the channel's adapter, phones, invite codes, filtered pages."""

from __future__ import annotations

import re
from typing import Any

from switchboard import clock
from switchboard.contacts.identifiers import Numbers, normalize_phone
from switchboard.errors import Conflict, NotFound, UnsupportedByProvider, ValidationFailed
from switchboard.groups.keys import group_key, jid_key
from switchboard.groups.models import INVITE_CODE_PATTERN
from switchboard.providers import provider_for
from switchboard.providers.base import Provider
from switchboard.store import Put, Store, keys, versioned

Item = dict[str, Any]
_INVITE_CODE = re.compile(INVITE_CODE_PATTERN)
_GROUP_LINK = re.compile(r"^(?:https?://)?chat\.whatsapp\.com/(?:invite/)?([^/?#\s]+)/?$", re.IGNORECASE)
_NEWSLETTER_LINK = re.compile(r"^(?:https?://)?(?:www\.)?whatsapp\.com/channel/([^/?#\s]+)/?$", re.IGNORECASE)
GROUP_JID = re.compile(r"^\d{6,40}(?:-\d{1,20})?@g\.us$")
NEWSLETTER_JID = re.compile(r"^\d{6,40}@newsletter$")
# A provider's own group id that is not a JID (Meta's Cloud API: base64-like and case-sensitive).
PROVIDER_GROUP_ID = re.compile(r"^[A-Za-z0-9_=-]{8,128}$")


def org_key(org: str, sk: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), sk)


def adapter(
    store: Store, org: str, channel_id: str, capability: str, *, connected: bool = True
) -> tuple[Item, Provider]:
    """The channel (404 when not the caller's), its adapter (400 `unsupported_by_provider` without `capability`) and,
    for provider calls, a connected state (409 `conflict` otherwise) — in that order."""
    from switchboard.messaging import channels  # and its models: only the routes that reach a channel need them

    channel = channels.get_item(store, org, channel_id)
    provider = provider_for(channel)
    if capability not in provider.capabilities():
        platform = channel.get("platform")
        raise UnsupportedByProvider(
            f"The {platform} provider does not support {capability}.",
            details=[{"platform": platform, "operation": capability}],
        )
    if connected and (channel.get("status") != "connected" or not channel.get("is_active", True)):
        raise Conflict("The channel is not connected.", details=[{"channel_status": channel.get("status")}])
    return channel, provider


def phones(raw: list[str], field: str, numbers: Numbers) -> list[str]:
    """Normalised, de-duplicated (first occurrence wins) phone numbers; a bad one is 400 naming its index."""
    out: list[str] = []
    for i, value in enumerate(raw):
        phone = normalize_phone(value, f"{field}.{i}", numbers)
        if phone not in out:
            out.append(phone)
    return out


def invite_code(code: str | None, link: str | None, field: str, *, newsletter: bool = False) -> str:
    """The code of an invite: given as such, or inside its link (`chat.whatsapp.com/<code>`,
    `whatsapp.com/channel/<code>` for newsletters)."""
    if link:
        pattern = _NEWSLETTER_LINK if newsletter else _GROUP_LINK
        match = pattern.match(link.strip())
        if not match:
            example = "https://whatsapp.com/channel/<code>" if newsletter else "https://chat.whatsapp.com/<code>"
            raise ValidationFailed.field(f"{field}.invite_link", f"is not an invite link ({example})")
        code, where = match.group(1), f"{field}.invite_link"
    else:
        where = f"{field}.invite_code"
    if not code or not _INVITE_CODE.match(code):
        raise ValidationFailed.field(where, "is not an invite code (6-64 letters, digits, '-' or '_')")
    return code


def group_link(code: str | None) -> str | None:
    return f"https://chat.whatsapp.com/{code}" if code else None


def newsletter_link(code: str | None) -> str | None:
    return f"https://whatsapp.com/channel/{code}" if code else None


def jid(value: str, field: str, *, newsletter: bool = False) -> str:
    text = value.strip().lower()
    pattern, example = (NEWSLETTER_JID, "120363…@newsletter") if newsletter else (GROUP_JID, "120363…@g.us")
    if not pattern.match(text):
        raise ValidationFailed.field(field, f"is not a {'newsletter' if newsletter else 'group'} JID ({example})")
    return text


def group_jid(value: str) -> str:
    """A group id as stored and looked up: a WhatsApp JID (`…@g.us`) lower-cased, a provider's own id (Meta's
    Cloud API group ids) kept exactly as given, since it is case-sensitive."""
    text = value.strip()
    return text.lower() if GROUP_JID.match(text.lower()) else text


def bump(item: Item, changes: Item, error: Conflict) -> tuple[Item, Put]:
    """The new version of a mutable record and its conditional Put (`version` = what was read)."""
    new = {**item, **changes, "updated_at": clock.now_iso(), "version": int(item.get("version", 1)) + 1}
    return new, Put(item=new, **versioned(item.get("version", 1)), error=error)


def not_found(what: str) -> NotFound:
    return NotFound(f"No such {what}.")


def resolve(store: Store, org: str, ref: str, channel_id: str | None = None, *, consistent: bool = False) -> Item:
    """A group of the organization by id or JID (404 otherwise; a JID on several channels needs `channel_id`)."""
    ref = ref.strip()
    if ref.startswith("grp_"):
        item = store.get(group_key(org, ref), consistent=consistent)
    elif GROUP_JID.match(ref.lower()) or PROVIDER_GROUP_ID.match(ref):
        jid = group_jid(ref)
        if channel_id:
            pointer = store.get(jid_key(org, jid, channel_id))
        else:
            found = store.query(keys.org_pk(org), sk_prefix=f"GROUPJID#{jid}#", limit=2).items
            if len(found) > 1:
                raise ValidationFailed.field("channel_id", "the group is on several of your channels: give channel_id")
            pointer = found[0] if found else None
        item = store.get(group_key(org, pointer["group_id"]), consistent=consistent) if pointer else None
    else:
        item = None
    if item is None or item.get("entity") != "Group" or (channel_id and item["channel_id"] != channel_id):
        raise not_found("group")
    return item
