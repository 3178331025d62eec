"""Groups, communities and newsletters over HTTP against the local stack: a group is created on one sandbox channel,
managed, shared by invite link and joined by a second channel; a community links it; a newsletter is followed from
the second channel and its feed is read page by page; a whatsapp_cloud channel answers `unsupported_by_provider`."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.e2e


def _data(resp, status: int = 200):
    assert resp.status_code == status, resp.text
    return resp.json()["data"]


def _sandbox(client, name: str) -> dict:
    ch = _data(client.post("/v1/channels", json={"name": name, "platform": "sandbox"}), 201)
    return _data(client.post(f"/v1/channels/{ch['id']}/connect"))


def test_groups_communities_and_newsletters_over_http(live):
    tag = uuid.uuid4().hex[:6]
    with live.client() as client:
        first, second = _sandbox(client, f"grp-a-{tag}"), _sandbox(client, f"grp-b-{tag}")
        group = _data(
            client.post(
                "/v1/groups",
                json={"channel_id": first["id"], "name": f"Team {tag}", "participants": ["+1 415 555 2671"]},
            ),
            201,
        )
        result = _data(
            client.post(
                f"/v1/groups/{group['jid']}/participants/actions",
                json={"action": "add", "participants": ["+14155552672", "+1 415 555 0000"]},
            )
        )
        assert [r["status"] for r in result["results"]] == ["added", "failed"]
        promoted = _data(
            client.post(
                "/v1/groups/participants",
                json={"group_id": group["id"], "action": "promote", "participants": ["14155552672"]},
            )
        )
        assert {p["phone"]: p["role"] for p in promoted["group"]["participants"]}["14155552672"] == "admin"
        assert _data(client.post("/v1/groups/name", json={"group_id": group["id"], "name": "Renamed"}))["name"] == (
            "Renamed"
        )

        old = _data(client.get(f"/v1/groups/{group['id']}/invite-link"))
        new = _data(client.post(f"/v1/groups/{group['id']}/invite-link", json={"revoke": True}))
        assert new["invite_code"] != old["invite_code"]
        stale = client.post("/v1/groups/join", json={"channel_id": second["id"], "invite_link": old["invite_link"]})
        assert stale.status_code == 404 and stale.json()["error"]["code"] == "not_found"
        joined = _data(
            client.post("/v1/groups/join", json={"channel_id": second["id"], "invite_link": new["invite_link"]})
        )
        assert joined["jid"] == group["jid"] and joined["self_role"] == "member"
        listed = _data(client.get(f"/v1/channels/{second['id']}/groups"))
        assert [g["id"] for g in listed] == [joined["id"]]
        left = _data(client.post(f"/v1/groups/{joined['id']}/leave"))
        assert left["status"] == "left"
        assert _data(client.get(f"/v1/channels/{second['id']}/groups")) == []

        community = _data(
            client.post(
                "/v1/communities", json={"channel_id": first["id"], "name": f"Club {tag}", "group_ids": [group["id"]]}
            ),
            201,
        )
        assert _data(client.get(f"/v1/groups/{group['id']}"))["community_id"] == community["id"]
        ambiguous = client.post("/v1/group-hubs", json={"name": f"Hub {tag}", "group_ids": [group["jid"]]})
        assert ambiguous.status_code == 400, ambiguous.text  # the JID names a group on both channels
        hub = _data(client.post("/v1/group-hubs", json={"name": f"Hub {tag}", "group_ids": [group["id"]]}), 201)
        assert hub["group_ids"] == [group["id"]]

        newsletter = _data(client.post("/v1/newsletters", json={"channel_id": first["id"], "name": f"News {tag}"}), 201)
        followed = _data(
            client.post(
                "/v1/newsletters/subscribe", json={"channel_id": second["id"], "invite_link": newsletter["invite_link"]}
            )
        )
        assert followed["jid"] == newsletter["jid"] and followed["role"] == "subscriber"
        seen, cursor = [], ""
        while True:
            params = {"channel_id": second["id"], "limit": 150}
            if cursor:
                params["cursor"] = cursor
            page = _data(client.get(f"/v1/newsletters/{newsletter['jid']}/messages", params=params))
            seen += page["messages"]
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert len({m["message_id"] for m in seen}) == len(seen) > 150
        too_many = client.get(
            f"/v1/newsletters/{newsletter['jid']}/messages", params={"channel_id": second["id"], "limit": 201}
        )
        assert too_many.status_code == 400 and too_many.json()["error"]["code"] == "validation_failed"

        cloud = _data(client.post("/v1/channels", json={"name": f"cloud-{tag}", "platform": "whatsapp_cloud"}), 201)
        refused = client.post(
            "/v1/newsletters/invite-link", json={"channel_id": cloud["id"], "newsletter_jid": newsletter["jid"]}
        )
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "unsupported_by_provider"
