"""The figures of the depth chapter (``book/depth.ipynb``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from ... import analysis
from ...chains import MarkovChain
from .style import COLORS, history_frame, legend_below, loss_curves, reference_lines

__all__ = [
    "layers",
    "depth_curves",
    "higher_order_curves",
    "lag_curves",
    "window_shares",
    "attention_maps",
]


def layers(n: int) -> str:
    """ "1 layer", "2 layers"."""
    return f"{n} layer{'s' * (n != 1)}"


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
            h = history_frame(run[n, seed]).dropna(subset=["test_loss"])
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
