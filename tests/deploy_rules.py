"""Deploy rules: what AWS refuses at deploy time, or silently ignores, checked on template.yaml as CloudFormation
deploys it, i.e. after the SAM transform (aws-sam-translator, the library behind `AWS::Serverless-2016-10-31`).

moto and the local stack enforce none of these; each rule below is one a first `sam deploy` or a first incident would
otherwise find:

- `filters_per_mapping`: Lambda refuses an event source mapping with more than 5 `FilterCriteria` filters (the
  default quota; 10 only after an increase), and the stack creation fails.
- `api_timeouts`: API Gateway gives up on an integration after 29 s; a function behind the API (its routes or its
  authorizer) with a longer Timeout keeps running after the client got 504.
- `method_settings`: a stage `MethodSettings` entry whose resource path or method the API does not have is accepted
  and never applies (the per-route throttles silently do nothing).
- `dlq_alarms`: every dead-letter queue (a queue's `deadLetterTargetArn`, a mapping's on-failure destination) has an
  alarm on its depth; otherwise failed work piles up unseen.
- `log_groups`: every function's log group (`/aws/lambda/<function>` or its `LoggingConfig.LogGroup`) is a resource
  of the stack with a retention; otherwise Lambda creates it on first use and keeps the logs forever.
- `queue_visibility`: an SQS queue's visibility timeout is at least 6x its consumer's Timeout plus its batching
  window (AWS's guidance), or a message is handed out again while a slow invocation still works on it.
- `consumer_error_alarms`: the Lambda `Errors` of every stream and queue consumer are alarmed.
- `authorizer_alarms`: no alarm watches an authorizer's raw `Errors` (API Gateway's contract for a 401 is the
  authorizer raising "Unauthorized", which Lambda counts as an error), and an alarm watches the authorizer failures
  clients see (`AUTHORIZER_CONFIGURATION_ERROR` in the stage's access log).

`violations(transformed())` maps each rule to its findings (empty lists when the template is deployable).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"

MAX_FILTERS_PER_MAPPING = 5
API_GATEWAY_TIMEOUT = 29
VISIBILITY_FACTOR = 6
LAMBDA_DEFAULT_TIMEOUT = 3
SQS_DEFAULT_VISIBILITY = 30
AUTHORIZER_FAILURE_TYPES = ("AUTHORIZER_CONFIGURATION_ERROR", "AUTHORIZER_FAILURE")

Template = dict[str, Any]


# The transform -----------------------------------------------------------------------------------------------------
def transform(sam_template: Template, parameters: dict[str, Any] | None = None) -> Template:
    """The CloudFormation template CloudFormation deploys for `sam_template` (a parsed SAM template, intrinsics in
    long form). Local code locations become S3 URIs first, as `sam package` makes them."""
    import boto3
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    template = copy.deepcopy(sam_template)
    for resource in (template.get("Resources") or {}).values():
        props = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                props[key] = "s3://deploy-artifacts/" + props[key].strip("/")
    values = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws"}
    values |= parameters or {}
    translator = Translator(None, Parser(), boto_session=boto3.session.Session(region_name=values["AWS::Region"]))
    return translator.translate(template, parameter_values=values, get_managed_policy_map=dict)


@functools.cache
def _transformed_text(path: str) -> str:
    from local.template import parse_yaml

    return json.dumps(transform(parse_yaml(Path(path).read_text())))


def transformed(path: Path = TEMPLATE) -> Template:
    """template.yaml after the SAM transform (a fresh copy: callers may change it)."""
    return json.loads(_transformed_text(str(path)))


# Reading the transformed template ----------------------------------------------------------------------------------
def resources(cfn: Template, resource_type: str) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in cfn["Resources"].items() if r.get("Type") == resource_type}


def props(resource: dict[str, Any]) -> dict[str, Any]:
    return resource.get("Properties") or {}


def target(value: Any) -> str | None:
    """`{"Ref": X}` / `{"Fn::GetAtt": [X, attr]}` / `"X.attr"` → X: the resource a property points at."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref" and isinstance(arg, str):
            return arg
        if key == "Fn::GetAtt":
            return str(arg[0] if isinstance(arg, list) else str(arg).split(".", 1)[0])
    return None


