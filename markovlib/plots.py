"""Figure helpers shared by the chapters: one seaborn style, the same colours everywhere.

Tied runs are blue, untied orange, theory constructions green; the entropy rate H_rate (global minimum)
is a black dashed line and the unigram entropy H(π) (bad local minimum) a red dotted one. Figures have
an opaque white background so that they read on dark themes too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .chains import MarkovChain

__all__ = [
    "COLORS",
    "set_style",
    "reference_lines",
    "loss_curves",
    "probability_along",
    "heatmap",
]

COLORS = {
    "tied": "#1f77b4",
    "untied": "#ff7f0e",
    "theory": "#2ca02c",
    "H_rate": "black",
    "H_pi": "#d62728",
    "data": "#7f7f7f",
}


def set_style() -> None:
    """The book's style: seaborn whitegrid, opaque white figure and axes backgrounds."""
    sns.set_theme(
        style="whitegrid",
        context="notebook",
        palette=[COLORS["tied"], COLORS["untied"], COLORS["theory"]],
    )
    plt.rcParams.update(
        {
            "figure.facecolor": "white",
            "axes.facecolor": "white",
            "savefig.facecolor": "white",
            "savefig.transparent": False,
            "figure.dpi": 100,
            "legend.framealpha": 0.9,
        }
    )


def _color(label: str) -> str | None:
    # longest key first, so that "untied" is not taken for "tied"
    return next(
        (
            COLORS[key]
            for key in sorted(COLORS, key=len, reverse=True)
            if key.lower() in label.lower()
        ),
        None,
    )


def reference_lines(
    ax,
    chain: MarkovChain,
    *,
    rate: bool = True,
    unigram: bool = True,
    bigram: bool = False,
) -> None:
    """Horizontal lines at H_rate (global minimum) and H(π) (unigram loss), labelled with their values; with
    ``bigram``, also H(x_{n+1} | x_n), the best loss that sees only the last symbol (higher-order chains)."""
    if bigram:
        ax.axhline(
            chain.bigram_entropy(),
            color=COLORS["theory"],
            ls="-.",
            lw=1.5,
            label=rf"$H(x_{{n+1}} \mid x_n)$ = {chain.bigram_entropy():.4f} (best first-order)",
        )
    if unigram:
        ax.axhline(
            chain.unigram_entropy(),
            color=COLORS["H_pi"],
            ls=":",
            lw=1.5,
            label=rf"$H(\pi)$ = {chain.unigram_entropy():.4f} (unigram)",
        )
    if rate:
        ax.axhline(
            chain.entropy_rate(),
            color=COLORS["H_rate"],
            ls="--",
            lw=1.2,
            label=rf"$H_{{\rm rate}}$ = {chain.entropy_rate():.4f} (global min)",
        )


def _history(run) -> pd.DataFrame:
    return run.history if hasattr(run, "history") else run


def loss_curves(
    runs: Mapping[str, object],
    chain: MarkovChain,
    ax=None,
    *,
    column: str = "test_loss",
    ylim: tuple[float, float] | None = None,
    title: str | None = None,
):
    """Loss vs iteration for each label; a value may be a TrainResult/history or a list of them (mean ± std band)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4))
    for label, run in runs.items():
        group = run if isinstance(run, Sequence) else [run]
        frames = [_history(r).dropna(subset=[column]) for r in group]
        steps = frames[0]["step"].to_numpy()
        values = np.stack([f[column].to_numpy() for f in frames])
        mean = values.mean(0)
        (line,) = ax.plot(
            steps,
            mean,
            color=_color(label),
            lw=1.6,
            label=label if len(group) == 1 else f"{label} (mean of {len(group)})",
        )
        if len(group) > 1:
            std = values.std(0)
            ax.fill_between(
                steps, mean - std, mean + std, color=line.get_color(), alpha=0.25, lw=0
            )
    reference_lines(ax, chain)
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"{column.replace('_', ' ')} (nats)")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title or chain.name)
    ax.legend(loc="upper right", fontsize="small")
    return ax


def probability_along(
    positions: np.ndarray,
    probs: np.ndarray,
    references: Mapping[str, float],
    ax=None,
    *,
    label: str = "model",
    ylabel: str = r"$P(x_{n+1}=1 \mid x_n=0)$",
    title: str | None = None,
):
    """Predicted probabilities at the positions of one test path (Fig 3c-d), with labelled reference values."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(positions, probs, ".", ms=3, color=_color(label), label=label)
    styles = iter(
        [("--", COLORS["H_rate"]), (":", COLORS["H_pi"]), ("-.", COLORS["theory"])]
    )
    for name, value in references.items():
        ls, color = next(styles)
        ax.axhline(value, ls=ls, color=color, lw=1.2, label=f"{name} = {value:.3f}")
    ax.set_xlabel("position n in the test sequence")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    ax.set_title(title or "")
    ax.legend(loc="best", fontsize="small")
    return ax


def heatmap(
    values: np.ndarray,
    ps: Sequence[float],
    qs: Sequence[float],
    ax=None,
    *,
    title: str = "",
    cbar_label: str = "nats",
    cmap: str = "viridis",
    fmt: str | None = None,
    switching_line: bool = False,
    **kw,
):
    """A (p, q) grid as a heatmap: rows q (increasing upwards), columns p; ``values[i, j]`` is at (qs[i], ps[j]).

    ``switching_line`` draws p + q = 1 as a white dashed line (sorted ``ps`` and ``qs``), the boundary of Thm 2;
    say so in the caption or the title.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4.2))
    frame = pd.DataFrame(
        np.asarray(values), index=np.round(qs, 3), columns=np.round(ps, 3)
    )
    sns.heatmap(
        frame.iloc[::-1],
        ax=ax,
        cmap=cmap,
        cbar_kws={"label": cbar_label},
        annot=fmt is not None,
        fmt=fmt or "",
        **kw,
    )
    if switching_line:  # p + q = 1 through the cell centres (cell j of p at x = j + 0.5, q_i at y = n - i - 0.5)
        p_line = np.linspace(min(ps), max(ps), 200)
        keep = (1 - p_line >= min(qs)) & (1 - p_line <= max(qs))
        x = np.interp(p_line[keep], ps, np.arange(len(ps))) + 0.5
        y = len(qs) - 0.5 - np.interp(1 - p_line[keep], qs, np.arange(len(qs)))
        ax.plot(
            x, y, color="white", ls="--", lw=2, label="p + q = 1"
        )  # no legend: it would hide a cell
    ax.set_xlabel(r"$p = P(1 \mid 0)$")
    ax.set_ylabel(r"$q = P(0 \mid 1)$")
    ax.set_title(title)
    return ax
