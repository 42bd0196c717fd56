"""Benchmark markovlib's Markov sampler, training step, ensembles and book against \
the authors' way of doing it.

Usage: ``python benchmarks/bench.py [--quick] [--book] [--ray] [--e2e-steps S]
[--device auto|cpu|cuda] [--threads N] [--processes P] [--json PATH]``

Timing: every number except the book rows is the median over trials of the per-call time
of one timing helper, ``measure``: warm-up calls first, then each trial repeats the call
for about ``min_time`` seconds, the number of calls set from one timed call, with
``torch.cuda.synchronize()`` around each trial on CUDA. Long calls (rows 4 and 5) use
``min_time = 0``, one call per trial.

The rows, each with its baseline (the "baseline is" column):

1. Sampler throughput (tokens/s) for a batch of 64 paths of length 1024, for the binary
   chain binary(0.2, 0.3) (markovlib's closed-form k = 2 path), the 5-state chain
   symmetric(5, 0.3) and a random 8-state chain, rows drawn from Dirichlet(1) with
   ``numpy.random.default_rng(0)`` (both through markovlib's blocked scan). Baseline:
   ``authors_sampler``, the authors' loop with one ``torch.multinomial`` call per
   position. Each chain is timed in ``--processes`` fresh Python processes (default 5; 1
   with --quick) and the row gives the medians, the range is printed below the table: on
   the 2-core VM the draw time is bimodal from one process to the next (the binary draw
   takes about 0.6 or 1.3 ms, whichever CPU it runs on and whatever the address layout),
   so one process can land in either mode.
2. Time per optimisation step at the paper's size (d = 8, 1 layer, GPT-2 block, tied
   head, batch 16, sequence length 1024 and 256, binary(0.5, 0.8)): draw a fresh batch,
   forward, cross entropy, backward, AdamW step, one-cycle scheduler step (the loop of
   ``markovlib.train.train``). Both columns use markovlib's model, ``make_optimizer``,
   ``make_schedule`` and ``cross_entropy``; only the sampler differs (baseline: the same
   step fed by ``authors_sampler``), so the ratio is what the sampler alone changes in a
   whole step. A second row per length times the same step fed one fixed, pre-drawn
   batch (``no_sampler``: sampling costs nothing) against the same baseline: the largest
   ratio any sampler could reach with this model on this machine.
3. Ensemble throughput (model·tokens/s: models × batch × positions per second) of one
   ``train_many``-style step of ``Transformer(config, n_models=N)`` for N = 1, 8,
   32 (same architecture as 2, batch 16 × seq 256 per model; full mode also seq 1024
   for N = 1 and 8): each member's batch drawn by markovlib's sampler with its own
   generator, stacked to (N, batch, length + 1), forward, the N per-model losses of
   ``cross_entropy``, ``.sum().backward()``, AdamW step, scheduler step. Baseline:
   markovlib's own single-model step (``Transformer(config)``, as ``train`` builds it,
   row 2's markovlib column) at the same length, so a ratio >= 1 means that training N
   models as one ensemble is no slower per model than training them one by one (the
   N = 1 row is the cost of the ensemble code path itself).
4. ``markovlib.train.train`` end to end for a short run (model construction, test loss
   at step 0 and at the end, history bookkeeping; one whole run per trial) divided by
   its number of steps, next to the bare step of 2: the overhead of evaluation and
   set-up. No baseline.
5. The paper's run as the authors schedule it: one model, batch 16 × seq 1024, d = 8,
   binary(0.5, 0.8), test loss after EVERY step on 24 fresh batches. markovlib:
   ``train(..., eval_every=1, eval_batches=24)``. Baseline: ``authors_paper_run``, the
   same model, optimiser, schedule and evaluation, every batch (training and evaluation)
   drawn with ``authors_sampler``. A 400-iteration baseline run takes minutes, so both
   run ``--e2e-steps`` S iterations (default 10 with --quick, 40 otherwise), one timed
   run each; the row reports the whole run's seconds / S (set-up and the step-0
   evaluation included on both sides, a bias of about 1/S), and a second row projects it
   to 400 iterations (per-iteration × 400: projected, not measured).
6. Book execution (full mode, or --book): seconds of one ``jupyter-book build`` of the
   repository into a fresh temporary ``--path-output`` (no execution cache) and with a
   fresh, empty result store (``MARKOVLIB_RESULTS`` in the same temporary folder: no
   stored runs are read back, every chapter trains from scratch), with
   MARKOVLIB_SCALE=smoke and with MARKOVLIB_SCALE=cpu, the ``jupyter-book`` installed
   beside this Python. These are subprocesses, timed once each with a wall clock rather
   than ``measure``. No baseline.
7. Sweep executors (full mode, or --ray): seconds of one 16-run sweep (``SWEEP_GRID``: 2
   p × 2 q × tying × 2 seeds, ensembles of 4, each time into a fresh result store)
   through the Ray executor on a single-machine cluster of ``--threads`` CPUs started
   for it (``ray.init``). With ``cpus_per_task = --threads`` the tasks run one at a time
   with the local executor's thread count: the ratio (< 1) is Ray's overhead, once with
   the workers cold (the first sweep: worker processes start and import torch) and once
   warm (a second sweep). With ``cpus_per_task = 1`` (warm) ``--threads`` ensembles
   train at once, one thread each. Baseline: the same sweep through the local executor,
   in this process with ``--threads`` torch threads. The cluster's start-up is a row of
   its own. Wall-clock, one run each, not ``measure``.

Why the sampler baseline is what it is: the authors' code (paper App. A; their public
training code) samples the chain with a Python loop over positions and one
``torch.multinomial`` call per position, the first state drawn from the stationary law.
``authors_sampler`` reproduces exactly that loop (transition matrix as a tensor on the
device, rows picked by the previous states), so the ratio measures markovlib's
vectorised sampler against the reference implementation rather than against a straw man.
It is built once per chain, outside the timed region, as is markovlib's own table of
thresholds.

The ratio column is always markovlib / baseline in speed: markovlib / baseline for
throughputs, baseline / markovlib for times (> 1: markovlib, or the ensemble, is
faster). Seeds are fixed; the timings, of course, depend on the machine and its load
(the 1-minute load average is printed at the start and at the end).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

import markovlib
from markovlib.chains import MarkovChain, binary, symmetric
from markovlib.model import Transformer, TransformerConfig
from markovlib.presets import resolve_device
from markovlib.train import (
    Execution,
    cross_entropy,
    make_optimizer,
    make_schedule,
    train,
)

ROOT = (
    Path(__file__).resolve().parent.parent
)  # the repository: what the book rows build
SEED = 0
LR = 2e-3
SAMPLER_BATCH, SAMPLER_LEN = 64, 1024
TRAIN_BATCH, TRAIN_LENS = 16, (1024, 256)
E2E_STEPS = 50
ENSEMBLE_SIZES = {
    256: (1, 8, 32),
    1024: (1, 8),
}  # seq length → N; seq 1024 in full mode only
PAPER_LEN, PAPER_EVAL_BATCHES, PAPER_ITERATIONS = 1024, 24, 400
BOOK_SCALES = ("smoke", "cpu")
SWEEP_GRID = dict(
    ps=(0.2, 0.6),
    qs=(0.3, 0.7),
    tied=(True, False),
    seeds=(0, 1),
    config_kwargs=dict(max_len=64),
    steps=50,
    batch_size=8,
    seq_len=64,
    eval_every=25,
    eval_batches=2,
)  # 16 runs
SWEEP_ENSEMBLE = 4


# ---------------------------------------------------------------- timing
def measure(
    fn, *, min_time: float, trials: int, warmup: int, device: torch.device
) -> float:
    """Median seconds per call of ``fn()``: ``warmup`` calls, then ``trials`` runs of
    about ``min_time`` s each."""
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
    return lambda batch, length, g: chain.sample(
        batch, length, generator=g, device=device
    )


def authors_sampler(chain: MarkovChain, device: torch.device):
    """The authors' loop: x_0 ~ pi, then one torch.multinomial call per position on the
    rows P[x_{n-1}]."""
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


def no_sampler(chain: MarkovChain, device: torch.device):
    """Draws one batch per shape once, then returns it again: a sampler that costs
    nothing (the ceiling row)."""
    drawn: dict = {}

    def sample(batch: int, length: int, g: torch.Generator) -> torch.Tensor:
        if (batch, length) not in drawn:
            drawn[batch, length] = chain.sample(
                batch, length, generator=g, device=device
            )
        return drawn[batch, length]

    return sample


def dirichlet_chain(k: int, seed: int = 0) -> MarkovChain:
    """A random k-state chain whose rows are drawn from Dirichlet(1, …, 1) (numpy
    ``default_rng(seed)``)."""
    P = np.random.default_rng(seed).dirichlet(np.ones(k), size=k)
    return MarkovChain(P, name=f"dirichlet(k={k}, seed={seed})")


SAMPLER_TOKENS = SAMPLER_BATCH * SAMPLER_LEN
SAMPLER_CHAINS = {
    "binary(0.2, 0.3)": lambda: binary(0.2, 0.3),
    "symmetric(5, 0.3)": lambda: symmetric(5, 0.3),
    "random k = 8, rows ~ Dirichlet(1)": lambda: dirichlet_chain(8),
}


def sampler_times(label: str, device: torch.device, quick: bool) -> dict[str, float]:
    """Seconds per draw of both samplers for one chain of SAMPLER_CHAINS (``measure``,
    this process)."""
    timing = (
        dict(min_time=0.1, trials=3, warmup=1)
        if quick
        else dict(min_time=0.5, trials=5, warmup=2)
    )
    chain = SAMPLER_CHAINS[label]()
    return {
        name: measure(sampler_call(make, chain, device), device=device, **timing)
        for name, make in SAMPLERS.items()
    }


def sampler_times_in_subprocess(
    label: str, device: torch.device, threads: int, quick: bool
) -> dict[str, float]:
    """:func:`sampler_times` in a fresh Python process: on the 2-core VM the draw time
    is bimodal from one process to the next (e.g. 0.6 or 1.3 ms for the binary draw,
    whatever the CPU or the address layout), so a single process can land in either
    mode."""
    code = (
        "import json, sys, torch; sys.path.insert(0, "
        f"{str(Path(__file__).parent)!r}); import bench; "
        f"torch.set_num_threads({threads}); "
        f"print(json.dumps(bench.sampler_times({label!r}, "
        f"torch.device({str(device)!r}), {quick})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------- workloads
def sampler_call(make_sampler, chain: MarkovChain, device: torch.device):
    sample, g = make_sampler(chain, device), generator(device)
    return lambda: sample(SAMPLER_BATCH, SAMPLER_LEN, g)


def train_step(
    make_sampler,
    chain: MarkovChain,
    config: TransformerConfig,
    seq_len: int,
    device: torch.device,
    *,
    n_models: int | None = None,
    steps: int = 10**9,
):
    """One optimisation step as in markovlib.train's loop, drawing its batches with
    ``make_sampler``; (step, model).

    ``n_models=None``: one model, as ``train`` builds it; ``n_models=N``: an ensemble
    stepped as ``train_many`` does it, each member's batch drawn with its own generator
    and the N batches stacked. ``steps`` only sets the length of the one-cycle schedule
    (the default never runs out while timing).
    """
    model = Transformer(
        config, n_models=n_models, generator=generator(torch.device("cpu"))
    ).to(device)
    optimizer = make_optimizer(model, LR)
    scheduler = make_schedule(optimizer, "one-cycle", steps, LR)
    sample = make_sampler(chain, device)
    gens = [generator(device, SEED + i) for i in range(n_models or 1)]
    model.train()

    def step() -> torch.Tensor:
        xs = [sample(TRAIN_BATCH, seq_len + 1, g) for g in gens]
        losses = cross_entropy(
            model, torch.stack(xs) if n_models else xs[0]
        )  # N per-model losses (or one)
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()  # member i's gradient is that of its own loss
        optimizer.step()
        scheduler.step()
        return losses.detach()

    return step, model


def authors_paper_run(
    chain: MarkovChain, config: TransformerConfig, steps: int, device: torch.device
):
    """``train(..., eval_every=1, eval_batches=24)`` with every batch drawn by
    ``authors_sampler`` (one whole run)."""

    def run() -> list[float]:
        step, model = train_step(
            authors_sampler, chain, config, PAPER_LEN, device, steps=steps
        )
        sample, g = (
            authors_sampler(chain, device),
            generator(device, SEED + 1),
        )  # the test stream

        @torch.no_grad()
        def test_loss() -> torch.Tensor:
            model.eval()
            batches = (
                sample(TRAIN_BATCH, PAPER_LEN + 1, g) for _ in range(PAPER_EVAL_BATCHES)
            )
            loss = torch.stack([cross_entropy(model, x) for x in batches]).mean()
            model.train()
            return loss

        history = [test_loss()]
        for _ in range(steps):
            step()
            history.append(test_loss())
        return torch.stack(history).tolist()

    return run


def build_book(scale: str, threads: int) -> float:
    """Wall-clock seconds of one ``jupyter-book build`` of ROOT at
    MARKOVLIB_SCALE=scale, nothing cached or stored."""
    exe = Path(sys.executable).with_name("jupyter-book")
    with tempfile.TemporaryDirectory(prefix=f"markovlib-bench-book-{scale}-") as out:
        env = {
            "OMP_NUM_THREADS": str(threads),
            "MPLBACKEND": "Agg",
            **os.environ,
            "MARKOVLIB_SCALE": scale,
            "MARKOVLIB_RESULTS": str(Path(out) / "results"),
        }  # an empty result store: every run trains
        t0 = time.perf_counter()
        proc = subprocess.run(
            [str(exe), "build", str(ROOT), "--path-output", out],
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(
            f"jupyter-book build at scale {scale} failed "
            f"({proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return seconds


def sweep_times(threads: int) -> dict[str, float]:
    """Wall-clock seconds of the SWEEP_GRID sweep: local; Ray start; Ray one task at a
    time cold, warm; parallel."""
    import ray

    from markovlib.runs.spec import grid
    from markovlib.runs.sweep import sweep

    specs = grid(**SWEEP_GRID)
    seconds = {}
    with tempfile.TemporaryDirectory(
        prefix="markovlib-bench-sweep-", dir="/tmp"
    ) as tmp:

        def timed(name: str, **executor) -> None:
            t0 = time.perf_counter()
            sweep(
                specs,
                Path(tmp) / name,
                ensemble_size=SWEEP_ENSEMBLE,
                device="cpu",
                progress=False,
                **executor,
            )
            seconds[name] = time.perf_counter() - t0

        timed("local")
        t0 = time.perf_counter()
        ray.init(
            num_cpus=threads,
            _temp_dir=str(Path(tmp) / "ray"),
            include_dashboard=False,
            logging_level="WARNING",
        )
        seconds["ray_start"] = time.perf_counter() - t0
        try:
            timed("ray_cold", executor="ray", cpus_per_task=threads)
            timed("ray_warm", executor="ray", cpus_per_task=threads)
            timed("ray_parallel", executor="ray", cpus_per_task=1)
        finally:
            ray.shutdown()
    return seconds


# ---------------------------------------------------------------- report
def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit.endswith("tokens/s"):
        return f"{value / 1e6:,.2f} M"
    decimals = (
        max(0, 2 - math.floor(math.log10(abs(value)))) if value else 0
    )  # 3 significant digits
    return f"{value:,.{decimals}f}"


def table(rows: list[dict]) -> str:
    lines = [
        "| what | markovlib | baseline | baseline is | ratio (markovlib speed-up) |",
        "|---|---:|---:|---|---:|",
    ]
    for r in rows:
        ratio = (
            "—"
            if r["ratio"] is None
            else f"{r['ratio']:.{2 if r['ratio'] < 10 else 1}f}×"
        )
        lines.append(
            f"| {r['what']} ({r['unit']}) | {fmt(r['markovlib'], r['unit'])} "
            f"| {fmt(r['baseline'], r['unit'])} | {r['baseline_is']} | {ratio} |"
        )
    return "\n".join(lines)


def row(
    what: str,
    unit: str,
    markovlib: float,
    baseline: float | None = None,
    baseline_is: str = "—",
) -> dict:
    """A table row; the ratio is markovlib's speed-up (throughputs:
    markovlib / baseline, times: the inverse)."""
    ratio = (
        None
        if baseline is None
        else (markovlib / baseline if unit.endswith("/s") else baseline / markovlib)
    )
    return dict(
        what=what,
        unit=unit,
        markovlib=markovlib,
        baseline=baseline,
        baseline_is=baseline_is,
        ratio=ratio,
    )


# ---------------------------------------------------------------- the rows
@dataclass
class Context:
    """What the rows share: the arguments, the device, the timing settings, and numbers
    that later rows and the report reuse (the bare step of row 2, the sampler spread of
    row 1)."""

    args: argparse.Namespace
    device: torch.device
    timing: dict
    paper_steps: int
    chain: MarkovChain = field(default_factory=lambda: binary(0.5, 0.8))
    config: TransformerConfig = field(
        default_factory=lambda: TransformerConfig.gpt2(tied=True)
    )
    bare: dict = field(default_factory=dict)  # seq_len -> ms of markovlib's bare step
    spread: dict = field(default_factory=dict)  # sampler label -> (min, max) ranges
    e2e: float = float("nan")

    @property
    def processes(self) -> int:
        return 1 if self.args.quick else self.args.processes

    def time_it(self, fn, **kw) -> float:
        return measure(fn, device=self.device, **{**self.timing, **kw})

    def run(self, steps: int, seq_len: int, **kw):
        """A ``train`` call of the benchmark's model and chain (the callable, not its
        result)."""
        return lambda: train(
            self.chain,
            self.config,
            steps=steps,
            batch_size=TRAIN_BATCH,
            seq_len=seq_len,
            lr=LR,
            seed=SEED,
            **kw,
            execution=Execution(device=self.device, progress=False),
        )


def row_1_sampler(ctx: Context) -> list[dict]:
    """1. Sampler throughput, each chain in several fresh processes
    (median; range printed)."""
    rows = []
    for label in SAMPLER_CHAINS:
        runs = [
            sampler_times_in_subprocess(
                label, ctx.device, ctx.args.threads, ctx.args.quick
            )
            for _ in range(ctx.processes)
        ]
        tokens = {name: [SAMPLER_TOKENS / r[name] for r in runs] for name in SAMPLERS}
        ratios = [r["baseline"] / r["markovlib"] for r in runs]
        ctx.spread[label] = {n: (min(t), max(t)) for n, t in tokens.items()}
        ctx.spread[label]["ratio"] = (min(ratios), max(ratios))
        many = f", median of {ctx.processes} processes" if ctx.processes > 1 else ""
        rows.append(
            row(
                f"sample {label}, {SAMPLER_BATCH}×{SAMPLER_LEN}{many}",
                "tokens/s",
                **{n: statistics.median(t) for n, t in tokens.items()},
                baseline_is="authors' multinomial loop",
            )
        )
    return rows


def row_2_train_step(ctx: Context) -> list[dict]:
    """2. One training step at the paper's size, and the same step with no sampling."""
    rows = []
    for seq_len in TRAIN_LENS:
        step = {
            name: train_step(make, ctx.chain, ctx.config, seq_len, ctx.device)[0]
            for name, make in SAMPLERS.items()
        }
        ms = {name: 1e3 * ctx.time_it(fn) for name, fn in step.items()}
        ctx.bare[seq_len] = ms["markovlib"]
        authors = "same step, authors' sampler"
        rows.append(
            row(
                f"train step, batch {TRAIN_BATCH} × seq {seq_len}",
                "ms/step",
                **ms,
                baseline_is=authors,
            )
        )
        fixed = train_step(no_sampler, ctx.chain, ctx.config, seq_len, ctx.device)[0]
        rows.append(
            row(
                "train step without sampling (one fixed batch), seq "
                f"{seq_len}: the ceiling",
                "ms/step",
                1e3 * ctx.time_it(fixed),
                ms["baseline"],
                authors,
            )
        )
    return rows


