"""The figures of the saddles chapter (``book/saddles.ipynb``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ...chains import MarkovChain
from .style import COLORS, heatmap, history_frame, legend_below, reference_lines

__all__ = ["saddle_slice", "perturbed_descent", "tied_untied_runs", "fig4_maps"]


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
    legend_below(ax)
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
    legend_below(ax)
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
                h = history_frame(r).dropna(subset=["test_loss"])
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
