"""The rules of the in-context chapter (issue 68): the abstract's contrast, "two or more
layers consistently develop an induction head mechanism to estimate the in-context
bigram conditional distribution", "single-layer transformers, unable to form an
induction head", judged on runs whose kernel is drawn per sequence.

Rules written on 2026-11-28, before any run of the groups they judge was trained. Each
run is scored on the same :data:`~markovlib.incontext.EVAL_PATHS` fresh paths (seed
:data:`~markovlib.incontext.EVAL_SEED`); each tying is a part that must decide."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..._checks import one_thread
from ...analysis import CLAIM_SHARE, ESCAPED_ABOVE
from ...incontext import (
    EVAL_PATHS,
    EVAL_SEED,
    INDUCTION_LIFT,
    Heads,
    bayes_nll,
    has_induction_head,
    scores,
)
from ...runs.derived import derived
from ..records import RunRecord
from .counts import Measure, _n, _span

__all__ = [
    "Scored",
    "scored",
    "eval_paths",
    "bayes_floor",
    "induction_heads",
    "no_induction_head",
    "near_bayes",
]


@dataclass(frozen=True)
class Scored:
    """One run scored on the evaluation paths: its heads, its mean loss, and the
    levels on the same paths (the Bayes floor and the ceiling log k)."""

    heads: Heads
    loss: float
    floor: float
    ceiling: float

    @property
    def share(self) -> float:
        """The share of the in-context gap log k − floor the run's loss closes."""
        return (self.ceiling - self.loss) / (self.ceiling - self.floor)


def eval_paths(record: RunRecord) -> torch.Tensor:
    """The paths every run of ``record``'s chain and length is scored on."""
    chain, length = record.chain, record.spec.train.seq_len
    return chain.sample(EVAL_PATHS, length, seed=EVAL_SEED)


def bayes_floor(record: RunRecord, x: torch.Tensor) -> float:
    """The Bayes predictor's mean loss on the paths ``x`` of ``record``'s chain."""
    return float(bayes_nll(x, record.chain.k, record.chain.alpha).mean())


_SCORED: dict[int, tuple[RunRecord, Scored]] = {}  # id(record): the record, its Scored


@one_thread()
def scored(records: Sequence[RunRecord], load: Callable) -> list[Scored]:
    """:class:`Scored` of each run (``load``: a record's model), all of one chain and
    length, on the same fresh paths (:func:`eval_paths`): its heads and loss a derived
    value (:func:`~markovlib.incontext.scores`: shipped for the paper edition's runs,
    else computed once per result store), each record read once in a process (a
    chapter's table and its three rules read the same records)."""
    todo = [r for r in records if _SCORED.get(id(r), (None,))[0] is not r]
    if todo:
        chain, length = todo[0].chain, todo[0].spec.train.seq_len
        floor = bayes_floor(todo[0], eval_paths(todo[0]))
        for r in todo:
            model = load(r)
            weights = {n: v.detach().float() for n, v in model.state_dict().items()}
            got = derived(scores, model.config, chain.k, chain.alpha, length, weights)
            h = Heads(tuple(got["induction"]), tuple(got["previous"]), got["uniform"])
            _SCORED[id(r)] = r, Scored(h, got["loss"], floor, math.log(chain.k))
    return [_SCORED[id(r)][1] for r in records]


def _per_tying(parts: dict, load, test, what: str, value) -> Measure:
    """Runs per tying (``parts``: tying → records) for which ``test`` of their
    :class:`Scored` holds, each tying a part of the claim."""
    texts, counts, records = [], [], []
    for tying, rs in parts.items():
        s = scored(rs, load)
        k = sum(test(x) for x in s)
        texts.append(f"{tying}: {_n(k, len(rs))} {what} ({value(s)})")
        counts.append((f"{tying}, {what}", k, len(rs)))
        records += rs
    ok = all(k >= CLAIM_SHARE * n for _, k, n in counts)
    return Measure.over(records, "; ".join(texts), ok, counts=tuple(counts))


def _lifts(scored: Sequence[Scored]) -> str:
    """The range of the runs' last-layer lifts, to two decimals (no "-0.00")."""
    return _span([round(x.heads.lift(-1), 2) + 0.0 for x in scored], ".2f")


def induction_heads(tied, untied, load) -> Measure:
    """Abstract: "two or more layers consistently develop an induction head": two-layer
    runs with one by :func:`has_induction_head`, per tying."""
    return _per_tying(
        {"untied": untied, "tied": tied},
        load,
        lambda s: has_induction_head(s.heads),
        "with an induction head",
        lambda s: "last layer's lift " + _lifts(s),
    )


def no_induction_head(tied, untied, load) -> Measure:
    """Abstract: "single-layer transformers, unable to form an induction head":
    one-layer runs whose attention lifts less than :data:`INDUCTION_LIFT` towards the
    targets, per tying."""
    return _per_tying(
        {"untied": untied, "tied": tied},
        load,
        lambda s: s.heads.lift(-1) < INDUCTION_LIFT,
        "without one",
        lambda s: "lift " + _lifts(s),
    )


def near_bayes(tied, untied, load) -> Measure:
    """Abstract: the induction head serves "to estimate the in-context bigram
    conditional distribution": two-layer runs whose loss closes more than
    :data:`~markovlib.analysis.ESCAPED_ABOVE` of the gap from log k to the Bayes
    floor (the add-α bigram estimate's loss), per tying."""
    return _per_tying(
        {"untied": untied, "tied": tied},
        load,
        lambda s: s.share > ESCAPED_ABOVE,
        f"closing more than {ESCAPED_ABOVE:g} of the gap to the Bayes floor",
        lambda s: "shares " + _span([x.share for x in s], ".3f"),
    )
