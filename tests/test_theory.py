"""markovlib.theory: Thm 1 / Thm 2 constructions, the exact and Monte Carlo population
loss, App. D diagnostics."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
import torch

from markovlib.chains import MarkovChain, binary, symmetric
from markovlib.model import Transformer, TransformerConfig
from markovlib.theory import (
    ablate_attention,
    attention_ratio,
    exact_loss_function,
    expected_loss,
    global_minimum,
    gradient_norm,
    hessian,
    loss_slice,
    perturbed,
    population_loss,
    positional_spread,
    singular_values,
    unigram_curvature,
    unigram_hessian,
    unigram_point,
)


def _exact_length(chain: MarkovChain) -> int:
    # enumeration is capped at k**length <= 2**18; keep it small enough to be quick
    return {2: 8, 3: 6}.get(chain.k, 5)


def _uses_feedforward(model: Transformer) -> bool:
    return bool(model.blocks[0].ff.W_1.weight.abs().sum() > 0)


def _check_reproduces_kernel(model: Transformer, chain: MarkovChain):
    model = model.double()
    x = chain.sample(16, 40, seed=0)
    assert set(x.unique().tolist()) == set(range(chain.k))
    probs = model.probabilities(x)
    target = torch.as_tensor(chain.P)[x]
    torch.testing.assert_close(probs, target, rtol=0, atol=1e-6)
    length = _exact_length(chain)
    assert population_loss(
        model, chain, length=length, exact=True
    ).mean == pytest.approx(chain.entropy_rate(), abs=1e-9)
    assert gradient_norm(model, chain, length=length) < 1e-6


def _random_chain(k: int, seed: int) -> MarkovChain:
    return MarkovChain(np.random.default_rng(seed).dirichlet(np.full(k, 2.0), size=k))


# ---------------------------------------------------------------- Thm 1: global minimum
GLOBAL_CASES = [
    # (chain, config kwargs, route, expected route under 'auto')
    ("binary(0.2,0.3)", dict(tied=True), "auto", "direct"),
    ("binary(0.2,0.3)", dict(tied=False), "auto", "direct"),
    ("binary(0.5,0.8)", dict(tied=True), "auto", "feedforward"),
    ("binary(0.5,0.8)", dict(tied=False), "auto", "direct"),
    ("binary(0.2,0.3)", dict(tied=True), "feedforward", "feedforward"),
    ("binary(0.2,0.3)", dict(tied=False), "feedforward", "feedforward"),
    ("binary(0.5,0.8)", dict(tied=False), "feedforward", "feedforward"),
    ("binary(0.3,0.7)", dict(tied=True), "direct", "direct"),  # p + q = 1: ||e||^2 = 0
    ("binary(0.5,0.8)", dict(tied=True, activation="gelu"), "auto", "feedforward"),
    ("binary(0.5,0.8)", dict(tied=True, n_layers=2, window=2), "auto", "feedforward"),
    ("binary(0.2,0.3)", dict(tied=False, n_heads=2, d_model=16), "auto", "direct"),
    ("symmetric(5,0.3)", dict(tied=True), "auto", "feedforward"),
    ("symmetric(5,0.3)", dict(tied=False), "auto", "feedforward"),
    ("symmetric(5,0.3)", dict(tied=False), "direct", "direct"),
    ("random3", dict(tied=True), "auto", "feedforward"),
    ("random3", dict(tied=False), "auto", "feedforward"),
    ("random3", dict(tied=False), "direct", "direct"),
]


def _chain(name: str) -> MarkovChain:
    return {
        "binary(0.2,0.3)": binary(0.2, 0.3),
        "binary(0.5,0.8)": binary(0.5, 0.8),
        "binary(0.3,0.7)": binary(0.3, 0.7),
        "symmetric(5,0.3)": symmetric(5, 0.3),
        "random3": _random_chain(3, seed=4),
    }[name]


@pytest.mark.parametrize("chain_name,kw,route,expected_route", GLOBAL_CASES)
def test_global_minimum_reproduces_the_kernel(chain_name, kw, route, expected_route):
    chain = _chain(chain_name)
    config = TransformerConfig.theory(vocab_size=chain.k, max_len=64, **kw)
    model = global_minimum(chain, config, route=route)
    assert (model.head.weight is model.wte.weight) == config.tied
    assert _uses_feedforward(model) == (expected_route == "feedforward")
    for block in model.blocks:  # attention contributes nothing
        assert torch.all(block.attn.W_O.weight == 0) and torch.all(
            block.attn.W_V.weight == 0
        )
    assert torch.all(model.wpe.weight == 0)  # p_n = 0
    _check_reproduces_kernel(model, chain)


def test_global_minimum_binary_tied_direct_matches_theorem():
    """Thm 1 canonical construction: e_0 = 0, ||e_1||^2 = logit(1-q) - logit(p),
    sigmoid(b_1 - b_0) = p."""
    p, q = 0.2, 0.3
    model = global_minimum(binary(p, q), TransformerConfig.theory()).double()
    e = model.wte.weight.detach()
    b = model.head.bias.detach()
    logit = lambda a: math.log(a / (1 - a))  # noqa: E731
    assert torch.all(e[0] == 0)
    assert float(e[1] @ e[1]) == pytest.approx(logit(1 - q) - logit(p), abs=1e-6)
    assert float(torch.sigmoid(b[1] - b[0])) == pytest.approx(p, abs=1e-7)
    assert torch.all(model.blocks[0].ff.W_2.weight == 0)  # FF contributes nothing
    # the single-logit form: P(x_{n+1} = 1 | x_n = 1) = sigmoid(||e||^2 + b) = 1 - q
    assert float(torch.sigmoid(e[1] @ e[1] + b[1] - b[0])) == pytest.approx(
        1 - q, abs=1e-6
    )


def test_global_minimum_direct_tied_needs_p_plus_q_at_most_one():
    with pytest.raises(ValueError, match=r"p \+ q"):
        global_minimum(
            binary(0.5, 0.8), TransformerConfig.theory(tied=True), route="direct"
        )


def test_global_minimum_direct_tied_kstate_raises():
    with pytest.raises(ValueError, match="direct"):
        global_minimum(
            symmetric(3, 0.3),
            TransformerConfig.theory(vocab_size=3, tied=True),
            route="direct",
        )


def test_global_minimum_rejects_layer_norm():
    with pytest.raises(ValueError, match="layer_norm"):
        global_minimum(binary(0.2, 0.3), TransformerConfig.gpt2())


@pytest.mark.parametrize(
    "chain",
    [
        binary(0.3, 1.0),
        binary(0.0, 0.5),
        MarkovChain([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]]),
    ],
    ids=["q=1", "p=0", "k=3 zero"],
)
def test_global_minimum_rejects_zero_transition(chain):
    with pytest.raises(ValueError, match="transition probability"):
        global_minimum(chain, TransformerConfig.theory(vocab_size=chain.k))


def test_global_minimum_other_errors():
    with pytest.raises(ValueError, match="vocab_size"):
        global_minimum(symmetric(3, 0.3), TransformerConfig.theory(vocab_size=2))
    with pytest.raises(ValueError, match="route"):
        global_minimum(binary(0.2, 0.3), TransformerConfig.theory(), route="attention")
    with pytest.raises(ValueError, match="d_model"):
        global_minimum(
            symmetric(5, 0.3), TransformerConfig.theory(vocab_size=5, d_model=4)
        )


# ---------------------------------------------------------------- Thm 2: unigram point
@pytest.mark.parametrize(
    "chain_name,tied",
    [
        ("binary(0.5,0.8)", True),
        ("binary(0.5,0.8)", False),
        ("binary(0.2,0.3)", True),
        ("symmetric(5,0.3)", True),
        ("symmetric(5,0.3)", False),
        ("random3", True),
        ("random3", False),
    ],
)
def test_unigram_point(chain_name, tied):
    chain = _chain(chain_name)
    config = TransformerConfig.theory(vocab_size=chain.k, tied=tied, max_len=64)
    model = unigram_point(chain, config).double()
    assert torch.all(model.wte.weight == 0) and torch.all(
        model.head.weight == 0
    )  # a = e = 0
    x = chain.sample(8, 40, seed=1)
    probs = model.probabilities(x)
    pi = torch.as_tensor(chain.stationary())
    torch.testing.assert_close(probs, pi.expand_as(probs), rtol=0, atol=1e-6)
    length = _exact_length(chain)
    assert population_loss(
        model, chain, length=length, exact=True
    ).mean == pytest.approx(chain.unigram_entropy(), abs=1e-9)
    assert gradient_norm(model, chain, length=length) < 1e-6


def test_gradient_norm_is_not_trivially_zero():
    chain = binary(0.5, 0.8)
    model = unigram_point(chain, TransformerConfig.theory()).double()
    with torch.no_grad():
        model.head.bias[1] += 0.1  # off the critical point
    assert gradient_norm(model, chain, length=6) > 1e-3
    random_model = Transformer(
        TransformerConfig.theory(init_std=0.3),
        generator=torch.Generator().manual_seed(0),
    )
    assert gradient_norm(random_model.double(), chain, length=6) > 1e-3
    # and the losses of the two theorem points are ordered as the paper says:
    # H_rate < H(pi)
    gm = global_minimum(chain, TransformerConfig.theory()).double()
    assert (
        expected_loss(gm, chain, 8).item()
        < expected_loss(
            unigram_point(chain, TransformerConfig.theory()).double(), chain, 8
        ).item()
        - 0.04
    )


def test_unigram_point_vocab_mismatch():
    with pytest.raises(ValueError, match="vocab_size"):
        unigram_point(binary(0.2, 0.3), TransformerConfig.theory(vocab_size=3))


# ---------------------------------------------------------------- population loss
def _brute_force_loss(
    model: Transformer, chain: MarkovChain, length: int, start: str
) -> float:
    """Independent enumeration: per sequence, per prefix, -log of the predicted
    probability of the next state."""
    k, P = chain.k, chain.P
    pi0 = chain.stationary() if start == "stationary" else np.full(k, 1.0 / k)
    total = 0.0
    for path in itertools.product(range(k), repeat=length):
        prob = pi0[path[0]]
        for a, b in zip(path[:-1], path[1:]):
            prob *= P[a, b]
        nll = 0.0
        for n in range(length - 1):
            prefix = torch.tensor([path[: n + 1]])
            with torch.no_grad():
                logits = model(prefix)[0, -1].tolist()
            log_norm = math.log(sum(math.exp(v) for v in logits))
            nll += log_norm - logits[path[n + 1]]
        total += prob * nll / (length - 1)
    return total


@pytest.mark.parametrize(
    "preset,chain_name,length,start",
    [
        ("theory", "binary(0.3,0.6)", 4, "stationary"),
        ("theory", "binary(0.3,0.6)", 4, "uniform"),
        ("gpt2", "binary(0.5,0.8)", 4, "stationary"),
        ("theory", "random3", 3, "stationary"),
    ],
)
def test_expected_loss_matches_brute_force(preset, chain_name, length, start):
    chain = binary(0.3, 0.6) if chain_name == "binary(0.3,0.6)" else _chain(chain_name)
    config = getattr(TransformerConfig, preset)(
        vocab_size=chain.k, init_std=0.5, max_len=16
    )
    model = Transformer(config, generator=torch.Generator().manual_seed(2)).double()
    got = expected_loss(model, chain, length, start=start).item()
    assert got == pytest.approx(
        _brute_force_loss(model, chain, length, start), abs=1e-10
    )
    assert got > chain.entropy_rate()  # a random model is not optimal


def test_expected_loss_is_differentiable_and_validates():
    chain = binary(0.2, 0.3)
    model = Transformer(TransformerConfig.theory(max_len=16))
    loss = expected_loss(model, chain, 5)
    loss.backward()
    assert (
        model.head.bias.grad is not None and torch.isfinite(model.head.bias.grad).all()
    )
    for bad in (1, 0, 2.5):
        with pytest.raises(ValueError, match="length"):
            expected_loss(model, chain, bad)
    with pytest.raises(ValueError, match="enumeration"):
        expected_loss(
            Transformer(TransformerConfig.theory(vocab_size=5, max_len=16)),
            symmetric(5, 0.3),
            9,
        )


def test_population_loss_exact_fields():
    chain = binary(0.2, 0.3)
    model = global_minimum(chain, TransformerConfig.theory(max_len=16)).double()
    result = population_loss(model, chain, length=6, exact=True)
    assert (
        result.exact
        and result.stderr == 0.0
        and result.length == 6
        and result.n_sequences == 2**6
    )
    assert "exact" in str(result)


def test_population_loss_monte_carlo_is_unbiased_and_stderr_shrinks():
    chain = binary(0.2, 0.3)
    model = global_minimum(chain, TransformerConfig.theory(max_len=128))
    small = population_loss(model, chain, length=64, n_sequences=256, seed=0)
    large = population_loss(model, chain, length=64, n_sequences=1024, seed=1)
    for result in (small, large):
        assert not result.exact and result.stderr > 0
        assert abs(result.mean - chain.entropy_rate()) < 4 * result.stderr
    assert small.stderr / large.stderr == pytest.approx(2.0, rel=0.25)  # ~ 1/sqrt(n)
    again = population_loss(model, chain, length=64, n_sequences=256, seed=0)
    assert again.mean == small.mean  # seeded
    # the same estimator distinguishes the unigram point (H(pi) is ~0.13 nats above
    # H_rate)
    bad = population_loss(
        unigram_point(chain, TransformerConfig.theory(max_len=128)),
        chain,
        length=64,
        n_sequences=256,
        seed=0,
    )
    assert abs(bad.mean - chain.unigram_entropy()) < 4 * bad.stderr
    assert abs(bad.mean - chain.entropy_rate()) > 10 * bad.stderr
    with pytest.raises(ValueError, match="n_sequences"):
        population_loss(model, chain, length=8, n_sequences=1)


def test_population_loss_excess_exact():
    """``excess`` = loss - loss of the Bayes predictor: 0 at Thm 1's point,
    I(x_n; x_n+1) at Thm 2's point."""
    chain = binary(0.5, 0.8)
    gm = population_loss(
        global_minimum(chain, TransformerConfig.theory(max_len=16)).double(),
        chain,
        length=8,
        exact=True,
    )
    assert gm.excess == pytest.approx(0.0, abs=1e-9) and gm.excess_stderr == 0.0
    up = population_loss(
        unigram_point(chain, TransformerConfig.theory(max_len=16)).double(),
        chain,
        length=8,
        exact=True,
    )
    assert up.excess == pytest.approx(chain.mutual_information(), abs=1e-9)
    assert up.excess == pytest.approx(up.mean - chain.entropy_rate(), abs=1e-9)


