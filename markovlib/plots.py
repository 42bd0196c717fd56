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
import torch
from matplotlib.colors import ListedColormap, to_rgba
from matplotlib.font_manager import font_scalings
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from . import analysis, ccmc, dynamics, theory
from .chains import MarkovChain, symmetric

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
    _predicted_basins(ax, ww, ee, p, q)
    _energy_levels(ax, ww, ee)
    _basin_boundary(ax, ww, ee, dynamics.PAPER_METRIC, lw=1.6, ls="solid")
    if full_model_boundary:
        _basin_boundary(ax, ww, ee, dynamics.FULL_MODEL_METRIC, lw=1.2, ls="--")
    _flow_arrows(ax, p, q, w_range, e_max)
    _critical_points(ax, p, q, np.linspace(w_lo, w_hi, 400))
    _marked_points(ax, points or {})
    ax.set_xlim(w_lo, w_hi)
    ax.set_ylim(0, e_max)
    ax.set_xlabel("$w$ (feed-forward scale)")
    ax.set_ylabel("$e$ (embedding scale)")
    ax.set_title(
        title if title is not None else f"p = {p:g}, q = {q:g} (p + q = {p + q:.2g})"
    )
    ax.grid(False)
    return ax


def _predicted_basins(ax, ww, ee, p: float, q: float) -> None:
    """Shade each point (w, e) by the basin the energy level through the saddle
    predicts: green global, vermillion local (``dynamics.predicted_basin``)."""
    basin = np.vectorize(lambda e, w: dynamics.predicted_basin(e, w, p, q) == "global")(
        np.where(ee == 0, 1e-9, ee), ww
    )
    colors = [
        to_rgba_safe(COLORS["H_pi"], 0.14),
        to_rgba_safe(COLORS["theory"], 0.16),
    ]
    ax.contourf(ww, ee, basin.astype(float), levels=[-0.5, 0.5, 1.5], colors=colors)


def _energy_levels(ax, ww, ee) -> None:
    """Twelve grey levels of the energy E(e, w), conserved along the flow (paper
    Sec. 4), between its 5th and 95th percentiles."""
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


def _basin_boundary(ax, ww, ee, metric, *, lw: float, ls: str) -> None:
    """The basin boundary in ``metric``: the saddle's energy level on w < 0 (on w > 0
    that level separates nothing), in black."""
    E = dynamics.energy(ee, ww, metric)
    ax.contour(
        ww,
        ee,
        np.where(np.isfinite(E) & (ww < 0), E, np.nan),
        levels=[dynamics.saddle_energy(metric)],
        colors="black",
        linewidths=lw,
        linestyles=ls,
    )


def _flow_arrows(ax, p, q, w_range: tuple[float, float], e_max: float) -> None:
    """Unit arrows along -∇L of the reduced model on an 11 x 9 grid inside the
    frame."""
    aw, ae = np.meshgrid(
        np.linspace(*w_range, 15)[1:-1], np.linspace(0, e_max, 11)[1:-1]
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


def _critical_points(ax, p: float, q: float, wl: np.ndarray) -> None:
    """The global-minimum curve (green), the local minima on e = 0 (vermillion: w
    beyond the saddle on the side p + q - 1 picks) and the saddle (0, -1/√2)."""
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


def _marked_points(ax, points: Mapping[str, np.ndarray]) -> None:
    """Each labelled set of (e, w) points as hollow markers, one marker and colour per
    label."""
    for i, (label, pts) in enumerate(points.items()):
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
    if table.empty:
        ax.text(0.5, 0.5, "no runs of these cells shipped yet", ha="center")
        ax.set_axis_off()
        return ax
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


# ------------------------------------------------------------------ the saddles chapter
def saddle_slice(ts, untied, tied, chain: MarkovChain, min_eigenvalue: float, ax=None):
    """Exact loss along the untied Hessian's most negative direction and the tied one's
    softest at θ_π, with the quadratic H(π) + λ_min t²/2 (Thm 3)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    ax.plot(ts, untied, color=COLORS["untied"], lw=1.8, label="untied, most negative")
    ax.plot(ts, tied, color=COLORS["tied"], lw=1.8, label="tied, softest")
    second = chain.unigram_entropy() + 0.5 * min_eigenvalue * np.asarray(ts) ** 2
    label = r"$H(\pi) - c\,t^2/2$"
    ax.plot(ts, second, color=COLORS["untied"], ls=":", lw=1.2, label=label)
    reference_lines(ax, chain)
    ax.set_ylim(chain.entropy_rate() - 0.02, chain.unigram_entropy() + 0.03)
    ax.set_xlabel(r"$t$ (distance from $\theta_\pi$ along the unit eigenvector)")
    ax.set_ylabel("exact loss (nats)")
    ax.set_title(r"Loss along the Hessian's softest direction at $\theta_\pi$")
    ax.legend()
    return ax


def perturbed_descent(perturbed: Mapping[str, object], chain: MarkovChain, ax=None):
    """Exact loss along gradient descent from θ_π plus noise, one line per noise seed
    and colour per model (values: :func:`markovlib.analysis.perturb_theta_pi`)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    for model, run in perturbed.items():
        color = COLORS["theory" if model == "theory" else "untied"]
        ax.plot(np.asarray(run.losses).T, color=color, lw=1.2)
        n = len(run.losses)
        ax.plot([], [], color=color, label=f"{model}, untied ({n} noise seeds)")
    reference_lines(ax, chain)
    ax.set_xlabel("gradient-descent step on the exact loss")
    ax.set_ylabel("exact loss (nats)")
    ax.set_title(r"Untied, from $\theta_\pi$ + noise")
    ax.legend()
    return ax


def tied_untied_runs(side: Mapping[tuple[str, str], Sequence], chain: MarkovChain):
    """Test loss of every run, tied and untied, one panel per model (keys of ``side``:
    (model, tying)); returns the figure."""
    models = list(dict.fromkeys(m for m, _ in side))
    fig, axes = plt.subplots(
        1, len(models), figsize=(7, 4.4), sharey=True, layout="constrained"
    )
    for ax, model in zip(np.atleast_1d(axes), models):
        for tie in ("tied", "untied"):
            for r in side.get((model, tie), []):
                h = _history(r).dropna(subset=["test_loss"])
                ax.plot(h["step"], h["test_loss"], color=COLORS[tie], lw=0.6, alpha=0.5)
            ax.plot([], [], color=COLORS[tie], label=tie)
        reference_lines(ax, chain)
        top = max(0.72, chain.unigram_entropy() + 0.04)
        ax.set_ylim(chain.entropy_rate() - 0.02, top)
        ax.set_xlabel("iteration")
        ax.set_title(f"{model} model")
    first = np.atleast_1d(axes)[0]
    first.set_ylabel("test loss (nats)")
    handles, labels = first.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False)
    return fig


