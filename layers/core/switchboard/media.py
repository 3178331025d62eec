"""S3 presigned URLs for uploads and downloads, and bounded reads of an object a provider needs as bytes."""

from __future__ import annotations

from datetime import timedelta

from switchboard import aws, clock
from switchboard.config import get_settings

UPLOAD_TTL = timedelta(minutes=15)
DOWNLOAD_TTL = timedelta(hours=1)


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


def presign_download(key: str) -> tuple[str, str]:
    url = aws.client("s3").generate_presigned_url(
        "get_object",
        Params={"Bucket": get_settings().media_bucket, "Key": key},
        ExpiresIn=int(DOWNLOAD_TTL.total_seconds()),
    )
    return str(url), clock.iso(clock.now() + DOWNLOAD_TTL)


def read_object(key: str, max_bytes: int) -> bytes | None:
    """The object's bytes, or None when it is missing; a larger object is read no further than `max_bytes + 1`
    bytes, so a caller sees it is too large by its length."""
    s3 = aws.client("s3")
    try:
        answer = s3.get_object(Bucket=get_settings().media_bucket, Key=key, Range=f"bytes=0-{max_bytes}")
    except s3.exceptions.NoSuchKey:
        return None
    data: bytes = answer["Body"].read(max_bytes + 1)
    return data
