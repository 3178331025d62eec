"""Groups, group hubs, communities and newsletters through the API (gateway → real handlers → moto), on sandbox
channels (deterministic provider) and a whatsapp_cloud channel (no groups, no newsletters)."""

from __future__ import annotations

import pytest

from switchboard.providers.base import ProviderUnavailable
from switchboard.providers.sandbox import SandboxProvider
from switchboard.store import get_store
from tests.integration.support import Api

ADA, BOB, CAT, DAN = "+1 415 555 2671", "+14155552672", "0014155552673", "+1 (415) 555-2674"
ADA_D, BOB_D, CAT_D, DAN_D = "14155552671", "14155552672", "14155552673", "14155552674"
REFUSED = "+1 415 555 0000"


def _ok(resp, status: int = 200) -> dict:
    assert resp.status_code == status, resp.text
    return resp.json()["data"]


def _channel(api: Api, name: str = "sbx", platform: str = "sandbox", headers=None, connect: bool = True) -> dict:
    ch = _ok(api.post("/v1/channels", json={"name": name, "platform": platform}, headers=headers), 201)
    if connect:
        return _ok(api.post(f"/v1/channels/{ch['id']}/connect", headers=headers))
    return ch


def _group(api: Api, channel: dict, name: str = "Team", participants=(ADA, BOB), headers=None) -> dict:
    body = {"channel_id": channel["id"], "name": name, "participants": list(participants)}
    return _ok(api.post("/v1/groups", json=body, headers=headers), 201)


def _key(api: Api, role: str) -> dict[str, str]:
    return {"X-Api-Key": _ok(api.post("/v1/api-keys", json={"name": role, "role": role}), 201)["key"]}


@pytest.fixture
def channel(api: Api) -> dict:
    return _channel(api)


# Groups ------------------------------------------------------------------------------------------------------------
def test_create_read_and_list_groups(api: Api, channel: dict):
    created = _group(api, channel, participants=[ADA, BOB, ADA_D, REFUSED])
    assert created["id"].startswith("grp_") and created["jid"].endswith("@g.us")
    assert created["channel_id"] == channel["id"] and created["status"] == "active"
    assert created["self_role"] == "superadmin" and created["participant_count"] == 2
    assert [(p["phone"], p["role"]) for p in created["participants"]] == [(ADA_D, "member"), (BOB_D, "member")]
    assert created["failed_participants"] == [{"phone": "14155550000", "status": "failed", "reason": "not_on_whatsapp"}]
    assert created["invite_link"].startswith("https://chat.whatsapp.com/")

    by_id = _ok(api.get(f"/v1/groups/{created['id']}"))
    by_jid = _ok(api.get(f"/v1/groups/{created['jid']}"))
    assert by_id == by_jid and by_id["id"] == created["id"] and "failed_participants" not in by_id
    assert _ok(api.get(f"/v1/groups/{created['jid']}", params={"channel_id": channel["id"]}))["id"] == created["id"]
    api.assert_error(api.get(f"/v1/groups/{created['jid']}", params={"channel_id": "ch_other"}), 404, "not_found")
    api.assert_error(api.get("/v1/groups/grp_missing"), 404, "not_found")
    api.assert_error(api.get("/v1/groups/120363000000000001@g.us"), 404, "not_found")
    api.assert_error(api.get("/v1/groups/not-a-group"), 404, "not_found")

    second = _group(api, channel, name="Second")
    page = api.get("/v1/groups", params={"limit": 1}).json()
    assert len(page["data"]) == 1 and page["meta"]["has_more"] is True and page["meta"]["limit"] == 1
    rest = api.get("/v1/groups", params={"limit": 1, "cursor": page["meta"]["cursor"]}).json()
    assert {page["data"][0]["id"], rest["data"][0]["id"]} == {created["id"], second["id"]}
    api.assert_error(api.get("/v1/groups", params={"cursor": "forged.cursor"}), 400, "validation_failed")
    api.assert_error(
        api.get("/v1/groups", params={"limit": 1, "cursor": page["meta"]["cursor"], "status": "left"}),
        400,
        "validation_failed",
    )  # a cursor is bound to its query
    api.assert_error(api.get("/v1/groups", params={"limit": 0}), 400, "validation_failed")
    api.assert_error(api.get("/v1/groups", params={"limit": 101}), 400, "validation_failed")
    api.assert_error(api.get("/v1/groups", params={"status": "gone"}), 400, "validation_failed")
    assert {g["id"] for g in _ok(api.get("/v1/groups/mine"))} == {created["id"], second["id"]}
    assert _ok(api.get("/v1/groups", params={"channel_id": "ch_other"})) == []

    listed = api.get(f"/v1/channels/{channel['id']}/groups").json()
    assert {g["id"] for g in listed["data"]} == {created["id"], second["id"]} and listed["meta"]["total"] == 2