def fig4_maps(learnt_q: Mapping, share: Mapping, grid: Sequence[float]):
    """Fig 4 as two rows of heatmaps per tying (keys of ``learnt_q``): learnt P(0|1)
    minus q, and the share of the gap learnt; returns the figure."""
    fig, axes = plt.subplots(2, len(learnt_q), figsize=(11, 9), squeeze=False)
    true_q = np.meshgrid(grid, grid)[1]
    style = dict(switching_line=True)
    for col, tie in enumerate(learnt_q):
        heatmap(
            np.round(np.asarray(learnt_q[tie]) - true_q, 3) + 0.0,  # no "-0.000"
            grid,
            grid,
            ax=axes[0, col],
            title=f"{tie}: learnt P(0|1) - q",
            cbar_label="learnt - true",
            cmap="RdBu_r",
            center=0,
            vmin=-0.12,
            vmax=0.12,
            fmt=".3f",
            **style,
        )
        heatmap(
            share[tie],
            grid,
            grid,
            ax=axes[1, col],
            title=f"{tie}: share of the gap learnt",
            cbar_label=r"0: at $\theta_\pi$, 1: global minimum",
            vmin=0,
            vmax=1,
            fmt=".2f",
            **style,
        )
    fig.tight_layout()
    return fig


__all__ += ["saddle_slice", "perturbed_descent", "tied_untied_runs", "fig4_maps"]


# -------------------------------------------------------- the bad_local_minima chapter
LEGEND_BELOW = dict(  # a legend under its axes, off the data
    loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize="small"
)
TRAP_STYLES = {  # the four tied models of the trap experiment: line style, colour
    "gpt2": ("-", COLORS["tied"]),
    "theory": ("-", COLORS["theory"]),
    "theory + LN": ("--", COLORS["theory"]),
    "gpt2, init 0.2": ("--", COLORS["tied"]),
}


def hessian_spectrum(blocks, hessian: np.ndarray):
    """Thm 2's Hessian at θ_π: every eigenvalue (symlog scale) and the |entries| of the
    (E, b) block (``blocks``: a :func:`markovlib.analysis.hessian_blocks` result)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(7, 3.4))
    eigs = blocks.eigenvalues
    left.plot(np.arange(len(eigs)), eigs, ".", color=COLORS["tied"], ms=4)
    left.axhline(0, color=COLORS["H_rate"], lw=1, ls="--", label="0")
    left.set_yscale("symlog", linthresh=1e-3)
    left.set(xlabel="index (sorted)", ylabel="eigenvalue")
    left.set_title(f"all {len(hessian)} parameters")
    left.legend(loc="upper left")
    block = np.abs(hessian[np.ix_(blocks.in_block, blocks.in_block)])
    im = right.imshow(block, cmap="viridis")
    right.grid(False)
    fig.colorbar(im, ax=right, label="|entry|")
    right.set(xlabel="coordinate", ylabel="coordinate")
    right.set_title("$E_0$, $E_1$, $b_0$, $b_1$ block")
    fig.tight_layout()
    return fig


def curvature_threshold(grid, here: tuple[float, float]):
    """Thm 2's threshold: the smallest Hessian eigenvalue at θ_π against p + q and over
    the (p, q) grid (``grid``: :func:`markovlib.analysis.curvature_grid`); ``here``:
    (p + q, eigenvalue) of the page's chain."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(7, 3.6))
    left.scatter(grid.switching.ravel(), grid.autodiff.ravel(), s=10, label="grid")
    left.axvline(1, color=COLORS["H_pi"], ls=":", lw=1.5, label="p + q = 1")
    left.axhline(0, color=COLORS["H_rate"], ls="--", lw=1)
    left.plot(*here, "*", ms=14, color=COLORS["untied"], mec="black", label="this page")
    left.set(xlabel="p + q", ylabel="smallest eigenvalue")
    left.legend(loc="lower right")
    ticks = dict(xticklabels=3, yticklabels=3)
    heatmap(
        grid.autodiff,
        grid.values,
        grid.values,
        ax=right,
        cmap="RdBu_r",
        center=0,
        cbar_label="smallest eigenvalue",
        switching_line=True,
        **ticks,
    )
    fig.tight_layout()
    return fig


