"""The deploy guard: a CloudFormation custom resource that keeps the grow-only parameters from ever shrinking.

`TenantShards` and `WebhookDeliveryShards` may only grow (docs/data-model.md "Write sharding"): a list reads the
shards `0 .. n-1` of the count it is given, so lowering it would hide every item written in a higher shard. The
template passes both parameters through the `GrowOnlyParameters` resource, and every function reads them from its
answer (`!GetAtt GrowOnlyParameters.TenantShards`), so no function sees a count this guard has not accepted.

- An update that lowers one fails here, before any function changes, and CloudFormation rolls the stack back.
- A rollback is never refused. CloudFormation rolls back by sending an `Update` whose `ResourceProperties` are the
  previous (lower, after a raise) values and whose `OldResourceProperties` are those of the failed update; the
  request says nothing else about it. Refusing it would leave the stack in `UPDATE_ROLLBACK_FAILED`, so the guard
  reads its stack's status (`DescribeStacks`): while it is `UPDATE_ROLLBACK_IN_PROGRESS` the answer is SUCCESS with
  the higher of the two values, because the functions may already have written in the shards of the higher count.
  When the status cannot be read, the guard answers the same way: it never fails what may be a rollback, and never
  answers a count below one the functions may have used.
- The counts the functions use are also the stack's outputs `TenantShardsInUse` / `WebhookDeliveryShardsInUse`. A
  rollback that kept a raised count leaves it above the parameter; a later update must not go below it either.

Standard library and the Lambda runtime's boto3 only (no layer): the layer's code is what the guard protects, and the
function must answer CloudFormation even when nothing else of the stack is in place. The answer is the documented
custom-resource response, a PUT of JSON to the presigned `ResponseURL`.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger()
logger.setLevel(logging.INFO)

GROW_ONLY = ("TenantShards", "WebhookDeliveryShards")
POWERS_OF_TWO = ("TenantShards",)  # a shard is `hash mod n`: only a power of two keeps the older shards in range
IN_USE_OUTPUTS = {name: f"{name}InUse" for name in GROW_ONLY}  # template.yaml Outputs


class Refused(Exception):
    """The change the stack update asks for breaks a rule: the reason CloudFormation shows."""


@dataclass(frozen=True)
class StackState:
    """What `DescribeStacks` says of the guard's stack while CloudFormation waits for the guard."""

    status: str
    in_use: dict[str, int] = field(default_factory=dict)  # the counts the functions read now (stack outputs)

    @property
    def rolling_back(self) -> bool:
        return self.status.endswith("ROLLBACK_IN_PROGRESS")


def stack_state(stack_id: str) -> StackState | None:
    """The stack's status and the counts in use; None when they cannot be read."""
    try:
        import boto3  # the Lambda runtime's

        client = boto3.client("cloudformation", region_name=stack_id.split(":")[3])
        stack = client.describe_stacks(StackName=stack_id)["Stacks"][0]
    except Exception:  # any failure: the caller treats the update as a possible rollback
        logger.exception("could not read the stack's status")
        return None
    in_use: dict[str, int] = {}
    for output in stack.get("Outputs") or []:
        for name, key in IN_USE_OUTPUTS.items():
            if output.get("OutputKey") == key and str(output.get("OutputValue", "")).isdigit():
                in_use[name] = int(output["OutputValue"])
    return StackState(str(stack.get("StackStatus", "")), in_use)


def _count(properties: dict[str, Any], name: str) -> int | None:
    try:
        return int(str(properties[name]))
    except (KeyError, ValueError):
        return None


def decide(event: dict[str, Any], stack: StackState | None = None) -> tuple[dict[str, str], str]:
    """The attributes to answer (each parameter as the functions will read it) and the reason, or `Refused`.
    `stack` is the stack's state for an `Update` (None: it could not be read)."""
    if event["RequestType"] == "Delete":
        return {}, "deleted"
    new = event.get("ResourceProperties") or {}
    if event["RequestType"] == "Update" and (stack is None or stack.rolling_back):
        return _keep_the_higher(new, event.get("OldResourceProperties") or {}, stack)
    old = event.get("OldResourceProperties") or {} if event["RequestType"] == "Update" else {}
    in_use = stack.in_use if stack is not None and event["RequestType"] == "Update" else {}
    data: dict[str, str] = {}
    for name in GROW_ONLY:
        value = _count(new, name)
        if value is None:
            raise Refused(f"{name} must be given as a whole number")
        if value < 1:
            raise Refused(f"{name} must be at least 1, not {value}")
        if name in POWERS_OF_TWO and value & (value - 1):
            raise Refused(f"{name} must be a power of two, not {value}")
        floor = max(c for c in (_count(old, name), in_use.get(name), 0) if c is not None)
        if value < floor:
            raise Refused(
                f"{name} may only grow: the functions read {floor}, and lowering it to {value} would hide every item "
                f"written in the higher shards (docs/data-model.md, Write sharding); deploy with {name}={floor} or more"
            )
        data[name] = str(value)
    return data, "accepted"


def _keep_the_higher(new: dict[str, Any], old: dict[str, Any], stack: StackState | None) -> tuple[dict[str, str], str]:
    """A rollback (or a status that could not be read): never refused, never lower than a count in use."""
    data: dict[str, str] = {}
    for name in GROW_ONLY:
        counts = [c for c in (_count(new, name), _count(old, name)) if c is not None]
        if stack is not None and name in stack.in_use:
            counts.append(stack.in_use[name])
        if not counts:
            raise Refused(f"{name} must be given as a whole number")
        data[name] = str(max(counts))
    if stack is None:
        return data, "accepted; the stack's status could not be read, so the higher counts are kept"
    return data, f"rollback ({stack.status}): the higher counts are kept, so no function reads fewer shards"


def handler(event: dict[str, Any], context: Any) -> None:
    physical_id = event.get("PhysicalResourceId") or f"{event['LogicalResourceId']}-{event['RequestId']}"
    try:
        stack = stack_state(event["StackId"]) if event["RequestType"] == "Update" else None
        (data, reason), status = decide(event, stack), "SUCCESS"
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