def test_group_validation(api: Api, channel: dict):
    def bad(body: dict, field: str) -> None:
        error = api.assert_error(api.post("/v1/groups", json=body), 400, "validation_failed")
        assert any(d["field"].startswith(field) for d in error["details"]), error

    base = {"channel_id": channel["id"], "name": "x", "participants": [ADA]}
    bad({k: v for k, v in base.items() if k != "name"}, "body.name")
    bad({**base, "name": ""}, "body.name")
    bad({**base, "name": "n" * 101}, "body.name")
    bad({**base, "participants": []}, "body.participants")
    bad({**base, "participants": [ADA, "not a phone"]}, "body.participants.1")
    bad({**base, "channel_id": ""}, "body.channel_id")
    bad({**base, "extra": 1}, "body.extra")
    api.assert_error(api.post("/v1/groups", json={**base, "channel_id": "ch_missing"}), 404, "not_found")
    group = _group(api, channel)
    api.assert_error(api.post("/v1/groups/name", json={"name": "x"}), 400, "validation_failed")
    both = {"group_id": group["id"], "group_jid": group["jid"], "name": "x"}
    api.assert_error(api.post("/v1/groups/name", json=both), 400, "validation_failed")
    api.assert_error(api.post("/v1/group-hubs", json={"name": "h", "group_ids": ["g" * 129]}), 400, "validation_failed")
    api.assert_error(api.post(f"/v1/groups/{group['id']}/name", json={"name": ""}), 400, "validation_failed")
    api.assert_error(
        api.post(f"/v1/groups/{group['id']}/description", json={"description": "d" * 2049}), 400, "validation_failed"
    )
    api.assert_error(
        api.post(f"/v1/groups/{group['id']}/photo", json={"image_url": "https://x.example/p.png", "remove": True}),
        400,
        "validation_failed",
    )
    api.assert_error(
        api.post(f"/v1/groups/{group['id']}/photo", json={"image_url": "http://x.example/p.png"}),
        400,
        "validation_failed",
    )
    api.assert_error(
        api.post(f"/v1/groups/{group['id']}/participants/actions", json={"action": "kick", "participants": [ADA]}),
        400,
        "validation_failed",
    )
    api.assert_error(api.post("/v1/groups/join", json={"channel_id": channel["id"]}), 400, "validation_failed")
    error = api.assert_error(
        api.post("/v1/groups/join", json={"channel_id": channel["id"], "invite_link": "https://example.com/abc"}),
        400,
        "validation_failed",
    )
    assert error["details"][0]["field"] == "body.invite_link"


