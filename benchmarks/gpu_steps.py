"""Milliseconds per training step of one ensemble on a GPU, alone and with other
processes training beside it: what sizes `markovlib edition retrain --device cuda`
should use (issue 50).

Usage (on a CUDA machine, from the repository's root):
``python benchmarks/gpu_steps.py [--sizes 8,32,128] [--procs 1,4] [--json PATH]``.
Each measurement trains an ensemble of the paper edition's Fig 4 fp16 runs (GPT-2,
16 × 1024, 400-step schedule) for a short and a longer number of steps; the difference
over the extra steps is the time per step without start-up. With several processes,
each trains its own ensemble at once; the row gives each one's time per step and the
run-steps per second of all together.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from markovlib.runs.experiments import paper_edition  # noqa: E402
from markovlib.runs.spec import train_specs  # noqa: E402

GROUP = "fig4-400-tied-fp16"
SHORT, LONG = 10, 60


def _specs(size: int, steps: int):
    specs = dict(paper_edition())[GROUP]
    picked = [specs[i % len(specs)] for i in range(size)]
    return [  # distinct seeds: an ensemble of `size` different runs
        replace(s, seed=10_000 + i, train=s.train.replace(steps=steps))
        for i, s in enumerate(picked)
    ]


def ms_per_step(size: int) -> float:
    """Time per step of an ensemble of ``size`` runs on this process's GPU."""
    train_specs(_specs(size, 2), device="cuda")  # CUDA, cuBLAS and the kernels warm
    seconds = {}
    for steps in (SHORT, LONG):
        specs = _specs(size, steps)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        train_specs(specs, device="cuda")
        torch.cuda.synchronize()
        seconds[steps] = time.perf_counter() - t0
    return 1000 * (seconds[LONG] - seconds[SHORT]) / (LONG - SHORT)


def _worker(size: int) -> float:
    torch.set_num_threads(1)
    return ms_per_step(size)


def measure(size: int, procs: int) -> dict:
    if procs == 1:
        ms = [ms_per_step(size)]
    else:
        context = multiprocessing.get_context("spawn")
        with context.Pool(procs) as pool:
            ms = pool.map(_worker, [size] * procs)
    slowest = max(ms)
    return {
        "runs per ensemble": size,
        "processes": procs,
        "ms per step (each)": round(slowest, 1),
        "run-steps per s (all)": round(1000 * size * procs / slowest),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8,32,128")
    parser.add_argument("--procs", default="1,4")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("no CUDA GPU here: this benchmark times GPU steps")
    rows = []
    for procs in map(int, args.procs.split(",")):
        for size in map(int, args.sizes.split(",")):
            rows.append(measure(size, procs))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        device = torch.cuda.get_device_name()
        args.json.write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
