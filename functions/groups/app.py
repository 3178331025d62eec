"""Groups (by id and by JID), group hubs and communities, and newsletters: kept in the table, carried out through the
channel's provider (`switchboard.groups`). Reads: viewer; everything else: member.

`{groupID}` takes a group id (`grp_…`) or a JID (`120363…@g.us`): the spec's `/v1/groups/{groupJID}` is the same
path. The body-driven routes (`/v1/groups/name`, …) name the group with `group_id` or `group_jid` (and optionally
`channel_id`, which a JID on several channels needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.api.context import current_auth
from switchboard.api.envelope import Data, ListData, cursor_list
from switchboard.api.lazy import lazy_module
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.groups import common, hubs, models, newsletters, service
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    common = lazy_module("switchboard.groups.common")
    hubs = lazy_module("switchboard.groups.hubs")
    models = lazy_module("switchboard.groups.models")
    newsletters = lazy_module("switchboard.groups.newsletters")
    service = lazy_module("switchboard.groups.service")

app = create_resolver()
# Path parameters, described once for every route of the group.
GroupID = Annotated[str, Path(description="the group's id (`grp_…`) or its JID (`120363…@g.us`)")]
HubID = Annotated[str, Path(description="the group hub's id (`gh_…`)")]
GRP = ["groups"]
HUB = ["group hubs and communities"]
NL = ["newsletters"]
Limit = Annotated[int, Query(ge=1, le=100, description="page size")]
Cursor = Annotated[
    str | None, Query(max_length=2048, description="`meta.cursor` of the previous page; absent for the first page")
]
ChannelFilter = Annotated[str | None, Query(min_length=1, max_length=64, description="a channel id (`ch_…`)")]


def _page[T](items: list[T], limit: int, cursor: str | None) -> ListData[T]:
    return cursor_list(items, limit, cursor)


# Groups: collection ------------------------------------------------------------------------------------------------
@app.post(
    "/v1/groups",
    middlewares=requires("member"),
    tags=GRP,
    status_code=201,
    summary="Create a group",
    description=(
        "Creates a group at the channel's provider, the channel being its creator (`superadmin`)."
        " Numbers the provider refuses are listed in `failed_participants`; a provider that "
        "creates groups asynchronously answers `status: creating` until it confirms. 400 "
        "`validation_failed` for too many participants. 400 `unsupported_by_provider` when the "
        "channel's provider has no groups; 409 `conflict` when the channel is not connected. "
        "Role: member or above."
    ),
)
def create_group(body: Annotated[models.GroupCreate, Body()]) -> Data[models.GroupCreated]:
    """Creates the group at the channel's provider (the channel is its creator, `superadmin`). Numbers the provider
    refuses are listed in `failed_participants`. 400 `unsupported_by_provider` on a provider without groups."""
    group, failed = service.create(get_store(), current_auth(app), body)
    return Data(data=models.GroupCreated(**group.model_dump(), failed_participants=failed))


@app.get(
    "/v1/groups",
    middlewares=requires("viewer"),
    tags=GRP,
    summary="List groups",
    description=(
        "Every group the organization's channels created or joined, filtered by `channel_id` and "
        "`status` (`active`, or `left` for groups they left). Cursor-paginated: pass "
        "`meta.cursor` back as `cursor` while `meta.has_more` is true. Role: viewer or above."
    ),
)
def list_groups(
    limit: Limit = 20,
    cursor: Cursor = None,
    channel_id: ChannelFilter = None,
    status: Annotated[Literal["active", "left"] | None, Query(description="`left`: groups the channels left")] = None,
) -> ListData[models.Group]:
    """Every group the organization's channels created or joined (also those they left: `status=left`)."""
    items, nxt = service.list_groups(
        get_store(), current_auth(app), limit=limit, cursor=cursor, channel_id=channel_id, status=status
    )
    return _page(items, limit, nxt)


@app.get(
    "/v1/groups/mine",
    middlewares=requires("viewer"),
    tags=GRP,
    summary="List the groups your channels administer",
    description=(
        "The active groups where a channel of the organization is admin or superadmin "
        "(`self_role`). Cursor-paginated: pass `meta.cursor` back as `cursor` while "
        "`meta.has_more` is true. Role: viewer or above."
    ),
)
def my_groups(limit: Limit = 20, cursor: Cursor = None, channel_id: ChannelFilter = None) -> ListData[models.Group]:
    """The active groups your channels administer (`self_role` admin or superadmin)."""
    items, nxt = service.list_groups(
        get_store(), current_auth(app), limit=limit, cursor=cursor, channel_id=channel_id, mine=True
    )
    return _page(items, limit, nxt)


