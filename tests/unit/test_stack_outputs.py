"""The stack's outputs are what `make bootstrap` reads (switchboard.identity.bootstrap.from_stack) and nothing secret:
an output is readable by anyone who may describe the stack."""

from __future__ import annotations

import json
from pathlib import Path

from local.template import parse_yaml
from switchboard.identity.bootstrap import OPTIONAL_OUTPUTS, REQUIRED_OUTPUTS

TEMPLATE = parse_yaml((Path(__file__).resolve().parents[2] / "template.yaml").read_text())


def test_the_outputs_make_bootstrap_reads_exist():
    assert set(REQUIRED_OUTPUTS) | set(OPTIONAL_OUTPUTS) <= set(TEMPLATE["Outputs"])
    assert TEMPLATE["Outputs"]["ApiKeyMode"]["Value"] == {
        "Fn::FindInMap": ["StageConfig", {"Ref": "Stage"}, "ApiKeyMode"]
    }
    assert TEMPLATE["Outputs"]["TenantShards"]["Value"] == {"Fn::GetAtt": ["GrowOnlyParameters", "TenantShards"]}


def test_no_output_carries_a_secret():
    secrets = {k for k, v in TEMPLATE["Resources"].items() if v["Type"] == "AWS::SecretsManager::Secret"}
    assert secrets, "the template has a secret: the check below would prove nothing without one"
    for name, output in TEMPLATE["Outputs"].items():
        text = json.dumps(output["Value"])
        assert "{{resolve:" not in text, name
        assert not any(f'"{secret}"' in text for secret in secrets), name
