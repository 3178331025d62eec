"""Shared test setup: a complete, fake environment before anything imports the core layer; network to AWS blocked."""

from __future__ import annotations

import os

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
