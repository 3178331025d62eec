"""The local stack's own machinery, in-process: template loading, routing precedence, the gateway's authorizer and
proxy handling, the per-function instance pools, event filter patterns, resource creation from template.yaml, and
the event source pollers' batch semantics (on moto's `mock_aws`, with throwaway handlers)."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import httpx
import pytest
from moto import mock_aws

from local.functions import FunctionPool, FunctionRegistry
from local.gateway import Gateway, RouteTable, policy_effect
from local.moto_server import patch_transactions, unpatch_transactions
from local.patterns import matches, matches_any
from local.pollers import SqsPoller, StreamPoller
from local.resources import create_resources
from local.template import FunctionSpec, SqsEvent, StreamEvent, load_template, parse_yaml
from tests.e2e import recorder

pytestmark = pytest.mark.e2e

# A small SAM template exercising the gateway: an authorizer, static / variable / greedy routes, a public route.
SYNTHETIC_TEMPLATE = """
Transform: AWS::Serverless-2016-10-31
Parameters:
  Stage: {Type: String, Default: dev}
  Greeting: {Type: String, Default: hello}
Mappings:
  StageConfig:
    local: {Mode: test}
    dev: {Mode: live}
Conditions:
  IsLocal: !Equals [!Ref Stage, local]
Globals:
  Function:
    Timeout: 5
    MemorySize: 256
    Environment:
      Variables:
        STAGE: !Ref Stage
        GREETING: !Sub '${Greeting}-${Stage}'
        MODE: !FindInMap [StageConfig, !Ref Stage, Mode]
        ONLY_LOCAL: !If [IsLocal, 'yes', 'no']
Resources:
  Api:
    Type: AWS::Serverless::Api
    Properties:
      StageName: !Ref Stage
      Auth:
        DefaultAuthorizer: TokenCheck
        Authorizers:
          TokenCheck:
            FunctionArn: !GetAtt AuthFn.Arn
            FunctionPayloadType: REQUEST
  AuthFn:
    Type: AWS::Serverless::Function
    Properties: {CodeUri: fns/auth/, Handler: app.handler}
  EchoFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: fns/echo/
      Handler: app.handler
      Timeout: 7
      Environment:
        Variables:
          OWN: mine
      Events:
        ThingById: {Type: Api, Properties: {RestApiId: !Ref Api, Path: '/things/{id}', Method: GET}}
        ThingsProxy: {Type: Api, Properties: {RestApiId: !Ref Api, Path: '/things/{proxy+}', Method: ANY}}
        Special: {Type: Api, Properties: {RestApiId: !Ref Api, Path: /things/special, Method: ANY}}
        Open: {Type: Api, Properties: {RestApiId: !Ref Api, Path: /open, Method: ANY, Auth: {Authorizer: NONE}}}
  OtherFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: fns/other/
      Handler: app.handler
      Events:
        SpecialPost: {Type: Api, Properties: {RestApiId: !Ref Api, Path: /things/special, Method: POST}}
  OnlyInProd:
    Type: AWS::SQS::Queue
    Condition: IsLocal
  GatewayResponseUnauthorized:
    Type: AWS::ApiGateway::GatewayResponse
    Properties:
      RestApiId: !Ref Api
      ResponseType: UNAUTHORIZED
      StatusCode: '401'
      ResponseParameters:
        gatewayresponse.header.Content-Type: "'application/json'"
        gatewayresponse.header.WWW-Authenticate: "'Bearer'"
      ResponseTemplates:
        application/json: '{"error":{"code":"unauthenticated","message":"no","request_id":"$context.requestId"}}'
  GatewayResponseAuthorizerConfiguration:
    Type: AWS::ApiGateway::GatewayResponse
    Properties:
      RestApiId: !Ref Api
      ResponseType: AUTHORIZER_CONFIGURATION_ERROR
      StatusCode: '503'
      ResponseParameters:
        gatewayresponse.header.Retry-After: "'1'"
      ResponseTemplates:
        application/json: '{"error":{"code":"authorizer_unavailable","request_id":"$context.requestId"}}'
  GatewayResponseDefault5xx:
    Type: AWS::ApiGateway::GatewayResponse
    Properties:
      RestApiId: !Ref Api
      ResponseType: DEFAULT_5XX
      ResponseTemplates:
        application/json: >-
          {"error":{"code":"internal_error","message":"$context.error.message","details":[],
          "request_id":"$context.requestId"}}
