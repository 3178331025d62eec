"""The IAM model of template.yaml (local/iam.py) and how calls map to IAM actions and ARNs (local/iam_recorder.py)."""

from __future__ import annotations

import copy

import pytest

from local.iam import PolicyModel, PolicyModelError, planned_resources, sam_transform
from local.iam_recorder import Need, needs
from local.template import load_template

ACCOUNT = "arn:aws:dynamodb:us-east-1:123456789012"


@pytest.fixture(scope="module")
def template():
    return load_template(stage="local")


@pytest.fixture(scope="module")
def model(template) -> PolicyModel:
    return PolicyModel.build(template)


@pytest.fixture(scope="module")
def arns(template):
    resources = planned_resources(template)
    return {
        "table": resources.getatt("Table", "Arn"),
        "deliveries": resources.getatt("DeliveriesTable", "Arn"),
        "jobs": resources.getatt("JobsQueue", "Arn"),
        "webhook_deliveries": resources.getatt("WebhookDeliveriesQueue", "Arn"),
        "bucket": resources.getatt("MediaBucket", "Arn"),
        "bus": resources.getatt("EventBus", "Arn"),
    }


def test_every_function_of_the_template_has_its_expanded_role_policies(template, model):
    assert set(model.functions) == {spec.logical_id for spec in template.functions} | {"DeployGuardFunction"}
    assert model.function_of("functions/cdp_segments") == "CdpSegmentsFunction"
    assert model.function_of("functions/deploy_guard/") == "DeployGuardFunction"


def test_sam_policy_templates_expand_to_the_table_its_indexes_and_nothing_else(model, arns):
    table, deliveries = arns["table"], arns["deliveries"]
    assert table == f"{ACCOUNT}:table/switchboard-local-Table"
    assert model.allowed("ContactsFunction", "dynamodb:Query", f"{table}/index/GSI1")
    assert model.allowed("ContactsFunction", "dynamodb:ConditionCheckItem", table)
    assert model.allowed("ContactsFunction", "DynamoDB:getitem", table)  # actions are case-insensitive
    assert not model.allowed("ContactsFunction", "dynamodb:GetItem", deliveries)
    assert not model.allowed("ContactsFunction", "dynamodb:DeleteTable", table)
    # DynamoDBReadPolicy: reads only
    assert model.allowed("SystemFunction", "dynamodb:GetItem", table)
    assert not model.allowed("SystemFunction", "dynamodb:PutItem", table)


def test_wildcard_actions_and_resources_match_as_iam_matches_them(model, arns):
    # SQSSendMessagePolicy grants sqs:SendMessage* on one queue
    assert model.allowed("JobsFunction", "sqs:SendMessage", arns["jobs"])
    assert model.allowed("JobsFunction", "sqs:SendMessageBatch", arns["jobs"])
    assert not model.allowed("JobsFunction", "sqs:ReceiveMessage2", arns["jobs"] + "x")
    # S3CrudPolicy: the bucket and bucket/* (any key, slashes included)
    assert model.allowed("JobsFunction", "s3:DeleteObject", arns["bucket"] + "/media/org_1/ch_1/m1")
    # a prefix grant covers its prefix only
    assert model.allowed("GroupsFunction", "s3:GetObject", arns["bucket"] + "/assets/org_1/asset_1")
    assert not model.allowed("GroupsFunction", "s3:GetObject", arns["bucket"] + "/avatars/usr_1/a.png")
    assert not model.allowed("GroupsFunction", "s3:ListBucket", arns["bucket"])
    # managed policies SAM attaches: the SQS event source's, tracing's
    assert model.allowed("JobsFunction", "sqs:DeleteMessage", arns["jobs"])
    assert model.allowed("SystemFunction", "xray:PutTraceSegments", "*")
    assert model.allowed("EventPublisherFunction", "events:PutEvents", arns["bus"])


def _with_statement(template, function: str, statement: dict) -> dict:
    raw = copy.deepcopy(template.raw)
    raw["Resources"][function]["Properties"]["Policies"].append({"Statement": [statement]})
    return sam_transform(raw, template.parameters)


def test_an_explicit_deny_wins_and_a_conditional_allow_grants_nothing(template, arns):
    deny = {"Effect": "Deny", "Action": "dynamodb:Delete*", "Resource": "*"}
    model = PolicyModel.build(template, transformed_template=_with_statement(template, "ContactsFunction", deny))
    assert not model.allowed("ContactsFunction", "dynamodb:DeleteItem", arns["table"])
    assert model.allowed("ContactsFunction", "dynamodb:PutItem", arns["table"])

    conditional = {
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": "*",
        "Condition": {"StringEquals": {"aws:ResourceTag/x": "y"}},
    }
    model = PolicyModel.build(template, transformed_template=_with_statement(template, "ContactsFunction", conditional))
    assert not model.allowed("ContactsFunction", "s3:GetObject", arns["bucket"] + "/assets/a")


