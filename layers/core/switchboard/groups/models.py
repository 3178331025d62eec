"""Groups, group hubs, communities and newsletters as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

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
    """A member of a group."""

    openapi_examples = ({"phone": "14155550142", "role": "member", "added_at": "2026-11-21T10:00:00.000Z"},)
    phone: str = Field(description="digits with country code, no plus sign")
    role: ParticipantRole
    added_at: Timestamp


class GroupPhoto(BaseModel):
    """The group's photo."""

    openapi_examples = (
        {
            "url": "https://example.com/launch.png",
            "asset_id": None,
            "provider_photo_id": None,
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    url: str | None = Field(default=None, description="where the photo was taken from")
    asset_id: str | None = Field(default=None, description="the uploaded file it was taken from")
    provider_photo_id: str | None = None
    updated_at: Timestamp


class Group(BaseModel):
    """A chat group of a channel, created or joined through the channel's provider."""

    openapi_examples = (
        {
            "id": "grp_01jd8xb1c2d3e4f5g6h7j8k9m0",
            "organization_id": "org_01jd8w0a1b2c3d4e5f6g7h8j9k",
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "jid": "120363041234567890@g.us",
            "name": "Spring launch",
            "description": "Launch day coordination",
            "photo": None,
            "participants": [
                {"phone": "14155552671", "role": "superadmin", "added_at": "2026-11-21T10:00:00.000Z"},
                {"phone": "14155550142", "role": "member", "added_at": "2026-11-21T10:00:00.000Z"},
            ],
            "participant_count": 2,
            "self_role": "superadmin",
            "status": "active",
            "invite_link": "https://chat.whatsapp.com/AbCdEf123456",
            "community_id": None,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
            "left_at": None,
        },
    )
    id: str = Field(description="`grp_…`; the routes also accept the group's JID")
    organization_id: str = Field(description="the organization that owns it (`org_…`)")
    channel_id: str = Field(description="the channel that created or joined it (`ch_…`)")
    jid: str | None = Field(
        default=None,
        description="the provider's group id, e.g. `120363…@g.us` (Meta's Cloud API: its own case-sensitive id); "
        "null while `status` is `creating`",
    )
    name: str = Field(description="the group's subject")
    description: str = Field(default="", description="the group's description (empty when none)")
    photo: GroupPhoto | None = Field(default=None, description="the group's photo; null when it has none")
    participants: list[Participant] = Field(default_factory=list, description="the participants the provider reported")
    participant_count: int = Field(default=0, description="how many participants the group has")
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

    openapi_examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"group_id": "grp_01jd8xb1c2d3e4f5g6h7j8k9m0"},
        {"group_jid": "120363041234567890@g.us", "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k"},
    )
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
    """A new group on a channel with its first participants."""

    openapi_examples = (
        {
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "name": "Spring launch",
            "description": "Launch day coordination",
            "participants": ["+1 415 555 0142"],
        },
    )
    channel_id: str = ID
    name: Name = GROUP_NAME
    description: str | None = Field(default=None, max_length=2048, description="the group's description")
    participants: list[Phone] = PHONES


class NameChange(Strict):
    """The group's new subject."""

    openapi_examples = ({"name": "Spring launch 2027"},)
    name: Name = GROUP_NAME


class DescriptionChange(Strict):
    """The group's new description."""

    openapi_examples = ({"description": "Launch day coordination, 9:00 UTC"},)
    description: str = Field(description="an empty string clears it", max_length=2048)


class PhotoChange(Strict):
    """`image_url` (https), `asset_id` (an uploaded `/v1/media/uploads` asset) or `remove: true`."""

    openapi_examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"image_url": "https://example.com/launch.png"},
        {"remove": True},
    )
    image_url: str | None = Field(
        default=None, min_length=9, max_length=2048, pattern=r"^https://\S+$", description="an https URL of the picture"
    )
    asset_id: str | None = OPT_ID
    remove: bool = Field(default=False, description="true removes the photo")
    exactly_one_of: ClassVar[Choices] = (("image_url", "asset_id", "remove"),)

    @model_validator(mode="after")
    def _one_source(self) -> PhotoChange:
        given = sum(bool(x) for x in (self.image_url, self.asset_id, self.remove))
        if given != 1:
            raise ValueError("give exactly one of image_url, asset_id or remove")
        return self