def test_population_loss_excess_monte_carlo():
    chain = binary(0.2, 0.3)
    gm = population_loss(
        global_minimum(chain, TransformerConfig.theory(max_len=64)),
        chain,
        length=48,
        n_sequences=256,
        seed=0,
    )
    assert abs(gm.excess) < 1e-5  # paired: no sampling noise at the optimum
    assert gm.excess_stderr < 1e-5 < gm.stderr
    up = population_loss(
        unigram_point(chain, TransformerConfig.theory(max_len=64)),
        chain,
        length=48,
        n_sequences=256,
        seed=0,
    )
    assert abs(up.excess - chain.mutual_information()) < 4 * up.excess_stderr
    assert up.excess == pytest.approx(
        up.mean - gm.mean, abs=1e-6
    )  # same paths (same seed)


def test_population_loss_kstate_monte_carlo():
    chain = symmetric(5, 0.3)
    model = global_minimum(chain, TransformerConfig.theory(vocab_size=5, max_len=64))
    result = population_loss(
        model, chain, length=48, n_sequences=512, batch_size=100, seed=3
    )
    assert result.n_sequences == 512
    assert abs(result.mean - chain.entropy_rate()) < 4 * result.stderr


# ---------------------------------------------------------------- App. D diagnostics
def test_attention_ratio_of_global_minimum_feedforward_route_is_zero():
    chain = binary(0.5, 0.8)
    model = global_minimum(
        chain, TransformerConfig.theory(max_len=32)
    )  # auto -> feedforward (tied)
    ratio = attention_ratio(model, chain.sample(4, 20, seed=0))
    assert ratio.shape == (20,)
    np.testing.assert_array_equal(ratio, np.zeros(20))


