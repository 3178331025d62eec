"""`python -m local` (`make dev`): run the local stack on 127.0.0.1:${PORT:-3000} until Ctrl-C or SIGTERM.

Environment: PORT (0 picks a free port), LOCAL_API_KEY (fixes the owner key), LOCAL_OWNER_PASSWORD,
LOCAL_CONCURRENCY (imported copies of each function, default 4), LOCAL_TIME_SCALE (compresses webhook retry and
sandbox status delays), LOCAL_LOG_LEVEL (the stack's own log lines, default INFO).

Once it serves, it prints a banner and exactly one machine-readable line:
`SWITCHBOARD_LOCAL_READY {"url": ..., "api_key": ..., "organization_id": ..., "owner_email": ..., ...}`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time

READY_MARKER = "SWITCHBOARD_LOCAL_READY"


def _banner(info: dict[str, str], seconds: float) -> str:
    key, url = info["api_key"], info["url"]
    return "\n".join(
        [
            "",
            f"Switchboard local stack (started in {seconds:.1f} s)",
            f"  URL:            {url}",
            f"  Organization:   {info['organization_id']}",
            f"  API key:        {key}",
            f"  Owner e-mail:   {info['owner_email']}",
            f"  Owner password: {info['owner_password']}",
            f"  Swagger UI:     {url}/docs",
            f"  Local mail:     {url}/_local/mail?to=",
            f"  AWS (moto):     {info['aws_endpoint_url']}",
            "",
            f'  curl -H "X-Api-Key: {key}" {url}/v1/organization',
            "",
            "Ctrl-C stops it.",
            "",
        ]
    )


def main() -> int:
    logging.basicConfig(
        level=os.environ.get("LOCAL_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("botocore", "boto3", "urllib3", "werkzeug", "uvicorn.error"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    from local.stack import LocalStack, StackError

    try:
        port = int(os.environ.get("PORT", "3000") or "3000")
    except ValueError:
        print(f"PORT must be a number, not {os.environ.get('PORT')!r}", file=sys.stderr)
        return 2

    started = time.perf_counter()
    stack = LocalStack(port=port)
    try:
        info = stack.start()
    except StackError as err:
        print(f"the local stack could not start: {err}", file=sys.stderr)
        return 1
    except Exception as err:
        logging.getLogger("local").exception("the local stack could not start")
        print(f"the local stack could not start: {err}", file=sys.stderr)
        return 1

    data = info.as_dict()
    print(_banner(data, time.perf_counter() - started), flush=True)
    print(f"{READY_MARKER} {json.dumps(data)}", flush=True)

    code = 0
    while not stop.wait(0.25):
        if not stack.alive():
            print("the HTTP server stopped unexpectedly", file=sys.stderr)
            code = 1
            break
    print("stopping the local stack ...", file=sys.stderr, flush=True)
    stack.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
