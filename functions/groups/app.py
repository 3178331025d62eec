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
GRP = ["groups"]
HUB = ["group hubs and communities"]
NL = ["newsletters"]
Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=2048)]
ChannelFilter = Annotated[str | None, Query(min_length=1, max_length=64)]


def _page[T](items: list[T], limit: int, cursor: str | None) -> ListData[T]:
    return cursor_list(items, limit, cursor)


# Groups: collection ------------------------------------------------------------------------------------------------
@app.post("/v1/groups", middlewares=requires("member"), tags=GRP, status_code=201)
def create_group(body: Annotated[models.GroupCreate, Body()]) -> Data[models.GroupCreated]:
    """Creates the group at the channel's provider (the channel is its creator, `superadmin`). Numbers the provider
    refuses are listed in `failed_participants`. 400 `unsupported_by_provider` on a provider without groups."""
    group, failed = service.create(get_store(), current_auth(app), body)
    return Data(data=models.GroupCreated(**group.model_dump(), failed_participants=failed))


@app.get("/v1/groups", middlewares=requires("viewer"), tags=GRP)
def list_groups(
    limit: Limit = 20,
    cursor: Cursor = None,
    channel_id: ChannelFilter = None,
    status: Annotated[Literal["active", "left"] | None, Query()] = None,
) -> ListData[models.Group]:
    """Every group the organization's channels created or joined (also those they left: `status=left`)."""
    items, nxt = service.list_groups(
        get_store(), current_auth(app), limit=limit, cursor=cursor, channel_id=channel_id, status=status
    )
    return _page(items, limit, nxt)


@app.get("/v1/groups/mine", middlewares=requires("viewer"), tags=GRP)
def my_groups(limit: Limit = 20, cursor: Cursor = None, channel_id: ChannelFilter = None) -> ListData[models.Group]:
    """The active groups your channels administer (`self_role` admin or superadmin)."""
    items, nxt = service.list_groups(
        get_store(), current_auth(app), limit=limit, cursor=cursor, channel_id=channel_id, mine=True
    )
    return _page(items, limit, nxt)


# Groups: body-driven commands --------------------------------------------------------------------------------------
@app.post("/v1/groups/join", middlewares=requires("member"), tags=GRP)
def join_group(body: Annotated[models.GroupJoinRequest, Body()]) -> Data[models.Group]:
    """Joins by invite link or code. 404 for an unknown or reset code, 409 when the channel is already in."""
    code = common.invite_code(body.invite_code, body.invite_link, "body")
    return Data(data=service.join(get_store(), current_auth(app), body.channel_id, code))


@app.post("/v1/groups/leave", middlewares=requires("member"), tags=GRP)
def leave_group_by_body(body: Annotated[models.GroupRef, Body()]) -> Data[models.Group]:
    return Data(data=service.leave(get_store(), current_auth(app), body.ref, body.channel_id))


@app.post("/v1/groups/name", middlewares=requires("member"), tags=GRP)
def rename_group_by_body(body: Annotated[models.GroupNameRequest, Body()]) -> Data[models.Group]:
    return Data(data=service.rename(get_store(), current_auth(app), body.ref, body.name, body.channel_id))


@app.post("/v1/groups/description", middlewares=requires("member"), tags=GRP)
def describe_group_by_body(body: Annotated[models.GroupDescriptionRequest, Body()]) -> Data[models.Group]:
    return Data(data=service.describe(get_store(), current_auth(app), body.ref, body.description, body.channel_id))


@app.post("/v1/groups/photo", middlewares=requires("member"), tags=GRP)
def group_photo_by_body(body: Annotated[models.GroupPhotoRequest, Body()]) -> Data[models.Group]:
    return Data(data=service.set_photo(get_store(), current_auth(app), body.ref, body, body.channel_id))


@app.post("/v1/groups/invite-link", middlewares=requires("member"), tags=GRP)
def group_invite_link_by_body(body: Annotated[models.GroupInviteLinkRequest, Body()]) -> Data[models.InviteLink]:
    """The group's invite link (the channel must be an admin); `revoke: true` resets it."""
    auth = current_auth(app)
    return Data(data=service.invite_link(get_store(), auth, body.ref, revoke=body.revoke, channel_id=body.channel_id))


@app.post("/v1/groups/participants", middlewares=requires("member"), tags=GRP)
def group_participants_by_body(
    body: Annotated[models.GroupParticipantsRequest, Body()],
) -> Data[models.ParticipantsResult]:
    """`action`: add, remove, promote or demote `participants` (phones); one result per number."""
    return Data(data=service.change_participants(get_store(), current_auth(app), body.ref, body, body.channel_id))


