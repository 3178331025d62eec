"""The cold-start benchmark's machinery works: one run of the floor and one function gives a well-formed row.

No timing assertions: speed is judged by ``python -m bench``, never by a test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import cold_start
from bench.__main__ import benchmark_modules

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_function_is_discovered():
    expected = sorted(p.parent.name for p in (REPO_ROOT / "functions").glob("*/app.py"))
    found = cold_start.discover_functions()
    assert [t.name for t in found] == expected
    assert "system" in expected
    assert all((t.directory / "app.py").is_file() for t in found if t.directory is not None)


def test_one_run_of_floor_and_system_gives_a_well_formed_row():
    system = next(t for t in cold_start.discover_functions() if t.name == "system")

    report = cold_start.run_benchmark(runs=1, targets=[system], warmup=False)

    assert report.runs == 1
    assert report.floor.name == cold_start.FLOOR
    assert report.floor.median_ms > 0
    assert len(report.floor.samples_ms) == 1
    assert report.floor.ratio is None
    [row] = report.rows
    assert row.name == "system"
    assert row.error is None
    assert len(row.samples_ms) == 1
    assert row.median_ms > 0
    assert row.ratio == pytest.approx(row.median_ms / report.floor.median_ms)
    assert row.status in {"PASS", "OVER"}
    assert row.over == (row.ratio > cold_start.TARGET_RATIO)

    table = cold_start.format_report(report)
    assert "floor:" in table
    assert "system" in table
    assert f"{row.ratio:.2f}x" in table


def test_a_broken_function_is_reported_not_raised(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "app.py").write_text("raise RuntimeError('boom at init')\n")

    results = cold_start.measure([cold_start.Target("broken", broken)], runs=1, warmup=False)
    floor, [row] = cold_start.summarize(results)

    assert floor.median_ms > 0
    assert row.status == "ERROR"
    assert row.over
    assert "boom at init" in (row.error or "")


def test_importtime_output_is_parsed_into_a_tree():
    stderr = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:        50 |         50 | site",
            cold_start.MARKER,
            "import time:       100 |        100 |     boto3.compat",
            "import time:       200 |        300 |   boto3",
            "import time:      1000 |       1000 |   heavy.models",
            "import time:        30 |       1330 | app",
        ]
    )

    lines = cold_start.parse_importtime(stderr)

    assert [line.module for line in lines] == ["boto3.compat", "boto3", "heavy.models", "app"]  # not "site"
    app = lines[-1]
    assert (app.depth, app.self_ms, app.cumulative_ms) == (0, 0.03, 1.33)
    assert [child.module for child in app.children] == ["boto3", "heavy.models"]
    assert app.beyond_floor_ms({"boto3", "boto3.compat"}) == pytest.approx(1.03)

    text = cold_start.format_importtime("fn", lines, {"boto3", "boto3.compat"})
    assert "heavy.models" in text
    assert "app module's own code 0.0 ms" in text


def test_python_m_bench_runs_the_cold_start_module():
    assert "bench.cold_start" in benchmark_modules()


def test_the_portal_is_measured_against_the_asgi_floor_and_both_floors_are_printed():
    portal = next(t for t in cold_start.discover_functions() if t.name == "portal")

    report = cold_start.run_benchmark(runs=1, targets=[portal], warmup=False)

    [asgi_floor] = report.other_floors
    assert asgi_floor.name == cold_start.ASGI_FLOOR
    assert asgi_floor.median_ms > 0
    [row] = report.rows
    assert row.error is None
    assert row.floor == cold_start.ASGI_FLOOR
    assert row.ratio == pytest.approx(row.median_ms / asgi_floor.median_ms)
    table = cold_start.format_report(report)
    assert "floor:" in table and f"{cold_start.ASGI_FLOOR}:" in table
    assert "the floor of: portal" in table
    assert f"{row.ratio:.2f}x" in table


def test_a_function_of_the_resolver_floor_does_not_run_the_asgi_floor():
    results = cold_start.measure([], runs=1, warmup=False)

    assert set(results) == {cold_start.FLOOR}
