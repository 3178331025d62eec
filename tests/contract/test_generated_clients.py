"""Clients generated from the document by integrators' stock tools work without hand fixes (issue 23).

- Python: openapi-python-client (pinned in requirements-dev.txt) generates a client from the committed document
  (the one the stack serves, tests/unit/test_openapi.py) with zero warnings; the client then runs a whole flow
  against the local stack: create a contact, resolve it, create and connect a sandbox channel, send a text message,
  read it back, and page through the conversation's messages with the typed `meta.cursor`.
- TypeScript: stock openapi-typescript (pinned in package-lock.json, installed by `npm ci` into node_modules once
  per lock) turns the document into types, and `tsc --noEmit` compiles a plain text send against them: the request
  fields that have server-side defaults must not come out required.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard.openapi_doc import DOC_PATH
from tests.e2e.conftest import Stack, stack  # noqa: F401  (the e2e local stack, reused)

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("contract")]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "switchboard_client"
# What openapi-python-client prints when it leaves something out of the client (an endpoint, a response, a model).
GENERATOR_WARNINGS = ("Warning", "WARNING", "Unable to parse", "Cannot parse", "will not be generated")


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def python_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """The generated package, imported, and the generator's output."""
    out = tmp_path_factory.mktemp("python-client")
    config = out / "config.json"
    config.write_text(json.dumps({"post_hooks": []}))  # no formatter run: the package is only imported here
    result = _run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(DOC_PATH),
            "--output-path",
            str(out / PACKAGE),
            "--meta",
            "none",
            "--config",
            str(config),
        ],
        cwd=out,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE), output
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_python_client_generates_without_warnings(python_client: tuple[Any, str]) -> None:
    _, output = python_client
    warnings = [line for line in output.splitlines() if any(w in line for w in GENERATOR_WARNINGS)]
    print(f"\nopenapi-python-client warnings: {len(warnings)}")
    assert not warnings, output


def _ok(response: Any, status: int) -> Any:
    assert response.status_code == status, (response.status_code, response.content[:500])
    return response.parsed