"""

AUTH_HANDLER = """
def handler(event, context):
    token = (event.get("headers") or {}).get("x-token", "")
    if token == "allow":
        arn = event["methodArn"].split("/")
        resource = "/".join(arn[:2]) + "/*/*"
        return {
            "principalId": "p-1",
            "policyDocument": {"Version": "2012-10-17", "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": resource}]},
            "context": {"org": "org_1", "count": 3, "flag": True},
        }
    if token == "deny":
        return {"principalId": "p-1", "policyDocument": {"Version": "2012-10-17", "Statement": [
            {"Action": "execute-api:Invoke", "Effect": "Deny", "Resource": event["methodArn"]}]}}
    if token == "boom":
        raise RuntimeError("authorizer bug")
    if token == "bad":
        return {"nope": True}
    raise Exception("Unauthorized")
"""

ECHO_HANDLER = """
import base64, json, time
from tests.e2e import recorder

_busy = False

def handler(event, context):
    global _busy
    mode = (event.get("queryStringParameters") or {}).get("mode")
    if mode == "crash":
        raise ValueError("handler bug")
    if mode == "malformed":
        return {"body": {"not": "a string"}}
    if mode == "binary":
        return {"statusCode": 200, "headers": {"Content-Type": "application/octet-stream"},
                "body": base64.b64encode(b"\\x00\\x01").decode(), "isBase64Encoded": True}
    if mode == "sized":  # a proxy result whose JSON (json.dumps, as the runtime writes it) is exactly `size` bytes
        size = int(event["queryStringParameters"]["size"])
        shell = {"statusCode": 200, "body": ""}
        return {**shell, "body": "x" * (size - len(json.dumps(shell)))}
    if mode == "sleep":
        if _busy:
            recorder.record("overlap", __name__)
        _busy = True
        try:
            recorder.record("instance", __name__)
            time.sleep(0.2)
        finally:
            _busy = False
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json", "X-Fn": "echo"},
        "multiValueHeaders": {"Set-Cookie": ["a=1", "b=2"]},
        "body": json.dumps({"event": event, "remaining": context.get_remaining_time_in_millis(),
                            "function": context.function_name, "memory": context.memory_limit_in_mb}),
    }
"""

OTHER_HANDLER = """
import json

def handler(event, context):
    return {"statusCode": 201, "body": json.dumps({"function": "other", "resource": event["resource"]})}
