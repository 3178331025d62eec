"""The signed-in user's own area (`/v1/users/me/*`) and account lookups (`/v1/users/lookup/*`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from switchboard import clock, media
from switchboard.access import AuthContext
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.identity import repository
from switchboard.identity.accounts import get_user, normalize_email, require_user
from switchboard.identity.models import BaseModel, EmailStr, Strict
from switchboard.ids import new_ulid
from switchboard.models import Timestamp
from switchboard.store import Put, Store, keys

AVATAR_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}
AVATAR_MAX_BYTES = 5 * 1024 * 1024
Visibility = Literal["everyone", "contacts", "nobody"]


class AvatarUpload(Strict):
    """Body of `POST /v1/users/me/avatar`: the image to upload."""

    content_type: Literal["image/png", "image/jpeg", "image/webp"]
    size: int = Field(gt=0, le=AVATAR_MAX_BYTES, description="bytes")

    openapi_examples = ({"content_type": "image/png", "size": 20480},)


class AvatarUploadTicket(BaseModel):
    """A presigned S3 PUT for the avatar; `image` is the avatar's URL once uploaded."""

    upload_url: str = Field(description="PUT the image here before `expires_at`")
    method: str = Field(default="PUT", description="Always `PUT`")
    headers: dict[str, str] = Field(description="Headers the upload must carry")
    expires_at: Timestamp = Field(description="The upload URL stops working then")
    image: str = Field(description="The avatar's URL once uploaded")

    openapi_examples = (
        {
            "upload_url": "https://switchboard-media.s3.amazonaws.com/avatars/usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "method": "PUT",
            "headers": {"Content-Type": "image/png"},
            "expires_at": "2026-11-21T10:15:00.000Z",
            "image": "https://media.example.com/avatars/usr_01jd7zn5m4l3k2j1h0g9f8e7dc.png",
        },
    )


class AvatarLink(BaseModel):
    """A short-lived link to the signed-in user's avatar."""

    url: str = Field(description="A short-lived link to the image")
    expires_at: Timestamp = Field(description="The link stops working then")

    openapi_examples = (
        {
            "url": "https://media.example.com/avatars/usr_01jd7zn5m4l3k2j1h0g9f8e7dc.png?sig=…",
            "expires_at": "2026-11-21T11:00:00.000Z",
        },
    )


class Privacy(Strict):
    """Who may see the signed-in user's presence and profile."""

    last_seen: Visibility = Field(default="everyone", description="Who sees when the user was last online")
    profile_photo: Visibility = Field(default="everyone", description="Who sees the avatar")
    about: Visibility = Field(default="everyone", description="Who sees the about text")
    read_receipts: bool = Field(default=True, description="Send read receipts")
    groups_add: Visibility = Field(default="everyone", description="Who may add the user to groups")

    openapi_examples = (
        {
            "last_seen": "contacts",
            "profile_photo": "everyone",
            "about": "contacts",
            "read_receipts": True,
            "groups_add": "contacts",
        },
    )


class BlockCreate(Strict):
    """Body of `POST /v1/users/me/blocks`."""

    user_ref: str = Field(min_length=1, max_length=320, description="a user id (usr_…) or an e-mail")

    openapi_examples = ({"user_ref": "grace@example.com"},)


class BlockedUser(BaseModel):
    """A user the signed-in user blocked."""

    user_id: str
    name: str = Field(description="The blocked user's name")
    email: str = Field(description="The blocked user's e-mail address")
    blocked_at: Timestamp = Field(description="When they were blocked")

    openapi_examples = (
        {
            "user_id": "usr_01jd86c1d2e3f4g5h6j7k8m9np",
            "name": "Grace Hopper",
            "email": "grace@example.com",
            "blocked_at": "2026-11-21T10:00:00.000Z",
        },
    )


