"""Benchmark markovlib's Markov sampler and training step against the authors' way of doing it.

Usage: ``python benchmarks/bench.py [--quick] [--device auto|cpu|cuda] [--threads N] [--json PATH]``

What is measured (every number is the median over trials of the per-call time of one timing helper, ``measure``:
warm-up calls first, then each trial repeats the call for about ``min_time`` seconds, the number of calls set
from one timed call, with ``torch.cuda.synchronize()`` around each trial on CUDA):

1. Sampler throughput (tokens/s) for a batch of 64 paths of length 1024, for the binary chain binary(0.2, 0.3)
   (markovlib's closed-form k = 2 path) and the 5-state chain symmetric(5, 0.3) (markovlib's log-depth scan).
2. Time per optimisation step at the paper's size (d = 8, 1 layer, GPT-2 block, tied head, batch 16, sequence
   length 1024 and 256, binary(0.5, 0.8)): draw a fresh batch, forward, cross entropy, backward, AdamW step,
   one-cycle scheduler step, ``loss.item()`` (as ``markovlib.train.train`` does). Both columns use markovlib's
   model, ``make_optimizer``, ``make_schedule`` and ``cross_entropy``; only the sampler differs, so the ratio
   is what the sampler alone changes in a whole step.
3. ``markovlib.train.train`` end to end for a short run (model construction, test loss at step 0 and at the
   end, history bookkeeping; one whole run per trial) divided by its number of steps, next to the bare step
   of 2: the overhead of evaluation and set-up.

Why the baseline is what it is: the authors' code (PAPER.md, "Training settings") samples the chain with a Python
loop over positions and one ``torch.multinomial`` call per position, the first state drawn from the stationary
law. ``authors_sampler`` reproduces exactly that loop (transition matrix as a tensor on the device, rows picked by
the previous states), so the ratio measures markovlib's vectorised sampler against the reference implementation
rather than against a straw man. It is built once per chain, outside the timed region, as is markovlib's own
table of thresholds.

The ratio column is always markovlib's speed-up: markovlib / baseline for throughputs, baseline / markovlib for
times (> 1: markovlib is faster). Seeds are fixed; the timings, of course, depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import sys
import time

import torch

import markovlib
from markovlib.chains import MarkovChain, binary, symmetric
from markovlib.model import Transformer, TransformerConfig
from markovlib.presets import resolve_device
from markovlib.train import cross_entropy, make_optimizer, make_schedule, train

SEED = 0
LR = 2e-3
SAMPLER_BATCH, SAMPLER_LEN = 64, 1024
TRAIN_BATCH, TRAIN_LENS = 16, (1024, 256)
E2E_STEPS = 50


# ---------------------------------------------------------------- timing
def measure(fn, *, min_time: float, trials: int, warmup: int, device: torch.device) -> float:
    """Median seconds per call of ``fn()``: ``warmup`` calls, then ``trials`` runs of about ``min_time`` s each."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def run(n: int) -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        return time.perf_counter() - t0

    run(warmup)
    # calls per trial, calibrated on one timed call (min_time = 0: one call per trial)
    reps = max(1, math.ceil(min_time / max(run(1), 1e-9))) if min_time > 0 else 1
    return statistics.median(run(reps) / reps for _ in range(trials))


def generator(device: torch.device, seed: int = SEED) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


# ---------------------------------------------------------------- the two samplers
def markovlib_sampler(chain: MarkovChain, device: torch.device):
    return lambda batch, length, g: chain.sample(batch, length, generator=g, device=device)


def authors_sampler(chain: MarkovChain, device: torch.device):
    """The authors' loop: x_0 ~ pi, then one torch.multinomial call per position on the rows P[x_{n-1}]."""
    P = torch.tensor(chain.P, dtype=torch.float32, device=device)
    pi = torch.tensor(chain.stationary(), dtype=torch.float32, device=device)

    def sample(batch: int, length: int, g: torch.Generator) -> torch.Tensor:
        x = torch.empty(batch, length, dtype=torch.int64, device=device)
        x[:, 0] = torch.multinomial(pi, batch, replacement=True, generator=g)
        for n in range(1, length):
            x[:, n] = torch.multinomial(P[x[:, n - 1]], 1, generator=g).squeeze(1)
        return x

    return sample


SAMPLERS = {"markovlib": markovlib_sampler, "baseline": authors_sampler}


# ---------------------------------------------------------------- workloads
def sampler_call(make_sampler, chain: MarkovChain, device: torch.device):
    sample, g = make_sampler(chain, device), generator(device)
    return lambda: sample(SAMPLER_BATCH, SAMPLER_LEN, g)