def test_name_description_photo_by_id_jid_and_body(api: Api, channel: dict):
    group = _group(api, channel)
    renamed = _ok(api.post(f"/v1/groups/{group['id']}/name", json={"name": "Renamed"}))
    assert renamed["name"] == "Renamed"
    by_body = _ok(api.post("/v1/groups/name", json={"group_jid": group["jid"], "name": "Body name"}))
    assert by_body["name"] == "Body name" and by_body["id"] == group["id"]
    described = _ok(api.post(f"/v1/groups/{group['jid']}/description", json={"description": "About us"}))
    assert described["description"] == "About us"
    cleared = _ok(
        api.post(
            "/v1/groups/description", json={"group_id": group["id"], "channel_id": channel["id"], "description": ""}
        )
    )
    assert cleared["description"] == ""
    api.assert_error(
        api.post("/v1/groups/description", json={"group_id": group["id"], "channel_id": "ch_x", "description": ""}),
        404,
        "not_found",
    )
    photo = _ok(api.post(f"/v1/groups/{group['id']}/photo", json={"image_url": "https://cdn.example.com/p.png"}))
    assert photo["photo"]["url"] == "https://cdn.example.com/p.png" and photo["photo"]["provider_photo_id"]
    asset = _ok(api.post("/v1/media/uploads", json={"content_type": "image/png", "size": 10}), 201)
    by_asset = _ok(api.post("/v1/groups/photo", json={"group_id": group["id"], "asset_id": asset["id"]}))
    assert by_asset["photo"]["asset_id"] == asset["id"] and by_asset["photo"]["url"] is None
    api.assert_error(api.post(f"/v1/groups/{group['id']}/photo", json={"asset_id": "asset_missing"}), 404, "not_found")
    removed = _ok(api.post(f"/v1/groups/{group['id']}/photo", json={"remove": True}))
    assert removed["photo"] is None
    item = get_store().get({"PK": f"ORG#{api.org_id}", "SK": f"GROUP#{group['id']}"})
    assert item is not None and item["version"] == 8  # created at 1, each of the 7 changes bumped it once


