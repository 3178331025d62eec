"""`switchboard.logs.request_context` writes the lines Powertools' `inject_lambda_context(clear_state=True)` +
`set_correlation_id` would: same keys, same values, same order, invocation after invocation."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import logger as powertools_logger

from switchboard.logs import request_context


class Context:
    def __init__(self, request_id: str) -> None:
        self.function_name = "switchboard-test-contacts"
        self.memory_limit_in_mb = 1024
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:switchboard-test-contacts"
        self.aws_request_id = request_id


def _request_id(event: Any) -> str | None:
    return (event.get("requestContext") or {}).get("requestId")


def _invocations(logger: Logger, handler: Any) -> list[None]:
    out = []
    for n in range(3):
        event = {"requestContext": {"requestId": f"req-{n}"}} if n != 1 else {}  # the second has no request id
        out.append(handler(event, Context(f"lambda-{n}")))
    return out


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    for line in lines:
        line.pop("timestamp")
        line["service"] = "request-logging"  # each side has a logger of its own
    return lines


def _logger_and_inner(name: str) -> tuple[Logger, io.StringIO, Any]:
    stream = io.StringIO()
    logger = Logger(service=f"request-logging-{name}", stream=stream, level="INFO")

    def inner(event: Any, context: Any) -> None:
        logger.info("served", extra={"route": "/v1/contacts"})
        logger.append_keys(left_over="from this invocation")  # must not reach the next invocation
        logger.thread_safe_append_keys(thread_key="also cleared")
        logger.warning("second line")

    return logger, stream, inner


@pytest.mark.parametrize("initialization", [None, "provisioned-concurrency"])
def test_same_lines_as_powertools_inject_lambda_context(
    monkeypatch: pytest.MonkeyPatch, initialization: str | None
) -> None:
    if initialization:
        monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", initialization)
    else:
        monkeypatch.delenv("AWS_LAMBDA_INITIALIZATION_TYPE", raising=False)

    stock_logger, stock_stream, stock_inner = _logger_and_inner(f"stock-{initialization}")

    @stock_logger.inject_lambda_context(clear_state=True)
    def stock(event: Any, context: Any) -> None:
        stock_logger.set_correlation_id(_request_id(event))
        return stock_inner(event, context)

    ours_logger, ours_stream, ours_inner = _logger_and_inner(f"ours-{initialization}")
    ours = request_context(ours_logger, _request_id)(ours_inner)

    monkeypatch.setattr(powertools_logger, "is_cold_start", True)  # a fresh container for Powertools too
    _invocations(stock_logger, stock)
    _invocations(ours_logger, ours)

    expected, got = _lines(stock_stream), _lines(ours_stream)
    assert len(got) == 6
    assert got == expected
    assert [list(line) for line in got] == [list(line) for line in expected]  # the keys' order too
    assert [line.get("correlation_id") for line in got] == ["req-0", "req-0", None, None, "req-2", "req-2"]
    assert [line["function_request_id"] for line in got][::2] == ["lambda-0", "lambda-1", "lambda-2"]
    assert [line["cold_start"] for line in got][::2] == [initialization is None, False, False]
    assert "left_over" not in got[2] and "thread_key" not in got[2]