# Groups: body-driven commands --------------------------------------------------------------------------------------
@app.post(
    "/v1/groups/join",
    middlewares=requires("member"),
    tags=GRP,
    summary="Join a group by invite",
    description=(
        "The channel joins a group by its invite link (`https://chat.whatsapp.com/<code>`) or "
        "code. 404 `not_found` for an unknown or reset code; 409 `conflict` when the channel is "
        "already in the group. 400 `unsupported_by_provider` when the channel's provider has no "
        "groups; 409 `conflict` when the channel is not connected. Role: member or above."
    ),
)
def join_group(body: Annotated[models.GroupJoinRequest, Body()]) -> Data[models.Group]:
    """Joins by invite link or code. 404 for an unknown or reset code, 409 when the channel is already in."""
    code = common.invite_code(body.invite_code, body.invite_link, "body")
    return Data(data=service.join(get_store(), current_auth(app), body.channel_id, code))


@app.post(
    "/v1/groups/leave",
    middlewares=requires("member"),
    tags=GRP,
    summary="Leave a group",
    description=(
        "The channel leaves the group; it stays listed with `status: left`. The group is named by"
        " `group_id` (`grp_…`) or `group_jid` (with `channel_id` when the JID is on several of "
        "your channels, else 400 `validation_failed`); 404 `not_found` for an unknown group. "
        "Role: member or above."
    ),
)
def leave_group_by_body(body: Annotated[models.GroupRef, Body()]) -> Data[models.Group]:
    return Data(data=service.leave(get_store(), current_auth(app), body.ref, body.channel_id))


@app.post(
    "/v1/groups/name",
    middlewares=requires("member"),
    tags=GRP,
    summary="Rename a group",
    description=(
        "Changes the group's subject at the provider. The group is named by `group_id` (`grp_…`) "
        "or `group_jid` (with `channel_id` when the JID is on several of your channels, else 400 "
        "`validation_failed`); 404 `not_found` for an unknown group. 409 `conflict` when the "
        "channel has left the group or is not one of its admins. Role: member or above."
    ),
)
def rename_group_by_body(body: Annotated[models.GroupNameRequest, Body()]) -> Data[models.Group]:
    return Data(data=service.rename(get_store(), current_auth(app), body.ref, body.name, body.channel_id))


@app.post(
    "/v1/groups/description",
    middlewares=requires("member"),
    tags=GRP,
    summary="Set a group's description",
    description=(
        "Changes the group's description (an empty string clears it). The group is named by "
        "`group_id` (`grp_…`) or `group_jid` (with `channel_id` when the JID is on several of "
        "your channels, else 400 `validation_failed`); 404 `not_found` for an unknown group. 409 "
        "`conflict` when the channel has left the group or is not one of its admins. Role: member"
        " or above."
    ),
)
def describe_group_by_body(body: Annotated[models.GroupDescriptionRequest, Body()]) -> Data[models.Group]:
    return Data(data=service.describe(get_store(), current_auth(app), body.ref, body.description, body.channel_id))


@app.post(
    "/v1/groups/photo",
    middlewares=requires("member"),
    tags=GRP,
    summary="Set a group's photo",
    description=(
        "Sets the photo from `image_url` (https) or `asset_id` (an upload of "
        "`/v1/media/uploads`), or removes it (`remove: true`). The group is named by `group_id` "
        "(`grp_…`) or `group_jid` (with `channel_id` when the JID is on several of your channels,"
        " else 400 `validation_failed`); 404 `not_found` for an unknown group. 409 `conflict` "
        "when the channel has left the group or is not one of its admins. Role: member or above."
    ),
)
def group_photo_by_body(body: Annotated[models.GroupPhotoRequest, Body()]) -> Data[models.Group]:
    return Data(data=service.set_photo(get_store(), current_auth(app), body.ref, body, body.channel_id))


@app.post(
    "/v1/groups/invite-link",
    middlewares=requires("member"),
    tags=GRP,
    summary="Get or reset a group's invite link",
    description=(
        "The group's invite link; `revoke: true` resets it (the old code stops working). The "
        "group is named by `group_id` (`grp_…`) or `group_jid` (with `channel_id` when the JID is"
        " on several of your channels, else 400 `validation_failed`); 404 `not_found` for an "
        "unknown group. 409 `conflict` when the channel has left the group or is not one of its "
        "admins. Role: member or above."
    ),
)
def group_invite_link_by_body(body: Annotated[models.GroupInviteLinkRequest, Body()]) -> Data[models.InviteLink]:
    """The group's invite link (the channel must be an admin); `revoke: true` resets it."""
    auth = current_auth(app)
    return Data(data=service.invite_link(get_store(), auth, body.ref, revoke=body.revoke, channel_id=body.channel_id))


