"""The platform secret is read through Powertools Parameters, imported on first use only: about 20 ms of a cold start
(`python -X importtime`) that most invocations never need (switchboard/platform_secret.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import sys
import app
loaded = sorted(m for m in sys.modules if m.startswith("aws_lambda_powertools.utilities.parameters"))
print("loaded:", loaded)
assert "switchboard.platform_secret" in sys.modules
assert not loaded, loaded
"""


def test_no_function_imports_powertools_parameters_at_cold_start():
    env = {k: v for k, v in os.environ.items() if k != "CURSOR_SECRET"}
    env |= {
        "STAGE": "dev",
        "CURSOR_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:switchboard-dev-CursorSecret-AbCdEf",
        "PYTHONPATH": os.pathsep.join([".", str(ROOT / "layers" / "core"), str(ROOT)]),
    }
    for name in ("contacts", "messaging", "webhook_sender", "jobs"):
        done = subprocess.run(
            [sys.executable, "-c", PROBE], cwd=ROOT / "functions" / name, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, (name, done.stdout, done.stderr[-2000:])