def test_the_mail_functions_grant_holds_only_for_mail_from_the_mail_sender(model):
    """MailFunction may send on any identity (SES checks the recipients' in the sandbox) but only with
    `ses:FromAddress` = MailSender: the condition is evaluated with the key the call gives."""
    identity = "arn:aws:ses:us-east-1:123456789012:identity/someone@elsewhere.org"
    sender = load_template(stage="local").parameters["MailSender"]
    assert model.allowed("MailFunction", "ses:SendEmail", identity, {"ses:FromAddress": sender})
    assert not model.allowed("MailFunction", "ses:SendEmail", identity, {"ses:FromAddress": "spoof@elsewhere.org"})
    assert not model.allowed("MailFunction", "ses:SendEmail", identity)
    assert not model.allowed("IdentityFunction", "ses:SendEmail", identity, {"ses:FromAddress": sender})


def test_an_unknown_managed_policy_is_refused_not_guessed(template):
    raw = copy.deepcopy(template.raw)
    raw["Resources"]["SystemFunction"]["Properties"]["Policies"].append("AmazonS3ReadOnlyAccess")
    transformed = sam_transform(raw, template.parameters)
    with pytest.raises(PolicyModelError, match="AmazonS3ReadOnlyAccess"):
        PolicyModel.build(template, transformed_template=transformed)


def test_calls_map_to_the_actions_and_arns_aws_authorizes():
    table = f"{ACCOUNT}:table/t"
    assert needs("dynamodb", "Query", {"TableName": "t", "IndexName": "GSI2"}) == [
        Need("dynamodb:Query", (f"{table}/index/GSI2",))
    ]
    assert needs("dynamodb", "GetItem", {"TableName": "t"}) == [Need("dynamodb:GetItem", (table,))]
    assert needs(
        "dynamodb",
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": {"TableName": "t"}},
                {"ConditionCheck": {"TableName": "t"}},
                {"Update": {"TableName": "d"}},
                {"Put": {"TableName": "t"}},
            ]
        },
    ) == [
        Need("dynamodb:PutItem", (table,)),
        Need("dynamodb:ConditionCheckItem", (table,)),
        Need("dynamodb:UpdateItem", (f"{ACCOUNT}:table/d",)),
    ]
    assert needs("dynamodb", "BatchGetItem", {"RequestItems": {"t": {}, "d": {}}}) == [
        Need("dynamodb:BatchGetItem", (table,)),
        Need("dynamodb:BatchGetItem", (f"{ACCOUNT}:table/d",)),
    ]
    queue = "arn:aws:sqs:us-east-1:123456789012:jobs"
    for url in ("https://sqs.us-east-1.amazonaws.com/123456789012/jobs", "http://127.0.0.1:5000/123456789012/jobs"):
        assert needs("sqs", "SendMessageBatch", {"QueueUrl": url}) == [Need("sqs:SendMessage", (queue,))]
    assert needs("sqs", "ChangeMessageVisibility", {"QueueUrl": queue}) == [
        Need("sqs:ChangeMessageVisibility", (queue,))
    ]
    assert needs("events", "PutEvents", {"Entries": [{"EventBusName": "b"}, {"EventBusName": "b"}, {}]}) == [
        Need("events:PutEvents", ("arn:aws:events:us-east-1:123456789012:event-bus/b",)),
        Need("events:PutEvents", ("arn:aws:events:us-east-1:123456789012:event-bus/default",)),
    ]
    assert needs("s3", "HeadObject", {"Bucket": "b", "Key": "assets/x"}) == [
        Need("s3:GetObject", ("arn:aws:s3:::b/assets/x",))
    ]
    assert needs("s3", "DeleteObjects", {"Bucket": "b", "Delete": {"Objects": [{"Key": "k1"}, {"Key": "k2"}]}}) == [
        Need("s3:DeleteObject", ("arn:aws:s3:::b/k1",)),
        Need("s3:DeleteObject", ("arn:aws:s3:::b/k2",)),
    ]
    assert needs("s3", "ListObjectsV2", {"Bucket": "b", "Prefix": "media/"}) == [
        Need("s3:ListBucket", ("arn:aws:s3:::b",))
    ]
    assert needs("sesv2", "SendEmail", {"FromEmailAddress": "Switchboard <no-reply@mail.example.com>"}) == [
        Need(
            "ses:SendEmail",
            (
                "arn:aws:ses:us-east-1:123456789012:identity/no-reply@mail.example.com",
                "arn:aws:ses:us-east-1:123456789012:identity/mail.example.com",
            ),
            (("ses:FromAddress", "no-reply@mail.example.com"),),
        )
    ]
    assert needs("secretsmanager", "GetSecretValue", {"SecretId": "cursor"}) == [
        Need("secretsmanager:GetSecretValue", ("arn:aws:secretsmanager:us-east-1:123456789012:secret:cursor",))
    ]
    # an operation without a rule needs a grant on every resource
    assert needs("kinesis", "PutRecord", {"StreamName": "s"}) == [Need("kinesis:PutRecord", ("*",))]