class InviteLinkRequest(Strict):
    """Whether to reset the invite link."""

    openapi_examples = ({"revoke": True},)
    revoke: bool = Field(default=False, description="true resets the link: the old code stops working")


class JoinRequest(Strict):
    """For a known group: joins again with `invite_code` / `invite_link`, or its last known code."""

    openapi_examples = ({"invite_code": "AbCdEf123456"},)
    invite_code: str | None = INVITE_CODE
    invite_link: str | None = INVITE


class ParticipantsChange(Strict):
    """What to do to which numbers."""

    openapi_examples = ({"action": "add", "participants": ["+1 415 555 0111", "+44 20 7946 0000"]},)
    action: ParticipantAction = Field(description="`add`, `remove`, `promote` (to admin) or `demote`")
    participants: list[Phone] = PHONES


class GroupNameRequest(GroupRef, NameChange):
    """A group and its new subject."""

    openapi_examples = ({"group_id": "grp_01jd8xb1c2d3e4f5g6h7j8k9m0", "name": "Spring launch 2027"},)


class GroupDescriptionRequest(GroupRef, DescriptionChange):
    """A group and its new description."""

    openapi_examples = (
        {"group_jid": "120363041234567890@g.us", "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k", "description": ""},
    )


class GroupPhotoRequest(GroupRef, PhotoChange):
    """A group and its new photo."""

    openapi_examples = ({"group_id": "grp_01jd8xb1c2d3e4f5g6h7j8k9m0", "asset_id": "as_01jd8xc1d2e3f4g5h6j7k8m9n0"},)


class GroupInviteLinkRequest(GroupRef, InviteLinkRequest):
    """A group, and whether to reset its invite link."""

    openapi_examples = ({"group_id": "grp_01jd8xb1c2d3e4f5g6h7j8k9m0", "revoke": False},)


class GroupParticipantsRequest(GroupRef, ParticipantsChange):
    """A group, and what to do to which numbers."""

    openapi_examples = (
        {"group_id": "grp_01jd8xb1c2d3e4f5g6h7j8k9m0", "action": "promote", "participants": ["14155550142"]},
    )


class GroupJoinRequest(Strict):
    """Joins a group by its invite link (`https://chat.whatsapp.com/<code>`) or code."""

    openapi_examples = (
        {"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k", "invite_link": "https://chat.whatsapp.com/AbCdEf123456"},
    )
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
    """A group's invite link."""

    openapi_examples = (
        {
            "group_id": "grp_01jd8xb1c2d3e4f5g6h7j8k9m0",
            "group_jid": "120363041234567890@g.us",
            "invite_code": "AbCdEf123456",
            "invite_link": "https://chat.whatsapp.com/AbCdEf123456",
            "revoked": False,
        },
    )
    group_id: str = Field(description="the group's id (`grp_…`)")
    group_jid: str = Field(description="the group's JID at the provider, e.g. `120363…@g.us`")
    invite_code: str = Field(description="the code at the end of the link")
    invite_link: str = Field(description="the invite link")
    revoked: bool = Field(default=False, description="true when this request reset the link")


class ParticipantResult(BaseModel):
    """What became of one number."""

    openapi_examples = ({"phone": "14155550111", "status": "added", "reason": None},)
    phone: str = Field(description="the number, digits with country code")
    status: Literal["added", "removed", "promoted", "demoted", "unchanged", "not_participant", "failed"] = Field(
        description="what became of the number"
    )
    reason: str | None = Field(default=None, description="why it failed, when it did")


class GroupCreated(Group):
    """The new group, with the numbers the provider refused."""

    openapi_examples = (
        {
            **Group.openapi_examples[0],
            "failed_participants": [{"phone": "14155550119", "status": "failed", "reason": "not on WhatsApp"}],
        },
    )
    failed_participants: list[ParticipantResult] = Field(
        default_factory=list, description="numbers the provider refused (left out of the group)"
    )


class ParticipantsResult(BaseModel):
    """One result per number, and the group after the change."""

    openapi_examples = (
        {
            "action": "add",
            "results": [{"phone": "14155550111", "status": "added", "reason": None}],
            "group": Group.openapi_examples[0],
        },
    )
    action: ParticipantAction = Field(description="the action applied")
    results: list[ParticipantResult] = Field(description="one result per item, in the order sent")
    group: Group = Field(description="the group after the change")


