"""Contact search (`GET /v1/contacts?q=`): word-prefix index rows written with the contact.

Each contact has one index row per search token, `CSRCH#<token>#<contact_id>` under the organization's partition,
put and deleted in the very transaction that writes the contact (`index_ops`), so the index is never behind the
record. Tokens (`tokens`): every word of the name, first and last name, company and tag names (case- and
accent-folded), every e-mail address whole (an e-mail prefix matches), and every phone number's digits both with the
country code and in national form (`14155550100` and `4155550100`). A contact holds at most `MAX_TOKENS`.

A query (`search`) reads the rows of its most selective word's prefix a page at a time and keeps a contact once:
at its smallest token with that prefix (a contact matching through two words is not listed twice, whatever the
page boundaries), when every other word of the query is the start of one of its tokens, and when the list's other
filters accept it. A page reads at most `MAX_READS` Query pages and their contacts, whatever the organization's
size; the cursor continues after the last row examined.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from switchboard.contacts import repository as repo
from switchboard.store import Delete, Put, Store, TxOp, keys

Item = dict[str, Any]
PREFIX = "CSRCH#"
MAX_TOKENS = 24
MAX_TOKEN_LENGTH = 100
MAX_READS = 5
_WORD_SPLIT = re.compile(r"[\W_]+")
_PHONE_QUERY = re.compile(r"^[\d\s+().\-]+$")


@lru_cache(maxsize=4096)
def fold(text: str) -> str:
    """Case- and accent-folded text: `Lovelace` and `lovelace`, `Zoë` and `zoe` match."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def words(text: str | None) -> list[str]:
    return [w for w in _WORD_SPLIT.split(fold(text or "")) if w]


@lru_cache(maxsize=4096)
def _national(digits: str) -> str | None:
    import phonenumbers  # on first use: keeps phonenumbers off the cold start

    try:
        number = phonenumbers.parse("+" + digits, None)
    except phonenumbers.NumberParseException:
        return None
    return phonenumbers.national_significant_number(number) or None


def tokens(item: Item) -> list[str]:
    """The contact's search tokens, sorted (at most MAX_TOKENS; words first, then e-mails, then phones)."""
    found: list[str] = []
    for field in ("name", "first_name", "last_name", "company"):
        found += words(item.get(field))
    for tag in item.get("tags") or []:
        found += words(tag)
    for ident in item.get("identities") or []:
        value = str(ident.get("value") or "")
        if ident.get("type") == "email":
            found.append(value.lower())
        elif ident.get("type") in ("phone", "whatsapp", "wa_id") and value.isdigit():
            found.append(value)
            national = _national(value)
            if national and national != value:
                found.append(national)
    unique = list(dict.fromkeys(t[:MAX_TOKEN_LENGTH] for t in found if t))[:MAX_TOKENS]
    return sorted(unique)


def row_key(org: str, token: str, contact_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"{PREFIX}{token}#{contact_id}")


def index_ops(org: str, old: Item | None, new: Item | None) -> list[TxOp]:
    """The index rows to delete and put when a contact goes from `old` to `new` (None: absent): its search rows and
    its lifecycle stage entry (`repo.stage_entry_ops`), the base-table rows every contact write keeps in step."""
    before = set(tokens(old)) if old else set()
    after = set(tokens(new)) if new else set()
    contact_id = (new or old or {}).get("id", "")
    ops: list[TxOp] = [Delete(key=row_key(org, t, contact_id)) for t in sorted(before - after)]
    ops += [
        Put(item={**row_key(org, t, contact_id), "entity": "ContactSearch", "contact_id": contact_id})
        for t in sorted(after - before)
    ]
    return ops + repo.stage_entry_ops(org, old, new)


def query_terms(q: str) -> list[str]:
    """The query's terms: a phone-like query is one term of digits (international `00` or `+` dropped), an e-mail
    prefix is one term, anything else its words."""
    text = q.strip()
    digits = "".join(ch for ch in text if ch.isdigit())
    if digits and _PHONE_QUERY.match(text):
        return [digits.removeprefix("00") if text.startswith("00") else digits]
    if "@" in text:
        return [text.lower()]
    return words(text)


def search(
    store: Store,
    org: str,
    q: str,
    limit: int,
    start: dict[str, Any] | None,
    keep: Callable[[Item], bool],
) -> tuple[list[Item], dict[str, Any] | None]:
    """Up to `limit` contacts matching `q` that `keep` accepts, in token order, and the key to continue after."""
    terms = query_terms(q)
    if not terms:
        return [], None
    primary = max(terms, key=len)
    others = [t for t in terms if t != primary]
    found: list[Item] = []
    last = start
    for _ in range(MAX_READS):
        page = store.query(keys.org_pk(org), sk_prefix=f"{PREFIX}{primary}", limit=limit, start_key=last)
        ids = list(dict.fromkeys(row["contact_id"] for row in page.items))
        contacts = {c["id"]: c for c in store.batch_get([keys.key(keys.org_pk(org), f"CONTACT#{i}") for i in ids])}
        for n, row in enumerate(page.items):
            contact = contacts.get(row["contact_id"])
            if contact is not None and _first_match(row, contact, primary, others) and keep(contact):
                found.append(contact)
                if len(found) == limit:
                    more = n + 1 < len(page.items) or page.last_key is not None
                    return found, ({"PK": row["PK"], "SK": row["SK"]} if more else None)
        last = page.last_key
        if last is None:
            break
    return found, last


def _first_match(row: Item, contact: Item, primary: str, others: list[str]) -> bool:
    """The row is the contact's first token starting with `primary`, and every other term starts one of its tokens
    (a row left from an older version of the contact is not)."""
    token = row["SK"][len(PREFIX) : row["SK"].rindex("#")]
    own = tokens(contact)
    matching = [t for t in own if t.startswith(primary)]
    if not matching or matching[0] != token:
        return False
    return all(any(t.startswith(term) for t in own) for term in others)


REINDEX_CHUNK = 25  # contacts per chunk: at most 25 x (MAX_TOKENS + 1) writes


def reindex_chunk(store: Store, org: str, start: dict[str, Any] | None) -> dict[str, Any] | None:
    """One chunk of (re)building the organization's search rows from its contacts, for contacts written before the
    rows existed: a page of contacts (the recency index), their rows put (idempotent, so a chunk may run twice) and
    the older name-only rows (`CNAME#`) removed. Answers the checkpoint to continue from (`repo.walk_page`: every
    shard of the list and its legacy partition), None when done."""
    contacts, following = repo.walk_page(store, org, start, limit=REINDEX_CHUNK)
    for contact in contacts:
        ops = index_ops(org, None, contact)
        if contact.get("name"):
            legacy = f"CNAME#{contact['name'].strip().lower()[:100]}#{contact['id']}"
            ops.append(Delete(key=keys.key(keys.org_pk(org), legacy)))
        if ops:
            store.transact(ops)
    return following