def test_attention_ratio_of_global_minimum_direct_route_is_zero():
    chain = binary(0.2, 0.3)
    model = global_minimum(
        chain, TransformerConfig.theory(max_len=32)
    )  # auto -> direct
    ratio = attention_ratio(model, chain.sample(4, 20, seed=0))
    np.testing.assert_array_equal(ratio, np.zeros(20))


def test_attention_ratio_of_random_model_is_positive_and_correct():
    model = Transformer(
        TransformerConfig.theory(max_len=32, init_std=0.3),
        generator=torch.Generator().manual_seed(1),
    )
    x = binary(0.2, 0.3).sample(3, 10, seed=1)
    ratio = attention_ratio(model, x)
    assert np.all(np.isfinite(ratio)) and np.all(ratio > 0)
    t = model.trace(x)["layers"][0]
    manual = (
        t["attention"].norm(dim=-1) / (t["input"] + t["attention"]).norm(dim=-1)
    ).mean(0)
    np.testing.assert_allclose(ratio, manual.numpy(), rtol=1e-6)


def test_ablate_attention():
    model = Transformer(
        TransformerConfig.theory(n_layers=2, max_len=32, init_std=0.3),
        generator=torch.Generator().manual_seed(2),
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ablated = ablate_attention(model)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # original untouched
    for block in ablated.blocks:
        assert torch.all(block.attn.W_O.weight == 0)
    for name, value in ablated.state_dict().items():
        if "W_O" not in name:
            assert torch.equal(value, before[name])
    assert ablated.head.weight is ablated.wte.weight  # tying survives the copy
    assert ablated.wte.weight is not model.wte.weight
    x = binary(0.2, 0.3).sample(2, 12, seed=3)
    for layer in ablated.trace(x)["layers"]:
        assert torch.all(layer["attention"] == 0)
    # without attention, the prediction at n depends on (x_n, n) only
    x2 = x.clone()
    x2[:, 0] = 1 - x[:, 0]
    torch.testing.assert_close(ablated(x)[:, 1:], ablated(x2)[:, 1:], rtol=0, atol=0)
    assert not torch.allclose(model(x)[:, 1:], model(x2)[:, 1:])


def test_singular_values():
    chain = binary(0.2, 0.3)
    model = global_minimum(
        chain, TransformerConfig.theory()
    )  # direct tied: rank-one embedding
    sv = singular_values(model)
    assert "wpe.weight" not in sv and "head.weight" not in sv
    assert {"wte.weight", "blocks.0.attn.W_Q.weight", "blocks.0.ff.W_2.weight"} <= set(
        sv
    )
    gain = math.log(0.7 / 0.3) - math.log(0.2 / 0.8)
    np.testing.assert_allclose(sv["wte.weight"], [math.sqrt(gain), 0.0], atol=1e-6)
    assert np.count_nonzero(sv["wte.weight"] > 1e-9) == 1
    np.testing.assert_array_equal(sv["blocks.0.attn.W_Q.weight"], np.zeros(8))
    untied = Transformer(
        TransformerConfig.theory(tied=False, d_model=6),
        generator=torch.Generator().manual_seed(0),
    )
    sv = singular_values(untied)
    assert "head.weight" in sv
    for name, p in untied.named_parameters():
        if p.dim() == 2 and name != "wpe.weight":
            expected = np.linalg.svd(p.detach().double().numpy(), compute_uv=False)
            np.testing.assert_allclose(sv[name], expected, rtol=1e-10, atol=1e-12)


def test_shared_direction_is_one_for_eq_27s_form_and_not_for_a_random_model():
    """App. D's eq. 27 built by hand (e = 2v, p_n = 0.5 v, W_1 = w vᵀ, W_2 = v wᵀ):
    every |cos| is 1; a random model's e and W_2 are not along W_1's v; p_n = 0
    has norm 0."""
    from markovlib.theory import shared_direction

    config = TransformerConfig.theory(d_model=4)
    model = Transformer(config, generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(4)
    v = torch.randn(4, generator=g)
    v /= v.norm()
    w = torch.randn(config.ff_mult * 4, generator=g)
    with torch.no_grad():
        model.wte.weight[0], model.wte.weight[1] = 0.0, 2 * v
        model.wpe.weight[:] = 0.5 * v
        model.blocks[0].ff.W_1.weight[:] = torch.outer(w, v)
        model.blocks[0].ff.W_2.weight[:] = torch.outer(v, w)
    cos = shared_direction(model, 16)
    for name in ("e", "p", "W_2", "w"):
        assert cos[name] == pytest.approx(1.0, abs=1e-9), name
    assert cos["p_norm"] == pytest.approx(0.25)
    with torch.no_grad():
        model.wpe.weight[:] = 0.0
    assert shared_direction(model, 16)["p_norm"] == 0.0
    random = Transformer(config, generator=torch.Generator().manual_seed(5))
    cos = shared_direction(random, 16)
    assert min(cos["e"], cos["W_2"]) < 0.9


def test_positional_spread():
    chain = binary(0.5, 0.8)
    for model in (
        global_minimum(chain, TransformerConfig.theory()),
        global_minimum(binary(0.2, 0.3), TransformerConfig.theory()),
    ):
        assert positional_spread(model, 64) == 0.0
    model = Transformer(
        TransformerConfig.theory(), generator=torch.Generator().manual_seed(0)
    )
    spread = positional_spread(model, 32)
    p = model.wpe.weight.detach()[:32].double()
    e = model.wte.weight.detach().double()
    manual = (p - p.mean(0)).norm(dim=-1).mean() / (e[1] - e[0]).norm()
    assert spread > 0.1
    assert spread == pytest.approx(float(manual), rel=1e-12)
    # constant positional embeddings have no spread
    with torch.no_grad():
        model.wpe.weight[:] = model.wpe.weight[0]
    assert positional_spread(model, 32) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("tied", [True, False])
def test_loss_slice_matches_manual_perturbation(tied):
    """loss_slice evaluates L(θ + t v) through functional_call; a manual in-place
    perturbation must agree, including for the tied model, where the head must move
    together with the embedding."""
    chain = binary(0.3, 0.4)
    model = global_minimum(
        chain, TransformerConfig.theory(tied=tied, max_len=16)
    ).double()
    ts = [-2.0, 0.0, 1.5]
    got = loss_slice(model, chain, ts, seed=3, length=6)
    g = torch.Generator().manual_seed(3)
    named = dict(model.named_parameters())
    v = {n: torch.randn(p.shape, generator=g, dtype=p.dtype) for n, p in named.items()}
    norm = torch.sqrt(sum((u**2).sum() for u in v.values()))
    for t, value in zip(ts, got):
        moved = copy.deepcopy(model)
        with torch.no_grad():
            for n, p in moved.named_parameters():
                p.add_((t / norm) * v[n])
        if tied:
            assert moved.head.weight is moved.wte.weight
        assert value == pytest.approx(expected_loss(moved, chain, 6).item(), abs=1e-12)
    assert got[1] == pytest.approx(chain.entropy_rate(), abs=1e-9)
    assert got[0] > got[1] and got[2] > got[1]


# ------------------------------------------ Thm 2 / Thm 3: Hessian at the unigram point
@pytest.mark.parametrize(
    "p,q", [(0.5, 0.8), (0.2, 0.3), (0.6, 0.7), (0.9, 0.05), (0.3, 0.7)]
)
@pytest.mark.parametrize("tied", [True, False])
def test_unigram_hessian_matches_closed_form(p, q, tied):
    """Autodiff Hessian of the exact loss = the hand-derived block: e-block 2c I (tied)
    or [[0, cI], [cI, 0]] (untied), bias curvature pi_0 pi_1, no cross terms;
    c = pq(p+q-1)/(p+q)^2."""
    chain = binary(p, q)
    d = 4
    H = unigram_hessian(
        chain, TransformerConfig.theory(d_model=d, tied=tied, max_len=8), length=6
    )
    c = p * q * (p + q - 1) / (p + q) ** 2
    pi0, pi1 = chain.stationary()
    expected = np.zeros((H.matrix.shape[0],) * 2)
    if tied:
        expected[:d, :d] = 2 * c * np.eye(d)
    else:
        expected[:d, d : 2 * d] = expected[d : 2 * d, :d] = c * np.eye(d)
    expected[-1, -1] = pi0 * pi1
    np.testing.assert_allclose(H.matrix, expected, atol=1e-10)
    assert H.min_eigenvalue == pytest.approx(unigram_curvature(chain, tied), abs=1e-10)
    if abs(p + q - 1) > 1e-9:  # at p + q = 1, c = 0: no sign to check
        assert (H.min_eigenvalue > 0) == (
            tied and p + q > 1
        )  # Thm 2: positive exactly when p+q > 1, tied
    assert (
        list(H.blocks) == (["e", "b"] if tied else ["e", "a", "b"])
        and len(H.labels) == H.matrix.shape[0]
    )


def test_unigram_hessian_is_the_restriction_of_the_full_hessian():
    """The full Hessian over every parameter (independent flattening, label by label)
    has the (E, b) block and nothing else: eigenvalues 4c (d of them, direction
    E_1 - E_0), 2 pi_0 pi_1 (b_1 - b_0), zeros."""
    chain = binary(0.5, 0.8)
    d, length = 4, 5
    model = unigram_point(
        chain, TransformerConfig.theory(d_model=d, max_len=length)
    ).double()
    H, labels = hessian(model, chain, length)
    assert (
        H.shape
        == (len(labels), len(labels))
        == (sum(p.numel() for p in model.parameters()),) * 2
    )
    inside = np.array([lab.startswith(("wte.weight", "head.bias")) for lab in labels])
    # 1e-8, not 0: unigram_point rounds b = log(pi) to float32, which leaves a 1e-9
    # residual gradient
    assert np.abs(H[~inside]).max() < 1e-8 and np.abs(H[:, ~inside]).max() < 1e-8
    c = 0.5 * 0.8 * 0.3 / 1.3**2
    pi0, pi1 = chain.stationary()
    ev = np.sort(np.linalg.eigvalsh(H))
    np.testing.assert_allclose(
        ev[-d - 1 :], np.sort([4 * c] * d + [2 * pi0 * pi1]), atol=1e-8
    )
    np.testing.assert_allclose(ev[: -d - 1], 0, atol=1e-8)


def test_hessian_matches_finite_differences_of_the_gradient():
    """At a random point (not a stationary one) the Hessian equals central differences
    of the exact gradient."""
    chain = binary(0.3, 0.6)
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig.theory(d_model=2, max_len=4),
        generator=torch.Generator().manual_seed(3),
    ).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, dtype=p.dtype))
    H, _ = hessian(model, chain, 4)
    params = list(model.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])

    def grad_at(v):
        with torch.no_grad():
            i = 0
            for p in params:
                p.copy_(v[i : i + p.numel()].view(p.shape))
                i += p.numel()
        g = torch.autograd.grad(expected_loss(model, chain, 4), params)
        return torch.cat([x.reshape(-1) for x in g])

    h = 1e-5
    cols = [
        (grad_at(flat + h * e) - grad_at(flat - h * e)) / (2 * h)
        for e in torch.eye(len(flat), dtype=flat.dtype)[:12]
    ]
    np.testing.assert_allclose(H[:, :12], torch.stack(cols, 1).numpy(), atol=1e-6)


