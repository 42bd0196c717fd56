"""The one loader of run records: a :class:`RunRecord` is what a claim's rule reads of
one run (its chain, learnt kernel, test history and spec), built here from a trained
run (:func:`record_of`) or from the shipped data without loading a model
(:func:`shipped_records`); :class:`Groups` holds the records of named groups of runs
and says whether they are all there, for the scorecard and the chapters alike."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from .._checks import one_thread
from ..analysis import classify, final_share
from ..chains import Chain, MarkovChain
from ..runs.shipped import shipped_data
from ..runs.spec import make_chain
from ..runs.sweep import sweep_results
from ..train import diverged_step

__all__ = [
    "RunRecord",
    "record_of",
    "records_of",
    "evaluations",
    "shipped_records",
    "runs_and_records",
    "Groups",
    "Incomplete",
    "load_groups",
    "runs_complete",
    "train_groups",
]


@dataclass(frozen=True)
class RunRecord:
    """What a verdict needs of one run."""

    chain: Chain
    kernel: np.ndarray | None  # learnt first-order kernel (None: not stored)
    history: pd.DataFrame  # step, test_loss (every evaluation)
    spec: object  # its RunSpec
    key: str = ""
    diverged_step: int | None = None  # where its loss stopped being finite

    @property
    def share(self) -> float:
        """:func:`~markovlib.analysis.final_share` of this run; NaN for a run that
        diverged (neither at H(π) nor escaped by the rule)."""
        if self.diverged_step is not None:
            return float("nan")
        return final_share(self.chain, kernel=self.kernel, history=self.history)

    @property
    def cls(self) -> str | None:
        return classify(self.share)

    @property
    def steps(self) -> int:
        return int(self.history["step"].max())


@one_thread()  # the learnt kernel runs the model on a few short paths: small tensors
def record_of(result, spec=None) -> RunRecord:
    """A :class:`RunRecord` of a trained run: its learnt kernel as stored with it (a
    stored or shipped run: the same computation, which ``markovlib verify`` checks
    against its weights; a third of a chapter's time reading shipped runs), else
    computed here."""
    kernel = None
    if isinstance(result.chain, MarkovChain):
        stored = result.metrics.get("learnt_kernel")
        kernel = result.learnt_kernel() if stored is None else np.asarray(stored)
    history = evaluations(
        *(result.history[c].to_numpy() for c in ("step", "test_loss"))
    )
    return RunRecord(result.chain, kernel, history, spec, "", result.diverged_step)


def evaluations(step: np.ndarray, test_loss: np.ndarray) -> pd.DataFrame:
    """A :class:`RunRecord`'s history: step and test loss where it was evaluated
    (not NaN), built at once (``dropna`` took 2 ms a run)."""
    tested = ~np.isnan(test_loss)
    return pd.DataFrame({"step": step[tested], "test_loss": test_loss[tested]})


def records_of(results, specs) -> list[RunRecord]:
    """:func:`record_of` of each trained run with its spec (``results[i]`` was trained
    from ``specs[i]``)."""
    results, specs = list(results), list(specs)
    if len(results) != len(specs):
        raise ValueError(f"{len(results)} results for {len(specs)} specs")
    return [record_of(r, s) for r, s in zip(results, specs)]


def shipped_records(data, specs) -> list:
    """:class:`RunRecord` of every run of ``specs`` that the shipped data (a
    :class:`~markovlib.runs.shipped.ShippedData`) holds, without loading a model."""

    index, out = data.index(), []
    for spec in specs:
        key = spec.key  # a hash of the spec: once a run
        if key not in index:
            continue
        row = data.row(key)
        metrics = json.loads(row["metrics"])
        step = np.asarray(row["history_step"], dtype=np.int64)
        test = np.asarray(row["test_loss"], dtype=np.float64)
        train = np.asarray(row["train_loss"], dtype=np.float64)
        history = pd.DataFrame({"step": step, "train_loss": train, "test_loss": test})
        kernel = metrics.get("learnt_kernel")
        out.append(
            RunRecord(
                make_chain(spec.chain),
                None if kernel is None else np.asarray(kernel),
                evaluations(step, test),
                spec,
                key,
                diverged_step(history, spec.train),
            )
        )
    return out


def runs_and_records(specs, S, *, ensemble_size: int = 32):
    """The trained runs of ``specs`` and their :class:`RunRecord`. At the ``paper``
    scale only the shipped runs (a page of the paper edition never trains a group that
    is still being produced); at other scales every run, trained where the local store
    lacks it."""
    if S.name == "paper":
        data = shipped_data("auto")
        specs = [s for s in specs if data is not None and s.key in data]
    results = sweep_results(specs, ensemble_size=ensemble_size) if specs else []
    with one_thread():  # each record runs its model on 8 test paths: small tensors
        return results, [record_of(r, s) for r, s in zip(results, specs)]


class Incomplete(NamedTuple):
    """A claim not judged: ``done`` of the ``wanted`` runs (or derived values) it reads
    are there so far."""

    done: int
    wanted: int
    what: str = "runs shipped"


class Groups:
    """Named groups of runs as a claim or a chapter reads them: each group's records,
    how many runs it has, and where a run's model is (its trained run, or ``data``)."""

    def __init__(self, records: dict, wanted: dict, runs=None, data=None):
        self.records = records  # name -> its RunRecords
        self.wanted = wanted  # name -> how many runs the group has
        self.runs = runs or {}  # name -> trained runs (TrainResult), where loaded
        self.data = data  # the ShippedData the records were read from, if any

    @classmethod
    def shipped(cls, data, groups: dict) -> Groups:
        """The shipped runs of named groups of specs (name -> specs), none loaded."""
        return cls(
            {name: shipped_records(data, specs) for name, specs in groups.items()},
            {name: len(specs) for name, specs in groups.items()},
            data=data,
        )

    @classmethod
    def trained(cls, runs: dict, groups: dict) -> Groups:
        """Trained runs of named groups (name -> its TrainResults, in the order of its
        specs in ``groups``: name -> specs), with their records."""
        return cls(
            {name: records_of(runs[name], specs) for name, specs in groups.items()},
            {name: len(specs) for name, specs in groups.items()},
            runs={name: runs[name] for name in groups},
        )

    @classmethod
    def loaded(cls, loaded: dict, groups: dict) -> Groups:
        """The runs and records :func:`runs_and_records` gave of named groups of specs
        (name -> (runs, records); ``groups``: name -> specs)."""
        return cls(
            {name: records for name, (_, records) in loaded.items()},
            {name: len(specs) for name, specs in groups.items()},
            runs={name: runs for name, (runs, _) in loaded.items()},
        )

    def relabelled(self, labels: Mapping) -> Groups:
        """These groups under other names (``labels``: a new name -> the group here),
        e.g. a chapter's groups under the names of the shipped groups a claim reads."""
        return Groups(
            {n: self.records[g] for n, g in labels.items()},
            {n: self.wanted[g] for n, g in labels.items()},
            runs={n: self.runs[g] for n, g in labels.items() if g in self.runs},
            data=self.data,
        )

    def joined(self, other: Groups) -> Groups:
        """These groups and ``other``'s in one (for a claim that reads groups a page
        loaded apart)."""
        return Groups(
            {**self.records, **other.records},
            {**self.wanted, **other.wanted},
            runs={**self.runs, **other.runs},
            data=self.data or other.data,
        )

    def __call__(self, *names) -> list[RunRecord]:
        """The records of these groups, one list in the order named."""
        return [r for n in names for r in self.records[n]]

    def complete(self, *names) -> bool:
        """Whether every run of these groups (all groups when none named) is here."""
        names = names or tuple(self.wanted)
        return all(len(self.records[n]) == self.wanted[n] for n in names)

    def counts(self, *names) -> tuple[int, int]:
        """(runs here, runs wanted) over these groups (all when none named)."""
        names = names or tuple(self.wanted)
        return (
            sum(len(self.records[n]) for n in names),
            sum(self.wanted[n] for n in names),
        )

    def have(self, *names) -> str:
        """ "k of n runs" over these groups (all when none named)."""
        return "{} of {} runs".format(*self.counts(*names))

    def text(self, measure, *names) -> str:
        """A claim's value as a page prints it: ``measure.value``, or "k of n runs
        shipped so far" while these groups are incomplete (``measure`` None)."""
        return measure.value if measure else f"{self.have(*names)} shipped so far"

    def load(self, record: RunRecord):
        """The learnt model of one of these runs (its weights loaded)."""
        if self.data is not None:
            return self.data.load(record.spec).model
        for name, runs in self.runs.items():
            for r, run in zip(self.records[name], runs):
                if r.spec.key == record.spec.key:
                    return run.model
        raise KeyError(f"no trained run of {record.spec.key} here")

    def weights_of(self, record: RunRecord) -> dict:
        """The final weights (a state dict) of one of these shipped runs."""
        return self.data.record(record.key)["weights"]


def runs_complete(runs, steps: int) -> bool:
    """Whether every run's history has ``steps`` + 1 rows and finite test losses."""
    return all(
        len(r.history) == steps + 1 and np.isfinite(r.test_history["test_loss"]).all()
        for r in runs
    )


def train_groups(groups: dict, *, ensemble_size: int = 32) -> dict:
    """Every run of the named groups of specs (name -> its TrainResults, in order),
    trained in one sweep where neither the shipped data nor the store has it: the
    groups' ensembles share the machine's worker processes
    (``$MARKOVLIB_WORKERS``; :func:`~markovlib.runs.sweep.sweep`)."""
    every = [s for specs in groups.values() for s in specs]
    results = iter(sweep_results(every, ensemble_size=ensemble_size) if every else ())
    return {name: [next(results) for _ in specs] for name, specs in groups.items()}


def load_groups(groups: dict, S) -> Groups:
    """:func:`runs_and_records` of each named group of specs (at ``paper`` the shipped
    runs only), trained below ``paper`` in one sweep (:func:`train_groups`)."""
    if S.name != "paper":
        train_groups(groups)
    loaded = {name: runs_and_records(specs, S) for name, specs in groups.items()}
    return Groups.loaded(loaded, groups)
