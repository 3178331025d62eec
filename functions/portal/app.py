"""Webhook portal (being built): a FastAPI app served through Mangum."""

from __future__ import annotations

from typing import Any


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {
        "statusCode": 404,
        "headers": {"Content-Type": "application/json"},
        "body": '{"error": {"code": "route_not_found", "message": "No such page.", "details": []}}',
    }
