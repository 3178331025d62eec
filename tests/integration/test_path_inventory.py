"""The spec's whole path inventory: every path it names is listed in /openapi.json and served by at least one method
with real behaviour (through the gateway, with the owner's key: never `route_not_found`, `method_not_allowed` on
every method, 501 or a 5xx). No exception list.

The paths are read from the spec itself (`tests/data/spec.txt`, a copy of `../shared/spec/*.txt` kept equal to it
by `test_vendored_spec_is_the_shared_one`): the endpoint tables, the prose that names paths, and the "Other paths in
the API" table, whose cells abbreviate (`/connect` "each under /v1/channels/{channelID}", "and under it: /archive",
a bare `/invite-link` after `/v1/groups/description` meaning `/v1/groups/invite-link`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from switchboard.openapi_doc import build_openapi
from tests.integration.support import Api

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tests" / "data" / "spec.txt"
SHARED_SPEC_DIR = ROOT.parent / "shared" / "spec"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
PATH_TOKEN = re.compile(r"(?:GET\s+)?(/[A-Za-z0-9_{}\-./]+)")


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0]


def _expand_cell(cell: str) -> list[str]:
    """The absolute paths of one cell of the "Other paths" table."""
    out: list[str] = []
    # "(each under X)" / "(under X)" apply to the relative items of the clause they close.
    clauses = re.split(r";\s*", cell)
    for clause in clauses:
        under = re.search(r"\((?:each )?under (/[^)\s]+)\)", clause)
        explicit_base = under.group(1) if under else None
        clause = re.sub(r"\((?:each )?under [^)]*\)", "", clause)
        # "X, and under it: /a, /b" → /a, /b under the last absolute path before "under it".
        head, _, tail = clause.partition("and under it:")
        base: str | None = None
        for token in PATH_TOKEN.findall(head):
            token = token.rstrip(".,")
            if token.startswith("/v1/") or token == "/openapi.json":
                out.append(token)
                base = _parent(token)
            else:
                prefix = explicit_base or base
                assert prefix, f"a relative path {token!r} with nothing to hang it on in {cell!r}"
                out.append(prefix + token)
        if tail:
            assert out, cell
            anchor = out[-1]
            out.extend(anchor + token.rstrip(".,") for token in PATH_TOKEN.findall(tail))
    return out


def spec_paths(text: str) -> set[str]:
    paths: set[str] = set()
    section = text.split("## Endpoints", 1)[1].split("## Authentication", 1)[0]
    other = section.split("### Other paths in the API", 1)
    # Endpoint tables and prose before "Other paths": absolute paths only.
    for token in re.findall(r"`?(?:GET|POST|PUT|PATCH|DELETE)?\s*(/v1/[A-Za-z0-9_{}\-./]+)", other[0]):
        paths.add(token.rstrip(".,`"))
    # Paths only named in the webhook paragraph ("Also present (paths only): …").
    for row in other[1].splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("Group", "---"):
            continue
        paths.update(_expand_cell(cells[1]))
    return paths


def _template(path: str) -> str:
    return re.sub(r"\{[^}/]+\}", "{}", path)


SPEC_PATHS = sorted(spec_paths(SPEC.read_text()))


def test_vendored_spec_is_the_shared_one():
    shared = sorted(SHARED_SPEC_DIR.glob("*.txt")) if SHARED_SPEC_DIR.is_dir() else []
    assert len(shared) <= 1, shared
    for path in shared:
        assert path.read_text() == SPEC.read_text(), f"copy {path} to {SPEC}"


def test_the_inventory_parser_reads_every_group():
    paths = set(SPEC_PATHS)
    # One from each abbreviation form of the table, and the totals.
    for expected in (
        "/v1/channels/{channelID}/settings/phone/two-step/enable",  # "(each under …)"
        "/v1/channels/{channelID}/proxy",  # "also …, /proxy" after an absolute path
        "/v1/conversations/{convID}/labels/{labelID}",  # "and under it:"
        "/v1/groups/participants",  # bare items after /v1/groups/description
        "/v1/groups/{groupID}/participants/actions",
        "/v1/chats/unpin",  # "(under /v1/chats)"
        "/v1/users/me/blocks/{userRef}",
        "/v1/templates/{templateID}/submit",
        "/v1/waba/progress/{progressID}",
        "/v1/contacts/{contactID}/consent/{channel}",  # the Contacts endpoint table
        "/v1/settings/developer/webhooks/portal-access",  # the webhook paragraph
        "/v1/newsletters/{newsletterJID}/messages",
        "/openapi.json",
    ):
        assert expected in paths, expected
    assert not [p for p in paths if "//" in p or p.endswith("/")]
    assert len(paths) > 200, len(paths)


def test_openapi_lists_every_spec_path():
    documented = {_template(p) for p in build_openapi(ROOT / "functions")["paths"]}
    missing = [p for p in SPEC_PATHS if _template(p) not in documented]
    assert not missing, f"{len(missing)} spec paths missing from /openapi.json:\n" + "\n".join(missing)


def _served_methods(doc: dict, path: str) -> list[str]:
    for documented, operations in doc["paths"].items():
        if _template(documented) == _template(path):
            return [m.upper() for m in operations if m.upper() in METHODS]
    return []


@pytest.fixture
def roomy_rate_limit(monkeypatch):
    from switchboard.config import reset_settings

    monkeypatch.setenv("RATE_LIMIT_PER_MINUTE", "1000000")
    monkeypatch.setenv("RATE_LIMIT_CREDENTIAL_PER_MINUTE", "1000000")
    reset_settings()
    yield
    reset_settings()


def test_every_spec_path_is_served_with_real_behaviour(api: Api, roomy_rate_limit):
    """Each path, each documented method, with dummy ids and an empty body: the route itself answers (a 2xx, or its
    own 400/404/409 for the dummy input) — never the gateway's `route_not_found`, a 405 on every method, a 501 or a
    server error. Destructive collection-level methods (DELETE without an id) are not called."""
    doc = build_openapi(ROOT / "functions")
    problems: list[str] = []
    for path in SPEC_PATHS:
        methods = [m for m in _served_methods(doc, path) if not (m == "DELETE" and "{" not in path)]
        if not methods:
            problems.append(f"{path}: no method documented")
            continue
        answers = []
        for method in methods:
            url = re.sub(r"\{[^}/]+\}", "x_nonexistent", path)
            kwargs = {"json": {}} if method in ("POST", "PUT", "PATCH") else {}
            resp = api.request(method, url, **kwargs)
            code = None
            if resp.headers.get("content-type", "").startswith("application/json") and resp.content:
                body = resp.json()
                code = body.get("error", {}).get("code") if isinstance(body, dict) else None
            answers.append((method, resp.status_code, code))
        real = [
            a
            for a in answers
            if a[1] < 500 and a[1] != 501 and a[2] not in ("route_not_found", "method_not_allowed") and a[1] != 401
        ]
        if not real or any(a[1] >= 500 for a in answers):
            problems.append(f"{path}: {answers}")
    assert not problems, f"{len(problems)} spec paths not really served:\n" + "\n".join(problems)
