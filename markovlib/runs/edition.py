"""Producing the paper edition: train every run of
:func:`~markovlib.runs.experiments.paper_edition` into a result store, resumably and
from several processes at once, then export finished groups as shipped data.

Each process trains ensembles of runs (:func:`ensembles`: one batched step for up to
``ensemble_size`` runs of one group, 1.5-2x cheaper per run than single runs on a CPU
core) with a fixed thread count, and claims an ensemble with an exclusive lock on a
file named after its members' keys before training it: a second process skips a
claimed ensemble, a killed process releases its claims, and every finished ensemble is
committed to the store at once. ``markovlib verify`` reproduces a member by re-training
its ensemble.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import torch

from .. import incontext
from ..presets import CHAPTERS, resolve
from .experiments import paper_edition
from .shipped import ShippedData, default_data_dir, source_weights
from .spec import RunSpec, ensembles, sources_of, spec_key, train_specs
from .store import ResultStore

__all__ = ["produce", "status", "settings_table", "progress"]


@contextmanager
def _claim(directory: Path, key: str):
    """Yield True if this process holds the lock of ``key`` (released on exit or when
    the process dies)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _done(store: ResultStore | None, shipped=None) -> set[str]:
    """The keys of the runs held: in ``store`` or in the ``shipped`` data."""
    done = set(store.keys()) if store is not None else set()
    return done | (set(shipped.index()) if shipped is not None else set())


def status(
    groups: Sequence[tuple[str, Sequence[RunSpec]]],
    store: ResultStore | None,
    shipped=None,
) -> list[dict]:
    """Per group: runs, runs done (stored or shipped), seconds of training stored;
    ``store`` None: the shipped runs only (no store is created)."""
    done = _done(store, shipped)
    frame = store.frame() if store is not None else ()
    seconds = dict(zip(frame["key"], frame["seconds"])) if len(frame) else {}
    return [
        {
            "group": name,
            "runs": len(specs),
            "stored": sum(s.key in done for s in specs),
            "seconds": round(sum(seconds.get(s.key, 0.0) for s in specs), 1),
        }
        for name, specs in groups
    ]


def produce(
    groups: Sequence[tuple[str, Sequence[RunSpec]]],
    store: ResultStore | str | Path,
    *,
    threads: int = 1,
    device: str = "cpu",
    shipped=None,
    ensemble_size: int = 8,
    longest_first: bool = False,
    log=print,
) -> int:
    """Train every run of ``groups`` that neither ``store`` nor the ``shipped`` data
    (a ShippedData) holds, as ensembles of at most ``ensemble_size`` runs that no other
    process has claimed; returns the number of runs trained. ``longest_first``: the
    ensembles of most steps first (several processes on one GPU end together), else in
    the edition's order (a group finished early can be committed early).

    An ensemble's members record each other's keys (``ensemble_members`` in their
    provenance): ``markovlib verify`` re-trains the same ensemble to reproduce one.
    """
    store = store if isinstance(store, ResultStore) else ResultStore(store)
    store.check_writable()  # refused before any training, not after
    torch.set_num_threads(threads)
    locks = store.directory / "claims"
    trained = 0
    for name, chunk in _ordered(groups, ensemble_size, longest_first):
        done = _done(store, shipped)  # one query per ensemble, not one per run
        if any(s.key not in done for s in chunk):
            trained += _train_claimed(name, chunk, store, shipped, locks, device, log)
    return trained


