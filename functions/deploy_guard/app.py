"""The deploy guard: a CloudFormation custom resource that fails a stack update lowering a grow-only parameter.

`TenantShards` and `WebhookDeliveryShards` may only grow (docs/data-model.md "Write sharding"): a list reads the
shards `0 .. n-1` of the count it is given, so lowering it would hide every item written in a higher shard. The
template passes both parameters through the `GrowOnlyParameters` resource, and every function reads them from its
answer (`!GetAtt GrowOnlyParameters.TenantShards`), so no function sees a count this guard has not accepted: an
update that lowers one fails here, before any function changes, and CloudFormation rolls the stack back.

Standard library only (no layer): the layer's code is what the guard protects, and the function must answer
CloudFormation even when nothing else of the stack is in place. The answer is the documented custom-resource
response, a PUT of JSON to the presigned `ResponseURL`.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

logger = logging.getLogger()
logger.setLevel(logging.INFO)

GROW_ONLY = ("TenantShards", "WebhookDeliveryShards")
POWERS_OF_TWO = ("TenantShards",)  # a shard is `hash mod n`: only a power of two keeps the older shards in range


class Refused(Exception):
    """The change the stack update asks for breaks a rule: the reason CloudFormation shows."""


def decide(event: dict[str, Any]) -> dict[str, str]:
    """The attributes to answer (each parameter as accepted), or `Refused` with the reason."""
    if event["RequestType"] == "Delete":
        return {}
    new = event.get("ResourceProperties") or {}
    old = event.get("OldResourceProperties") or {} if event["RequestType"] == "Update" else {}
    data: dict[str, str] = {}
    for name in GROW_ONLY:
        try:
            value = int(str(new[name]))
        except (KeyError, ValueError):
            raise Refused(f"{name} must be given as a whole number") from None
        if value < 1:
            raise Refused(f"{name} must be at least 1, not {value}")
        if name in POWERS_OF_TWO and value & (value - 1):
            raise Refused(f"{name} must be a power of two, not {value}")
        if name in old and value < int(str(old[name])):
            raise Refused(
                f"{name} may only grow: lowering it from {old[name]} to {value} would hide every item written in "
                "the higher shards (docs/data-model.md, Write sharding)"
            )
        data[name] = str(value)
    return data


def handler(event: dict[str, Any], context: Any) -> None:
    physical_id = event.get("PhysicalResourceId") or f"{event['LogicalResourceId']}-{event['RequestId']}"
    try:
        data, status, reason = decide(event), "SUCCESS", "accepted"
    except Refused as err:
        data, status, reason = {}, "FAILED", str(err)
    except Exception as err:  # CloudFormation waits an hour for an answer that never comes: always answer
        logger.exception("deploy guard failed")
        data, status, reason = {}, "FAILED", f"deploy guard error: {type(err).__name__}: {err}"
    logger.info(json.dumps({"request": event["RequestType"], "status": status, "reason": reason, "data": data}))
    respond(event, status=status, reason=reason, physical_id=physical_id, data=data)


def respond(event: dict[str, Any], *, status: str, reason: str, physical_id: str, data: dict[str, str]) -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason,
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": data,
        }
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - the presigned https URL CloudFormation gives
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with urllib.request.urlopen(request, timeout=20) as answer:  # noqa: S310
        answer.read()