def test_unigram_hessian_params_moves_along_a_direction():
    """params(v) is theta_pi + v in the paper's coordinates: the loss along the untied
    negative-curvature eigenvector goes below H(pi) as -|c| t^2 / 2 to second order, and
    along a tied direction above it."""
    chain = binary(0.5, 0.8)
    for tied in (True, False):
        H = unigram_hessian(
            chain, TransformerConfig.theory(d_model=4, tied=tied, max_len=8), length=6
        )
        v = H.eigenvector(0)
        t = 1e-2
        loss = float(expected_loss(H.model, chain, 6, params=H.params(t * v)))
        assert loss - chain.unigram_entropy() == pytest.approx(
            0.5 * H.min_eigenvalue * t**2, rel=1e-2
        )


def test_unigram_point_gpt2_keeps_layer_norm_gains():
    chain = binary(0.5, 0.8)
    model = unigram_point(chain, TransformerConfig.gpt2(max_len=16))
    gains = [p for n, p in model.named_parameters() if "ln" in n]
    assert gains and all(torch.all(g == 1) for g in gains)
    probs = model.probabilities(chain.sample(4, 16, seed=0))
    torch.testing.assert_close(
        probs[..., 1],
        torch.full_like(probs[..., 1], chain.stationary()[1]),
        rtol=0,
        atol=1e-6,
    )


