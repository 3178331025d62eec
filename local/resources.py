"""Create the template's AWS resources in whatever endpoint boto3 points at (moto's server, or `mock_aws`).

Tests build their table with `create_resources(load_template())` inside `mock_aws`, the local stack builds it on
the moto server: both read the same `template.yaml`, so keys, indexes and streams never drift from what deploys.

Created: every `AWS::DynamoDB::Table` (attributes, keys, GSIs/LSIs, billing, stream, then TTL), every
`AWS::SQS::Queue` (attributes, then the redrive policy to its resolved DLQ), every `AWS::Events::EventBus` and
`AWS::Events::Rule` with its targets (moto delivers `put_events` to SQS targets on a custom bus and evaluates the
pattern), every `AWS::S3::Bucket`, and every `AWS::SecretsManager::Secret` (a random value generated here, stored in
the endpoint's Secrets Manager, whose ARN `!Ref` answers as on AWS, so functions read it at run time; also used to
resolve `{{resolve:secretsmanager:...}}`). Anything else gets a deterministic placeholder name and ARN.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from local.template import ACCOUNT_ID, REGION, FunctionSpec, LocalTemplate, TemplateError

_SECRET_REF = re.compile(r"^\{\{resolve:secretsmanager:(?P<id>.+?)(?::SecretString(?::(?P<key>[^:}]*))?.*)?\}\}$")
_PASSTHROUGH_ENV = ("LOCAL_TIME_SCALE",)
_QUEUE_ATTRIBUTES = (
    "VisibilityTimeout",
    "MessageRetentionPeriod",
    "DelaySeconds",
    "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
)


@dataclass
class Resources:
    """Physical names of the created resources and the resolved environment of each function."""

    template: LocalTemplate
    prefix: str
    physical: dict[str, str] = field(default_factory=dict)  # logical id -> what !Ref returns (name, URL or ARN)
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)  # logical id -> !GetAtt attribute -> value
    secret_values: dict[str, str] = field(default_factory=dict)  # logical id -> secret string

    # Intrinsics ----------------------------------------------------------------------------------------------------
    def ref(self, logical_id: str) -> str:
        if logical_id in self.physical:
            return self.physical[logical_id]
        if logical_id not in self.template.resources:
            raise TemplateError(f"!Ref {logical_id}: no such parameter or resource")
        return f"{self.prefix}-{logical_id}"

    def getatt(self, logical_id: str, attribute: str) -> str:
        known = self.attributes.get(logical_id, {})
        if attribute in known:
            return known[attribute]
        if logical_id not in self.template.resources:
            raise TemplateError(f"!GetAtt {logical_id}.{attribute}: no such resource")
        return f"arn:aws:local:{REGION}:{ACCOUNT_ID}:{self.prefix}-{logical_id}/{attribute}"

    def dynamic(self, reference: str) -> str:
        match = _SECRET_REF.match(reference)
        if match is None:
            raise TemplateError(f"dynamic reference {reference} is not supported by the local stack")
        wanted = match.group("id")
        for logical_id, value in self.secret_values.items():
            if wanted in (self.physical.get(logical_id), self.attributes.get(logical_id, {}).get("Name"), logical_id):
                key = match.group("key")
                if key:
                    return str(json.loads(value)[key])
                return value
        raise TemplateError(f"dynamic reference {reference}: unknown secret")

    def resolve(self, value: Any) -> Any:
        return self.template.resolve(value, ref=self.ref, getatt=self.getatt, dynamic=self.dynamic)

    # Functions -----------------------------------------------------------------------------------------------------
    def function_env(self, spec: FunctionSpec) -> dict[str, str]:
        """Every environment variable of `spec` (Globals + its own), resolved; LOCAL_TIME_SCALE passed through."""
        env = {name: _env_str(value) for name, value in self.resolve(spec.environment).items()}
        for name in _PASSTHROUGH_ENV:
            if os.environ.get(name):
                env[name] = os.environ[name]
        return env

    def function_name(self, logical_id: str) -> str:
        return self.ref(logical_id)

    def function_arn(self, logical_id: str) -> str:
        return self.getatt(logical_id, "Arn")

    # Convenience ---------------------------------------------------------------------------------------------------
    def queue_url(self, logical_id: str) -> str:
        return self.physical[logical_id]

    def queue_arn(self, logical_id: str) -> str:
        return self.attributes[logical_id]["Arn"]

    def table_name(self, logical_id: str = "Table") -> str:
        return self.physical[logical_id]

    def stream_arn(self, logical_id: str = "Table") -> str:
        return self.attributes[logical_id]["StreamArn"]


def _env_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return "" if value is None else str(value)


def create_resources(template: LocalTemplate, *, prefix: str = "switchboard-local", session: Any = None) -> Resources:
    """Create every supported resource of `template`; returns their physical names. Idempotent per endpoint."""
    import boto3

    session = session or boto3.session.Session()
    res = Resources(template=template, prefix=prefix)
    _plan_names(res)
    for logical_id, resource in template.of_type("AWS::SecretsManager::Secret").items():
        res.secret_values[logical_id] = _secret_value(res.resolve(resource.get("Properties") or {}))
    _create_secrets(res, session.client("secretsmanager", region_name=REGION))
    _create_tables(res, session.client("dynamodb", region_name=REGION))
    _create_queues(res, session.client("sqs", region_name=REGION))
    events = session.client("events", region_name=REGION)
    _create_buses(res, events)
    _create_rules(res, events)
    _create_buckets(res, session.client("s3", region_name=REGION))
    return res


# Names --------------------------------------------------------------------------------------------------------------
def _plan_names(res: Resources) -> None:
    """Names and ARNs known before creation (the service-assigned ones are filled in as resources are created)."""
    tpl, prefix = res.template, res.prefix
    arn = f"{REGION}:{ACCOUNT_ID}"
    for logical_id, resource in tpl.resources.items():
        kind = resource.get("Type", "")
        props = resource.get("Properties") or {}
        default = f"{prefix}-{logical_id}"
        if kind == "AWS::DynamoDB::Table":
            name = str(res.resolve(props.get("TableName") or default))
            res.physical[logical_id] = name
            res.attributes[logical_id] = {"Arn": f"arn:aws:dynamodb:{arn}:table/{name}"}
        elif kind == "AWS::SQS::Queue":
            name = str(res.resolve(props.get("QueueName") or default))
            if props.get("FifoQueue") in (True, "true") and not name.endswith(".fifo"):
                name += ".fifo"
            res.attributes[logical_id] = {"Arn": f"arn:aws:sqs:{arn}:{name}", "QueueName": name}
        elif kind == "AWS::Events::EventBus":
            name = str(res.resolve(props.get("Name") or default))
            res.physical[logical_id] = name
            res.attributes[logical_id] = {"Arn": f"arn:aws:events:{arn}:event-bus/{name}", "Name": name}
        elif kind == "AWS::Events::Rule":
            name = str(res.resolve(props.get("Name") or default))
            bus = res.resolve(props.get("EventBusName") or "default")
            bus_name = str(bus).rsplit("/", 1)[-1]
            path = f"rule/{name}" if bus_name == "default" else f"rule/{bus_name}/{name}"
            res.physical[logical_id] = name if bus_name == "default" else f"{bus_name}|{name}"
            res.attributes[logical_id] = {"Arn": f"arn:aws:events:{arn}:{path}"}
        elif kind == "AWS::S3::Bucket":
            name = str(res.resolve(props.get("BucketName") or default.lower()))
            res.physical[logical_id] = name
            res.attributes[logical_id] = {
                "Arn": f"arn:aws:s3:::{name}",
                "DomainName": f"{name}.s3.amazonaws.com",
                "RegionalDomainName": f"{name}.s3.{REGION}.amazonaws.com",
            }
        elif kind == "AWS::SecretsManager::Secret":
            name = str(res.resolve(props.get("Name") or default))
            secret_arn = f"arn:aws:secretsmanager:{arn}:secret:{name}-LocAl1"
            res.physical[logical_id] = secret_arn
            res.attributes[logical_id] = {"Arn": secret_arn, "Name": name}
        elif kind == "AWS::Serverless::Function":
            res.physical[logical_id] = default
            res.attributes[logical_id] = {"Arn": f"arn:aws:lambda:{arn}:function:{default}"}
        elif kind == "AWS::SNS::Topic":
            res.physical[logical_id] = f"arn:aws:sns:{arn}:{default}"
            res.attributes[logical_id] = {"TopicArn": res.physical[logical_id], "TopicName": default}
        elif kind == "AWS::Serverless::Api":
            res.physical[logical_id] = "local"
            res.attributes[logical_id] = {"RootResourceId": "root"}
        elif kind == "Custom::GrowOnlyParameters":
            # the deploy guard (functions/deploy_guard) answers the parameters it accepts; a local stack is always
            # created afresh, where it accepts any valid value, so its attributes are its properties
            res.physical[logical_id] = default
            res.attributes[logical_id] = {
                name: str(res.resolve(value)) for name, value in props.items() if name != "ServiceToken"
            }


def _secret_value(props: Mapping[str, Any]) -> str:
    if "SecretString" in props:
        return str(props["SecretString"])
    spec = props.get("GenerateSecretString") or {}
    length = int(spec.get("PasswordLength", 32))
    alphabet = string.ascii_letters + string.digits
    if not spec.get("ExcludePunctuation"):
        alphabet += "!#$%&()*+,-.:;<=>?[]^_{|}~"
    excluded = str(spec.get("ExcludeCharacters", ""))
    alphabet = "".join(c for c in alphabet if c not in excluded)
    value = "".join(secrets.choice(alphabet) for _ in range(length))
    if "GenerateStringKey" in spec:
        base = json.loads(spec.get("SecretStringTemplate") or "{}")
        base[spec["GenerateStringKey"]] = value
        return json.dumps(base)
    return value


# Creation -----------------------------------------------------------------------------------------------------------
def _already_exists(err: Exception) -> bool:
    code = getattr(err, "response", {}).get("Error", {}).get("Code", "")
    return code in (
        "ResourceInUseException",
        "ResourceAlreadyExistsException",
        "BucketAlreadyOwnedByYou",
        "QueueAlreadyExists",
        "ResourceExistsException",
    )


def _create_tables(res: Resources, dynamodb: Any) -> None:
    from botocore.exceptions import ClientError

    for logical_id, resource in res.template.of_type("AWS::DynamoDB::Table").items():
        props = res.resolve(resource.get("Properties") or {})
        params: dict[str, Any] = {
            "TableName": res.physical[logical_id],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "KeySchema": props["KeySchema"],
            "BillingMode": props.get("BillingMode", "PROVISIONED"),
        }
        if params["BillingMode"] == "PROVISIONED":
            params["ProvisionedThroughput"] = _throughput(props.get("ProvisionedThroughput"))
        if props.get("GlobalSecondaryIndexes"):
            params["GlobalSecondaryIndexes"] = [
                {
                    k: v
                    for k, v in {
                        "IndexName": gsi["IndexName"],
                        "KeySchema": gsi["KeySchema"],
                        "Projection": gsi.get("Projection") or {"ProjectionType": "ALL"},
                        "ProvisionedThroughput": _throughput(gsi.get("ProvisionedThroughput"))
                        if params["BillingMode"] == "PROVISIONED"
                        else None,
                    }.items()
                    if v is not None
                }
                for gsi in props["GlobalSecondaryIndexes"]
            ]
        if props.get("LocalSecondaryIndexes"):
            params["LocalSecondaryIndexes"] = props["LocalSecondaryIndexes"]
        stream = props.get("StreamSpecification")
        if stream:
            params["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
        try:
            dynamodb.create_table(**params)
        except ClientError as err:
            if not _already_exists(err):
                raise
        table = dynamodb.describe_table(TableName=params["TableName"])["Table"]
        res.attributes[logical_id]["Arn"] = table["TableArn"]
        if table.get("LatestStreamArn"):
            res.attributes[logical_id]["StreamArn"] = table["LatestStreamArn"]
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled") in (True, "true"):
            dynamodb.update_time_to_live(
                TableName=params["TableName"],
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
            )


def _throughput(value: Mapping[str, Any] | None) -> dict[str, int]:
    value = value or {}
    return {
        "ReadCapacityUnits": int(value.get("ReadCapacityUnits", 5)),
        "WriteCapacityUnits": int(value.get("WriteCapacityUnits", 5)),
    }


def _create_queues(res: Resources, sqs: Any) -> None:
    queues = res.template.of_type("AWS::SQS::Queue")
    for logical_id, resource in queues.items():
        props = res.resolve(resource.get("Properties") or {})
        attributes = {name: _env_str(props[name]) for name in _QUEUE_ATTRIBUTES if name in props}
        name = res.attributes[logical_id]["QueueName"]
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        res.physical[logical_id] = url
        res.attributes[logical_id]["QueueUrl"] = url
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        res.attributes[logical_id]["Arn"] = arn
    # Redrive policies once every queue (and so every DLQ ARN) exists.
    for logical_id, resource in queues.items():
        props = res.resolve(resource.get("Properties") or {})
        redrive = props.get("RedrivePolicy")
        if redrive:
            policy = json.loads(redrive) if isinstance(redrive, str) else redrive
            policy = {
                "deadLetterTargetArn": policy["deadLetterTargetArn"],
                "maxReceiveCount": policy["maxReceiveCount"],
            }
            sqs.set_queue_attributes(
                QueueUrl=res.physical[logical_id], Attributes={"RedrivePolicy": json.dumps(policy)}
            )


def _create_buses(res: Resources, events: Any) -> None:
    from botocore.exceptions import ClientError

    for logical_id in res.template.of_type("AWS::Events::EventBus"):
        try:
            arn = events.create_event_bus(Name=res.physical[logical_id])["EventBusArn"]
        except ClientError as err:
            if not _already_exists(err):
                raise
            arn = events.describe_event_bus(Name=res.physical[logical_id])["Arn"]
        res.attributes[logical_id]["Arn"] = arn


def _create_rules(res: Resources, events: Any) -> None:
    for logical_id, resource in res.template.of_type("AWS::Events::Rule").items():
        props = res.resolve(resource.get("Properties") or {})
        name = res.physical[logical_id].rsplit("|", 1)[-1]
        bus = str(props.get("EventBusName") or "default").rsplit("/", 1)[-1]
        params: dict[str, Any] = {"Name": name, "EventBusName": bus, "State": props.get("State", "ENABLED")}
        if props.get("EventPattern") is not None:
            pattern = props["EventPattern"]
            params["EventPattern"] = pattern if isinstance(pattern, str) else json.dumps(pattern)
        if props.get("ScheduleExpression"):
            params["ScheduleExpression"] = props["ScheduleExpression"]
        if props.get("Description"):
            params["Description"] = props["Description"]
        res.attributes[logical_id]["Arn"] = events.put_rule(**params)["RuleArn"]
        targets = [
            {k: v for k, v in target.items() if k in ("Id", "Arn", "Input", "InputPath", "InputTransformer")}
            for target in props.get("Targets") or []
        ]
        if targets:
            events.put_targets(Rule=name, EventBusName=bus, Targets=targets)


def _create_secrets(res: Resources, secretsmanager: Any) -> None:
    """Each secret with its generated value; on an endpoint that has it already, the value it holds."""
    from botocore.exceptions import ClientError

    for logical_id, value in res.secret_values.items():
        name = res.attributes[logical_id]["Name"]
        try:
            arn = secretsmanager.create_secret(Name=name, SecretString=value)["ARN"]
        except ClientError as err:
            if not _already_exists(err):
                raise
            held = secretsmanager.get_secret_value(SecretId=name)
            arn, res.secret_values[logical_id] = held["ARN"], held["SecretString"]
        res.physical[logical_id] = arn
        res.attributes[logical_id]["Arn"] = arn


def _create_buckets(res: Resources, s3: Any) -> None:
    from botocore.exceptions import ClientError

    for logical_id in res.template.of_type("AWS::S3::Bucket"):
        try:
            s3.create_bucket(Bucket=res.physical[logical_id])
        except ClientError as err:
            if not _already_exists(err):
                raise