def row_3_ensembles(ctx: Context) -> list[dict]:
    """3. A train_many-style step of N models vs markovlib's single-model step
    (row 2)."""
    rows = []
    for seq_len, sizes in ENSEMBLE_SIZES.items():
        if ctx.args.quick and seq_len != 256:
            continue
        per_model = TRAIN_BATCH * seq_len
        if seq_len not in ctx.bare:
            step = train_step(
                markovlib_sampler, ctx.chain, ctx.config, seq_len, ctx.device
            )
            ctx.bare[seq_len] = 1e3 * ctx.time_it(step[0])
        single = per_model / (1e-3 * ctx.bare[seq_len])
        for n in sizes:
            step = train_step(
                markovlib_sampler,
                ctx.chain,
                ctx.config,
                seq_len,
                ctx.device,
                n_models=n,
            )[0]
            rows.append(
                row(
                    f"ensemble step, N = {n}, batch {TRAIN_BATCH} × seq "
                    f"{seq_len} per model",
                    "model·tokens/s",
                    n * per_model / ctx.time_it(step),
                    single,
                    "single-model step (N = 1, `train`)",
                )
            )
    return rows


def row_4_train_end_to_end(ctx: Context) -> list[dict]:
    """4. ``train()`` end to end, evaluation at the start and the end only
    (one run per trial)."""
    seq_len = TRAIN_LENS[0]
    short_run = ctx.run(E2E_STEPS, seq_len, eval_every=E2E_STEPS)
    ctx.e2e = 1e3 * ctx.time_it(short_run, min_time=0.0, warmup=1) / E2E_STEPS
    what = (
        f"`train()` end to end, {E2E_STEPS} steps, "
        f"eval_every={E2E_STEPS}, seq {seq_len}"
    )
    return [row(what, "ms/step", ctx.e2e)]


