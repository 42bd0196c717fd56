"""markovlib.analysis against hand-computed small cases and independent computations."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from markovlib import TransformerConfig, analysis, binary, symmetric, theory
from markovlib.analysis import (
    FAILS,
    HOLDS,
    PARTLY,
    TOO_FEW,
    claim_outcome,
    share_interval,
)
from markovlib.model import Transformer
from markovlib.train import TrainResult

CHAIN = binary(0.5, 0.8)  # H_rate 0.6190, H(pi) 0.6663
STEPS = [0, 10, 20, 30, 40]


class FakeRun:
    """A run with a given test-loss history; escape_step and final_test_loss are
    TrainResult's own."""

    escape_step = TrainResult.escape_step
    final_test_loss = TrainResult.final_test_loss
    test_history = TrainResult.test_history

    def __init__(self, losses, chain=CHAIN, seed=0):
        self.chain, self.seed = chain, seed
        self.history = pd.DataFrame(
            {"step": STEPS, "train_loss": losses, "test_loss": losses}
        )
        self.train_config = SimpleNamespace(eval_every=10, steps=STEPS[-1])


RATE, UNI = CHAIN.entropy_rate(), CHAIN.unigram_entropy()
# escapes (tol 0.005, i.e. loss <= RATE + 0.005 = 0.6240) at 20, 40, never, never
FOUR = [
    FakeRun([0.69, 0.666, 0.62, 0.619, 0.619]),
    FakeRun([0.69, 0.666, 0.666, 0.63, 0.621]),
    FakeRun([0.69, 0.666, 0.666, 0.666, 0.666]),
    FakeRun(
        [0.69, 0.66, 0.66, 0.65, 0.645]
    ),  # 0.645 is nearer H(pi) 0.6663 than 0.6190
]


def test_escape_stats_hand_case():
    st = analysis.escape_stats(FOUR, 0.005, at_step=30)
    assert st.escapes == (20, 40, None, None)
    assert st.n == 4 and st.n_escaped == 2 and not st.all_escaped
    assert st.escaped.tolist() == [20, 40]
    assert st.at_step == 30
    assert st.trap_fraction == 0.75  # only the first run had escaped by step 30
    assert st.trap_fraction_end == 0.5
    assert st.median_escape is None  # 2 of 4 is not more than half
    assert st.median_text == analysis.NEVER
    assert st.near_unigram == 0.5
    assert st.final_mean == pytest.approx((0.619 + 0.621 + 0.666 + 0.645) / 4)
    assert st.curve["plateau"].tolist() == [1.0, 1.0, 0.75, 0.75, 0.5]
    # at_step defaults to the last evaluation; between evaluations it reads the last one
    # before
    assert analysis.escape_stats(FOUR).trap_fraction == 0.5
    assert analysis.escape_stats(FOUR, at_step=39).trap_fraction == 0.75
    # a looser tolerance: the second run (0.63 <= 0.6390) escapes at 30, the fourth at
    # 40 (0.645 <= 0.6490)
    loose = analysis.escape_stats(FOUR, 0.03)
    assert loose.escapes == (20, 30, None, 40)
    assert loose.median_escape == 30.0 and loose.median_text == "30"


def test_escape_stats_median_and_errors():
    five = [*FOUR, FakeRun([0.69, 0.62, 0.62, 0.62, 0.62])]  # escapes at 10
    st = analysis.escape_stats(five)
    assert st.median_escape == 20.0  # median of 10, 20, 40
    assert st.all_escaped is False and st.n_escaped == 3
    everyone = analysis.escape_stats([FOUR[0], five[-1]])
    assert everyone.all_escaped and everyone.trap_fraction_end == 0.0
    with pytest.raises(ValueError, match="at least one"):
        analysis.escape_stats([])
    with pytest.raises(ValueError, match="tol"):
        analysis.escape_stats(FOUR, 0.0)
    with pytest.raises(ValueError, match="at_step"):
        analysis.escape_stats(FOUR, at_step=-1)


