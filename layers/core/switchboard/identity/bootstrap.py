"""The first credential of a stack: an owner user (e-mail verified), the organization, and API keys, in one
transaction. Every non-public route needs a key — registration and login included (CONVENTIONS "Account flows": the
calling app's key of the platform in `X-Api-Key`) — so an empty table has no way in but this.

- `bootstrap_organization`: the items, shared by the local stack and the tests (at every start, on a fresh table)
  and by `bootstrap_stage`.
- `bootstrap_stage`: what an operator runs once after `sam deploy` (`make bootstrap STAGE=dev OWNER_EMAIL=…`, the
  CLI below). Besides the owner key (`owner`, for administration) it makes a sign-up key (`viewer`): the key the
  platform's app sends on the pre-session routes (register, verify an e-mail, log in, reset a password), which can
  read nothing but the platform organization and change nothing. It writes the stage's marker `BOOTSTRAP` in the same
  transaction, on condition that none exists: a second run (or two at once) never makes a second owner; it reports
  the first one, and with `new_key` mints another owner key for it. Keys and the generated password are shown once
  (printed, never stored in plain text, never in a stack output); the owner changes the password with the password
  reset flow once mail works.

The CLI reads the stack's outputs with CloudFormation DescribeStacks (stack `switchboard-<stage>`, or the
`stack_name` of that environment in samconfig.toml): `TableName`, `ApiKeyMode`, `TenantShards` (the audit entries'
partitions), `ApiUrl`; `--table-name` (with `--key-mode`, `--tenant-shards`) skips CloudFormation. It then says
whether SES can send from the stack's `MailSender` (identity verified, account out of the sandbox), the next step
of docs/operations.md. It needs no function's environment: nothing it writes depends on the stage's settings.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from switchboard import aws, clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.errors import Conflict, Forbidden
from switchboard.identity import repository
from switchboard.identity.apikeys import member_key_op
from switchboard.identity.credentials import display_prefix, hash_token, new_api_key
from switchboard.identity.passwords import hash_password
from switchboard.identity.security import get_security
from switchboard.ids import new_id
from switchboard.store import Put, Store, TxOp

MARKER = {"PK": "PLATFORM#BOOTSTRAP", "SK": "BOOTSTRAP"}
OWNER_KEY_NAME = "bootstrap owner"
SIGNUP_KEY_NAME = "sign-up (pre-session routes)"
DEFAULT_TENANT_SHARDS = 16  # template.yaml's TenantShards default (--tenant-shards when a stage raised it)


@dataclass(frozen=True)
class Bootstrapped:
    organization_id: str
    user_id: str
    api_key_id: str
    api_key: str
    owner_email: str
    owner_password: str
    signup_key_id: str | None = None
    signup_key: str | None = None


def bootstrap_organization(
    store: Store,
    *,
    org_name: str,
    owner_email: str,
    owner_password: str,
    api_key: str | None,
    key_mode: str,
    owner_name: str = "Local Owner",
    signup_key: bool = False,
    extra: Sequence[TxOp] = (),
    org_id: str | None = None,
    user_id: str | None = None,
) -> Bootstrapped:
    """The owner (e-mail verified), the organization, the owner's API key (`api_key`, or a new one) and, with
    `signup_key`, a viewer key, plus `extra` operations, in one transaction."""
    org_id, user_id, key_id = org_id or new_id("org"), user_id or new_id("usr"), new_id("key")
    owner_email = owner_email.strip().lower()
    plain = api_key or new_api_key(key_mode)
    user = repository.user_item(user_id, owner_email, owner_name, hash_password(owner_password), verified=True)
    token_hash = hash_token(plain)
    _, key_ops = repository.api_key_ops(
        org_id, key_id, OWNER_KEY_NAME, "owner", token_hash, display_prefix(plain), user_id, creator_role="owner"
    )
    owned = {repository.key_entry(key_id, token_hash)}
    signup_id, signup_plain = None, None
    if signup_key:
        signup_id, signup_plain = new_id("key"), new_api_key(key_mode)
        signup_hash = hash_token(signup_plain)
        _, signup_ops = repository.api_key_ops(
            org_id,
            signup_id,
            SIGNUP_KEY_NAME,
            "viewer",
            signup_hash,
            display_prefix(signup_plain),
            user_id,
            creator_role="owner",
        )
        key_ops += signup_ops
        owned.add(repository.key_entry(signup_id, signup_hash))
    store.transact(
        [
            *repository.user_ops(user),
            repository.Put(item=repository.organization_item(org_id, org_name, user_id), condition=None),
            *repository.membership_ops(org_id, user_id, "owner", owner_email, owner_name, api_keys=owned),
            *key_ops,
            *extra,
        ]
    )
    return Bootstrapped(org_id, user_id, key_id, plain, owner_email, owner_password, signup_id, signup_plain)


# A deployed stage ---------------------------------------------------------------------------------------------------
@dataclass
class StageBootstrap:
    """What `bootstrap_stage` did: `created` (the owner, organization and keys are new), or the existing owner, with
    `new_key` when one was minted. Plain keys and the password are here once, for printing."""

    created: bool
    organization_id: str
    user_id: str
    owner_email: str
    bootstrapped_at: str
    owner_password: str | None = None
    keys: dict[str, str] = field(default_factory=dict)  # what → plain key


class BootstrapRefused(Exception):
    """The stage cannot be bootstrapped as asked (the e-mail has an account, the first owner left, …)."""


def _operator(org_id: str, user_id: str) -> AuthContext:
    return AuthContext("operator", "bootstrap", user_id, org_id, "owner", "bootstrap")


def bootstrap_stage(
    store: Store,
    *,
    owner_email: str,
    owner_name: str,
    org_name: str,
    key_mode: str,
    tenant_shards: int = DEFAULT_TENANT_SHARDS,
    new_key: bool = False,
) -> StageBootstrap:
    marker = store.get(MARKER, consistent=True)
    if marker is None:
        password = secrets.token_urlsafe(18)
        now = clock.now_iso()
        org_id, user_id = new_id("org"), new_id("usr")
        email = owner_email.strip().lower()
        record = Put(  # ids only: nothing secret
            item={
                **MARKER,
                "entity": "Bootstrap",
                "organization_id": org_id,
                "user_id": user_id,
                "owner_email": email,
                "created_at": now,
            },
            condition="attribute_not_exists(PK)",
            error=Conflict("The stage was bootstrapped meanwhile."),
        )
        try:
            boot = bootstrap_organization(
                store,
                org_name=org_name,
                owner_email=owner_email,
                owner_password=password,
                api_key=None,
                key_mode=key_mode,
                owner_name=owner_name,
                signup_key=True,
                extra=[record],
                org_id=org_id,
                user_id=user_id,
            )
        except Conflict as err:
            if store.get(MARKER, consistent=True) is not None:  # another run won the race: report its owner
                return bootstrap_stage(
                    store,
                    owner_email=owner_email,
                    owner_name=owner_name,
                    org_name=org_name,
                    key_mode=key_mode,
                    tenant_shards=tenant_shards,
                    new_key=new_key,
                )
            raise BootstrapRefused(f"{email} has an account already; bootstrap with another e-mail.") from err
        assert boot.signup_key is not None
        return StageBootstrap(
            created=True,
            organization_id=boot.organization_id,
            user_id=boot.user_id,
            owner_email=boot.owner_email,
            bootstrapped_at=now,
            owner_password=password,
            keys={"owner": boot.api_key, "sign-up": boot.signup_key},
        )
    report = StageBootstrap(
        created=False,
        organization_id=str(marker.get("organization_id", "")),
        user_id=str(marker.get("user_id", "")),
        owner_email=str(marker.get("owner_email", "")),
        bootstrapped_at=str(marker["created_at"]),
    )
    if new_key:
        report.keys["owner"] = mint_owner_key(store, report.organization_id, report.user_id, key_mode, tenant_shards)
    return report


def mint_owner_key(store: Store, org_id: str, user_id: str, key_mode: str, tenant_shards: int) -> str:
    """Another owner key for the bootstrap owner, made as `POST /v1/api-keys` makes one (tied to the member, within
    the organization's key rules), audited as the operator's; → the plain key (shown once)."""
    plain, key_id = new_api_key(key_mode), new_id("key")
    token_hash = hash_token(plain)
    try:
        role, member_op = member_key_op(store, org_id, user_id, key_id, token_hash)
    except (Forbidden, Conflict) as err:
        raise BootstrapRefused(f"no key minted: {err}") from err
    if role != "owner":
        raise BootstrapRefused(f"no key minted: the bootstrap owner is {role} now, not owner")
    name = f"{OWNER_KEY_NAME} {clock.now_iso()[:10]}"
    _, key_ops = repository.api_key_ops(
        org_id,
        key_id,
        name,
        "owner",
        token_hash,
        display_prefix(plain),
        user_id,
        allowed_cidrs=get_security(store, org_id).api_key_allowed_cidrs,
        creator_role=role,
    )
    audit = audit_put(
        _operator(org_id, user_id),
        "api_key.created",
        "api_key",
        key_id,
        after={"name": name, "role": "owner"},
        shard_count=tenant_shards,
    )
    try:
        store.transact([*key_ops, member_op, repository.organization_active_check(org_id), audit])
    except Conflict as err:
        raise BootstrapRefused(f"no key minted: {err}") from err
    return plain


# The operator's command ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """Where to write: the table and what the stage's keys look like, from the stack's outputs or the arguments."""

    table_name: str
    key_mode: str
    tenant_shards: int
    stack_name: str | None = None
    api_url: str | None = None
    mail_sender: str | None = None


def stack_name_for(stage: str, samconfig: Path) -> str:
    """samconfig.toml's `stack_name` of the stage's deploy environment, else `switchboard-<stage>`."""
    if samconfig.exists():
        config = tomllib.loads(samconfig.read_text())
        name = (config.get(stage, {}).get("deploy", {}).get("parameters", {}) or {}).get("stack_name")
        if name:
            return str(name)
    return f"switchboard-{stage}"


REQUIRED_OUTPUTS = ("TableName", "ApiKeyMode")
OPTIONAL_OUTPUTS = ("TenantShards", "ApiUrl")


def from_stack(stack_name: str) -> Target:
    """The stack's outputs (and its MailSender parameter) through CloudFormation DescribeStacks."""
    (stack,) = aws.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
    parameters = {p["ParameterKey"]: p.get("ParameterValue") for p in stack.get("Parameters") or []}
    missing = [k for k in REQUIRED_OUTPUTS if k not in outputs]
    if missing:
        raise BootstrapRefused(f"stack {stack_name} has no output {', '.join(missing)}: deploy this version first")
    return Target(
        table_name=outputs["TableName"],
        key_mode=outputs["ApiKeyMode"],
        tenant_shards=int(outputs.get("TenantShards") or DEFAULT_TENANT_SHARDS),
        stack_name=stack_name,
        api_url=outputs.get("ApiUrl"),
        mail_sender=parameters.get("MailSender"),
    )


def ses_status(mail_sender: str) -> list[str]:
    """Lines saying whether SES sends from `mail_sender` in this region: its identity (the address, or its domain)
    verified for sending, and the account out of the sandbox. Never raises: it advises."""
    sesv2 = aws.client("sesv2")
    lines: list[str] = []
    verified = None
    for identity in (mail_sender, mail_sender.rpartition("@")[2]):
        try:
            found = sesv2.get_email_identity(EmailIdentity=identity)
        except Exception:  # noqa: BLE001, S112 - not an identity (NotFoundException), or no permission to look
            continue
        if found.get("VerifiedForSendingStatus") or found.get("VerificationStatus") == "SUCCESS":
            verified = identity
            break
    if verified:
        lines.append(f"SES: {mail_sender} can send (identity {verified} is verified).")
    else:
        lines.append(
            f"SES: {mail_sender} is NOT a verified identity here: verify it (or its domain) before any mail goes out "
            "(docs/operations.md, 'SES identity and the sandbox')."
        )
    try:
        account = sesv2.get_account()
    except Exception as err:  # noqa: BLE001 - advice only
        lines.append(f"SES: the account's sending status could not be read ({type(err).__name__}).")
        return lines
    if not account.get("SendingEnabled", True):
        lines.append("SES: sending is paused for this account in this region.")
    if not account.get("ProductionAccessEnabled"):
        lines.append(
            "SES: the account is in the sandbox: mail reaches verified addresses only, 200 a day; request production "
            "access before anyone else signs up."
        )
    return lines


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m switchboard.identity.bootstrap",
        description="The first owner, organization and API keys of a deployed stage (run once after sam deploy).",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stage", help="dev | staging | prod: the stack from samconfig.toml (or switchboard-<stage>)")
    where.add_argument("--stack-name", help="the CloudFormation stack, by name")
    where.add_argument("--table-name", help="the table itself (no CloudFormation): give --key-mode and --tenant-shards")
    parser.add_argument("--owner-email", required=True)
    parser.add_argument("--owner-name", default="Owner")
    parser.add_argument("--org-name", default="Platform")
    parser.add_argument("--new-key", action="store_true", help="bootstrapped already: mint another owner key")
    parser.add_argument("--key-mode", choices=["test", "live"], default="test", help="with --table-name")
    parser.add_argument("--tenant-shards", type=int, default=DEFAULT_TENANT_SHARDS, help="with --table-name")
    parser.add_argument("--samconfig", default="samconfig.toml", help="where --stage finds the stack name")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    try:
        if args.table_name:
            target = Target(args.table_name, args.key_mode, args.tenant_shards)
        else:
            target = from_stack(args.stack_name or stack_name_for(args.stage, Path(args.samconfig)))
        result = bootstrap_stage(
            Store(target.table_name),
            owner_email=args.owner_email,
            owner_name=args.owner_name,
            org_name=args.org_name,
            key_mode=target.key_mode,
            tenant_shards=target.tenant_shards,
            new_key=args.new_key,
        )
    except BootstrapRefused as err:
        print(f"bootstrap refused: {err}", file=sys.stderr)
        return 1
    print(_report(target, result, asked=args.owner_email.strip().lower()))
    return 0


def _report(target: Target, result: StageBootstrap, *, asked: str) -> str:
    where = f"stack {target.stack_name}, " if target.stack_name else ""
    lines = []
    if result.created:
        lines.append(f"Bootstrapped ({where}table {target.table_name}). Shown once, keep them now:")
    else:
        lines.append(f"Bootstrapped already on {result.bootstrapped_at} ({where}table {target.table_name}):")
    lines += [
        f"  Organization:   {result.organization_id}",
        f"  Owner:          {result.owner_email} ({result.user_id})",
    ]
    if not result.created and asked != result.owner_email:
        lines.append(f"  ({asked} was not made an owner: the stage has its first owner.)")
    if not result.created and result.keys:
        lines.append("  A new key, shown once:")
    if result.owner_password:
        lines.append(f"  Owner password: {result.owner_password}  (change it: POST /v1/auth/password/reset)")
    if "owner" in result.keys:
        lines.append(f"  Owner API key:  {result.keys['owner']}  (role owner: administration, your scripts)")
    if "sign-up" in result.keys:
        lines.append(
            f"  Sign-up key:    {result.keys['sign-up']}  (role viewer: the X-Api-Key your app sends on register, "
            "e-mail verification, login and password reset)"
        )
    if not result.created and not result.keys:
        lines.append("  No key was made. Another owner key: run again with NEW_KEY=1 (--new-key).")
    if target.api_url and "owner" in result.keys:
        lines.append(f'  Try:            curl -H "X-Api-Key: {result.keys["owner"]}" {target.api_url}/v1/organization')
    if target.mail_sender:
        lines += ses_status(target.mail_sender)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
