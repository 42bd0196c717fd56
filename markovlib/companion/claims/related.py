"""The claims of the related papers (Local to Global, Ildiz et al.), in page order."""

from __future__ import annotations

from .claim import Claim

__all__ = ["CLAIMS"]

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "init_energy",
        "initialisation",
        "Local to Global",
        "Gradient flow on (e, w) conserves E = e² − w² − sign(w) log|w|",
        "the reduced single-layer model",
        "largest |ΔE| over all integrated trajectories",
        "fig-init-portrait",
        exact=True,
    ),
    Claim(
        "init_basins",
        "initialisation",
        "Local to Global",
        "The energy level through the saddle separates the basins",
        "grid of starts (e, w), both sides of p + q = 1",
        "fraction of starts whose flow ends in the predicted basin",
        "fig-init-portrait",
        exact=True,
    ),
    Claim(
        "init_full_model",
        "initialisation",
        "this book",
        "The full model started on the manifold ends where the reduced flow predicts",
        "tied theory model, gradient descent on the exact loss",
        "fraction of full-model runs ending in the predicted basin",
        "fig-init-full-model",
        exact=True,
    ),
    Claim(
        "ccmc_equivalence",
        "ccmc",
        "Ildiz et al.",
        "One attention layer is a context-conditioned Markov chain",
        "random prompts",
        "largest |attention − CCMC| probability",
        "thm-ccmc",
        exact=True,
    ),
    Claim(
        "ccmc_rate",
        "ccmc",
        "this book",
        "The maximum-likelihood W is learnt at the parametric rate n^(−1/2) (Ildiz "
        "et al. state sample-complexity guarantees; the rate is this book's check)",
        "maximum likelihood",
        "log-log slope of the estimation error",
        "fig-ccmc-estimation",
    ),
    Claim(
        "ccmc_collapse",
        "ccmc",
        "Ildiz et al.",
        "Generation collapses onto a few tokens",
        "one trajectory from a balanced prompt",
        "top-token share of the last window",
        "fig-ccmc-collapse",
    ),
)
