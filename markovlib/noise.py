"""The sampling noise of a test loss, and survival curves that do not mistake it for
an escape (issue 70).

A run's test loss is a mean over sampled tokens: a run sitting at θ_π reads H(π) only
up to that noise. Near p + q = 1 the noise can exceed 10 % of the gap H(π) − H_rate,
and among many evaluations the first to dip below the band counts as leaving H(π)
(:func:`markovlib.analysis.survival`). Here a run leaves H(π) only when its test loss is
below H(π) by the larger of :data:`~markovlib.analysis.AT_UNIGRAM_BELOW` of the gap and
the noise band: the one-sided normal quantile at :data:`LEAVE_BY_NOISE` / (its number of
evaluations) of the test loss of θ_π, so a run at θ_π is counted as leaving by noise
alone with probability at most 1 % (Bonferroni over its evaluations). Where that band
reaches :data:`~markovlib.analysis.ESCAPED_ABOVE` of the gap (near p + q = 1, or few
test tokens), a test loss cannot tell θ_π from the chain: the band stops there and
:attr:`BandedSurvival.resolved` is False; the learnt kernels still can.

Outside :data:`markovlib.runs.derived.MATHS` on purpose: no derived value reads it,
and :func:`markovlib.analysis.survival` is not given the band as a parameter because
a change to ``analysis.py`` gives every shipped derived value a new key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .analysis import (
    AT_UNIGRAM_BELOW,
    ESCAPED_ABOVE,
    Survival,
    gap,
    loss_share,
    survival,
)
from .chains import MarkovChain

__all__ = [
    "LEAVE_BY_NOISE",
    "unigram_loss_sd",
    "noise_share",
    "eval_tokens",
    "leave_share",
    "BandedSurvival",
    "banded_survival",
]

LEAVE_BY_NOISE = 0.01  # a run at θ_π counted as leaving by noise alone: at most 1 %


def unigram_loss_sd(chain) -> float | None:
    """The asymptotic standard deviation per token of θ_π's loss −log π(x) along a
    stationary path of a first-order chain: σ² = 2⟨ḡ, Z ḡ⟩_π − ⟨ḡ, ḡ⟩_π, ḡ = g − π·g,
    Z = (I − P + 1πᵀ)⁻¹ the fundamental matrix (Kemeny and Snell); None for a
    higher-order chain."""
    if not isinstance(chain, MarkovChain):
        return None
    pi = chain.stationary()
    g = -np.log(np.clip(pi, 1e-300, None))
    g = g - pi @ g
    Z = np.linalg.inv(np.eye(chain.k) - chain.P + np.outer(np.ones(chain.k), pi))
    var = 2 * pi @ (g * (Z @ g)) - pi @ (g * g)
    return float(np.sqrt(max(var, 0.0)))


def noise_share(chain, tokens: int, evaluations: int) -> float:
    """The noise band of a run at θ_π as a share of the gap: z σ / √tokens / gap, σ of
    :func:`unigram_loss_sd`, z the normal quantile at 1 − LEAVE_BY_NOISE / evaluations
    (0 where σ or the gap is unknown)."""
    from scipy.stats import norm

    sd, g = unigram_loss_sd(chain), gap(chain)
    if sd is None or not g > 1e-12 or tokens < 1:
        return 0.0
    z = float(norm.ppf(1 - LEAVE_BY_NOISE / max(int(evaluations), 1)))
    return z * sd / np.sqrt(tokens) / g


def eval_tokens(train_config) -> int:
    """Tokens of one test-loss evaluation: eval_batches × batch × length."""
    t = train_config
    return int(t.eval_batches * t.batch_size * t.seq_len)


def leave_share(chain, tokens: int, evaluations: int) -> float:
    """The share of the gap at which a run leaves H(π): the larger of 10 % and
    :func:`noise_share`, at most :data:`~markovlib.analysis.ESCAPED_ABOVE`."""
    band = noise_share(chain, tokens, evaluations)
    return min(max(AT_UNIGRAM_BELOW, band), ESCAPED_ABOVE)


@dataclass(frozen=True)
class BandedSurvival(Survival):
    """:class:`~markovlib.analysis.Survival` with the share of the gap at which a run
    leaves H(π) (:func:`leave_share`) and the noise band itself."""

    leave_at: float = AT_UNIGRAM_BELOW
    noise: float = 0.0  # :func:`noise_share`

    @property
    def resolved(self) -> bool:
        """Whether the test loss can tell θ_π from the chain (noise below 0.9)."""
        return self.noise < ESCAPED_ABOVE


def banded_survival(
    chain, histories: Sequence[pd.DataFrame], tokens: int
) -> BandedSurvival:
    """:func:`~markovlib.analysis.survival` of runs evaluated on ``tokens`` sampled
    tokens each (:func:`eval_tokens`), a run at H(π) until its share of the gap first
    reaches the larger of 10 % and :func:`noise_share`."""
    plain = survival(chain, histories)  # the steps and the escapes
    n = len(plain.steps)
    leave_at, noise = leave_share(chain, tokens, n), noise_share(chain, tokens, n)
    shares = np.stack(
        [
            loss_share(chain, h.dropna(subset=["test_loss"])["test_loss"].to_numpy())[
                :n
            ]
            for h in histories
        ]
    )
    left = np.maximum.accumulate(shares >= leave_at, axis=1)
    return BandedSurvival(
        plain.steps, 1.0 - left.mean(0), plain.escapes, leave_at, noise
    )