def test_escape_table_rounds_as_printed():
    five = [*FOUR, FakeRun([0.69, 0.62, 0.62, 0.62, 0.62])]
    stats = {
        "a": analysis.escape_stats(FOUR, at_step=30),
        "b": analysis.escape_stats(five, at_step=30),
    }
    table = analysis.escape_table(stats)
    assert list(table.index) == ["a", "b"]
    assert table["runs"].tolist() == [4, 5] and table["escaped"].tolist() == [2, 3]
    assert table["on plateau at step 30"].tolist() == ["0.750", "0.600"]  # 2 of 5
    assert table["median escape step"].tolist() == ["–", "20"]
    assert table["mean final loss"].tolist() == ["0.6378", "0.6342"]
    assert table["ended nearer H(π)"].tolist() == ["0.500", "0.400"]
    mixed = analysis.escape_table({**stats, "c": analysis.escape_stats(FOUR)})
    assert mixed["on plateau"].tolist()[::2] == ["0.750 (step 30)", "0.500 (step 40)"]


def test_group_by_keeps_first_seen_order():
    words = ["bb", "a", "cc", "d", "eee"]
    assert analysis.group_by(words, len) == {2: ["bb", "cc"], 1: ["a", "d"], 3: ["eee"]}
    assert analysis.group_by([], len) == {}


def test_grid_means_rows_q_columns_p():
    specs, results = [], []
    # value = 10 p + q + seed / 100; two seeds per cell, listed seed-major and out of
    # order
    for s in (1, 0):
        for p in (0.2, 0.8):
            for q in (0.3, 0.6):
                specs.append(SimpleNamespace(chain={"p": p, "q": q}, seed=s))
                results.append(SimpleNamespace(v=10 * p + q + s / 100))
    means = analysis.grid_means(specs, results, lambda r: r.v, [0.2, 0.8], [0.3, 0.6])
    expected = np.array([[2.3, 8.3], [2.6, 8.6]]) + 0.005  # rows q, columns p
    np.testing.assert_allclose(means, expected)
    with pytest.raises(ValueError, match="p = 0.5"):
        analysis.grid_means(specs, results, lambda r: r.v, [0.5], [0.3])
    with pytest.raises(ValueError, match="same length"):
        analysis.grid_means(specs[:1], results, lambda r: r.v, [0.2], [0.3])


def test_curvature_c_by_hand_and_by_sampling():
    assert analysis.curvature_c(binary(0.5, 0.8)) == pytest.approx(0.4 * 0.3 / 1.69)
    assert analysis.curvature_c(binary(0.2, 0.3)) == pytest.approx(-0.12)
    assert analysis.curvature_c(binary(0.3, 0.7)) == pytest.approx(0.0, abs=1e-15)
    # c = E[x_n (pi_1 - x_{n+1})] under the stationary chain
    chain = binary(0.6, 0.9)
    x = chain.sample(256, 512, seed=3).double()
    pi1 = chain.stationary()[1]
    sampled = float((x[:, :-1] * (pi1 - x[:, 1:])).mean())
    assert sampled == pytest.approx(analysis.curvature_c(chain), abs=3e-3)
    with pytest.raises(ValueError, match="binary"):
        analysis.curvature_c(symmetric(3, 0.5))


@pytest.mark.parametrize("p, q", [(0.5, 0.8), (0.2, 0.3), (0.9, 0.6)])
def test_curvature_c_is_the_hessian_scale(p, q):
    """Thm 2 and 3: untied the smallest eigenvalue is -|c|; tied it is
    min(2c, pi0 pi1)."""
    chain = binary(p, q)
    c = analysis.curvature_c(chain)
    pi = chain.stationary()
    assert theory.unigram_curvature(chain, tied=False) == pytest.approx(-abs(c))
    assert theory.unigram_curvature(chain, tied=True) == pytest.approx(
        min(2 * c, pi[0] * pi[1])
    )


def _theory_run(model, chain, seq_len):
    return SimpleNamespace(
        model=model, chain=chain, train_config=SimpleNamespace(seq_len=seq_len)
    )


