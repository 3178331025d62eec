"""Accounts: registration with one-time codes, login, password reset, the caller's own profile and state."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.config import get_settings
from switchboard.errors import Conflict, Forbidden, NotFound, Unauthenticated, ValidationFailed
from switchboard.identity import models, otp, repository, sessions
from switchboard.identity.passwords import dummy_hash, hash_password, verify_password
from switchboard.ids import new_id, new_ulid
from switchboard.mail import Mail, code_text, mail_put
from switchboard.ratelimit import backoff_clear, backoff_fail, backoff_wait, hit
from switchboard.store import Delete, Put, Store, keys

REGISTER = "register"
RESET = "reset"
WINDOW = 15 * 60
CODES_SENT_PER_WINDOW = 5


def normalize_email(email: str) -> str:
    return email.strip().lower()


def split_name(name: str) -> tuple[str, str]:
    parts = name.split()
    if not parts:
        return "", ""
    return parts[0], " ".join(parts[1:])


def user_view(item: dict[str, Any]) -> models.User:
    first, last = split_name(item.get("name") or "")
    return models.User(
        id=item["id"],
        email=item["email"],
        email_verified=bool(item.get("email_verified")),
        name=item.get("name") or "",
        image=item.get("image") or "",
        timezone=item.get("timezone") or "UTC",
        week_start=item.get("week_start") or "monday",
        created_at=item["created_at"],
        first_name=first,
        last_name=last,
    )


def require_user(auth: AuthContext) -> str:
    if auth.principal_type != "session" or not auth.user_id:
        raise Forbidden("This operation needs a signed-in user (session token), not an API key.")
    return auth.user_id


def get_user(store: Store, user_id: str) -> dict[str, Any]:
    return store.require(keys.user(user_id), "The user no longer exists.")


# Limits of the pre-session routes (CONVENTIONS "Tenant safety") ---------------------------------------------------
def limit_client(store: Store, ip: str | None) -> None:
    """Count a pre-session auth request against its client IP's budget (429 once spent)."""
    if ip:
        settings = get_settings()
        hit(store, f"auth-ip:{ip}", limit=settings.auth_ip_limit, window_seconds=settings.auth_window_seconds)


def limit_request(store: Store, email: str, ip: str | None) -> None:
    """Count a pre-session auth request about `email` against its client IP's budget and the e-mail's (429 once
    either is spent). Login counts the e-mail per (e-mail, IP) instead (`login`): nobody can lock an account out."""
    limit_client(store, ip)
    settings = get_settings()
    hit(store, f"auth-email:{email}", limit=settings.auth_email_limit, window_seconds=settings.auth_window_seconds)


# Codes ------------------------------------------------------------------------------------------------------------
def _code_bucket(purpose: str, email: str, ip: str | None) -> str:
    return f"code:{purpose}:{email}:{ip or '-'}"


def _check_code(store: Store, purpose: str, email: str, code: str, *, ip: str | None, consume: bool = True) -> None:
    """Wrong codes slow down per (purpose, e-mail, client IP), as wrong passwords do: after a few, each further try
    from there waits a delay that doubles with every failure (429 with Retry-After), and the right code then still
    works. A flood of guesses from one place never blocks the owner's code elsewhere (a wrong code voids nothing);
    a new code clears the delay of the address that asked for it."""
    settings = get_settings()
    bucket = _code_bucket(purpose, email, ip)
    failures = backoff_wait(
        store,
        bucket,
        free=settings.login_failures_before_delay,
        base_seconds=settings.login_delay_base_seconds,
        max_seconds=settings.login_delay_max_seconds,
    )
    try:
        otp.verify(store, purpose, email, code, consume=consume)
    except ValidationFailed:
        backoff_fail(store, bucket)
        raise
    if failures:
        backoff_clear(store, bucket)


def _issue_code(store: Store, purpose: str, email: str, ip: str | None) -> otp.Issued:
    """A new code for (purpose, e-mail), replacing the old one when the caller's transaction commits; the asking
    address starts without a delay."""
    issued = otp.issue(purpose, email)
    backoff_clear(store, _code_bucket(purpose, email, ip))
    return issued