# Group hubs (Switchboard's own folders of groups) ---------------------------------------------------------------------
class GroupHub(BaseModel):
    """A folder of the organization's groups (Switchboard's own; not at the provider)."""

    openapi_examples = (
        {
            "id": "gh_01jd8xd1e2f3g4h5j6k7m8n9p0",
            "organization_id": "org_01jd8w0a1b2c3d4e5f6g7h8j9k",
            "name": "Launch teams",
            "description": "",
            "group_ids": ["grp_01jd8xb1c2d3e4f5g6h7j8k9m0"],
            "group_count": 1,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the group hub's id")
    organization_id: str = Field(description="the organization that owns it (`org_…`)")
    name: str = Field(description="the group hub's name")
    description: str = Field(default="", description="free text about the group hub")
    group_ids: list[str] = Field(default_factory=list, description="the hub's groups (`grp_…`)")
    group_count: int = 0
    created_at: Timestamp
    updated_at: Timestamp


class GroupHubCreate(Strict):
    """A new group hub."""

    openapi_examples = ({"name": "Launch teams", "group_ids": ["grp_01jd8xb1c2d3e4f5g6h7j8k9m0"]},)
    name: Name = Field(min_length=1, max_length=100, description="unique per organization (case-insensitive)")
    description: str | None = Field(default=None, max_length=500, description="free text about the group hub")
    group_ids: list[GroupRefText] = Field(default_factory=list, max_length=100, description="group ids or JIDs")


class GroupIds(Strict):
    """Groups to add or remove."""

    openapi_examples = ({"group_ids": ["grp_01jd8xb1c2d3e4f5g6h7j8k9m0", "120363041234567890@g.us"]},)
    group_ids: list[GroupRefText] = Field(min_length=1, max_length=100, description="group ids (`grp_…`) or JIDs")


# Communities (the provider's communities: an announcement group and linked groups) ------------------------------------
class Community(BaseModel):
    """A community at the provider: an announcement group and linked groups."""

    openapi_examples = (
        {
            "id": "cm_01jd8xe1f2g3h4j5k6m7n8p9q0",
            "organization_id": "org_01jd8w0a1b2c3d4e5f6g7h8j9k",
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "jid": "120363055555555555@g.us",
            "announcement_group_jid": "120363066666666666@g.us",
            "name": "Customers",
            "description": "",
            "group_ids": ["grp_01jd8xb1c2d3e4f5g6h7j8k9m0"],
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the community's id")
    organization_id: str = Field(description="the organization that owns it (`org_…`)")
    channel_id: str = Field(description="the channel (`ch_…`)")
    jid: str = Field(description="the community's JID at the provider")
    announcement_group_jid: str | None = Field(default=None, description="the community's announcement group")
    name: str = Field(description="the community's name")
    description: str = Field(default="", description="free text about the community")
    group_ids: list[str] = Field(default_factory=list)
    created_at: Timestamp
    updated_at: Timestamp


class CommunityCreate(Strict):
    """A new community on a channel."""

    openapi_examples = (
        {
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "name": "Customers",
            "group_ids": ["grp_01jd8xb1c2d3e4f5g6h7j8k9m0"],
        },
    )
    channel_id: str = ID
    name: Name = GROUP_NAME
    description: str | None = Field(default=None, max_length=2048, description="free text about the community")
    group_ids: list[GroupRefText] = Field(default_factory=list, max_length=100, description="groups to link at once")


class CommunityGroupsRequest(Strict):
    """A community and the groups to link or unlink."""

    openapi_examples = (
        {"community_id": "cm_01jd8xe1f2g3h4j5k6m7n8p9q0", "group_ids": ["grp_01jd8xb1c2d3e4f5g6h7j8k9m0"]},
    )
    community_id: str = ID
    group_ids: list[GroupRefText] = Field(min_length=1, max_length=100, description="group ids (`grp_…`) or JIDs")


# Newsletters ----------------------------------------------------------------------------------------------------------
class Newsletter(BaseModel):
    """A newsletter (a one-way channel) a channel owns or follows."""

    openapi_examples = (
        {
            "id": "120363098765432100@newsletter",
            "jid": "120363098765432100@newsletter",
            "organization_id": "org_01jd8w0a1b2c3d4e5f6g7h8j9k",
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "name": "Product news",
            "description": "Monthly updates",
            "role": "owner",
            "subscribed": True,
            "invite_link": "https://whatsapp.com/channel/0029VaAbCdEf123456",
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the newsletter's JID, e.g. `120363…@newsletter`")
    jid: str = Field(description="the newsletter's JID (the same as `id`)")
    organization_id: str = Field(description="the organization that owns it (`org_…`)")
    channel_id: str = Field(description="the channel (`ch_…`)")
    name: str = Field(description="the newsletter's name")
    description: str = Field(default="", description="free text about the newsletter")
    role: Literal["owner", "subscriber"] = Field(
        description="`owner`: the channel created it; `subscriber`: it follows it"
    )
    subscribed: bool = Field(description="whether the channel follows the newsletter")
    invite_link: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class NewsletterCreate(Strict):
    """A new newsletter owned by the channel."""

    openapi_examples = (
        {"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k", "name": "Product news", "description": "Monthly updates"},
    )
    channel_id: str = ID
    name: Name = Field(min_length=1, max_length=100, description="the newsletter's name")
    description: str | None = Field(default=None, max_length=2048, description="free text about the newsletter")


class NewsletterRef(Strict):
    """A newsletter of a channel."""

    openapi_examples = (
        {"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k", "newsletter_jid": "120363098765432100@newsletter"},
    )
    channel_id: str = ID
    newsletter_jid: str = Field(
        min_length=1, max_length=128, description="the newsletter's JID, e.g. `120363…@newsletter`"
    )


class NewsletterInviteLinkRequest(NewsletterRef):
    """A newsletter, and whether to reset its invite link."""

    openapi_examples = (
        {
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "newsletter_jid": "120363098765432100@newsletter",
            "revoke": False,
        },
    )
    revoke: bool = Field(default=False, description="true resets the link (owners only)")


class NewsletterInviteLink(BaseModel):
    """A newsletter's invite link."""

    openapi_examples = (
        {
            "newsletter_jid": "120363098765432100@newsletter",
            "invite_code": "0029VaAbCdEf123456",
            "invite_link": "https://whatsapp.com/channel/0029VaAbCdEf123456",
            "revoked": False,
        },
    )
    newsletter_jid: str = Field(description="the newsletter's JID, e.g. `120363…@newsletter`")
    invite_code: str = Field(description="the code at the end of the link")
    invite_link: str = Field(description="the invite link")
    revoked: bool = Field(default=False, description="true when this request reset the link")


class NewsletterSubscribe(Strict):
    """`newsletter_jid`, or the newsletter's `invite_link` / `invite_code`; `unsubscribe: true` stops following."""

    openapi_examples = (
        {"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k", "newsletter_jid": "120363098765432100@newsletter"},
        {
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "newsletter_jid": "120363098765432100@newsletter",
            "unsubscribe": True,
        },
    )
    channel_id: str = ID
    newsletter_jid: str | None = JID
    invite_code: str | None = INVITE_CODE
    invite_link: str | None = INVITE
    unsubscribe: bool = Field(default=False, description="true stops following the newsletter")
    exactly_one_of: ClassVar[Choices] = (("newsletter_jid", "invite_code", "invite_link"),)

    @model_validator(mode="after")
    def _one_ref(self) -> NewsletterSubscribe:
        if sum(bool(x) for x in (self.newsletter_jid, self.invite_code, self.invite_link)) != 1:
            raise ValueError("give exactly one of newsletter_jid, invite_code or invite_link")
        return self


class NewsletterMessage(BaseModel):
    """The spec's Newsletter message."""

    openapi_examples = (
        {
            "message_id": "3EB0C767D26A1D2F",
            "newsletter_id": "120363098765432100@newsletter",
            "timestamp": 1795255200,
            "body": "Version 2 is out.",
            "type": "text",
        },
    )
    message_id: str = Field(description="the provider's id of the post")
    newsletter_id: str = Field(description="the newsletter's JID")
    timestamp: int = Field(description="Unix seconds")
    body: str = Field(description="the post's text")
    type: str = Field(description="the post's kind (`text`, `image`, …)")


class NewsletterMessages(BaseModel):
    """A page of a newsletter's posts."""

    openapi_examples = (
        {
            "messages": [
                {
                    "message_id": "3EB0C767D26A1D2F",
                    "newsletter_id": "120363098765432100@newsletter",
                    "timestamp": 1795255200,
                    "body": "Version 2 is out.",
                    "type": "text",
                }
            ],
            "next_cursor": "",
        },
    )
    messages: list[NewsletterMessage] = Field(description="posts, newest first")
    next_cursor: str = Field(description="the next page's `cursor`; empty when this is the last page")
