"""The one rule relative to the gap: shares of H(π) − H_rate against independent
computations, classes at the named thresholds, survival along a history."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from markovlib import analysis as A
from markovlib.chains import binary, random_kth_order, symmetric


def _kernel(p, q):
    return np.array([[1 - p, p], [q, 1 - q]])


@pytest.mark.parametrize("p,q", [(0.5, 0.8), (0.2, 0.3), (0.5, 0.6), (0.9, 0.9)])
def test_kernel_share_is_one_at_the_chain_and_zero_at_the_marginal(p, q):
    chain = binary(p, q)
    pi = chain.stationary()
    assert A.kernel_share(chain, _kernel(p, q)) == pytest.approx(1, abs=1e-12)
    assert A.kernel_share(chain, np.stack([pi, pi])) == pytest.approx(0, abs=1e-12)
    # the kernel loss is the cross entropy written out by hand
    K = _kernel(0.4, 0.4)
    by_hand = -sum(
        pi[i] * chain.P[i, j] * np.log(K[i, j]) for i in range(2) for j in range(2)
    )
    assert A.kernel_loss(chain, K) == pytest.approx(by_hand, rel=1e-12)


def test_the_gap_is_the_mutual_information_and_zero_on_the_line():
    chain = binary(0.5, 0.8)
    assert A.gap(chain) == pytest.approx(0.6663 - 0.6190, abs=2e-4)
    assert np.isnan(A.kernel_share(binary(0.4, 0.6), _kernel(0.4, 0.6)))
    assert A.classify(float("nan")) is None


def test_classes_at_the_thresholds():
    assert A.classify(0.0) == A.classify(0.099) == "at H(π)"
    assert A.classify(0.1) == A.classify(0.9) == "in between"
    assert A.classify(0.901) == A.classify(1.02) == "escaped"
    assert A.count_classes([0.0, 0.5, 1.0, 1.0, float("nan")]) == {
        "at H(π)": 1,
        "in between": 1,
        "escaped": 2,
    }


def test_a_partial_k_state_solution_is_in_between():
    """A kernel half-way from uniform rows to the chain covers a share strictly
    inside (0.1, 0.9): not 'at the unigram loss'."""
    chain = symmetric(5, 0.9)
    half = 0.5 * chain.P + 0.5 * np.full((5, 5), 0.2)
    s = A.kernel_share(chain, half)
    assert 0.1 < s < 0.9 and A.classify(s) == "in between"


def test_loss_share_and_the_higher_order_tail():
    chain = random_kth_order(2, 2, seed=0)
    h_pi, h_rate = chain.unigram_entropy(), chain.entropy_rate()
    steps = np.arange(0, 101, 10)
    losses = np.linspace(h_pi, h_rate, len(steps))
    history = pd.DataFrame({"step": steps, "test_loss": losses})
    assert A.loss_share(chain, h_rate) == pytest.approx(1)
    assert A.tail_loss(history, 0.05) == pytest.approx(losses[-1])
    assert A.tail_loss(history, 0.25) == pytest.approx(losses[-3:].mean())
    assert A.final_share(chain, history=history) == pytest.approx(1)


def test_survival_counts_runs_until_they_leave_h_pi():
    chain = binary(0.5, 0.8)
    h_pi, h_rate = chain.unigram_entropy(), chain.entropy_rate()
    steps = np.arange(0, 50, 10)
    stuck = pd.DataFrame({"step": steps, "test_loss": [h_pi] * 5})
    late = pd.DataFrame(
        {"step": steps, "test_loss": [h_pi, h_pi, h_pi, h_rate, h_rate]}
    )
    early = pd.DataFrame({"step": steps, "test_loss": [h_pi] + [h_rate] * 4})
    s = A.survival(chain, [stuck, late, early])
    assert s.escapes == (None, 30, 10)
    np.testing.assert_allclose(s.at_unigram, [1, 2 / 3, 2 / 3, 1 / 3, 1 / 3])
    assert s.at(25) == pytest.approx(2 / 3) and s.median_escape == 20


def test_the_optimiser_not_the_start_decides_on_the_exact_loss():
    """On (0.5, 0.8), tied GPT-2, exact loss: gradient descent stays at θ_π from both
    starts; AdamW leaves it from θ_π + noise (no sampling noise anywhere)."""
    import torch

    torch.set_num_threads(1)
    c = A.optimizer_crossover(binary(0.5, 0.8), "gpt2", n=1, steps=200, length=6)
    assert set(c.losses) == {
        (o, s) for o in ("exact GD", "AdamW") for s in A.CROSSOVER_STARTS
    }
    assert c.at_unigram(("exact GD", "θ_π + noise")) == 1
    assert c.at_unigram(("exact GD", "standard init")) == 1
    assert c.shares(("AdamW", "θ_π + noise"))[0] > A.ESCAPED_ABOVE
    assert c.losses["AdamW", "θ_π + noise"].shape == (1, 201)
    with pytest.raises(ValueError, match="preset"):
        A.optimizer_crossover(binary(0.5, 0.8), "bert")
