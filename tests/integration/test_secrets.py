"""Nothing secret is stored or logged in plain text (CONVENTIONS "Authentication and tenancy"): passwords (argon2id),
one-time codes, session tokens, API keys and invitation tokens (SHA-256) — through a full account flow, with every
log line of the flow captured and every item of the table scanned afterwards.

Every item is scanned, the queued mails included: a mail is an outbox event whose content is sealed (switchboard.mail)
until the mail sender hands it to SES, so the table never holds a code or an invitation token readable — while the
mails SES received (moto's) do carry them, which proves the scan looked at a flow that really mailed them.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from local.ses import sent_mail
from switchboard.config import get_settings
from tests.integration.support import PASSWORD, Api, latest_code

# Loggers of the code under test: the functions (Powertools, service "switchboard") and the local gateway emulation.
# botocore's DEBUG output is not ours and would show the SES requests (the e-mails) verbatim.
OUR_LOGGERS = ("switchboard", "local")


@dataclass
class Secrets:
    passwords: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)  # what → plain value (session tokens, API keys, invitation)

    def plain_values(self) -> dict[str, str]:
        named = {f"password {i}": p for i, p in enumerate(self.passwords)}
        return {**named, **self.tokens}


@pytest.fixture
def captured_logs(api: Api, caplog) -> Iterator[io.StringIO]:
    """Every record of our loggers at DEBUG, formatted exactly as the functions write it (Powertools JSON), whatever
    stream the Powertools handler was bound to when the logger was first built; caplog and capfd see them too.

    Powertools keeps its own handler first on the service logger (it reuses `handlers[0]` when the functions are
    imported again), so a request is made first, to have the functions build their loggers, and ours are appended.
    """
    assert api.get("/v1/organization").status_code == 200
    sink = io.StringIO()
    handlers: list[tuple[logging.Logger, logging.Handler]] = []
    for name in OUR_LOGGERS:
        logger = logging.getLogger(name)
        caplog.set_level(logging.DEBUG, logger=name)
        mirror = logging.StreamHandler(sink)
        if logger.handlers and logger.handlers[0].formatter is not None:
            mirror.setFormatter(logger.handlers[0].formatter)
        for handler in (mirror, caplog.handler):
            logger.addHandler(handler)
            handlers.append((logger, handler))
    try:
        yield sink
    finally:
        for logger, handler in handlers:
            logger.removeHandler(handler)


def _mail_token(api: Api, email: str) -> str:
    text = api.mail(email)[0]["text"]
    match = re.search(r"#token=([A-Za-z0-9_-]+)", text)
    assert match, text
    return match.group(1)


def run_account_flow(api: Api) -> Secrets:
    """Codes, registration both ways, logins, API keys, a password reset, an invitation accepted with its token, and a
    few refusals (wrong password, wrong code, revoked key) whose inputs must not be logged either."""
    s = Secrets()
    s.tokens["bootstrap owner API key"] = api.owner_key
    alice, alice_pw, alice_new_pw = "alice.secret@example.com", "alice-first-password-1", "alice-second-password-2"
    s.passwords += [alice_pw, alice_new_pw, PASSWORD]

    # 1-2: code by e-mail, verified, then registration.
    assert api.post("/v1/auth/email-verification/request", json={"email": alice}).status_code == 202
    code = latest_code(api, alice)
    s.codes.append(code)
    wrong = "000000" if code != "000000" else "111111"
    api.assert_error(
        api.post("/v1/auth/email-verification/confirm", json={"email": alice, "otp_code": wrong}), 400, "invalid_otp"
    )
    assert api.post("/v1/auth/email-verification/confirm", json={"email": alice, "otp_code": code}).status_code == 200
    assert api.post("/v1/auth/register", json={"email": alice, "password": alice_pw}).status_code == 201

    # 3: a wrong password, then a session.
    wrong_pw = "alice-wrong-password-9"
    s.passwords.append(wrong_pw)
    api.assert_error(api.post("/v1/auth/login", json={"email": alice, "password": wrong_pw}), 401, "unauthenticated")
    login = api.post("/v1/auth/login", json={"email": alice, "password": alice_pw})
    assert login.status_code == 200, login.text
    s.tokens["first session token"] = login.json()["data"]["token"]
    first_session = {"Authorization": f"Bearer {s.tokens['first session token']}"}

    # 4-5: an organization and API keys; one is revoked and then tried.
    org = api.post("/v1/organizations", json={"name": "Secret Org"}, headers=first_session)
    assert org.status_code == 201, org.text
    for n, role in enumerate(("admin", "viewer")):
        created = api.post("/v1/api-keys", json={"name": f"k{n}", "role": role}, headers=first_session)
        assert created.status_code == 201, created.text
        s.tokens[f"{role} API key"] = created.json()["data"]["key"]
        s.tokens[f"{role} API key id"] = created.json()["data"]["id"]
    revoked_id = s.tokens.pop("viewer API key id")
    admin_key_id = s.tokens.pop("admin API key id")
    assert api.delete(f"/v1/api-keys/{revoked_id}", headers=first_session).status_code == 204
    refused = api.get("/v1/organization", headers={"X-Api-Key": s.tokens["viewer API key"]})
    api.assert_error(refused, 401, "unauthenticated")
    assert api.get(f"/v1/api-keys/{admin_key_id}", headers={"X-Api-Key": s.tokens["admin API key"]}).status_code == 200

    # Password reset: a code, a new password; every session ends.
    assert api.post("/v1/auth/password/reset", json={"email": alice}).status_code == 202
    reset_code = latest_code(api, alice)
    s.codes.append(reset_code)
    confirmed = api.post(
        "/v1/auth/password/confirm", json={"email": alice, "otp_code": reset_code, "password": alice_new_pw}
    )
    assert confirmed.status_code == 200, confirmed.text
    api.assert_error(api.get("/v1/auth/me", headers=first_session), 401, "unauthenticated")
    relogin = api.post("/v1/auth/login", json={"email": alice, "password": alice_new_pw})
    assert relogin.status_code == 200, relogin.text
    s.tokens["second session token"] = relogin.json()["data"]["token"]
    session = {"Authorization": f"Bearer {s.tokens['second session token']}"}

    # 6: an invitation, accepted by a user registered in one step, with the token of the e-mailed link.
    bob, bob_pw = "bob.secret@example.com", "bob-password-123"
    s.passwords.append(bob_pw)
    invitation = api.post("/v1/invitations", json={"email": bob, "role": "member"}, headers=session)
    assert invitation.status_code == 201, invitation.text
    s.tokens["invitation token"] = _mail_token(api, bob)
    assert api.post("/v1/auth/email-verification/request", json={"email": bob}).status_code == 202
    bob_code = latest_code(api, bob)
    s.codes.append(bob_code)
    registered = api.post("/v1/auth/register/verify", json={"email": bob, "otp_code": bob_code, "password": bob_pw})
    assert registered.status_code == 201, registered.text
    bob_login = api.post("/v1/auth/login", json={"email": bob, "password": bob_pw})
    s.tokens["invitee session token"] = bob_login.json()["data"]["token"]
    accepted = api.post(
        f"/v1/invitations/{invitation.json()['data']['id']}/accept",
        json={"token": s.tokens["invitation token"]},
        headers={"Authorization": f"Bearer {s.tokens['invitee session token']}"},
    )
    assert accepted.status_code == 200, accepted.text

    # A code that is never used stays stored (hashed) until it expires.
    assert (
        api.post("/v1/auth/email-verification/request", json={"email": "carol.secret@example.com"}).status_code == 202
    )
    s.codes.append(latest_code(api, "carol.secret@example.com"))
    return s


def scan_table() -> list[dict[str, Any]]:
    client = boto3.client("dynamodb")
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": get_settings().table_name}
    while True:
        page = client.scan(**kwargs)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _text(item: dict[str, Any]) -> str:
    return json.dumps(item, sort_keys=True, default=lambda v: v.decode("latin-1") if isinstance(v, bytes) else str(v))


def _encodings(value: str) -> dict[str, str]:
    raw = value.encode()
    return {
        "plain": value,
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "hex": raw.hex(),
    }


def find_leaks(haystacks: dict[str, str], secrets: Secrets) -> list[str]:
    """Every place (name → text) that holds a secret in plain text or trivially encoded, or a password's fast
    unsalted digest. One-time codes are matched as whole numbers (6 digits also occur inside ids and hashes)."""
    needles: dict[str, str] = {}
    for what, value in secrets.plain_values().items():
        for encoding, encoded in _encodings(value).items():
            needles[f"{what} ({encoding})"] = encoded
    for i, password in enumerate(secrets.passwords):
        for algo in ("md5", "sha1", "sha256", "sha512"):
            needles[f"password {i} ({algo} hex)"] = hashlib.new(algo, password.encode()).hexdigest()
    code_patterns = {f"one-time code {c}": re.compile(rf"(?<![0-9]){c}(?![0-9])") for c in secrets.codes}
    leaks = []
    for where, text in haystacks.items():
        leaks += [f"{what} in {where}" for what, needle in needles.items() if needle in text]
        leaks += [f"{what} in {where}" for what, pattern in code_patterns.items() if pattern.search(text)]
    return leaks


def test_no_secret_is_logged_or_stored_in_plain_text(api: Api, captured_logs: io.StringIO, caplog, capfd):
    secrets = run_account_flow(api)

    # (a) The logs: the functions' JSON lines (our mirror of their handler), pytest's caplog, and the process output.
    out, err = capfd.readouterr()
    lines = [*captured_logs.getvalue().splitlines(), *out.splitlines(), *err.splitlines()]
    lines += [f"{r.name} {r.levelname} {r.getMessage()} {r.__dict__}" for r in caplog.records]
    assert any("credential refused" in line for line in lines), "the log capture saw nothing of the functions' logs"
    log_leaks = find_leaks({f"log line {i}": line for i, line in enumerate(lines)}, secrets)
    assert not log_leaks, "secrets in the logs:\n" + "\n".join(log_leaks[:50])

    # (b) The table, every item, the queued mails (sealed outbox events) included.
    items = scan_table()
    assert len(items) > 30
    mails = [i for i in items if i.get("event_type", {}).get("S") == "mail.send"]
    assert len(mails) >= len(secrets.codes) + 1, "the flow queued no mail: the scan would prove nothing"
    stored = {f"item {i['PK']['S']} / {i['SK']['S']}": _text(i) for i in items}
    table_leaks = find_leaks(stored, secrets)
    assert not table_leaks, "secrets stored in the table:\n" + "\n".join(table_leaks[:50])
    # What SES received does carry them: the mails the scan found sealed are the ones that went out.
    sent = " ".join(m["text"] for m in sent_mail())
    assert secrets.tokens["invitation token"] in sent and all(c in sent for c in secrets.codes)


def test_passwords_are_argon2id_and_credentials_are_sha256_under_cred(api: Api):
    secrets = run_account_flow(api)
    items = scan_table()
    users = {i["email"]["S"]: i for i in items if i.get("entity", {}).get("S") == "User"}
    from argon2 import PasswordHasher
    from argon2.exceptions import VerifyMismatchError

    alice_hash = users["alice.secret@example.com"]["password_hash"]["S"]
    for email, user in users.items():
        assert user["password_hash"]["S"].startswith("$argon2id$"), (email, user["password_hash"]["S"][:12])
    assert PasswordHasher().verify(alice_hash, "alice-second-password-2")
    with pytest.raises(VerifyMismatchError):
        PasswordHasher().verify(alice_hash, "alice-first-password-1")
    assert len({u["password_hash"]["S"] for u in users.values()}) == len(users)  # salted: no two hashes alike

    creds = {i["PK"]["S"].removeprefix("CRED#"): i for i in items if i["PK"]["S"].startswith("CRED#")}
    assert creds and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in creds), sorted(creds)

    def sha(value: str) -> str:
        return hashlib.sha256(value.encode()).hexdigest()

    live = {
        "bootstrap owner API key": "api_key",
        "admin API key": "api_key",
        "second session token": "session",
        "invitee session token": "session",
    }
    for what, kind in live.items():
        cred = creds.get(sha(secrets.tokens[what]))
        assert cred is not None, f"no CRED# item for the {what}"
        assert cred["kind"]["S"] == kind
    # Revoked and ended credentials are gone at once.
    assert sha(secrets.tokens["viewer API key"]) not in creds
    assert sha(secrets.tokens["first session token"]) not in creds
    # The other records name credentials by the same hash; the invitation keeps only the hash of its token.
    hashes = {i["token_hash"]["S"] for i in items if "token_hash" in i}
    assert sha(secrets.tokens["admin API key"]) in hashes and sha(secrets.tokens["invitation token"]) in hashes
    # One-time codes: salted digests, never the code.
    codes = [i for i in items if i.get("entity", {}).get("S") == "OneTimeCode"]
    assert codes, "the unused code should still be stored"
    assert all("code" not in i and re.fullmatch(r"[0-9a-f]{64}", i["code_hash"]["S"]) and i["salt"] for i in codes)


def test_idempotency_records_do_not_keep_credentials_in_plain_text(api: Api):
    """Clients send `Idempotency-Key` on every POST (CONVENTIONS "Idempotency"; Stripe-style SDKs do it by default).
    The stored replay of a login or an API-key creation must not become a plain copy of the session token or the
    key (CONVENTIONS: keys "stored only as a SHA-256 hash", sessions "stored hashed"), and what is kept of a body that
    carries a password must not be a fast unsalted digest of it (passwords: memory-hard hash only)."""
    secrets = Secrets(passwords=[PASSWORD])
    login_body = {"email": "owner@example.com", "password": PASSWORD}
    login = api.post("/v1/auth/login", json=login_body, headers={**api.owner_headers, "Idempotency-Key": "login-1"})
    assert login.status_code == 200, login.text
    secrets.tokens["session token"] = login.json()["data"]["token"]
    created = api.post(
        "/v1/api-keys", json={"name": "ci", "role": "member"}, headers={**api.owner_headers, "Idempotency-Key": "key-1"}
    )
    assert created.status_code == 201, created.text
    secrets.tokens["API key"] = created.json()["data"]["key"]
    # The promise of CONVENTIONS "Idempotency" still holds: the same key and body replay the first response.
    again = api.post("/v1/auth/login", json=login_body, headers={**api.owner_headers, "Idempotency-Key": "login-1"})
    assert again.headers["idempotent-replayed"] == "true" and again.json() == login.json()
    again = api.post(
        "/v1/api-keys", json={"name": "ci", "role": "member"}, headers={**api.owner_headers, "Idempotency-Key": "key-1"}
    )
    assert (again.status_code, again.json()) == (201, created.json())
    assert again.headers["idempotent-replayed"] == "true"
    other = api.post(
        "/v1/auth/login",
        json={**login_body, "password": "not-the-password"},
        headers={**api.owner_headers, "Idempotency-Key": "login-1"},
    )
    api.assert_error(other, 409, "idempotency_key_reused")
    stored = {f"item {i['PK']['S']} / {i['SK']['S']}": _text(i) for i in scan_table()}
    leaks = find_leaks(stored, secrets)
    canonical = json.dumps(login_body, sort_keys=True, separators=(",", ":"))
    body_sha = hashlib.sha256(canonical.encode()).hexdigest()
    leaks += [f"unsalted SHA-256 of the login body in {where}" for where, text in stored.items() if body_sha in text]
    assert not leaks, "secrets stored in the table:\n" + "\n".join(leaks)
