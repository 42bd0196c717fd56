"""benchmarks/bench.py: one function per numbered row of its docstring, listed in order
by main."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = (
        module  # dataclasses look their module up while the class is built
    )
    spec.loader.exec_module(module)
    return module


def test_one_function_per_numbered_row_in_order():
    bench = _load()
    numbered = re.findall(r"^(\d+)\. ", bench.__doc__, flags=re.M)
    assert [int(n) for n in numbered] == list(range(1, len(bench.ROWS) + 1))
    for number, fn in enumerate(bench.ROWS, start=1):
        assert fn.__name__.startswith(f"row_{number}_"), fn.__name__
        assert fn.__doc__.startswith(f"{number}. "), fn.__doc__
    assert set(bench.FULL_ONLY) <= set(range(1, len(bench.ROWS) + 1))


def test_ratio_is_markovlib_speed_up():
    bench = _load()
    assert bench.row("x", "tokens/s", 30.0, 10.0)["ratio"] == 3.0  # throughput
    assert bench.row("x", "ms/step", 10.0, 30.0)["ratio"] == 3.0  # time
    assert bench.row("x", "s", 1.0)["ratio"] is None


def _project():
    path = BENCH.with_name("project.py")
    spec = importlib.util.spec_from_file_location("project_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_project_benchmark_times_a_command_and_reads_the_build_and_estimates(
    tmp_path,
):
    """benchmarks/project.py: a failed stage is timed and marked, not fatal; the build's
    per-chapter lines and a chapter's estimate are read from their output; the report
    names date, CPU and load."""
    project = _project()
    seconds, out = project.timed(
        [sys.executable, "-c", "print('prebuild: saddles.ipynb in 12 s')"],
        tmp_path,
        tmp_path / "ok.log",
    )
    assert seconds > 0 and (tmp_path / "ok.log").read_text() == out
    failed, _ = project.timed(
        [sys.executable, "-c", "raise SystemExit(3)"], tmp_path, tmp_path / "x", False
    )
    assert failed < 0
    try:
        project.timed(
            [sys.executable, "-c", "raise SystemExit(3)"], tmp_path, tmp_path / "y"
        )
    except RuntimeError as e:
        assert "failed" in str(e)
    else:
        raise AssertionError("a failed command passed")
    info = {
        "date": "2026-11-26 22:00 UTC",
        "cpu": "X, 2 cores",
        "commit": "abc",
        "load_before": 0.1,
        "load_after": 0.2,
    }
    text = project.report(
        [{"what": "rerun saddles", "seconds": 61.4, "estimate": 50}], info
    )
    assert "| rerun saddles | 61 | 50 |" in text and "X, 2 cores" in text
    # the machine's speed beside the times: a fixed workload, timed in this Python
    speed = project.yardstick(tmp_path, rounds=1)  # no .venv there: this interpreter
    assert 0 < speed < 60
    info.update(yardstick_before=1.21, yardstick_after=1.734)
    text = project.report([], info)
    assert "yardstick 1.21 s before, 1.73 s after" in text


def test_project_benchmark_refuses_bad_options_before_cloning(capsys):
    """--what bogus or empty, --scale bogus, --chapters nosuch or empty: one line and
    exit 2 before any clone or install (they once cloned and printed an empty
    table)."""
    import pytest

    project = _project()
    for argv, says in (
        (["--what", "bogus"], "--what: give a comma-separated subset"),
        (["--what", ""], "--what: give a comma-separated subset"),
        (["--scale", "bogus"], "--scale: must be one of smoke, cpu, paper"),
        (["--chapters", "nosuch"], "--chapters: no chapter nosuch"),
        (["--chapters", ""], "--chapters: no chapter ''"),
    ):
        with pytest.raises(SystemExit) as stop:
            project.main(argv)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert says in err.splitlines()[-1], err
    assert project._refused({"rerun"}, "cpu", ["saddles", "ccmc"]) == ""
