"""Sweeps: grids of training runs, trained as ensembles and written to the local
:class:`~markovlib.runs.store.ResultStore` as they finish; :func:`sweep_results` finds
each run where it is (shipped data by spec key, else the local store, else it trains).

The top of the run layer: it uses spec, store, shipped and executors.
"""

from __future__ import annotations

import functools
import math
import os
import signal
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from time import perf_counter

import pandas as pd
import torch
from tqdm import tqdm

from .._checks import check_int
from ..device import resolve_device
from ..train import TrainResult
from .executors import capped_processes, pool_started, pooled, train_chunks
from .shipped import shipped_data, source_weights
from .spec import RunSpec, ensembles, train_specs
from .store import ResultStore, check_seeds, default_results_dir

__all__ = [
    "sweep",
    "sweep_results",
    "training_note",
    "estimate_seconds",
    "makespan",
    "cpu_speed",
    "fixed_speed",
    "default_workers",
    "CpuTable",
    "CPU_TABLES",
    "this_cpu_table",
    "sigterm_as_interrupt",
]


@contextmanager
def sigterm_as_interrupt():
    """Turn SIGTERM into KeyboardInterrupt, so that a terminated sweep unwinds like
    Ctrl-C."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not in the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True)
class CpuTable:
    """What training costs on one kind of CPU, measured there by
    ``benchmarks/step_cost.py`` (and ``--fixed``): seconds of one step of one run on
    one thread (batch 16, one layer, d = 8, length 256, evaluated every 20 steps on 4
    batches) and the power of L/256 it grows with, per precision; the uni-embedding
    model's share; a sweep's fixed seconds on two worker processes."""

    name: str  # the words of the CPU's model name that pick this table
    flags: tuple[str, ...]  # and the instruction sets it must have
    step: dict  # precision -> (seconds at length 256, power of L/256)
    uni: dict  # precision -> the uni-embedding model's share (App. D, one logit)
    ensemble_seconds: float  # each ensemble: its models, last evaluation, results
    pool_start_seconds: float  # the first sweep of a process: the pool starts
    costs: str  # the measurements, in benchmarks/results: step_cost.py's
    fixed: str  # and step_cost.py --fixed's


# Least squares in logs on ensembles of 1-12 runs of the GPT-2 and the theory model,
# lengths 128-1024. AMD EPYC (2026-11-27): 41 cases, each within 0.74-1.28 of its fit;
# the uni-embedding share measured at d 4 (at d 8, global_minimum's re-run took 47 s for
# an fp16 ensemble estimated at 69 s before, hence 0.65); its pool starts in 7.45 s (3.0
# s of it the pool's manager process, no longer started), each ensemble 0.28 s (without
# them depth's sweeps of 12-22 s read 26-33 % low). Intel Xeon with AMX and AVX-512 FP16
# (2026-11-28): 50 cases, each within 0.73-1.42 of its fit; 0.17-0.62 times the AMD
# EPYC's time by model, length and precision (depth's re-run estimated from the AMD
# table: 2 min for a sweep that took 58 s there). The pools' start measured on
# 2026-11-27/28 included a manager process they no longer start (1.3 s of the Xeon's 3.9
# s; 3.2 s without it, 2026-11-30): the AMD EPYC's 7.5 s is high by about its manager's
# 3.0 s (pool_seconds in sweep-fixed.json), not re-measured.
AMD_EPYC = CpuTable(
    "AMD EPYC",
    ("avx2",),
    {"fp32": (0.0166, 1.61), "fp16": (0.0525, 1.42)},
    {"fp32": 0.94, "fp16": 0.65},
    0.3,
    7.5,
    "step-cost.json",
    "sweep-fixed.json",
)
INTEL_XEON = CpuTable(
    "Intel(R) Xeon(R)",
    ("amx_tile", "avx512_fp16"),
    {"fp32": (0.0068, 1.24), "fp16": (0.0146, 0.96)},
    {"fp32": 0.69, "fp16": 0.89},
    0.13,
    3.2,
    "step-cost-intel.json",
    "sweep-fixed-intel.json",
)
CPU_TABLES = (AMD_EPYC, INTEL_XEON)
# On both: an ensemble of n runs costs n + 0.3 runs a step; a run from the low-rank
# manifold, whose attention stays 0 and is skipped, a fifth (initialisation's re-run,
# 2026-11-27: 3-5 ms a run-step at length 256 against 19 ms); k states (k/2)^0.5 times
# as much as two in float32, as much in fp16, where autocast's own cost dominates
# (multi_state's two re-runs at k = 4: float32 1.2-1.5 times the two-state estimate,
# fp16 0.96-1.09 times; an Intel Xeon's steps at k = 4: 1.27 and 1.09 times).
ENSEMBLE_OVERHEAD = 0.3
TABLE_WIDTH = 8  # the d_model of every step the tables were measured at
PROBE_WORTH = 10.0  # seconds of table estimate below which a group is not probed
ATTENTION_SKIPPED = 0.2
STATES_POWER = {"fp32": 0.5, "fp16": 0.0}
WORKERS_VAR = "MARKOVLIB_WORKERS"  # local worker processes of a sweep (default 1)
# On a CPU of no table, a sweep times the first steps of its largest ensemble of each
# group (architecture and settings), at most PROBE_RUNS runs of it, here on one thread
# (the median of PROBE_STEPS steps after a warm-up, thrown away), and scales the AMD
# EPYC's estimate of the group by it. Such a probe lasts a fraction of a second, and
# the CPU's speed moves within seconds: on the Intel Xeon the same probe read 0.57-0.95
# of the AMD table in three fresh processes (a table: steady steps 0.50-0.64), so it
# serves only where no table was measured.
PROBE_RUNS, PROBE_WARMUP, PROBE_STEPS = 4, 2, 10
SPEED_VAR = "MARKOVLIB_CPU_SPEED"  # a fixed factor on the AMD EPYC's table instead
_SPEEDS: dict[tuple, float] = {}  # this process's probes, by group and ensemble size


@functools.cache
def this_cpu_table() -> CpuTable | None:
    """The table of this machine's CPU kind (its model name and flags in
    /proc/cpuinfo), or None."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    name = next((ln for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = next((ln for ln in info.splitlines() if ln.startswith("flags")), "")
    for table in CPU_TABLES:
        if table.name in name and all(f in flags.split() for f in table.flags):
            return table
    return None


