"""markovlib.train: reproducibility, learning on an easy chain, history layout, lr
schedule, optimiser groups, validation, and the TrainResult helpers. Every run is tiny
(<= 60 steps, small batch and length)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from markovlib.chains import binary, symmetric
from markovlib.model import Transformer, TransformerConfig
from markovlib.theory import (
    expected_loss,
    global_minimum,
    perturbed,
    population_descent,
    unigram_point,
)
from markovlib.train import (
    Execution,
    TrainConfig,
    TrainResult,
    cross_entropy,
    escape_curve,
    make_optimizer,
    make_schedule,
    train,
)

TINY = dict(batch_size=4, seq_len=32)
CPU = Execution(device="cpu", progress=False)


def _run(seed=0, steps=20, config=None, chain=None, **kw):
    chain = chain or binary(0.2, 0.3)
    config = config or TransformerConfig.theory(max_len=64)
    kw = {**TINY, "eval_every": 5, "eval_batches": 2, **kw}
    return train(chain, config, steps=steps, seed=seed, execution=CPU, **kw)


@pytest.fixture(scope="module")
def tiny_run():
    return _run(seed=7, steps=23, eval_every=5)


# ---------------------------------------------------------------- reproducibility
@pytest.mark.parametrize("preset", ["theory", "gpt2"])
def test_same_seed_same_history_and_weights(preset):
    config = getattr(TransformerConfig, preset)(max_len=64)
    a = _run(seed=3, config=config)
    b = _run(seed=3, config=config)
    pd.testing.assert_frame_equal(a.history, b.history, check_exact=True)
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert a.test_seed == b.test_seed
    assert torch.equal(a.test_sequence(), b.test_sequence())


def test_different_seed_different_history():
    a = _run(seed=3)
    b = _run(seed=4)
    assert not np.array_equal(
        a.history["train_loss"].to_numpy()[1:], b.history["train_loss"].to_numpy()[1:]
    )
    assert not torch.equal(a.model.wte.weight, b.model.wte.weight)
    assert a.test_seed != b.test_seed


# ---------------------------------------------------------------- learning
def test_loss_decreases_on_an_easy_chain():
    chain = binary(0.1, 0.1)  # H_rate = h(0.1) = 0.325, H(pi) = log 2
    result = train(
        chain,
        TransformerConfig.theory(max_len=64),
        steps=60,
        batch_size=8,
        seq_len=64,
        lr=1e-2,
        seed=0,
        eval_every=20,
        eval_batches=2,
        execution=Execution(device="cpu", progress=False),
    )
    tests = result.test_history["test_loss"].to_numpy()
    assert tests[0] == pytest.approx(
        math.log(2), abs=0.05
    )  # tiny init: ~ uniform prediction
    assert result.final_test_loss < tests[0] - 0.2
    assert result.final_test_loss < 0.45
    assert (
        result.final_test_loss > chain.entropy_rate() - 0.05
    )  # cannot beat the entropy rate (by much)
    # and the learnt kernel moved toward P (stay with probability 0.9)
    kernel = result.learnt_kernel()
    assert kernel[0, 0] > 0.75 and kernel[1, 1] > 0.75


# ---------------------------------------------------------------- history layout
def test_history_rows_and_eval_steps(tiny_run):
    h = tiny_run.history
    assert list(h.columns) == ["step", "lr", "train_loss", "test_loss"]
    assert h["step"].tolist() == list(range(0, 24))
    evaluated = h.loc[h["test_loss"].notna(), "step"].tolist()
    assert evaluated == [
        0,
        5,
        10,
        15,
        20,
        23,
    ]  # step 0, multiples of eval_every, last step
    assert tiny_run.test_history["step"].tolist() == evaluated
    assert np.isnan(h.loc[0, "lr"]) and np.isnan(h.loc[0, "train_loss"])
    assert h.loc[1:, "train_loss"].notna().all() and h.loc[1:, "lr"].notna().all()
    assert (h.loc[1:, "train_loss"] > 0).all()
    assert tiny_run.final_test_loss == h.loc[23, "test_loss"]


def test_result_metadata(tiny_run):
    assert tiny_run.seed == 7
    assert tiny_run.settings["steps"] == 23 and tiny_run.settings["seq_len"] == 32
    assert tiny_run.settings["device"] == "cpu" and tiny_run.device == torch.device(
        "cpu"
    )
    assert tiny_run.seconds >= 0
    assert not tiny_run.model.training


# --------------------------------------------------------------- learning-rate schedule
def _lrs(steps: int, lr: float, schedule: str = "one-cycle") -> list[float]:
    model = Transformer(TransformerConfig.theory(max_len=8))
    opt = make_optimizer(model, lr)
    sched = make_schedule(opt, schedule, steps, lr)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


@pytest.mark.parametrize("steps", [3, 10, 30, 49, 50, 51, 60, 200, 1000])
def test_one_cycle_schedule(steps):
    lr = 2e-3
    lrs = np.array(_lrs(steps, lr))
    assert lrs[0] == pytest.approx(
        lr / 100, rel=1e-6
    )  # warm-up starts at lr/100, even for short runs
    assert lrs.max() == pytest.approx(lr, rel=1e-9)  # the peak is reached exactly
    assert lrs[-1] == pytest.approx(lr / 5, rel=1e-6)  # and the last step uses lr/5
    peak = int(np.argmax(lrs))
    assert 1 <= peak <= math.ceil(0.02 * steps)  # 2 % warm-up (at least one step)
    assert np.all(np.diff(lrs[: peak + 1]) > 0)  # rising during warm-up
    np.testing.assert_allclose(
        lrs[: peak + 1], np.linspace(lr / 100, lr, peak + 1), rtol=1e-9
    )  # linearly
    if float(0.02 * steps).is_integer():
        assert peak == 0.02 * steps  # exactly 2 % of the steps
    assert np.all(np.diff(lrs[peak:]) <= 1e-15)  # then non-increasing (cosine)
    assert np.all(lrs[peak:] >= lr / 5 * (1 - 1e-9))
    if steps >= 30:
        mid = peak + (steps - 1 - peak) // 2  # cosine: about halfway at mid-decay
        assert lrs[mid] == pytest.approx((lr + lr / 5) / 2, rel=0.05)


def test_history_lr_follows_the_schedule():
    lr = 5e-3
    result = _run(
        steps=60, lr=lr, eval_every=60, eval_batches=1, batch_size=2, seq_len=8
    )
    history_lr = result.history["lr"].to_numpy()[1:]
    np.testing.assert_allclose(history_lr, _lrs(60, lr), rtol=1e-12)
    assert history_lr[0] == pytest.approx(lr / 100, rel=1e-6)
    assert history_lr.max() == pytest.approx(lr, rel=0.01)
    assert history_lr[-1] == pytest.approx(lr / 5, rel=0.01)


def test_constant_schedule():
    assert _lrs(30, 1e-3, "constant") == [1e-3] * 30
    result = _run(steps=10, lr=3e-3, schedule="constant", eval_every=10)
    np.testing.assert_array_equal(
        result.history["lr"].to_numpy()[1:], np.full(10, 3e-3)
    )


def test_fifty_steps_one_cycle_works():
    """Regression: torch's OneCycleLR(pct_start=0.02) divided by zero at exactly 50
    steps."""
    result = _run(steps=50, batch_size=2, seq_len=8, eval_every=50, eval_batches=1)
    assert len(result.history) == 51
    assert result.history["lr"].iloc[1] == pytest.approx(2e-3 / 100)


# ---------------------------------------------------------------- optimiser
def _decayed_names(model, **kw):
    opt = make_optimizer(model, 1e-3, weight_decay=0.05, **kw)
    names = {id(p): n for n, p in model.named_parameters()}
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids)) and set(ids) == {
        id(p) for p in model.parameters()
    }  # each once (tied too)
    return sorted(names[id(p)] for p in decay["params"])


@pytest.mark.parametrize("preset", ["theory", "gpt2"])
@pytest.mark.parametrize("tied", [True, False])
def test_weight_decay_on_the_linear_weights_only(preset, tied):
    """The authors' AdamW groups: decay on the linear layers' weights; embeddings,
    biases, LN gains and a tied head (which is the token embedding) are not decayed."""
    model = Transformer(getattr(TransformerConfig, preset)(tied=tied, n_layers=2))
    linear = [
        f"blocks.{i}.{m}.weight"
        for i in (0, 1)
        for m in ("attn.W_Q", "attn.W_K", "attn.W_V", "attn.W_O", "ff.W_1", "ff.W_2")
    ]
    assert _decayed_names(model) == sorted(linear + ([] if tied else ["head.weight"]))
    opt = make_optimizer(model, 1e-3)
    assert isinstance(opt, torch.optim.AdamW)
    assert all(g["betas"] == (0.9, 0.95) and g["lr"] == 1e-3 for g in opt.param_groups)


@pytest.mark.parametrize("tied", [True, False])
def test_decay_embeddings_restores_every_matrix(tied):
    """markovlib 0.1 decayed every matrix, token and positional embeddings included
    (decay_embeddings=True)."""
    model = Transformer(TransformerConfig.gpt2(tied=tied))
    names = _decayed_names(model, decay_embeddings=True)
    assert names == sorted(n for n, p in model.named_parameters() if p.dim() >= 2)
    assert {"wte.weight", "wpe.weight"} <= set(names)


def test_weight_decay_shrinks_linear_weights_only():
    """With zero gradients, AdamW's decoupled decay multiplies decayed weights by
    (1 - lr * wd) and leaves the rest."""
    model = Transformer(TransformerConfig.gpt2(tied=False))
    with torch.no_grad():
        model.head.bias.fill_(0.5)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = make_optimizer(model, lr=0.1, weight_decay=0.5)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in model.named_parameters():
        factor = (
            1 - 0.1 * 0.5
            if n.endswith("weight") and ".W_" in n or n == "head.weight"
            else 1.0
        )
        torch.testing.assert_close(p.detach(), before[n] * factor)
    assert torch.equal(model.wpe.weight, before["wpe.weight"]) and torch.equal(
        model.wte.weight, before["wte.weight"]
    )


def test_cross_entropy_uses_next_state_targets():
    chain = binary(0.2, 0.3)
    model = global_minimum(chain, TransformerConfig.theory(max_len=64)).double()
    x = chain.sample(4, 33, seed=0)
    expected = -torch.log(torch.as_tensor(chain.P)[x[:, :-1], x[:, 1:]]).mean()
    torch.testing.assert_close(cross_entropy(model, x), expected, rtol=0, atol=1e-6)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kw,pattern",
    [
        (dict(steps=0), "steps"),
        (dict(steps=-5), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(batch_size=0), "batch_size"),
        (dict(seq_len=0), "seq_len"),
        (dict(seq_len=65), "seq_len"),  # > max_len = 64
        (dict(lr=0.0), "lr"),
        (dict(lr=-1e-3), "lr"),
        (dict(lr=float("nan")), "lr"),
        (dict(lr=float("inf")), "lr"),
        (dict(eval_every=0), "eval_every"),
        (dict(eval_batches=0), "eval_batches"),
        (dict(schedule="foo"), "schedule"),
    ],
)
def test_train_rejects_bad_arguments(kw, pattern):
    args = dict(steps=2, batch_size=2, seq_len=8)
    args.update(kw)
    with pytest.raises(ValueError, match=pattern):
        train(
            binary(0.2, 0.3),
            TransformerConfig.theory(max_len=64),
            execution=CPU,
            **args,
        )


@pytest.mark.parametrize("name", ["device", "compile", "progress", "checkpoint"])
def test_execution_fields_given_loose_say_where_they_go(name):
    """How a run executes is one object (Execution), never a TrainConfig field."""
    value = {"device": "cpu", "compile": False, "progress": False, "checkpoint": 1}
    with pytest.raises(TypeError, match=rf"execution=Execution\({name}="):
        train(
            binary(0.2, 0.3),
            TransformerConfig.theory(max_len=64),
            steps=2,
            **{name: value[name]},
        )
    with pytest.raises(TypeError, match="must be an Execution"):
        train(binary(0.2, 0.3), TransformerConfig.theory(max_len=64), execution="cpu")


def test_train_rejects_vocab_mismatch():
    with pytest.raises(ValueError, match="vocab_size"):
        train(
            symmetric(3, 0.3),
            TransformerConfig.theory(vocab_size=2),
            steps=2,
            batch_size=2,
            seq_len=8,
            execution=Execution(device="cpu", progress=False),
        )


def test_make_schedule_rejects_unknown():
    opt = make_optimizer(Transformer(TransformerConfig.theory(max_len=8)), 1e-3)
    with pytest.raises(ValueError, match="schedule"):
        make_schedule(opt, "linear", 10, 1e-3)


# ---------------------------------------------------------------- TrainResult helpers
def test_probability_along(tiny_run):
    x = tiny_run.test_sequence(48)
    assert x.shape == (1, 48)
    for i in (0, 1):
        positions, probs = tiny_run.probability_along(x, i=i, j=1)
        np.testing.assert_array_equal(positions, np.flatnonzero(x[0].numpy() == i))
        assert len(positions) > 0
        assert np.all((probs >= 0) & (probs <= 1))
        np.testing.assert_allclose(
            probs, tiny_run.probabilities(x)[0, positions, 1].numpy()
        )


def _result_for(model, chain, seq_len=64):
    history = pd.DataFrame(
        {"step": [0], "lr": [np.nan], "train_loss": [np.nan], "test_loss": [np.nan]}
    )
    return TrainResult(
        chain=chain,
        config=model.config,
        model=model,
        history=history,
        seed=0,
        train_config=TrainConfig(steps=1, batch_size=1, seq_len=seq_len),
    )


def test_helpers_on_the_global_minimum():
    """With Thm 1's model plugged in, probability_along returns exactly p at the zeros,
    learnt_kernel returns P."""
    chain = binary(0.2, 0.3)
    model = global_minimum(chain, TransformerConfig.theory(max_len=64))
    result = _result_for(model, chain)
    x = result.test_sequence()
    assert x.shape == (1, 64)
    positions, probs = result.probability_along(x, i=0, j=1)
    np.testing.assert_allclose(probs, 0.2, atol=1e-6)
    positions, probs = result.probability_along(x, i=1, j=0)
    np.testing.assert_allclose(probs, 0.3, atol=1e-6)
    np.testing.assert_allclose(result.learnt_kernel(), chain.P, atol=1e-6)
    c5 = symmetric(5, 0.3)
    result5 = _result_for(
        global_minimum(c5, TransformerConfig.theory(vocab_size=5, max_len=64)), c5
    )
    np.testing.assert_allclose(result5.learnt_kernel(), c5.P, atol=1e-6)


def test_learnt_kernel_rows_sum_to_one(tiny_run):
    kernel = tiny_run.learnt_kernel()
    assert kernel.shape == (2, 2)
    np.testing.assert_allclose(kernel.sum(1), 1.0, atol=1e-9)
    assert np.all((kernel >= 0) & (kernel <= 1))
    x = tiny_run.chain.sample(3, 16, seed=2)
    np.testing.assert_allclose(tiny_run.learnt_kernel(x).sum(1), 1.0, atol=1e-9)
    assert np.array_equal(
        tiny_run.learnt_kernel(), tiny_run.learnt_kernel()
    )  # default paths are seeded


# ----------------------------------------- escape statistics and exact gradient descent
def _history_result(chain, test_losses, steps):
    history = pd.DataFrame(
        {"step": steps, "lr": np.nan, "train_loss": np.nan, "test_loss": test_losses}
    )
    return TrainResult(
        chain=chain,
        config=TransformerConfig.theory(),
        model=None,
        history=history,
        seed=0,
        train_config=TrainConfig(steps=30, batch_size=1, seq_len=8),
    )


def test_escape_curve_counts_first_arrivals():
    chain = binary(0.5, 0.8)
    h, u = chain.entropy_rate(), chain.unigram_entropy()
    steps = [0, 10, 20, 30]
    runs = [
        _history_result(chain, [0.69, u, h + 0.001, h], steps),  # escapes at 20
        _history_result(
            chain, [0.69, h + 0.004, u, u], steps
        ),  # within tol at 10, then back: still 10
        _history_result(chain, [0.69, u, u, u], steps),
    ]  # never
    assert [r.escape_step(0.005) for r in runs] == [20, 10, None]
    curve = escape_curve(runs, 0.005)
    assert curve["step"].tolist() == steps
    np.testing.assert_allclose(curve["escaped"], [0, 1 / 3, 2 / 3, 2 / 3])
    np.testing.assert_allclose(curve["plateau"], 1 - curve["escaped"])
    with pytest.raises(ValueError, match="results"):
        escape_curve([])


@pytest.mark.parametrize(
    "p,q,tied,returns",
    [(0.5, 0.8, True, True), (0.2, 0.3, True, False), (0.5, 0.8, False, False)],
)
def test_population_descent_from_a_perturbed_unigram_point(p, q, tied, returns):
    """Thm 2 / 3 dynamically: from theta_pi + noise, exact gradient descent returns to
    H(pi) in the tied model with p+q > 1 and leaves it (towards H_rate) when p+q < 1 or
    the model is untied."""
    chain = binary(p, q)
    start = perturbed(
        unigram_point(
            chain, TransformerConfig.theory(d_model=4, tied=tied, max_len=6)
        ).double(),
        0.05,
        seed=0,
    )
    model, losses = population_descent(start, chain, steps=150, lr=0.5, length=6)
    assert len(losses) == 151 and losses[0] == pytest.approx(
        float(expected_loss(start, chain, 6))
    )
    assert model is not start and all(
        torch.equal(a, b)
        for a, b in zip(
            perturbed(
                unigram_point(chain, start.config).double(), 0.05, seed=0
            ).parameters(),
            start.parameters(),
        )
    )  # the start is not modified
    if returns:
        assert abs(losses[-1] - chain.unigram_entropy()) < 1e-4
    else:
        assert losses[-1] < chain.unigram_entropy() - 0.5 * chain.mutual_information()


@pytest.mark.parametrize("preset", ["theory", "gpt2"])
def test_population_descent_of_an_ensemble_is_each_members_descent(preset):
    """An ensemble built with Transformer.ensemble_of descends each member's own loss:
    the same loss curves as the members descended one by one (float64), and member i
    of the result holds member i's weights."""
    chain = binary(0.3, 0.9)
    cfg = getattr(TransformerConfig, preset)(d_model=4, tied=False, max_len=6)
    start = unigram_point(chain, cfg).double()
    singles = [perturbed(start, 0.1, seed=s) for s in range(3)]
    ensemble = Transformer.ensemble_of(singles)
    model, losses = population_descent(ensemble, chain, steps=40, lr=0.3, length=6)
    assert losses.shape == (3, 41)
    for i, single in enumerate(singles):
        alone, curve = population_descent(single, chain, steps=40, lr=0.3, length=6)
        np.testing.assert_allclose(losses[i], curve, rtol=0, atol=1e-12)
        for a, b in zip(model.member(i).parameters(), alone.parameters()):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    assert losses[0, 0] != losses[1, 0]  # the members differ
    with pytest.raises(ValueError, match="single models of one config"):
        Transformer.ensemble_of([single, ensemble])