def test_perturbed_adds_seeded_gaussian_noise():
    model = unigram_point(binary(0.5, 0.8), TransformerConfig.theory(max_len=256))
    a, b, c = (perturbed(model, 0.05, seed=s) for s in (1, 1, 2))
    delta = torch.cat(
        [(pa - p0).reshape(-1) for pa, p0 in zip(a.parameters(), model.parameters())]
    ).detach()
    assert (
        delta.numel() > 2000
        and abs(float(delta.std()) - 0.05) < 0.003
        and abs(float(delta.mean())) < 0.003
    )
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(x, y) for x, y in zip(a.parameters(), c.parameters()))
    assert all(
        torch.equal(x, y)
        for x, y in zip(perturbed(model, 0.0).parameters(), model.parameters())
    )
    with pytest.raises(ValueError, match="^std"):
        perturbed(model, -1.0)


@pytest.mark.parametrize(
    "chain",
    [
        symmetric(3, 0.5),
        symmetric(5, 0.9),
        symmetric(4, 0.2),
        MarkovChain(np.random.default_rng(2).dirichlet(np.ones(3), size=3)),
        MarkovChain(np.random.default_rng(5).dirichlet(np.ones(4) * 0.5, size=4)),
    ],
    ids=lambda c: c.name,
)
@pytest.mark.parametrize("tied", [True, False])
def test_unigram_curvature_closed_form_matches_autodiff_for_k_states(chain, tied):
    H = unigram_hessian(
        chain,
        TransformerConfig.theory(vocab_size=chain.k, d_model=4, tied=tied, max_len=4),
        length=3,
    )
    assert H.min_eigenvalue == pytest.approx(unigram_curvature(chain, tied), abs=1e-8)