def _train_claimed(name, chunk, store, shipped, locks, device, log) -> int:
    """Train the members of ``chunk`` not done yet (:func:`_done`) if no other process
    claimed it; the runs trained."""
    with _claim(locks, spec_key({"ensemble": [s.key for s in chunk]})) as mine:
        done = _done(store, shipped)
        todo = [s for s in chunk if s.key not in done]
        sources = source_weights(todo, shipped, store) if mine and todo else {}
        if not mine or not todo or len(sources) < len(sources_of(todo)):
            return 0  # claimed elsewhere, done, or its sources not trained yet
        t0 = time.perf_counter()
        results = train_specs(todo, device=device, sources=sources)
        store.put(list(zip(todo, results)))
        losses = " ".join(f"{r.final_test_loss:.3f}" for r in results)
        log(
            f"{time.strftime('%H:%M:%S')} {name}: {len(todo)} run(s), seeds "
            f"{todo[0].seed}..{todo[-1].seed}, final test losses {losses} in "
            f"{time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        return len(todo)


def _ordered(groups, size: int, longest_first: bool) -> list:
    """(group name, ensemble) pairs in the edition's order, or most steps first."""
    pairs = [
        (name, chunk) for name, specs in groups for chunk in ensembles(specs, size)
    ]
    if longest_first:  # a stable sort: the edition's order among equals
        pairs.sort(key=lambda pair: -pair[1][0].train.steps)
    return pairs


def _produce_one(kwargs: dict) -> int:
    """One worker of :func:`produce_parallel` (a spawned process)."""
    torch.set_num_threads(kwargs.get("threads", 1))
    shipped = kwargs.pop("shipped_dir")
    shipped = ShippedData(shipped) if shipped is not None else None
    return produce(shipped=shipped, **kwargs)


def produce_parallel(
    groups, store: str | Path, *, workers: int, shipped_dir=None, **kwargs
) -> int:
    """:func:`produce` in ``workers`` spawned processes of one store (each claims the
    ensembles it trains, so none is trained twice); the runs trained by all."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    groups, held = list(groups), ResultStore(store)
    held.check_writable()  # refused before any process starts
    done = _done(held, ShippedData(shipped_dir) if shipped_dir else None)
    size = kwargs.get("ensemble_size", 8)
    left = sum(
        any(s.key not in done for s in chunk)
        for _, chunk in _ordered(groups, size, False)
    )
    if not left:
        return 0  # nothing left: no process started (a resumed edition that is done)
    workers = min(workers, left)  # a process for each ensemble left, at most
    job = dict(groups=groups, store=str(store), shipped_dir=shipped_dir, **kwargs)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        return sum(pool.map(_produce_one, [dict(job) for _ in range(workers)]))


def settings_table():
    """Per chapter, the paper-scale settings (:data:`~markovlib.presets.CHAPTERS`, and
    :data:`~markovlib.incontext.SIZES` for the in-context chapter) and where they come
    from."""
    rows = []
    scales = [resolve("paper", chapter) for chapter in CHAPTERS]
    for S in [*scales, incontext.scale("paper", environ=False)]:
        rows.append(
            {
                "chapter": S.chapter,
                "steps": S.steps,
                "length": S.seq_len,
                "batch": S.batch_size,
                "runs": S.seeds,
                "trap runs": S.trap_seeds,
                "source": S.source,
            }
        )
    return pd.DataFrame(rows)


def shipped_runs(data=None) -> tuple[int, int, int]:
    """Runs of :func:`~markovlib.runs.experiments.paper_edition` shipped and wanted,
    each counted once (a run of two groups is one run, as ``markovlib verify`` counts
    them; the groups of :func:`progress` count it twice), and the runs the manifest
    lists."""
    directory = data or default_data_dir()
    index = ShippedData(directory).index() if directory is not None else {}
    keys = {s.key for _, specs in paper_edition() for s in specs}
    return len(keys & set(index)), len(keys), len(index)


def progress(data=None):
    """Per group of :func:`~markovlib.runs.experiments.paper_edition`: runs wanted, runs
    shipped, training hours."""
    directory = data or default_data_dir()
    shipped = ShippedData(directory) if directory is not None else None
    index = shipped.index() if shipped is not None else {}
    provenance = shipped.column("provenance") if shipped is not None else {}
    rows = []
    for name, specs in paper_edition():
        seconds = sum(
            json.loads(provenance[s.key]).get("seconds", 0.0)
            for s in specs
            if s.key in index
        )
        rows.append(
            {
                "group": name,
                "runs": len(specs),
                "shipped": sum(s.key in index for s in specs),
                "training hours": round(seconds / 3600, 2),
            }
        )
    return pd.DataFrame(rows)