def test_paired_excess_of_the_two_stationary_points():
    cfg = TransformerConfig.theory(max_len=64)
    bayes = _theory_run(theory.global_minimum(CHAIN, cfg).double(), CHAIN, 63)
    unigram = _theory_run(theory.unigram_point(CHAIN, cfg).double(), CHAIN, 63)
    at_min = analysis.paired_excess(bayes, n_sequences=64, seed=5)
    assert at_min.length == 64  # the training length + 1
    assert abs(at_min.excess) < 1e-9  # it predicts the kernel: no excess on any path
    assert at_min.mean == pytest.approx(RATE, abs=4 * at_min.stderr + 1e-3)
    assert at_min.excess_stderr < 1e-9 < at_min.stderr  # pairing removes the path noise
    at_pi = analysis.paired_excess(unigram, n_sequences=256, seed=5)
    # theta_pi predicts pi: its excess is I(x_n; x_{n+1}) = H(pi) - H_rate, in
    # expectation
    assert at_pi.excess == pytest.approx(UNI - RATE, abs=4 * at_pi.excess_stderr)
    group = analysis.group_excess([bayes, unigram], n_sequences=64, seed=5)
    assert group.each[0] == at_min.excess  # same seed, same paths
    assert group.max_excess == group.each[1] > 0.02
    with pytest.raises(ValueError, match="at least one"):
        analysis.group_excess([], n_sequences=64, seed=5)


def test_group_excess_means_by_hand():
    g = analysis.GroupExcess(losses=(1.0, 3.0), each=(0.1, 0.3), stderrs=(0.03, 0.04))
    assert g.loss == 2.0 and g.excess == pytest.approx(0.2) and g.max_excess == 0.3
    assert g.excess_se == pytest.approx(math.sqrt((0.03**2 + 0.04**2) / 2 / 2))


def test_perturbation_without_noise_stays_at_theta_pi():
    pert = analysis.perturb_theta_pi(
        CHAIN, "theory", tied=True, noise=0.0, n=2, steps=3, seed=0, length=4
    )
    assert pert.losses.shape == (2, 4)
    np.testing.assert_allclose(pert.losses, UNI, atol=1e-12)  # a stationary point
    assert pert.returned.all() and not pert.left.any()
    top = theory.unigram_hessian(
        CHAIN, TransformerConfig.theory(tied=True, max_len=4), length=4
    ).eigenvalues[-1]
    assert pert.lr == pytest.approx(min(0.5, 1 / top))
    with pytest.raises(ValueError, match="preset"):
        analysis.perturb_theta_pi(
            CHAIN, "bert", tied=True, noise=0.1, n=1, steps=1, seed=0
        )


def test_perturbation_returns_when_tied_and_leaves_when_untied():
    kw = dict(noise=0.05, n=2, steps=100, seed=0, length=4)
    tied = analysis.perturb_theta_pi(CHAIN, "theory", tied=True, **kw)
    assert tied.returned.all() and not tied.left.any()  # Thm 2: a local minimum
    untied = analysis.perturb_theta_pi(CHAIN, "theory", tied=False, **kw)
    assert untied.left.all()  # Thm 3: a saddle
    # the noise draws differ and are seeded
    assert not np.array_equal(tied.losses[0], tied.losses[1])
    again = analysis.perturb_theta_pi(CHAIN, "theory", tied=True, **{**kw, "steps": 3})
    np.testing.assert_array_equal(again.losses, tied.losses[:, :4])


def test_curvature_grid_agrees_with_the_closed_form():
    grid = analysis.curvature_grid([0.2, 0.5, 0.8], length=3)
    assert grid.autodiff.shape == (3, 3) and grid.max_error < 1e-6
    assert grid.sign_agrees
    # p = 0.5 (column 1), q = 0.8 (row 2): the README's 0.1420 (min(2c, pi0 pi1))
    assert grid.autodiff[2, 1] == pytest.approx(0.1420, abs=1e-4)
    np.testing.assert_allclose(
        grid.switching, [[0.4, 0.7, 1.0], [0.7, 1.0, 1.3], [1.0, 1.3, 1.6]]
    )
    bad = analysis.CurvatureGrid(grid.values, -grid.autodiff, grid.closed)
    assert not bad.sign_agrees


