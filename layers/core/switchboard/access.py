"""Who is acting: the caller as the authorizer described it, and the roles of an organization.

Neutral ground: the API layer builds an `AuthContext` per request, and every domain and worker module takes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from switchboard.errors import Forbidden

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
