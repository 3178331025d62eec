"""Key builders: the only place that spells a partition or sort key.

Tenant items live in `ORG#<org_id>`; global lookups that happen before the organization is known use their own
partitions (credential hashes, e-mail sentinels). docs/data-model.md lists every access pattern against these.
"""

from __future__ import annotations

Key = dict[str, str]


def org_pk(org_id: str) -> str:
    return f"ORG#{org_id}"


def key(pk: str, sk: str) -> Key:
    return {"PK": pk, "SK": sk}


# Organization-scoped items ---------------------------------------------------------------------------------------
def organization(org_id: str) -> Key:
    return key(org_pk(org_id), "ORG")


def member(org_id: str, user_id: str) -> Key:
    return key(org_pk(org_id), f"MEMBER#{user_id}")


def api_key_record(org_id: str, key_id: str) -> Key:
    return key(org_pk(org_id), f"APIKEY#{key_id}")


def idempotency(scope: str, digest: str) -> Key:
    return key(scope, f"IDEMP#{digest}")


# Global lookups ---------------------------------------------------------------------------------------------------
def credential(token_hash: str) -> Key:
    """API key or session token, by the SHA-256 of its plain value."""
    return key(f"CRED#{token_hash}", "CRED")


def user(user_id: str) -> Key:
    return key(f"USER#{user_id}", "USER")


def user_email(email: str) -> Key:
    return key(f"EMAIL#{email}", "EMAIL")


def user_pk(user_id: str) -> str:
    return f"USER#{user_id}"


def job(job_id: str) -> Key:
    """A background job (switchboard.jobs): its own partition, so a job outlives the data it erases."""
    return key(f"JOB#{job_id}", "JOB")


# Sparse GSI1 partitions (only the items that need the second path carry these keys) ---------------------------------
PURGE_DUE = "ORGPURGE"  # organizations pending deletion; GSI1SK = `<purge_at>#<org_id>`
JOBS_ACTIVE = "JOBS#active"  # jobs not finished yet; GSI1SK = `<updated_at>#<job_id>`
ERASURES_SETTLING = "ERASURES#settling"  # contact erasures waiting for their second pass; GSI1SK = `<due>#<org>#<ct>`


READY_PROBE: Key = key("SYSTEM#ready", "PROBE")