def estimate_seconds(
    todo: Sequence[RunSpec],
    ensembles: int,
    speed: dict | None = None,
    table: CpuTable = AMD_EPYC,
) -> float:
    """About how many seconds ``todo`` takes on one CPU thread in ``ensembles``
    batched steps of equal size by ``table`` (measured), each spec's time times
    ``speed`` of its group (:func:`cpu_speed`; 1 if not given)."""
    n = len(todo) / max(ensembles, 1)
    speed = speed or {}
    return (1 + ENSEMBLE_OVERHEAD / max(n, 1.0)) * sum(
        _run_step_seconds(s, table) * s.train.steps * speed.get(_kind(s), 1.0)
        for s in todo
    )


def cpu_speed(chunks: Sequence[Sequence[RunSpec]]) -> dict[tuple, float]:
    """This CPU's time over the AMD EPYC table's for each group of ``chunks`` (and
    start: drawn or given, :func:`_kind`): ``$MARKOVLIB_CPU_SPEED`` where set, else
    measured on its largest ensemble (:func:`_probe`)."""
    largest: dict[tuple, Sequence[RunSpec]] = {}
    for chunk in chunks:
        kind = _kind(chunk[0])
        if kind not in largest or len(chunk) > len(largest[kind]):
            largest[kind] = chunk
    factor = fixed_speed()
    if factor is not None:
        return dict.fromkeys(largest, factor)
    return {kind: _probe(chunk[:PROBE_RUNS]) for kind, chunk in largest.items()}


def fixed_speed() -> float | None:
    """``$MARKOVLIB_CPU_SPEED`` (a finite number > 0), or None where it is not set;
    anything else refused naming the variable."""
    value = os.environ.get(SPEED_VAR, "").strip()
    if not value:
        return None
    try:
        factor = float(value)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(
            f"environment variable {SPEED_VAR}: must be a finite number > 0; got "
            f"{value!r} (unset it to let a sweep measure this CPU)"
        )
    return factor


def _kind(spec: RunSpec) -> tuple[str, bool]:
    """What a probe's speed holds for: the group, and whether the runs start from given
    weights (from the low-rank manifold, attention skipped: another cost)."""
    return (spec.group, spec.init is not None)