def test_population_descent_validates():
    model = unigram_point(binary(0.5, 0.8), TransformerConfig.theory(max_len=6))
    with pytest.raises(ValueError, match="^steps"):
        population_descent(model, binary(0.5, 0.8), steps=0, lr=0.1)
    with pytest.raises(ValueError, match="^lr"):
        population_descent(model, binary(0.5, 0.8), steps=1, lr=-1)


def test_divergence_is_found_in_full_and_thinned_histories():
    """A NaN or infinite loss is a divergence at its step; the NaN train losses that a
    thinned history (the shipped format: every step to 50, then the evaluations) leaves
    between evaluations are not."""
    from markovlib.train import diverged_step, final_loss

    settings = TrainConfig(steps=100, batch_size=2, seq_len=8, eval_every=10)
    step = np.arange(101)
    train = np.where(step == 0, np.nan, 0.6)
    test = np.where(step % 10 == 0, 0.65, np.nan)

    def history(train, test):
        return pd.DataFrame({"step": step, "train_loss": train, "test_loss": test})

    assert diverged_step(history(train, test), settings) is None
    assert final_loss(history(train, test), settings) == 0.65
    thinned = np.where((step <= 50) | (step % 10 == 0), train, np.nan)
    assert diverged_step(history(thinned, test), settings) is None
    broken = np.where(step >= 7, np.nan, train)
    assert diverged_step(history(broken, test), settings) == 7
    assert np.isnan(final_loss(history(broken, test), settings))  # not 0.65
    late = np.where(step >= 63, np.nan, thinned)  # after 50: seen at the next eval
    assert (
        diverged_step(history(late, np.where(step >= 70, np.nan, test)), settings) == 70
    )
    assert (
        diverged_step(history(np.where(step == 77, np.inf, train), test), settings)
        == 77
    )