@app.post(
    "/v1/groups/participants",
    middlewares=requires("member"),
    tags=GRP,
    summary="Change a group's participants",
    description=(
        "`action` `add`, `remove`, `promote` or `demote` on `participants` (phones in any "
        "international form); one result per number. 409 `conflict` past the participant limit. "
        "The group is named by `group_id` (`grp_…`) or `group_jid` (with `channel_id` when the "
        "JID is on several of your channels, else 400 `validation_failed`); 404 `not_found` for "
        "an unknown group. 409 `conflict` when the channel has left the group or is not one of "
        "its admins. Role: member or above."
    ),
)
def group_participants_by_body(
    body: Annotated[models.GroupParticipantsRequest, Body()],
) -> Data[models.ParticipantsResult]:
    """`action`: add, remove, promote or demote `participants` (phones); one result per number."""
    return Data(data=service.change_participants(get_store(), current_auth(app), body.ref, body, body.channel_id))


# Groups: one group by id or JID ------------------------------------------------------------------------------------
@app.get(
    "/v1/groups/<groupID>",
    middlewares=requires("viewer"),
    tags=GRP,
    summary="Get a group",
    description=(
        "Reads one group with its participants. `groupID` is `grp_…` or a JID (`120363…@g.us`; "
        "with `channel_id` when the group is on several of your channels). 404 `not_found` for an"
        " unknown group. Role: viewer or above."
    ),
)
def get_group(groupID: GroupID, channel_id: ChannelFilter = None) -> Data[models.Group]:
    """`groupID`: `grp_…` or a JID (`120363…@g.us`; with `channel_id` when the group is on several channels)."""
    return Data(data=service.get(get_store(), current_auth(app), groupID, channel_id))


@app.post(
    "/v1/groups/<groupID>/name",
    middlewares=requires("member"),
    tags=GRP,
    summary="Rename a group",
    description=(
        "Changes the group's subject at the provider. 404 `not_found` for an unknown group "
        "(`groupID` is `grp_…` or a JID). 409 `conflict` when the channel has left the group or "
        "is not one of its admins. Role: member or above."
    ),
)
def rename_group(groupID: GroupID, body: Annotated[models.NameChange, Body()]) -> Data[models.Group]:
    return Data(data=service.rename(get_store(), current_auth(app), groupID, body.name))


@app.post(
    "/v1/groups/<groupID>/description",
    middlewares=requires("member"),
    tags=GRP,
    summary="Set a group's description",
    description=(
        "Changes the group's description (an empty string clears it). 404 `not_found` for an "
        "unknown group (`groupID` is `grp_…` or a JID). 409 `conflict` when the channel has left "
        "the group or is not one of its admins. Role: member or above."
    ),
)
def describe_group(groupID: GroupID, body: Annotated[models.DescriptionChange, Body()]) -> Data[models.Group]:
    return Data(data=service.describe(get_store(), current_auth(app), groupID, body.description))


@app.post(
    "/v1/groups/<groupID>/photo",
    middlewares=requires("member"),
    tags=GRP,
    summary="Set a group's photo",
    description=(
        "Sets the photo from `image_url` (https) or `asset_id` (an upload of "
        "`/v1/media/uploads`), or removes it (`remove: true`). 404 `not_found` for an unknown "
        "group (`groupID` is `grp_…` or a JID). 409 `conflict` when the channel has left the "
        "group or is not one of its admins. Role: member or above."
    ),
)
def group_photo(groupID: GroupID, body: Annotated[models.PhotoChange, Body()]) -> Data[models.Group]:
    """`image_url` (https), `asset_id` (an upload of `/v1/media/uploads`) or `remove: true`."""
    return Data(data=service.set_photo(get_store(), current_auth(app), groupID, body))


@app.get(
    "/v1/groups/<groupID>/invite-link",
    middlewares=requires("viewer"),
    tags=GRP,
    summary="Get a group's invite link",
    description=(
        "The group's current invite link (the channel must be an admin). 404 `not_found` for an "
        "unknown group (`groupID` is `grp_…` or a JID). 409 `conflict` when the channel has left "
        "the group or is not one of its admins. Role: viewer or above."
    ),
)
def get_group_invite_link(groupID: GroupID) -> Data[models.InviteLink]:
    return Data(data=service.invite_link(get_store(), current_auth(app), groupID, revoke=False))