def perturbation_curves(perturb: Mapping[tuple[str, str], object]):
    """Exact gradient descent from θ_π plus noise (Thm 2), one panel per model: the loss
    scaled to 1 at H(π) and 0 at H_rate, on the chain (solid) and its mirror (dashed);
    ``perturb`` maps (model, "this chain" or "mirror") to a ``Perturbation``."""
    models = list(dict.fromkeys(m for m, _ in perturb))
    fig, axes = plt.subplots(1, len(models), figsize=(7, 3.4), sharey=True)
    for ax, m in zip(np.atleast_1d(axes), models):
        for (model, which), r in perturb.items():
            ls, color = ("-", "tied") if which == "this chain" else ("--", "untied")
            if model != m:
                continue
            rate = r.chain.entropy_rate()
            scaled = (r.losses - rate) / (r.chain.unigram_entropy() - rate)
            ax.plot(scaled.T, ls=ls, lw=1.2, color=COLORS[color])
            label = f"p + q = {r.chain.switching:.2f}"
            ax.plot([], [], ls=ls, color=COLORS[color], label=label)
        ax.axhline(1, color=COLORS["H_pi"], ls=":", lw=1.5, label=r"$H(\pi)$")
        ax.axhline(0, color=COLORS["H_rate"], ls="--", lw=1.2)
        ax.set(xlabel="gradient step", title=f"{m} model, tied")
        ax.legend(loc="center right")
    np.atleast_1d(axes)[0].set_ylabel(r"$(L - H_{\rm rate}) / (H(\pi) - H_{\rm rate})$")
    fig.tight_layout()
    return fig


def _every_trap_run(ax, trained: Mapping[str, Sequence], chain: MarkovChain) -> None:
    for name, runs in trained.items():
        color = TRAP_STYLES[name][1]
        for r in runs:
            h = r.test_history
            ax.plot(h["step"], h["test_loss"], color=color, lw=0.6, alpha=0.5)
        ax.plot([], [], color=color, label=f"{name} ({len(runs)} runs)")
    reference_lines(ax, chain)
    top = max(0.72, chain.unigram_entropy() + 0.04)
    ax.set_ylim(chain.entropy_rate() - 0.02, top)
    ax.set(xlabel="iteration", ylabel="test loss (nats)")
    ax.set_title("every tied run\n(as the paper's Fig 3(a))")
    ax.legend(**LEGEND_BELOW)


def trap_training(trained, stats, chain: MarkovChain, *, at_step: int, steps: int):
    """Tied runs from the standard initialisation (the paper's Fig 3(a)): every gpt2 and
    theory run, the fraction still on the plateau, and the escape steps, per model
    (``stats``: :class:`markovlib.analysis.EscapeStats` of each model's runs)."""
    fig, axes = plt.subplots(1, 3, figsize=(11, 5.6))
    _every_trap_run(axes[0], {n: trained[n] for n in ("gpt2", "theory")}, chain)
    ax = axes[1]
    for name, st in stats.items():
        ls, color = TRAP_STYLES[name]
        c = st.curve
        ax.step(c["step"], c["plateau"], where="post", ls=ls, color=color, label=name)
    ax.axvline(at_step, color="grey", lw=1, ls=":")
    ax.set_ylim(-0.02, 1.02)
    ax.set(xlabel="iteration", ylabel="fraction on the plateau")
    tol = next(iter(stats.values())).tol
    ax.set_title(f"on the plateau: not yet within\n{tol:.2g} nats of $H_{{\\rm rate}}$")
    ax.legend(**LEGEND_BELOW)
    ax, bins = axes[2], np.linspace(0, steps, 21)
    for name, st in stats.items():
        ls, color = TRAP_STYLES[name]
        if st.n_escaped:
            label = f"{name}: {st.n_escaped} of {st.n}"
            ax.hist(
                st.escaped, bins=bins, histtype="step", ls=ls, color=color, label=label
            )
    ax.set(xlabel="escape step", ylabel="runs", title="escape steps\n(runs escaped)")
    if any(st.n_escaped for st in stats.values()):
        ax.legend(**LEGEND_BELOW)
    fig.tight_layout()
    return fig


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


# ---------------------------------------------------------- the global_minimum chapter
def loss_slices(ts: np.ndarray, slices: Mapping[str, np.ndarray], rate: float):
    """Thm 1: the exact loss L(θ* + t v) − H_rate along a random unit direction v, one
    line per construction ("tied, direct", "untied, feedforward", ...)."""
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for name, losses in slices.items():
        color = COLORS["untied" if name.startswith("untied") else "tied"]
        ls = "-" if "direct" in name else "--"
        ax.plot(ts, losses - rate, lw=1.6, label=name, color=color, ls=ls)
    label = r"0, i.e. $L = H_{\rm rate}$"
    ax.axhline(0, color=COLORS["H_rate"], ls="--", lw=1.2, label=label)
    ax.set_xlabel(r"$t$ (distance from $\theta_*$ along a random unit direction $v$)")
    ax.set_ylabel(r"$L(\theta_* + t v) - H_{\rm rate}$ (nats)")
    ax.set_title(r"Exact loss around $\theta_*$: a minimum with zero slope")
    ax.legend(loc="upper center", fontsize="small")
    return fig


def short_weight_name(name: str) -> str:
    """A parameter's name as figures print it ("blocks.0.ff.W_1.weight": "ff.W_1")."""
    return name.replace("blocks.0.", "").replace(".weight", "")


def _rank_bars(ax, first: Mapping[str, dict], named: tuple, near_rank_one: float):
    names = list(next(reversed(first.values()))["rank_ratio"])  # the longest list
    y = np.arange(len(names))
    for j, (label, d) in enumerate(first.items()):
        ratios = [d["rank_ratio"].get(n, np.nan) for n in names]
        ax.barh(y + (j - 0.5) * 0.4, ratios, 0.4, color=COLORS[label], label=label)
        for at in y[np.isnan(ratios)]:  # the tied model's head is its embedding
            ax.text(
                0.01,
                at + (j - 0.5) * 0.4,
                f"{label}: wte",
                va="center",
                size=MIN_FONT_PT,
            )
    ticks = [short_weight_name(n) + (" *" if n.endswith(named) else "") for n in names]
    ax.set_yticks(y, ticks)
    ax.invert_yaxis()
    ax.axvline(near_rank_one, color=COLORS["H_rate"], ls="--", lw=1, label="0.1")
    ax.set(xlabel=r"$s_2 / s_1$", title="$s_2 / s_1$ (* App. D)")
    ax.legend(**LEGEND_BELOW, ncol=2)


