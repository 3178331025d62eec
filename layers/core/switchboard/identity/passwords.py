"""Passwords: argon2id with a per-hash salt (argon2-cffi), imported lazily: only the routes that need it pay; and the
rules a new password must pass (`password_problem`, applied by the request models of every route that sets one)."""

from __future__ import annotations

import secrets
from functools import lru_cache
from itertools import pairwise
from typing import Any


@lru_cache(maxsize=1)
def _hasher() -> Any:
    # on first use: keeps argon2 off the cold start
    from argon2 import PasswordHasher

    # Lambda-friendly cost: ~50 ms at 1 GB, memory-hard (19 MiB), per OWASP's argon2id minimums.
    return PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def hash_password(password: str) -> str:
    return str(_hasher().hash(password))


@lru_cache(maxsize=1)
def dummy_hash() -> str:
    """A hash of a random password with the same parameters: what an unknown e-mail's login is checked against,
    so that it costs the same time as a known one's."""
    return hash_password(secrets.token_urlsafe(24))


def verify_password(stored_hash: str, password: str) -> bool:
    # on first use: keeps argon2 off the cold start
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        return bool(_hasher().verify(stored_hash, password))
    except (VerificationError, InvalidHashError):
        return False


# The most common passwords of the public breach corpora (8 characters and more: shorter ones fail the length rule
# first), compared lower-cased.
_COMMON = """
password password1 password12 password123 password1234 passw0rd p@ssw0rd p@ssword pa$$word passwort
12345678 123456789 1234567890 12345678910 0123456789 87654321 987654321 11111111 00000000 123123123 12341234
11223344 123321123 1q2w3e4r 1q2w3e4r5t 1q2w3e4r5t6y q1w2e3r4 q1w2e3r4t5 1qaz2wsx zaq12wsx zaq1zaq1 qwerty123
qwertyui qwertyuiop qwerty12 qwerty1234 asdfghjk asdfghjkl zxcvbnm1 zxcvbnm123 qazwsxedc 1234qwer qwer1234
abcd1234 abc12345 abcdefgh iloveyou iloveyou1 sunshine sunshine1 princess princess1 football football1
baseball baseball1 superman batman123 starwars whatever trustno1 welcome1 welcome123 letmein1 letmein123
admin123 admin1234 administrator changeme changeme1 default1 computer internet jennifer michelle corvette
mercedes maverick mustang1 charlie1 michael1 jordan23 dragon123 monkey123 shadow123 master123 liverpool
chelsea1 arsenal1 elephant 123qweasd qweasdzxc 1q2w3e4r5 password! secret123 test1234 testtest
"""
COMMON_PASSWORDS = frozenset(_COMMON.split())


def password_problem(password: str, email: str | None = None) -> str | None:
    """Why `password` is too weak to set, or None. One place for the rules of every route that sets a password:
    one of the most common passwords, one character repeated, a run of consecutive characters (`abcdefgh`,
    `87654321`), or the account's e-mail (or the part before its `@`)."""
    lowered = password.lower()
    if lowered in COMMON_PASSWORDS:
        return "is one of the most common passwords; choose a less guessable one"
    if len(set(lowered)) <= 2:
        return "repeats one or two characters; choose a less guessable one"
    steps = {ord(b) - ord(a) for a, b in pairwise(lowered)}
    if steps in ({1}, {-1}):
        return "is a run of consecutive characters; choose a less guessable one"
    if email:
        address = email.strip().lower()
        if lowered in (address, address.partition("@")[0]):
            return "must not be the account's e-mail address"
    return None
