"""S3 presigned URLs for uploads and downloads, bounded reads of an object a provider needs as bytes, and the copy a
media download streams into (`MediaCopy`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any

from botocore.exceptions import ClientError

from switchboard import aws, clock
from switchboard.config import get_settings

UPLOAD_TTL = timedelta(minutes=15)
DOWNLOAD_TTL = timedelta(hours=1)
# CONVENTIONS "Media and responses that outgrow a Lambda": a download answers its bytes inline (base64) up to 4 MiB;
# a larger file is answered as a presigned URL of its copy, valid 15 minutes. 4 MiB base64-encode to 5.6 MB, under
# Lambda's 6 MB response limit with the rest of the answer.
INLINE_MAX = 4 * 1024 * 1024
LARGE_MEDIA_URL_TTL = timedelta(minutes=15)
PART_SIZE = 8 * 1024 * 1024  # multipart parts (S3: at least 5 MiB each but the last)


def presign_upload(key: str, content_type: str, size: int) -> tuple[str, dict[str, str], str]:
    """(url, headers the client must send, expires_at) for a PUT of exactly `size` bytes of `content_type`."""
    url = aws.client("s3").generate_presigned_url(
        "put_object",
        Params={
            "Bucket": get_settings().media_bucket,
            "Key": key,
            "ContentType": content_type,
            "ContentLength": size,
        },
        ExpiresIn=int(UPLOAD_TTL.total_seconds()),
    )
    return str(url), {"Content-Type": content_type}, clock.iso(clock.now() + UPLOAD_TTL)


def presign_download(
    key: str, ttl: timedelta = DOWNLOAD_TTL, *, content_type: str | None = None, file_name: str | None = None
) -> tuple[str, str]:
    """(url, expires_at) of a GET of the object for `ttl`; `content_type` and `file_name` become the answer's
    `Content-Type` and `Content-Disposition` (S3's response overrides, part of the signature)."""
    params: dict[str, Any] = {"Bucket": get_settings().media_bucket, "Key": key}
    if content_type:
        params["ResponseContentType"] = content_type
    if file_name:
        params["ResponseContentDisposition"] = f'attachment; filename="{_quoted_name(file_name)}"'
    url = aws.client("s3").generate_presigned_url("get_object", Params=params, ExpiresIn=int(ttl.total_seconds()))
    return str(url), clock.iso(clock.now() + ttl)


def _quoted_name(name: str) -> str:
    """A file name safe inside a quoted `filename=` (printable ASCII, no quote or backslash)."""
    return "".join(c if 32 <= ord(c) < 127 and c not in '\\"' else "_" for c in name) or "media"


@dataclass(frozen=True)
class StoredCopy:
    """What `MediaCopy.finish` stored: `size` bytes under the copy's key; `inline` holds them when they are at most
    `INLINE_MAX`, else None (answer a presigned URL instead)."""

    size: int
    inline: bytes | None


class MediaCopy:
    """A media sink (`switchboard.providers.base.MediaSink`) that keeps a download's copy at `key` in the media bucket.

    Bytes are buffered until `PART_SIZE`; a larger file becomes a multipart upload, one part per `PART_SIZE` as the
    bytes arrive, so at most one part is ever held in memory. `finish` stores the rest (a small file in one
    `PutObject`) and tells whether the bytes may be answered inline. Used as a context manager: an upload started and
    not finished (the provider failed, the deadline passed) is aborted, so no parts are left behind."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.size = 0
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []

    def write(self, chunk: bytes) -> None:
        self._buffer += chunk
        self.size += len(chunk)
        while len(self._buffer) >= PART_SIZE:
            self._upload_part(bytes(self._buffer[:PART_SIZE]))
            del self._buffer[:PART_SIZE]

    def _upload_part(self, body: bytes) -> None:
        s3, bucket = aws.client("s3"), get_settings().media_bucket
        if self._upload_id is None:
            self._upload_id = str(s3.create_multipart_upload(Bucket=bucket, Key=self.key)["UploadId"])
        number = len(self._parts) + 1
        answer = s3.upload_part(Bucket=bucket, Key=self.key, UploadId=self._upload_id, PartNumber=number, Body=body)
        self._parts.append({"PartNumber": number, "ETag": answer["ETag"]})

    def finish(self, content_type: str) -> StoredCopy:
        s3, bucket = aws.client("s3"), get_settings().media_bucket
        if self._upload_id is None:
            data = bytes(self._buffer)
            s3.put_object(Bucket=bucket, Key=self.key, Body=data, ContentType=content_type)
            return StoredCopy(self.size, data if self.size <= INLINE_MAX else None)
        if self._buffer:
            self._upload_part(bytes(self._buffer))
            self._buffer.clear()
        s3.complete_multipart_upload(
            Bucket=bucket, Key=self.key, UploadId=self._upload_id, MultipartUpload={"Parts": self._parts}
        )
        self._upload_id = None
        return StoredCopy(self.size, None)

    def __enter__(self) -> MediaCopy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._upload_id is not None:
            upload, self._upload_id = self._upload_id, None
            aws.client("s3").abort_multipart_upload(Bucket=get_settings().media_bucket, Key=self.key, UploadId=upload)


# What S3 answers GetObject of a missing key: 404 NoSuchKey, or 403 AccessDenied to a role that may not s3:ListBucket
# the bucket (a function that reads objects is granted s3:GetObject on its key prefix only, template.yaml).
_MISSING = frozenset({"NoSuchKey", "404", "AccessDenied", "403"})


def read_object(key: str, max_bytes: int) -> bytes | None:
    """The object's bytes, or None when it is missing; a larger object is read no further than `max_bytes + 1`
    bytes, so a caller sees it is too large by its length."""
    try:
        answer = aws.client("s3").get_object(Bucket=get_settings().media_bucket, Key=key, Range=f"bytes=0-{max_bytes}")
    except ClientError as err:
        code = str(err.response.get("Error", {}).get("Code", ""))
        if code in _MISSING:
            return None
        raise
    data: bytes = answer["Body"].read(max_bytes + 1)
    return data
