"""The figures of the bad_local_minima chapter (``book/bad_local_minima.ipynb``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ...chains import MarkovChain
from .style import COLORS, LEGEND_BELOW, heatmap, reference_lines

__all__ = [
    "TRAP_STYLES",
    "hessian_spectrum",
    "curvature_threshold",
    "perturbation_curves",
    "trap_training",
]


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