def _until(check: Callable[[], Any], seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_python_client_runs_the_flow(python_client: tuple[Any, str], stack: Stack) -> None:  # noqa: F811
    package, _ = python_client
    api = importlib.import_module(f"{PACKAGE}.api")
    contacts = importlib.import_module(f"{PACKAGE}.api.contacts")
    channels = importlib.import_module(f"{PACKAGE}.api.channels")
    messages = importlib.import_module(f"{PACKAGE}.api.messages")
    conversations = importlib.import_module(f"{PACKAGE}.api.conversations")
    for module in ("create_contact", "resolve_contact"):
        importlib.import_module(f"{contacts.__name__}.{module}")
    for module in ("create_channel", "connect_channel"):
        importlib.import_module(f"{channels.__name__}.{module}")
    for module in ("send_message", "get_message"):
        importlib.import_module(f"{messages.__name__}.{module}")
    for module in ("list_conversations", "conversation_messages"):
        importlib.import_module(f"{conversations.__name__}.{module}")
    models = importlib.import_module(f"{PACKAGE}.models")
    assert api is not None

    # The API key as a bearer token (CONVENTIONS: both headers are accepted on every authenticated route).
    client = package.AuthenticatedClient(base_url=stack.url, token=stack.api_key, raise_on_unexpected_status=True)
    phone = f"+1415555{uuid.uuid4().int % 10_000:04d}"
    if phone.endswith("0000"):
        phone = phone[:-1] + "1"  # the sandbox refuses numbers ending 0000
    with client:
        created = _ok(
            contacts.create_contact.sync_detailed(
                client=client,
                body=models.ContactCreate(
                    name="Generated Client",
                    identities=[models.IdentityIn(type_=models.IdentityInType.PHONE, value=phone)],
                ),
            ),
            201,
        )
        contact = created.data
        resolved = _ok(
            contacts.resolve_contact.sync_detailed(
                client=client,
                body=models.ResolveRequest(
                    identifiers=[models.Identifier(type_=models.IdentifierType.PHONE, value=phone)]
                ),
            ),
            200,
        )
        assert resolved.data.id == contact.id

        channel = _ok(
            channels.create_channel.sync_detailed(
                client=client,
                body=models.ChannelCreate(
                    name=f"gen-{uuid.uuid4().hex[:6]}", platform=models.ChannelCreatePlatform.SANDBOX
                ),
            ),
            201,
        ).data
        connected = _ok(channels.connect_channel.sync_detailed(channel.id, client=client), 200).data
        assert str(connected.status) == "connected"

        sent = []
        for text in ("first", "second", "third"):
            body = models.SendMessage(channel_id=channel.id, to=phone, text=models.TextContent(body=text))
            sent.append(_ok(messages.send_message.sync_detailed(client=client, body=body), 202).data)
        read = _ok(messages.get_message.sync_detailed(sent[0].id, client=client), 200).data
        assert read.id == sent[0].id and read.channel_id == channel.id
        assert read.created_at.tzinfo is not None  # `format: date-time`: a datetime, not a string

        def conversation() -> Any:
            page = _ok(conversations.list_conversations.sync_detailed(client=client, channel_id=channel.id), 200)
            return next((c for c in page.data if c.contact_id == contact.id), None)

        conv = _until(conversation)
        assert conv is not None, "no conversation with the contact on the channel"

        seen: list[str] = []
        cursor = None
        for _ in range(10):
            kwargs = {"cursor": cursor} if cursor else {}
            page = _ok(
                conversations.conversation_messages.sync_detailed(conv.id, client=client, limit=1, **kwargs), 200
            )
            assert isinstance(page.meta, models.Meta)  # typed: `has_more` and `cursor` are attributes
            seen += [m.id for m in page.data]
            if not page.meta.has_more:
                break
            assert isinstance(page.meta.cursor, str) and page.meta.cursor
            cursor = page.meta.cursor
        assert {m.id for m in sent} <= set(seen), (seen, [m.id for m in sent])


# TypeScript ---------------------------------------------------------------------------------------------------------
PLAIN_SEND = """\
import type { components, operations } from "./api";

// A plain text send, as an integrator writes it: no optional field (`type` and `text.preview_url` have defaults).
const body: components["schemas"]["SendMessage"] = {
  channel_id: "ch_01",
  to: "+14155550100",
  type: "text",
  text: { body: "Hello" },
};
type SendRequest = NonNullable<operations["sendMessage"]["requestBody"]>["content"]["application/json"];
export const request: SendRequest = body;

// A list's typed meta: the next page's cursor is a field, not an additional property.
type Meta = components["schemas"]["Meta"];
export const next = (meta: Meta): string | null | undefined => (meta.has_more ? meta.cursor : undefined);
"""


def _npm_tools() -> Path:
    """node_modules of the repo's pinned packages (`npm ci` when package-lock.json is newer than the last install)."""
    npm = shutil.which("npm")
    assert npm and shutil.which("node"), "node and npm are needed (the TypeScript check runs the pinned tools)"
    stamp = ROOT / "node_modules" / ".installed"
    lock = ROOT / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        result = _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=ROOT, timeout=600)
        assert result.returncode == 0, result.stdout + result.stderr
        stamp.touch()
    return ROOT / "node_modules" / ".bin"


def test_typescript_types_compile_a_plain_text_send(tmp_path: Path) -> None:
    bin_dir = _npm_tools()
    generated = _run([str(bin_dir / "openapi-typescript"), str(DOC_PATH), "-o", str(tmp_path / "api.d.ts")], ROOT)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    (tmp_path / "send.ts").write_text(PLAIN_SEND)
    compiled = _run(
        [
            str(bin_dir / "tsc"),
            "--noEmit",
            "--strict",
            "--target",
            "es2022",
            "--module",
            "esnext",
            "--moduleResolution",
            "bundler",
            str(tmp_path / "send.ts"),
        ],
        ROOT,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
