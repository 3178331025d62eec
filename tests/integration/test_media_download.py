"""`POST /v1/messages/media/download` on a whatsapp_cloud channel against the fake Graph API (CONVENTIONS "Media and
responses that outgrow a Lambda"): up to 4 MiB the bytes come inline (base64); a larger file is streamed into its copy
in the media bucket and answered as a presigned HTTPS URL valid 15 minutes, `data` empty, so no answer comes near
Lambda's 6 MB response limit; the provider fetch runs within what the invocation has left."""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest

from switchboard import clock
from switchboard.config import get_settings
from switchboard.messaging import media as media_service
from switchboard.providers.base import ProviderUnavailable
from switchboard.providers.whatsapp_cloud import WhatsAppCloudProvider
from tests.fakes.graph_api import FakeGraphApi
from tests.integration.support import Api

MiB = 1024 * 1024


@pytest.fixture
def graph():
    with FakeGraphApi(token="tok") as fake:
        yield fake


@pytest.fixture
def cloud(api: Api, graph: FakeGraphApi) -> dict:
    ch = api.post(
        "/v1/channels", json={"name": "cloud", "platform": "whatsapp_cloud", "config": graph.channel_config()}
    )
    assert ch.status_code == 201, ch.text
    return api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]


def blob(size: int) -> bytes:
    """`size` bytes that are not all alike (a part boundary in the wrong place would show)."""
    seed = hashlib.sha256(str(size).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def download(api: Api, cloud: dict, media_id: str, payload: str = "{}"):
    body = {"channel_id": cloud["id"], "media_id": media_id, "message_id": "wamid.x", "message_payload": payload}
    return api.post("/v1/messages/media/download", json=body)


def stored_copy(org: str, channel_id: str, media_id: str) -> dict:
    return boto3.client("s3").get_object(Bucket=get_settings().media_bucket, Key=f"media/{org}/{channel_id}/{media_id}")


def test_media_up_to_4_mib_is_answered_inline_and_kept(api: Api, graph: FakeGraphApi, cloud: dict):
    data = blob(4 * MiB)  # exactly the inline limit
    media_id = graph.add_media(data, "image/jpeg")
    got = download(api, cloud, media_id)
    assert got.status_code == 200, got.text
    view = got.json()["data"]
    assert base64.b64decode(view["data"]) == data
    assert view["size"] == len(data) and view["mime_type"] == "image/jpeg" and view["expires_at"] is None
    assert view["source_url"].startswith(f"{graph.root}/whatsapp_business/attachments/")
    copy = stored_copy(api.org_id, cloud["id"], media_id)
    assert copy["Body"].read() == data and copy["ContentType"] == "image/jpeg"


@pytest.mark.parametrize("size", [4 * MiB + 1, 5 * MiB, 21 * MiB + 7])
def test_larger_media_is_a_presigned_url_of_its_copy_valid_15_minutes(
    api: Api, graph: FakeGraphApi, cloud: dict, size: int
):
    """5 MiB inline would be ~7 MB of base64: over Lambda's response limit, the gateway's 502. 21 MiB goes to S3 as a
    multipart upload, part by part as it arrives."""
    data = blob(size)
    payload = '{"type": "document", "document": {"filename": "catalogue.pdf"}}'
    media_id = graph.add_media(data, "application/pdf")
    before = clock.now()
    got = download(api, cloud, media_id, payload)
    assert got.status_code == 200, got.text
    view = got.json()["data"]
    assert view["data"] == "" and view["size"] == size
    assert view["file_name"] == "catalogue.pdf" and view["mime_type"] == "application/pdf"
    url = urlsplit(view["source_url"])
    query = parse_qs(url.query)
    assert url.scheme == "https"
    assert url.path.endswith(f"/media/{api.org_id}/{cloud['id']}/{media_id}")
    assert query["X-Amz-Expires"] == ["900"]
    assert query["response-content-type"] == ["application/pdf"]
    assert query["response-content-disposition"] == ['attachment; filename="catalogue.pdf"']
    expires = clock.parse_iso(view["expires_at"])
    assert before + timedelta(minutes=15) - timedelta(seconds=1) <= expires <= clock.now() + timedelta(minutes=15)
    assert stored_copy(api.org_id, cloud["id"], media_id)["Body"].read() == data
    assert len(got.content) < 4096  # the answer stays small whatever the file's size


def test_a_large_download_that_fails_leaves_no_upload_behind(api: Api, graph: FakeGraphApi, cloud: dict):
    media_id = graph.add_media(blob(20 * MiB), "video/mp4")
    graph.corrupt_media.add(media_id)  # the SHA-256 Graph announces does not match: known only after the last byte
    api.assert_error(download(api, cloud, media_id), 503, "service_unavailable")
    s3 = boto3.client("s3")
    bucket = get_settings().media_bucket
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert s3.list_objects_v2(Bucket=bucket, Prefix=f"media/{api.org_id}/").get("KeyCount") == 0


def test_the_provider_fetch_gets_only_what_the_invocation_has_left(
    api: Api, graph: FakeGraphApi, cloud: dict, monkeypatch
):
    """The route hands the download the invocation's remaining time (the function's 15 s) less what the answer needs;
    a provider slower than that is a 503 to retry, never a request that outlives its function or API Gateway's 29 s."""
    media_id = graph.add_media(blob(1024), "image/png")
    monkeypatch.setattr(media_service, "DOWNLOAD_RESERVE_SECONDS", 14.0)  # leaves about one second of the 15
    graph.hang_next(seconds=4.0)
    api.assert_error(download(api, cloud, media_id), 503, "service_unavailable")


def test_the_adapter_stops_at_its_deadline(graph: FakeGraphApi):
    adapter = WhatsAppCloudProvider({"id": "ch_1", "platform": "whatsapp_cloud", "config": graph.channel_config()})
    media_id = graph.add_media(b"\x89PNG\r\n", "image/png")
    graph.hang_next(seconds=3.0)
    with pytest.raises(ProviderUnavailable):
        adapter.download_media(media_id, "wamid.x", "{}", deadline=0.5)
    assert adapter.download_media(media_id, "wamid.x", "{}", deadline=5).data == b"\x89PNG\r\n"