"""


def write_app(root: Path, code_dir: str, source: str) -> None:
    target = root / code_dir
    target.mkdir(parents=True, exist_ok=True)
    (target / "app.py").write_text(textwrap.dedent(source))


@pytest.fixture
def synthetic(tmp_path):
    (tmp_path / "template.yaml").write_text(SYNTHETIC_TEMPLATE)
    write_app(tmp_path, "fns/auth", AUTH_HANDLER)
    write_app(tmp_path, "fns/echo", ECHO_HANDLER)
    write_app(tmp_path, "fns/other", OTHER_HANDLER)
    recorder.reset()
    template = load_template(tmp_path / "template.yaml", stage="local")
    pools = {
        spec.logical_id: FunctionPool(
            spec, root=tmp_path, size=4, function_name=f"fn-{spec.logical_id}", function_arn=f"arn:fn:{spec.logical_id}"
        )
        for spec in template.functions
    }
    executor = ThreadPoolExecutor(max_workers=32)
    gateway = Gateway(template, FunctionRegistry(pools), executor=executor, mail_reader=lambda to: [{"to": to}])
    yield gateway
    executor.shutdown(wait=True)


def send(gateway: Gateway, *requests: tuple[str, str, dict]) -> list[httpx.Response]:
    """Send the requests concurrently through the ASGI app."""

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=gateway, client=("203.0.113.9", 1234))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:3000") as client:
            return await asyncio.gather(*(client.request(m, p, **kw) for m, p, kw in requests))

    return asyncio.run(run())


def one(gateway: Gateway, method: str, path: str, **kwargs) -> httpx.Response:
    return send(gateway, (method, path, kwargs))[0]


ALLOW = {"headers": {"x-token": "allow"}}


# Template ---------------------------------------------------------------------------------------------------------
def test_yaml_short_forms_become_long_forms():
    doc = parse_yaml("A: !Ref X\nB: !GetAtt T.StreamArn\nC: !Sub 'x-${Y}'\nD: !If [C, 1, 2]\nE: 2010-09-09\n")
    assert doc == {
        "A": {"Ref": "X"},
        "B": {"Fn::GetAtt": ["T", "StreamArn"]},
        "C": {"Fn::Sub": "x-${Y}"},
        "D": {"Fn::If": ["C", 1, 2]},
        "E": "2010-09-09",
    }


def test_synthetic_template_specs(synthetic):
    template = synthetic.template
    echo = template.function("EchoFn")
    assert echo.module == "fns.echo.app" and echo.handler == "handler"
    assert (echo.timeout, echo.memory) == (7, 256)
    env = template.resolve(echo.environment)
    assert env == {"STAGE": "local", "GREETING": "hello-local", "MODE": "test", "ONLY_LOCAL": "yes", "OWN": "mine"}
    assert [(e.method, e.path, e.auth_none) for e in echo.api_events] == [
        ("GET", "/things/{id}", False),
        ("ANY", "/things/{proxy+}", False),
        ("ANY", "/things/special", False),
        ("ANY", "/open", True),
    ]
    assert template.authorizers["TokenCheck"].function == "AuthFn"
    assert template.gateway_responses["UNAUTHORIZED"].status_code == 401
    assert template.gateway_responses["DEFAULT_5XX"].status_code is None
    assert "OnlyInProd" in template.resources
    assert "OnlyInProd" not in load_template(template.path, stage="dev").resources


def test_project_template_functions():
    template = load_template()
    system = template.function("SystemFunction")
    assert system.module == "functions.system.app"
    assert {(e.method, e.path) for e in system.api_events} >= {("ANY", "/v1/health"), ("ANY", "/openapi.json")}
    assert all(e.auth_none for e in system.api_events)
    publisher = template.function("EventPublisherFunction")
    (stream,) = publisher.stream_events
    assert stream.table == "Table" and stream.report_batch_item_failures
    assert matches_any(stream.filters, {"eventName": "INSERT", "dynamodb": {"Keys": {"SK": {"S": "EVENT#01"}}}})
    assert not matches_any(stream.filters, {"eventName": "REMOVE", "dynamodb": {"Keys": {"SK": {"S": "EVENT#01"}}}})
    assert not matches_any(stream.filters, {"eventName": "INSERT", "dynamodb": {"Keys": {"SK": {"S": "ORG"}}}})
    for response_type in ("UNAUTHORIZED", "MISSING_AUTHENTICATION_TOKEN", "DEFAULT_5XX", "REQUEST_TOO_LARGE"):
        assert "application/json" in template.gateway_responses[response_type].templates


# Routing ----------------------------------------------------------------------------------------------------------
def test_route_precedence(synthetic):
    routes = RouteTable.from_template(synthetic.template)

    def target(method, path):
        found = routes.match(method, path)
        return None if found is None else (found[0].function, found[0].resource, found[1])

    assert target("GET", "/things/special") == ("EchoFn", "/things/special", {})
    assert target("POST", "/things/special") == ("OtherFn", "/things/special", {})
    assert target("GET", "/things/42") == ("EchoFn", "/things/{id}", {"id": "42"})
    assert target("POST", "/things/42") is None  # the {id} resource has no POST; no fallback to {proxy+}
    assert target("GET", "/things/42/parts/7") == ("EchoFn", "/things/{proxy+}", {"proxy": "42/parts/7"})
    assert target("GET", "/things") is None
    assert target("GET", "/open/") == ("EchoFn", "/open", {})
    assert target("GET", "/nowhere") is None


def test_policy_effect():
    arn = "arn:aws:execute-api:us-east-1:000000000000:local/local/GET/v1/x"
    allow = {"Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": "arn:*:local/local/*/*"}]}
    deny = {"Statement": [*allow["Statement"], {"Action": "*", "Effect": "Deny", "Resource": arn}]}
    assert policy_effect(allow, arn) == "Allow"
    assert policy_effect(deny, arn) == "Deny"
    assert policy_effect({"Statement": []}, arn) is None


# Gateway ----------------------------------------------------------------------------------------------------------
def test_proxy_event_and_result(synthetic):
    response = one(
        synthetic, "POST", "/things/a/b", params=[("q", "1"), ("q", "2")], json={"x": 1}, headers={"x-token": "allow"}
    )
    assert response.status_code == 200
    assert response.headers["x-fn"] == "echo"
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    payload = response.json()
    event = payload["event"]
    assert event["resource"] == "/things/{proxy+}"
    assert event["path"] == "/things/a/b"
    assert event["httpMethod"] == "POST"
    assert event["pathParameters"] == {"proxy": "a/b"}
    assert event["queryStringParameters"] == {"q": "2"}
    assert event["multiValueQueryStringParameters"] == {"q": ["1", "2"]}
    assert json.loads(event["body"]) == {"x": 1} and event["isBase64Encoded"] is False
    assert event["headers"]["X-Forwarded-For"] == "203.0.113.9"
    context = event["requestContext"]
    assert context["stage"] == "local" and context["resourcePath"] == "/things/{proxy+}"
    assert context["requestId"] == response.headers["x-amzn-requestid"]
    assert context["identity"]["sourceIp"] == "203.0.113.9"
    assert context["authorizer"]["principalId"] == "p-1"
    assert context["authorizer"]["org"] == "org_1"
    assert context["authorizer"]["count"] == "3" and context["authorizer"]["flag"] == "true"
    assert payload["function"] == "fn-EchoFn" and payload["memory"] == 256
    assert 0 < payload["remaining"] <= 7000


def test_public_route_skips_the_authorizer(synthetic):
    response = one(synthetic, "GET", "/open")
    assert response.status_code == 200
    assert "authorizer" not in response.json()["event"]["requestContext"]


@pytest.mark.parametrize(
    ("token", "status", "code"),
    [
        (None, 401, "unauthenticated"),
        ("nonsense", 401, "unauthenticated"),
        ("deny", 403, "forbidden"),
        ("boom", 503, "authorizer_unavailable"),  # raised: AUTHORIZER_CONFIGURATION_ERROR, as on AWS
        ("bad", 503, "authorizer_unavailable"),  # a malformed answer: the same
    ],
)
def test_authorizer_outcomes(synthetic, token, status, code):
    headers = {"x-token": token} if token else {}
    response = one(synthetic, "GET", "/things/1", headers=headers)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert error["request_id"] == response.headers["x-amzn-requestid"]
    if status == 401:
        assert response.headers["www-authenticate"] == "Bearer"  # the template's ResponseParameters
    if status == 503:
        assert response.headers["retry-after"] == "1"
        assert response.headers["x-amzn-errortype"] == "AuthorizerConfigurationException"


def test_unknown_route_uses_builtin_envelope_when_the_template_has_none(synthetic):
    response = one(synthetic, "GET", "/nowhere")
    assert response.status_code == 403  # API Gateway's default status for MISSING_AUTHENTICATION_TOKEN
    assert response.json()["error"]["code"] == "route_not_found"


@pytest.mark.parametrize("mode", ["crash", "malformed"])
def test_handler_failure_is_a_default_5xx(synthetic, mode):
    response = one(synthetic, "GET", "/things/1", params={"mode": mode}, **ALLOW)
    assert response.status_code == 502
    assert response.json()["error"] == {
        "code": "internal_error",
        "message": "Internal server error",
        "details": [],
        "request_id": response.headers["x-amzn-requestid"],
    }


def test_a_result_over_lambdas_6_mb_response_limit_is_a_502(synthetic):
    """Lambda hands back at most 6,291,556 bytes of a synchronous invocation's result (its JSON); over it, the
    runtime fails the invocation and API Gateway answers 502 (INTEGRATION_FAILURE, here through DEFAULT_5XX)."""
    at_limit = one(synthetic, "GET", "/things/1", params={"mode": "sized", "size": "6291556"}, **ALLOW)
    assert at_limit.status_code == 200 and len(at_limit.content) == 6291556 - len('{"statusCode": 200, "body": ""}')
    over = one(synthetic, "GET", "/things/1", params={"mode": "sized", "size": "6291557"}, **ALLOW)
    assert over.status_code == 502
    assert over.json()["error"] == {
        "code": "internal_error",
        "message": "Internal server error",
        "details": [],
        "request_id": over.headers["x-amzn-requestid"],
    }
    assert over.headers["x-amzn-errortype"] == "InternalServerErrorException"


def test_base64_result_is_decoded(synthetic):
    response = one(synthetic, "GET", "/things/1", params={"mode": "binary"}, **ALLOW)
    assert response.content == b"\x00\x01"


def test_body_over_the_limit(synthetic):
    synthetic.max_body_bytes = 1000
    response = one(synthetic, "POST", "/open", content=b"x" * 1001)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_local_routes(synthetic):
    assert one(synthetic, "GET", "/_local/mail", params={"to": "a@b.c"}).json() == {"data": [{"to": "a@b.c"}]}
    assert one(synthetic, "GET", "/docs").headers["content-type"].startswith("text/html")
    assert one(synthetic, "POST", "/_local/mail").status_code == 403


def test_instances_serve_one_request_at_a_time_and_requests_run_in_parallel(synthetic):
    started = time.perf_counter()
    responses = send(synthetic, *[("GET", "/things/1", {"params": {"mode": "sleep"}, **ALLOW}) for _ in range(8)])
    elapsed = time.perf_counter() - started
    assert [r.status_code for r in responses] == [200] * 8
    assert recorder.of("overlap") == []
    assert len(set(recorder.of("instance"))) == 4  # the pool size
    assert elapsed < 1.3  # two waves of 0.2 s on 4 instances, not 8 x 0.2 s


# Event patterns ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "event", "expected"),
    [
        ({"source": ["switchboard"]}, {"source": "switchboard"}, True),
        ({"source": ["switchboard"]}, {"source": "other"}, False),
        ({"detail-type": [{"anything-but": ["message.queued"]}]}, {"detail-type": "contact.created"}, True),
        ({"detail-type": [{"anything-but": ["message.queued"]}]}, {"detail-type": "message.queued"}, False),
        ({"detail-type": [{"anything-but": {"prefix": "message."}}]}, {"detail-type": "message.sent"}, False),
        ({"a": {"b": [{"prefix": "EVENT#"}]}}, {"a": {"b": "EVENT#1"}}, True),
        ({"a": {"b": [{"prefix": "EVENT#"}]}}, {"a": {"b": "CONTACT#1"}}, False),
        ({"a": [{"exists": True}]}, {"a": 1}, True),
        ({"a": [{"exists": False}]}, {"b": 1}, True),
        ({"a": [{"exists": False}]}, {"a": 1}, False),
        ({"n": [{"numeric": [">", 0, "<=", 5]}]}, {"n": 5}, True),
        ({"n": [{"numeric": [">", 0, "<=", 5]}]}, {"n": 6}, False),
        ({"tags": ["x"]}, {"tags": ["y", "x"]}, True),
        ({"s": [{"suffix": ".png"}]}, {"s": "a.png"}, True),
        ({"s": [{"equals-ignore-case": "ABC"}]}, {"s": "abc"}, True),
        ({"s": [{"wildcard": "a*c"}]}, {"s": "abbc"}, True),
        ({"s": [None]}, {"s": None}, True),
        ({"missing": ["x"]}, {}, False),
    ],
)
def test_event_patterns(pattern, event, expected):
    assert matches(pattern, event) is expected


# Resources --------------------------------------------------------------------------------------------------------
def test_resources_follow_the_template_and_the_rules_route_events():
    template = load_template()
    with mock_aws():
        resources = create_resources(template, prefix="sb-test")
        table = boto3.client("dynamodb").describe_table(TableName=resources.table_name())["Table"]
        props = template.resources["Table"]["Properties"]
        assert table["KeySchema"] == props["KeySchema"]
        assert {g["IndexName"] for g in table["GlobalSecondaryIndexes"]} == {
            g["IndexName"] for g in props["GlobalSecondaryIndexes"]
        }
        assert table["StreamSpecification"]["StreamViewType"] == props["StreamSpecification"]["StreamViewType"]
        ttl = boto3.client("dynamodb").describe_time_to_live(TableName=resources.table_name())
        assert ttl["TimeToLiveDescription"]["AttributeName"] == props["TimeToLiveSpecification"]["AttributeName"]

        env = resources.function_env(template.function("SystemFunction"))
        assert env["TABLE_NAME"] == resources.table_name()
        assert env["WEBHOOK_EVENTS_QUEUE_URL"] == resources.queue_url("WebhookEventsQueue")
        assert env["STAGE"] == "local" and env["API_KEY_MODE"] == "test"
        assert "CURSOR_SECRET" not in env  # the functions get the platform secret's ARN and read it at run time
        stored = boto3.client("secretsmanager").get_secret_value(SecretId=env["CURSOR_SECRET_ARN"])
        assert stored["ARN"] == env["CURSOR_SECRET_ARN"] and len(stored["SecretString"]) == 64

        sqs = boto3.client("sqs")
        redrive = json.loads(
            sqs.get_queue_attributes(QueueUrl=resources.queue_url("WebhookEventsQueue"), AttributeNames=["All"])[
                "Attributes"
            ]["RedrivePolicy"]
        )
        assert redrive["deadLetterTargetArn"] == resources.queue_arn("WebhookEventsDLQ")

        boto3.client("events").put_events(
            Entries=[
                {"Source": "switchboard", "DetailType": t, "Detail": "{}", "EventBusName": env["EVENT_BUS_NAME"]}
                for t in ("contact.created", "message.queued")
            ]
        )

        def types(queue: str) -> list[str]:
            msgs = sqs.receive_message(QueueUrl=resources.queue_url(queue), MaxNumberOfMessages=10).get("Messages")
            return [json.loads(m["Body"])["detail-type"] for m in msgs or []]

        assert types("WebhookEventsQueue") == ["contact.created"]
        assert types("OutboundMessagesQueue") == ["message.queued"]


def test_cancelled_transaction_keeps_the_stream_and_rolls_back():
    """moto's own rollback swaps the table object and detaches open stream iterators; the local patch does not."""
    template = load_template()
    patch_transactions()
    try:
        with mock_aws():
            resources = create_resources(template, prefix="sb-tx")
            ddb, streams = boto3.client("dynamodb"), boto3.client("dynamodbstreams")
            name = resources.table_name()
            arn = resources.stream_arn()
            shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
            iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")[
                "ShardIterator"
            ]
            ddb.put_item(TableName=name, Item={"PK": {"S": "A"}, "SK": {"S": "1"}, "v": {"N": "1"}})
            with pytest.raises(ddb.exceptions.TransactionCanceledException):
                ddb.transact_write_items(
                    TransactItems=[
                        {
                            "Update": {
                                "TableName": name,
                                "Key": {"PK": {"S": "A"}, "SK": {"S": "1"}},
                                "UpdateExpression": "SET v = :two",
                                "ExpressionAttributeValues": {":two": {"N": "2"}},
                            }
                        },
                        {"Put": {"TableName": name, "Item": {"PK": {"S": "A"}, "SK": {"S": "new"}}}},
                        {
                            "ConditionCheck": {
                                "TableName": name,
                                "Key": {"PK": {"S": "A"}, "SK": {"S": "missing"}},
                                "ConditionExpression": "attribute_exists(PK)",
                            }
                        },
                    ]
                )
            assert ddb.get_item(TableName=name, Key={"PK": {"S": "A"}, "SK": {"S": "1"}})["Item"]["v"] == {"N": "1"}
            assert "Item" not in ddb.get_item(TableName=name, Key={"PK": {"S": "A"}, "SK": {"S": "new"}})
            ddb.put_item(TableName=name, Item={"PK": {"S": "A"}, "SK": {"S": "2"}})
            records = streams.get_records(ShardIterator=iterator)["Records"]
            assert [r["dynamodb"]["Keys"]["SK"]["S"] for r in records] == ["1", "2"]
    finally:
        unpatch_transactions()


