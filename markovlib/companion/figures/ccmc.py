"""The figures of the ccmc chapter (``book/ccmc.ipynb``)."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import NullFormatter

from ... import ccmc
from .style import COLORS

__all__ = ["ccmc_reweighting", "ccmc_estimation", "ccmc_collapse", "ccmc_mean_field"]


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


def _mean_and_band(ax, n, band: dict, color, what: str) -> None:
    """The mean over trajectories and its 10-90 % band (``band``: ``mean``, ``low``,
    ``high``, as :func:`~markovlib.companion.measures.generation.generation_summary`
    has them)."""
    ax.plot(n, band["mean"], color=color, lw=1.8, label=f"{what}: mean")
    ax.fill_between(
        n,
        band["low"],
        band["high"],
        color=color,
        alpha=0.2,
        lw=0,
        label=f"{what}: 10-90%",
    )


def ccmc_collapse(runs: Mapping[str, dict], window: int, beta: float):
    """Winner-takes-all: distinct tokens and the top token's share in the last
    ``window`` tokens of the CCMC against the Markov chain with the same base kernel,
    one row per run summarised by
    :func:`~markovlib.companion.measures.generation.generation_summary` (``W+``,
    ``W-``)."""
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
