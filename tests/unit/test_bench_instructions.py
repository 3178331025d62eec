"""The instruction-count benchmark's child runs every side it measures (valgrind itself is not run here: a count
takes ~30 s per process; `python -m bench.instructions` runs it)."""

import pytest

from bench import instructions


@pytest.mark.parametrize("route", sorted(instructions.ROUTES))
@pytest.mark.parametrize("side", ["route", "floor"])
def test_child_serves_the_requests(route: str, side: str) -> None:
    instructions._child(route, side, warmup=1, requests=2)  # asserts every answer is the route's success status
