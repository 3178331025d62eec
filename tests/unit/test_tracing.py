"""Detailed tracing is a switch: off (the default), the X-Ray SDK is never imported; on, an API function's handler
sends a `## handler` subsegment and one per AWS call to the X-Ray daemon, without the response. Each case runs in a
fresh interpreter (the SDK patches botocore for the whole process), with a UDP socket standing in for the daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, **env: str) -> str:
    environ = {**os.environ, "PYTHONPATH": f"{ROOT / 'layers' / 'core'}{os.pathsep}{ROOT}", **env}
    environ.pop("SWITCHBOARD_TRACER", None)
    environ.update(env)
    command = [sys.executable, "-c", textwrap.dedent(code)]
    done = subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_off_by_default_the_sdk_is_never_imported():
    out = _python(
        """
        import sys
        import functions.system.app, functions.webhook_sender.app, functions.authorizer.app
        print(sorted(m for m in sys.modules if m.startswith("aws_xray_sdk")))
        """
    )
    assert out.strip() == "[]"


def test_on_an_api_handler_records_its_subsegments_without_the_response():
    out = _python(
        """
        import json, os, socket
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(2)
        os.environ["AWS_XRAY_DAEMON_ADDRESS"] = f"127.0.0.1:{sock.getsockname()[1]}"

        from bench._harness import Ctx, api_event
        from switchboard import aws
        from switchboard.api.app import PUBLIC, create_resolver, make_handler
        from switchboard.api.auth import public

        app = create_resolver()

        @app.get("/v1/probe", middlewares=public(), tags=["t"], security=PUBLIC)
        def probe() -> dict:
            try:
                aws.client("dynamodb").get_item(TableName="t", Key={"PK": {"S": "a"}, "SK": {"S": "b"}})
            except Exception as err:  # the endpoint is a dead port: the call fails, its subsegment is still sent
                return {"data": {"secret": "sk_live_not_for_xray", "error": type(err).__name__}}
            return {"data": {}}

        handler = make_handler(app)
        event = api_event("GET", "/v1/probe", None, "org_t")
        event["requestContext"]["authorizer"] = None
        response = handler(event, Ctx())
        docs = []
        while True:
            try:
                datagram = sock.recv(65536)
            except socket.timeout:
                break
            docs.append(json.loads(datagram.split(b"\\n", 1)[1]))
        print(json.dumps({"status": response["statusCode"], "docs": docs}))
        """,
        SWITCHBOARD_TRACER="on",
        POWERTOOLS_TRACE_DISABLED="false",
        LAMBDA_TASK_ROOT=str(ROOT),
        AWS_LAMBDA_FUNCTION_NAME="probe",
        _X_AMZN_TRACE_ID="Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        AWS_XRAY_CONTEXT_MISSING="LOG_ERROR",
        AWS_ENDPOINT_URL="http://127.0.0.1:9",
        AWS_MAX_ATTEMPTS="1",
    )
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == 200
    names = [doc.get("name") for doc in result["docs"]]
    assert "## handler" in names and "dynamodb" in names, names
    call = next(doc for doc in result["docs"] if doc.get("name") == "dynamodb")
    assert call["aws"]["operation"] == "GetItem" and call["aws"]["table_name"] == "t"
    assert "sk_live_not_for_xray" not in json.dumps(result["docs"])  # the response is not recorded
