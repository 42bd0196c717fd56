"""markovlib.dynamics: the canonical low-rank reduction (e, w, b) of the single-layer model and its gradient flow."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from markovlib.chains import binary
from markovlib.dynamics import (
    classify,
    energy,
    flow,
    flow_many,
    global_minimum_curve,
    lowrank_model,
    optimal_bias,
    predicted_basin,
    reduced_gradient,
    reduced_loss,
    saddle_energy,
    saddle_w,
)
from markovlib.model import TransformerConfig
from markovlib.theory import expected_loss, gradient_norm

CHAINS = [
    (0.2, 0.3),
    (0.1, 0.6),
    (0.5, 0.8),
    (0.9, 0.4),
]  # two with p + q < 1, two with p + q > 1
LENGTH = 8
CONFIG = TransformerConfig.theory(tied=True, d_model=4, max_len=LENGTH)


def _full_loss(e, w, b, p, q) -> float:
    return float(
        expected_loss(
            lowrank_model(e, w, b, (p, q), CONFIG), binary(p, q), LENGTH
        ).detach()
    )


@pytest.mark.parametrize("p,q", CHAINS)
def test_reduced_loss_equals_full_model_exact_loss(p, q):
    rng = np.random.default_rng(0)
    for e, w in rng.uniform(-2, 2, size=(4, 2)):
        assert (
            abs(float(reduced_loss(e, w, p, q)) - _full_loss(e, w, None, p, q)) < 1e-6
        )
        b = rng.normal()  # off the optimal bias too
        assert (
            abs(float(reduced_loss(e, w, p, q, b)) - _full_loss(e, w, b, p, q)) < 1e-6
        )


def test_lowrank_model_has_attention_off_and_rank_one_weights():
    model = lowrank_model(0.7, -1.3, None, binary(0.2, 0.3), CONFIG)
    attn = model.blocks[0].attn
    assert (
        attn.W_V.weight.abs().sum() == 0
        and attn.W_O.weight.abs().sum() == 0
        and model.wpe.weight.abs().sum() == 0
    )
    for name in ("wte.weight", "blocks.0.ff.W_1.weight", "blocks.0.ff.W_2.weight"):
        assert torch.linalg.matrix_rank(dict(model.named_parameters())[name]) == 1
    assert model.head.weight is model.wte.weight


@pytest.mark.parametrize("p,q", CHAINS)
def test_optimal_bias_is_the_minimiser(p, q):
    for e, w in [(0.0, 0.3), (0.8, -1.2), (1.5, 0.9), (-1.1, 1.7)]:
        numeric = minimize_scalar(
            lambda b: float(reduced_loss(e, w, p, q, b)), bracket=(-3, 3), tol=1e-12
        ).x
        assert float(optimal_bias(e, w, p, q)) == pytest.approx(numeric, abs=1e-5)
    # e = 0 is Thm 2's unigram point: b = log(π_1 / π_0) = log(p / q)
    assert float(optimal_bias(0.0, 0.5, p, q)) == pytest.approx(
        math.log(p / q), abs=1e-12
    )


@pytest.mark.parametrize("p,q", CHAINS)
def test_reduced_gradient_matches_finite_differences_and_full_model(p, q):
    h = 1e-6
    for e, w in [(0.8, -1.2), (1.3, 0.4), (-0.6, -0.3)]:
        ge, gw = reduced_gradient(e, w, p, q)
        fe = (reduced_loss(e + h, w, p, q) - reduced_loss(e - h, w, p, q)) / (2 * h)
        fw = (reduced_loss(e, w + h, p, q) - reduced_loss(e, w - h, p, q)) / (2 * h)
        assert float(ge) == pytest.approx(float(fe), abs=1e-7) and float(
            gw
        ) == pytest.approx(float(fw), abs=1e-7)
        # the full model: the bias gradient vanishes at the optimal b, and the chain rule through the manifold's
        # parameterisation (E_1 = -E_0 = (e/2) α, W_1 = 2|w| s β α^T, W_2 = 2 w s α β^T) gives reduced_gradient
        model = lowrank_model(e, w, None, (p, q), CONFIG)
        ff = model.blocks[0].ff
        gE, g1, g2, gb = torch.autograd.grad(
            expected_loss(model, binary(p, q), LENGTH),
            [model.wte.weight, ff.W_1.weight, ff.W_2.weight, model.head.bias],
        )
        assert float(gb.abs().max()) < 1e-10
        s = 1.0 if e >= 0 else -1.0
        assert float(gE[1, 0] - gE[0, 0]) / 2 == pytest.approx(float(ge), abs=1e-10)
        assert float(2 * s * np.sign(w) * g1[0, 0] + 2 * s * g2[0, 0]) == pytest.approx(
            float(gw), abs=1e-10
        )


@pytest.mark.parametrize("p,q", [(0.2, 0.3), (0.5, 0.8)])
def test_energy_is_conserved_along_the_flow(p, q):
    for e0, w0 in [(1.0, 0.5), (0.5, -1.5), (0.3, -0.4), (1.5, -2.0)]:
        traj = flow(e0, w0, p, q, t_max=300.0)
        assert traj.success and traj.drift < 1e-8  # measured: ~1e-10 (rtol 1e-10)
        assert np.ptp(traj.w) > 1e-3  # the flow really moved
    # and energy is not conserved in a generic direction: a check that the test can fail
    assert abs(float(energy(1.0, 0.5)) - float(energy(1.1, 0.5))) > 0.1


@pytest.mark.parametrize("p,q", [(0.2, 0.3), (0.1, 0.6), (0.5, 0.8), (0.9, 0.4)])
def test_saddle_is_at_minus_one_over_sqrt_two(p, q):
    assert saddle_w(p, q) == pytest.approx(-1 / math.sqrt(2), abs=1e-6)
    assert saddle_energy() == pytest.approx(-(math.log(2) + 1) / 2, abs=1e-12)


@pytest.mark.parametrize("p,q", CHAINS)
def test_minima_and_maxima_on_e_zero_swap_with_p_plus_q(p, q):
    sign = np.sign(p + q - 1)  # + : minima right of the saddle
    chain, h = binary(p, q), 0.05
    for w in (-1.8, -1.0):  # left of -1/√2
        assert np.sign(reduced_loss(h, w, p, q) - reduced_loss(0.0, w, p, q)) == -sign
        assert np.sign(_full_loss(h, w, None, p, q) - chain.unigram_entropy()) == -sign
    for w in (-0.5, 0.0, 0.7, 1.5):  # right of -1/√2
        assert np.sign(reduced_loss(h, w, p, q) - reduced_loss(0.0, w, p, q)) == sign
        assert np.sign(_full_loss(h, w, None, p, q) - chain.unigram_entropy()) == sign
    assert float(reduced_loss(0.0, 0.3, p, q)) == pytest.approx(
        chain.unigram_entropy(), abs=1e-12
    )
    assert (
        float(np.hypot(*reduced_gradient(0.0, 0.3, p, q))) == 0.0
    )  # all of e = 0 is critical


@pytest.mark.parametrize("p,q", CHAINS)
def test_global_minimum_curve_has_entropy_rate_and_zero_gradient(p, q):
    ws = np.linspace(-2.0, 2.0, 41)
    es = global_minimum_curve(p, q, ws)
    ok = ~np.isnan(es)
    side = ws > -1 / math.sqrt(2) if p + q < 1 else ws < -1 / math.sqrt(2)
    assert np.array_equal(ok, side)  # the curve lives on one side of the saddle
    H = binary(p, q).entropy_rate()
    np.testing.assert_allclose(reduced_loss(es[ok], ws[ok], p, q), H, atol=1e-10)
    np.testing.assert_allclose(
        np.hypot(*reduced_gradient(es[ok], ws[ok], p, q)), 0.0, atol=1e-10
    )
    for e, w in list(zip(es[ok], ws[ok]))[::10]:  # and in the full model
        model = lowrank_model(e, w, None, (p, q), CONFIG)
        assert float(
            expected_loss(model, binary(p, q), LENGTH).detach()
        ) == pytest.approx(H, abs=1e-9)
        assert gradient_norm(model, binary(p, q), LENGTH) < 1e-7


@pytest.mark.parametrize("p,q", [(0.2, 0.3), (0.5, 0.8)])
def test_predicted_basin_agrees_with_the_flow(p, q):
    E0, W0 = np.meshgrid(np.linspace(0.1, 2.0, 8), np.linspace(-2.0, 2.0, 10))
    ends, drift = flow_many(E0, W0, p, q, t_max=2000.0)
    found = np.array([classify(x, p, q) for x in ends])
    predicted = np.array(
        [predicted_basin(e, w, p, q) for e, w in zip(E0.ravel(), W0.ravel())]
    )
    assert drift.max() < 1e-8
    assert np.mean(found == predicted) == 1.0  # measured: 80/80 for both chains
    assert {"local", "global"} <= set(found)  # both basins are visited
    if p + q > 1:  # paper: the whole half-plane w > 0 goes local
        assert set(found[W0.ravel() > 0]) == {"local"}


def test_classify():
    p, q = 0.2, 0.3
    e = float(global_minimum_curve(p, q, [0.5])[0])
    assert classify((e, 0.5), p, q) == "global"
    assert classify((1e-4, -1.5), p, q) == "local"
    assert classify((0.0, -1 / math.sqrt(2)), p, q) == "saddle"
    assert classify((3.0, 0.5), p, q) == "saddle"  # neither: undecided


def test_lowrank_model_rejects_other_architectures():
    with pytest.raises(ValueError):
        lowrank_model(1.0, 1.0, 0.0, (0.2, 0.3), TransformerConfig.gpt2())
    with pytest.raises(ValueError):
        lowrank_model(1.0, 1.0, 0.0, (0.2, 0.3), TransformerConfig.theory(tied=False))