# Pollers ----------------------------------------------------------------------------------------------------------
SQS_HANDLER = """
from tests.e2e import recorder

def handler(event, context):
    failures = []
    for record in event["Records"]:
        recorder.record("sqs", record)
        if record["body"] == "crash":
            raise RuntimeError("consumer bug")
        if record["body"] == "poison":
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
"""

STREAM_HANDLER = """
from tests.e2e import recorder

def handler(event, context):
    keys = [r["dynamodb"]["Keys"]["SK"]["S"] for r in event["Records"]]
    recorder.record("batch", keys)
    recorder.record("records", event["Records"])
    failures = []
    for record in event["Records"]:
        sk = record["dynamodb"]["Keys"]["SK"]["S"]
        seen = recorder.state.setdefault(sk, 0)
        recorder.state[sk] = seen + 1
        if sk == "EVENT#2" and (seen == 0 or recorder.state.get("always_fail")):
            failures.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
    return {"batchItemFailures": failures}
"""


def _pool(tmp_path: Path, name: str, source: str) -> FunctionPool:
    write_app(tmp_path, f"fns/{name}", source)
    spec = FunctionSpec(
        logical_id=name,
        code_dir=Path(f"fns/{name}"),
        module=f"fns.{name}.app",
        handler="handler",
        timeout=5,
        memory=128,
        environment={},
    )
    return FunctionPool(spec, root=tmp_path, size=2, function_name=name, function_arn=f"arn:aws:lambda:::{name}")