@app.post(
    "/v1/groups/<groupID>/invite-link",
    middlewares=requires("member"),
    tags=GRP,
    summary="Get or reset a group's invite link",
    description=(
        '`{"revoke": true}` resets the link (the old code stops working); without it, answers the'
        " current one. 404 `not_found` for an unknown group (`groupID` is `grp_…` or a JID). 409 "
        "`conflict` when the channel has left the group or is not one of its admins. Role: member"
        " or above."
    ),
)
def group_invite_link(
    groupID: GroupID, body: Annotated[models.InviteLinkRequest | None, Body()] = None
) -> Data[models.InviteLink]:
    """`{"revoke": true}` resets the link (the old code stops working); without it, answers the current one."""
    revoke = bool(body and body.revoke)
    return Data(data=service.invite_link(get_store(), current_auth(app), groupID, revoke=revoke))


@app.post(
    "/v1/groups/<groupID>/join",
    middlewares=requires("member"),
    tags=GRP,
    summary="Rejoin a group",
    description=(
        "The channel joins a group it left again, with the given invite code / link or the last "
        "known code (400 `validation_failed` when none is known). 409 `conflict` when the channel"
        " is already in. 404 `not_found` for an unknown group (`groupID` is `grp_…` or a JID). "
        "Role: member or above."
    ),
)
def rejoin_group(groupID: GroupID, body: Annotated[models.JoinRequest | None, Body()] = None) -> Data[models.Group]:
    """Back into a group the channel left, with the given invite code/link or the last known code."""
    code = None
    if body and (body.invite_code or body.invite_link):
        code = common.invite_code(body.invite_code, body.invite_link, "body")
    return Data(data=service.rejoin(get_store(), current_auth(app), groupID, code))


@app.post(
    "/v1/groups/<groupID>/leave",
    middlewares=requires("member"),
    tags=GRP,
    summary="Leave a group",
    description=(
        "The channel leaves; the group stays listed with `status: left`. 404 `not_found` for an "
        "unknown group (`groupID` is `grp_…` or a JID). Role: member or above."
    ),
)
def leave_group(groupID: GroupID) -> Data[models.Group]:
    """The channel leaves; the group stays listed with `status: left`."""
    return Data(data=service.leave(get_store(), current_auth(app), groupID))


@app.post(
    "/v1/groups/<groupID>/participants/actions",
    middlewares=requires("member"),
    tags=GRP,
    summary="Change a group's participants",
    description=(
        "`action` `add`, `remove`, `promote` or `demote` on `participants` (phones in any "
        "international form); one result per number. 409 `conflict` past the participant limit. "
        "404 `not_found` for an unknown group (`groupID` is `grp_…` or a JID). 409 `conflict` "
        "when the channel has left the group or is not one of its admins. Role: member or above."
    ),
)
def group_participant_actions(
    groupID: GroupID, body: Annotated[models.ParticipantsChange, Body()]
) -> Data[models.ParticipantsResult]:
    """`action`: add, remove, promote or demote `participants` (phones); one result per number."""
    return Data(data=service.change_participants(get_store(), current_auth(app), groupID, body))


# Group hubs --------------------------------------------------------------------------------------------------------
@app.post(
    "/v1/group-hubs",
    middlewares=requires("member"),
    tags=HUB,
    status_code=201,
    summary="Create a group hub",
    description=(
        "A folder of the organization's groups (names unique per organization: 409 `conflict`); a"
        " group may be in several hubs. 404 `not_found` for an unknown group. Role: member or "
        "above."
    ),
)
def create_group_hub(body: Annotated[models.GroupHubCreate, Body()]) -> Data[models.GroupHub]:
    """A folder of the organization's groups (names unique per organization); a group may be in several hubs."""
    return Data(data=hubs.create_hub(get_store(), current_auth(app), body))


@app.get(
    "/v1/group-hubs",
    middlewares=requires("viewer"),
    tags=HUB,
    summary="List group hubs",
    description=(
        "The organization's group hubs. Cursor-paginated: pass `meta.cursor` back as `cursor` "
        "while `meta.has_more` is true. Role: viewer or above."
    ),
)
def list_group_hubs(limit: Limit = 20, cursor: Cursor = None) -> ListData[models.GroupHub]:
    items, nxt = hubs.list_hubs(get_store(), current_auth(app), limit=limit, cursor=cursor)
    return _page(items, limit, nxt)


