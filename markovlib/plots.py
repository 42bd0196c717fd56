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

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import to_rgba
from matplotlib.font_manager import font_scalings

from . import dynamics
from .chains import MarkovChain

__all__ = [
    "COLORS",
    "OKABE_ITO",
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
    """Loss vs iteration for each label; a value may be a TrainResult/history or a list
    of them (mean ± std band)."""
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
    # p + q = 1 through the cell centres (cell j of p at x = j + 0.5, q_i at
    # y = n - i - 0.5)
    if switching_line:
        p_line = np.linspace(min(ps), max(ps), 200)
        keep = (1 - p_line >= min(qs)) & (1 - p_line <= max(qs))
        x = np.interp(p_line[keep], ps, np.arange(len(ps))) + 0.5
        y = len(qs) - 0.5 - np.interp(1 - p_line[keep], qs, np.arange(len(qs)))
        ax.plot(
            x, y, color="white", ls="--", lw=2, label="p + q = 1"
        )  # no legend: it would hide a cell
    for p, q in marked:
        j = int(np.argmin(np.abs(np.asarray(ps) - p)))
        i = int(np.argmin(np.abs(np.asarray(qs) - q)))
        ax.add_patch(
            plt.Rectangle(
                (j + 0.04, len(qs) - 1 - i + 0.04),
                0.92,
                0.92,
                fill=False,
                edgecolor=OKABE_ITO[3],
                lw=2.5,
            )
        )
    ax.set_xlabel(r"$p = P(1 \mid 0)$")
    ax.set_ylabel(r"$q = P(0 \mid 1)$")
    ax.set_title(title)
    return ax


# ----------------------------------------------------------- the initialisation chapter
def phase_portrait(
    p: float,
    q: float,
    ax=None,
    *,
    e_max: float = 2.5,
    w_range: tuple[float, float] = (-2.0, 2.0),
    points: Mapping[str, np.ndarray] | None = None,
    full_model_boundary: bool = True,
    title: str | None = None,
):
    """The gradient flow of the reduced model (Makkuva et al. 2024) on the (w, e)
    half-plane, e >= 0.

    Shaded: the basin predicted by the energy level through the saddle
    (``dynamics.predicted_basin``); grey lines: levels of the energy E; solid black: the
    level through the saddle (the basin boundary); dashed black: the same boundary for
    the full model's metric (``dynamics.FULL_MODEL_METRIC``); arrows: the direction of
    -∇L; green: the global-minimum curve; vermillion on e = 0: the local minima; star:
    the saddle. ``points`` maps a legend label to an (n, 2) array of (e, w) to mark
    (e.g. initialisations). Returns the axes.
    """

    if ax is None:
        _, ax = plt.subplots(figsize=(3.5, 3.2))
    w_lo, w_hi = w_range
    ww, ee = np.meshgrid(np.linspace(w_lo, w_hi, 161), np.linspace(0.0, e_max, 121))
    basin = np.vectorize(lambda e, w: dynamics.predicted_basin(e, w, p, q) == "global")(
        np.where(ee == 0, 1e-9, ee), ww
    )
    ax.contourf(
        ww,
        ee,
        basin.astype(float),
        levels=[-0.5, 0.5, 1.5],
        colors=[
            to_rgba_safe(COLORS["H_pi"], 0.14),
            to_rgba_safe(COLORS["theory"], 0.16),
        ],
    )
    E = dynamics.energy(ee, ww)
    finite = np.isfinite(E)
    levels = np.linspace(
        np.nanpercentile(E[finite], 5), np.nanpercentile(E[finite], 95), 12
    )
    ax.contour(
        ww,
        ee,
        np.where(finite, E, np.nan),
        levels=levels,
        colors="grey",
        linewidths=0.5,
        linestyles="solid",
    )
    # the basin boundary: the saddle's level on w < 0 (on w > 0 that level separates
    # nothing)
    left = finite & (ww < 0)
    ax.contour(
        ww,
        ee,
        np.where(left, E, np.nan),
        levels=[dynamics.saddle_energy()],
        colors="black",
        linewidths=1.6,
        linestyles="solid",
    )
    if full_model_boundary:
        metric = dynamics.FULL_MODEL_METRIC
        F = dynamics.energy(ee, ww, metric)
        ax.contour(
            ww,
            ee,
            np.where(np.isfinite(F) & (ww < 0), F, np.nan),
            levels=[dynamics.saddle_energy(metric)],
            colors="black",
            linewidths=1.2,
            linestyles="--",
        )
    aw, ae = np.meshgrid(
        np.linspace(w_lo, w_hi, 15)[1:-1], np.linspace(0, e_max, 11)[1:-1]
    )
    ge, gw = dynamics.reduced_gradient(ae, aw, p, q)
    norm = np.hypot(ge, gw)
    norm = np.where(norm > 0, norm, 1.0)
    ax.quiver(
        aw,
        ae,
        -gw / norm,
        -ge / norm,
        color="#555555",
        scale=28,
        width=0.004,
        headwidth=4,
        alpha=0.8,
    )
    wl = np.linspace(w_lo, w_hi, 400)
    ax.plot(
        wl,
        dynamics.global_minimum_curve(p, q, wl),
        color=COLORS["theory"],
        lw=2.4,
        label="global minima",
    )
    s = -1 / math.sqrt(2)
    side = (wl > s) if p + q > 1 else (wl < s)
    ax.plot(
        np.where(side, wl, np.nan),
        np.zeros_like(wl),
        color=COLORS["H_pi"],
        lw=4,
        solid_capstyle="butt",
        label="local minima",
        clip_on=False,
    )
    ax.plot(
        [s], [0], "*", color="black", ms=12, clip_on=False, label="saddle", zorder=5
    )
    for i, (label, pts) in enumerate((points or {}).items()):
        pts = np.asarray(pts, dtype=float).reshape(-1, 2)
        ax.plot(
            pts[:, 1],
            pts[:, 0],
            ("o", "s", "^", "D")[i % 4],
            ms=4,
            mfc="none",
            color=(COLORS["tied"], COLORS["untied"], "black", OKABE_ITO[4])[i % 4],
            label=label,
            zorder=4,
        )
    ax.set_xlim(w_lo, w_hi)
    ax.set_ylim(0, e_max)
    ax.set_xlabel("$w$ (feed-forward scale)")
    ax.set_ylabel("$e$ (embedding scale)")
    ax.set_title(
        title if title is not None else f"p = {p:g}, q = {q:g} (p + q = {p + q:.2g})"
    )
    ax.grid(False)
    return ax


def to_rgba_safe(color, alpha: float):
    """``color`` with transparency ``alpha`` (an RGBA tuple)."""

    return to_rgba(color, alpha)


# ----------------------------------------------------------------- the trapped chapter
def survival_curves(curves: Mapping[str, object], ax=None, *, mark: int | None = None):
    """Fraction of runs still at H(π) against iteration, one line per label (values:
    :class:`markovlib.analysis.Survival`); ``mark``: a vertical line at that iteration
    (the authors' budget)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    styles = ("-", "-", "--", ":", "-.")
    for i, (label, s) in enumerate(curves.items()):
        ax.step(
            s.steps,
            s.at_unigram,
            where="post",
            lw=1.8,
            ls=styles[i % len(styles)],
            color=OKABE_ITO[i % len(OKABE_ITO)],
            label=f"{label} ({s.n} runs)",
        )
    if mark is not None:
        ax.axvline(
            mark, color="grey", ls=":", lw=1.2, label=f"the authors' {mark} iterations"
        )
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("iteration")
    ax.set_ylabel("fraction of runs at H(π)")
    ax.legend(loc="center right", fontsize="small")
    return ax


def gradient_bars(table: pd.DataFrame, ax=None, *, title: str = ""):
    """Share of exactly-zero gradient entries per parameter in fp16 without and with
    loss scaling (a :func:`markovlib.precision.gradient_comparison` table)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    names = [n.replace("blocks.0.", "").replace(".weight", "") for n in table.index]
    y = np.arange(len(names))
    for offset, (column, label, color) in enumerate(
        (
            ("fp16 zero share", "fp16, no loss scaling", COLORS["tied"]),
            ("fp16-scaled zero share", "fp16, loss × 2^16", COLORS["untied"]),
        )
    ):
        ax.barh(y + 0.4 * offset - 0.2, table[column], 0.4, label=label, color=color)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of gradient entries exactly 0")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize="small")
    return ax


def cell_trap_shares(table: pd.DataFrame, ax=None, *, half: float = 0.5):
    """Share of runs at H(π) per cell with its 95 % interval (a
    :func:`markovlib.measures.cell_trap_table`), cells ordered by p + q − 1, and a
    dashed line at ``half`` (Fig 4's rule: a cell is at H(π) from half of its runs)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    t = table.assign(d=table["p"] + table["q"] - 1).sort_values(["d", "p"])
    x = np.arange(len(t))
    err = np.vstack([t["share"] - t["low"], t["high"] - t["share"]])
    ax.errorbar(
        x,
        t["share"],
        yerr=err,
        fmt="o",
        color=COLORS["tied"],
        capsize=3,
        label="share of runs at H(π), 95 % interval",
    )
    ax.axhline(
        half, color=COLORS["H_pi"], ls="--", lw=1.2, label=f"{half:g} of the runs"
    )
    labels = [f"({p:g}, {q:g})" for p, q in zip(t["p"], t["q"])]
    ax.set_xticks(x, labels, rotation=45, ha="right")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("cell (p, q), by p + q − 1")
    ax.set_ylabel("runs at H(π)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=2, fontsize="small")
    return ax


__all__ += ["cell_trap_shares"]
