"""S3 presigned URLs for uploads and downloads, and bounded reads of an object a provider needs as bytes."""

from __future__ import annotations

from datetime import timedelta

from botocore.exceptions import ClientError

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
