"""Sweeps: grids of training runs, trained as ensembles and written to an on-disk store as they finish.

The store is one SQLite file (standard library) with one row per run: the hash of the run's full
specification (chain, architecture, training settings, seed), the specification itself, the library
version, the metrics and the per-step history. Each ensemble's rows are committed in one transaction as
soon as it finishes, so an interrupted sweep (Ctrl-C, SIGTERM) loses at most the ensemble in flight, and
re-running the same sweep trains only what the store does not hold.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import sqlite3
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from .chains import HigherOrderChain, MarkovChain, binary, lag_switching, random_kth_order, symmetric
from .model import Transformer, TransformerConfig
from .train import TrainResult, seed_streams, train_many

__all__ = ["RunSpec", "ResultStore", "grid", "chain_grid", "sweep", "sweep_results", "make_chain", "default_results_dir"]


def default_results_dir() -> Path:
    """``$MARKOVLIB_RESULTS`` if set, else ``results/`` in the repository (ignored by git)."""
    return Path(os.environ.get("MARKOVLIB_RESULTS") or Path(__file__).resolve().parents[1] / "results")

TRAIN_KEYS = ("steps", "batch_size", "seq_len", "lr", "eval_every", "eval_batches", "schedule", "weight_decay", "start",
              "precision")


def make_chain(spec: dict) -> MarkovChain | HigherOrderChain:
    """A chain from its description: {'kind': 'binary', 'p', 'q'}, {'kind': 'symmetric', 'k', 'p'},
    {'kind': 'lag', 'order', 'p', 'q'} (:func:`~markovlib.chains.lag_switching`) or
    {'kind': 'random', 'order', 'k', 'alpha', 'seed'} (:func:`~markovlib.chains.random_kth_order`)."""
    kind = spec.get("kind")
    if kind == "binary":
        return binary(spec["p"], spec["q"])
    if kind == "symmetric":
        return symmetric(spec["k"], spec["p"])
    if kind == "lag":
        return lag_switching(spec["order"], spec["p"], spec["q"])
    if kind == "random":
        return random_kth_order(spec["order"], spec["k"], alpha=spec["alpha"], seed=spec["seed"])
    raise ValueError(f"chain kind must be 'binary', 'symmetric', 'lag' or 'random'; got {kind!r}")


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines one training run."""

    chain: dict                      # e.g. {"kind": "binary", "p": 0.5, "q": 0.8}
    config: TransformerConfig
    train: dict                      # keyword arguments of train() from TRAIN_KEYS
    seed: int

    def as_dict(self) -> dict:
        return {"chain": dict(self.chain), "config": asdict(self.config), "train": dict(self.train), "seed": int(self.seed)}

    @property
    def key(self) -> str:
        """SHA-256 of the canonical JSON of the specification (the library version is stored, not hashed)."""
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()[:20]

    @property
    def group(self) -> str:
        """Runs with the same group share an architecture and settings, so they can form one ensemble."""
        d = self.as_dict()
        return json.dumps({"config": d["config"], "train": d["train"]}, sort_keys=True)


def grid(ps: Sequence[float], qs: Sequence[float], *, tied: Iterable[bool] = (True, False), seeds: Iterable[int] = (0,),
         preset: str = "gpt2", config_kwargs: dict | None = None, **train_kwargs) -> list[RunSpec]:
    """Specs for binary chains over ps × qs × tying × seeds (train_kwargs: steps, batch_size, seq_len, ...)."""
    for p in ps:
        for q in qs:
            binary(p, q)  # validates p, q (ValueError naming the parameter)
    return chain_grid([{"kind": "binary", "p": float(p), "q": float(q)} for p in ps for q in qs], tied=tied, seeds=seeds,
                      preset=preset, config_kwargs=config_kwargs, **train_kwargs)


def chain_grid(chains: Sequence[dict], *, tied: Iterable[bool] = (True, False), seeds: Iterable[int] = (0,),
               preset: str = "gpt2", config_kwargs: dict | None = None, **train_kwargs) -> list[RunSpec]:
    """Specs for any chains (dicts as in :func:`make_chain`) × tying × seeds; the vocabulary is each chain's k."""
    unknown = set(train_kwargs) - set(TRAIN_KEYS)
    if unknown:
        raise ValueError(f"unknown training settings {sorted(unknown)}; allowed: {list(TRAIN_KEYS)}")
    if preset not in ("gpt2", "theory"):
        raise ValueError(f"preset must be 'gpt2' or 'theory'; got {preset!r}")
    make = {"gpt2": TransformerConfig.gpt2, "theory": TransformerConfig.theory}[preset]
    tied, seeds = list(tied), list(seeds)
    return [RunSpec(dict(c), make(vocab_size=make_chain(c).k, tied=t, **(config_kwargs or {})), dict(train_kwargs), int(s))
            for t in tied for c in chains for s in seeds]


def _metrics(result: TrainResult) -> dict:
    chain = result.chain
    return {"final_test_loss": result.final_test_loss, "entropy_rate": chain.entropy_rate(),
            "unigram_entropy": chain.unigram_entropy(), "excess": result.final_test_loss - chain.entropy_rate(),
            "escape_step": result.escape_step(0.005), "learnt_kernel": result.learnt_kernel().tolist(),
            "seconds": result.seconds}


