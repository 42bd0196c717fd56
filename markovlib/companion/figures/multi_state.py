"""The figures of the multi_state chapter (``book/multi_state.ipynb``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ... import analysis, theory
from ...chains import symmetric
from .style import COLORS, legend_below, loss_curves

__all__ = ["fig5_curves", "k_threshold", "threshold_shares"]


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
