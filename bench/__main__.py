"""``python -m bench [--runs N] [--check]``: every benchmark module in this package, one after the other.

Arguments are passed to each module's ``main``. The exit code is the highest any of them returned (0 unless
``--check`` is given and something is over target).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path


def benchmark_modules() -> list[str]:
    """``bench.<name>`` for every module in this package except private ones (``_x``) and ``__main__``."""
    package_dir = Path(__file__).resolve().parent
    return sorted(
        f"bench.{info.name}"
        for info in pkgutil.iter_modules([str(package_dir)])
        if not info.name.startswith("_") and not info.ispkg
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    status = 0
    for name in benchmark_modules():
        print(f"== {name}", flush=True)
        module = importlib.import_module(name)
        status = max(status, int(module.main(args) or 0))
        print(flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