def test_hessian_blocks_by_hand():
    m = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
    labels = ["a[0]", "b[0]", "c[0]"]
    blocks = analysis.hessian_blocks(m, labels, ("a", "b"))
    np.testing.assert_allclose(blocks.eigenvalues, [0.0, 1.0, 3.0], atol=1e-12)
    assert blocks.n_nonzero == 2 and blocks.outside == 0.0
    assert blocks.in_block.tolist() == [True, True, False]
    m[0, 2] = m[2, 0] = 1e-3
    assert analysis.hessian_blocks(m, labels, ("a", "b")).outside == 1e-3
    assert analysis.hessian_blocks(m, labels, ("a", "b", "c")).outside == 0.0
    with pytest.raises(ValueError, match="3x3"):
        analysis.hessian_blocks(m[:2], labels, ("a",))


def test_loss_along_is_quadratic_near_theta_pi():
    H = theory.unigram_hessian(
        CHAIN, TransformerConfig.theory(tied=False, max_len=4), length=4
    )
    v = H.eigenvector(0)
    ts = [0.0, 1e-2, -1e-2]
    losses = analysis.loss_along(H, CHAIN, v, ts, 4)
    assert losses[0] == pytest.approx(UNI, abs=1e-12)
    # second order: L(t) = H(pi) + lambda t^2 / 2 with lambda the eigenvalue of
    # v (here -c)
    curv = (losses[1] + losses[2] - 2 * losses[0]) / 1e-4
    assert curv == pytest.approx(-analysis.curvature_c(CHAIN), rel=1e-3)
    assert analysis.ea_cosine(H, v) == pytest.approx(-1.0, abs=1e-9)  # e = -a


def test_ea_cosine_by_hand():
    h = SimpleNamespace(blocks={"e": slice(0, 2), "a": slice(2, 4), "b": slice(4, 5)})
    assert analysis.ea_cosine(h, np.array([1.0, 0, -1, 0, 7])) == pytest.approx(-1)
    assert analysis.ea_cosine(h, np.array([1.0, 0, 0, 1, 7])) == pytest.approx(0)
    assert analysis.ea_cosine(h, np.array([1.0, 1, 2, 2, 0])) == pytest.approx(1)


def test_closest_run_picks_the_nearest_final_loss():
    groups = {"x": [FOUR[0], FOUR[1]], "y": [FOUR[2], FOUR[3]]}
    assert analysis.closest_run(groups, lambda r: UNI) == ("y", FOUR[2])
    assert analysis.closest_run(groups, lambda r: RATE) == ("x", FOUR[0])
    assert analysis.closest_run(groups, lambda r: 0.64)[1] is FOUR[3]
    with pytest.raises(ValueError, match="at least one"):
        analysis.closest_run({"x": []}, lambda r: 0.0)


def test_attention_maps_and_lag_mass():
    torch.manual_seed(0)
    x = binary(0.5, 0.5).sample(1, 6, seed=0)
    runs = {
        w: SimpleNamespace(
            model=Transformer(TransformerConfig.gpt2(window=w, max_len=8)),
            device=torch.device("cpu"),
        )
        for w in (0, 1, None)
    }
    np.testing.assert_allclose(analysis.attention_map(runs[0], x), np.eye(6))
    one = analysis.attention_map(runs[1], x)
    assert np.allclose(np.triu(one, 1), 0) and np.allclose(np.tril(one, -2), 0)
    np.testing.assert_allclose(one.sum(1), 1, rtol=1e-6)
    full = analysis.attention_map(runs[None], x)
    np.testing.assert_allclose(full.sum(1), 1, rtol=1e-6)
    w = np.array(
        [[1, 0, 0, 0], [0.25, 0.75, 0, 0], [0.1, 0.5, 0.4, 0], [0.1, 0.2, 0.3, 0.4]]
    )
    assert analysis.lag_attention(w, 1) == pytest.approx((0.25 + 0.5 + 0.3) / 3)
    assert analysis.lag_attention(w, 0) == pytest.approx((1 + 0.75 + 0.4 + 0.4) / 4)
    assert analysis.lag_attention(w, 3) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="lag"):
        analysis.lag_attention(w, 4)


# --- appended for the chapters global_minimum and multi_state -------------------------