def appendix_d_panels(
    first, wpe: np.ndarray, *, near_zero: float, near_rank_one: float, named: tuple
):
    """App. D inside one model per tying (``first``: label -> theory.appendix_d):
    attention's share per position, the tied positional table ``wpe`` (positions x
    coordinates) and s_2/s_1 of each matrix (``named``: the ones App. D names)."""
    fig, axes = plt.subplots(1, 3, figsize=(11, 5))
    for label, d in first.items():
        axes[0].plot(d["ratio"], color=COLORS[label], lw=1, label=label)
    axes[0].axhline(near_zero, color=COLORS["H_rate"], ls="--", lw=1, label="0.1")
    axes[0].set(xlabel="position n", ylabel=r"$\|attn_n\| \,/\, \|x_n + attn_n\|$")
    axes[0].set_title("attention contribution")
    axes[0].legend(**LEGEND_BELOW, ncol=3)
    im = axes[1].imshow(wpe.T, aspect="auto", cmap="coolwarm", interpolation="nearest")
    fig.colorbar(im, ax=axes[1], label="value")
    axes[1].set(xlabel="position n", ylabel="coordinate of $p_n$")
    axes[1].set_title("positional embeddings (tied)")
    _rank_bars(axes[2], first, named, near_rank_one)
    fig.tight_layout()
    return fig


__all__ += [
    "TRAP_STYLES",
    "hessian_spectrum",
    "curvature_threshold",
    "perturbation_curves",
    "trap_training",
    "probability_panels",
    "loss_slices",
    "short_weight_name",
    "appendix_d_panels",
]


# --------------------------------------------------------------- the framework chapter
def sample_paths(paths, iid_paths, chain: MarkovChain):
    """Sample paths of a binary chain (top) against i.i.d. draws from its stationary
    law π (bottom), one row per path (Sec. 2); returns the figure."""
    p, q, pi = chain.P[0, 1], chain.P[1, 0], chain.stationary()
    one = COLORS["tied"]
    n_show, n_steps = np.shape(paths)
    fig, axes = plt.subplots(2, 1, figsize=(7, 4.4), sharex=True)
    titles = (
        f"Markov chain: p = {p:g}, q = {q:g} (p + q = {p + q:.2f})",
        rf"i.i.d. draws from $\pi$ = ({pi[0]:.3f}, {pi[1]:.3f})",
    )
    for ax, x_show, title in zip(axes, (paths, iid_paths), titles):
        ax.imshow(
            x_show,
            aspect="auto",
            cmap=ListedColormap(["#f0f0f0", one]),
            vmin=0,
            vmax=1,
            interpolation="nearest",
            extent=(0.5, n_steps + 0.5, n_show + 0.5, 0.5),
        )
        ax.set(ylabel="path", yticks=range(1, n_show + 1), title=title)
        ax.grid(False)
    axes[1].set_xlabel("position $n$")
    states = [
        Patch(color="#f0f0f0", ec="#999999", label="$x_n = 0$"),
        Patch(color=one, label="$x_n = 1$"),
    ]
    fig.legend(handles=states, loc="center right", frameon=True, title="state")
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    return fig


