"""What one training step costs on one CPU thread, for the estimate a sweep prints
(:func:`markovlib.runs.sweep.estimate_seconds`): seconds per step of an ensemble of n
runs, per model kind, precision and sequence length, batch 16, evaluated every 20
steps on 4 batches (the ``cpu`` scale's cadence).

Usage: ``python benchmarks/step_cost.py [--quick]``; writes this CPU's table's
measurements (``CpuTable.costs`` in ``benchmarks/results``: ``step-cost.json`` for
the AMD EPYC and a CPU of no table) and prints each case beside that table's
estimate.
``--fixed``: the fixed seconds of a sweep on two worker processes instead (the pool's
start, each ensemble's own: a ``CpuTable``'s ``pool_start_seconds`` and
``ensemble_seconds``), into its ``CpuTable.fixed``.
Run it on an idle machine: it pins one torch thread.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import torch

from markovlib import TransformerConfig, binary
from markovlib.chains import symmetric
from markovlib.runs.spec import RunSpec
from markovlib.runs.sweep import AMD_EPYC, estimate_seconds, this_cpu_table
from markovlib.train import Execution, TrainConfig, train_many

TABLE = this_cpu_table() or AMD_EPYC
OUT = Path(__file__).resolve().parent / "results" / TABLE.costs
FIXED = OUT.with_name(TABLE.fixed)
KINDS = {
    "gpt2": dict(layer_norm=True, activation="gelu"),
    "theory": dict(),
    "theory uni d4": dict(d_model=4, embedding="uni"),
    "gpt2 2 layers": dict(layer_norm=True, activation="gelu", n_layers=2),
    "gpt2 k 4": dict(layer_norm=True, activation="gelu", vocab_size=4),
}
SHORT = ("gpt2 2 layers", "gpt2 k 4")  # lengths 128 and 256, ensembles of 4


def timed(config, precision: str, n: int, length: int, steps: int) -> float:
    """Wall seconds of ``steps`` steps of an ensemble of ``n`` runs."""
    start = time.perf_counter()
    train_many(
        binary(0.3, 0.9)
        if config.vocab_size == 2
        else symmetric(config.vocab_size, 0.9),
        config,
        seeds=list(range(n)),
        steps=steps,
        batch_size=16,
        seq_len=length,
        eval_every=20,
        eval_batches=4,
        precision=precision,
        execution=Execution(device="cpu", progress=False),
    )
    return time.perf_counter() - start


def case(kind: str, precision: str, n: int, length: int) -> dict:
    """Marginal seconds per step: steps 10 + m less steps 10, m a multiple of 20 (one
    evaluation each) that the estimate puts at 3 s or more, the smaller of two tries."""
    config = TransformerConfig(max_len=length, **KINDS[kind])
    train = TrainConfig(steps=1, batch_size=16, seq_len=length, precision=precision)
    spec = RunSpec({"kind": "binary", "p": 0.3, "q": 0.9}, config, train, seed=0)
    estimate = estimate_seconds([spec] * n, 1, table=TABLE)
    m = 20 * min(10, max(1, math.ceil(3 / (20 * estimate))))
    seconds = (
        min(
            timed(config, precision, n, length, 10 + m)
            - timed(config, precision, n, length, 10)
            for _ in range(2)
        )
        / m
    )
    return dict(
        kind=kind,
        config=config.to_dict(),
        precision=precision,
        n=n,
        length=length,
        seconds=seconds,
        estimate=estimate,
    )


def fit(rows: list[dict]) -> dict:
    """Least squares in logs, per precision: seconds per run-step =
    base (L/256)^a, times u for the uni-embedding model, at batch 16 and one layer,
    an ensemble n + 0.3 runs."""
    import numpy as np

    fitted = {}
    for precision in ("fp32", "fp16"):
        mine = [r for r in rows if r["precision"] == precision]
        x = np.array(
            [
                [
                    1,
                    np.log(r["length"] / 256),
                    float(r["config"].get("embedding") == "uni"),
                ]
                for r in mine
            ]
        )
        y = np.log([r["seconds"] / (r["n"] + 0.3) for r in mine])
        (c, a, b), *_ = np.linalg.lstsq(x, y, rcond=None)
        fitted[precision] = (round(float(np.exp(c)), 4), round(float(a), 2))
        fitted[f"uni {precision}"] = round(float(np.exp(b)), 2)
    return fitted


def fixed_seconds(ensembles: int = 6, tries: int = 3) -> dict:
    """Seconds of sweeps of one step on two worker processes: the first sweep (the
    pool starts, each worker warms up) and later ones (each ensemble's fixed cost),
    ``ensembles`` ensembles of 3 runs at length 128."""
    import tempfile
    from dataclasses import replace

    from markovlib.runs.executors import _pool
    from markovlib.runs.sweep import sweep

    config = TransformerConfig(max_len=128, **KINDS["gpt2"])
    train = TrainConfig(steps=1, batch_size=16, seq_len=128)
    base = RunSpec({"kind": "binary", "p": 0.3, "q": 0.9}, config, train, seed=0)

    def one_sweep(offset: int) -> float:
        specs = [
            replace(base, config=replace(config, window=w), seed=offset + s)
            for w in range(ensembles)
            for s in range(3)
        ]
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            sweep(specs, Path(folder) / "runs.sqlite", workers=2, progress=False)
            return time.perf_counter() - start

    start = time.perf_counter()
    _pool(2)
    pool = time.perf_counter() - start
    first = one_sweep(0)
    later = min(one_sweep(100 * (t + 1)) for t in range(tries))
    per_ensemble = later / -(-ensembles // 2)  # rounds of two ensembles
    return dict(
        pool_seconds=pool,
        first_sweep_seconds=first,
        later_sweep_seconds=later,
        ensemble_seconds=per_ensemble,
        pool_start_seconds=pool + first - later,
        ensembles=ensembles,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="length 256 only")
    parser.add_argument("--fixed", action="store_true", help="a sweep's fixed cost")
    args = parser.parse_args()
    if args.fixed:
        facts = dict(cpu=platform.processor() or platform.machine(), workers=2)
        found = {k: round(v, 2) for k, v in fixed_seconds().items()}
        print(found)
        FIXED.write_text(json.dumps(dict(facts=facts, **found), indent=1) + "\n")
        return
    torch.set_num_threads(1)
    every = (256,) if args.quick else (128, 256, 1024)
    timed(TransformerConfig(max_len=128), "fp32", 1, 128, 30)  # warm up
    rows = []
    for kind in KINDS:
        for precision in ("fp32", "fp16"):
            for length in every if kind not in SHORT else (128, 256):
                for n in (1, 4, 12) if length < 1024 and kind not in SHORT else (4,):
                    row = case(kind, precision, n, length)
                    rows.append(row)
                    print(
                        f"{kind:14s} {precision} L={length:5d} n={n:2d}: "
                        f"{row['seconds'] * 1000:7.0f} ms/step, estimate "
                        f"{row['estimate'] * 1000:7.0f}",
                        flush=True,
                    )
    print("fitted (base, power of L/256; uni factor):", fit(rows))
    facts = dict(
        cpu=platform.processor() or platform.machine(), torch=torch.__version__
    )
    OUT.write_text(json.dumps(dict(facts=facts, rows=rows), indent=1) + "\n")


if __name__ == "__main__":
    main()