def row_5_paper_run(ctx: Context) -> list[dict]:
    """5. The paper's run: evaluation every step on 24 fresh batches, S iterations, one
    run each."""
    steps = ctx.paper_steps
    paper = {
        "markovlib": ctx.run(
            steps, PAPER_LEN, eval_every=1, eval_batches=PAPER_EVAL_BATCHES
        ),
        "baseline": authors_paper_run(ctx.chain, ctx.config, steps, ctx.device),
    }
    per_iter = {
        name: ctx.time_it(fn, min_time=0.0, trials=1, warmup=0) / steps
        for name, fn in paper.items()
    }
    what = (
        f"paper run (eval every step on {PAPER_EVAL_BATCHES} batches), "
        f"batch {TRAIN_BATCH} × seq {PAPER_LEN}"
    )
    authors = "same run, authors' sampler"
    projected = {k: PAPER_ITERATIONS * v for k, v in per_iter.items()}
    return [
        row(
            f"{what}, measured over {steps} iterations",
            "s/iteration",
            **per_iter,
            baseline_is=authors,
        ),
        row(
            f"{what}, {PAPER_ITERATIONS} iterations projected from {steps}",
            "s, projected",
            **projected,
            baseline_is=authors,
        ),
    ]


def row_6_book(ctx: Context) -> list[dict]:
    """6. Book execution, a fresh output folder each (subprocesses, one wall-clock run
    each)."""
    return [
        row(
            f"`jupyter-book build`, MARKOVLIB_SCALE={scale}, fresh output folder",
            "s",
            build_book(scale, ctx.args.threads),
        )
        for scale in BOOK_SCALES
    ]


