"""The figures of the in-context chapter (``book/incontext.ipynb``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ...incontext import INDUCTION_LIFT, PREVIOUS_TOKEN, Levels
from .style import COLORS, OKABE_ITO, history_frame

__all__ = ["level_lines", "curves", "head_scores", "attention_maps", "SMOOTH"]

SMOOTH = 20  # evaluations averaged in the curves (each is 4 batches of fresh paths)
_STYLE = {  # one colour a model, every curve solid (the levels are the broken lines)
    "L2-untied": (OKABE_ITO[4], "-"),
    "L2-tied": (OKABE_ITO[0], "-"),
    "L1-untied": (OKABE_ITO[5], "-"),
    "L1-tied": (OKABE_ITO[1], "-"),
}


def _name(label: str) -> str:
    """ "L2-untied" -> "2 layers, untied"."""
    layers, tying = label.split("-")
    n = int(layers[1:])
    return f"{n} layer{'s' * (n != 1)}, {tying}"


def level_lines(ax, lv: Levels) -> None:
    """The three levels of the loss as horizontal lines, labelled with their values."""
    for value, color, ls, what in (
        (lv.ceiling, "H_pi", ":", "log k, the marginal"),
        (lv.unigram, "theory", "-.", "unigram in context"),
        (lv.floor, "H_rate", "--", "Bayes floor, bigram in context"),
    ):
        ax.axhline(
            value, color=COLORS[color], ls=ls, lw=1.3, label=f"{value:.4f} ({what})"
        )


def curves(runs: Mapping[str, Sequence], lv: Levels):
    """Mean test loss of each group (``runs``: label → records or trained runs),
    :data:`SMOOTH` evaluations averaged, against the three levels; returns the
    figure."""
    fig, ax = plt.subplots(figsize=(7, 5.2), layout="constrained")
    for label, rs in runs.items():
        if not rs:
            continue
        frames = [history_frame(r).dropna(subset=["test_loss"]) for r in rs]
        step = frames[0]["step"].to_numpy()
        mean = np.mean([f["test_loss"].to_numpy() for f in frames], axis=0)
        window = min(SMOOTH, len(mean))
        smooth = np.convolve(mean, np.ones(window) / window, mode="valid")
        color, ls = _STYLE.get(label, (OKABE_ITO[4], "-"))
        ax.plot(
            step[window - 1 :],
            smooth,
            color=color,
            ls=ls,
            lw=1.6,
            label=f"{_name(label)} (mean of {len(rs)})",
        )
    level_lines(ax, lv)
    ax.set_ylim(lv.floor - 0.03, lv.ceiling + 0.02)
    ax.set_xlabel("iteration")
    ax.set_ylabel("test loss (nats)")
    fig.legend(loc="outside lower center", ncol=2, fontsize="small", frameon=False)
    return fig


def head_scores(scored: Mapping[str, Sequence]):
    """Each run as a point: its first layer's previous-token score against its last
    layer's lift towards the induction targets, with the rule's thresholds."""
    fig, ax = plt.subplots(figsize=(7, 5.2), layout="constrained")
    for label, runs in scored.items():
        color, _ = _STYLE.get(label, (OKABE_ITO[4], "-"))
        marker = "o" if label.endswith("untied") else "s"
        x = [s.heads.previous[0] for s in runs]
        y = [s.heads.lift(-1) for s in runs]
        ax.scatter(x, y, color=color, marker=marker, s=40, label=_name(label))
    ax.axhline(
        INDUCTION_LIFT, color="0.4", ls="--", lw=1, label="the rule's thresholds"
    )
    ax.axvline(PREVIOUS_TOKEN, color="0.4", ls="--", lw=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.25, 1)
    ax.set_xlabel("first layer: attention on the previous position")
    ax.set_ylabel("last layer: lift towards the induction targets")
    fig.legend(loc="outside lower center", ncol=3, fontsize="small", frameon=False)
    return fig


def attention_maps(maps: Sequence[np.ndarray], x: np.ndarray, titles: Sequence[str]):
    """Attention of each layer (``maps``: (L, L) each) on one path ``x``, at most two
    side by side; the path's states along the axes."""
    fig, axes = plt.subplots(1, len(maps), figsize=(7, 3.8), layout="constrained")
    for ax, a, title in zip(np.atleast_1d(axes), maps, titles):
        image = ax.imshow(a, cmap="viridis", vmin=0, vmax=1)
        ax.set_title(title)
        ax.set_xlabel("attended position i")
        ax.set_ylabel("position n")
    fig.colorbar(image, ax=axes, label="attention", shrink=0.8)
    return fig