class UserContact(BaseModel):
    """Another member of the signed-in user's organizations (not a CRM contact)."""

    user_id: str
    name: str = Field(description="The user's name")
    email: str = Field(description="The user's e-mail address")
    image: str = Field(description="The user's avatar URL (empty when none)")
    organizations: list[str] = Field(description="The organizations the two users share")

    openapi_examples = (
        {
            "user_id": "usr_01jd86c1d2e3f4g5h6j7k8m9np",
            "name": "Grace Hopper",
            "email": "grace@example.com",
            "image": "",
            "organizations": ["org_01jd7zp1a2b3c4d5e6f7g8h9jk"],
        },
    )


class LookupRequest(Strict):
    """Body of `POST /v1/users/lookup/check` and `/info`: exactly one of `email` or `phone`."""

    email: EmailStr | None = Field(default=None, description="An e-mail address to look up")
    phone: str | None = Field(
        default=None, min_length=3, max_length=32, description="A phone number to look up (any common form)"
    )
    channel_id: str | None = Field(default=None, min_length=1, max_length=64, description="The channel for a phone")
    exactly_one_of = (("email", "phone"),)  # checked in lookup

    openapi_examples = ({"email": "grace@example.com"},)


class LookupCheck(BaseModel):
    """Whether the looked-up user exists."""

    exists: bool = Field(description="Whether the user was found")

    openapi_examples = ({"exists": True},)


class LookupInfo(LookupCheck):
    """The looked-up user's public profile, when found."""

    user_id: str | None = Field(default=None, description="The found user's id")
    name: str | None = Field(default=None, description="The found user's name")
    image: str | None = Field(default=None, description="The found user's avatar URL")

    openapi_examples = (
        {"exists": True, "user_id": "usr_01jd86c1d2e3f4g5h6j7k8m9np", "name": "Grace Hopper", "image": None},
    )


def _doc_key(user_id: str, name: str) -> dict[str, str]:
    return {"PK": keys.user_pk(user_id), "SK": name}


def avatar_upload(store: Store, auth: AuthContext, body: AvatarUpload) -> AvatarUploadTicket:
    user_id = require_user(auth)
    key = f"avatars/{user_id}/{new_ulid().lower()}.{AVATAR_TYPES[body.content_type]}"
    url, headers, expires_at = media.presign_upload(key, body.content_type, body.size)
    store.update(
        keys.user(user_id),
        "SET image = :img, updated_at = :now",
        condition="attribute_exists(PK)",
        values={":img": key, ":now": clock.now_iso()},
        error=NotFound("The user no longer exists."),
        return_values="NONE",
    )
    return AvatarUploadTicket(upload_url=url, headers=headers, expires_at=expires_at, image=key)


def avatar_link(store: Store, auth: AuthContext) -> AvatarLink:
    user = get_user(store, require_user(auth))
    if not user.get("image"):
        raise NotFound("No avatar was uploaded.")
    url, expires_at = media.presign_download(user["image"])
    return AvatarLink(url=url, expires_at=expires_at)


def get_privacy(store: Store, auth: AuthContext) -> Privacy:
    item = store.get(_doc_key(require_user(auth), "PRIVACY"))
    return Privacy.model_validate({k: v for k, v in (item or {}).items() if k in Privacy.model_fields})


def put_privacy(store: Store, auth: AuthContext, body: Privacy) -> Privacy:
    store.put(
        {
            **_doc_key(require_user(auth), "PRIVACY"),
            "entity": "Privacy",
            **body.model_dump(),
            "updated_at": clock.now_iso(),
        }
    )
    return body


def _resolve_user_ref(store: Store, ref: str) -> dict[str, Any]:
    ref = ref.strip()
    if ref.startswith("usr_"):
        user = store.get(keys.user(ref))
    else:
        sentinel = store.get(keys.user_email(normalize_email(ref)))
        user = store.get(keys.user(sentinel["user_id"])) if sentinel else None
    if user is None:
        raise NotFound("No such user.")
    return user