def row_7_sweeps(ctx: Context) -> list[dict]:
    """7. The same 16-run sweep through the local executor and through Ray
    (wall clock, once each)."""
    threads = ctx.args.threads
    sweeps = sweep_times(threads)
    what = (
        f"16-run sweep (ensembles of {SWEEP_ENSEMBLE}), Ray executor on {threads} CPUs"
    )
    local = "same sweep, local executor"
    return [
        row(
            f"{what}, {threads} CPUs per task, workers cold",
            "s",
            sweeps["ray_cold"],
            sweeps["local"],
            local,
        ),
        row(
            f"{what}, {threads} CPUs per task, workers warm",
            "s",
            sweeps["ray_warm"],
            sweeps["local"],
            local,
        ),
        row(
            f"{what}, 1 CPU per task, workers warm",
            "s",
            sweeps["ray_parallel"],
            sweeps["local"],
            local,
        ),
        row(
            f"`ray.init(num_cpus={threads})`: single-machine cluster start",
            "s",
            sweeps["ray_start"],
        ),
    ]


# The numbered rows of the module docstring, in order; rows 6 and 7 run in full mode or
# when asked.
ROWS = (
    row_1_sampler,
    row_2_train_step,
    row_3_ensembles,
    row_4_train_end_to_end,
    row_5_paper_run,
    row_6_book,
    row_7_sweeps,
)
FULL_ONLY = {
    6: "book",
    7: "ray",
}  # row number -> the flag that asks for it in --quick mode


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="fewer, shorter trials, no book builds (< 40 s)",
    )
    ap.add_argument(
        "--book", action="store_true", help="also time the book builds in --quick mode"
    )
    ap.add_argument(
        "--ray",
        action="store_true",
        help="also time the sweep executors (local, Ray) in --quick mode",
    )
    ap.add_argument(
        "--e2e-steps",
        type=int,
        default=None,
        metavar="S",
        help="iterations of the paper-run row (default 10 with --quick, 40 otherwise)",
    )
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument(
        "--threads", type=int, default=2, help="torch.set_num_threads (default 2)"
    )
    ap.add_argument(
        "--json", metavar="PATH", help="also write the numbers to this JSON file"
    )
    ap.add_argument(
        "--processes",
        type=int,
        default=5,
        help="fresh processes per sampler row (median reported; default "
        "5, 1 with --quick)",
    )
    args = ap.parse_args(argv)
    paper_steps = args.e2e_steps or (10 if args.quick else 40)
    if paper_steps < 1:
        ap.error("--e2e-steps must be >= 1")
    if args.processes < 1:
        ap.error("--processes must be >= 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    device = resolve_device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: CUDA is not available to this torch build")
    timing = (
        dict(min_time=0.1, trials=3, warmup=1)
        if args.quick
        else dict(min_time=0.5, trials=5, warmup=2)
    )
    ctx = Context(args, device, timing, paper_steps)
    load_start = os.getloadavg()[0]
    t_start = time.perf_counter()
    rows: list[dict] = []
    for number, measure_row in enumerate(ROWS, start=1):
        if args.quick and number in FULL_ONLY and not getattr(args, FULL_ONLY[number]):
            continue
        rows += measure_row(ctx)
    spread, processes, e2e, bare = ctx.spread, ctx.processes, ctx.e2e, ctx.bare
    e2e_len = TRAIN_LENS[0]
    total = time.perf_counter() - t_start
    env = {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "torch": torch.__version__,
        "markovlib": markovlib.__version__,
        "python": platform.python_version(),
        "device": str(device)
        + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "timing": timing,
        "seed": SEED,
        "paper_run_iterations": paper_steps,
        "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
    }
    print("## markovlib benchmark\n")
    print("\n".join(f"- {k}: {v}" for k, v in env.items()) + "\n")
    print(table(rows) + "\n")
    for label, r in spread.items():
        if processes > 1:
            print(
                f"sample {label}: range over {processes} processes: markovlib "
                f"{fmt(r['markovlib'][0], 'tokens/s')}"
                f" – {fmt(r['markovlib'][1], 'tokens/s')}, baseline "
                f"{fmt(r['baseline'][0], 'tokens/s')} – "
                f"{fmt(r['baseline'][1], 'tokens/s')}, ratio {r['ratio'][0]:.1f}× – "
                f"{r['ratio'][1]:.1f}×."
            )
    print(
        f"train() overhead (test loss at step 0 and {E2E_STEPS}, set-up, bookkeeping): "
        f"{e2e / bare[e2e_len]:.2f}× the bare markovlib step at seq {e2e_len}."
    )
    print(f"Total benchmark time: {total:.1f} s")

    result = {
        "environment": env,
        "results": rows,
        "sampler_spread": spread,
        "e2e_over_bare_step": e2e / bare[e2e_len],
        "total_seconds": total,
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
