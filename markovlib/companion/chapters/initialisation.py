"""``book/initialisation.ipynb``'s own numbers, checks and sentences: what its page
states beside the scorecard's claims."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "InitialisationVerdict",
    "initialisation_verdict",
    "initialisation_trap_text",
]


@dataclass(frozen=True)
class InitialisationVerdict:
    """What the initialisation chapter concludes from its manifold runs: per chain the
    agreement of gradient descent with the follow-up's flow and with the flow in the
    full model's metric, AdamW's agreement and undecided runs (``rows``), and the
    sentences that say so."""

    rows: dict[str, dict]
    agreement: (
        float  # share of all GD runs that end where the follow-up's flow predicts
    )
    escaped_below: bool  # every GD run started 'local' on the p + q < 1 chain escaped
    metric_better: bool  # the full model's metric predicts at least as well, per chain
    portrait: str
    full: str


def initialisation_verdict(
    chains: dict[str, tuple[float, float]],
    init_local: dict[tuple[str, str], float],
    gd: dict,
    adam: dict,
    pred: dict[str, np.ndarray],
    pred_metric: dict[str, np.ndarray],
) -> InitialisationVerdict:
    """The initialisation chapter's verdict: ``chains`` names (p, q) of the chain and
    its mirror, ``init_local[(init, chain)]`` the share of an initialisation the reduced
    flow sends to a local minimum ('N(0, 0.02²)' and 'init 0.2'), ``gd`` and ``adam``
    the :class:`~markovlib.dynamics.ManifoldRuns` per chain, ``pred`` and
    ``pred_metric`` the basins predicted by the follow-up's flow and by the flow in the
    full model's metric."""
    below = next(c for c, (p, q) in chains.items() if p + q < 1)
    above = next(c for c in chains if c != below)
    rows = {
        c: dict(
            paper=gd[c].agreement(pred[c]),
            metric=gd[c].agreement(pred_metric[c]),
            adam=adam[c].agreement(pred[c]),
            undecided=int(np.sum(adam[c].found == "undecided")),
        )
        for c in chains
    }
    portrait = _basin_shares_text(chains, init_local, above, below)
    local_below = pred[below] == "local"
    escaped_below = bool(np.all(gd[below].found[local_below] == "global"))
    metric_better = all(r["metric"] >= r["paper"] for r in rows.values())
    agreement = float(np.mean([gd[c].found == pred[c] for c in chains]))
    n_runs = sum(len(pred[c]) for c in chains)
    full = _flow_agreement_text(agreement, n_runs, rows, metric_better)
    if escaped_below and np.any(local_below):
        full += _kink_escape_text(gd[below], local_below)
    full += (
        f"{adam[above].how}: "
        + ", ".join(
            f"{r['adam']:.0%} as predicted ({r['undecided']} undecided)"
            for r in rows.values()
        )
        + ", this chain then the mirror."
    )
    return InitialisationVerdict(
        rows, agreement, escaped_below, metric_better, portrait, full
    )


def _basin_shares_text(chains, init_local: dict, above: str, below: str) -> str:
    """The share of each initialisation that the reduced flow sends to a local minimum,
    on each side of p + q = 1."""
    std = {c: init_local["N(0, 0.02²)", c] for c in chains}
    wide = {c: init_local["init 0.2", c] for c in chains}
    portrait = (
        f"For the chain with p + q > 1 the reduced flow sends {std[above]:.0%} of the "
        f"standard initialisations and {wide[above]:.0%} of those at 0.2 to a local "
        f"minimum; for the one with p + q < 1, {std[below]:.0%} and {wide[below]:.0%}. "
    )
    if std[above] == 1 and std[below] == 0:
        portrait += (
            "The standard initialisation sits next to the origin, where the level sets "
            "hug e = 0: there the sign of p + q - 1 alone decides the basin."
        )
    return portrait


def _flow_agreement_text(
    agreement: float, n_runs: int, rows: dict, metric_better: bool
) -> str:
    """How often gradient descent on the full model ends where the reduced flow
    predicts, and the full model's metric where it predicts better."""
    text = (
        "Gradient descent on the full model ends where the follow-up's reduced flow "
        f"predicts in {agreement:.0%} of the {n_runs} runs. "
    )
    if agreement < 1 and metric_better:
        text += (
            "The full model's own metric moves the boundary (the flow in that metric "
            "predicts "
            + ", ".join(f"{r['metric']:.0%}" for r in rows.values())
            + " of the runs, this chain then the mirror). "
        )
    return text


def _kink_escape_text(runs, local: np.ndarray) -> str:
    """The p + q < 1 runs started in the reduced model's local basin: how many stay,
    and the embeddings' common mode at the end (which direction carries them off the
    manifold is not measured)."""
    common = float(np.median(runs.final["common"][local]))
    return (
        f"For p + q < 1 none of the {int(np.sum(local))} runs started in the "
        "reduced model's local basin stays there: the full model leaves the manifold "
        "(which direction carries it off is not measured here); at the end the "
        "embeddings' common "
        f"mode $\\|E_0 + E_1\\|/2$ is {common:.2f} (median; 0 on the manifold). "
    )


def initialisation_trap_text(
    scale: str, converges: bool, pred_local, ended_local: dict, per_run: float
) -> tuple[str, str]:
    """The initialisation chapter's sentences on the trap runs of bad_local_minima
    (trained at ``scale``): the reduced flow's prediction ``pred_local`` (per theory
    run), the runs that ended nearer H(π) (``ended_local``, per model) and the per-run
    agreement; returns (the paragraph, the headline)."""
    theory_local, wide = ended_local["theory"].mean(), ended_local["gpt2, init 0.2"]
    text = (
        f"Measured at the `{scale}` scale: the reduced flow puts "
        f"{np.mean(pred_local):.0%} of the theory model's standard initialisations in "
        f"the local basin; {theory_local:.0%} of those runs ended nearer $H(\\pi)$ "
        f"than $H_{{\\rm rate}}$ (per-run agreement {per_run:.0%}), and "
        f"{wide.mean():.0%} of the GPT-2 "
        "runs initialised at 0.2 (a model with layer norm, outside the reduction). "
    )
    if not converges:
        text += (
            'These runs are far too short to say anything; re-run with `scale="cpu"` '
            'or `"paper"`.'
        )
    headline = (
        f"From the standard initialisation the reduced flow sends "
        f"{np.mean(pred_local):.0%} of the theory model's runs on this chain to a "
        f"local minimum; in {{doc}}`bad_local_minima` {theory_local:.0%} of them ended "
        f"nearer $H(\\pi)$ than $H_{{\\rm rate}}$ (`{scale}` scale)."
    )
    return text, headline
