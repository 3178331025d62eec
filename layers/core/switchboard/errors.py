"""Domain errors. Each maps to one HTTP status and one stable error code of the envelope."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    status: int = 400
    code: str = "bad_request"
    default_message: str = "The request could not be processed."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        if code is not None:
            self.code = code
        self.details = details or []
        self.headers = headers or {}
        super().__init__(self.message)


class ValidationFailed(DomainError):
    status = 400
    code = "validation_failed"
    default_message = "The request is not valid."

    @classmethod
    def field(cls, field: str, message: str) -> ValidationFailed:
        return cls(f"{field}: {message}", details=[{"field": field, "message": message}])


class InvalidJson(DomainError):
    status = 400
    code = "invalid_json"
    default_message = "The request body is not valid JSON."


class UnsupportedByProvider(DomainError):
    status = 400
    code = "unsupported_by_provider"
    default_message = "The channel's provider does not support this operation."


class Unauthenticated(DomainError):
    status = 401
    code = "unauthenticated"
    default_message = "A valid credential is required."


class Forbidden(DomainError):
    status = 403
    code = "forbidden"
    default_message = "Your role does not allow this operation."


class NotFound(DomainError):
    status = 404
    code = "not_found"
    default_message = "No such resource."


class RouteNotFound(DomainError):
    status = 404
    code = "route_not_found"
    default_message = "No route matches this method and path."


class MethodNotAllowed(DomainError):
    status = 405
    code = "method_not_allowed"
    default_message = "This path does not accept that method."


class Conflict(DomainError):
    status = 409
    code = "conflict"
    default_message = "The request conflicts with the current state of the resource."


class PayloadTooLarge(DomainError):
    status = 413
    code = "payload_too_large"
    default_message = "The request body is larger than 256 KiB."


class RateLimited(DomainError):
    status = 429
    code = "rate_limited"
    default_message = "Too many requests; retry later."

    def __init__(self, retry_after: int, message: str | None = None) -> None:
        super().__init__(message, headers={"Retry-After": str(max(1, int(retry_after)))})
        self.retry_after = retry_after


class ServiceUnavailable(DomainError):
    status = 503
    code = "service_unavailable"
    default_message = "The service is busy; retry shortly."

    def __init__(self, message: str | None = None, retry_after: int = 1) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})