def wait_until(predicate, timeout: float = 8.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def test_sqs_poller_deletes_successes_and_redrives_failures(tmp_path):
    recorder.reset()
    pool = _pool(tmp_path, "consumer", SQS_HANDLER)
    stop = threading.Event()
    with mock_aws(), ThreadPoolExecutor(4) as executor:
        sqs = boto3.client("sqs", region_name="us-east-1")
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
        url = sqs.create_queue(QueueName="work", Attributes={"VisibilityTimeout": "0", "RedrivePolicy": redrive})[
            "QueueUrl"
        ]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sqs.send_message(
            QueueUrl=url, MessageBody="a", MessageAttributes={"kind": {"DataType": "String", "StringValue": "k"}}
        )
        for body in ("b", "poison", "crash"):
            sqs.send_message(QueueUrl=url, MessageBody=body)
        mapping = SqsEvent(
            name="Q", queue="work", batch_size=1, report_batch_item_failures=True, maximum_batching_window=0
        )
        poller = SqsPoller(
            pool=pool,
            mapping=mapping,
            queue_url=url,
            queue_arn=arn,
            sqs_client=sqs,
            executor=executor,
            concurrency=1,
            stop=stop,
        )
        poller.start()
        try:

            def dead_letters() -> list[str]:
                msgs = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, VisibilityTimeout=0)
                return sorted(m["Body"] for m in msgs.get("Messages", []))

            assert wait_until(lambda: dead_letters() == ["crash", "poison"])
            assert wait_until(lambda: sorted(r["body"] for r in recorder.of("sqs")).count("poison") == 2)
        finally:
            stop.set()
            poller.join(5)
        assert not poller.is_alive()
        bodies = [r["body"] for r in recorder.of("sqs")]
        assert bodies.count("a") == 1 and bodies.count("b") == 1
        assert bodies.count("poison") == 2 and bodies.count("crash") == 2
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert attrs["ApproximateNumberOfMessages"] == "0" and attrs["ApproximateNumberOfMessagesNotVisible"] == "0"
        record = next(r for r in recorder.of("sqs") if r["body"] == "a")
        assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"] == arn
        assert record["awsRegion"] == "us-east-1" and record["md5OfBody"]
        assert record["attributes"]["ApproximateReceiveCount"] == "1"
        assert record["messageAttributes"]["kind"]["stringValue"] == "k"
        assert record["messageAttributes"]["kind"]["dataType"] == "String"


