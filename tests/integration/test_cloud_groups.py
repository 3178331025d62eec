"""Cloud API groups behind `/v1/groups…` on a whatsapp_cloud channel, against the fake Graph API (every request
validated against Meta's document): the asynchronous create completed by Meta's `group_lifecycle_update`, ids kept
case-sensitive, Meta's group webhooks following into the record, and what the Cloud API does not offer."""

from __future__ import annotations

import boto3
import pytest

from switchboard.config import get_settings
from tests.fakes import Request
from tests.fakes.graph_api import FakeGraphApi
from tests.integration import cloud_queue
from tests.integration.support import Api

URL = "/v1/providers/whatsapp_cloud/webhook"


@pytest.fixture
def graph():
    with FakeGraphApi(token="tok") as fake:
        yield fake


@pytest.fixture
def cloud(api: Api, graph: FakeGraphApi) -> dict:
    config = graph.channel_config()
    ch = api.post("/v1/channels", json={"name": "cloud", "platform": "whatsapp_cloud", "config": config})
    assert ch.status_code == 201, ch.text
    connected = api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]
    assert connected["status"] == "connected", connected
    return connected


def _deliver(api: Api, graph: FakeGraphApi, body: bytes, *, sign: bool = True):
    """Meta's callback, and the queued changes it verified processed by the consumer."""
    headers = {"Content-Type": "application/json"}
    if sign:
        headers["X-Hub-Signature-256"] = graph.signature(body)
    return cloud_queue.post(api, URL, body, headers)[0]


def _create(api: Api, graph: FakeGraphApi, cloud: dict) -> tuple[dict, str]:
    made = api.post(
        "/v1/groups",
        json={
            "channel_id": cloud["id"],
            "name": "Purchase inquiry",
            "description": "New car options",
            "participants": ["+14155552671"],
        },
    )
    assert made.status_code == 201, made.text
    group = made.json()["data"]
    (request_id,) = graph.group_requests
    return group, request_id


def _active(api: Api, graph: FakeGraphApi, cloud: dict) -> tuple[dict, str]:
    group, request_id = _create(api, graph, cloud)
    gid, body = graph.complete_group(request_id, ["14155552671", "14155552672"])
    assert _deliver(api, graph, body).status_code == 200
    return api.get(f"/v1/groups/{group['id']}").json()["data"], gid


def test_create_waits_for_metas_lifecycle_webhook(api: Api, graph: FakeGraphApi, cloud: dict):
    group, request_id = _create(api, graph, cloud)
    assert group["status"] == "creating" and group["jid"] is None
    assert group["failed_participants"][0]["phone"] == "14155552671"  # Meta adds members by invite link only
    wire = graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/groups")[-1].json
    assert wire == {"messaging_product": "whatsapp", "subject": "Purchase inquiry", "description": "New car options"}
    api.assert_error(api.post(f"/v1/groups/{group['id']}/name", json={"name": "x"}), 409, "conflict")

    gid, body = graph.complete_group(request_id, ["14155552671"])
    assert gid != gid.lower()
    assert _deliver(api, graph, body, sign=False).status_code == 401  # unsigned: nothing applied
    assert api.get(f"/v1/groups/{group['id']}").json()["data"]["status"] == "creating"
    assert _deliver(api, graph, body).status_code == 200
    assert _deliver(api, graph, body).status_code == 200  # Meta retries: the same change applies once
    got = api.get(f"/v1/groups/{group['id']}").json()["data"]
    assert got["status"] == "active" and got["jid"] == gid  # Meta's id, its case kept
    assert [p["phone"] for p in got["participants"]] == ["14155552671"]
    by_id = api.get(f"/v1/groups/{gid}")
    assert by_id.status_code == 200 and by_id.json()["data"]["id"] == group["id"]
    api.assert_error(api.get(f"/v1/groups/{gid.lower()}"), 404, "not_found")  # case-sensitive
    assert group["id"] in [g["id"] for g in api.get(f"/v1/channels/{cloud['id']}/groups").json()["data"]]