# Groups: one group by id or JID ------------------------------------------------------------------------------------
@app.get("/v1/groups/<groupID>", middlewares=requires("viewer"), tags=GRP)
def get_group(groupID: str, channel_id: ChannelFilter = None) -> Data[models.Group]:
    """`groupID`: `grp_…` or a JID (`120363…@g.us`; with `channel_id` when the group is on several channels)."""
    return Data(data=service.get(get_store(), current_auth(app), groupID, channel_id))


@app.post("/v1/groups/<groupID>/name", middlewares=requires("member"), tags=GRP)
def rename_group(groupID: str, body: Annotated[models.NameChange, Body()]) -> Data[models.Group]:
    return Data(data=service.rename(get_store(), current_auth(app), groupID, body.name))


@app.post("/v1/groups/<groupID>/description", middlewares=requires("member"), tags=GRP)
def describe_group(groupID: str, body: Annotated[models.DescriptionChange, Body()]) -> Data[models.Group]:
    return Data(data=service.describe(get_store(), current_auth(app), groupID, body.description))


@app.post("/v1/groups/<groupID>/photo", middlewares=requires("member"), tags=GRP)
def group_photo(groupID: str, body: Annotated[models.PhotoChange, Body()]) -> Data[models.Group]:
    """`image_url` (https), `asset_id` (an upload of `/v1/media/uploads`) or `remove: true`."""
    return Data(data=service.set_photo(get_store(), current_auth(app), groupID, body))


@app.get("/v1/groups/<groupID>/invite-link", middlewares=requires("viewer"), tags=GRP)
def get_group_invite_link(groupID: str) -> Data[models.InviteLink]:
    return Data(data=service.invite_link(get_store(), current_auth(app), groupID, revoke=False))


@app.post("/v1/groups/<groupID>/invite-link", middlewares=requires("member"), tags=GRP)
def group_invite_link(
    groupID: str, body: Annotated[models.InviteLinkRequest | None, Body()] = None
) -> Data[models.InviteLink]:
    """`{"revoke": true}` resets the link (the old code stops working); without it, answers the current one."""
    revoke = bool(body and body.revoke)
    return Data(data=service.invite_link(get_store(), current_auth(app), groupID, revoke=revoke))


@app.post("/v1/groups/<groupID>/join", middlewares=requires("member"), tags=GRP)
def rejoin_group(groupID: str, body: Annotated[models.JoinRequest | None, Body()] = None) -> Data[models.Group]:
    """Back into a group the channel left, with the given invite code/link or the last known code."""
    code = None
    if body and (body.invite_code or body.invite_link):
        code = common.invite_code(body.invite_code, body.invite_link, "body")
    return Data(data=service.rejoin(get_store(), current_auth(app), groupID, code))


@app.post("/v1/groups/<groupID>/leave", middlewares=requires("member"), tags=GRP)
def leave_group(groupID: str) -> Data[models.Group]:
    """The channel leaves; the group stays listed with `status: left`."""
    return Data(data=service.leave(get_store(), current_auth(app), groupID))


@app.post("/v1/groups/<groupID>/participants/actions", middlewares=requires("member"), tags=GRP)
def group_participant_actions(
    groupID: str, body: Annotated[models.ParticipantsChange, Body()]
) -> Data[models.ParticipantsResult]:
    """`action`: add, remove, promote or demote `participants` (phones); one result per number."""
    return Data(data=service.change_participants(get_store(), current_auth(app), groupID, body))


# Group hubs --------------------------------------------------------------------------------------------------------
@app.post("/v1/group-hubs", middlewares=requires("member"), tags=HUB, status_code=201)
def create_group_hub(body: Annotated[models.GroupHubCreate, Body()]) -> Data[models.GroupHub]:
    """A folder of the organization's groups (names unique per organization); a group may be in several hubs."""
    return Data(data=hubs.create_hub(get_store(), current_auth(app), body))


@app.get("/v1/group-hubs", middlewares=requires("viewer"), tags=HUB)
def list_group_hubs(limit: Limit = 20, cursor: Cursor = None) -> ListData[models.GroupHub]:
    items, nxt = hubs.list_hubs(get_store(), current_auth(app), limit=limit, cursor=cursor)
    return _page(items, limit, nxt)