def test_participant_actions(api: Api, channel: dict):
    group = _group(api, channel, participants=[ADA])
    path = f"/v1/groups/{group['id']}/participants/actions"
    added = _ok(api.post(path, json={"action": "add", "participants": [BOB, ADA, CAT, REFUSED, BOB_D]}))
    assert [(r["phone"], r["status"]) for r in added["results"]] == [
        (BOB_D, "added"),
        (ADA_D, "unchanged"),
        (CAT_D, "added"),
        ("14155550000", "failed"),
    ]
    assert added["results"][3]["reason"] == "not_on_whatsapp"
    assert [p["phone"] for p in added["group"]["participants"]] == [ADA_D, BOB_D, CAT_D]

    promoted = _ok(api.post(path, json={"action": "promote", "participants": [BOB, DAN]}))
    assert [(r["phone"], r["status"]) for r in promoted["results"]] == [(BOB_D, "promoted"), (DAN_D, "not_participant")]
    roles = {p["phone"]: p["role"] for p in promoted["group"]["participants"]}
    assert roles == {ADA_D: "member", BOB_D: "admin", CAT_D: "member"}
    again = _ok(api.post(path, json={"action": "promote", "participants": [BOB]}))
    assert again["results"][0]["status"] == "unchanged"

    demoted = _ok(
        api.post(
            "/v1/groups/participants", json={"group_jid": group["jid"], "action": "demote", "participants": [BOB, ADA]}
        )
    )
    assert [(r["phone"], r["status"]) for r in demoted["results"]] == [(BOB_D, "demoted"), (ADA_D, "unchanged")]
    removed = _ok(api.post(path, json={"action": "remove", "participants": [CAT, DAN]}))
    assert [(r["phone"], r["status"]) for r in removed["results"]] == [(CAT_D, "removed"), (DAN_D, "not_participant")]
    assert removed["group"]["participant_count"] == 2
    error = api.assert_error(api.post(path, json={"action": "add", "participants": ["12"]}), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.participants.0"


def test_invite_links_join_and_leave(api: Api, channel: dict):
    group = _group(api, channel)
    link = _ok(api.get(f"/v1/groups/{group['id']}/invite-link"))
    assert link["invite_link"] == f"https://chat.whatsapp.com/{link['invite_code']}" and link["revoked"] is False
    assert _ok(api.post(f"/v1/groups/{group['id']}/invite-link"))["invite_code"] == link["invite_code"]
    revoked = _ok(api.post(f"/v1/groups/{group['id']}/invite-link", json={"revoke": True}))
    assert revoked["revoked"] is True and revoked["invite_code"] != link["invite_code"]
    by_body = _ok(api.post("/v1/groups/invite-link", json={"group_jid": group["jid"], "revoke": True}))
    assert by_body["invite_code"] not in (link["invite_code"], revoked["invite_code"])

    # A second channel of the organization joins with the current link; the reset codes no longer work.
    other = _channel(api, "second")
    for old in (link["invite_code"], revoked["invite_code"]):
        api.assert_error(
            api.post("/v1/groups/join", json={"channel_id": other["id"], "invite_code": old}), 404, "not_found"
        )
    api.assert_error(
        api.post("/v1/groups/join", json={"channel_id": channel["id"], "invite_link": by_body["invite_link"]}),
        409,
        "conflict",
    )  # the creating channel is in already
    joined = _ok(api.post("/v1/groups/join", json={"channel_id": other["id"], "invite_link": by_body["invite_link"]}))
    assert joined["jid"] == group["jid"] and joined["id"] != group["id"] and joined["channel_id"] == other["id"]
    assert joined["self_role"] == "member" and joined["invite_link"] is None
    api.assert_error(api.get(f"/v1/groups/{group['jid']}"), 400, "validation_failed")  # on two channels now
    assert _ok(api.get(f"/v1/groups/{group['jid']}", params={"channel_id": other["id"]}))["id"] == joined["id"]
    api.assert_error(api.get(f"/v1/groups/{joined['id']}/invite-link"), 409, "conflict")  # members see no link
    api.assert_error(
        api.post(f"/v1/groups/{joined['id']}/participants/actions", json={"action": "add", "participants": [DAN]}),
        409,
        "conflict",
    )
    assert {g["id"] for g in _ok(api.get("/v1/groups/mine"))} == {group["id"]}

    left = _ok(api.post(f"/v1/groups/{joined['id']}/leave"))
    assert left["status"] == "left" and left["self_role"] is None and left["left_at"]
    api.assert_error(api.post(f"/v1/groups/{joined['id']}/leave"), 409, "conflict")
    api.assert_error(api.post(f"/v1/groups/{joined['id']}/name", json={"name": "x"}), 409, "conflict")
    assert [g["id"] for g in _ok(api.get("/v1/groups", params={"status": "left"}))] == [joined["id"]]
    back = _ok(api.post(f"/v1/groups/{joined['id']}/join"))
    assert back["id"] == joined["id"] and back["status"] == "active" and back["left_at"] is None
    api.assert_error(api.post(f"/v1/groups/{joined['id']}/join"), 409, "conflict")
    left_by_body = _ok(api.post("/v1/groups/leave", json={"group_id": group["id"]}))
    assert left_by_body["status"] == "left"


def test_joining_a_group_the_organization_did_not_know(api: Api, channel: dict):
    joined = _ok(api.post("/v1/groups/join", json={"channel_id": channel["id"], "invite_code": "AbCdEf123456"}))
    assert joined["status"] == "active" and joined["self_role"] == "member" and joined["participant_count"] == 3
    assert joined["name"] == "Sandbox group AbCdEf"
    again = _ok(api.post("/v1/groups/leave", json={"group_jid": joined["jid"], "channel_id": channel["id"]}))
    assert again["status"] == "left"
    rejoined = _ok(api.post("/v1/groups/join", json={"channel_id": channel["id"], "invite_code": "AbCdEf123456"}))
    assert rejoined["id"] == joined["id"] and rejoined["status"] == "active"
    api.assert_error(
        api.post("/v1/groups/join", json={"channel_id": channel["id"], "invite_code": "Unknown0000"}), 404, "not_found"
    )


def test_groups_of_another_organization_are_not_found(api: Api, channel: dict):
    group = _group(api, channel)
    hub = _ok(api.post("/v1/group-hubs", json={"name": "Hub", "group_ids": [group["id"]]}), 201)
    _, b = api.new_org("groups-b@example.com")
    b_channel = _channel(api, "b", headers=b)
    for path in (f"/v1/groups/{group['id']}", f"/v1/groups/{group['jid']}", f"/v1/groups/{group['id']}/invite-link"):
        api.assert_error(api.get(path, headers=b), 404, "not_found")
    for path, body in (
        (f"/v1/groups/{group['id']}/name", {"name": "B"}),
        ("/v1/groups/name", {"group_jid": group["jid"], "name": "B"}),
        (f"/v1/groups/{group['id']}/participants/actions", {"action": "remove", "participants": [ADA]}),
        (f"/v1/groups/{group['id']}/leave", None),
        (f"/v1/group-hubs/{hub['id']}/groups/add", {"group_ids": [group["id"]]}),
        ("/v1/group-hubs", {"name": "B hub", "group_ids": [group["id"]]}),
        ("/v1/groups", {"channel_id": channel["id"], "name": "B", "participants": [ADA]}),
    ):
        api.assert_error(api.post(path, json=body, headers=b), 404, "not_found")
    assert _ok(api.get("/v1/groups", headers=b)) == [] and _ok(api.get("/v1/group-hubs", headers=b)) == []
    b_group = _group(api, b_channel, headers=b)
    api.assert_error(
        api.post("/v1/group-hubs/" + hub["id"] + "/groups/add", json={"group_ids": [b_group["id"]]}), 404, "not_found"
    )
    assert _ok(api.get(f"/v1/groups/{group['id']}"))["name"] == "Team"


def test_a_concurrent_change_is_a_conflict_and_an_outage_changes_nothing(api: Api, channel: dict, monkeypatch):
    group = _group(api, channel)
    key = {"PK": f"ORG#{api.org_id}", "SK": f"GROUP#{group['id']}"}
    original = SandboxProvider.groups

    def racing(self, action, payload):
        if action == "set_name":  # another writer changes the group while the provider works on the rename
            get_store().update(
                key,
                "SET #d = :d, #v = #v + :one",
                names={"#d": "description", "#v": "version"},
                values={":d": "theirs", ":one": 1},
            )
        return original(self, action, payload)

    monkeypatch.setattr(SandboxProvider, "groups", racing)
    api.assert_error(api.post(f"/v1/groups/{group['id']}/name", json={"name": "Mine"}), 409, "conflict")
    after = _ok(api.get(f"/v1/groups/{group['id']}"))
    assert (after["name"], after["description"]) == ("Team", "theirs")  # their change kept, ours refused

    def down(self, action, payload):
        raise ProviderUnavailable("sandbox offline")

    monkeypatch.setattr(SandboxProvider, "groups", down)
    resp = api.post(f"/v1/groups/{group['id']}/participants/actions", json={"action": "add", "participants": [DAN]})
    api.assert_error(resp, 503, "service_unavailable")
    assert resp.headers["Retry-After"]
    assert _ok(api.get(f"/v1/groups/{group['id']}"))["participant_count"] == 2


def test_viewers_read_and_members_write(api: Api, channel: dict):
    group = _group(api, channel)
    viewer, member = _key(api, "viewer"), _key(api, "member")
    assert _ok(api.get(f"/v1/groups/{group['id']}", headers=viewer))["id"] == group["id"]
    api.assert_error(api.post(f"/v1/groups/{group['id']}/name", json={"name": "v"}, headers=viewer), 403, "forbidden")
    assert _ok(api.post(f"/v1/groups/{group['id']}/name", json={"name": "m"}, headers=member))["name"] == "m"


def test_providers_without_groups_or_newsletters(api: Api, channel: dict):
    cloud = _channel(api, "cloud", platform="whatsapp_cloud", connect=False)  # its groups: test_cloud_groups.py
    for path, body in (
        ("/v1/newsletters", {"channel_id": cloud["id"], "name": "x"}),
        ("/v1/newsletters/invite-link", {"channel_id": cloud["id"], "newsletter_jid": "120363000000000001@newsletter"}),
        ("/v1/newsletters/subscribe", {"channel_id": cloud["id"], "newsletter_jid": "120363000000000001@newsletter"}),
    ):
        error = api.assert_error(api.post(path, json=body), 400, "unsupported_by_provider")
        assert error["details"][0]["platform"] == "whatsapp_cloud", error
    api.assert_error(
        api.get("/v1/newsletters/120363000000000001@newsletter/messages", params={"channel_id": cloud["id"]}),
        400,
        "unsupported_by_provider",
    )
    offline = _channel(api, "offline", connect=False)
    error = api.assert_error(
        api.post("/v1/groups", json={"channel_id": offline["id"], "name": "x", "participants": [ADA]}), 409, "conflict"
    )
    assert error["details"] == [{"channel_status": "disconnected"}]


# Hubs and communities ----------------------------------------------------------------------------------------------
def test_group_hubs(api: Api, channel: dict):
    one, two = _group(api, channel, "One"), _group(api, channel, "Two")
    hub = _ok(api.post("/v1/group-hubs", json={"name": "Sales", "group_ids": [one["id"]]}), 201)
    assert hub["id"].startswith("gh_") and hub["group_ids"] == [one["id"]] and hub["group_count"] == 1
    api.assert_error(api.post("/v1/group-hubs", json={"name": "sales"}), 409, "conflict")
    api.assert_error(api.post("/v1/group-hubs", json={"name": ""}), 400, "validation_failed")
    api.assert_error(api.post("/v1/group-hubs", json={"name": "x", "group_ids": ["grp_nope"]}), 404, "not_found")
    added = _ok(api.post(f"/v1/group-hubs/{hub['id']}/groups/add", json={"group_ids": [two["jid"], one["id"]]}))
    assert added["group_ids"] == [one["id"], two["id"]]
    api.assert_error(
        api.post(f"/v1/group-hubs/{hub['id']}/groups/add", json={"group_ids": []}), 400, "validation_failed"
    )
    api.assert_error(api.post("/v1/group-hubs/gh_nope/groups/add", json={"group_ids": [one["id"]]}), 404, "not_found")
    removed = _ok(api.post(f"/v1/group-hubs/{hub['id']}/groups/remove", json={"group_ids": [one["id"]]}))
    assert removed["group_ids"] == [two["id"]]
    other = _ok(api.post("/v1/group-hubs", json={"name": "Support", "group_ids": [two["id"]]}), 201)
    page = api.get("/v1/group-hubs", params={"limit": 1}).json()
    rest = api.get("/v1/group-hubs", params={"limit": 1, "cursor": page["meta"]["cursor"]}).json()
    assert {page["data"][0]["id"], rest["data"][0]["id"]} == {hub["id"], other["id"]}


def test_communities(api: Api, channel: dict):
    one, two, three = (_group(api, channel, n) for n in ("One", "Two", "Three"))
    community = _ok(
        api.post("/v1/communities", json={"channel_id": channel["id"], "name": "Club", "group_ids": [one["id"]]}), 201
    )
    assert community["id"].startswith("cm_") and community["jid"].endswith("@g.us")
    assert community["announcement_group_jid"] and community["group_ids"] == [one["id"]]
    assert _ok(api.get(f"/v1/groups/{one['id']}"))["community_id"] == community["id"]
    added = _ok(
        api.post("/v1/communities/groups/add", json={"community_id": community["id"], "group_ids": [two["jid"]]})
    )
    assert added["group_ids"] == [one["id"], two["id"]]
    other = _ok(api.post("/v1/communities", json={"channel_id": channel["id"], "name": "Other"}), 201)
    api.assert_error(
        api.post("/v1/communities/groups/add", json={"community_id": other["id"], "group_ids": [one["id"]]}),
        409,
        "conflict",
    )
    elsewhere = _group(api, _channel(api, "second"), "Elsewhere")
    api.assert_error(
        api.post("/v1/communities/groups/add", json={"community_id": community["id"], "group_ids": [elsewhere["id"]]}),
        400,
        "validation_failed",
    )
    removed = _ok(
        api.post(
            "/v1/communities/groups/remove",
            json={"community_id": community["id"], "group_ids": [one["id"], three["id"]]},
        )
    )
    assert removed["group_ids"] == [two["id"]]
    assert _ok(api.get(f"/v1/groups/{one['id']}"))["community_id"] is None
    assert _ok(api.post("/v1/communities/groups/add", json={"community_id": other["id"], "group_ids": [one["id"]]}))[
        "group_ids"
    ] == [one["id"]]
    api.assert_error(
        api.post("/v1/communities/groups/add", json={"community_id": "cm_nope", "group_ids": [one["id"]]}),
        404,
        "not_found",
    )
    assert {c["id"] for c in _ok(api.get("/v1/communities", params={"channel_id": channel["id"]}))} == {
        community["id"],
        other["id"],
    }
    assert _ok(api.get("/v1/communities", params={"channel_id": "ch_none"})) == []


# Newsletters -------------------------------------------------------------------------------------------------------
def test_newsletters_create_subscribe_and_invite_links(api: Api, channel: dict):
    created = _ok(
        api.post("/v1/newsletters", json={"channel_id": channel["id"], "name": "News", "description": "d"}), 201
    )
    jid = created["jid"]
    assert jid.endswith("@newsletter") and created["id"] == jid and created["role"] == "owner" and created["subscribed"]
    assert created["invite_link"].startswith("https://whatsapp.com/channel/")
    assert _ok(api.get(f"/v1/newsletters/{jid}")) == created
    api.assert_error(api.get("/v1/newsletters/120363000000000009@newsletter"), 404, "not_found")
    api.assert_error(api.get("/v1/newsletters/not-a-jid"), 404, "not_found")

    link = _ok(api.post("/v1/newsletters/invite-link", json={"channel_id": channel["id"], "newsletter_jid": jid}))
    assert link["invite_link"] == created["invite_link"] and link["revoked"] is False
    reset = _ok(
        api.post(
            "/v1/newsletters/invite-link", json={"channel_id": channel["id"], "newsletter_jid": jid, "revoke": True}
        )
    )
    assert reset["revoked"] is True and reset["invite_code"] != link["invite_code"]

    second = _channel(api, "second")
    api.assert_error(
        api.post("/v1/newsletters/subscribe", json={"channel_id": second["id"], "invite_link": link["invite_link"]}),
        404,
        "not_found",
    )
    followed = _ok(
        api.post("/v1/newsletters/subscribe", json={"channel_id": second["id"], "invite_link": reset["invite_link"]})
    )
    assert followed["jid"] == jid and followed["role"] == "subscriber" and followed["channel_id"] == second["id"]
    assert (
        _ok(api.post("/v1/newsletters/subscribe", json={"channel_id": second["id"], "newsletter_jid": jid})) == followed
    )
    api.assert_error(api.get(f"/v1/newsletters/{jid}"), 400, "validation_failed")  # on two channels: say which
    assert _ok(api.get(f"/v1/newsletters/{jid}", params={"channel_id": second["id"]}))["role"] == "subscriber"
    api.assert_error(
        api.post(
            "/v1/newsletters/invite-link", json={"channel_id": second["id"], "newsletter_jid": jid, "revoke": True}
        ),
        409,
        "conflict",
    )
    api.assert_error(
        api.post(
            "/v1/newsletters/subscribe", json={"channel_id": channel["id"], "newsletter_jid": jid, "unsubscribe": True}
        ),
        409,
        "conflict",
    )
    gone = _ok(
        api.post(
            "/v1/newsletters/subscribe", json={"channel_id": second["id"], "newsletter_jid": jid, "unsubscribe": True}
        )
    )
    assert gone["subscribed"] is False
    assert [n["channel_id"] for n in _ok(api.get("/v1/newsletters", params={"subscribed": "false"}))] == [second["id"]]
    assert [n["role"] for n in _ok(api.get("/v1/newsletters", params={"channel_id": channel["id"]}))] == ["owner"]

    outside = _ok(
        api.post("/v1/newsletters/subscribe", json={"channel_id": channel["id"], "invite_code": "PublicNews42"})
    )
    assert outside["name"] == "Sandbox newsletter Public" and outside["role"] == "subscriber"
    by_jid = _ok(
        api.post(
            "/v1/newsletters/subscribe",
            json={"channel_id": channel["id"], "newsletter_jid": "120363111122223333@newsletter"},
        )
    )
    assert by_jid["name"] == "Sandbox newsletter 3333"
    for body in (
        {"channel_id": channel["id"]},
        {"channel_id": channel["id"], "newsletter_jid": "x@g.us"},
        {"channel_id": channel["id"], "invite_link": "https://chat.whatsapp.com/abcdefgh"},
        {"channel_id": channel["id"], "newsletter_jid": jid, "invite_code": "abcdefgh"},
    ):
        api.assert_error(api.post("/v1/newsletters/subscribe", json=body), 400, "validation_failed")
    api.assert_error(
        api.post("/v1/newsletters", json={"channel_id": channel["id"], "name": ""}), 400, "validation_failed"
    )
    _, b = api.new_org("news-b@example.com")
    api.assert_error(api.get(f"/v1/newsletters/{jid}", headers=b), 404, "not_found")
    api.assert_error(
        api.post("/v1/newsletters/invite-link", json={"channel_id": channel["id"], "newsletter_jid": jid}, headers=b),
        404,
        "not_found",
    )


def test_newsletter_messages_pages_within_the_spec_bounds(api: Api, channel: dict):
    jid = _ok(api.post("/v1/newsletters", json={"channel_id": channel["id"], "name": "Feed"}), 201)["jid"]
    path = f"/v1/newsletters/{jid}/messages"
    first = api.get(path, params={"channel_id": channel["id"]})
    assert first.status_code == 200, first.text
    body = first.json()
    assert set(body) == {"data"} and set(body["data"]) == {"messages", "next_cursor"}
    page = body["data"]
    assert len(page["messages"]) == 20 and page["next_cursor"]  # default limit
    msg = page["messages"][0]
    assert set(msg) == {"message_id", "newsletter_id", "timestamp", "body", "type"}
    assert msg["newsletter_id"] == jid and isinstance(msg["timestamp"], int) and msg["type"] == "text"

    seen, cursor = [], ""
    while True:
        params = {"channel_id": channel["id"], "limit": 200}
        if cursor:
            params["cursor"] = cursor
        data = _ok(api.get(path, params=params))
        assert len(data["messages"]) <= 200
        seen += data["messages"]
        cursor = data["next_cursor"]
        if not cursor:
            break
    ids = [m["message_id"] for m in seen]
    assert len(ids) == len(set(ids)) and 200 < len(ids) < 300
    stamps = [m["timestamp"] for m in seen]
    assert stamps == sorted(stamps, reverse=True) and seen[:20] == page["messages"]

    for params in (
        {"channel_id": channel["id"], "limit": 0},
        {"channel_id": channel["id"], "limit": 201},
        {"channel_id": channel["id"], "limit": "x"},
        {"channel_id": ""},
        {},
        {"channel_id": channel["id"], "cursor": "forged.cursor"},
    ):
        api.assert_error(api.get(path, params=params), 400, "validation_failed")
    other = _ok(api.post("/v1/newsletters", json={"channel_id": channel["id"], "name": "Other"}), 201)["jid"]
    api.assert_error(
        api.get(
            f"/v1/newsletters/{other}/messages", params={"channel_id": channel["id"], "cursor": page["next_cursor"]}
        ),
        400,
        "validation_failed",
    )  # a cursor belongs to its newsletter
    api.assert_error(api.get(path, params={"channel_id": "ch_missing"}), 404, "not_found")
    second = _channel(api, "second")
    api.assert_error(api.get(path, params={"channel_id": second["id"]}), 404, "not_found")  # not followed there
    _, b = api.new_org("feed-b@example.com")
    b_channel = _channel(api, "b", headers=b)
    api.assert_error(api.get(path, params={"channel_id": b_channel["id"]}, headers=b), 404, "not_found")
    api.assert_error(api.get(path, params={"channel_id": channel["id"]}, headers=b), 404, "not_found")