@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_symmetric_chain_threshold_is_k_minus_one_over_k(k):
    """For symmetric(k, p) the tied curvature at theta_pi changes sign at p = (k-1)/k
    (k = 2: p + q = 1)."""
    star = (k - 1) / k
    assert (
        unigram_curvature(symmetric(k, star - 0.01))
        < 0
        < unigram_curvature(symmetric(k, min(star + 0.01, 1.0)))
    )
    assert abs(unigram_curvature(symmetric(k, star))) < 1e-12


# ---------------------------------------------------------------- chapter-level checks
def test_construction_checks_cover_every_route_the_chain_allows():
    from markovlib.theory import construction_checks

    chain = binary(0.2, 0.3)
    available, unavailable = construction_checks(chain, seed=0)
    assert set(available) == {
        "tied, direct",
        "tied, feedforward",
        "untied, direct",
        "untied, feedforward",
    }
    assert unavailable == {}
    x = chain.sample(64, 200, seed=0)
    for c in available.values():
        # independently: the exact loss by enumeration, the kernel along the sampled
        # paths
        assert abs(c["loss"] - chain.entropy_rate()) < 1e-9
        assert abs(c["loss"] - expected_loss(c["model"], chain, 10).item()) < 1e-12
        probs = c["model"].probabilities(x).detach()
        assert c["kernel_error"] == pytest.approx(
            (probs - torch.as_tensor(chain.P)[x]).abs().max().item()
        )
        assert c["kernel_error"] < 1e-6 and c["grad"] < 1e-6
    available, unavailable = construction_checks(binary(0.6, 0.7), seed=0)
    assert (
        set(unavailable) == {"tied, direct"} and "p + q" in unavailable["tied, direct"]
    )
    assert len(available) == 3


