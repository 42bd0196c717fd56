"""Sweeps: grids of training runs, trained as ensembles and written to the local
:class:`~markovlib.runs.store.ResultStore` as they finish; :func:`sweep_results` finds
each run where it is (shipped data by spec key, else the local store, else it trains).

The top of the run layer: it uses spec, store, shipped and executors.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from contextlib import closing, contextmanager
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from .._checks import check_int
from ..device import resolve_device
from ..train import TrainResult
from .executors import train_chunks
from .shipped import shipped_data
from .spec import RunSpec
from .store import ResultStore, _check_seeds, default_results_dir

__all__ = ["sweep", "sweep_results"]


@contextmanager
def _sigterm_as_interrupt():
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
) -> pd.DataFrame:
    """Train every spec the store does not hold yet, ``ensemble_size`` models per
    batched step.

    Each finished ensemble is written at once, by this process alone. ``executor``:
    'local' (here, one ensemble after the other) or 'ray' (one Ray task per ensemble on
    the cluster at ``address``, ``cpus_per_task`` CPUs and torch threads,
    ``gpus_per_task`` GPUs each; see :mod:`markovlib.executors`). Returns the store's
    frame restricted to ``specs``.
    """
    check_int("ensemble_size", ensemble_size, 1)
    _check_seeds(specs)
    store = store if isinstance(store, ResultStore) else ResultStore(store)
    unique = {spec.key: spec for spec in specs}
    done = store.keys()
    todo = [spec for key, spec in unique.items() if key not in done]
    groups: dict[str, list[RunSpec]] = {}
    for spec in todo:
        groups.setdefault(spec.group, []).append(spec)
    chunks = [
        members[lo : lo + ensemble_size]
        for members in groups.values()
        for lo in range(0, len(members), ensemble_size)
    ]
    finished = train_chunks(
        chunks,
        executor=executor,
        device=device,
        compile=compile,
        address=address,
        cpus_per_task=cpus_per_task,
        gpus_per_task=gpus_per_task,
    )
    bar = tqdm(
        total=len(unique),
        initial=len(unique) - len(todo),
        desc="sweep",
        unit="run",
        disable=not progress,
    )
    with _sigterm_as_interrupt(), closing(finished):
        for chunk, results in finished:
            store.put(list(zip(chunk, results)))
            bar.update(len(chunk))
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
        sweep(rest, store, device=device, **sweep_kwargs)
    missing = {s.key for s in rest}
    return [
        store.load(s, device) if s.key in missing else shipped.load(s, device)
        for s in specs
    ]
