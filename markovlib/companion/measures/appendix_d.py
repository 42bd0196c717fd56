"""App. D's rules: the learnt model's four properties at the global minimum, per run
from its weights (:func:`markovlib.theory.appendix_d`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ... import theory
from ..._checks import one_thread
from ...analysis import (
    AT_UNIGRAM_BELOW,
    CLAIM_SHARE,
)
from ..records import RunRecord
from .counts import Measure, _n, trap_count

__all__ = [
    "NEAR_ZERO",
    "NEAR_RANK_ONE",
    "APPD_MATRICES",
    "APPD_PARTS",
    "ALIGNED",
    "aligned",
    "appd_row",
    "appendix_d_runs",
    "appendix_d_property",
    "appendix_d_control",
    "appendix_d_properties",
    "appendix_d_table",
]


# App. D: what the paper says of the learnt weights (p + q < 1)
NEAR_ZERO = 0.1  # a ratio "≈ 0" (attention's share, positional spread) is below 0.1


NEAR_RANK_ONE = 0.1  # a matrix is "near rank one" when s_2 / s_1 < 0.1


APPD_MATRICES = ("ff.W_1.weight", "ff.W_2.weight")  # the matrices App. D names


# App. D's properties, each judged in the parts the paper states it in; Sec. 3.1's
# "the weight matrices are all approximately rank-one" its own row (issue 67)
APPD_PARTS = {
    "attention": ("the paper's ratio ‖attn‖/‖x+attn‖", "removing attention"),
    "positions": ("pₙ constant in n",),
    "rank": ("W₁, W₂ (App. D)",),
    "rank_all": ("every weight matrix (Sec. 3.1)",),
    "formula": ("the formula's predictions p and 1 − q",),
    "direction": ("e, pₙ, W₁, W₂ along one v",),
}


# "along v": |cos| with v at least ALIGNED (within 26°); rule written 2026-11-27,
# after App. D's runs were shipped and before their cosines were computed
ALIGNED = 0.9


def aligned(direction: dict) -> bool:
    """App. D's one direction v (:func:`markovlib.theory.shared_direction`): e, the
    mean p_n (unless below NEAR_ZERO × ‖e‖: 0 · v), W₂'s column and W₁'s and W₂'s
    hidden directions within ALIGNED of v (and w)."""
    return _smallest_cos(direction) >= ALIGNED


def _appd_parts(d: dict, record: RunRecord) -> dict[str, bool]:
    """App. D's parts (:data:`APPD_PARTS`) for one learnt model (``d``:
    :func:`markovlib.theory.appendix_d`), each relative to what it could be."""
    chain = record.chain
    effect = abs(1 - chain.P[0, 0] - chain.P[1, 1])
    named = max(v for k, v in d["rank_ratio"].items() if k.endswith(APPD_MATRICES))
    formula = np.asarray(d["formula_kernel"])[:, 1]  # P(1 | 0), P(1 | 1)
    return dict(
        zip(
            (part for parts in APPD_PARTS.values() for part in parts),
            (
                d["ratio_mean"] < NEAR_ZERO,
                d["ablation"] < NEAR_ZERO * effect,
                d["spread"] < NEAR_ZERO,
                named < NEAR_RANK_ONE,
                d["largest_rank_ratio"] < NEAR_RANK_ONE,
                float(np.abs(formula - chain.P[:, 1]).max())
                < AT_UNIGRAM_BELOW * effect,
                aligned(d["direction"]),
            ),
        )
    )


def appd_row(prop: str) -> str:
    """The scorecard row of an App. D property: "appd_<prop>"; Sec. 3.1's every
    weight matrix ("rank_all"): "sec31_rank"."""
    return "sec31_rank" if prop == "rank_all" else f"appd_{prop}"


def _appd_properties(d: dict, record: RunRecord) -> dict[str, bool]:
    """App. D's four properties of one learnt model: each with all of its parts."""
    parts = _appd_parts(d, record)
    return {prop: all(parts[p] for p in names) for prop, names in APPD_PARTS.items()}


def _appendix_d_tied(
    inside: Sequence[dict], rs: Sequence[RunRecord]
) -> dict[str, Measure]:
    """App. D's four rows from the runs of its weight-tied model."""
    tied = [_appd_properties(d, r) for d, r in zip(inside, rs)]
    table = appendix_d_table({"tied": inside}, {"tied": rs})
    effect = abs(1 - rs[0].chain.P[0, 0] - rs[0].chain.P[1, 1])
    med, top = table.median(numeric_only=True), table.max(numeric_only=True)
    extra = {  # what each property's runs measured, beside the count
        "attention": f"the paper's ratio median {med['‖attn‖/‖x+attn‖']:.3f}; "
        f"largest change without attention {top['attention removed: Δ']:.4f}",
        "positions": f"spread median {table['positional spread'].median():.3f}",
        "rank": f"s₂/s₁ of W₁, W₂ median {table['W₁, W₂ s₂/s₁'].median():.3f}",
        "rank_all": "largest s₂/s₁ over every weight matrix median "
        f"{table['all matrices s₂/s₁'].median():.3f}",
        "formula": f"largest |formula − P| {top['max|formula − P|'] / effect:.1%} of "
        f"|p + q − 1| (learnt kernel {top['max|K − P|'] / effect:.1%})",
        "direction": f"smallest |cos| with v median {med['min |cos| with v']:.3f}",
    }
    parts = [_appd_parts(d, r) for d, r in zip(inside, rs)]
    out = {}
    for prop, text in extra.items():
        counts = tuple(
            (part, sum(h[part] for h in parts), len(parts)) for part in APPD_PARTS[prop]
        )
        k = sum(h[prop] for h in tied)
        out[appd_row(prop)] = Measure.over(
            rs,
            f"tied: {_n(k, len(tied))} ({text})",
            k >= CLAIM_SHARE * len(tied),
            counts=counts,
        )
    return out


