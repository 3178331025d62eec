"""Keys of a group's items in the organization's partition: the record, the pointer from a channel's WhatsApp JID
(read by conversations to find our group), the invite code and a provider's asynchronous create request."""

from __future__ import annotations

from switchboard.store import keys


def group_key(org: str, group_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"GROUP#{group_id}")


def jid_key(org: str, jid: str, channel_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"GROUPJID#{jid}#{channel_id}")


def invite_key(org: str, code: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"GROUPINVITE#{code}")


def request_key(org: str, channel_id: str, request_id: str) -> dict[str, str]:
    """Pointer from a provider's asynchronous create request to the group record it completes."""
    return keys.key(keys.org_pk(org), f"GROUPREQ#{channel_id}#{request_id}")
