"""The abstract's contrast, judged in context (issue 68): the claims of the in-context
chapter, in page order."""

from __future__ import annotations

from .. import measures
from .claim import Claim

__all__ = ["CLAIMS"]

_SETTING = (
    "binary sequences, each with its own kernel (rows Dirichlet(1)), length 64; GPT-2 "
    "blocks, d = 16, this book's sizes (the paper publishes none for this setting)"
)


def _layers(n: int) -> dict:
    """The rule's inputs: the runs of ``n`` layers, tied and untied."""
    return {t: f"incontext-L{n}-{t}" for t in ("tied", "untied")}


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "incontext_induction",
        "incontext",
        "this book",
        "Abstract: transformers with two or more layers consistently develop an "
        "induction head (by this book's rule)",
        f"two layers; {_SETTING}",
        "two-layer runs whose second layer attends to the position after each earlier "
        "visit of the current state (at least halfway from uniform attention) above a "
        "previous-token first layer, per tying",
        "fig-ic-heads",
        rule=measures.induction_heads,
        reads=_layers(2),
        uses=("load",),
    ),
    Claim(
        "incontext_bayes",
        "incontext",
        "this book",
        "Abstract: two or more layers estimate the in-context bigram conditional "
        "distribution (their loss, whatever the mechanism)",
        f"two layers; {_SETTING}",
        "two-layer runs whose loss closes more than 0.9 of the gap from log k to the "
        "Bayes floor (the add-α bigram estimate's loss), per tying",
        "fig-ic-curves",
        rule=measures.near_bayes,
        reads=_layers(2),
        uses=("load",),
    ),
    Claim(
        "incontext_single",
        "incontext",
        "this book",
        "Abstract: single-layer transformers are unable to form an induction head",
        f"one layer; {_SETTING}",
        "one-layer runs whose attention lifts less than halfway from uniform towards "
        "the induction targets, per tying",
        "fig-ic-heads",
        rule=measures.no_induction_head,
        reads=_layers(1),
        uses=("load",),
    ),
)