def train_step(make_sampler, chain: MarkovChain, config: TransformerConfig, seq_len: int, device: torch.device):
    """One optimisation step as in markovlib.train.train, drawing its batch with ``make_sampler``."""
    model = Transformer(config, generator=generator(torch.device("cpu"))).to(device)
    optimizer = make_optimizer(model, LR)
    scheduler = make_schedule(optimizer, "one-cycle", 10**9, LR)  # never runs out of steps while timing
    sample, g = make_sampler(chain, device), generator(device)
    model.train()

    def step() -> float:
        loss = cross_entropy(model, sample(TRAIN_BATCH, seq_len + 1, g))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        return loss.item()

    return step


# ---------------------------------------------------------------- report
def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value / 1e6:,.2f} M" if unit == "tokens/s" else f"{value:,.1f}"


def table(rows: list[dict]) -> str:
    lines = ["| what | markovlib | baseline (authors-style) | ratio (markovlib speed-up) |",
             "|---|---:|---:|---:|"]
    for r in rows:
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.1f}×"
        lines.append(f"| {r['what']} ({r['unit']}) | {fmt(r['markovlib'], r['unit'])} "
                     f"| {fmt(r['baseline'], r['unit'])} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter trials (< 30 s)")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers to this JSON file")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    device = resolve_device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: CUDA is not available to this torch build")
    timing = dict(min_time=0.1, trials=3, warmup=1) if args.quick else dict(min_time=0.5, trials=5, warmup=2)
    time_it = lambda fn, **kw: measure(fn, device=device, **{**timing, **kw})  # noqa: E731
    t_start = time.perf_counter()
    rows: list[dict] = []

    # 1. sampler throughput
    tokens = SAMPLER_BATCH * SAMPLER_LEN
    for label, chain in (("binary(0.2, 0.3)", binary(0.2, 0.3)), ("symmetric(5, 0.3)", symmetric(5, 0.3))):
        tput = {name: tokens / time_it(sampler_call(make, chain, device)) for name, make in SAMPLERS.items()}
        rows.append(dict(what=f"sample {label}, {SAMPLER_BATCH}×{SAMPLER_LEN}", unit="tokens/s", **tput,
                         ratio=tput["markovlib"] / tput["baseline"]))

    # 2. one training step at the paper's size, and 3. train() end to end
    chain, config = binary(0.5, 0.8), TransformerConfig.gpt2(tied=True)
    bare = {}
    for seq_len in TRAIN_LENS:
        ms = {name: 1e3 * time_it(train_step(make, chain, config, seq_len, device)) for name, make in SAMPLERS.items()}
        bare[seq_len] = ms["markovlib"]
        rows.append(dict(what=f"train step, batch {TRAIN_BATCH} × seq {seq_len}", unit="ms/step", **ms,
                         ratio=ms["baseline"] / ms["markovlib"]))
    e2e_len = TRAIN_LENS[0]
    short_run = lambda: train(chain, config, steps=E2E_STEPS, batch_size=TRAIN_BATCH, seq_len=e2e_len, lr=LR,  # noqa: E731
                        seed=SEED, device=device, eval_every=E2E_STEPS, progress=False)
    e2e = 1e3 * time_it(short_run, min_time=0.0, warmup=1) / E2E_STEPS  # one whole train() per trial
    rows.append(dict(what=f"train() end to end, {E2E_STEPS} steps, eval_every={E2E_STEPS}, seq {e2e_len}",
                     unit="ms/step", markovlib=e2e, baseline=None, ratio=None))

    env = {"date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
           "mode": "quick" if args.quick else "full",
           "torch": torch.__version__, "markovlib": markovlib.__version__, "python": platform.python_version(),
           "device": str(device) + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
           "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
           "timing": timing, "seed": SEED}
    total = time.perf_counter() - t_start
    print("## markovlib benchmark\n")
    print("\n".join(f"- {k}: {v}" for k, v in env.items()) + "\n")
    print(table(rows) + "\n")
    print(f"train() overhead (test loss at step 0 and {E2E_STEPS}, set-up, bookkeeping): "
          f"{e2e / bare[e2e_len]:.2f}× the bare markovlib step at seq {e2e_len}.")
    print(f"Total benchmark time: {total:.1f} s")

    result = {"environment": env, "results": rows, "e2e_over_bare_step": e2e / bare[e2e_len], "total_seconds": total}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
