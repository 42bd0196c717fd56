"""The figures of the trapped chapter (``book/trapped.ipynb``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .style import COLORS, OKABE_ITO, heatmap, legend_below

__all__ = [
    "survival_curves",
    "gradient_bars",
    "cell_trap_shares",
    "fig4_share_panels",
    "plateau_lengths",
    "thesis_curvature",
]


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
    legend_below(ax)
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
            ("fp16-scaled zero share", r"fp16, loss × $2^{16}$", COLORS["untied"]),
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


def thesis_curvature(
    smallest: Mapping[str, Sequence[float]], scale: float, depth, threshold: float
):
    """Two panels: the curvature the rule judges at each point (the fixed batch's
    smallest direction on fresh paths), a row of dots per group (``smallest``: the
    trapped runs, and θ_π as the test's control), against 0, the rule's line
    (-``threshold`` of ``scale``) and Thm 3's saddle (-``scale``); and at θ_π per depth
    (``depth``: depth -> {"smallest", "block"},
    :func:`markovlib.companion.thesis.depth_curvature`)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.6, 3.4), width_ratios=(3, 2))
    for i, (label, values) in enumerate(smallest.items()):
        y = np.full(len(values), i) + np.linspace(-0.15, 0.15, len(values))
        left.scatter(values, y, s=14, color=OKABE_ITO[i % len(OKABE_ITO)])
    left.set_yticks(
        range(len(smallest)), [f"{k} ({len(v)})" for k, v in smallest.items()]
    )
    for x, ls in ((0.0, "-"), (-threshold * scale, ":")):  # 0 and the rule's line
        left.axvline(x, color="grey", ls=ls, lw=1.0)
    left.axvline(-scale, color=COLORS["untied"], ls="--", lw=1.2)
    left.set_xscale("symlog", linthresh=1e-3)
    ticks = (-0.1, -0.01, 0.0, 0.01, 0.1)  # a decade apart: labels that do not collide
    left.set_xticks(ticks, [f"{t:g}".replace("-", "−") for t in ticks])
    widest = max(
        [0.3, 1.2 * scale, *(1.2 * abs(x) for v in smallest.values() for x in v)]
    )
    left.set_xlim(-widest, widest)
    left.set_xlabel("curvature on fresh paths (dashed: Thm 3's saddle)")
    left.set_title("its smallest direction, held out")
    depths = sorted(depth)
    right.plot(
        depths,
        [depth[L]["block"] for L in depths],
        "o-",
        color=COLORS["tied"],
        label="(e, b) block",
    )
    right.plot(
        depths,
        [depth[L]["smallest"] for L in depths],
        "s--",
        color="grey",
        label="every parameter",
    )
    right.axhline(0, color="grey", lw=0.8)
    right.set_xticks(depths)
    right.set_xlabel("depth")
    right.set_ylabel("smallest eigenvalue")
    right.set_title(r"at $\theta_\pi$, exact")
    right.legend(loc="center right", frameon=False)  # between the two lines
    fig.tight_layout()
    return fig
