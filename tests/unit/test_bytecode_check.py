"""`make build`'s last step: a build directory passes only when every module has its bytecode for this interpreter,
and the compile step `make build` runs (compileall, unchecked-hash) is what makes it pass."""

from __future__ import annotations

import compileall
import importlib.util
from pathlib import Path

from local import bytecode_check


def test_missing_bytecode_fails_and_compiled_build_passes(tmp_path: Path, capsys) -> None:
    (tmp_path / "pkg").mkdir()
    for name in ("pkg/__init__.py", "pkg/mod.py", "app.py"):
        (tmp_path / name).write_text("VALUE = 1\n")
    assert bytecode_check.main(["x", str(tmp_path)]) == 1
    assert "0 of 3 modules" in capsys.readouterr().out
    assert compileall.compile_dir(
        str(tmp_path), quiet=1, invalidation_mode=compileall.py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    assert bytecode_check.main(["x", str(tmp_path)]) == 0
    pyc = Path(importlib.util.cache_from_source(str(tmp_path / "app.py"))).read_bytes()
    assert int.from_bytes(pyc[4:8], "little") == 0b01  # hash-based, unchecked: valid whatever the source's mtime


def test_an_empty_build_fails(tmp_path: Path) -> None:
    assert bytecode_check.main(["x", str(tmp_path)]) == 1