def getatt(value: Any) -> tuple[str, str] | None:
    if isinstance(value, dict) and list(value) == ["Fn::GetAtt"]:
        arg = value["Fn::GetAtt"]
        resource, attribute = arg if isinstance(arg, list) else str(arg).split(".", 1)
        return str(resource), str(attribute)
    return None


def timeout(cfn: Template, function: str) -> int:
    return int(props(cfn["Resources"][function]).get("Timeout", LAMBDA_DEFAULT_TIMEOUT))


def api_functions(cfn: Template) -> set[str]:
    """The functions API Gateway invokes (routes and authorizers): those with an `apigateway.amazonaws.com` grant."""
    out = set()
    for permission in resources(cfn, "AWS::Lambda::Permission").values():
        p = props(permission)
        if p.get("Principal") == "apigateway.amazonaws.com" and (fn := target(p.get("FunctionName"))):
            out.add(fn)
    return out


def mappings(cfn: Template) -> dict[str, dict[str, Any]]:
    return resources(cfn, "AWS::Lambda::EventSourceMapping")


def consumers(cfn: Template) -> set[str]:
    """Functions fed by an event source mapping (streams and queues)."""
    return {fn for m in mappings(cfn).values() if (fn := target(props(m).get("FunctionName")))}


def alarm_metrics(alarm: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every metric an alarm reads: `{namespace, name, dimensions: {name: value}}`, single metric or metric math."""
    p = props(alarm)
    if p.get("MetricName"):
        yield {
            "namespace": p.get("Namespace"),
            "name": p["MetricName"],
            "dimensions": {d["Name"]: d["Value"] for d in p.get("Dimensions") or []},
        }
    for query in p.get("Metrics") or []:
        metric = (query.get("MetricStat") or {}).get("Metric")
        if metric:
            yield {
                "namespace": metric.get("Namespace"),
                "name": metric.get("MetricName"),
                "dimensions": {d["Name"]: d["Value"] for d in metric.get("Dimensions") or []},
            }


def _metric_filters(cfn: Template) -> dict[tuple[Any, Any], list[dict[str, Any]]]:
    """(namespace, metric name) → the metric filters that write it."""
    out: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for mf in resources(cfn, "AWS::Logs::MetricFilter").values():
        for tr in props(mf).get("MetricTransformations") or []:
            out.setdefault((json.dumps(tr.get("MetricNamespace")), tr.get("MetricName")), []).append(props(mf))
    return out


# The rules ---------------------------------------------------------------------------------------------------------
def filters_per_mapping(cfn: Template) -> list[str]:
    found = []
    for lid, mapping in mappings(cfn).items():
        filters = (props(mapping).get("FilterCriteria") or {}).get("Filters") or []
        if len(filters) > MAX_FILTERS_PER_MAPPING:
            found.append(
                f"{lid}: {len(filters)} FilterCriteria filters; Lambda allows {MAX_FILTERS_PER_MAPPING} per event "
                "source mapping and refuses to create it"
            )
    return found


def api_timeouts(cfn: Template) -> list[str]:
    return [
        f"{fn}: Timeout {timeout(cfn, fn)} s; API Gateway answers 504 after {API_GATEWAY_TIMEOUT} s while it runs on"
        for fn in sorted(api_functions(cfn))
        if timeout(cfn, fn) >= API_GATEWAY_TIMEOUT
    ]


def method_settings(cfn: Template) -> list[str]:
    found = []
    for lid, stage in resources(cfn, "AWS::ApiGateway::Stage").items():
        api = target(props(stage).get("RestApiId"))
        paths = (props(cfn["Resources"][api]).get("Body") or {}).get("paths") or {} if api else {}
        for setting in props(stage).get("MethodSettings") or []:
            path, method = str(setting.get("ResourcePath")), str(setting.get("HttpMethod"))
            if (path, method) == ("/*", "*"):
                continue
            resource = path.removeprefix("/").replace("~1", "/").replace("~0", "~")  # "/" + the escaped path
            operations = {
                "ANY" if op == "x-amazon-apigateway-any-method" else op.upper() for op in paths.get(resource) or {}
            }
            if resource not in paths:
                found.append(f"{lid}: MethodSettings {method} {path}: the API has no resource {resource}")
            elif method != "*" and method.upper() not in operations:
                found.append(
                    f"{lid}: MethodSettings {method} {path}: {resource} has only {sorted(operations)}, so the "
                    "setting never applies"
                )
    return found


def dead_letter_queues(cfn: Template) -> dict[str, str]:
    """Queue logical id → why it is a dead-letter queue."""
    out: dict[str, str] = {}
    queues = resources(cfn, "AWS::SQS::Queue")
    for lid, queue in queues.items():
        dlq = target((props(queue).get("RedrivePolicy") or {}).get("deadLetterTargetArn"))
        if dlq:
            out.setdefault(dlq, f"dead-letter queue of {lid}")
    for lid, mapping in mappings(cfn).items():
        dest = target(((props(mapping).get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination"))
        if dest in queues:
            out.setdefault(dest, f"on-failure destination of {lid}")
    for lid, config in resources(cfn, "AWS::Lambda::EventInvokeConfig").items():
        dest = target(((props(config).get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination"))
        if dest in queues:
            out.setdefault(dest, f"on-failure destination of {lid}")
    for lid, rule in resources(cfn, "AWS::Events::Rule").items():
        for tgt in props(rule).get("Targets") or []:
            dest = target((tgt.get("DeadLetterConfig") or {}).get("Arn"))
            if dest in queues:
                out.setdefault(dest, f"dead-letter queue of {lid}'s target {tgt.get('Id')}")
    return out


def dlq_alarms(cfn: Template) -> list[str]:
    watched = set()
    for alarm in resources(cfn, "AWS::CloudWatch::Alarm").values():
        for metric in alarm_metrics(alarm):
            queue = getatt(metric["dimensions"].get("QueueName"))
            depth = metric["name"] in ("ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage")
            if metric["namespace"] == "AWS/SQS" and depth and queue and queue[1] == "QueueName":
                watched.add(queue[0])
    return [
        f"{q}: {why}, and no alarm watches its depth"
        for q, why in sorted(dead_letter_queues(cfn).items())
        if q not in watched
    ]


def _log_group_names(cfn: Template) -> dict[str, dict[str, Any]]:
    """Log group name (as a comparable JSON text of its value) → the LogGroup resource's properties."""
    return {json.dumps(props(g).get("LogGroupName")): props(g) for g in resources(cfn, "AWS::Logs::LogGroup").values()}


def log_groups(cfn: Template) -> list[str]:
    found = []
    groups = resources(cfn, "AWS::Logs::LogGroup")
    by_name = _log_group_names(cfn)
    for fn, function in sorted(resources(cfn, "AWS::Lambda::Function").items()):
        configured = (props(function).get("LoggingConfig") or {}).get("LogGroup")
        if configured is not None:
            group = (
                props(groups[target(configured)])
                if target(configured) in groups
                else by_name.get(json.dumps(configured))
            )
            where = f"its LoggingConfig.LogGroup {json.dumps(configured)}"
        else:
            group = by_name.get(json.dumps({"Fn::Sub": f"/aws/lambda/${{{fn}}}"}))
            where = f"/aws/lambda/<{fn}>"
        if group is None:
            found.append(f"{fn}: no log group {where} in the stack (Lambda creates one that keeps logs forever)")
        elif group.get("RetentionInDays") is None:
            found.append(f"{fn}: {where} has no RetentionInDays")
    return found


def queue_visibility(cfn: Template) -> list[str]:
    found = []
    queues = resources(cfn, "AWS::SQS::Queue")
    for lid, mapping in sorted(mappings(cfn).items()):
        p = props(mapping)
        queue = target(p.get("EventSourceArn"))
        if queue not in queues:
            continue
        fn = str(target(p.get("FunctionName")))
        visibility = int(props(queues[queue]).get("VisibilityTimeout", SQS_DEFAULT_VISIBILITY))
        needed = VISIBILITY_FACTOR * timeout(cfn, fn) + int(p.get("MaximumBatchingWindowInSeconds", 0))
        if visibility < needed:
            found.append(
                f"{queue}: VisibilityTimeout {visibility} s < {needed} s ({VISIBILITY_FACTOR}x {fn}'s Timeout "
                f"{timeout(cfn, fn)} s + batching window), so a message is handed out again mid-invocation ({lid})"
            )
    return found


def _lambda_errors_alarmed(cfn: Template) -> dict[str, list[str]]:
    """Function → the alarms reading its AWS/Lambda Errors."""
    out: dict[str, list[str]] = {}
    for lid, alarm in resources(cfn, "AWS::CloudWatch::Alarm").items():
        for metric in alarm_metrics(alarm):
            fn = target(metric["dimensions"].get("FunctionName"))
            if metric["namespace"] == "AWS/Lambda" and metric["name"] == "Errors" and fn:
                out.setdefault(fn, []).append(lid)
    return out


def consumer_error_alarms(cfn: Template) -> list[str]:
    alarmed = _lambda_errors_alarmed(cfn)
    return [
        f"{fn}: a stream/queue consumer whose Lambda Errors no alarm watches"
        for fn in sorted(consumers(cfn))
        if fn not in alarmed
    ]


def authorizer_functions(cfn: Template) -> set[str]:
    out = set()
    for api in resources(cfn, "AWS::ApiGateway::RestApi").values():
        schemes = ((props(api).get("Body") or {}).get("components") or {}).get("securitySchemes") or {}
        for scheme in schemes.values():
            uri = json.dumps((scheme.get("x-amazon-apigateway-authorizer") or {}).get("authorizerUri"))
            out |= set(re.findall(r'"Fn::GetAtt": \["(\w+)", "Arn"\]', uri))
    return out


def access_log_groups(cfn: Template) -> set[str]:
    """Logical ids of the log groups the API stages write access logs to."""
    out = set()
    for stage in resources(cfn, "AWS::ApiGateway::Stage").values():
        group = getatt((props(stage).get("AccessLogSetting") or {}).get("DestinationArn"))
        if group:
            out.add(group[0])
    return out


def authorizer_failure_alarms(cfn: Template) -> list[tuple[str, str]]:
    """(alarm, metric filter pattern) of every alarm on a metric counted from the access log's authorizer failures."""
    filters = _metric_filters(cfn)
    groups = access_log_groups(cfn)
    out = []
    for lid, alarm in resources(cfn, "AWS::CloudWatch::Alarm").items():
        for metric in alarm_metrics(alarm):
            for mf in filters.get((json.dumps(metric["namespace"]), metric["name"]), []):
                pattern = str(mf.get("FilterPattern", ""))
                if target(mf.get("LogGroupName")) in groups and all(t in pattern for t in AUTHORIZER_FAILURE_TYPES):
                    out.append((lid, pattern))
    return out


def authorizer_alarms(cfn: Template) -> list[str]:
    found = []
    alarmed = _lambda_errors_alarmed(cfn)
    for fn in sorted(authorizer_functions(cfn)):
        for alarm in alarmed.get(fn, []):
            found.append(
                f"{alarm}: alarms on {fn}'s Lambda Errors, which count every refused credential (the authorizer "
                'raises "Unauthorized" for a 401)'
            )
    if authorizer_functions(cfn) and not authorizer_failure_alarms(cfn):
        found.append(
            "no alarm counts the requests the gateway answered with " + " or ".join(AUTHORIZER_FAILURE_TYPES) + " "
            "(a metric filter on the stage's access log)"
        )
    return found


RULES: dict[str, Callable[[Template], list[str]]] = {
    "filters_per_mapping": filters_per_mapping,
    "api_timeouts": api_timeouts,
    "method_settings": method_settings,
    "dlq_alarms": dlq_alarms,
    "log_groups": log_groups,
    "queue_visibility": queue_visibility,
    "consumer_error_alarms": consumer_error_alarms,
    "authorizer_alarms": authorizer_alarms,
}


def violations(cfn: Template) -> dict[str, list[str]]:
    return {name: rule(cfn) for name, rule in RULES.items()}
