"""``book/incontext.ipynb``'s own numbers and tables: what its page states beside the
scorecard's claims (the abstract's contrast, :mod:`..measures.incontext`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from ..._checks import one_thread
from ...analysis import ESCAPED_ABOVE
from ...incontext import (
    Levels,
    has_induction_head,
    head_ablated,
    model_nll,
)
from ..measures.incontext import Scored, bayes_floor, eval_paths
from ..records import RunRecord

__all__ = [
    "largest_lift",
    "stage_table",
    "head_split_text",
    "LABELS",
    "GROUPS",
    "eval_paths",
    "head_table",
    "ablation_table",
    "summary_text",
]

GROUPS = ("L2-untied", "L2-tied", "L1-untied", "L1-tied")  # the page's order
# this page's label of each shipped group its claims read (claims.measured)
LABELS = {f"incontext-{label}": label for label in GROUPS}


def head_table(scored: Mapping[str, Sequence[Scored]], seeds: Mapping) -> pd.DataFrame:
    """One row per run: its group, seed, loss, share of the in-context gap, the
    previous-token score of its first layer, its last layer's lift, and whether it has
    an induction head by the rule."""
    rows = []
    for label, runs in scored.items():
        for seed, s in zip(seeds[label], runs):
            rows.append(
                {
                    "runs": label,
                    "seed": seed,
                    "test loss": round(s.loss, 4),
                    "share of the gap": round(s.share, 3),
                    "previous token (layer 1)": round(s.heads.previous[0], 3),
                    "lift (last layer)": round(s.heads.lift(-1), 3),
                    "induction head": has_induction_head(s.heads),
                }
            )
    return pd.DataFrame(rows)


@one_thread()
def ablation_table(records: Sequence[RunRecord], load: Callable) -> pd.DataFrame:
    """Each two-layer run's loss on the evaluation paths intact and with one layer's
    attention zeroed (W_O = 0), in nats above the Bayes floor of the same paths."""
    x = eval_paths(records[0])
    floor = bayes_floor(records[0], x)
    rows = []
    for r in records:
        model = load(r).eval()
        row = {"seed": r.spec.seed, "intact": float(model_nll(model, x).mean())}
        for layer in range(len(model.blocks)):
            off = head_ablated(model, layer)
            row[f"layer {layer + 1} attention off"] = float(model_nll(off, x).mean())
        rows.append(
            {k: round(v - floor, 4) if k != "seed" else v for k, v in row.items()}
        )
    return pd.DataFrame(rows)


def summary_text(values: Mapping[str, str], verdicts: Mapping[str, str]) -> str:
    """The page's summary: each claim's measurement and verdict, in the page's order."""
    what = {
        "incontext_induction": "Two layers, an induction head by the rule",
        "incontext_bayes": "Two layers, the loss against the Bayes floor",
        "incontext_single": "One layer, no induction head",
    }
    return "\n".join(
        f"- **{what[cid]}** ({verdicts[cid]}): {values[cid]}." for cid in what
    )


def largest_lift(
    scores: Mapping[str, Sequence[Scored]],
    records: Mapping[str, Sequence[RunRecord]],
    labels: Sequence[str],
) -> RunRecord:
    """The run of the groups ``labels`` whose last layer lifts most towards the
    induction targets."""
    pairs = [
        (s, r) for g in labels if g in scores for s, r in zip(scores[g], records[g])
    ]
    return max(pairs, key=lambda pair: pair[0].heads.lift(-1))[1]


def head_split_text(table: pd.DataFrame) -> str:
    """The two-layer runs' shares of the gap with and without a head by the rule, as
    the page states them (:func:`head_table`'s rows)."""
    two = table[table["runs"].str.startswith("L2")]
    parts = []
    for has, what in ((True, "with an induction head"), (False, "without one")):
        shares = two.loc[two["induction head"] == has, "share of the gap"]
        if len(shares):
            n, one = len(shares), len(shares) == 1
            span = f"{shares.min():.3f}" + ("" if one else f" to {shares.max():.3f}")
            runs = f"{n} two-layer run{'' if one else 's'} {what}"
            parts.append(f"{runs} close{'s' if one else ''} {span}")
    return "; ".join(parts) + " of the gap" if parts else "no two-layer run scored"


def stage_table(runs: Mapping[str, Sequence], lv: Levels, window: int = 10):
    """Per run, the first step at which its test loss (a running mean over ``window``
    evaluations) is below the unigram in context, and below the Bayes floor plus a
    tenth of the gap log k − floor (None: never): the stages, measured."""
    band = lv.floor + (1 - ESCAPED_ABOVE) * (lv.ceiling - lv.floor)
    rows = []
    for label, rs in runs.items():
        for r in rs:
            h = r.history.dropna(subset=["test_loss"])
            smooth = h["test_loss"].rolling(window, min_periods=1).mean().to_numpy()
            steps = h["step"].to_numpy()
            first = {}
            for name, level in (("unigram level", lv.unigram), ("floor's band", band)):
                below = (smooth < level).nonzero()[0]
                first[name] = int(steps[below[0]]) if len(below) else None
            rows.append({"runs": label, "seed": r.spec.seed, **first})
    table = pd.DataFrame(rows)
    return table.astype({name: "Int64" for name in ("unigram level", "floor's band")})