def _drawn(spec: RunSpec) -> RunSpec:
    """``spec`` started from its seed's draw where it continues a stored run."""
    continues = spec.init is not None and spec.init.get("kind") == "run"
    return replace(spec, init=None) if continues else spec


def _probe(specs: Sequence[RunSpec]) -> float:
    """The median seconds of :data:`PROBE_STEPS` steps of the ensemble ``specs`` on
    one thread after :data:`PROBE_WARMUP` (trained here and thrown away) over the
    table's estimate of a step; once per group and size in a process."""
    cached = (*_kind(specs[0]), len(specs))
    last = min(PROBE_WARMUP + PROBE_STEPS, specs[0].train.steps)
    if last <= PROBE_WARMUP:  # too short to time: the table as it is
        return 1.0
    if cached not in _SPEEDS:
        ends: dict[int, float] = {}
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            train_specs(
                [_drawn(s) for s in specs],  # a continued run's step costs the same
                device="cpu",
                stop_after=last,
                on_step=lambda step: ends.__setitem__(step, perf_counter()),
            )
        finally:
            torch.set_num_threads(threads)
        step = statistics.median(
            ends[s] - ends[s - 1] for s in range(PROBE_WARMUP + 1, last + 1)
        )  # the median step: a second's swing of the CPU's speed moves it least
        _SPEEDS[cached] = step / (estimate_seconds(specs, 1) / specs[0].train.steps)
    return _SPEEDS[cached]


def _beyond(chunks: Sequence[Sequence[RunSpec]], table: CpuTable) -> dict | None:
    """Probed speeds, as factors on ``table``, of the groups of ``chunks`` whose width
    no table was measured at (d_model other than :data:`TABLE_WIDTH`: the in-context
    chapter's d = 16 on sequences of 64 took 2.2 times its table estimate, 2026-11-29);
    None where every group is the tables', or where the table gives them under
    :data:`PROBE_WORTH` seconds (a smoke run: a probe would cost more than it says)."""
    beyond = [c for c in chunks if c[0].config.d_model != TABLE_WIDTH]
    if sum(estimate_seconds(c, 1, None, table) for c in beyond) < PROBE_WORTH:
        return None
    factors, one = cpu_speed(beyond), {_kind(c[0]): c[0] for c in beyond}
    return {  # a probe is a factor on the AMD EPYC's table: on this one's
        kind: f * _run_step_seconds(one[kind]) / _run_step_seconds(one[kind], table)
        for kind, f in factors.items()
    }


def _run_step_seconds(spec: RunSpec, table: CpuTable = AMD_EPYC) -> float:
    """One step of ``spec`` in an ensemble on one CPU thread."""
    precision = "fp32" if spec.train.precision == "fp32" else "fp16"
    base, length = table.step[precision]
    return (
        base
        * (spec.train.seq_len / 256) ** length
        * (table.uni[precision] if spec.config.embedding == "uni" else 1.0)
        * spec.train.batch_size
        / 16
        * spec.config.n_layers
        * (ATTENTION_SKIPPED if spec.init is not None else 1.0)
        * (spec.config.vocab_size / 2) ** STATES_POWER[precision]
    )


