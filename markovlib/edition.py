"""Producing the paper edition: train every run of
:func:`~markovlib.experiments.paper_edition` into a result store, resumably and from
several processes at once, then export finished groups as shipped data.

Each process trains one run at a time (``train``, not an ensemble, so that
``markovlib verify`` can re-train any single run bit for bit) with a fixed thread count,
and claims a run with an exclusive lock on a file named after its key before training
it: a second process skips a claimed run, a killed process releases its claims, and
every finished run is committed to the store at once.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

from .sweep import ResultStore, RunSpec, train_specs

__all__ = ["produce", "status"]


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


def status(
    groups: Sequence[tuple[str, Sequence[RunSpec]]], store: ResultStore, shipped=None
) -> list[dict]:
    """Per group: runs, runs done (stored or shipped), seconds of training stored."""
    done = store.keys() | (set(shipped.index()) if shipped is not None else set())
    frame = store.frame()
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
    only: Sequence[str] | None = None,
    device: str = "cpu",
    shipped=None,
    log=print,
) -> int:
    """Train every run of ``groups`` that neither ``store`` nor the ``shipped`` data
    (a ShippedData) holds and no other process has claimed; returns the number of runs
    trained."""
    store = store if isinstance(store, ResultStore) else ResultStore(store)
    skip = set(shipped.index()) if shipped is not None else set()
    torch.set_num_threads(threads)
    locks = store.directory / "claims"
    trained = 0
    for name, specs in groups:
        if only and not any(name.startswith(prefix) for prefix in only):
            continue
        for spec in specs:
            if spec.key in skip or spec.key in store.keys():
                continue
            with _claim(locks, spec.key) as mine:
                if not mine or spec.key in store.keys():
                    continue
                t0 = time.perf_counter()
                result = train_specs([spec], device=device)[0]
                store.put([(spec, result)])
                trained += 1
                log(
                    f"{time.strftime('%H:%M:%S')} {name} seed {spec.seed}: "
                    "final test loss "
                    f"{result.final_test_loss:.4f} in "
                    f"{time.perf_counter() - t0:.0f} s ({spec.key})",
                    flush=True,
                )
    return trained


def settings_table():
    """Per chapter, the paper-scale settings (:data:`~markovlib.presets.CHAPTERS`) and
    where they come from."""
    import pandas as pd

    from .presets import CHAPTERS, resolve

    rows = []
    for chapter in CHAPTERS:
        S = resolve("paper", chapter)
        rows.append(
            {
                "chapter": chapter,
                "steps": S.steps,
                "length": S.seq_len,
                "batch": S.batch_size,
                "runs": S.seeds,
                "trap runs": S.trap_seeds,
                "source": S.source,
            }
        )
    return pd.DataFrame(rows)


def progress(data=None):
    """Per group of :func:`~markovlib.experiments.paper_edition`: runs wanted, runs
    shipped, training hours."""
    import json

    import pandas as pd

    from .experiments import paper_edition
    from .shipped import ShippedData, default_data_dir

    directory = data or default_data_dir()
    shipped = ShippedData(directory) if directory is not None else None
    index = shipped.index() if shipped is not None else {}
    rows = []
    for name, specs in paper_edition():
        seconds = sum(
            json.loads(shipped.row(s.key)["provenance"]).get("seconds", 0.0)
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
