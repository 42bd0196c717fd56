"""The figures of the global_minimum chapter (``book/global_minimum.ipynb``)."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np

from .style import COLORS, LEGEND_BELOW, MIN_FONT_PT

__all__ = ["loss_slices", "short_weight_name", "appendix_d_panels"]


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