def request_email_verification(store: Store, email: str, *, ip: str | None = None) -> None:
    """The code and the mail that carries it are written together (switchboard.mail): the mail goes out after."""
    email = normalize_email(email)
    limit_request(store, email, ip)
    hit(store, f"send:{REGISTER}:{email}", limit=CODES_SENT_PER_WINDOW, window_seconds=WINDOW)
    issued = _issue_code(store, REGISTER, email, ip)
    minutes = int(otp.CODE_TTL.total_seconds() // 60)
    store.transact(
        [
            issued.put,
            mail_put(
                Mail(
                    to=email,
                    subject="Your Switchboard verification code",
                    text=code_text("verification", issued.code, minutes),
                    expires_at=issued.expires_at,
                )
            ),
        ]
    )


def confirm_email(store: Store, email: str, code: str, *, ip: str | None = None) -> None:
    email = normalize_email(email)
    limit_request(store, email, ip)
    _check_code(store, REGISTER, email, code, ip=ip)
    otp.mark_verified(store, REGISTER, email)


def _create_user(store: Store, email: str, password: str, name: str | None, extra: list[Any]) -> models.User:
    user_id = new_id("usr")
    item = repository.user_item(user_id, email, (name or "").strip(), hash_password(password), verified=True)
    store.transact([*repository.user_ops(item), *extra])
    return user_view(item)


def register(store: Store, body: models.Register, *, ip: str | None = None) -> models.User:
    """`POST /v1/auth/register`: needs an e-mail verified by `email-verification/confirm` (used up here). Without
    one the answer is 400 `email_not_verified` whether or not the e-mail has an account (no enumeration); only a
    verified e-mail that already has an account answers 409."""
    email = normalize_email(body.email)
    limit_request(store, email, ip)
    marker = otp.verified_marker_key(REGISTER, email)
    now = clock.epoch(clock.now())
    not_verified = ValidationFailed(
        "Verify the e-mail with a one-time code first.",
        code="email_not_verified",
        details=[{"field": "body.email", "message": "not verified"}],
    )
    verified = store.get(marker, consistent=True)
    if verified is None or int(verified.get("expires_at", 0)) <= now:
        raise not_verified
    if store.get(keys.user_email(email), consistent=True):
        raise Conflict("An account with this e-mail already exists.")
    use_marker = Delete(
        key=marker, condition="attribute_exists(PK) AND expires_at > :now", values={":now": now}, error=not_verified
    )
    return _create_user(store, email, body.password, body.name, [use_marker])


def register_verify(store: Store, body: models.RegisterVerify, *, ip: str | None = None) -> models.User:
    """`POST /v1/auth/register/verify`: verifies the code and registers in one step. The code is checked first: an
    e-mail that has an account answers 409 only after a right code (no enumeration)."""
    email = normalize_email(body.email)
    limit_request(store, email, ip)
    _check_code(store, REGISTER, email, body.otp_code, ip=ip)
    if store.get(keys.user_email(email), consistent=True):
        raise Conflict("An account with this e-mail already exists.")
    return _create_user(store, email, body.password, body.name, [])


def login(store: Store, body: models.Login, *, ip: str | None, user_agent: str | None) -> models.LoginResult:
    """Failed logins slow down per (e-mail, client IP): after a few, each further attempt from there waits a delay
    that doubles with every failure (429 with Retry-After), so a flood from one place never locks the account out
    elsewhere. An unknown e-mail is checked against a dummy hash: the same work, the same answer."""
    email = normalize_email(body.email)
    limit_client(store, ip)
    settings = get_settings()
    bucket = f"login:{email}:{ip or '-'}"
    failures = backoff_wait(
        store,
        bucket,
        free=settings.login_failures_before_delay,
        base_seconds=settings.login_delay_base_seconds,
        max_seconds=settings.login_delay_max_seconds,
    )
    sentinel = store.get(keys.user_email(email), consistent=True)
    user = store.get(keys.user(sentinel["user_id"]), consistent=True) if sentinel else None
    matches = verify_password((user or {}).get("password_hash") or dummy_hash(), body.password)
    if user is None or not matches:
        backoff_fail(store, bucket)
        raise Unauthenticated("The e-mail or the password is wrong.")
    if failures:
        backoff_clear(store, bucket)
    token, _sid, expires_at = sessions.create_session(store, user["id"], ip=ip, user_agent=user_agent)
    return models.LoginResult(token=token, expires_at=expires_at, user=user_view(user))


def logout(store: Store, auth: AuthContext) -> None:
    user_id = require_user(auth)
    sessions.revoke(store, user_id, auth.principal_id)


def request_password_reset(store: Store, email: str, *, ip: str | None = None) -> None:
    """Always 202: whether the e-mail has an account is not revealed."""
    email = normalize_email(email)
    limit_request(store, email, ip)
    hit(store, f"send:{RESET}:{email}", limit=CODES_SENT_PER_WINDOW, window_seconds=WINDOW)
    if store.get(keys.user_email(email), consistent=True) is None:
        return
    issued = _issue_code(store, RESET, email, ip)
    minutes = int(otp.CODE_TTL.total_seconds() // 60)
    store.transact(
        [
            issued.put,
            mail_put(
                Mail(
                    to=email,
                    subject="Reset your Switchboard password",
                    text=code_text("password reset", issued.code, minutes)
                    + " If you did not ask for it, ignore this e-mail.",
                    expires_at=issued.expires_at,
                )
            ),
        ]
    )


def confirm_password_reset(store: Store, body: models.PasswordConfirm, *, ip: str | None = None) -> int:
    """Set the new password and end every session of the user. Returns how many sessions ended."""
    email = normalize_email(body.email)
    limit_request(store, email, ip)
    _check_code(store, RESET, email, body.otp_code, ip=ip)
    sentinel = store.get(keys.user_email(email), consistent=True)
    if sentinel is None:
        raise ValidationFailed("The code is wrong or has expired.", code="invalid_otp")
    store.update(
        keys.user(sentinel["user_id"]),
        "SET password_hash = :h, updated_at = :now ADD version :one",
        condition="attribute_exists(PK)",
        values={":h": hash_password(body.password), ":now": clock.now_iso(), ":one": 1},
        return_values="NONE",
    )
    return sessions.revoke_all(store, sentinel["user_id"])


# The caller's own profile and state ---------------------------------------------------------------------------------
def update_profile(store: Store, auth: AuthContext, body: models.ProfileUpdate) -> models.User:
    user_id = require_user(auth)
    changes = body.model_dump(exclude_none=True)
    if not changes:
        return user_view(get_user(store, user_id))
    names = {f"#{k}": k for k in changes}
    values: dict[str, Any] = {f":{k}": v for k, v in changes.items()}
    values[":now"] = clock.now_iso()
    values[":one"] = 1
    expr = "SET " + ", ".join(f"#{k} = :{k}" for k in changes) + ", updated_at = :now ADD version :one"
    item = store.update(
        keys.user(user_id),
        expr,
        condition="attribute_exists(PK)",
        names=names,
        values=values,
        error=NotFound("The user no longer exists."),
    )
    assert item is not None
    return user_view(item)


def _user_doc_key(user_id: str, name: str) -> dict[str, str]:
    return {"PK": keys.user_pk(user_id), "SK": name}


def get_preferences(store: Store, auth: AuthContext) -> models.Preferences:
    item = store.get(_user_doc_key(require_user(auth), "PREFERENCES")) or {}
    return models.Preferences(preferences=item.get("preferences") or {})


def put_preferences(store: Store, auth: AuthContext, body: models.Preferences) -> models.Preferences:
    user_id = require_user(auth)
    store.put(
        {
            **_user_doc_key(user_id, "PREFERENCES"),
            "entity": "Preferences",
            "preferences": body.preferences,
            "updated_at": clock.now_iso(),
        }
    )
    return body


def get_presence(store: Store, auth: AuthContext) -> models.PresenceView:
    item = store.get(_user_doc_key(require_user(auth), "PRESENCE"))
    if item is None:
        return models.PresenceView(status="offline", message=None, updated_at=clock.now_iso())
    return models.PresenceView(status=item["status"], message=item.get("message"), updated_at=item["updated_at"])


def put_presence(store: Store, auth: AuthContext, body: models.Presence) -> models.PresenceView:
    user_id = require_user(auth)
    view = models.PresenceView(status=body.status, message=body.message, updated_at=clock.now_iso())
    store.put({**_user_doc_key(user_id, "PRESENCE"), "entity": "Presence", **view.model_dump()})
    return view


def get_onboarding(store: Store, auth: AuthContext) -> models.Onboarding:
    item = store.get(_user_doc_key(require_user(auth), "ONBOARDING")) or {}
    steps = sorted(item.get("steps") or [])
    return models.Onboarding(
        completed_steps=steps, completed=bool(item.get("completed")), updated_at=item.get("updated_at")
    )


ONBOARDING_STEPS = ("profile", "organization", "channel", "invite_team", "first_message")


def update_onboarding(store: Store, auth: AuthContext, body: models.OnboardingStep) -> models.Onboarding:
    user_id = require_user(auth)
    key = _user_doc_key(user_id, "ONBOARDING")
    item = store.get(key, consistent=True) or {}
    steps = set(item.get("steps") or [])
    if body.completed:
        steps.add(body.step)
    else:
        steps.discard(body.step)
    now = clock.now_iso()
    done = all(s in steps for s in ONBOARDING_STEPS)
    store.put({**key, "entity": "Onboarding", "steps": sorted(steps), "completed": done, "updated_at": now})
    return models.Onboarding(completed_steps=sorted(steps), completed=done, updated_at=now)


def record_fingerprint(store: Store, auth: AuthContext, body: models.FingerprintEvent) -> str:
    event_id = f"fpe_{new_ulid().lower()}"
    now = clock.now()
    store.put(
        Put(
            item={
                "PK": f"FINGERPRINT#{body.telemetry_id}",
                "SK": event_id,
                "entity": "FingerprintEvent",
                "id": event_id,
                "event_type": body.event_type,
                "occurred_at": body.occurred_at or clock.iso(now),
                "properties": body.properties,
                "user_id": auth.user_id,
                "organization_id": auth.organization_id,
                "received_at": clock.iso(now),
                "ttl": clock.epoch(now + timedelta(days=90)),
            }
        ).item
    )
    return event_id
