"""Response envelopes: `{"data": ...}` for success, `{"error": {...}}` for every failure."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_serializer

T = TypeVar("T")


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")
    field: str | None = None
    message: str | None = None


class ErrorBody(BaseModel):
    code: str = Field(description="Stable snake_case error code")
    message: str
    details: list[dict[str, Any]] = Field(default_factory=list)
    request_id: str


class ErrorEnvelope(BaseModel):
    error: ErrorBody


class Meta(BaseModel):
    """Pagination meta: offset lists carry `offset`, cursor lists `cursor`; absent values are left out."""

    has_more: bool
    limit: int
    offset: int | None = None
    cursor: str | None = None
    total: int | None = None

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: Any) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class Data(BaseModel, Generic[T]):
    data: T


class ListData(BaseModel, Generic[T]):
    data: list[T]
    meta: Meta


def error_body(code: str, message: str, request_id: str, details: list[dict[str, Any]] | None = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or [], "request_id": request_id}}
