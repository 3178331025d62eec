"""The per-route role requirement, checked against the caller (`switchboard.access.AuthContext`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from switchboard.access import ROLE_RANK, ROLES, AuthContext, Role
from switchboard.api.context import current_auth_optional
from switchboard.errors import Forbidden, Unauthenticated

__all__ = [
    "ROLES",
    "ROLE_RANK",
    "Access",
    "AccessMiddleware",
    "AuthContext",
    "Role",
    "authenticated",
    "public",
    "requires",
    "route_access",
]


@dataclass(frozen=True)
class Access:
    """What a route requires: `public`, any authenticated caller, or a minimum role in the organization.

    While the organization is pending deletion only routes with `when_pending` (the role they then need) act in it;
    every other organization route answers 403 (CONVENTIONS "Tenant safety and data lifecycle"). A `sessions_only`
    route refuses API keys (403) whatever their role: a person must act (deleting or restoring the organization, or
    anything about the signed-in user). The document gives such routes the `Session` security scheme only."""

    kind: Literal["public", "authenticated", "role"]
    role: str | None = None
    when_pending: str | None = None
    sessions_only: bool = False

    def check(self, auth: AuthContext | None) -> None:
        if self.kind == "public":
            return
        if auth is None:
            raise Unauthenticated()
        if self.kind == "authenticated" and self.sessions_only and auth.principal_type != "session":
            raise Forbidden("This operation needs a signed-in user (session token), not an API key.")
        if self.kind == "role":
            assert self.role is not None
            if not auth.organization_id:
                raise Forbidden("Select an organization with X-Organization-Id, or create one first.")
            if self.sessions_only and auth.principal_type != "session":
                raise Forbidden("This operation needs a signed-in user's session, not an API key.")
            if auth.org_status == "pending_deletion" and (
                self.when_pending is None or not auth.has_role(self.when_pending)
            ):
                raise Forbidden("The organization is pending deletion; only an owner can see or restore it.")
            if not auth.has_role(self.role):
                raise Forbidden(f"This operation needs the {self.role} role or higher.")


class AccessMiddleware:
    """A route middleware carrying its Access, so tests can read every route's requirement."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self.__name__ = f"requires_{access.role or access.kind}"

    def __call__(self, app: Any, next_middleware: Callable[[Any], Any]) -> Any:
        self.access.check(current_auth_optional(app))
        return next_middleware(app)


def requires(role: Role, *, when_pending: Role | None = None, sessions_only: bool = False) -> list[AccessMiddleware]:
    """`middlewares=requires("admin")`: the caller's role in the organization must be at least `role`;
    `when_pending`: the route also serves an organization pending deletion, to that role or higher;
    `sessions_only`: API keys are refused whatever their role."""
    return [AccessMiddleware(Access("role", role, when_pending, sessions_only))]


def authenticated(*, sessions_only: bool = False) -> list[AccessMiddleware]:
    """Any valid credential, with or without an organization (e.g. creating the first organization);
    `sessions_only`: a signed-in user's session, API keys refused (the caller's own user, sessions, profile)."""
    return [AccessMiddleware(Access("authenticated", sessions_only=sessions_only))]


def public() -> list[AccessMiddleware]:
    return [AccessMiddleware(Access("public"))]


def route_access(route: Any) -> Access | None:
    """The Access a route declared: the resolver's `RouteSpec.access`, or the `AccessMiddleware` among a route's
    middlewares."""
    access = getattr(route, "access", None)
    if isinstance(access, Access):
        return access
    for mw in getattr(route, "middlewares", []) or []:
        if isinstance(mw, AccessMiddleware):
            return mw.access
    return None