@app.post("/v1/group-hubs/<hubID>/groups/add", middlewares=requires("member"), tags=HUB)
def add_hub_groups(hubID: str, body: Annotated[models.GroupIds, Body()]) -> Data[models.GroupHub]:
    return Data(data=hubs.hub_groups(get_store(), current_auth(app), hubID, body.group_ids, add=True))


@app.post("/v1/group-hubs/<hubID>/groups/remove", middlewares=requires("member"), tags=HUB)
def remove_hub_groups(hubID: str, body: Annotated[models.GroupIds, Body()]) -> Data[models.GroupHub]:
    return Data(data=hubs.hub_groups(get_store(), current_auth(app), hubID, body.group_ids, add=False))


# Communities -------------------------------------------------------------------------------------------------------
@app.post("/v1/communities", middlewares=requires("member"), tags=HUB, status_code=201)
def create_community(body: Annotated[models.CommunityCreate, Body()]) -> Data[models.Community]:
    """Creates a community at the channel's provider and links `group_ids` (groups the channel administers)."""
    return Data(data=hubs.create_community(get_store(), current_auth(app), body))


@app.get("/v1/communities", middlewares=requires("viewer"), tags=HUB)
def list_communities(
    limit: Limit = 20, cursor: Cursor = None, channel_id: ChannelFilter = None
) -> ListData[models.Community]:
    items, nxt = hubs.list_communities(
        get_store(), current_auth(app), limit=limit, cursor=cursor, channel_id=channel_id
    )
    return _page(items, limit, nxt)


@app.post("/v1/communities/groups/add", middlewares=requires("member"), tags=HUB)
def add_community_groups(body: Annotated[models.CommunityGroupsRequest, Body()]) -> Data[models.Community]:
    """A group belongs to at most one community (409 `conflict` otherwise) and must be on the community's channel."""
    return Data(data=hubs.community_groups(get_store(), current_auth(app), body, add=True))


@app.post("/v1/communities/groups/remove", middlewares=requires("member"), tags=HUB)
def remove_community_groups(body: Annotated[models.CommunityGroupsRequest, Body()]) -> Data[models.Community]:
    return Data(data=hubs.community_groups(get_store(), current_auth(app), body, add=False))


# Newsletters -------------------------------------------------------------------------------------------------------
@app.post("/v1/newsletters", middlewares=requires("member"), tags=NL, status_code=201)
def create_newsletter(body: Annotated[models.NewsletterCreate, Body()]) -> Data[models.Newsletter]:
    """Creates a newsletter owned by the channel. 400 `unsupported_by_provider` on a provider without newsletters."""
    return Data(data=newsletters.create(get_store(), current_auth(app), body))


@app.get("/v1/newsletters", middlewares=requires("viewer"), tags=NL)
def list_newsletters(
    limit: Limit = 20,
    cursor: Cursor = None,
    channel_id: ChannelFilter = None,
    role: Annotated[Literal["owner", "subscriber"] | None, Query()] = None,
    subscribed: Annotated[bool | None, Query()] = None,
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


@app.post("/v1/newsletters/invite-link", middlewares=requires("member"), tags=NL)
def newsletter_invite_link(
    body: Annotated[models.NewsletterInviteLinkRequest, Body()],
) -> Data[models.NewsletterInviteLink]:
    """The newsletter's invite link; `revoke: true` resets it (owner only). A channel whose provider has no
    newsletters answers 400 `unsupported_by_provider`."""
    return Data(data=newsletters.invite_link(get_store(), current_auth(app), body))


@app.post("/v1/newsletters/subscribe", middlewares=requires("member"), tags=NL)
def subscribe_newsletter(body: Annotated[models.NewsletterSubscribe, Body()]) -> Data[models.Newsletter]:
    """Follows a newsletter by JID, invite link or code; `unsubscribe: true` stops following it."""
    return Data(data=newsletters.subscribe(get_store(), current_auth(app), body))


@app.get("/v1/newsletters/<newsletterJID>", middlewares=requires("viewer"), tags=NL)
def get_newsletter(newsletterJID: str, channel_id: ChannelFilter = None) -> Data[models.Newsletter]:
    return Data(data=newsletters.get(get_store(), current_auth(app), newsletterJID, channel_id))


@app.get("/v1/newsletters/<newsletterJID>/messages", middlewares=requires("viewer"), tags=NL)
def newsletter_messages(
    newsletterJID: Annotated[str, Path(min_length=1)],
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
