"""``book/global_minimum.ipynb``'s own numbers, checks and sentences: what its page
states beside the scorecard's claims."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ... import theory
from ...train import one_cycle_factor
from ..measures import (
    APPD_MATRICES,
    Measure,
    appendix_d_runs,
)

__all__ = [
    "LABELS",
    "APPD_ROWS",
    "appendix_d_rows",
    "rank_ratio_table",
    "weights_at",
    "decay_factor",
    "appendix_d_steps",
    "change_text",
    "construction_claim",
]

# this page's label of each shipped group its Fig 3(b) claims read (claims.measured):
# its fp16 runs at the authors' settings and the float32 control, each tied and untied
LABELS = {
    "global_minimum-400-fp16-tied": "tied",
    "global_minimum-400-fp16-untied": "untied",
    "global_minimum-tied": "tied",
    "global_minimum-untied": "untied",
}

APPD_ROWS = {"App. D model": "tied", "tied": "gpt2", "untied": "untied"}


def appendix_d_rows(runs: dict, records: dict, x, length: int) -> tuple[dict, dict]:
    """App. D inside every run (``runs``/``records`` by label: the "App. D model" and
    the GPT-2 "tied" and "untied" runs): :func:`markovlib.theory.appendix_d` of each on
    the paths ``x``, and the scorecard's rows (:func:`~markovlib.companion.measures.
    appendix_d_runs`: the four rows from App. D's model, the GPT-2 runs as this
    book's controls; a label without runs gives no row)."""
    inside = {
        label: [theory.appendix_d(r.model, x, length) for r in rs]
        for label, rs in runs.items()
    }
    rows = {APPD_ROWS[label]: label for label in runs if inside[label]}
    measured = appendix_d_runs(
        {row: inside[label] for row, label in rows.items()},
        {row: records[label] for row, label in rows.items()},
    )
    return inside, measured


def rank_ratio_table(first: dict) -> pd.DataFrame:
    """App. D's s_2/s_1 of every weight matrix, one column per model (``first``: label
    -> :func:`markovlib.theory.appendix_d`); a matrix a model lacks (the tied model's
    head is its embedding) says so instead of NaN."""
    names = list(dict.fromkeys(n for d in first.values() for n in d["rank_ratio"]))
    table = pd.DataFrame(
        {
            label: [
                f"{d['rank_ratio'][n]:.3f}" if n in d["rank_ratio"] else "tied to wte"
                for n in names
            ]
            for label, d in first.items()
        },
        index=[n.replace("blocks.0.", "").replace(".weight", "") for n in names],
    )
    table["App. D names it"] = [n.endswith(APPD_MATRICES) for n in names]
    return table


def weights_at(result, which: str = "checkpoint"):
    """The model of a trained run with its ``"checkpoint"`` weights (those after
    step ``result.checkpoint_step``) or its ``"final"`` ones; None where the run kept no
    checkpoint (runs shorter than the checkpoint step)."""

    if which == "final":
        return result.model
    if which != "checkpoint":
        raise ValueError(f"which must be 'checkpoint' or 'final'; got {which!r}")
    return result.checkpoint_model()


def decay_factor(train, start: int = 0) -> float:
    """How much AdamW's decoupled weight decay alone shrinks a decayed matrix over the
    steps after ``start`` of a run trained with ``train`` (a TrainConfig):
    Π (1 − lr_t · weight_decay) over the schedule's learning rates. (The token and
    positional embeddings are not decayed unless ``train.decay_embeddings``.)"""

    factors = [
        one_cycle_factor(t, train.steps) if train.schedule == "one-cycle" else 1.0
        for t in range(start, train.steps)
    ]
    return float(np.prod([1 - train.lr * f * train.weight_decay for f in factors]))


def appendix_d_steps(result, x, length: int) -> pd.DataFrame:
    """App. D's numbers of one run at its checkpoint and at the end (one row per step):
    the paper's attention ratio, the positional spread with its two norms, and s_1,
    s_2 and s_2 / s_1 of the matrices App. D names
    (:data:`~markovlib.companion.measures.APPD_MATRICES`)."""

    rows = {}
    for which, step in (("checkpoint", result.checkpoint_step), ("final", None)):
        model = weights_at(result, which)
        if model is None:
            continue
        d = theory.appendix_d(model, x, length)
        with torch.no_grad():
            pos = model.wpe.weight[:length].double()
            emb = model.wte.weight.double()
        row = {
            "attention ratio": d["ratio_mean"],
            "positional spread": d["spread"],
            "mean ‖pₙ − p̄‖": float((pos - pos.mean(0)).norm(dim=-1).mean()),
            "‖e₁ − e₀‖": float((emb[1] - emb[0]).norm()),
        }
        for name, s in d["svals"].items():
            if name.endswith(APPD_MATRICES):
                short = name.split(".")[-2].replace("_1", "₁").replace("_2", "₂")
                row[f"{short} s₁"], row[f"{short} s₂"] = float(s[0]), float(s[1])
                row[f"{short} s₂/s₁"] = d["rank_ratio"][name]
        rows[result.train_config.steps if step is None else int(step)] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("step")


def change_text(table: pd.DataFrame, column: str) -> str:
    """How ``column`` of a per-step table (:func:`appendix_d_steps`) changed from its
    first to its last row: "grew from a to b" or "fell from a to b"; a table of one
    row (a run shorter than the checkpoint step) says so."""
    a, b = float(table[column].iloc[0]), float(table[column].iloc[-1])
    if len(table) < 2:
        return f"is {b:.3f} (no checkpoint: the run is shorter)"
    return f"{'grew' if b > a else 'fell'} from {a:.3f} to {b:.3f}"


def construction_claim(
    constructions: dict, slices: dict, rate: float, tol: float = 1e-9
) -> Measure:
    """Thm 1: every construction θ* predicts the kernel (|f − P| and ||∇L|| < 1e-6),
    its exact loss is H_rate within ``tol``, and no loss slice through it goes below
    H_rate while each touches it at its middle point t = 0; value: the largest
    |L(θ*) − H_rate|."""
    dev = max(abs(c["loss"] - rate) for c in constructions.values())
    exact = all(
        c["kernel_error"] < 1e-6 and c["grad"] < 1e-6 for c in constructions.values()
    )
    flat = all(
        s.min() >= rate - tol and abs(s[len(s) // 2] - rate) < tol
        for s in slices.values()
    )
    return Measure(f"{dev:.1e}", bool(dev < tol and exact and flat))