@app.post(
    "/v1/group-hubs/<hubID>/groups/add",
    middlewares=requires("member"),
    tags=HUB,
    summary="Add groups to a hub",
    description=(
        "Adds groups (ids or JIDs) to the hub. 404 `not_found` for an unknown hub or group; 409 "
        "`conflict` past the hub's group limit. Role: member or above."
    ),
)
def add_hub_groups(hubID: HubID, body: Annotated[models.GroupIds, Body()]) -> Data[models.GroupHub]:
    return Data(data=hubs.hub_groups(get_store(), current_auth(app), hubID, body.group_ids, add=True))


@app.post(
    "/v1/group-hubs/<hubID>/groups/remove",
    middlewares=requires("member"),
    tags=HUB,
    summary="Remove groups from a hub",
    description="Removes groups from the hub. 404 `not_found` for an unknown hub. Role: member or above.",
)
def remove_hub_groups(hubID: HubID, body: Annotated[models.GroupIds, Body()]) -> Data[models.GroupHub]:
    return Data(data=hubs.hub_groups(get_store(), current_auth(app), hubID, body.group_ids, add=False))


# Communities -------------------------------------------------------------------------------------------------------
@app.post(
    "/v1/communities",
    middlewares=requires("member"),
    tags=HUB,
    status_code=201,
    summary="Create a community",
    description=(
        "Creates a community at the channel's provider and links `group_ids` (groups the channel "
        "administers, on the same channel; 400 `validation_failed` otherwise). 400 "
        "`unsupported_by_provider` when the channel's provider has no groups; 409 `conflict` when"
        " the channel is not connected. Role: member or above."
    ),
)
def create_community(body: Annotated[models.CommunityCreate, Body()]) -> Data[models.Community]:
    """Creates a community at the channel's provider and links `group_ids` (groups the channel administers)."""
    return Data(data=hubs.create_community(get_store(), current_auth(app), body))


@app.get(
    "/v1/communities",
    middlewares=requires("viewer"),
    tags=HUB,
    summary="List communities",
    description=(
        "The organization's communities, filtered by `channel_id`. Cursor-paginated: pass "
        "`meta.cursor` back as `cursor` while `meta.has_more` is true. Role: viewer or above."
    ),
)
def list_communities(
    limit: Limit = 20, cursor: Cursor = None, channel_id: ChannelFilter = None
) -> ListData[models.Community]:
    items, nxt = hubs.list_communities(
        get_store(), current_auth(app), limit=limit, cursor=cursor, channel_id=channel_id
    )
    return _page(items, limit, nxt)


@app.post(
    "/v1/communities/groups/add",
    middlewares=requires("member"),
    tags=HUB,
    summary="Link groups to a community",
    description=(
        "Links groups to the community. A group belongs to at most one community and must be on "
        "the community's channel with the channel as admin (409 `conflict` / 400 "
        "`validation_failed` otherwise). 404 `not_found` for an unknown community or group. Role:"
        " member or above."
    ),
)
def add_community_groups(body: Annotated[models.CommunityGroupsRequest, Body()]) -> Data[models.Community]:
    """A group belongs to at most one community (409 `conflict` otherwise) and must be on the community's channel."""
    return Data(data=hubs.community_groups(get_store(), current_auth(app), body, add=True))


@app.post(
    "/v1/communities/groups/remove",
    middlewares=requires("member"),
    tags=HUB,
    summary="Unlink groups from a community",
    description=(
        "Unlinks groups from the community. 404 `not_found` for an unknown community or group. Role: member or above."
    ),
)
def remove_community_groups(body: Annotated[models.CommunityGroupsRequest, Body()]) -> Data[models.Community]:
    return Data(data=hubs.community_groups(get_store(), current_auth(app), body, add=False))


# Newsletters -------------------------------------------------------------------------------------------------------
@app.post(
    "/v1/newsletters",
    middlewares=requires("member"),
    tags=NL,
    status_code=201,
    summary="Create a newsletter",
    description=(
        "Creates a newsletter owned by the channel. 400 `unsupported_by_provider` on a provider "
        "without newsletters. Role: member or above."
    ),
)
def create_newsletter(body: Annotated[models.NewsletterCreate, Body()]) -> Data[models.Newsletter]:
    """Creates a newsletter owned by the channel. 400 `unsupported_by_provider` on a provider without newsletters."""
    return Data(data=newsletters.create(get_store(), current_auth(app), body))


