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