def _stream_setup(tmp_path: Path, *, max_retries: int):
    sqs = boto3.client("sqs", region_name="us-east-1")
    failures_url = sqs.create_queue(QueueName="stream-failures")["QueueUrl"]
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName="t",
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    stream_arn = ddb.describe_table(TableName="t")["Table"]["LatestStreamArn"]
    for sk in ("EVENT#1", "NOTE#x", "EVENT#2", "EVENT#3"):
        ddb.put_item(TableName="t", Item={"PK": {"S": "ORG#1"}, "SK": {"S": sk}})
    mapping = StreamEvent(
        name="S",
        table="t",
        batch_size=10,
        report_batch_item_failures=True,
        starting_position="TRIM_HORIZON",
        filters=({"eventName": ["INSERT"], "dynamodb": {"Keys": {"SK": {"S": [{"prefix": "EVENT#"}]}}}},),
        maximum_retry_attempts=max_retries,
        on_failure="StreamFailures",
    )
    stop = threading.Event()
    poller = StreamPoller(
        pool=_pool(tmp_path, "streamer", STREAM_HANDLER),
        mapping=mapping,
        stream_arn=stream_arn,
        streams_client=boto3.client("dynamodbstreams", region_name="us-east-1"),
        sqs_client=sqs,
        on_failure_url=failures_url,
        stop=stop,
    )
    return poller, stop, sqs, failures_url, stream_arn


