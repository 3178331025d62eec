"""The deploy guard's answer on the local stack (functions/deploy_guard)."""

from __future__ import annotations


def test_the_local_stack_gives_functions_the_parameter_values(aws_resources):
    """The local stack has no earlier deployment: the deploy guard's answer is the parameters themselves."""
    template, res = aws_resources
    spec = next(s for s in template.functions if s.logical_id == "SystemFunction")
    env = res.function_env(spec)
    assert env["TENANT_SHARDS"] == str(template.parameters["TenantShards"])
    assert env["WEBHOOK_DELIVERY_SHARDS"] == str(template.parameters["WebhookDeliveryShards"])