def marginal_law(
    stationary, uniform, exact_uniform, pi_1: float, n_paths: int, ax=None
):
    """Fraction of ``n_paths`` paths in state 1 per position, from the stationary and
    the uniform start, against π_1 ± 2 standard errors and the exact law of x_n."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    show = min(len(stationary), 50)
    n = np.arange(1, show + 1)
    se = np.sqrt(pi_1 * (1 - pi_1) / n_paths)
    band = (pi_1 - 2 * se, pi_1 + 2 * se)
    label = r"$\pi_1 \pm 2$ std. errors"
    ax.fill_between(n, *band, color=COLORS["data"], alpha=0.2, lw=0, label=label)
    ax.axhline(
        pi_1, color=COLORS["theory"], ls="--", lw=1.3, label=rf"$\pi_1$ = {pi_1:.3f}"
    )
    start = COLORS["untied"]
    ax.plot(n, exact_uniform[:show], color=start, lw=1.2, label="exact, uniform start")
    label = r"empirical, start from $\pi$"
    ax.plot(n, stationary[:show], "o", ms=3.5, color=COLORS["tied"], label=label)
    label = "empirical, uniform start"
    ax.plot(n, uniform[:show], "s", ms=3, mfc="none", color=start, label=label)
    ax.set_xlabel("position $n$")
    ax.set_ylabel(r"fraction with $x_n = 1$")
    ax.set_ylim(0, 1)
    ax.set_title(f"Marginal law ({n_paths} paths, first {show} positions)")
    ax.legend(loc="best")
    return ax


def _grid_xy(grid: Sequence[float], p, q):
    """Data coordinates of (p, q) in :func:`heatmap` on an even ``grid`` (q upwards)."""
    step, n = grid[1] - grid[0], len(grid)
    x = (np.asarray(p) - grid[0]) / step + 0.5
    return x, (n - 1) - (np.asarray(q) - grid[0]) / step + 0.5


def entropy_maps(grid: Sequence[float], rate, unigram, p: float, q: float):
    """H_rate, H(π) and their gap I(x_n; x_{n+1}) over the (p, q) square (Sec. 2), the
    line p + q = 1 dashed and the chosen (p, q) starred; the legend under the panels."""
    fig, axes = plt.subplots(1, 3, figsize=(11, 4.8))
    step = grid[1] - grid[0]
    ends = np.array([grid[0] - step / 2, grid[-1] + step / 2])
    panels = [
        (rate, r"entropy rate $H_{\rm rate}$", dict(vmin=0, vmax=np.log(2))),
        (unigram, r"unigram entropy $H(\pi)$", dict(vmin=0, vmax=np.log(2))),
        (np.asarray(unigram) - rate, r"gap $I(x_n; x_{n+1})$", dict(cmap="magma")),
    ]
    for ax, (values, title, kw) in zip(axes, panels):
        heatmap(
            values, grid, grid, ax=ax, title=title, xticklabels=12, yticklabels=12, **kw
        )
        ax.plot(*_grid_xy(grid, ends, 1 - ends), ls="--", color="white", lw=1.5)
        star = dict(marker="*", ms=15, mec="black", ls="none")
        ax.plot(*_grid_xy(grid, p, q), color=COLORS["untied"], **star)
        ax.set_xlim(0, len(grid))
        ax.set_ylim(len(grid), 0)
        ax.tick_params(axis="y", rotation=0)
    keys = [
        Line2D([], [], ls="--", color="white", label="$p + q = 1$ (gap = 0)"),
        Line2D(
            [],
            [],
            color=COLORS["untied"],
            label=f"chosen (p, q) = ({p:g}, {q:g})",
            **star,
        ),
    ]
    fig.legend(handles=keys, loc="lower center", ncol=2, facecolor="#bbbbbb")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


# -------------------------------------------------------------------- the CCMC chapter
def ccmc_reweighting(W, x, pos):
    """One prompt ``x`` (1, T) under the CCMC theorem of Ildiz et al.: the last token's
    attention per position (with and without the positional scores ``pos``) and the
    base chain's row re-weighted by the prompt's counts; returns the figure."""
    k, T = W.shape[0], x.shape[1]
    with torch.no_grad():
        att = ccmc.SelfAttentionSampler(W).attention(x)[0].numpy()
        att_pos = ccmc.SelfAttentionSampler(W, pos).attention(x)[0].numpy()
    counts = ccmc.token_counts(x, k)[0].numpy()
    rows = {
        "base chain": (ccmc.base_chain(W)[x[0, -1]], COLORS["theory"]),
        "CCMC (counts)": (ccmc.ccmc_probs(W, x)[0], COLORS["tied"]),
        "CCMC, ramp": (ccmc.ccmc_probs(W, x, pos)[0], COLORS["untied"]),
    }
    fig, (left, right) = plt.subplots(1, 2, figsize=(7, 5), width_ratios=[3, 2])
    t = np.arange(T)
    left.bar(t - 0.2, att, width=0.4, color=COLORS["tied"], label="no positional term")
    left.bar(t + 0.2, att_pos, width=0.4, color=COLORS["untied"], label="ramp")
    left.axhline(1 / T, color=COLORS["H_rate"], ls="--", lw=1, label="1/T")
    if T <= 16:
        left.set_xticks(t, [f"{v}" for v in x[0].tolist()])
        left.set_xlabel("position t (label: token $x_t$)")
    else:
        left.set_xlabel("prompt position t")
    left.set_ylabel("attention of the last token")
    left.set_title(f"last token {x[0, -1].item()}")
    width = 0.8 / len(rows)
    for i, (label, (values, color)) in enumerate(rows.items()):
        at = np.arange(k) + (i - 1) * width
        right.bar(at, values.numpy(), width=width, color=color, label=label)
    right.set_xticks(np.arange(k), [f"{j}\n{counts[j]:.0f}" for j in range(k)])
    right.set_xlabel("next token j\n(its count in the prompt)")
    right.set_ylabel("P(next = j)")
    right.set_title("re-weighted base chain")
    handles = [h for ax in (left, right) for h in ax.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="lower center", ncol=3)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    return fig


def ccmc_estimation(errors: Mapping[int, np.ndarray], W, ax=None, *, title: str = ""):
    """Error of the maximum-likelihood W against the sample size n (mean ± std over
    the data sets of ``errors``), the n^(-1/2) slope through the largest n and the
    row-centred ‖W‖_F (the error of guessing 0)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 5.6))
    ns = np.array(list(errors), dtype=float)
    mean = np.array([e.mean() for e in errors.values()])
    std = np.array([e.std() for e in errors.values()])
    reps = len(next(iter(errors.values())))
    label = f"MLE, mean $\\pm$ std over {reps} data sets"
    ax.errorbar(
        ns,
        mean,
        yerr=std,
        fmt="o-",
        color=COLORS["tied"],
        lw=1.6,
        capsize=3,
        label=label,
    )
    label = "reference slope $-1/2$ (through the largest n)"
    reference = mean[-1] * np.sqrt(ns[-1] / ns)
    ax.plot(ns, reference, color=COLORS["H_rate"], ls="--", lw=1.2, label=label)
    label = "$\\|W\\|_F$ (row-centred): the error of guessing 0"
    w_norm = float(ccmc.row_centred(W).norm())
    ax.axhline(w_norm, color=COLORS["H_pi"], ls=":", lw=1.2, label=label)
    _log_x(ax)
    ax.set_yscale("log")
    ax.set_xlabel("number n of (prompt, answer) pairs")
    ax.set_ylabel("$\\|\\hat W - W\\|_F$, row-centred")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2))
    ax.figure.tight_layout()
    return ax


def _log_x(ax) -> None:
    """A log x-axis labelled at the powers of ten only (minor labels collide)."""
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())


def _mean_and_band(ax, n, values, color, what: str) -> None:
    """The mean over trajectories (rows of ``values``) and its 10-90 % band."""
    ax.plot(n, values.mean(0), color=color, lw=1.8, label=f"{what}: mean")
    low, high = np.quantile(values, (0.1, 0.9), axis=0)
    ax.fill_between(n, low, high, color=color, alpha=0.2, lw=0, label=f"{what}: 10-90%")


