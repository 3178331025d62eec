"""The IAM check itself (local/iam.py, local/iam_recorder.py, tests/iam_check.py): a call the template does not grant
fails the test that made it, naming function, action, resource and call site; a granted one passes; attribution
survives the runtime's thread pools; S3's answer to a missing key depends on s3:ListBucket, as on AWS."""

from __future__ import annotations

import copy

import pytest
from botocore.exceptions import ClientError

from local.iam import PolicyModel, sam_transform
from local.iam_recorder import CHECK, VIOLATION_MARKER, running
from switchboard import aws
from switchboard.config import get_settings
from switchboard.store import get_store, shards
from tests import iam_check
from tests.e2e.conftest import Stack
from tests.integration.support import Api


def _without_policy(api: Api, function: str, policy: str, target: str) -> PolicyModel:
    """The model of template.yaml with `function`'s `policy` on `target` (a logical id) removed."""
    raw = copy.deepcopy(api.template.raw)
    policies = raw["Resources"][function]["Properties"]["Policies"]
    kept = [p for p in policies if not (isinstance(p, dict) and policy in p and target in str(p[policy]))]
    assert len(kept) == len(policies) - 1, f"{function} has no {policy} on {target}"
    raw["Resources"][function]["Properties"]["Policies"] = kept
    transformed = sam_transform(raw, api.template.parameters)
    return PolicyModel.build(api.template, api.resources, transformed_template=transformed)


def _tag(api: Api) -> str:
    made = api.post("/v1/contact-tags", json={"name": "vip"})
    assert made.status_code == 201, made.text
    return str(made.json()["data"]["id"])


def test_a_removed_grant_fails_the_test_naming_function_action_resource_and_call_site(api: Api):
    tag_id = _tag(api)
    model = _without_policy(api, "ContactsFunction", "SQSSendMessagePolicy", "JobsQueue")
    with CHECK.checking(model, mode="fail"):
        api.patch(f"/v1/contact-tags/{tag_id}", json={"name": "Gold"})  # renaming a tag enqueues its cascade job
        found = CHECK.take()

    queue = api.resources.queue_arn("JobsQueue")
    assert [(v.function, v.action, v.resource) for v in found] == [("ContactsFunction", "sqs:SendMessage", queue)]
    site = found[0].site
    assert site[0].startswith("layers/core/switchboard/jobs/service.py:"), site
    assert any(frame.startswith("functions/contacts/app.py:") for frame in site), site
    failure = iam_check.report(found, check_mode="fail")
    assert failure is not None
    for part in ("ContactsFunction", "sqs:SendMessage", queue, "layers/core/switchboard/jobs/service.py:"):
        assert part in failure


def test_a_removed_grant_fails_the_call_as_aws_would(api: Api):
    model = _without_policy(api, "ContactsFunction", "SQSSendMessagePolicy", "JobsQueue")
    with CHECK.checking(model, mode="fail"), running("ContactsFunction"):
        with pytest.raises(ClientError) as denied:
            aws.client("sqs").send_message(QueueUrl=api.resources.queue_url("JobsQueue"), MessageBody="{}")
        CHECK.take()
    assert denied.value.response["Error"]["Code"] == "AccessDenied"
    assert "ContactsFunction calls sqs:SendMessage" in str(denied.value)


def test_a_granted_call_passes(api: Api):
    tag_id = _tag(api)
    with CHECK.checking(PolicyModel.build(api.template, api.resources), mode="fail"):
        renamed = api.patch(f"/v1/contact-tags/{tag_id}", json={"name": "Gold"})
        assert CHECK.take() == []
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["data"]["job_id"]


def test_calls_in_the_shard_readers_thread_pool_are_attributed_to_the_calling_function(api: Api):
    store = get_store()
    puts = [lambda i=i: store.put({"PK": f"IAMTEST#{i}", "SK": "X"}) for i in range(3)]
    model = PolicyModel.build(api.template, api.resources)
    with CHECK.checking(model, mode="report"), running("SystemFunction"):  # read-only on the table
        shards.read_round(puts)
        found = CHECK.take()
    table = api.resources.getatt("Table", "Arn")
    assert [(v.function, v.action, v.resource) for v in found] == [("SystemFunction", "dynamodb:PutItem", table)] * 3


def test_a_missing_object_is_access_denied_without_list_bucket_as_on_aws(api: Api):
    s3 = aws.client("s3")
    bucket = get_settings().media_bucket
    with CHECK.checking(PolicyModel.build(api.template, api.resources), mode="fail"):
        with running("GroupsFunction"), pytest.raises(ClientError) as missing:  # s3:GetObject on assets/* only
            s3.get_object(Bucket=bucket, Key=f"assets/{api.org_id}/never-uploaded")
        with running("JobsFunction"), pytest.raises(s3.exceptions.NoSuchKey):  # S3CrudPolicy: s3:ListBucket too
            s3.get_object(Bucket=bucket, Key=f"assets/{api.org_id}/never-uploaded")
        assert CHECK.take() == []
    assert missing.value.response["Error"]["Code"] == "AccessDenied"


def test_the_local_stack_logs_each_ungranted_call_for_the_e2e_tests_to_fail_on(api: Api, caplog, tmp_path, monkeypatch):
    model = _without_policy(api, "ContactsFunction", "SQSSendMessagePolicy", "JobsQueue")
    with caplog.at_level("ERROR", logger="local.iam"), CHECK.checking(model, mode="report"):
        with running("ContactsFunction"):
            aws.client("sqs").send_message(QueueUrl=api.resources.queue_url("JobsQueue"), MessageBody="{}")
        logged = CHECK.take()
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith(VIOLATION_MARKER)]
    # what tests/e2e/conftest.py reads from the local stack's output after each test
    log = tmp_path / "stack.log"
    log.write_text(f"2026-01-01 00:00:00 INFO local.stack: ready\n2026-01-01 00:00:01 ERROR local.iam: {line}\n")
    stack = Stack(url="http://127.0.0.1:1", api_key="k", log_path=log)
    assert stack.iam_violations() == logged
    assert stack.iam_violations() == []  # each line is read once
    with log.open("a") as out:
        out.write(f"2026-01-01 00:00:02 ERROR local.iam: {line}\n")
    monkeypatch.setenv("IAM_CHECK", "fail")
    with pytest.raises(pytest.fail.Exception, match="ContactsFunction calls sqs:SendMessage"):
        stack.check_iam()
