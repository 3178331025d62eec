"""The first credential of a deployed stage (`make bootstrap`, switchboard.identity.bootstrap): after `sam deploy` the
table is empty and every route but the public ones needs a key, registration and login included. The command makes
the first owner, the organization, an owner key and a sign-up key (shown once), is idempotent (a second run reports
the first owner; `--new-key` mints another owner key), and finds the table through the stack's outputs
(CloudFormation DescribeStacks, a moto stack here) or takes it directly."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import boto3
import pytest

from switchboard.config import get_settings, reset_settings
from switchboard.identity.bootstrap import MARKER, bootstrap_stage, main
from switchboard.store import Store, get_store, keys
from tests.integration.support import Api, latest_code

OWNER = "ops@acme-platform.io"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def shown(out: str, label: str) -> str:
    match = re.search(rf"^  {re.escape(label)}:\s+(\S+)", out, flags=re.M)
    assert match, f"no {label} in:\n{out}"
    return match.group(1)


def by_table(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    table = get_settings().table_name
    return run(capsys, "--table-name", table, "--owner-email", OWNER, "--org-name", "Acme Platform", *extra)


def test_bootstrap_makes_an_owner_and_keys_that_work_and_a_sign_up_key_that_registers(api: Api, capsys):
    code, out, err = by_table(capsys, "--owner-name", "Ops Team")
    assert code == 0, err
    owner_key, signup_key = shown(out, "Owner API key"), shown(out, "Sign-up key")
    password, org_id = shown(out, "Owner password"), shown(out, "Organization")
    assert owner_key.startswith("sk_test_") and signup_key.startswith("sk_test_") and owner_key != signup_key

    # The owner key administers the new organization; the owner logs in with the password shown once.
    org = api.get("/v1/organization", headers={"X-Api-Key": owner_key})
    assert (
        org.status_code == 200 and org.json()["data"]["id"] == org_id and org.json()["data"]["name"] == "Acme Platform"
    )
    listed = api.get("/v1/api-keys", headers={"X-Api-Key": owner_key}).json()["data"]
    assert {(k["name"], k["role"]) for k in listed} == {
        ("bootstrap owner", "owner"),
        ("sign-up (pre-session routes)", "viewer"),
    }
    login = api.post("/v1/auth/login", json={"email": OWNER, "password": password})
    assert login.status_code == 200, login.text
    assert login.json()["data"]["user"]["name"] == "Ops Team"

    # The sign-up key is what the platform's app sends on the pre-session routes: a new account registers with it…
    app = {"X-Api-Key": signup_key}
    assert (
        api.post("/v1/auth/email-verification/request", json={"email": "new.user@example.com"}, headers=app).status_code
        == 202
    )
    body = {
        "email": "new.user@example.com",
        "otp_code": latest_code(api, "new.user@example.com"),
        "password": "a new user's password",
    }
    assert api.post("/v1/auth/register/verify", json=body, headers=app).status_code == 201
    # … and it can change nothing of the platform organization.
    api.assert_error(api.post("/v1/api-keys", json={"name": "x", "role": "viewer"}, headers=app), 403, "forbidden")
    api.assert_error(
        api.post("/v1/invitations", json={"email": "x@example.com", "role": "admin"}, headers=app), 403, "forbidden"
    )

    # Nothing secret is stored: the keys as SHA-256 only, the password as argon2id, the marker with ids.
    marker = get_store().get(MARKER, consistent=True)
    assert marker is not None and marker["organization_id"] == org_id and marker["owner_email"] == OWNER
    stored = json.dumps(boto3.client("dynamodb").scan(TableName=get_settings().table_name)["Items"])
    assert owner_key not in stored and signup_key not in stored and password not in stored


def test_a_second_run_makes_no_second_owner_and_new_key_mints_another_owner_key(api: Api, capsys):
    code, first, _ = by_table(capsys)
    assert code == 0
    org_id = shown(first, "Organization")
    members_before = api.get("/v1/members", headers={"X-Api-Key": shown(first, "Owner API key")}).json()["data"]

    code, again, _ = run(capsys, "--table-name", get_settings().table_name, "--owner-email", "someone.else@acme.io")
    assert code == 0
    assert "Bootstrapped already" in again and shown(again, "Organization") == org_id
    assert "someone.else@acme.io was not made an owner" in again and "Owner API key" not in again
    assert get_store().get(keys.user_email("someone.else@acme.io")) is None

    code, minted, _ = by_table(capsys, "--new-key")
    assert code == 0
    new_key = shown(minted, "Owner API key")
    assert new_key not in first and "Sign-up key" not in minted and "Owner password" not in minted
    members = api.get("/v1/members", headers={"X-Api-Key": new_key})
    assert members.status_code == 200 and members.json()["data"] == members_before
    audit = api.get("/v1/audit-logs", headers={"X-Api-Key": new_key}, params={"action": "api_key.created"})
    assert audit.status_code == 200, audit.text
    (entry,) = audit.json()["data"]
    assert entry["actor_type"] == "operator" and entry["actor_id"] == "bootstrap"


def test_two_runs_at_once_make_one_owner(api: Api):
    store = Store(get_settings().table_name)
    results: list[Any] = []

    def one(email: str) -> None:
        results.append(bootstrap_stage(store, owner_email=email, owner_name="Ops", org_name="P", key_mode="test"))

    threads = [threading.Thread(target=one, args=(f"ops{n}@acme-platform.io",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.created for r in results) == [False, False, False, True]
    assert len({r.organization_id for r in results}) == 1
    owners = [n for n in range(4) if store.get(keys.user_email(f"ops{n}@acme-platform.io"))]
    assert len(owners) == 1


def test_an_email_that_has_an_account_is_refused_and_nothing_is_written(api: Api, capsys):
    code, out, err = run(capsys, "--table-name", get_settings().table_name, "--owner-email", "Owner@Example.com")
    assert code == 1 and out == ""
    assert "owner@example.com has an account already" in err
    assert get_store().get(MARKER, consistent=True) is None


def test_the_stack_is_found_by_its_outputs_through_describe_stacks(api: Api, capsys, tmp_path: Path, monkeypatch):
    """`--stage dev` reads samconfig.toml's stack name and the stack's outputs; nothing else of the environment."""
    samconfig = tmp_path / "samconfig.toml"
    samconfig.write_text('[dev.deploy.parameters]\nstack_name = "acme-switchboard-dev"\n')
    template = {
        "Parameters": {"Table": {"Type": "String"}, "MailSender": {"Type": "String"}},
        "Resources": {"Marker": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "TableName": {"Value": {"Ref": "Table"}},
            "ApiKeyMode": {"Value": "test"},
            "TenantShards": {"Value": "16"},
            "ApiUrl": {"Value": "https://abc123.execute-api.us-east-1.amazonaws.com/dev"},
        },
    }
    boto3.client("cloudformation").create_stack(
        StackName="acme-switchboard-dev",
        TemplateBody=json.dumps(template),
        Parameters=[
            {"ParameterKey": "Table", "ParameterValue": get_settings().table_name},
            {"ParameterKey": "MailSender", "ParameterValue": api.template.parameters["MailSender"]},
        ],
    )
    table = get_settings().table_name
    monkeypatch.delenv("TABLE_NAME")  # the command needs no function's environment: no settings at all
    reset_settings()
    code, out, err = run(capsys, "--stage", "dev", "--samconfig", str(samconfig), "--owner-email", OWNER)
    assert code == 0, err
    assert "stack acme-switchboard-dev" in out
    key = shown(out, "Owner API key")
    assert f'curl -H "X-Api-Key: {key}" https://abc123.execute-api.us-east-1.amazonaws.com/dev/v1/organization' in out
    assert f"SES: {api.template.parameters['MailSender']} can send" in out
    monkeypatch.setenv("TABLE_NAME", table)
    reset_settings()
    assert api.get("/v1/organization", headers={"X-Api-Key": key}).status_code == 200


def test_a_stack_without_the_outputs_is_refused(api: Api, capsys):
    template = {"Resources": {"Marker": {"Type": "AWS::SQS::Queue"}}}
    boto3.client("cloudformation").create_stack(StackName="switchboard-old", TemplateBody=json.dumps(template))
    code, _, err = run(capsys, "--stack-name", "switchboard-old", "--owner-email", OWNER)
    assert code == 1 and "has no output TableName, ApiKeyMode" in err
    assert get_store().get(MARKER, consistent=True) is None