def ccmc_collapse(runs: Mapping[str, dict], window: int, beta: float):
    """Winner-takes-all: distinct tokens and the top token's share in the last
    ``window`` tokens of the CCMC against the Markov chain with the same base kernel,
    one row per run of :func:`markovlib.ccmc.generation_run` (``W+``, ``W-``)."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
    stats = (("distinct", "distinct tokens"), ("top_share", "top token's share"))
    sources = (
        ("stats", "tied", "attention (CCMC)"),
        ("markov", "data", "Markov chain, base kernel"),
    )
    for row, (name, run) in enumerate(runs.items()):
        k, sign = run["W"].shape[0], name[1]
        for ax, (stat, label) in zip(axes[row], stats):
            for src, color, what in sources:
                _mean_and_band(ax, run[src]["n"], run[src][stat], COLORS[color], what)
            if stat == "distinct":
                ax.axhline(k, color=COLORS["H_rate"], ls="--", lw=1, label=f"k = {k}")
                ax.set_ylim(0, k + 0.5)
            else:
                label_pi = r"largest stationary probability $\max_i \pi_i$"
                ax.axhline(
                    run["pi"].max(),
                    color=COLORS["theory"],
                    ls="--",
                    lw=1.2,
                    label=label_pi,
                )
                ax.set_ylim(0, 1.05)
            ax.axhline(1, color=COLORS["H_pi"], ls=":", lw=1.2, label="one token")
            _log_x(ax)
            ax.set_ylabel(f"{label}, last {window}")
            n_stable = len(run["stable"])
            ax.set_title(
                f"$W_{sign} = W {sign} {beta:g} I$: {n_stable} stable state(s)"
            )
    for ax in axes[1]:
        ax.set_xlabel("generated tokens n")
    handles = {}
    for ax in axes.ravel():
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=3)
    fig.tight_layout(rect=(0, 0.11, 1, 1))
    return fig


def ccmc_mean_field(lengths, shares, ode, winners, window: int):
    """Left: each token's mean share of the context against its length (solid) and
    the mean-field ODE (dashed); right: which token leads the last ``window`` tokens,
    as a share of the trajectories (``winners``: trajectories per token)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5.2), width_ratios=[2, 1])
    k, n_traj = shares.shape[1], int(np.sum(winners))
    colors = plt.cm.viridis(np.linspace(0, 0.9, k))
    for j in range(k):
        left.plot(lengths, shares[:, j], color=colors[j], lw=1.8, label=f"token {j}")
        left.plot(lengths, ode[:, j], color=colors[j], lw=1.2, ls="--")
    left.plot([], [], color="grey", ls="--", label="mean field (ODE)")
    _log_x(left)
    left.set_xlabel("context length n (prompt + generated)")
    left.set_ylabel("mean share in the context")
    left.set_title(f"$W_-$: {n_traj} trajectories (solid) vs the ODE (dashed)")
    right.bar(np.arange(k), np.asarray(winners) / n_traj, color=COLORS["tied"])
    right.axhline(1 / k, color=COLORS["H_rate"], ls="--", lw=1, label="1/k")
    right.set_xticks(np.arange(k))
    right.set_xlabel(f"most frequent token in the last {window}")
    right.set_ylabel("share of the trajectories")
    right.set_title("$W_+$: who wins")
    handles = [h for ax in (left, right) for h in ax.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="lower center", ncol=5)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    return fig


__all__ += [
    "sample_paths",
    "marginal_law",
    "entropy_maps",
    "ccmc_reweighting",
    "ccmc_estimation",
    "ccmc_collapse",
    "ccmc_mean_field",
]


# -------------------------------------------------------------------- the depth chapter
def layers(n: int) -> str:
    """ "1 layer", "2 layers"."""
    return f"{n} layer{'s' * (n != 1)}"


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


def depth_curves(runs: Mapping[int, Sequence], chain: MarkovChain, title: str = ""):
    """Mean test loss ± one std per depth (Fig 1), viridis from shallow to deep; the
    legend under the axes; returns the figure."""
    fig, ax = plt.subplots(figsize=(7, 5.2), layout="constrained")
    ax.set_prop_cycle(color=plt.cm.viridis(np.linspace(0, 0.85, len(runs))))
    curves = {layers(n): rs for n, rs in runs.items() if rs}
    ylim = (chain.entropy_rate() - 0.02, max(0.72, chain.unigram_entropy() + 0.04))
    loss_curves(curves, chain, ax, ylim=ylim, title=title)
    legend_below(ax)
    return fig


def higher_order_curves(by_depth: Mapping[int, Sequence], chains: Mapping, steps: int):
    """Test loss of each depth's run on each order-2 chain (``chains``: seed -> chain;
    ``by_depth``: depth -> records), one panel per chain; returns the figure."""
    depths = list(by_depth)
    colors = dict(zip(depths, plt.cm.viridis(np.linspace(0, 0.85, len(depths)))))
    run = {(n, r.spec.chain["seed"]): r for n, rs in by_depth.items() for r in rs}
    fig, axes = plt.subplots(
        1,
        len(chains),
        figsize=(11, 4.6),
        sharex=True,
        layout="constrained",
        squeeze=False,
    )
    for ax, (seed, chain) in zip(axes[0], chains.items()):
        for n in (n for n in depths if (n, seed) in run):
            h = _history(run[n, seed]).dropna(subset=["test_loss"])
            ax.plot(h["step"], h["test_loss"], color=colors[n], lw=1.4, label=layers(n))
        if not any((n, seed) in run for n in depths):
            ax.text(0.5, 0.22, "not shipped yet", transform=ax.transAxes, ha="center")
        reference_lines(ax, chain, bigram=True)
        ax.set_ylim(
            chain.entropy_rate() - 0.03, max(chain.unigram_entropy(), 0.69) + 0.03
        )
        ax.set_xlim(0, steps)
        ax.set_title(f"order-2 chain, seed {seed}")
        ax.set_xlabel("iteration")
    axes[0, 0].set_ylabel("test loss (nats)")
    keys = [Line2D([], [], color=colors[n], lw=1.4) for n in depths]
    refs = axes[0, 0].get_lines()[-3:]
    names = [r"$H(x_{n+1} \mid x_n)$ (first-order)", r"$H(\pi)$", r"$H_{\rm rate}$"]
    fig.legend(
        [*keys, *refs],
        [*map(layers, depths), *names],
        loc="outside lower center",
        ncol=6,
    )
    return fig


