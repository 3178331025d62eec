"""docs/security.md names the test behind each rule: every test it names exists, in the file it names."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _references(text: str) -> list[tuple[str, str | None]]:
    """(test file, test name or None) for every `file.py` and `file.py::test_x` / `::test_x` (same file) named."""
    refs: list[tuple[str, str | None]] = []
    current: str | None = None  # a `::test_x` belongs to the file named last before it
    for path, name in re.findall(r"`(?:([\w/]+\.py))?(?:::(test_\w+))?`", text):
        if path:
            current = path
        if current and (path or name):
            refs.append((current, name or None))
    return refs


def test_every_test_the_security_model_names_exists():
    refs = _references((ROOT / "docs" / "security.md").read_text())
    assert len(refs) > 40
    missing = []
    for path, name in refs:
        if not path.startswith("test"):
            candidates = [ROOT / path]
        else:
            candidates = [ROOT / "tests" / "integration" / path, ROOT / path]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            if path.startswith(("tests/", "test_")):
                missing.append(path)
            continue
        if name and not re.search(rf"^(async )?def {name}\(", found.read_text(), re.M):
            missing.append(f"{path}::{name}")
    assert not missing, missing
