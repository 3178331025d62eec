"""Response envelopes: `{"data": ...}` for success, `{"error": {...}}` for every failure.

Like the resource models (`switchboard/models.py`), the envelopes build their schemas on first use: every function
imports this module, and most requests need one or two of them (errors are answered as plain dicts).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


_DEFERRED = ConfigDict(defer_build=True)


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)
    field: str | None = None
    message: str | None = None


class ErrorBody(BaseModel):
    model_config = _DEFERRED
    code: str = Field(description="Stable snake_case error code")
    message: str
    details: list[dict[str, Any]] = Field(default_factory=list)
    request_id: str


class ErrorEnvelope(BaseModel):
    model_config = _DEFERRED
    error: ErrorBody


def _absent(value: Any) -> bool:
    return value is None


class Meta(BaseModel):
    """Pagination meta: offset lists carry `offset`, cursor lists `cursor`; absent values are left out (per field,
    so the document still lists every field with its type for typed clients)."""

    model_config = _DEFERRED

    has_more: bool = Field(description="Whether there is a next page")
    limit: int = Field(description="The page size applied")
    offset: int | None = Field(default=None, exclude_if=_absent, description="Offset lists: this page's offset")
    cursor: str | None = Field(
        default=None, exclude_if=_absent, description="Cursor lists: the next page's `cursor` (when `has_more`)"
    )
    total: int | None = Field(
        default=None, exclude_if=_absent, description="How many items all pages hold, where cheap to count"
    )


class Data(BaseModel, Generic[T]):
    model_config = _DEFERRED
    data: T


class ListData(BaseModel, Generic[T]):
    model_config = _DEFERRED
    data: list[T]
    meta: Meta


def whole_list[T](items: list[T]) -> ListData[T]:
    """A list answered whole, not paginated: `has_more` false, `limit` and `total` its length."""
    return ListData(data=items, meta=Meta(has_more=False, limit=len(items), total=len(items)))


def cursor_list[T](items: list[T], limit: int, next_cursor: str | None) -> ListData[T]:
    """A page of a cursor list: `has_more` while there is a next cursor."""
    return ListData(data=items, meta=Meta(has_more=next_cursor is not None, limit=limit, cursor=next_cursor))


def error_body(code: str, message: str, request_id: str, details: list[dict[str, Any]] | None = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or [], "request_id": request_id}}