def lag_curves(by_depth: Mapping[int, Sequence], window: Sequence, chain, w: int, ax):
    """Mean test loss per depth with full attention and of one layer with the window
    ``w`` on a lag chain, with its first-order loss; the legend under the axes."""
    ax.set_prop_cycle(
        color=[*plt.cm.viridis(np.linspace(0, 0.85, len(by_depth))), COLORS["untied"]]
    )
    curves = {layers(n): rs for n, rs in by_depth.items()}
    curves[f"window w = {w}"] = window
    rate = chain.entropy_rate()
    ylim = (rate - 0.02, max(0.72, chain.unigram_entropy() + 0.04))
    loss_curves(curves, chain, ax, ylim=ylim, title=chain.name)
    reference_lines(ax, chain, bigram=True, rate=False, unigram=False)
    legend_below(ax)
    return ax


def window_shares(by_window: Mapping[int, Sequence], full: Sequence, w: int, ax):
    """Each one-layer run's share of the gap against its attention window (the mean as
    a line), the full-attention mean and the rule's two thresholds; ``w``: the window
    that matches the chain. ``by_window`` and ``full`` hold run records."""
    color = COLORS["untied"]
    windows = list(by_window)
    for v in windows:
        shares = [r.share for r in by_window[v]]
        ax.plot([v] * len(shares), shares, "o", color=color, alpha=0.5, ms=5)
    means = [np.mean([r.share for r in by_window[v]]) for v in windows]
    ax.plot(windows, means, "-", color=color, label="window w")
    one = np.mean([r.share for r in full])
    first = plt.cm.viridis(0.0)
    ax.axhline(one, color=first, ls=":", lw=1.5, label="full attention, 1 layer")
    for y in (analysis.AT_UNIGRAM_BELOW, analysis.ESCAPED_ABOVE):
        ax.axhline(y, color="grey", lw=0.8, ls="--")
    ax.axvline(w, color="grey", lw=1, ls=":")
    ax.set_xlabel("attention window w (positions n - w .. n)")
    ax.set_ylabel("share of the gap learnt")
    ax.set_ylim(-0.1, 1.1)
    ax.set_title("one layer: share of the gap vs window")
    legend_below(ax)
    return ax


def attention_maps(weights: Mapping[str, np.ndarray], final_loss: Mapping[str, float]):
    """Attention weights (query n by attended i) per model, side by side, titled with
    the model's final test loss; returns the figure."""
    fig, axes = plt.subplots(1, len(weights), figsize=(7, 3.6), squeeze=False)
    for ax, (label, w) in zip(axes[0], weights.items()):
        im = ax.imshow(w, cmap="magma", vmin=0, vmax=1)
        ax.grid(False)
        ax.set_xlabel("attended position i")
        ax.set_title(f"{label}\nfinal loss {final_loss[label]:.4f}")
    axes[0, 0].set_ylabel("query position n")
    fig.colorbar(im, ax=axes[0], label="attention weight", shrink=0.8)
    return fig


__all__ += [
    "layers",
    "legend_below",
    "depth_curves",
    "higher_order_curves",
    "lag_curves",
    "window_shares",
    "attention_maps",
]


# ------------------------------------------------------------------ the trapped chapter
def fig4_share_panels(maps: Mapping, marked: Mapping, grid: Sequence[float]):
    """The share of the gap per cell of each (grid name, tying) map, two by two, with
    the cells at H(π) of ``marked`` framed; returns the figure."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 9))
    for ax, ((name, tie), values) in zip(axes.flat, maps.items()):
        heatmap(
            values,
            grid,
            grid,
            ax=ax,
            title=f"{tie}, {name} iterations",
            cbar_label="share of the gap learnt",
            vmin=0,
            vmax=1,
            fmt=".2f",
            switching_line=True,
            marked=marked.get((name, tie), ()),
        )
    for ax in axes.flat[len(maps) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def plateau_lengths(ends: Mapping[str, pd.DataFrame], ax=None):
    """Escape iteration against p + q - 1 per grid (a
    :func:`markovlib.chapters.plateau_ends` table each); a cross at the last step for
    a run that never escaped."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
    for i, (name, t) in enumerate((k, v) for k, v in ends.items() if len(v)):
        out, stay = t[t["escape"].notna()], t[t["escape"].isna()]
        color = OKABE_ITO[i]
        if len(out):
            ax.scatter(
                out["above_line"],
                out["escape"],
                s=28,
                color=color,
                label=name,
                alpha=0.8,
            )
        if len(stay):
            label = f"{name}: never"
            ax.scatter(
                stay["above_line"],
                stay["steps"],
                s=60,
                marker="x",
                color=color,
                label=label,
            )
    ax.set_xlabel("p + q − 1")
    ax.set_ylabel("escape iteration")
    legend_below(ax)
    ax.get_legend().set_title("grid (iterations)")
    return ax


__all__ += ["fig4_share_panels", "plateau_lengths"]