def block(store: Store, auth: AuthContext, body: BlockCreate) -> BlockedUser:
    me = require_user(auth)
    other = _resolve_user_ref(store, body.user_ref)
    if other["id"] == me:
        raise ValidationFailed.field("body.user_ref", "you cannot block yourself")
    row = {
        **_doc_key(me, f"BLOCK#{other['id']}"),
        "entity": "UserBlock",
        "user_id": other["id"],
        "name": other.get("name") or "",
        "email": other["email"],
        "blocked_at": clock.now_iso(),
    }
    store.put(Put(item=row).item, condition="attribute_not_exists(PK)", error=Conflict("That user is already blocked."))
    return BlockedUser.model_validate(row)


def unblock(store: Store, auth: AuthContext, user_ref: str) -> None:
    me = require_user(auth)
    other = _resolve_user_ref(store, user_ref)
    store.delete(
        _doc_key(me, f"BLOCK#{other['id']}"),
        condition="attribute_exists(PK)",
        error=NotFound("That user is not blocked."),
    )


def blocklist(store: Store, auth: AuthContext) -> list[BlockedUser]:
    rows = store.query_all(keys.user_pk(require_user(auth)), sk_prefix="BLOCK#")
    return [BlockedUser.model_validate(r) for r in rows]


def contacts(store: Store, auth: AuthContext) -> list[UserContact]:
    """People who share an organization with the user (minus blocked ones)."""
    me = require_user(auth)
    blocked = {b.user_id for b in blocklist(store, auth)}
    seen: dict[str, UserContact] = {}
    for membership in repository.user_memberships(store, me):
        org_id = membership["organization_id"]
        for m in store.query_all(keys.org_pk(org_id), sk_prefix="MEMBER#"):
            uid = m["user_id"]
            if uid == me or uid in blocked:
                continue
            if uid in seen:
                seen[uid].organizations.append(org_id)
            else:
                seen[uid] = UserContact(
                    user_id=uid,
                    name=m.get("user_name") or "",
                    email=m.get("user_email") or "",
                    image="",
                    organizations=[org_id],
                )
    users = {u["id"]: u for u in store.batch_get([keys.user(uid) for uid in seen])}
    for uid, contact in seen.items():
        contact.image = (users.get(uid) or {}).get("image") or ""
        contact.name = (users.get(uid) or {}).get("name") or contact.name
    return sorted(seen.values(), key=lambda c: (c.name.lower(), c.user_id))


def lookup(store: Store, auth: AuthContext, body: LookupRequest) -> LookupInfo:
    """Is this e-mail a member of the caller's organization (accounts elsewhere are not revealed), or this phone an
    account on the channel's network?"""
    if bool(body.email) == bool(body.phone):
        raise ValidationFailed.field("body", "give exactly one of email or phone")
    if body.email:
        sentinel = store.get(keys.user_email(normalize_email(body.email)))
        member = store.get(keys.member(auth.org_id, sentinel["user_id"])) if sentinel else None
        user = store.get(keys.user(sentinel["user_id"])) if sentinel and member else None
        if user is None:
            return LookupInfo(exists=False)
        return LookupInfo(exists=True, user_id=user["id"], name=user.get("name") or "", image=user.get("image") or "")
    if not body.channel_id:
        raise ValidationFailed.field("body.channel_id", "is required to look up a phone on a channel")
    # A phone is an account on the channel's network: its provider answers (400 unsupported_by_provider if it can't).
    from switchboard.contacts.identifiers import normalize_phone, numbers_for

    # on first use: keeps switchboard.messaging.channels off the cold start
    from switchboard.messaging import channels

    phone = normalize_phone(body.phone or "", "body.phone", numbers_for(store, auth.org_id))
    _, adapter = channels.provider(store, auth, body.channel_id)
    found = adapter.lookup_contact(phone)
    if not found.get("exists"):
        return LookupInfo(exists=False)
    return LookupInfo(
        exists=True, user_id=found.get("wa_id") or phone, name=found.get("name") or "", image=found.get("image") or ""
    )