def test_unigram_fraction_tells_theta_pi_from_the_global_minimum():
    chain = binary(0.6, 0.7)
    cfg = TransformerConfig.theory(d_model=8, max_len=64)

    def run(model):  # what paired_excess reads of a TrainResult
        return SimpleNamespace(
            model=model.double(),
            chain=chain,
            train_config=SimpleNamespace(seq_len=64),
        )

    at_pi = run(theory.unigram_point(chain, cfg))  # predicts π: excess = I(x_n; x_n+1)
    at_min = run(theory.global_minimum(chain, cfg, route="feedforward"))  # excess 0
    excess = analysis.paired_excess(at_pi, n_sequences=256, seed=0).excess
    assert excess == pytest.approx(chain.mutual_information(), rel=0.2)
    assert analysis.unigram_fraction([at_pi], n_sequences=256, seed=0) == 1.0
    assert analysis.unigram_fraction([at_min], n_sequences=256, seed=0) == 0.0
    mixed = analysis.unigram_fraction(
        [at_pi, at_min, at_min, at_pi], n_sequences=256, seed=0
    )
    assert mixed == 0.5
    with pytest.raises(ValueError, match="at least one"):
        analysis.unigram_fraction([], n_sequences=256, seed=0)
    with pytest.raises(ValueError, match="share"):
        analysis.unigram_fraction([at_pi], n_sequences=256, seed=0, share=1.5)


# --- the verdict rule: k of n runs, the 95 % interval of their share ----------------
def _binomial_tail(k, n, share, upper):
    """P(X >= k) (upper) or P(X <= k), X ~ Binomial(n, share), summed term by term."""
    terms = range(k, n + 1) if upper else range(0, k + 1)
    return sum(math.comb(n, j) * share**j * (1 - share) ** (n - j) for j in terms)


@pytest.mark.parametrize("k, n", [(1, 3), (11, 32), (36, 80), (5, 5), (0, 7), (7, 8)])
def test_share_interval_edges_put_k_at_the_binomial_tails(k, n):
    low, high = share_interval(k, n)
    if k > 0:
        assert _binomial_tail(k, n, low, upper=True) == pytest.approx(0.025, abs=1e-9)
    else:
        assert low == 0.0
    if k < n:
        assert _binomial_tail(k, n, high, upper=False) == pytest.approx(0.025, abs=1e-9)
    else:
        assert high == 1.0
    assert low < k / n < high or k in (0, n)


@pytest.mark.parametrize(
    "k, n, outcome",
    [
        (32, 32, HOLDS),  # interval (0.89, 1]
        (8, 8, HOLDS),  # (0.63, 1]
        (3, 3, TOO_FEW),  # (0.29, 1]: no count of three runs can decide
        (0, 5, TOO_FEW),  # [0, 0.52): nor of five (5 of 5: (0.48, 1])
        (6, 6, HOLDS),  # (0.54, 1]: six can
        (3, 6, PARTLY),
        (11, 32, PARTLY),  # Fig 1's 34 %: (0.19, 0.53)
        (36, 80, PARTLY),  # Fig 4's 45 %: (0.34, 0.57)
        (2, 32, FAILS),  # (0.008, 0.21)
        (0, 8, FAILS),  # [0, 0.37)
    ],
)
def test_claim_outcome_has_four_values_from_the_interval(k, n, outcome):
    assert claim_outcome(k, n) == outcome


def test_share_interval_refuses_impossible_counts():
    for k, n in [(4, 3), (-1, 3), (0, 0)]:
        with pytest.raises(ValueError, match="0 <= k <= n"):
            share_interval(k, n)


def test_a_descent_is_judged_relative_to_the_gap_not_in_nats():
    near = binary(0.5, 0.52)  # p + q near 1: the gap is under 1e-3 nats
    g, top = analysis.gap(near), near.unigram_entropy()
    assert 0 < g < 1e-3
    ends = np.array([top, top - 0.05 * g, top + 0.2 * g, top - 0.6 * g, top - g])
    pert = analysis.Perturbation(near, "theory", True, 0.1, ends[:, None])
    # back at H(π) within a tenth of the gap either side; a descent to H_rate is not
    np.testing.assert_array_equal(pert.returned, [1, 1, 0, 0, 0])
    np.testing.assert_array_equal(pert.left, [0, 0, 0, 1, 1])
