"""Groups, group hubs, communities and newsletters as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from switchboard.models import BaseModel, Choices, Name, Strict, Timestamp

ParticipantRole = Literal["member", "admin", "superadmin"]
Phone = Annotated[str, Field(min_length=1, max_length=64)]
GroupRefText = Annotated[str, Field(min_length=1, max_length=128)]
ParticipantAction = Literal["add", "remove", "promote", "demote"]
ID = Field(min_length=1, max_length=64)
OPT_ID = Field(default=None, min_length=1, max_length=64)
JID = Field(default=None, min_length=1, max_length=128)
PHONES = Field(min_length=1, max_length=256, description="phone numbers in any international form")
INVITE = Field(default=None, min_length=1, max_length=256)
# An invite code (checked in groups.common.invite_code, which compiles this pattern: one rule, documented here).
INVITE_CODE_PATTERN = r"^[A-Za-z0-9_-]{6,64}$"
INVITE_CODE = Field(default=None, min_length=1, max_length=256, json_schema_extra={"pattern": INVITE_CODE_PATTERN})
GROUP_NAME = Field(min_length=1, max_length=100, description="the group's subject (WhatsApp allows 100 characters)")
GROUP_DESCRIPTION = Field(max_length=2048)


# Groups --------------------------------------------------------------------------------------------------------------
class Participant(BaseModel):
    phone: str = Field(description="digits with country code, no plus sign")
    role: ParticipantRole
    added_at: Timestamp


class GroupPhoto(BaseModel):
    url: str | None = None
    asset_id: str | None = None
    provider_photo_id: str | None = None
    updated_at: Timestamp


class Group(BaseModel):
    id: str = Field(description="`grp_…`; the routes also accept the group's JID")
    organization_id: str
    channel_id: str
    jid: str | None = Field(
        default=None,
        description="the provider's group id, e.g. `120363…@g.us` (Meta's Cloud API: its own case-sensitive id); "
        "null while `status` is `creating`",
    )
    name: str
    description: str = ""
    photo: GroupPhoto | None = None
    participants: list[Participant] = Field(default_factory=list)
    participant_count: int = 0
    self_role: ParticipantRole | None = Field(
        default=None, description="the channel's own role in the group; null once it has left"
    )
    status: Literal["creating", "active", "left", "failed"] = Field(
        description="`creating` until a provider that creates groups asynchronously (whatsapp_cloud) confirms it, "
        "then `active`; `failed` when it refused; `left` once the channel is out of it"
    )
    invite_link: str | None = Field(default=None, description="only known to admins of the group")
    community_id: str | None = None
    created_at: Timestamp
    updated_at: Timestamp
    left_at: Timestamp | None = None


class GroupRef(Strict):
    """Names a group by `group_id` (`grp_…`) or `group_jid`; `channel_id` narrows (or checks) the channel."""

    channel_id: str | None = OPT_ID
    group_id: str | None = OPT_ID
    group_jid: str | None = JID
    exactly_one_of: ClassVar[Choices] = (("group_id", "group_jid"),)

    @model_validator(mode="after")
    def _one_ref(self) -> GroupRef:
        if bool(self.group_id) == bool(self.group_jid):
            raise ValueError("give exactly one of group_id or group_jid")
        return self

    @property
    def ref(self) -> str:
        return str(self.group_id or self.group_jid)


class GroupCreate(Strict):
    channel_id: str = ID
    name: Name = GROUP_NAME
    description: str | None = Field(default=None, max_length=2048)
    participants: list[Phone] = PHONES


class NameChange(Strict):
    name: Name = GROUP_NAME


class DescriptionChange(Strict):
    description: str = Field(description="an empty string clears it", max_length=2048)


class PhotoChange(Strict):
    """`image_url` (https), `asset_id` (an uploaded `/v1/media/uploads` asset) or `remove: true`."""

    image_url: str | None = Field(default=None, min_length=9, max_length=2048, pattern=r"^https://\S+$")
    asset_id: str | None = OPT_ID
    remove: bool = False
    exactly_one_of: ClassVar[Choices] = (("image_url", "asset_id", "remove"),)

    @model_validator(mode="after")
    def _one_source(self) -> PhotoChange:
        given = sum(bool(x) for x in (self.image_url, self.asset_id, self.remove))
        if given != 1:
            raise ValueError("give exactly one of image_url, asset_id or remove")
        return self


class InviteLinkRequest(Strict):
    revoke: bool = Field(default=False, description="true resets the link: the old code stops working")


class JoinRequest(Strict):
    """For a known group: joins again with `invite_code` / `invite_link`, or its last known code."""

    invite_code: str | None = INVITE_CODE
    invite_link: str | None = INVITE


class ParticipantsChange(Strict):
    action: ParticipantAction
    participants: list[Phone] = PHONES


class GroupNameRequest(GroupRef, NameChange):
    pass


class GroupDescriptionRequest(GroupRef, DescriptionChange):
    pass


class GroupPhotoRequest(GroupRef, PhotoChange):
    pass


class GroupInviteLinkRequest(GroupRef, InviteLinkRequest):
    pass


class GroupParticipantsRequest(GroupRef, ParticipantsChange):
    pass


class GroupJoinRequest(Strict):
    """Joins a group by its invite link (`https://chat.whatsapp.com/<code>`) or code."""

    channel_id: str = ID
    invite_code: str | None = INVITE_CODE
    invite_link: str | None = INVITE
    exactly_one_of: ClassVar[Choices] = (("invite_code", "invite_link"),)

    @model_validator(mode="after")
    def _one_invite(self) -> GroupJoinRequest:
        if bool(self.invite_code) == bool(self.invite_link):
            raise ValueError("give exactly one of invite_code or invite_link")
        return self


class InviteLink(BaseModel):
    group_id: str
    group_jid: str
    invite_code: str
    invite_link: str
    revoked: bool = Field(default=False, description="true when this request reset the link")


class ParticipantResult(BaseModel):
    phone: str
    status: Literal["added", "removed", "promoted", "demoted", "unchanged", "not_participant", "failed"]
    reason: str | None = None


class GroupCreated(Group):
    failed_participants: list[ParticipantResult] = Field(
        default_factory=list, description="numbers the provider refused (left out of the group)"
    )


class ParticipantsResult(BaseModel):
    action: ParticipantAction
    results: list[ParticipantResult]
    group: Group


# Group hubs (Switchboard's own folders of groups) ---------------------------------------------------------------------
class GroupHub(BaseModel):
    id: str
    organization_id: str
    name: str
    description: str = ""
    group_ids: list[str] = Field(default_factory=list)
    group_count: int = 0
    created_at: Timestamp
    updated_at: Timestamp


class GroupHubCreate(Strict):
    name: Name = Field(min_length=1, max_length=100, description="unique per organization (case-insensitive)")
    description: str | None = Field(default=None, max_length=500)
    group_ids: list[GroupRefText] = Field(default_factory=list, max_length=100, description="group ids or JIDs")


class GroupIds(Strict):
    group_ids: list[GroupRefText] = Field(min_length=1, max_length=100, description="group ids (`grp_…`) or JIDs")


# Communities (the provider's communities: an announcement group and linked groups) ------------------------------------
class Community(BaseModel):
    id: str
    organization_id: str
    channel_id: str
    jid: str
    announcement_group_jid: str | None = None
    name: str
    description: str = ""
    group_ids: list[str] = Field(default_factory=list)
    created_at: Timestamp
    updated_at: Timestamp


class CommunityCreate(Strict):
    channel_id: str = ID
    name: Name = GROUP_NAME
    description: str | None = Field(default=None, max_length=2048)
    group_ids: list[GroupRefText] = Field(default_factory=list, max_length=100, description="groups to link at once")


class CommunityGroupsRequest(Strict):
    community_id: str = ID
    group_ids: list[GroupRefText] = Field(min_length=1, max_length=100, description="group ids (`grp_…`) or JIDs")


# Newsletters ----------------------------------------------------------------------------------------------------------
class Newsletter(BaseModel):
    id: str = Field(description="the newsletter's JID, e.g. `120363…@newsletter`")
    jid: str
    organization_id: str
    channel_id: str
    name: str
    description: str = ""
    role: Literal["owner", "subscriber"]
    subscribed: bool
    invite_link: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class NewsletterCreate(Strict):
    channel_id: str = ID
    name: Name = Field(min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=2048)


class NewsletterRef(Strict):
    channel_id: str = ID
    newsletter_jid: str = Field(min_length=1, max_length=128)


class NewsletterInviteLinkRequest(NewsletterRef):
    revoke: bool = Field(default=False, description="true resets the link (owners only)")


class NewsletterInviteLink(BaseModel):
    newsletter_jid: str
    invite_code: str
    invite_link: str
    revoked: bool = False


class NewsletterSubscribe(Strict):
    """`newsletter_jid`, or the newsletter's `invite_link` / `invite_code`; `unsubscribe: true` stops following."""

    channel_id: str = ID
    newsletter_jid: str | None = JID
    invite_code: str | None = INVITE_CODE
    invite_link: str | None = INVITE
    unsubscribe: bool = False
    exactly_one_of: ClassVar[Choices] = (("newsletter_jid", "invite_code", "invite_link"),)

    @model_validator(mode="after")
    def _one_ref(self) -> NewsletterSubscribe:
        if sum(bool(x) for x in (self.newsletter_jid, self.invite_code, self.invite_link)) != 1:
            raise ValueError("give exactly one of newsletter_jid, invite_code or invite_link")
        return self


class NewsletterMessage(BaseModel):
    """The spec's Newsletter message."""

    message_id: str
    newsletter_id: str
    timestamp: int = Field(description="Unix seconds")
    body: str
    type: str


class NewsletterMessages(BaseModel):
    messages: list[NewsletterMessage]
    next_cursor: str = Field(description="the next page's `cursor`; empty when this is the last page")
