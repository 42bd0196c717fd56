"""The figures of the framework chapter (``book/framework.ipynb``)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ...chains import MarkovChain
from .style import COLORS, heatmap

__all__ = ["sample_paths", "marginal_law", "entropy_maps"]


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
