"""Shared test setup: a complete, fake environment before anything imports the core layer; network to AWS blocked;
every AWS call a function makes checked against its IAM grants (tests/iam_check.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

TEST_ENV = {
    "STAGE": "test",
    "TABLE_NAME": "switchboard-test",
    "DELIVERIES_TABLE_NAME": "switchboard-test-deliveries",
    "EVENT_BUS_NAME": "switchboard-test",
    "MEDIA_BUCKET": "switchboard-test-media",
    "WEBHOOK_EVENTS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/webhook-events",
    "WEBHOOK_DELIVERIES_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/webhook-deliveries",
    "OUTBOUND_MESSAGES_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/outbound-messages",
    "JOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
    "CLOUD_WEBHOOK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/cloud-webhook",
    "CURSOR_SECRET": "test-cursor-secret-0123456789abcdef",
    "API_KEY_MODE": "test",
    "MAIL_SENDER": "no-reply@switchboard.test",
    "PUBLIC_BASE_URL": "https://switchboard.test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "POWERTOOLS_SERVICE_NAME": "switchboard",
    "POWERTOOLS_METRICS_NAMESPACE": "Switchboard",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    # Every suite's requests come from one client address and reuse a few e-mails: per-IP and per-e-mail budgets
    # sized for that (the tests of the limits lower them).
    "AUTH_IP_LIMIT": "100000",
    "AUTH_EMAIL_LIMIT": "1000",
    "ORGANIZATIONS_PER_USER_PER_DAY": "1000",
    "PORTAL_FAILURES_PER_IP": "1000",
}
for _k, _v in TEST_ENV.items():
    os.environ[_k] = _v
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.pop("AWS_PROFILE", None)

from tests import iam_check  # noqa: E402 - after the environment above: it imports the core layer

iam_check.install()


@pytest.fixture(autouse=True)
def iam_grants() -> Iterator[None]:
    """Fails the test when a function made an AWS call its IAM policies in template.yaml do not grant."""
    iam_check.take_in_process()
    yield
    failure = iam_check.report(iam_check.take_in_process())
    if failure:
        pytest.fail(failure, pytrace=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = iam_check.summary()
    if lines:
        terminalreporter.section(f"IAM check (IAM_CHECK={iam_check.mode()}): {len(lines)} distinct ungranted call(s)")
        for line in lines:
            terminalreporter.write_line(line)