def test_create_failure_marks_the_record_failed(api: Api, graph: FakeGraphApi, cloud: dict):
    group, request_id = _create(api, graph, cloud)
    body = graph.group_webhook(
        "group_lifecycle_update",
        {
            "timestamp": 1750269342,
            "group_id": "",
            "type": "group_create",
            "request_id": request_id,
            "errors": [{"code": 131000, "title": "Something went wrong"}],
        },
    )
    assert _deliver(api, graph, body).status_code == 200
    assert api.get(f"/v1/groups/{group['id']}").json()["data"]["status"] == "failed"


def test_subject_description_participants_and_invite_link(api: Api, graph: FakeGraphApi, cloud: dict):
    group, gid = _active(api, graph, cloud)
    renamed = api.post(f"/v1/groups/{group['id']}/name", json={"name": "Renamed"})
    assert renamed.status_code == 200, renamed.text
    assert graph.groups[gid]["subject"] == "Renamed"
    described = api.post(f"/v1/groups/{gid}/description", json={"description": "About"})
    assert described.status_code == 200, described.text
    assert graph.groups[gid]["description"] == "About"

    removed = api.post(
        f"/v1/groups/{group['id']}/participants/actions",
        json={"action": "remove", "participants": ["+14155552672"]},
    )
    assert removed.status_code == 200, removed.text
    assert [r["status"] for r in removed.json()["data"]["results"]] == ["removed"]
    assert graph.groups[gid]["participants"] == ["14155552671"]
    wire = graph.requests_to("DELETE", f"/v23.0/{gid}/participants")[-1].json
    assert wire == {"messaging_product": "whatsapp", "participants": [{"user": "14155552672"}]}

    link = api.get(f"/v1/groups/{group['id']}/invite-link")
    assert link.status_code == 200, link.text
    first = link.json()["data"]
    assert first["invite_link"] == f"https://chat.whatsapp.com/{graph.groups[gid]['invite']}"
    reset = api.post(f"/v1/groups/{group['id']}/invite-link", json={"revoke": True}).json()["data"]
    assert reset["revoked"] and reset["invite_code"] != first["invite_code"]
    assert reset["invite_code"] == graph.groups[gid]["invite"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("participants/actions", {"action": "add", "participants": ["+14155552673"]}),
        ("participants/actions", {"action": "promote", "participants": ["+14155552671"]}),
        ("photo", {"remove": True}),
        ("leave", None),
    ],
)
def test_what_the_cloud_api_does_not_offer_is_400(api: Api, graph: FakeGraphApi, cloud: dict, path: str, body):
    group, _ = _active(api, graph, cloud)
    if body is None:
        answer = api.post(f"/v1/groups/{group['id']}/{path}")
    else:
        answer = api.post(f"/v1/groups/{group['id']}/{path}", json=body)
    api.assert_error(answer, 400, "unsupported_by_provider")


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x01" * 64 + b"\xff\xd9"


def _asset(api: Api, data: bytes, content_type: str = "image/jpeg", *, stored: bool = True) -> str:
    """An uploaded asset: the ticket from the API, the bytes put where its upload URL points."""
    made = api.post("/v1/media/uploads", json={"content_type": content_type, "size": len(data)})
    assert made.status_code == 201, made.text
    asset_id = made.json()["data"]["id"]
    if stored:
        key = f"assets/{api.org_id}/{asset_id}"
        boto3.client("s3").put_object(Bucket=get_settings().media_bucket, Key=key, Body=data)
    return str(asset_id)


def _photo_parts(request: Request) -> dict[str, tuple[str, bytes]]:
    return FakeGraphApi.form_fields(request)