def _duration(seconds: float) -> str:
    """``seconds`` as a reader reads a wait: "2 min", "1.5 h", "40 s"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 600:  # to the half minute: "2 min" for 91 s overstates by a third
        return f"{round(seconds / 30) / 2:g} min"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def default_workers(command: str = "markovlib") -> int:
    """Local worker processes of a sweep on the CPU: ``$MARKOVLIB_WORKERS``, else 1
    (``markovlib rerun`` sets it to the machine's cores, at most 4), capped by
    :func:`~markovlib.runs.executors.capped_processes`; anything but an integer >= 1
    refused naming the variable."""
    value = os.environ.get(WORKERS_VAR, "").strip()
    if not value:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise ValueError(
            f"environment variable {WORKERS_VAR}: must be an integer >= 1; got "
            f"{value!r}"
        )
    return capped_processes(int(value), f"${WORKERS_VAR}", command)


def _workers(workers: int | None, executor: str) -> int:
    """A sweep's local worker processes: ``workers``, else ``$MARKOVLIB_WORKERS``, at
    most what this machine holds (1 on Ray: its processes are the cluster's); checked
    with ``$MARKOVLIB_CPU_SPEED`` before any work, whether an estimate is shown or
    not."""
    fixed_speed()
    if executor != "local":
        return 1
    if workers is None:
        return default_workers()
    return capped_processes(check_int("workers", workers, 1), "workers")


def _shared(todo: Sequence[RunSpec], size: int, workers: int, executor: str) -> int:
    """The ensemble size that gives ``workers`` local processes an ensemble each
    (never under 4 runs, never over ``size``): two ensembles of 4 on two cores end
    sooner than one of 8 on one; with as many groups as workers, no group is cut."""
    if workers <= 1 or executor != "local" or not todo:
        return size
    groups = Counter(s.group for s in todo)
    largest = max(groups.values())
    parts = -(-workers // len(groups))  # ensembles per group for a worker each
    return max(1, min(size, max(4, -(-largest // parts))))


def _runs_of(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''} of "


def makespan(
    chunks: Sequence[Sequence[RunSpec]],
    workers: int,
    pool_started: bool = True,
    speed: dict | None = None,
    table: CpuTable = AMD_EPYC,
) -> float:
    """About how many seconds ``chunks`` (ensembles) take on ``workers`` CPU processes
    that each take the next ensemble: the largest first, each to the least loaded,
    each ensemble the table's fixed seconds more, and the pool's start first where it
    is not ``pool_started``; ``speed`` and ``table`` as in :func:`estimate_seconds`."""
    loads = [0.0] * max(1, workers)
    costs = (estimate_seconds(c, 1, speed, table) for c in chunks)
    for cost in sorted(costs, reverse=True):
        loads[loads.index(min(loads))] += cost + table.ensemble_seconds
    return max(loads) + (0.0 if pool_started else table.pool_start_seconds)


def training_note(
    todo: Sequence[RunSpec],
    ensembles: int,
    device: str,
    store,
    workers: int = 1,
    chunks: Sequence[Sequence[RunSpec]] | None = None,
    executor: str = "local",
) -> str:
    """The line a sweep prints before it trains: how many runs, of which sizes, on
    which device, and where they go ("neither shipped nor stored": the paper edition's
    runs are shipped with the clone, see :mod:`markovlib.runs.shipped`)."""
    sizes = Counter(
        (s.train.steps, s.train.batch_size, s.train.seq_len) for s in todo
    ).most_common()
    shown = ", ".join(
        f"{_runs_of(n) if len(sizes) > 1 else ''}{st} steps, batch {b} × length {L}"
        for (st, b, L), n in sizes[:3]
    )
    more = f", {len(sizes) - 3} more sizes" if len(sizes) > 3 else ""
    return (
        f"markovlib: training {len(todo)} run{'s' if len(todo) != 1 else ''} "
        f"({shown}{more}) in {ensembles} ensemble{'s' if ensembles != 1 else ''} on "
        f"{device}{_cpu_estimate(todo, ensembles, device, workers, chunks, executor)}"
        f": neither shipped nor stored in {store}"
    )


def _cpu_estimate(
    todo: Sequence[RunSpec],
    ensembles: int,
    device: str,
    workers: int = 1,
    chunks=None,
    executor: str = "local",
) -> str:
    """ ", about N min on one CPU thread" (or on N processes: :func:`makespan` of the
    ``chunks`` where given) where the runs train on a CPU; a Ray sweep's driver probes
    no width beyond its table (:func:`_beyond`: the cluster trains them)."""
    if resolve_device(device).type != "cpu":
        return ""
    where = "one CPU thread" if workers == 1 else f"{workers} CPU processes"
    if chunks is not None:
        cold = pooled(len(chunks), workers) and not pool_started(workers)
        table = None if fixed_speed() is not None else this_cpu_table()
        if table is None:
            speed = cpu_speed(chunks)
        else:  # a Ray sweep's driver probes no width: the cluster trains them
            speed = _beyond(chunks, table) if executor == "local" else None
        seconds = makespan(chunks, workers, not cold, speed, table or AMD_EPYC)
    else:
        seconds = estimate_seconds(todo, ensembles) / min(workers, max(ensembles, 1))
    if seconds < 1:
        return f", under a second on {where}"
    return f", about {_duration(seconds)} on {where}"


def _bar(runs: int, progress: bool) -> tqdm:
    """The training bar: runs done, counted step by step, and the time left."""
    return tqdm(
        total=runs,
        desc="training",
        unit="run",
        disable=not progress or not runs,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total} runs "
        "[{elapsed}<{remaining}]",
        mininterval=1.0 if sys.stderr.isatty() else 15.0,  # a kernel logs each line
    )


def sweep(
    specs: Sequence[RunSpec],
    store: ResultStore | str | Path,
    *,
    ensemble_size: int = 8,
    device: str = "auto",
    compile: bool = False,
    progress: bool = True,
    executor: str = "local",
    address: str | None = None,
    cpus_per_task: int = 1,
    gpus_per_task: float = 0.0,
    workers: int | None = None,
    data=None,
) -> pd.DataFrame:
    """Train every spec the store does not hold yet, ``ensemble_size`` models per
    batched step (a continued run from its source's weights: store or ``data``).

    Each finished ensemble is written at once, by this process alone. ``executor``:
    'local' (here, one ensemble after the other) or 'ray' (one Ray task per ensemble on
    the cluster at ``address``, ``cpus_per_task`` CPUs and torch threads,
    ``gpus_per_task`` GPUs each; see :mod:`markovlib.runs.executors`); ``workers``:
    local worker processes on the CPU (default ``$MARKOVLIB_WORKERS``, else 1), the
    runs then cut into at least that many ensembles of at least 4. The bar counts
    runs, step by step, with the time left. Returns the store's frame of ``specs``."""
    check_int("ensemble_size", ensemble_size, 1)
    check_seeds(specs)
    workers = _workers(workers, executor)
    store = store if isinstance(store, ResultStore) else ResultStore(store)
    unique = {spec.key: spec for spec in specs}
    done = store.keys()
    todo = [spec for key, spec in unique.items() if key not in done]
    chunks = ensembles(todo, _shared(todo, ensemble_size, workers, executor))
    if todo:  # a store that cannot take the results is refused before any training
        store.check_writable()
    if todo and progress:  # before the first step: how much work this is
        how = (todo, len(chunks), device, store.path, workers, chunks, executor)
        print(training_note(*how), file=sys.stderr)
    bar = _bar(len(todo), progress)
    finished = train_chunks(
        chunks,
        executor=executor,
        device=device,
        compile=compile,
        address=address,
        cpus_per_task=cpus_per_task,
        gpus_per_task=gpus_per_task,
        workers=workers,
        on_steps=lambda runs: bar.update(min(runs, bar.total - bar.n)),  # never past
        sources=source_weights(todo, shipped_data(data), store),
    )
    with sigterm_as_interrupt(), closing(finished):
        for chunk, results in finished:
            store.put(list(zip(chunk, results)))
            bar.n = max(bar.n, len(store.keys() & {s.key for s in todo}))
            bar.refresh()  # never fewer runs than have ended (Ray reports no steps)
    bar.close()
    frame = store.frame()
    return frame[frame["key"].isin(unique)].reset_index(drop=True)


def sweep_results(
    specs: Sequence[RunSpec],
    store: ResultStore | str | Path | None = None,
    *,
    device: str = "auto",
    data="auto",
    shipped_only: bool = False,
    **sweep_kwargs,
) -> list[TrainResult]:
    """Every spec's result, in order: from shipped data (``data``: a folder, 'auto' or
    None) by spec key, else from the local store, training there what it lacks
    (see :func:`sweep`). ``shipped_only``: only the shipped runs, in order (the paper
    edition's pages never train a group that is still being produced)."""
    shipped = shipped_data(data)
    device = resolve_device(device)
    if shipped_only:
        if shipped is None:
            return []
        return [shipped.load(s, device) for s in specs if s.key in shipped]
    rest = [s for s in specs if shipped is None or s.key not in shipped]
    if rest:
        store = (
            ResultStore(default_results_dir() if store is None else store)
            if not isinstance(store, ResultStore)
            else store
        )
        sweep(rest, store, device=device, data=shipped, **sweep_kwargs)
    missing = {s.key for s in rest}
    return [
        store.load(s, device) if s.key in missing else shipped.load(s, device)
        for s in specs
    ]