def test_stream_poller_filters_and_retries_from_the_lowest_failure(tmp_path):
    recorder.reset()
    with mock_aws():
        poller, stop, _sqs, _url, stream_arn = _stream_setup(tmp_path, max_retries=3)
        poller.start()
        try:
            assert wait_until(lambda: len(recorder.of("batch")) >= 2)
            time.sleep(0.3)  # nothing else may arrive
        finally:
            stop.set()
            poller.join(5)
    assert recorder.of("batch") == [["EVENT#1", "EVENT#2", "EVENT#3"], ["EVENT#2", "EVENT#3"]]
    record = recorder.of("records")[0][0]
    assert record["eventName"] == "INSERT" and record["eventVersion"] == "1.1"
    assert record["eventSource"] == "aws:dynamodb" and record["eventSourceARN"] == stream_arn
    assert isinstance(record["dynamodb"]["ApproximateCreationDateTime"], int)
    assert record["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert record["dynamodb"]["NewImage"]["SK"] == {"S": "EVENT#1"}


def test_stream_poller_gives_up_after_the_retries_and_records_the_batch(tmp_path):
    recorder.reset()
    recorder.state["always_fail"] = True
    with mock_aws():
        poller, stop, sqs, failures_url, stream_arn = _stream_setup(tmp_path, max_retries=2)
        poller.start()
        try:
            assert wait_until(
                lambda: (
                    sqs.get_queue_attributes(QueueUrl=failures_url, AttributeNames=["ApproximateNumberOfMessages"])[
                        "Attributes"
                    ]["ApproximateNumberOfMessages"]
                    == "1"
                )
            )
        finally:
            stop.set()
            poller.join(5)
        failure = json.loads(sqs.receive_message(QueueUrl=failures_url)["Messages"][0]["Body"])
    assert recorder.of("batch") == [["EVENT#1", "EVENT#2", "EVENT#3"], ["EVENT#2", "EVENT#3"], ["EVENT#2", "EVENT#3"]]
    info = failure["DDBStreamBatchInfo"]
    assert info["batchSize"] == 2 and info["streamArn"] == stream_arn
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"


def test_a_failure_of_the_gateway_itself_is_still_an_envelope(synthetic):
    def broken(to):
        raise RuntimeError("mail store down")

    synthetic.mail_reader = broken
    response = one(synthetic, "GET", "/_local/mail")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