@app.get(
    "/v1/newsletters",
    middlewares=requires("viewer"),
    tags=NL,
    summary="List newsletters",
    description=(
        "Newsletters the organization's channels own or follow, filtered by `channel_id`, `role` "
        "and `subscribed`. Cursor-paginated: pass `meta.cursor` back as `cursor` while "
        "`meta.has_more` is true. Role: viewer or above."
    ),
)
def list_newsletters(
    limit: Limit = 20,
    cursor: Cursor = None,
    channel_id: ChannelFilter = None,
    role: Annotated[Literal["owner", "subscriber"] | None, Query(description="the channel's role")] = None,
    subscribed: Annotated[bool | None, Query(description="only followed (true) or unfollowed (false)")] = None,
) -> ListData[models.Newsletter]:
    items, nxt = newsletters.list_newsletters(
        get_store(),
        current_auth(app),
        limit=limit,
        cursor=cursor,
        channel_id=channel_id,
        role=role,
        subscribed=subscribed,
    )
    return _page(items, limit, nxt)


@app.post(
    "/v1/newsletters/invite-link",
    middlewares=requires("member"),
    tags=NL,
    summary="Get or reset a newsletter's invite link",
    description=(
        "The newsletter's invite link; `revoke: true` resets it (owner only: 409 `conflict` "
        "otherwise). 400 `unsupported_by_provider` when the channel's provider has no newsletters"
        " (or no invite links). Role: member or above."
    ),
)
def newsletter_invite_link(
    body: Annotated[models.NewsletterInviteLinkRequest, Body()],
) -> Data[models.NewsletterInviteLink]:
    """The newsletter's invite link; `revoke: true` resets it (owner only). A channel whose provider has no
    newsletters answers 400 `unsupported_by_provider`."""
    return Data(data=newsletters.invite_link(get_store(), current_auth(app), body))


@app.post(
    "/v1/newsletters/subscribe",
    middlewares=requires("member"),
    tags=NL,
    summary="Follow or unfollow a newsletter",
    description=(
        "Follows a newsletter by JID, invite link or code; `unsubscribe: true` stops following it"
        " (the owner cannot: 409 `conflict`). 404 `not_found` for an unknown or reset invite. "
        "Role: member or above."
    ),
)
def subscribe_newsletter(body: Annotated[models.NewsletterSubscribe, Body()]) -> Data[models.Newsletter]:
    """Follows a newsletter by JID, invite link or code; `unsubscribe: true` stops following it."""
    return Data(data=newsletters.subscribe(get_store(), current_auth(app), body))


@app.get(
    "/v1/newsletters/<newsletterJID>",
    middlewares=requires("viewer"),
    tags=NL,
    summary="Get a newsletter",
    description=(
        "Reads one newsletter by JID (with `channel_id` when it is on several of your channels). "
        "404 `not_found` for an unknown newsletter. Role: viewer or above."
    ),
)
def get_newsletter(
    newsletterJID: Annotated[str, Path(description="the newsletter's JID (`120363…@newsletter`)")],
    channel_id: ChannelFilter = None,
) -> Data[models.Newsletter]:
    return Data(data=newsletters.get(get_store(), current_auth(app), newsletterJID, channel_id))


@app.get(
    "/v1/newsletters/<newsletterJID>/messages",
    middlewares=requires("viewer"),
    tags=NL,
    summary="List a newsletter's posts",
    description=(
        "The newsletter's posts, newest first, read through `channel_id`; `next_cursor` continues"
        " (empty on the last page). 400 `unsupported_by_provider` when the channel's provider "
        "cannot read newsletters. Role: viewer or above."
    ),
)
def newsletter_messages(
    newsletterJID: Annotated[str, Path(min_length=1, description="the newsletter's JID (`120363…@newsletter`)")],
    channel_id: Annotated[str, Query(min_length=1, max_length=64)],
    limit: Annotated[int, Query(ge=1, le=200, json_schema_extra={"format": "int32"})] = 20,
    cursor: Cursor = None,
) -> Data[models.NewsletterMessages]:
    """The newsletter's posts, newest first; `next_cursor` continues (empty on the last page)."""
    data = newsletters.messages(
        get_store(), current_auth(app), newsletterJID, channel_id=channel_id, limit=limit, cursor=cursor
    )
    return Data(data=data)


handler = make_handler(app)
