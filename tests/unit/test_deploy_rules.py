"""template.yaml keeps the deploy rules (tests/deploy_rules.py) once transformed as CloudFormation transforms it, and
each rule catches the mistake it is about (shown on a copy of the transformed template with that mistake made)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests import deploy_rules as rules
from tests.deploy_rules import RULES, props, resources, transformed

AUTH_ROUTES = [
    "/v1/auth/login",
    "/v1/auth/register",
    "/v1/auth/register/verify",
    "/v1/auth/email-verification/request",
    "/v1/auth/email-verification/confirm",
    "/v1/auth/password/reset",
    "/v1/auth/password/confirm",
]


@pytest.mark.parametrize("rule", list(RULES))
def test_the_template_keeps_the_deploy_rule(rule: str):
    assert RULES[rule](transformed()) == []


# Each rule catches its mistake ----------------------------------------------------------------------------------------
def test_a_sixth_filter_on_a_mapping_is_caught():
    cfn = transformed()
    filters = props(cfn["Resources"]["UsageMeterFunctionUsageStream"])["FilterCriteria"]["Filters"]
    filters += [{"Pattern": json.dumps({"eventName": ["MODIFY"]})}] * (6 - len(filters))
    assert rules.filters_per_mapping(cfn) == [
        "UsageMeterFunctionUsageStream: 6 FilterCriteria filters; Lambda allows 5 per event source mapping and "
        "refuses to create it"
    ]


@pytest.mark.parametrize("function", ["IdentityFunction", "AuthorizerFunction", "WabaFunction"])
def test_an_api_function_as_slow_as_the_gateway_is_caught(function: str):
    cfn = transformed()
    props(cfn["Resources"][function])["Timeout"] = 29
    assert [f.split(":")[0] for f in rules.api_timeouts(cfn)] == [function]


def test_a_consumer_may_run_longer_than_the_gateway():
    cfn = transformed()
    props(cfn["Resources"]["JobsFunction"])["Timeout"] = 120
    assert rules.api_timeouts(cfn) == []


def test_method_settings_on_a_missing_resource_or_method_are_caught():
    cfn = transformed()
    settings = props(cfn["Resources"]["ApiStage"])["MethodSettings"]
    settings += [
        {"ResourcePath": "/~1v1~1auth~1sign-in", "HttpMethod": "POST"},
        {"ResourcePath": "/~1v1~1health", "HttpMethod": "GET"},  # the health resource has ANY only
    ]
    assert rules.method_settings(cfn) == [
        "ApiStage: MethodSettings POST /~1v1~1auth~1sign-in: the API has no resource /v1/auth/sign-in",
        "ApiStage: MethodSettings GET /~1v1~1health: /v1/health has only ['ANY'], so the setting never applies",
    ]


def test_the_auth_throttles_name_the_deployed_pre_session_routes():
    """docs/security.md: a tighter stage-wide throttle on each of the seven pre-session routes. Each setting names a
    POST method the API has, so API Gateway applies it (with `/v1/auth/{proxy+}` alone it never did)."""
    cfn = transformed()
    paths = props(cfn["Resources"]["Api"])["Body"]["paths"]
    throttled = {
        s["ResourcePath"]: s
        for s in props(cfn["Resources"]["ApiStage"])["MethodSettings"]
        if s.get("ThrottlingRateLimit") == {"Ref": "AuthThrottleRateLimit"}
    }
    assert sorted(throttled) == sorted("/" + p.replace("/", "~1") for p in AUTH_ROUTES)
    for route in AUTH_ROUTES:
        setting = throttled["/" + route.replace("/", "~1")]
        assert setting["HttpMethod"] == "POST"
        assert setting["ThrottlingBurstLimit"] == {"Ref": "AuthThrottleBurstLimit"}
        assert "post" in paths[route] and "x-amazon-apigateway-any-method" in paths[route]  # other methods: 405
        assert paths[route]["post"]["security"] == [{"CredentialAuthorizer": []}]  # the platform key, as before


def test_an_unalarmed_dead_letter_queue_is_caught():
    cfn = transformed()
    del cfn["Resources"]["CdpSegmentEventsDLQAlarm"], cfn["Resources"]["UsageMeterDLQAlarm"]
    assert rules.dlq_alarms(cfn) == [
        "CdpSegmentEventsDLQ: dead-letter queue of CdpSegmentEventsQueue, and no alarm watches its depth",
        "UsageMeterDLQ: on-failure destination of UsageMeterFunctionUsageStream, and no alarm watches its depth",
    ]


def test_a_function_without_its_log_group_or_retention_is_caught():
    cfn = transformed()
    del cfn["Resources"]["DeployGuardLogGroup"]
    del props(cfn["Resources"]["IdentityFunctionLogGroup"])["RetentionInDays"]
    del cfn["Resources"]["JobsFunctionLogGroup"]
    found = rules.log_groups(cfn)
    assert [f.split(":")[0] for f in found] == ["DeployGuardFunction", "IdentityFunction", "JobsFunction"]
    assert "no RetentionInDays" in found[1]


def test_the_deploy_guard_logs_to_its_own_group_with_retention():
    cfn = transformed()
    config = props(cfn["Resources"]["DeployGuardFunction"])["LoggingConfig"]
    group = props(cfn["Resources"][config["LogGroup"]["Ref"]])
    assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    # it runs while the stack deploys: the function depends on its group (Ref), so the group exists first
    assert cfn["Resources"][config["LogGroup"]["Ref"]]["Type"] == "AWS::Logs::LogGroup"


def test_a_visibility_timeout_below_six_times_the_consumer_is_caught():
    cfn = transformed()
    props(cfn["Resources"]["JobsQueue"])["VisibilityTimeout"] = 719
    props(cfn["Resources"]["CloudWebhookFunctionChanges"])["MaximumBatchingWindowInSeconds"] = 5
    found = rules.queue_visibility(cfn)
    assert [f.split(":")[0] for f in found] == ["CloudWebhookQueue", "JobsQueue"]
    assert "VisibilityTimeout 180 s < 185 s" in found[0] and "VisibilityTimeout 719 s < 720 s" in found[1]


def test_a_consumer_missing_from_the_error_alarms_is_caught():
    cfn = transformed()
    alarm = props(cfn["Resources"]["ConsumerErrorsAlarm"])
    alarm["Metrics"] = [m for m in alarm["Metrics"] if m["Id"] not in ("meter", "segments")]
    assert rules.consumer_error_alarms(cfn) == [
        "CdpSegmentsFunction: a stream/queue consumer whose Lambda Errors no alarm watches",
        "UsageMeterFunction: a stream/queue consumer whose Lambda Errors no alarm watches",
    ]


def test_the_consumer_error_alarm_adds_up_every_metric_it_reads():
    alarm = props(transformed()["Resources"]["ConsumerErrorsAlarm"])
    [expression] = [m["Expression"] for m in alarm["Metrics"] if "Expression" in m]
    ids = {m["Id"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert set(re.findall(r"\w+", expression)) == ids
    assert len(alarm["Metrics"]) <= 10  # CloudWatch's limit of metrics in an alarm's math


def test_an_alarm_on_the_authorizers_raw_errors_is_caught():
    cfn = transformed()
    cfn["Resources"]["OldAuthorizerAlarm"] = {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "Namespace": "AWS/Lambda",
            "MetricName": "Errors",
            "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": "AuthorizerFunction"}}],
        },
    }
    del cfn["Resources"]["AuthorizerUnavailableMetricFilter"]
    found = rules.authorizer_alarms(cfn)
    assert len(found) == 2
    assert found[0].startswith("OldAuthorizerAlarm: alarms on AuthorizerFunction's Lambda Errors")
    assert found[1].startswith("no alarm counts the requests the gateway answered with AUTHORIZER_CONFIGURATION_ERROR")


# The authorizer alarm counts what clients saw, not refused credentials ---------------------------------------------
def _access_log_line(cfn: dict[str, Any], context: dict[str, str]) -> str:
    """One access log line as API Gateway writes it with the stage's Format: `$context.x` substituted ("-" when
    the request has no such value)."""
    fmt = props(cfn["Resources"]["ApiStage"])["AccessLogSetting"]["Format"]
    return re.sub(r"\$context\.([A-Za-z0-9_.]+)", lambda m: context.get(m.group(1), "-"), fmt)


def _filter_matches(pattern: str, line: str) -> bool:
    """CloudWatch Logs' JSON filter pattern `{ ($.a = "x") || ($.b = "y") ... }`, the only form this alarm's filter
    may take (anything else fails here rather than being half understood)."""
    body = re.fullmatch(r"\{\s*(.*?)\s*\}", pattern.strip())
    assert body, pattern
    event = json.loads(line)
    outcome = False
    for term in body.group(1).split("||"):
        match = re.fullmatch(r'\s*\(?\s*\$\.([\w.]+)\s*=\s*"([^"*]*)"\s*\)?\s*', term)
        assert match, f"unsupported term {term!r} in {pattern}"
        value: Any = event
        for key in match.group(1).split("."):
            value = value.get(key) if isinstance(value, dict) else None
        outcome = outcome or value == match.group(2)
    return outcome


@pytest.mark.parametrize(
    ("response_type", "counted"),
    [
        ("AUTHORIZER_CONFIGURATION_ERROR", True),  # the authorizer raised, timed out or was throttled: a 503
        ("AUTHORIZER_FAILURE", True),
        ("UNAUTHORIZED", False),  # a wrong key: the authorizer raised "Unauthorized", a Lambda error all the same
        ("ACCESS_DENIED", False),
        (None, False),  # a request that went through
    ],
)
def test_the_authorizer_alarm_counts_authorizer_failures_and_not_refused_credentials(response_type, counted):
    cfn = transformed()
    [(alarm, pattern)] = rules.authorizer_failure_alarms(cfn)
    assert alarm == "AuthorizerErrorsAlarm"
    context = {"requestId": "r-1", "status": "503" if counted else "401", "authorizer.error": "x"}
    if response_type:
        context["error.responseType"] = response_type
    assert _filter_matches(pattern, _access_log_line(cfn, context)) is counted
    metric_filter = props(cfn["Resources"]["AuthorizerUnavailableMetricFilter"])
    assert metric_filter["LogGroupName"] == {"Ref": "ApiAccessLogGroup"}
    assert [(t["MetricName"], t["MetricValue"]) for t in metric_filter["MetricTransformations"]] == [
        ("AuthorizerUnavailable", "1")
    ]


def test_the_dashboard_lists_every_alarm():
    cfn = transformed()
    body = json.dumps(props(cfn["Resources"]["Dashboard"])["DashboardBody"])
    assert set(re.findall(r"\$\{(\w+Alarm)\.Arn\}", body)) == set(resources(cfn, "AWS::CloudWatch::Alarm"))


def test_the_transform_is_the_one_cloudformation_runs():
    """SAM's own expansion: the functions, their permissions and mappings exist only after the transform."""
    cfn = transformed()
    assert "Transform" not in cfn
    assert not resources(cfn, "AWS::Serverless::Function")
    assert {"IdentityFunction", "DeployGuardFunction", "AuthorizerFunction"} <= set(
        resources(cfn, "AWS::Lambda::Function")
    )
    assert "AuthorizerFunction" in rules.api_functions(cfn) and "JobsFunction" not in rules.api_functions(cfn)
    assert rules.consumers(cfn) >= {"UsageMeterFunction", "CdpSegmentsFunction", "EventPublisherFunction"}


def test_the_local_gateway_routes_the_auth_routes_as_api_gateway_will():
    """local/template.py reads the new events and the local gateway's routing agrees with the deployed resources:
    POST to the throttled method, other methods to the ANY beside it (the function answers 405), the rest of
    /v1/auth/ to the greedy resource."""
    from local.gateway import RouteTable
    from local.template import load_template

    routes = RouteTable.from_template(load_template())
    for path in AUTH_ROUTES:
        post, _ = routes.match("POST", path)
        other, _ = routes.match("GET", path)
        assert (post.resource, post.method, post.function) == (path, "POST", "IdentityFunction")
        assert (other.resource, other.method, other.function) == (path, "ANY", "IdentityFunction")
        assert post.authorizer == other.authorizer == "CredentialAuthorizer"
    logout, params = routes.match("POST", "/v1/auth/logout")
    assert (logout.resource, params) == ("/v1/auth/{proxy+}", {"proxy": "logout"})