# -------------------------------------------------------------- the multi_state chapter
def fig5_curves(runs: Mapping[str, Sequence], k: int, ps: Sequence[float], title: str):
    """The paper's Fig 5: mean test loss of the tied and untied runs (``runs``: tying
    -> trained runs on symmetric k-state chains) on each chain p of ``ps``, one panel
    each, H_rate in its title and one legend under the panels; returns the figure."""
    fig, axes = plt.subplots(2, 2, figsize=(10, 8.2), sharex=True, layout="constrained")
    fig.suptitle(title)
    for ax, p in zip(axes.ravel(), ps):
        chain = symmetric(k, p)
        on = {
            t: [r for r in rs if np.allclose(r.chain.P, chain.P)]
            for t, rs in runs.items()
        }
        top = (chain.entropy_rate() - 0.05, np.log(k) + 0.1)
        rate = rf"$H_{{\rm rate}}$ = {chain.entropy_rate():.4f}"
        loss_curves(on, chain, ax=ax, ylim=top, title=f"k = {k}, p = {p}: {rate}")
        ax.get_legend().remove()  # one legend for all panels, off the data
    handles, labels = axes[0, 0].get_legend_handles_labels()
    labels = [
        *labels[:-2],
        r"$H(\pi) = \log k$ (unigram)",
        r"$H_{\rm rate}$ (global min)",
    ]
    fig.legend(handles, labels, loc="outside lower center", ncol=4, frameon=False)
    return fig


def k_threshold(thresholds: Mapping[int, float], n_dots: int = 19):
    """Left: the smallest eigenvalue at θ_π of the tied k-state model against p, closed
    form (line) and autodiff (dots), k = 2, 3, 5, 8; right: the bisected threshold p*
    per k against (k - 1)/k; returns the figure."""
    ps_dots, ps_line = np.linspace(0.1, 1.0, n_dots), np.linspace(0.05, 1.0, 200)
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.8))
    for i, k in enumerate((2, 3, 5, 8)):
        color = plt.cm.viridis(i / 4)
        closed = [theory.unigram_curvature(symmetric(k, p)) for p in ps_line]
        axes[0].plot(ps_line, closed, lw=1.4, color=color, label=f"k = {k}")
        dots = [theory.unigram_min_eigenvalue(k, p) for p in ps_dots]
        axes[0].plot(ps_dots, dots, "o", ms=4, color=color)
    axes[0].axhline(0, color=COLORS["H_rate"], ls="--", lw=1)
    axes[0].set_xlabel("p")
    axes[0].set_ylabel(r"smallest eigenvalue at $\theta_\pi$")
    axes[0].set_title("line: closed form; dots: autodiff")
    axes[0].legend(fontsize="small")
    ks = list(thresholds)
    axes[1].plot(ks, list(thresholds.values()), "o", ms=7, color=COLORS["tied"])
    fine = np.linspace(2, max(ks), 100)
    axes[1].plot(fine, (fine - 1) / fine, color=COLORS["theory"], lw=1.5)
    axes[1].axhline(0.5, color=COLORS["H_pi"], ls=":", lw=1.2)
    axes[1].set_xlabel("number of states k")
    axes[1].set_ylabel("threshold p*")
    axes[1].set_title("dots: bisection; line: (k - 1)/k")
    fig.tight_layout()
    return fig


def threshold_shares(records: Mapping[str, Sequence], star: float, k: int, steps: int):
    """Share of the gap of each tied run (``records``: model -> run records) against
    its chain's p, the rule's bands and the threshold ``star``; legend under the
    axes."""
    fig, ax = plt.subplots(figsize=(7, 5.2), layout="constrained")
    for model, recs in records.items():
        color = COLORS["theory" if model == "theory" else "tied"]
        ps, shares = [r.spec.chain["p"] for r in recs], [r.share for r in recs]
        ax.plot(ps, shares, "o", ms=7, color=color, alpha=0.8, label=f"{model}, tied")
    ax.axhspan(analysis.ESCAPED_ABOVE, 1.05, color="0.9", label="escaped")
    ax.axhspan(-0.05, analysis.AT_UNIGRAM_BELOW, color="0.8", label=r"at $H(\pi)$")
    label = f"threshold (k-1)/k = {star:.3f}"
    ax.axvline(star, color=COLORS["H_pi"], ls=":", lw=1.5, label=label)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("p")
    ax.set_ylabel("share of the gap learnt")
    ax.set_title(f"k = {k}: tied runs after {steps} steps")
    legend_below(ax)
    return fig


__all__ += ["fig5_curves", "k_threshold", "threshold_shares"]


# ----------------------------------------------------------- the initialisation chapter
def _descent_paths(ax, descent, starts: np.ndarray, predicted: np.ndarray) -> None:
    """Gradient-descent paths on (w, e), coloured by where they end, and their starts:
    a dot where the end is the predicted basin, a cross where it is not."""
    ok = descent.found == predicted
    for path, kind in zip(descent.path, descent.found):
        color = COLORS["theory" if kind == "global" else "H_pi"]
        ax.plot(path[:, 1], path[:, 0], color=color, lw=1.3)
    ax.plot(
        *starts[ok][:, ::-1].T, "o", color="black", ms=5, label="start: as predicted"
    )
    ax.plot(
        *starts[~ok][:, ::-1].T,
        "X",
        color=COLORS["untied"],
        mec="black",
        ms=8,
        label="start: not as predicted",
    )


def portrait_pair(
    chains: Mapping[str, tuple],
    *,
    points=None,
    descent=None,
    starts=None,
    predicted=None,
):
    """:func:`phase_portrait` of each chain (name -> (p, q)) side by side with one
    legend below; with ``descent`` (name -> a manifold descent), its paths from
    ``starts`` against the ``predicted`` basins (name -> kinds); returns the figure."""
    fig, axes = plt.subplots(1, len(chains), figsize=(7, 3.9), sharey=True)
    for ax, (name, (p, q)) in zip(axes, chains.items()):
        phase_portrait(p, q, ax, points=points, title=f"{name}: p + q = {p + q:.2f}")
        if descent is not None:
            _descent_paths(ax, descent[name], starts, predicted[name])
    for ax in axes[1:]:
        ax.set_ylabel("")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="lower center", ncol=3, fontsize="small", frameon=False
    )
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    return fig


__all__ += ["portrait_pair"]
