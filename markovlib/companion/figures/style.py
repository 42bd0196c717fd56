"""Figure helpers shared by the chapters: one seaborn style, the same colours
everywhere.

The palette is Okabe and Ito's colour-blind-safe one (also seaborn's ``colorblind``):
tied runs blue, untied orange, theory constructions bluish green; the entropy rate
H_rate (global minimum) is a black dashed line and the unigram entropy H(π)
(bad local minimum) a vermillion dotted one. Figures have an opaque white background so
that they read on dark themes too.

Figures are read at page width: a figure in the text column is at most
:data:`TEXT_WIDTH_IN` inches wide (two panels side by side at most); a wider one goes
full width (cell tag ``full-width``). No text is smaller than :data:`MIN_FONT_PT` points
at :data:`DPI`, so that it is at least 9 pt as displayed (the browser check measures
it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.font_manager import font_scalings

from ...chains import MarkovChain
from ..pseudo_tex import PSEUDO_TEX

__all__ = [
    "probability_panels",
    "LEGEND_BELOW",
    "legend_below",
    "legends_over_data",
    "OKABE_ITO",
    "COLORS",
    "MIN_FONT_PT",
    "DPI",
    "TEXT_WIDTH_IN",
    "set_style",
    "reference_lines",
    "loss_curves",
    "probability_along",
    "heatmap",
]


# Okabe & Ito (2008), "Color universal design": distinguishable with every common
# colour-vision deficiency
OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)


COLORS = {
    "tied": OKABE_ITO[0],
    "untied": OKABE_ITO[1],
    "theory": OKABE_ITO[2],
    "H_rate": "black",
    "H_pi": OKABE_ITO[3],
    "data": "#7f7f7f",
}


MIN_FONT_PT = 11  # smallest text in any figure, in points at DPI


DPI = 100  # figure.dpi of the inline backend (the PNG's pixels per inch)


TEXT_WIDTH_IN = 7.0  # widest figure in the text column (wider: cell tag full-width)


def set_style() -> None:
    """The book's style: seaborn whitegrid, Okabe-Ito colours, text >= MIN_FONT_PT,
    white backgrounds."""
    sns.set_theme(style="whitegrid", context="notebook", palette=list(OKABE_ITO))
    small = float(MIN_FONT_PT)
    plt.rcParams.update(
        {
            "figure.facecolor": "white",
            "axes.facecolor": "white",
            "savefig.facecolor": "white",
            "savefig.transparent": False,
            "figure.dpi": DPI,
            "figure.figsize": (6.4, 4.0),
            "legend.framealpha": 0.9,
            # "small" (legends, annotations) is 0.833 font.size: keep it at MIN_FONT_PT
            "font.size": small / font_scalings["small"],
            "legend.fontsize": small,
            "legend.title_fontsize": small,
            "xtick.labelsize": small + 1,
            "ytick.labelsize": small + 1,
            "axes.labelsize": small + 2,
            "axes.titlesize": small + 2,
            "figure.titlesize": small + 3,
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
    """Horizontal lines at H_rate (global minimum) and H(π) (unigram loss), labelled
    with their values; with ``bigram``, also H(x_{n+1} | x_n), the best loss that sees
    only the last symbol (higher-order chains)."""

    def line(value: float, color: str, ls: str, lw: float, symbol: str, what: str):
        label = f"{symbol} = {value:.4f} ({what})"
        ax.axhline(value, color=COLORS[color], ls=ls, lw=lw, label=label)

    if bigram:
        symbol = r"$H(x_{n+1} \mid x_n)$"
        line(chain.bigram_entropy(), "theory", "-.", 1.5, symbol, "best first-order")
    if unigram:
        line(chain.unigram_entropy(), "H_pi", ":", 1.5, r"$H(\pi)$", "unigram")
    if rate:
        line(chain.entropy_rate(), "H_rate", "--", 1.2, r"$H_{\rm rate}$", "global min")


def history_frame(run) -> pd.DataFrame:
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
    """Loss vs iteration for each label; a value may be a TrainResult/history or a list
    of them (mean ± std band)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4))
    for label, run in runs.items():
        group = run if isinstance(run, Sequence) else [run]
        frames = [history_frame(r).dropna(subset=[column]) for r in group]
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
    legend_below(ax)  # off the curves, whatever the runs (issue 49)
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
    """Predicted probabilities at the positions of one test path (Fig 3c-d), with
    labelled reference values."""
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
    marked: Sequence[tuple[float, float]] = (),
    **kw,
):
    """A (p, q) grid as a heatmap: rows q (increasing upwards), columns p;
    ``values[i, j]`` is at (qs[i], ps[j]).

    ``switching_line`` draws p + q = 1 as a white dashed line (sorted ``ps`` and
    ``qs``), the boundary of Thm 2; say so in the caption or the title. ``marked``
    cells (p, q) get a vermillion frame (e.g. the cells at H(π) by the rule).
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
    if switching_line:
        _switching_line(ax, ps, qs)
    for p, q in marked:
        _frame_cell(ax, ps, qs, p, q)
    ax.set_xlabel(r"$p = P(1 \mid 0)$")
    ax.set_ylabel(r"$q = P(0 \mid 1)$")
    ax.set_title(title)
    return ax


def _switching_line(ax, ps: Sequence[float], qs: Sequence[float]) -> None:
    """p + q = 1 (Thm 2's boundary) as a white dashed line through the heatmap's cell
    centres: cell j of p at x = j + 0.5, q_i at y = n - i - 0.5."""
    p_line = np.linspace(min(ps), max(ps), 200)
    keep = (1 - p_line >= min(qs)) & (1 - p_line <= max(qs))
    x = np.interp(p_line[keep], ps, np.arange(len(ps))) + 0.5
    y = len(qs) - 0.5 - np.interp(1 - p_line[keep], qs, np.arange(len(qs)))
    # no legend: it would hide a cell
    ax.plot(x, y, color="white", ls="--", lw=2, label="p + q = 1")


def _frame_cell(ax, ps: Sequence[float], qs: Sequence[float], p: float, q: float):
    """A vermillion frame around the heatmap's cell nearest to (p, q)."""
    j = int(np.argmin(np.abs(np.asarray(ps) - p)))
    i = int(np.argmin(np.abs(np.asarray(qs) - q)))
    corner = (j + 0.04, len(qs) - 1 - i + 0.04)
    frame = plt.Rectangle(
        corner, 0.92, 0.92, fill=False, edgecolor=OKABE_ITO[3], lw=2.5
    )
    ax.add_patch(frame)


LEGEND_BELOW = dict(  # a legend under its axes, off the data
    loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize="small"
)


def legend_below(ax, ncol: int = 2) -> None:
    """Move ``ax``'s legend under the axes, off the data."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=ncol,
        fontsize="small",
        frameon=False,
    )


def probability_panels(panels: Mapping[str, tuple], references: Mapping[str, float]):
    """Fig 3(c-d) side by side: each title maps to (positions, probabilities, run label)
    along one test path (:meth:`TrainResult.probability_along`)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(7, 3.6), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (title, (positions, probs, label)) in zip(axes, panels.items()):
        probability_along(positions, probs, references, ax, label=label, title=title)
    for ax in axes[1:]:
        ax.set_ylabel("")
    fig.tight_layout()
    return fig


def _within(points: np.ndarray, box) -> np.ndarray:
    """Which display points (n, 2) lie in the Bbox ``box``."""
    (x0, y0), (x1, y1) = box.get_points()
    x, y = points[:, 0], points[:, 1]
    return (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)


def legends_over_data(fig) -> list[str]:
    """Where a legend inside its axes covers plotted data: "axes title: legend over
    n points of 'label'" for every curve (a line of 3 points or more) or scatter with
    points under a legend's box; [] when every legend is off the data."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        frame = ax.get_window_extent(renderer)  # points clipped away are not shown
        artists = [ln for ln in ax.lines if len(ln.get_xydata()) >= 3]
        artists += list(ax.collections)
        for artist in artists:
            if isinstance(artist, plt.Line2D):
                points = artist.get_transform().transform(artist.get_xydata())
            elif hasattr(artist, "get_offsets") and len(artist.get_offsets()):
                points = artist.get_offset_transform().transform(artist.get_offsets())
            else:
                continue
            points = points[np.isfinite(points).all(axis=1)].reshape(-1, 2)
            inside = int((_within(points, box) & _within(points, frame)).sum())
            if inside:
                found.append(
                    f"{ax.get_title() or ax.get_ylabel()}: legend over {inside} "
                    f"points of {artist.get_label()!r}"
                )
    return found


def pseudo_tex(fig) -> list[str]:
    """Every text of ``fig`` (titles, labels, ticks, legends, annotations) with
    :data:`PSEUDO_TEX` outside its mathtext ($…$); [] when there is none."""
    texts = (t.get_text() for t in fig.findobj(plt.Text))
    return [t for t in texts if PSEUDO_TEX.search(re.sub(r"\$[^$]*\$", "", t))]


class FigureTextError(ValueError):
    """A figure text the pages may not show; in a notebook IPython shows this sentence
    alone (``_render_traceback_``), not the stack."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def show() -> None:
    """Show the open figures (``plt.show``) once their texts pass the pages' rule: TeX
    typed as text (:func:`pseudo_tex`) stops the chapter in one line and closes them.
    Each chapter shows its figures here, so a label that comes from the chapter's data
    is checked in every build (issue 49: "GPT-2, fp16 × 2^16" was found by reading)."""
    typed = [t for n in plt.get_fignums() for t in pseudo_tex(plt.figure(n))]
    if typed:
        plt.close("all")
        raise FigureTextError(
            f"the figure text {typed[0]!r} has TeX typed as plain text: write it in "
            "mathtext ($...$)"
        )
    plt.show()
