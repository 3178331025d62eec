"""The caller, as the authorizer described it, and the per-route role requirement."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from switchboard.errors import Forbidden, Unauthenticated

Role = Literal["owner", "admin", "member", "viewer"]
ROLE_RANK: dict[str, int] = {"viewer": 1, "member": 2, "admin": 3, "owner": 4}
ROLES: tuple[Role, ...] = ("owner", "admin", "member", "viewer")


@dataclass(frozen=True)
class AuthContext:
    principal_type: str  # "api_key" | "session"
    principal_id: str  # key id or session id: who acted, as recorded in audit logs
    user_id: str | None
    organization_id: str | None
    role: str | None
    credential_id: str
    org_status: str | None = None  # "pending_deletion" while the organization awaits its purge (else absent)

    @classmethod
    def from_authorizer(cls, ctx: dict[str, Any] | None) -> AuthContext | None:
        if not ctx or not ctx.get("principal_type"):
            return None
        return _auth_context(
            ctx["principal_type"],
            ctx.get("principal_id") or ctx.get("principalId"),
            ctx.get("user_id"),
            ctx.get("organization_id"),
            ctx.get("role"),
            ctx.get("credential_id"),
            ctx.get("org_status"),
        )

    def to_authorizer_context(self) -> dict[str, str]:
        """What the authorizer returns as `context` (API Gateway only carries flat string values)."""
        context = {
            "principal_type": self.principal_type,
            "principal_id": self.principal_id,
            "user_id": self.user_id or "",
            "organization_id": self.organization_id or "",
            "role": self.role or "",
            "credential_id": self.credential_id,
        }
        if self.org_status:
            context["org_status"] = self.org_status
        return context

    def has_role(self, minimum: str) -> bool:
        return ROLE_RANK.get(self.role or "", 0) >= ROLE_RANK[minimum]

    @property
    def org_id(self) -> str:
        """The organization the request acts in; 403 when the credential has none (a session with no org yet)."""
        if not self.organization_id:
            raise Forbidden("Select an organization with X-Organization-Id, or create one first.")
        return self.organization_id

    @property
    def scope(self) -> str:
        """The partition that request-scoped records (idempotency) belong to."""
        return f"ORG#{self.organization_id}" if self.organization_id else f"USER#{self.user_id}"


@lru_cache(maxsize=256)
def _auth_context(
    principal_type: Any,
    principal_id: Any,
    user_id: Any,
    organization_id: Any,
    role: Any,
    credential_id: Any,
    org_status: Any = None,
) -> AuthContext:
    """An authorizer context's values → its AuthContext, kept for the container: a warm function serves the same
    few callers again and again, and the object is immutable."""
    return AuthContext(
        principal_type=str(principal_type),
        principal_id=str(principal_id or ""),
        user_id=str(user_id) if user_id else None,
        organization_id=str(organization_id) if organization_id else None,
        role=str(role) if role else None,
        credential_id=str(credential_id or ""),
        org_status=str(org_status) if org_status else None,
    )


@dataclass(frozen=True)
class Access:
    """What a route requires: `public`, any authenticated caller, or a minimum role in the organization.

    While the organization is pending deletion only routes with `when_pending` (the role they then need) act in it;
    every other organization route answers 403 (CONVENTIONS "Tenant safety and data lifecycle"). A `sessions_only`
    route refuses API keys (403) whatever their role: a person must act (deleting or restoring the organization)."""

    kind: Literal["public", "authenticated", "role"]
    role: str | None = None
    when_pending: str | None = None
    sessions_only: bool = False

    def check(self, auth: AuthContext | None) -> None:
        if self.kind == "public":
            return
        if auth is None:
            raise Unauthenticated()
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
        from switchboard.api.context import current_auth_optional

        self.access.check(current_auth_optional(app))
        return next_middleware(app)


def requires(role: Role, *, when_pending: Role | None = None, sessions_only: bool = False) -> list[AccessMiddleware]:
    """`middlewares=requires("admin")`: the caller's role in the organization must be at least `role`;
    `when_pending`: the route also serves an organization pending deletion, to that role or higher;
    `sessions_only`: API keys are refused whatever their role."""
    return [AccessMiddleware(Access("role", role, when_pending, sessions_only))]


def authenticated() -> list[AccessMiddleware]:
    """Any valid credential, with or without an organization (e.g. creating the first organization)."""
    return [AccessMiddleware(Access("authenticated"))]


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