def appendix_d_runs(
    inside: dict[str, Sequence[dict]],
    records: dict[str, Sequence[RunRecord]],
) -> dict[str, Measure]:
    """App. D over every run (``inside[label][i]``: :func:`markovlib.theory.appendix_d`
    of ``records[label][i]``): the four rows from the weight-tied model of App. D
    ("tied"), and this book's controls where given: the untied GPT-2 model
    ("untied": appd_untied) and the tied GPT-2 model ("gpt2": appd_gpt2). A run has
    a property when: removing attention moves no predicted
    probability by :data:`NEAR_ZERO` × |p + q − 1| or more (the paper's ratio
    ‖attn‖ / ‖x + attn‖ printed beside); the positional spread is below
    :data:`NEAR_ZERO`; s_2 / s_1 of W_1 and W_2 is below :data:`NEAR_RANK_ONE`; the
    formula's predictions from the learnt weights are within
    :data:`~markovlib.analysis.AT_UNIGRAM_BELOW` × |p + q − 1| of P. A row holds
    when at least :data:`~markovlib.analysis.CLAIM_SHARE` of the runs have its
    property."""
    out = _appendix_d_tied(inside["tied"], records["tied"]) if "tied" in inside else {}
    for label, cid in (("untied", "appd_untied"), ("gpt2", "appd_gpt2")):
        if label in inside:
            out[cid] = appendix_d_properties(label, inside[label], records[label])
    return out


_INSIDE: dict[int, tuple[RunRecord, dict]] = {}  # id(record): the record, its App. D


@one_thread()  # forward passes of d = 8 models on a few paths: small tensors
def appendix_d_inside(records: Sequence[RunRecord], load) -> list[dict]:
    """:func:`markovlib.theory.appendix_d` of each run's model (``load(record)``) on 8
    paths of its chain and length; each record computed once in a process (six rules
    read the same records)."""
    for r in records:
        if _INSIDE.get(id(r), (None,))[0] is not r:
            x = r.chain.sample(8, r.spec.train.seq_len, seed=12345)
            _INSIDE[id(r)] = r, theory.appendix_d(load(r), x, r.spec.train.seq_len)
    return [_INSIDE[id(r)][1] for r in records]


def appendix_d_property(records: Sequence[RunRecord], load, prop: str) -> Measure:
    """App. D's row ``prop`` ("attention", "positions", "rank", "formula",
    "direction"; "rank_all": Sec. 3.1's every weight matrix) over the runs of its
    weight-tied model (:func:`appendix_d_runs`)."""
    inside = appendix_d_inside(records, load)
    return _appendix_d_tied(inside, records)[appd_row(prop)]


def appendix_d_control(records: Sequence[RunRecord], load, label: str) -> Measure:
    """App. D's four properties on one of this book's controls ("untied", "gpt2"):
    :func:`appendix_d_properties` of its runs' models (``load(record)``)."""
    inside = appendix_d_inside(records, load)
    return appendix_d_properties(label, inside, records)


def appendix_d_properties(
    label: str, inside: Sequence[dict], records: Sequence[RunRecord]
) -> Measure:
    """App. D's four properties on other runs than the authors' App. D model (this
    book's controls): how many runs have each; holds when at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the runs have every one."""
    has = [_appd_properties(d, r) for d, r in zip(inside, records)]
    counts = {
        prop: sum(h[prop] for h in has)
        for prop in ("attention", "positions", "rank", "formula")
    }
    return Measure(
        f"{label}: "
        + ", ".join(f"{prop} {k} of {len(has)}" for prop, k in counts.items()),
        bool(has) and all(k >= CLAIM_SHARE * len(has) for k in counts.values()),
        runs=len(has),
        trapped=trap_count(records)[1] if has else 0,
        counts=tuple((prop, k, len(has)) for prop, k in counts.items()),
    )


def _smallest_cos(direction: dict) -> float:
    """The smallest |cos| with v that :func:`aligned` judges (the mean p_n left out
    when it is 0 · v)."""
    names = ["e", "W_2", "w"] + (["p"] if direction["p_norm"] >= NEAR_ZERO else [])
    return min(direction[k] for k in names)


def appendix_d_table(
    inside: dict[str, Sequence[dict]], records: dict[str, Sequence[RunRecord]]
) -> pd.DataFrame:
    """One row per run of :func:`appendix_d_runs`: the paper's ratio, the largest
    change of a prediction when attention is removed, the positional spread, the
    largest s_2 / s_1 of W_1 and W_2, max |K − P|, and which properties it has."""
    rows = []
    for label in inside:
        for d, r in zip(inside[label], records[label]):
            rank = [v for k, v in d["rank_ratio"].items() if k.endswith(APPD_MATRICES)]
            rows.append(
                {
                    "model": label,
                    "seed": r.spec.seed,
                    "‖attn‖/‖x+attn‖": d["ratio_mean"],
                    "attention removed: Δ": d["ablation"],
                    "positional spread": d["spread"],
                    "W₁, W₂ s₂/s₁": max(rank),
                    "all matrices s₂/s₁": d["largest_rank_ratio"],
                    "max|formula − P|": float(
                        np.abs(np.asarray(d["formula_kernel"]) - r.chain.P).max()
                    ),
                    "max|K − P|": float(np.abs(r.kernel - r.chain.P).max()),
                    "min |cos| with v": _smallest_cos(d["direction"]),
                    **_appd_properties(d, r),
                }
            )
    return pd.DataFrame(rows)
