"""`python local/bytecode_check.py <build dir>`: every module of a SAM build has its bytecode for this interpreter
(`make build` compiles them; a Lambda code directory is read-only, so a module without it is compiled from source
at every cold start). Exit 1 and the first few missing when any is missing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def missing(sources: list[Path]) -> list[Path]:
    return [source for source in sources if not Path(importlib.util.cache_from_source(str(source))).exists()]


def main(argv: list[str]) -> int:
    build_dir = Path(argv[1] if len(argv) > 1 else ".aws-sam/build")
    sources = sorted(build_dir.rglob("*.py"))
    absent = missing(sources)
    print(f"bytecode: {len(sources) - len(absent)} of {len(sources)} modules in {build_dir} compiled")
    for source in absent[:10]:
        print(f"  missing: {source}")
    return 1 if absent or not sources else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