def test_group_photo_from_an_asset_is_a_multipart_post_to_the_group(api: Api, graph: FakeGraphApi, cloud: dict):
    group, gid = _active(api, graph, cloud)
    asset_id = _asset(api, JPEG)
    set_ = api.post(f"/v1/groups/{group['id']}/photo", json={"asset_id": asset_id})
    assert set_.status_code == 200, set_.text
    assert set_.json()["data"]["photo"]["asset_id"] == asset_id
    (wire,) = graph.requests_to("POST", f"/v23.0/{gid}")[-1:]
    assert wire.headers["content-type"].startswith("multipart/form-data")
    parts = _photo_parts(wire)
    assert parts["messaging_product"][1] == b"whatsapp"
    assert parts["file"] == ("image/jpeg", JPEG)
    assert graph.groups[gid]["photo"] == ("image/jpeg", JPEG)
    assert "updateGroupSettings" in graph.operations  # validated against Meta's document on the way in

    by_body = api.post("/v1/groups/photo", json={"group_id": gid, "asset_id": asset_id})  # the group named in the body
    assert by_body.status_code == 200, by_body.text
    assert len(graph.requests_to("POST", f"/v23.0/{gid}")) == 2


def test_group_photo_refuses_what_meta_would_not_take(api: Api, graph: FakeGraphApi, cloud: dict):
    group, gid = _active(api, graph, cloud)
    path = f"/v1/groups/{group['id']}/photo"
    gif = _asset(api, b"GIF89a" + b"\x00" * 32, "image/webp")
    error = api.assert_error(api.post(path, json={"asset_id": gif}), 400, "validation_failed")
    assert "JPEG or PNG" in str(error)
    big = _asset(api, JPEG + b"\x00" * (5 * 1024 * 1024))
    error = api.assert_error(api.post(path, json={"asset_id": big}), 400, "validation_failed")
    assert "5 MB" in str(error)
    missing = _asset(api, JPEG, stored=False)
    api.assert_error(api.post(path, json={"asset_id": missing}), 400, "validation_failed")
    assert not graph.requests_to("POST", f"/v23.0/{gid}")


def test_join_by_invite_and_communities_are_400(api: Api, graph: FakeGraphApi, cloud: dict):
    join = api.post("/v1/groups/join", json={"channel_id": cloud["id"], "invite_code": "AbCdEf123456"})
    api.assert_error(join, 400, "unsupported_by_provider")
    community = api.post("/v1/communities", json={"channel_id": cloud["id"], "name": "x"})
    api.assert_error(community, 400, "unsupported_by_provider")
    assert not graph.group_requests and not graph.groups


def test_metas_group_webhooks_follow_into_the_record(api: Api, graph: FakeGraphApi, cloud: dict):
    group, gid = _active(api, graph, cloud)
    event = {"timestamp": 1750269342, "group_id": gid, "request_id": "R1"}
    settings = {**event, "type": "group_settings_update", "subject": "From the phone", "description": "New"}
    assert _deliver(api, graph, graph.group_webhook("group_settings_update", settings)).status_code == 200
    got = api.get(f"/v1/groups/{group['id']}").json()["data"]
    assert (got["name"], got["description"]) == ("From the phone", "New")

    removed = {
        **event,
        "type": "group_remove_participants",
        "removed_participants": [{"input": "14155552671", "wa_id": "14155552671"}],
    }
    assert _deliver(api, graph, graph.group_webhook("group_participants_update", removed)).status_code == 200
    added = {**event, "type": "group_add_participants", "added_participants": [{"wa_id": "14155552679"}]}
    assert _deliver(api, graph, graph.group_webhook("group_participants_update", added)).status_code == 200
    got = api.get(f"/v1/groups/{group['id']}").json()["data"]
    assert [p["phone"] for p in got["participants"]] == ["14155552672", "14155552679"]

    deleted = {**event, "type": "group_delete"}
    assert _deliver(api, graph, graph.group_webhook("group_lifecycle_update", deleted)).status_code == 200
    assert api.get(f"/v1/groups/{group['id']}").json()["data"]["status"] == "left"


def test_another_organizations_group_event_changes_nothing(api: Api, graph: FakeGraphApi, cloud: dict):
    """A group id is looked up only among the channel's own records: an event naming a group of the number's
    channel never reaches a group of another channel."""
    group, gid = _active(api, graph, cloud)
    other = graph.group_webhook(
        "group_settings_update",
        {"timestamp": 1, "group_id": gid.lower(), "request_id": "R", "type": "group_settings_update", "subject": "X"},
    )
    assert _deliver(api, graph, other).status_code == 200
    assert api.get(f"/v1/groups/{group['id']}").json()["data"]["name"] == "Purchase inquiry"