def test_appendix_d_matches_its_definitions():
    from markovlib.theory import appendix_d

    chain = binary(0.3, 0.6)
    model = Transformer(
        TransformerConfig.theory(d_model=8, max_len=32),
        generator=torch.Generator().manual_seed(3),
    )
    with torch.no_grad():  # make attention matter
        for prm in model.parameters():
            prm.mul_(20)
    x = chain.sample(4, 32, seed=1)
    d = appendix_d(model, x, 32)
    no_attn = copy.deepcopy(model)
    with torch.no_grad():
        no_attn.blocks[0].attn.W_O.weight.zero_()
        change = (no_attn.probabilities(x) - model.probabilities(x)).abs().max().item()
    assert d["ablation"] == pytest.approx(change) and d["ablation"] > 1e-3
    for name, prm in model.named_parameters():
        if prm.dim() == 2 and name != "wpe.weight":
            s = np.linalg.svd(prm.detach().double().numpy(), compute_uv=False)
            assert d["rank_ratio"][name] == pytest.approx(s[1] / s[0])
    assert d["largest_rank_ratio"] == max(d["rank_ratio"].values())
    assert d["ratio_mean"] == pytest.approx(float(attention_ratio(model, x).mean()))
    assert d["spread"] == pytest.approx(positional_spread(model, 32))
    with torch.no_grad():  # App. D's formula: attention dropped, after each state
        probs = no_attn.probabilities(x)
    for state in (0, 1):
        row = probs[x == state].double().mean(0).numpy()
        assert d["formula_kernel"][state] == pytest.approx(row)
    # Thm 1's construction: no attention, no positions (App. D's picture exactly)
    star = global_minimum(chain, TransformerConfig.theory(d_model=8)).double()
    d = appendix_d(star, chain.sample(4, 32, seed=1), 32)
    assert d["ablation"] == 0.0 and d["spread"] == 0.0 and d["ratio_mean"] == 0.0
    assert d["largest_rank_ratio"] == 0.0  # every weight matrix is zero or rank one
    assert d["formula_kernel"] == pytest.approx(chain.P, abs=1e-6)


