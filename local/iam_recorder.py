"""Every AWS call a function makes, checked against that function's IAM grants (`local.iam.PolicyModel`).

Moto enforces no IAM, so without this a call the template does not grant passes every test and fails on AWS. Here a
handler on botocore's event system (`before-parameter-build`, registered on `switchboard.aws.session().events`, so on
every client the code makes, presigned URLs included) maps each call to the IAM action(s) and resource ARN(s) AWS
authorizes it as (`needs()`), attributes it to the function running it, and asks the model.

Attribution: the contextvar `FUNCTION`, set around each invocation (`local.functions.FunctionPool.invoke`, and by
`tests/iam_check.py` around handlers tests import and call directly); the runtime's thread pools copy the context
into their workers. Without it, a frame of `functions/<dir>/app.py` on the calling thread's stack names the function
(`<dir>` ↔ the function's CodeUri). A call with neither (test setup, the local stack's own bootstrap and pollers) is
not checked.

An ungranted call is recorded as a `Violation` (function, action, resource, call site in our code) and logged; in
mode `fail` (IAM_CHECK, the default) it also raises AccessDenied as AWS would (a presigned URL is signed anyway: AWS
refuses it when it is used). `report` records and logs only; `off` does nothing. The tests fail a test that made an
ungranted call (tests/iam_check.py); the local stack logs each one on a line starting with `VIOLATION_MARKER`.

One AWS behaviour moto lacks is emulated as well: S3 answers GetObject/HeadObject of a missing key with 403
AccessDenied, not 404 NoSuchKey, when the role may not s3:ListBucket the bucket.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from local.iam import (
    ARN_PREFIX,
    PolicyModel,
    bus_arn,
    object_arn,
    queue_arn,
    ses_identity_arns,
    table_arn,
)

log = logging.getLogger("local.iam")

ROOT = Path(__file__).resolve().parent.parent
VIOLATION_MARKER = "SWITCHBOARD_IAM_UNGRANTED"
MODES = ("fail", "report", "off")
_KEPT = 1000

FUNCTION: ContextVar[str | None] = ContextVar("switchboard_function", default=None)

_FUNCTIONS_DIR = str(ROOT / "functions") + os.sep
_OUR_CODE = (str(ROOT / "layers" / "core" / "switchboard") + os.sep, _FUNCTIONS_DIR)
_NOT_A_SITE = (str(ROOT / "layers" / "core" / "switchboard" / "aws.py"),)


@contextmanager
def running(function: str) -> Iterator[None]:
    """Attribute the AWS calls made inside (and in thread pools the context is copied into) to `function`."""
    token = FUNCTION.set(function)
    try:
        yield
    finally:
        FUNCTION.reset(token)


# What AWS authorizes ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Need:
    """One authorization of a call: `action` on one of `resources` (SES: the address or its domain identity)."""

    action: str
    resources: tuple[str, ...]
    context: tuple[tuple[str, str], ...] = ()  # the condition keys AWS gives the request (`ses:FromAddress`)


def _one(action: str, resource: str) -> list[Need]:
    return [Need(action, (resource,))]


_TRANSACT_ACTIONS = {
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "Get": "dynamodb:GetItem",
}
_IAM_PREFIX = {"sesv2": "ses", "cloudwatch": "cloudwatch", "logs": "logs", "dynamodbstreams": "dynamodb"}


def _dynamodb(operation: str, params: Mapping[str, Any]) -> list[Need]:
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [Need(f"dynamodb:{operation}", (table_arn(t),)) for t in params.get("RequestItems") or {}]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        out: list[Need] = []
        for item in params.get("TransactItems") or []:
            for kind, spec in item.items():
                need = Need(_TRANSACT_ACTIONS.get(kind, f"dynamodb:{kind}Item"), (table_arn(spec["TableName"]),))
                if need not in out:
                    out.append(need)
        return out
    table = params.get("TableName")
    if table is None:
        return _one(f"dynamodb:{operation}", "*")
    arn = table_arn(str(table))
    if params.get("IndexName") and operation in ("Query", "Scan"):
        arn = f"{arn}/index/{params['IndexName']}"
    return _one(f"dynamodb:{operation}", arn)


def _sqs(operation: str, params: Mapping[str, Any]) -> list[Need]:
    action = "sqs:" + operation.removesuffix("Batch")
    if "QueueUrl" in params:
        return _one(action, queue_arn(str(params["QueueUrl"])))
    if "QueueName" in params:
        return _one(action, f"arn:aws:sqs:{ARN_PREFIX}:{params['QueueName']}")
    return _one(action, "*")


def _s3(operation: str, params: Mapping[str, Any]) -> list[Need]:
    bucket = str(params.get("Bucket", ""))
    if operation in ("GetObject", "HeadObject"):
        return _one("s3:GetObject", object_arn(bucket, str(params["Key"])))
    if operation in ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"):
        return _one("s3:PutObject", object_arn(bucket, str(params["Key"])))
    if operation == "DeleteObject":
        return _one("s3:DeleteObject", object_arn(bucket, str(params["Key"])))
    if operation == "DeleteObjects":
        objects = (params.get("Delete") or {}).get("Objects") or []
        return [Need("s3:DeleteObject", (object_arn(bucket, str(o["Key"])),)) for o in objects]
    if operation == "CopyObject":
        source = params.get("CopySource")
        if isinstance(source, Mapping):
            source_arn = object_arn(str(source["Bucket"]), str(source["Key"]))
        else:
            source_arn = "arn:aws:s3:::" + str(source).lstrip("/").split("?", 1)[0]
        return [*_one("s3:PutObject", object_arn(bucket, str(params["Key"]))), *_one("s3:GetObject", source_arn)]
    if operation in ("ListObjects", "ListObjectsV2", "HeadBucket"):
        return _one("s3:ListBucket", object_arn(bucket))
    if "Key" in params:
        return _one(f"s3:{operation}", object_arn(bucket, str(params["Key"])))
    return _one(f"s3:{operation}", object_arn(bucket))


def _events(operation: str, params: Mapping[str, Any]) -> list[Need]:
    if operation == "PutEvents":
        buses = dict.fromkeys(bus_arn(e.get("EventBusName")) for e in params.get("Entries") or [])
        return [Need("events:PutEvents", (arn,)) for arn in buses]
    return _one(f"events:{operation}", "*")


def _ses(operation: str, params: Mapping[str, Any]) -> list[Need]:
    if operation in ("SendEmail", "SendRawEmail", "SendBulkEmail", "SendTemplatedEmail"):
        arn = params.get("FromEmailAddressIdentityArn") or params.get("SourceArn")
        sender = params.get("FromEmailAddress") or params.get("Source")
        action = "ses:SendRawEmail" if operation == "SendRawEmail" else "ses:SendEmail"
        keys = (("ses:FromAddress", _address(str(sender))),) if sender else ()
        if arn:
            return [Need(action, (str(arn),), keys)]
        if sender:
            return [Need(action, ses_identity_arns(str(sender)), keys)]
    return _one(f"ses:{operation}", "*")


def _address(sender: str) -> str:
    """The bare address of a From header (`Name <a@b>` → `a@b`), as SES gives it to `ses:FromAddress`."""
    sender = sender.strip()
    return sender.rsplit("<", 1)[1][:-1] if "<" in sender and sender.endswith(">") else sender


def _secretsmanager(operation: str, params: Mapping[str, Any]) -> list[Need]:
    secret = str(params.get("SecretId", "*"))
    if secret != "*" and not secret.startswith("arn:"):
        secret = f"arn:aws:secretsmanager:{ARN_PREFIX}:secret:{secret}"
    return _one(f"secretsmanager:{operation}", secret)


def _ssm(operation: str, params: Mapping[str, Any]) -> list[Need]:
    names = [params["Name"]] if "Name" in params else list(params.get("Names") or [])
    if not names:
        return _one(f"ssm:{operation}", "*")
    action = "ssm:GetParameters" if operation == "GetParameters" else f"ssm:{operation}"
    return [Need(action, (f"arn:aws:ssm:{ARN_PREFIX}:parameter/{str(n).lstrip('/')}",)) for n in names]


_SERVICES: dict[str, Callable[[str, Mapping[str, Any]], list[Need]]] = {
    "dynamodb": _dynamodb,
    "sqs": _sqs,
    "s3": _s3,
    "events": _events,
    "ses": _ses,
    "sesv2": _ses,
    "secretsmanager": _secretsmanager,
    "ssm": _ssm,
}


def needs(service: str, operation: str, params: Mapping[str, Any]) -> list[Need]:
    """The IAM authorizations AWS checks for `operation` of `service` (botocore's names) with `params`. An operation
    with no rule here is `<service>:<operation>` on `*`, which only a grant on every resource allows."""
    rule = _SERVICES.get(service)
    if rule is not None:
        return rule(operation, params)
    return _one(f"{_IAM_PREFIX.get(service, service)}:{operation}", "*")


# Violations ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Violation:
    function: str
    action: str
    resource: str
    site: tuple[str, ...]  # file:line (function) of our code, innermost first
    presigned: bool = False

    def message(self) -> str:
        what = "signs a URL for" if self.presigned else "calls"
        where = "\n      ← ".join(self.site) if self.site else "(no frame of functions/ or layers/core/)"
        return (
            f"{self.function} {what} {self.action} on {self.resource}, which its IAM policies in template.yaml do not "
            f"grant\n    at {where}"
        )

    def as_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Violation:
        data = json.loads(text)
        data["site"] = tuple(data.get("site") or ())
        return cls(**data)


def _call_site() -> tuple[str, ...]:
    frames: list[str] = []
    frame = sys._getframe(2)
    while frame is not None and len(frames) < 6:
        filename = frame.f_code.co_filename
        if filename.startswith(_OUR_CODE) and filename not in _NOT_A_SITE:
            relative = os.path.relpath(filename, ROOT)
            frames.append(f"{relative}:{frame.f_lineno} ({frame.f_code.co_name})")
        frame = frame.f_back  # type: ignore[assignment]
    return tuple(frames)


def _function_from_stack(model: PolicyModel) -> str | None:
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_FUNCTIONS_DIR):
            code_dir = os.path.dirname(os.path.relpath(filename, ROOT))
            return model.function_of(code_dir.replace(os.sep, "/"))
        frame = frame.f_back  # type: ignore[assignment]
    return None


class IamCheck:
    """The process's checker: the active model, its mode and the violations seen since they were last taken."""

    def __init__(self) -> None:
        self.model: PolicyModel | None = None
        self.mode = os.environ.get("IAM_CHECK", "fail")
        self._violations: list[Violation] = []
        self._lock = threading.Lock()

    # Activation ----------------------------------------------------------------------------------------------------
    def activate(self, model: PolicyModel | None, *, mode: str | None = None) -> PolicyModel | None:
        """Check calls against `model` from now on (None: check nothing); → the model that was active."""
        mode = mode or os.environ.get("IAM_CHECK", "fail")
        if mode not in MODES:
            raise ValueError(f"IAM_CHECK={mode!r}: one of {', '.join(MODES)}")
        previous, self.model, self.mode = self.model, (None if mode == "off" else model), mode
        return previous

    @contextmanager
    def checking(self, model: PolicyModel | None, *, mode: str | None = None) -> Iterator[PolicyModel | None]:
        previous_mode = self.mode
        previous = self.activate(model, mode=mode)
        try:
            yield self.model
        finally:
            self.model, self.mode = previous, previous_mode

    def take(self) -> list[Violation]:
        """The violations recorded since the last `take`, forgotten here."""
        with self._lock:
            out, self._violations = self._violations, []
        return out

    # The check -----------------------------------------------------------------------------------------------------
    def before_call(self, params: Any, model: Any, context: Any = None, **_: Any) -> None:
        """botocore `before-parameter-build` handler."""
        if self.model is None:
            return
        presigned = bool(context and context.get("is_presign_request"))
        self.check(model.service_model.service_name, model.name, params or {}, presigned=presigned)

    def check(self, service: str, operation: str, params: Mapping[str, Any], *, presigned: bool = False) -> None:
        """Check one call (botocore's service and operation names) made now, on this thread."""
        grants = self.model
        if grants is None:
            return
        function = FUNCTION.get() or _function_from_stack(grants)
        if function is None:
            return
        denied = [
            need
            for need in needs(service, operation, params)
            if not any(grants.allowed(function, need.action, r, dict(need.context)) for r in need.resources)
        ]
        if not denied:
            return
        site = _call_site()
        found = [Violation(function, n.action, " or ".join(n.resources), site, presigned) for n in denied]
        with self._lock:
            self._violations.extend(found)
            if len(self._violations) > 2 * _KEPT:  # nobody takes them in a long-running local stack: its log has them
                del self._violations[:-_KEPT]
        for violation in found:
            log.error("%s %s\n  %s", VIOLATION_MARKER, violation.as_json(), violation.message())
        if self.mode == "fail" and not presigned:
            from botocore.exceptions import ClientError

            code = "AccessDenied" if service in ("s3", "sqs") else "AccessDeniedException"
            status = 403 if service == "s3" else 400
            message = "; ".join(v.message() for v in found)
            response: Any = {
                "Error": {"Code": code, "Message": message},
                "ResponseMetadata": {"HTTPStatusCode": status},
            }
            raise ClientError(response, operation)

    def after_s3_read(self, http_response: Any, parsed: Any, model: Any, **_: Any) -> None:
        """botocore `after-call.s3.GetObject` / `HeadObject` handler: a missing key is 403 AccessDenied, as S3 answers
        a role without s3:ListBucket on the bucket (moto always answers 404 NoSuchKey)."""
        grants = self.model
        if grants is None or not isinstance(parsed, dict):
            return
        error = parsed.get("Error") or {}
        if error.get("Code") not in ("NoSuchKey", "404"):
            return
        function = FUNCTION.get() or _function_from_stack(grants)
        bucket = _LAST_S3_BUCKET.get()
        if function is None or bucket is None:
            return
        if not grants.allowed(function, "s3:ListBucket", object_arn(bucket)):
            error["Code"], error["Message"] = "AccessDenied", "Access Denied"
            parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = 403


_LAST_S3_BUCKET: ContextVar[str | None] = ContextVar("switchboard_iam_s3_bucket", default=None)

CHECK = IamCheck()
_installed: set[int] = set()
_install_lock = threading.Lock()


def _remember_bucket(params: Any, **_: Any) -> None:
    if isinstance(params, dict) and "Bucket" in params:
        _LAST_S3_BUCKET.set(str(params["Bucket"]))


def install() -> None:
    """Register the check on `switchboard.aws`'s session (idempotent); clients made before are dropped."""
    from switchboard import aws

    session = aws.session()
    with _install_lock:
        if id(session) in _installed:
            return
        session.events.register("before-parameter-build", CHECK.before_call, unique_id="switchboard-iam-check")
        for operation in ("GetObject", "HeadObject"):
            session.events.register(
                f"before-parameter-build.s3.{operation}", _remember_bucket, unique_id=f"switchboard-iam-{operation}"
            )
            session.events.register(
                f"after-call.s3.{operation}", CHECK.after_s3_read, unique_id=f"switchboard-iam-after-{operation}"
            )
        _installed.add(id(session))
    aws.reset_clients()