class ResultStore:
    """One SQLite file of finished runs, keyed by :attr:`RunSpec.key`."""

    SCHEMA = """CREATE TABLE IF NOT EXISTS runs (
        key TEXT PRIMARY KEY, created REAL NOT NULL, version TEXT NOT NULL, seed INTEGER NOT NULL,
        spec TEXT NOT NULL, metrics TEXT NOT NULL, history TEXT NOT NULL, weights BLOB NOT NULL)"""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "runs.sqlite"
        with self._connect() as con:
            con.execute(self.SCHEMA)

    @contextmanager
    def _connect(self):
        con = sqlite3.connect(self.path, timeout=30)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            with con:                       # one transaction: committed on success, rolled back on error
                yield con
        finally:
            con.close()

    def keys(self) -> set[str]:
        with self._connect() as con:
            return {row[0] for row in con.execute("SELECT key FROM runs")}

    def __len__(self) -> int:
        with self._connect() as con:
            return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def put(self, pairs: Sequence[tuple[RunSpec, TrainResult]]) -> None:
        """Write finished runs, all in one transaction."""
        from . import __version__
        rows = []
        for spec, result in pairs:
            weights = io.BytesIO()
            torch.save({k: v.detach().cpu() for k, v in result.model.state_dict().items()}, weights)
            rows.append((spec.key, time.time(), __version__, spec.seed, json.dumps(spec.as_dict(), sort_keys=True),
                         json.dumps(_metrics(result)), result.history.to_json(orient="split", index=False),
                         weights.getvalue()))
        with self._connect() as con:
            con.executemany("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def frame(self) -> pd.DataFrame:
        """One row per run: key, created, version, seed, flattened chain / config / train fields, metrics."""
        with self._connect() as con:
            rows = con.execute("SELECT key, created, version, seed, spec, metrics FROM runs ORDER BY created").fetchall()
        records = []
        for key, created, version, seed, spec, metrics in rows:
            spec = json.loads(spec)
            records.append({"key": key, "created": created, "version": version, "seed": seed,
                            **{f"chain.{k}": v for k, v in spec["chain"].items()},
                            **{f"config.{k}": v for k, v in spec["config"].items()},
                            **{f"train.{k}": v for k, v in spec["train"].items()}, **json.loads(metrics)})
        return pd.DataFrame.from_records(records)

    def history(self, key: str) -> pd.DataFrame:
        with self._connect() as con:
            row = con.execute("SELECT history FROM runs WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        return pd.read_json(io.StringIO(row[0]), orient="split")

    def load(self, spec: RunSpec, device: str | torch.device = "cpu") -> TrainResult:
        """The stored run of ``spec`` as a :class:`TrainResult` (trained model included)."""
        with self._connect() as con:
            row = con.execute("SELECT history, weights, metrics FROM runs WHERE key = ?", (spec.key,)).fetchone()
        if row is None:
            raise KeyError(f"run {spec.key} is not in {self.path}")
        model = Transformer(spec.config)
        model.load_state_dict(torch.load(io.BytesIO(row[1]), weights_only=True))
        test_seed = seed_streams(spec.seed)[2]
        settings = {**spec.train, "device": str(device), "stored": str(self.path)}
        return TrainResult(make_chain(spec.chain), spec.config, model.to(device).eval(),
                           pd.read_json(io.StringIO(row[0]), orient="split"), spec.seed, settings,
                           json.loads(row[2])["seconds"], test_seed)


@contextmanager
def _sigterm_as_interrupt():
    """Turn SIGTERM into KeyboardInterrupt, so that a terminated sweep unwinds like Ctrl-C."""
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


def sweep(specs: Sequence[RunSpec], store: ResultStore | str | Path, *, ensemble_size: int = 8,
          device: str = "auto", compile: bool = False, progress: bool = True) -> pd.DataFrame:
    """Train every spec the store does not hold yet, ``ensemble_size`` models per batched step.

    Each finished ensemble is written at once. Returns the store's frame restricted to ``specs``.
    """
    store = store if isinstance(store, ResultStore) else ResultStore(store)
    if isinstance(ensemble_size, bool) or not isinstance(ensemble_size, int) or ensemble_size < 1:
        raise ValueError(f"ensemble_size must be an integer >= 1; got {ensemble_size!r}")
    unique = {spec.key: spec for spec in specs}
    done = store.keys()
    todo = [spec for key, spec in unique.items() if key not in done]
    groups: dict[str, list[RunSpec]] = {}
    for spec in todo:
        groups.setdefault(spec.group, []).append(spec)
    bar = tqdm(total=len(unique), initial=len(unique) - len(todo), desc="sweep", unit="run", disable=not progress)
    with _sigterm_as_interrupt():
        for members in groups.values():
            for lo in range(0, len(members), ensemble_size):
                chunk = members[lo:lo + ensemble_size]
                results = train_many([make_chain(s.chain) for s in chunk], chunk[0].config,
                                     seeds=[s.seed for s in chunk], device=device, compile=compile, progress=False,
                                     **chunk[0].train)
                store.put(list(zip(chunk, results)))
                bar.update(len(chunk))
    bar.close()
    frame = store.frame()
    return frame[frame["key"].isin(unique)].reset_index(drop=True)


def sweep_results(specs: Sequence[RunSpec], store: ResultStore | str | Path | None = None, *,
                  device: str = "auto", **sweep_kwargs) -> list[TrainResult]:
    """Run what is missing (see :func:`sweep`), then load every spec's result, in order, from the store."""
    store = ResultStore(default_results_dir() if store is None else store) if not isinstance(store, ResultStore) else store
    sweep(specs, store, device=device, **sweep_kwargs)
    from .presets import resolve_device
    return [store.load(spec, resolve_device(device)) for spec in specs]