def test_unigram_threshold_is_the_sign_change_by_bisection():
    from markovlib.theory import unigram_min_eigenvalue, unigram_threshold

    # the closed form (k - 1)/k, found by an independent route
    # (theory.unigram_curvature)
    for k in (2, 3):
        star = unigram_threshold(k, 1e-3)
        assert abs(star - (k - 1) / k) < 2e-3
        assert (
            unigram_min_eigenvalue(k, star - 0.01)
            < 0
            < unigram_min_eigenvalue(k, star + 0.01)
        )
        assert unigram_curvature(symmetric(k, star - 0.01)) < 0
    assert unigram_threshold(4, 1e-9, min_eig=lambda k, p: p - 0.4321) == pytest.approx(
        0.4321, abs=1e-9
    )
    with pytest.raises(ValueError, match="bracket"):
        unigram_threshold(3, 1e-3, lo=0.9, hi=1.0)
    with pytest.raises(ValueError, match="tol"):
        unigram_threshold(3, 0)


@pytest.mark.parametrize("preset", ["theory", "gpt2"])
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("vocab,layers", [(2, 1), (3, 2)])
def test_n_params_closed_form_counts_the_model(preset, tied, vocab, layers):
    from markovlib.theory import n_params

    cfg = getattr(TransformerConfig, preset)(
        vocab_size=vocab, d_model=8, tied=tied, n_layers=layers, max_len=64
    )
    assert n_params(cfg) == Transformer(cfg).n_params()


def _all_paths_loss(model, chain, length):
    """The population loss over all k**length paths with their realised next states
    (the enumeration before the last state was summed in closed form)."""
    x = torch.tensor(list(itertools.product(range(chain.k), repeat=length)))
    pi, P = chain.stationary(), chain.P
    prob = torch.tensor(
        [
            pi[s[0]] * math.prod(P[a, b] for a, b in zip(s[:-1], s[1:]))
            for s in x.tolist()
        ],
        dtype=torch.float64,
    )
    logits = model(x[:, :-1])
    nll = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), x[:, 1:], reduction="none"
    ).mean(1)
    return (prob * nll).sum()


@pytest.mark.parametrize("preset,k", [("theory", 2), ("gpt2", 2), ("theory", 3)])
def test_exact_loss_sums_the_last_state_in_closed_form(preset, k):
    chain = binary(0.3, 0.6) if k == 2 else _chain("random3")
    config = getattr(TransformerConfig, preset)(vocab_size=k, init_std=0.5, max_len=8)
    model = Transformer(config, generator=torch.Generator().manual_seed(3)).double()
    params = list(model.parameters())
    fast, slow = expected_loss(model, chain, 6), _all_paths_loss(model, chain, 6)
    assert float(fast) == pytest.approx(float(slow), abs=1e-13)
    for a, b in zip(
        torch.autograd.grad(fast, params), torch.autograd.grad(slow, params)
    ):
        assert torch.allclose(a, b, atol=1e-13, rtol=0)


def test_exact_loss_of_an_ensemble_is_per_member():
    chain = binary(0.3, 0.6)
    config = TransformerConfig.gpt2(init_std=0.5, max_len=8)
    gens = [torch.Generator().manual_seed(s) for s in (1, 2, 3)]
    ens = Transformer(config, n_models=3, generators=gens).double()
    losses = exact_loss_function(ens, chain, 5)()
    assert losses.shape == (3,)
    for i in range(3):
        member = ens.member(i).double()
        assert float(losses[i]) == pytest.approx(
            float(expected_loss(member, chain, 5)), abs=1e-13
        )
