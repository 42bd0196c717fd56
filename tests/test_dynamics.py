"""markovlib.dynamics: the canonical low-rank reduction (e, w, b) of the single-layer
model and its gradient flow."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from markovlib import theory
from markovlib.chains import binary
from markovlib.companion.figures import initialisation as initialisation_figures
from markovlib.dynamics import (
    FULL_MODEL_METRIC,
    attention_off_loss,
    classify,
    energy,
    flow,
    flow_grid,
    flow_many,
    global_minimum_curve,
    init_coordinates,
    loss_class,
    lowrank_model,
    manifold_coordinates,
    manifold_descent,
    manifold_trained,
    optimal_bias,
    predicted_basin,
    reduced_gradient,
    reduced_loss,
    saddle_energy,
    saddle_w,
)
from markovlib.model import Transformer, TransformerConfig
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
        # the full model: the bias gradient vanishes at the optimal b, and the chain
        # rule through the manifold's parameterisation (E_1 = -E_0 = (e/2) α,
        # W_1 = 2|w| s β α^T, W_2 = 2 w s α β^T) gives reduced_gradient
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


# ------------------------------------------------------- metrics, grids, the full model
@pytest.mark.parametrize("p,q", [(0.2, 0.3), (0.5, 0.8)])
def test_energy_of_a_metric_is_conserved_by_that_metrics_flow(p, q):
    for e0, w0 in [(1.0, 0.5), (0.8, -0.4), (1.5, -1.5)]:
        traj = flow(e0, w0, p, q, t_max=200.0, metric=FULL_MODEL_METRIC)
        assert traj.success and traj.drift < 1e-8 and np.ptp(traj.w) > 1e-4
        # independent check: the paper's energy is not conserved by this flow
        assert abs(float(energy(traj.e[-1], traj.w[-1])) - float(energy(e0, w0))) > 1e-4
    # the full model's boundary is the paper's with e stretched by sqrt(m_e / m_w) = 4
    w = -0.3
    e_paper = math.sqrt(saddle_energy() + w**2 - math.log(abs(w)))
    assert predicted_basin(0.99 * e_paper, w, 0.5, 0.8) == "local"
    assert predicted_basin(1.01 * e_paper, w, 0.5, 0.8) == "global"
    assert predicted_basin(3.9 * e_paper, w, 0.5, 0.8, FULL_MODEL_METRIC) == "local"
    assert predicted_basin(4.1 * e_paper, w, 0.5, 0.8, FULL_MODEL_METRIC) == "global"


def test_flow_many_drift_is_the_largest_over_the_trajectory():
    ends, drift = flow_many([0.8, 1.2], [-0.4, 0.6], 0.5, 0.8, t_max=300.0)
    for (e0, w0), end, d in zip([(0.8, -0.4), (1.2, 0.6)], ends, drift):
        single = flow(e0, w0, 0.5, 0.8, t_max=300.0)
        np.testing.assert_allclose(end, single.endpoint, atol=1e-6)
        assert d < 1e-7 and single.drift < 1e-7


@pytest.mark.parametrize("p,q", [(0.2, 0.3), (0.5, 0.8)])
def test_flow_grid_classifies_and_agrees_with_predicted_basins(p, q):
    g = flow_grid(p, q, np.linspace(0.1, 2.0, 5), np.linspace(-1.9, 1.9, 6), 2000.0)
    assert g.starts.shape == (30, 2) and g.max_drift < 1e-7
    assert g.agreement == 1.0 and {"local", "global"} <= set(g.found)
    # independent, one flow per start: the starts beside the boundary (a grid neighbour
    # of the other kind), where a wrong flow would change a class first (issue 51: all
    # 30 took 10 s per chain)
    found = np.asarray(g.found).reshape(6, 5)  # rows: w; columns: e (e varies first)
    assert np.array_equal(g.starts[:5, 0], np.linspace(0.1, 2.0, 5))
    for i, j in np.ndindex(found.shape):
        neighbours = found[max(i - 1, 0) : i + 2, max(j - 1, 0) : j + 2]
        if (neighbours != found[i, j]).any():
            e, w = g.starts[i * 5 + j]
            assert (
                classify(flow(e, w, p, q, t_max=2000.0).endpoint, p, q) == found[i, j]
            )


def _random_attention_off_model(seed):
    model = theory.perturbed(
        lowrank_model(0.8, -0.5, None, (0.5, 0.8), CONFIG), 0.2, seed=seed
    )
    for blk in model.blocks:
        blk.attn.W_V.weight.data.zero_(), blk.attn.W_O.weight.data.zero_()
    return model


@pytest.mark.parametrize("p,q", CHAINS)
def test_attention_off_loss_equals_the_enumeration_with_gradients(p, q):
    model = _random_attention_off_model(1)
    fast = attention_off_loss(model, p, q, LENGTH)
    slow = expected_loss(model, binary(p, q), LENGTH)
    assert abs(float((fast - slow).detach())) < 1e-12
    params = list(model.parameters())
    for a, b in zip(
        torch.autograd.grad(fast, params), torch.autograd.grad(slow, params)
    ):
        assert float((a - b).abs().max()) < 1e-12
    model.blocks[0].attn.W_O.weight.data.fill_(0.1)  # attention on: refused
    with pytest.raises(ValueError, match="attention"):
        attention_off_loss(model, p, q, LENGTH)


def test_manifold_coordinates_read_back_the_manifold_point():
    for e, w in [(0.7, -1.3), (-1.2, 0.4), (1.5, 0.0)]:
        c = manifold_coordinates(lowrank_model(e, w, 0.3, (0.2, 0.3), CONFIG))
        assert c["e"][0] == pytest.approx(abs(e), abs=1e-12)
        assert c["w"][0] == pytest.approx(w, abs=1e-12)
        assert c["b"][0] == pytest.approx(0.3) and c["common"][0] == 0
    # an ensemble: one value per member
    seeds = [0, 1, 2]
    init = init_coordinates(TransformerConfig.theory(tied=True, max_len=64), seeds)
    assert init.shape == (3, 2) and np.all(init[:, 0] > 0) and np.all(init[:, 0] < 0.3)
    assert np.all(np.abs(init[:, 1]) < 0.2)  # N(0, 0.02²): next to the origin


@pytest.mark.parametrize(
    "p,q,start,expected",
    [
        (0.5, 0.8, (0.8, 0.6), "local"),  # w > 0, p + q > 1: the local basin
        (0.5, 0.8, (0.8, -1.3), "global"),
        (0.2, 0.3, (0.8, 0.6), "global"),
    ],
)
def test_manifold_descent_matches_the_metric_flow_away_from_the_boundary(
    p, q, start, expected
):
    steps, lr = 400, 0.1
    runs = manifold_descent([start], p, q, steps=steps, lr=lr, length=LENGTH)
    assert runs.attention_stayed_off and runs.found[0] == expected
    assert np.all(np.diff(runs.loss[0]) <= 1e-12)  # stable step: monotone
    # early on, e follows the reduced flow in the full model's metric (time lr x steps);
    # w less closely, as the full model also moves off the manifold (common mode,
    # positions, bias); measured: |Δe| <= 0.023, |Δw| <= 0.134
    k = np.searchsorted(runs.steps, 20)
    t = lr * runs.steps[k]
    ref = flow(*start, p, q, t_max=t, metric=FULL_MODEL_METRIC, n_points=2)
    assert abs(runs.path[0, k, 0] - ref.endpoint[0]) < 0.05
    assert abs(runs.path[0, k, 1] - ref.endpoint[1]) < 0.2
    # the final class is the loss's
    H, U = binary(p, q).entropy_rate(), binary(p, q).unigram_entropy()
    assert abs(runs.loss[0, -1] - (H if expected == "global" else U)) < 0.05 * (U - H)


def test_loss_class():
    H, U = binary(0.5, 0.8).entropy_rate(), binary(0.5, 0.8).unigram_entropy()
    assert list(loss_class([H, U, (H + U) / 2], 0.5, 0.8)) == [
        "global",
        "local",
        "undecided",
    ]


def _manifold_specs(starts, steps=20, seq_len=16):
    from dataclasses import replace

    from markovlib.runs.spec import grid

    base = grid(
        [0.5],
        [0.8],
        tied=[True],
        preset="theory",
        seeds=[3],
        config_kwargs={"max_len": seq_len},
        steps=steps,
        batch_size=4,
        seq_len=seq_len,
    )[0]
    return [replace(base, init={"kind": "manifold", "e": e, "w": w}) for e, w in starts]


def test_runs_from_the_manifold_train_the_authors_optimiser_from_there():
    """A RunSpec with a manifold start trains from that point (its step-0 path is the
    start), keeps attention off, moves, and is reproducible."""
    from markovlib.runs.spec import train_specs

    starts = [(0.8, 0.6), (1.0, -1.2)]
    specs = _manifold_specs(starts)
    a = manifold_trained(train_specs(specs, device="cpu"), starts, 0.5, 0.8)
    b = manifold_trained(train_specs(specs, device="cpu"), starts, 0.5, 0.8)
    assert a.attention_stayed_off and a.path.shape == (2, 2, 2)
    assert list(a.steps) == [0, 20]  # the checkpoint (step 50) is after the end
    np.testing.assert_array_equal(a.loss, b.loss)  # seeded: reproducible
    np.testing.assert_allclose(a.path[:, 0], starts, atol=1e-6)
    assert np.abs(a.path[:, -1] - a.path[:, 0]).max() > 1e-3  # it moved
    # the step-0 exact loss is the reduced model's at the start (b optimal)
    for (e, w), loss in zip(starts, a.loss[:, 0]):
        assert abs(loss - float(reduced_loss(e, w, 0.5, 0.8))) < 1e-6
    assert list(a.found) == list(loss_class(a.loss[:, -1], 0.5, 0.8))


def test_manifold_descent_skips_attention_bit_for_bit(monkeypatch):
    """Skipping the attention layers (off on the manifold) changes no number: the runs
    equal those that compute them, exactly."""
    from markovlib import dynamics

    starts = [(0.8, 0.6), (1.0, -1.2), (0.3, 0.1)]

    def run():
        return manifold_descent(starts, 0.3, 0.4, steps=60, lr=0.1, n_records=9)

    fast = run()
    monkeypatch.setattr(dynamics, "_SKIP_ATTENTION", False)
    slow = run()
    assert fast.attention_stayed_off and slow.attention_stayed_off
    for field in ("path", "loss", "found"):
        np.testing.assert_array_equal(getattr(fast, field), getattr(slow, field))
    for key in fast.final:
        np.testing.assert_array_equal(fast.final[key], slow.final[key])


def test_training_from_the_manifold_skips_attention_bit_for_bit(monkeypatch):
    """train_many skips the attention of a run whose attention weights start at 0: the
    histories, final weights and checkpoints equal those computed with attention."""
    from markovlib import train as train_module
    from markovlib.runs.spec import train_specs

    specs = _manifold_specs([(0.8, 0.6), (1.0, -1.2), (0.3, 0.1)], steps=60)
    fast = train_specs(specs, device="cpu")
    monkeypatch.setattr(train_module, "_attention_zero", lambda model: False)
    slow = train_specs(specs, device="cpu")
    for x, y in zip(fast, slow):
        assert x.history.equals(y.history)
        for name, value in x.model.state_dict().items():
            assert torch.equal(value, y.model.state_dict()[name]), name
        for name, value in x.checkpoint.items():
            assert torch.equal(value, y.checkpoint[name]), name
        assert float(x.model.blocks[0].attn.W_V.weight.detach().abs().max()) == 0.0


def test_attention_skipped_needs_attention_off():
    from markovlib.model import attention_skipped

    model = Transformer(TransformerConfig.theory(tied=True, max_len=16))
    with pytest.raises(ValueError, match="W_V = W_O = 0"):
        with attention_skipped(model):
            pass


def test_init_coordinates_scale_with_init_std():
    cfg = TransformerConfig.theory(tied=True, max_len=64)
    narrow = init_coordinates(cfg, [0, 1])
    wide = init_coordinates(cfg, [0, 1], init_std=0.2)
    # the same draws ten times larger: e scales by 10, the gain g = 2w|w| is scale-free
    # in e, so w by 10
    np.testing.assert_allclose(wide, 10 * narrow, rtol=1e-5)


def test_phase_portrait_draws_the_paper_objects():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    initialisation_figures.phase_portrait(
        0.5, 0.8, ax, points={"init": np.array([[0.1, 0.02]])}
    )
    labels = [line.get_label() for line in ax.lines]
    assert {"global minima", "local minima", "saddle", "init"} <= set(labels)
    star = next(line for line in ax.lines if line.get_label() == "saddle")
    assert star.get_xdata()[0] == pytest.approx(-1 / math.sqrt(2))
    curve = next(line for line in ax.lines if line.get_label() == "global minima")
    x, y = np.asarray(curve.get_xdata()), np.asarray(curve.get_ydata())
    ok = ~np.isnan(y)
    assert np.all(
        x[ok] < -1 / math.sqrt(2)
    )  # p + q > 1: the global minima need w < -1/sqrt(2)
    plt.close(fig)
