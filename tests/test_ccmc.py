"""markovlib.ccmc: attention = context-conditioned Markov chain, the generator, the
statistics, the MLE of W."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from markovlib import ccmc
from markovlib.companion.notebook import check_chapter_parameters
from markovlib.presets import PRESETS

# a correct sampler with a fixed seed passes a goodness-of-fit test at this level
# essentially always
P_MIN = 1e-4


def _ccmc_by_hand(W, x, pos=None) -> torch.Tensor:
    """P(next = j | x) ∝ c_j exp(W[x_T, j]), c_j = Σ_{t: x_t = j} exp(b_t)
    (b = 0: plain counts), by Python loops."""
    k, T = W.shape[0], x.shape[1]
    b = [0.0] * T if pos is None else [float(v) for v in pos[:T]]
    out = torch.zeros(x.shape[0], k, dtype=torch.float64)
    for i, prompt in enumerate(x.tolist()):
        c = [sum(math.exp(b[t]) for t in range(T) if prompt[t] == j) for j in range(k)]
        w = [c[j] * math.exp(float(W[prompt[-1], j])) for j in range(k)]
        out[i] = torch.tensor(w, dtype=torch.float64) / sum(w)
    return out


def _softmax_rows(W: torch.Tensor) -> torch.Tensor:
    e = torch.exp(W - W.max(1, keepdim=True).values)
    return e / e.sum(1, keepdim=True)


# ---------------------------------------------------------------- attention = CCMC
@pytest.mark.parametrize("k,T", [(2, 1), (5, 7), (9, 30)])
def test_attention_output_equals_ccmc_formula(k, T):
    for seed in range(3):
        W = ccmc.random_W(k, sigma=2.0, seed=seed)
        x = ccmc.sample_prompts(200, T, k, seed=seed + 10)
        model = ccmc.SelfAttentionSampler(W)
        probs = model(x)
        assert probs.dtype == torch.float64 and probs.shape == (200, k)
        assert torch.allclose(
            probs.sum(1), torch.ones(200, dtype=torch.float64), atol=1e-12
        )
        assert (probs - ccmc.ccmc_probs(W, x)).abs().max() < 1e-6
        assert (
            probs - ccmc.ccmc_probs(W, x)
        ).abs().max() < 1e-12  # in float64 they agree to rounding


@pytest.mark.parametrize("k,T", [(3, 4), (6, 25)])
def test_positional_attention_equals_position_weighted_ccmc(k, T):
    for seed in range(3):
        W = ccmc.random_W(k, sigma=1.5, seed=seed)
        pos = (
            torch.randn(
                T + 5,
                generator=torch.Generator().manual_seed(seed),
                dtype=torch.float64,
            )
            * 2
        )
        x = ccmc.sample_prompts(150, T, k, seed=seed + 20)
        probs = ccmc.SelfAttentionSampler(W, pos)(x)
        assert (probs - ccmc.ccmc_probs(W, x, pos)).abs().max() < 1e-12
        assert (probs[:5] - _ccmc_by_hand(W, x[:5], pos)).abs().max() < 1e-12


def test_constant_positional_term_changes_nothing():
    W = ccmc.random_W(4, seed=3)
    x = ccmc.sample_prompts(50, 9, 4, seed=4)
    shifted = ccmc.ccmc_probs(W, x, torch.full((9,), 7.5, dtype=torch.float64))
    assert (shifted - ccmc.ccmc_probs(W, x)).abs().max() < 1e-12


def test_token_counts_by_hand():
    x = torch.tensor([[0, 2, 2, 1, 2], [1, 1, 1, 1, 0]])
    assert ccmc.token_counts(x, 3).tolist() == [[1, 1, 3], [1, 4, 0]]
    pos = torch.log(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64))
    assert torch.allclose(
        ccmc.token_counts(x, 3, pos),
        torch.tensor([[1.0, 4.0, 10.0], [5.0, 10.0, 0.0]], dtype=torch.float64),
    )


@pytest.mark.parametrize("k,repeats", [(3, 1), (6, 1), (6, 4)])
def test_base_chain_when_every_token_occurs_equally_often(k, repeats):
    W = ccmc.random_W(k, sigma=1.5, seed=k)
    g = torch.Generator().manual_seed(k)
    x = torch.stack(
        [
            torch.arange(k * repeats)[torch.randperm(k * repeats, generator=g)] % k
            for _ in range(40)
        ]
    )
    expected = _softmax_rows(W)[x[:, -1]]
    assert torch.allclose(ccmc.base_chain(W), _softmax_rows(W), atol=1e-15)
    assert (ccmc.ccmc_probs(W, x) - expected).abs().max() < 1e-12
    assert (ccmc.SelfAttentionSampler(W)(x) - expected).abs().max() < 1e-12


def test_token_absent_from_prompt_has_probability_zero():
    W = ccmc.random_W(6, sigma=3.0, seed=1)
    x = ccmc.sample_prompts(
        300, 4, 6, seed=2
    )  # 4 tokens: at least two of the six are absent
    absent = ccmc.token_counts(x, 6) == 0
    assert absent.sum(1).min() >= 2
    assert (ccmc.ccmc_probs(W, x)[absent] == 0).all()
    assert (ccmc.SelfAttentionSampler(W)(x)[absent] == 0).all()
    assert (ccmc.ccmc_probs(W, x)[~absent] > 0).all()


# ---------------------------------------------------------------- generation
def test_first_and_second_generated_tokens_follow_the_ccmc():
    k = 5
    W = ccmc.random_W(k, sigma=1.0, seed=7)
    prompt = torch.tensor([0, 3, 3, 1, 4, 3, 1, 2])
    n = 20000
    out = ccmc.generate(W, prompt, 2, n_traj=n, seed=0)
    p1 = ccmc.ccmc_probs(W, prompt)[0].numpy()
    counts = np.bincount(out[:, 0].numpy(), minlength=k)
    assert stats.chisquare(counts, n * p1).pvalue > P_MIN
    # the second token given the first: the CCMC of the prompt with the first token
    # appended (its count grew)
    for j in range(k):
        rows = out[:, 0] == j
        p2 = ccmc.ccmc_probs(W, torch.cat([prompt, torch.tensor([j])]))[0].numpy()
        counts2 = np.bincount(out[rows, 1].numpy(), minlength=k)
        assert stats.chisquare(counts2, rows.sum().item() * p2).pvalue > P_MIN, j
        assert not np.allclose(p2, p1)  # the appended token really changed the law


def test_positional_generation_follows_the_position_weighted_ccmc():
    k, T = 4, 6
    W = ccmc.random_W(k, seed=8)
    pos = torch.linspace(0, 3, T + 3, dtype=torch.float64)
    prompt = torch.tensor([0, 1, 2, 3, 0, 1])
    out = ccmc.generate(W, prompt, 3, n_traj=20000, pos=pos, seed=1)
    p1 = ccmc.ccmc_probs(W, prompt, pos)[0].numpy()
    assert (
        stats.chisquare(np.bincount(out[:, 0].numpy(), minlength=k), 20000 * p1).pvalue
        > P_MIN
    )
    with pytest.raises(ValueError, match="pos"):
        ccmc.generate(
            W, prompt, 4, n_traj=2, pos=pos, seed=1
        )  # positions T .. T+3 need 10 entries


@pytest.mark.parametrize("positional", [False, True])
def test_counts_generator_is_the_attention_layer(positional):
    k, T, L = 5, 7, 40
    W = ccmc.random_W(k, sigma=1.5, seed=2)
    pos = torch.linspace(-1, 2, T + L, dtype=torch.float64) if positional else None
    prompt = ccmc.sample_prompts(16, T, k, seed=3)
    fast = ccmc.generate(W, prompt, L, pos=pos, seed=5)
    slow = ccmc.generate(W, prompt, L, pos=pos, seed=5, via="attention")
    assert torch.equal(fast, slow)


def test_generation_is_deterministic_and_stays_in_the_prompt():
    W = ccmc.random_W(8, sigma=1.0, diag=1.0, seed=0)
    prompt = torch.tensor([1, 5, 5, 6])
    a = ccmc.generate(W, prompt, 300, n_traj=32, seed=11)
    assert torch.equal(a, ccmc.generate(W, prompt, 300, n_traj=32, seed=11))
    assert torch.equal(
        a,
        ccmc.generate(
            W, prompt, 300, n_traj=32, generator=torch.Generator().manual_seed(11)
        ),
    )
    assert not torch.equal(a, ccmc.generate(W, prompt, 300, n_traj=32, seed=12))
    assert set(a.unique().tolist()) <= {1, 5, 6}
    assert a.shape == (32, 300) and a.dtype == torch.long


def test_markov_comparison_has_the_base_kernel(markov_chi2):
    W = ccmc.random_W(4, seed=9)
    x = ccmc.markov_comparison(W, 64, 500, seed=0)
    assert torch.equal(x, ccmc.markov_comparison(W, 64, 500, seed=0))
    counts = np.zeros((4, 4))
    np.add.at(counts, (x[:, :-1].numpy(), x[:, 1:].numpy()), 1)
    assert markov_chi2(counts, ccmc.base_chain(W).numpy())[2] > P_MIN


def test_self_reinforcing_attention_collapses_and_the_markov_chain_does_not():
    k = 6
    W = ccmc.random_W(k, sigma=0.3, diag=3.0, seed=0)
    assert ccmc.stable_vertices(W) == list(range(k))
    tokens = ccmc.generate(
        W, ccmc.balanced_prompt(k, 12, seed=0), 1500, n_traj=64, seed=0
    )
    end = ccmc.trajectory_stats(tokens, k, window=100, at=[1500])
    markov = ccmc.trajectory_stats(
        ccmc.markov_comparison(W, 64, 1500, seed=0), k, window=100, at=[1500]
    )
    assert end["top_share"].mean() > 0.9 and markov["top_share"].mean() < 0.6
    assert end["distinct"].mean() < 2 and markov["distinct"].mean() > k - 0.5


# ---------------------------------------------------- statistics, stability, mean field
def test_trajectory_stats_by_hand():
    tokens = torch.tensor([[0, 0, 1, 2], [3, 3, 3, 3]])
    s = ccmc.trajectory_stats(tokens, 4, window=2, at=[1, 2, 3, 4])
    assert s["n"].tolist() == [1, 2, 3, 4]
    assert s["distinct"].tolist() == [[1, 1, 2, 2], [1, 1, 1, 1]]
    assert np.allclose(s["top_share"], [[1, 1, 0.5, 0.5], [1, 1, 1, 1]])
    assert np.allclose(s["entropy"], [[0, 0, math.log(2), math.log(2)], [0, 0, 0, 0]])
    whole = ccmc.trajectory_stats(tokens, 4, at=[4])
    assert whole["distinct"][:, 0].tolist() == [3, 1]
    assert np.allclose(
        whole["entropy"][0, 0], -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    )
    assert ccmc.trajectory_stats(tokens, 4)["n"].tolist() == [1, 2, 3, 4]


def test_stable_vertices_by_hand():
    W = torch.tensor(
        [[2.0, 1.0, 0.0], [0.0, 1.0, 1.0], [0.0, 3.0, 0.5]], dtype=torch.float64
    )
    assert ccmc.stable_vertices(W) == [0]


def test_context_law_closed_forms():
    c = np.array([0.5, 0.3, 0.2, 0.0])
    assert np.allclose(
        ccmc.context_law(torch.zeros(4, 4), c), c
    )  # W = 0: a Pólya urn, nu(c) = c
    # symmetric W: Q_c is reversible and nu_i ∝ c_i (exp(W) c)_i
    A = ccmc.random_W(4, seed=1)
    S = ((A + A.T) / 2).numpy()
    expected = c * (np.exp(S) @ c)
    assert np.allclose(
        ccmc.context_law(torch.tensor(S), c), expected / expected.sum(), atol=1e-12
    )


def test_mean_field_goes_to_the_winner_and_keeps_a_polya_urn_still():
    W = 2.0 * torch.eye(3, dtype=torch.float64)
    c = ccmc.mean_field(W, [0.5, 0.3, 0.2], [0.0, 1.0, 20.0])
    assert np.allclose(c[0], [0.5, 0.3, 0.2]) and c[2, 0] > 0.999
    assert np.allclose(
        ccmc.mean_field(torch.zeros(3, 3), [0.5, 0.3, 0.2], [10.0])[0], [0.5, 0.3, 0.2]
    )


# ---------------------------------------------------------------- learning W
def test_likelihood_ignores_row_constants():
    W = ccmc.random_W(4, seed=2)
    x = ccmc.sample_prompts(500, 6, 4, seed=3)
    y = ccmc.sample_next(W, x, seed=4)
    shifted = W + torch.arange(4, dtype=torch.float64)[:, None] * 3.0
    assert abs(ccmc.nll(W, x, y) - ccmc.nll(shifted, x, y)) < 1e-12
    assert ccmc.estimation_error(shifted, W) < 1e-12


def test_mle_recovers_W_with_shrinking_error():
    k, T = 4, 6
    W = ccmc.random_W(k, sigma=1.0, seed=5)
    g = torch.Generator().manual_seed(0)
    errors = {}
    for n in (2000, 32000):
        x = ccmc.sample_prompts(n, T, k, generator=g)
        y = ccmc.sample_next(W, x, generator=g)
        W_hat = ccmc.fit_W(x, y, k)
        assert torch.allclose(
            W_hat.mean(1), torch.zeros(k, dtype=torch.float64), atol=1e-12
        )
        assert (
            ccmc.nll(W_hat, x, y) <= ccmc.nll(W, x, y) + 1e-9
        )  # it is the maximum of the likelihood
        errors[n] = ccmc.estimation_error(W_hat, W)
    assert errors[32000] < 0.5 * errors[2000]  # n^(-1/2): a factor 4 expected
    assert errors[32000] < 0.25


def test_mle_with_positional_term():
    k, T = 3, 8
    W = ccmc.random_W(k, seed=6)
    pos = torch.linspace(0, 2, T, dtype=torch.float64)
    x = ccmc.sample_prompts(20000, T, k, seed=1)
    y = ccmc.sample_next(W, x, pos=pos, seed=2)
    assert ccmc.estimation_error(ccmc.fit_W(x, y, k, pos=pos), W) < 0.15


def test_estimation_curve_is_the_loop_over_fits_on_one_generator():
    k, T = 3, 5
    W = ccmc.random_W(k, seed=7)
    curve = ccmc.estimation_curve(W, T, (300, 3000), 2, seed=11)
    g = torch.Generator().manual_seed(
        11
    )  # the same draws, by hand, in the documented order
    for n in (300, 3000):
        expected = []
        for _ in range(2):
            x = torch.randint(0, k, (n, T), generator=g)
            probs = _ccmc_by_hand(W, x)
            y = torch.multinomial(probs, 1, generator=g).squeeze(1)
            expected.append(ccmc.estimation_error(ccmc.fit_W(x, y, k), W))
        assert np.array_equal(curve[n], np.array(expected))
    assert list(curve) == [300, 3000] and curve[3000].mean() < curve[300].mean()
    with pytest.raises(ValueError, match="sizes"):
        ccmc.estimation_curve(W, T, (), 2)
    with pytest.raises(ValueError, match="reps"):
        ccmc.estimation_curve(W, T, (10,), 0)


# ---------------------------------------------------------------- sizes and errors
def test_sizes_cover_every_scale():
    assert set(ccmc.SIZES) == set(PRESETS)
    for name, scale in PRESETS.items():
        assert ccmc.sizes(scale) is ccmc.sizes(name)
    assert ccmc.sizes("smoke").gen_len < ccmc.sizes("cpu").gen_len


GOOD = dict(
    k=8,
    prompt_len=16,
    sigma=1.0,
    beta=2.0,
    gamma=2.0,
    seed=0,
    n_traj=None,
    gen_len=None,
)


@pytest.mark.parametrize(
    "name,value",
    [
        ("k", 1),
        ("k", 65),
        ("k", 4.0),
        ("k", True),
        ("prompt_len", 7),
        ("prompt_len", 257),
        ("sigma", 0.0),
        ("sigma", math.nan),
        ("sigma", 5.5),
        ("beta", -0.1),
        ("beta", "2"),
        ("gamma", 21.0),
        ("gamma", -math.inf),
        ("seed", -1),
        ("seed", 0.5),
        ("n_traj", 9),
        ("gen_len", 100.0),
    ],
)
def test_chapter_parameters_out_of_range_are_named(name, value):
    check_chapter_parameters("ccmc", **GOOD)  # the chapter's defaults pass
    check_chapter_parameters(
        "ccmc",
        **{**GOOD, "k": 3, "prompt_len": 3, "n_traj": 10, "gen_len": 10, "gamma": -20},
    )
    with pytest.raises(ValueError, match=f"^{name} must be"):
        check_chapter_parameters("ccmc", **{**GOOD, name: value})


def test_bad_parameters_raise():
    W = ccmc.random_W(3)
    x = torch.tensor([[0, 1, 2]])
    with pytest.raises(ValueError, match="k"):
        ccmc.SelfAttentionSampler(torch.zeros(1, 1))
    with pytest.raises(ValueError, match="square"):
        ccmc.ccmc_probs(torch.zeros(3, 4), x)
    with pytest.raises(ValueError, match="square"):
        ccmc.base_chain(torch.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        ccmc.ccmc_probs(torch.tensor([[0.0, math.nan], [0.0, 0.0]]), [[0, 1]])
    with pytest.raises(ValueError, match="tokens must be in"):
        ccmc.ccmc_probs(W, [[0, 3]])
    with pytest.raises(ValueError, match="tokens must be in"):
        ccmc.SelfAttentionSampler(W)(torch.tensor([[-1, 0]]))
    with pytest.raises(ValueError, match="non-empty"):
        ccmc.ccmc_probs(W, torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="integer"):
        ccmc.ccmc_probs(W, torch.tensor([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="pos"):
        ccmc.ccmc_probs(W, x, pos=torch.zeros(2))
    with pytest.raises(ValueError, match="length"):
        ccmc.generate(W, x, 0)
    with pytest.raises(ValueError, match="n_traj"):
        ccmc.generate(W, torch.zeros(2, 3, dtype=torch.long), 5, n_traj=3)
    with pytest.raises(ValueError, match="either seed or generator"):
        ccmc.generate(W, x, 5, seed=0, generator=torch.Generator())
    with pytest.raises(ValueError, match="via"):
        ccmc.generate(W, x, 5, via="magic")
    with pytest.raises(ValueError, match="length >= k"):
        ccmc.balanced_prompt(5, 3)
    with pytest.raises(ValueError, match="k must be"):
        ccmc.random_W(1)
    with pytest.raises(ValueError, match="window"):
        ccmc.trajectory_stats(x, 3, window=0)
    with pytest.raises(ValueError, match="at must be"):
        ccmc.trajectory_stats(x, 3, at=[4])
    with pytest.raises(ValueError, match="occur in its prompt"):
        ccmc.fit_W(torch.tensor([[0, 1], [1, 1]]), torch.tensor([2, 1]), 3)
    with pytest.raises(ValueError, match="one output per prompt"):
        ccmc.nll(W, x, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="ridge"):
        ccmc.fit_W(x, torch.tensor([0]), 3, ridge=0.0)
    with pytest.raises(ValueError, match="scale"):
        ccmc.sizes("huge")
    with pytest.raises(ValueError, match="shares"):
        ccmc.context_law(W, [0.0, 0.0, 0.0])


# ----------------------------------------------------------- the chapter's measurements
def test_equivalence_measures_the_theorem():
    W = ccmc.random_W(5, seed=3)
    x = ccmc.sample_prompts(40, 6, 5, seed=4)
    pos = 2.0 * torch.arange(6, dtype=torch.float64) / 6
    eq = ccmc.equivalence(W, x, pos, seed=5)
    assert eq["max_diff"] < 1e-12 and eq["max_diff_pos"] < 1e-12
    assert eq["base_diff"] < 1e-12 and eq["absent_mass"] == 0.0 and eq["sums_to_one"]
    missing = [len(set(row.tolist())) < 5 for row in x]  # by hand
    assert eq["absent_share"] == pytest.approx(np.mean(missing)) and 0 < np.mean(
        missing
    )
    # the formula it checks is the hand-written one
    by_hand = _ccmc_by_hand(W, x)
    assert torch.allclose(ccmc.SelfAttentionSampler(W)(x), by_hand, atol=1e-12)


def test_estimation_slope_reads_the_rate_off_the_largest_n():
    ns = [100, 1000, 10_000, 100_000, 1_000_000]
    half = {n: np.full(3, 2.0 * n**-0.5) for n in ns}
    assert ccmc.estimation_slope(half) == pytest.approx(-0.5)
    bent = {n: np.full(3, n**-1.0 if n < 10_000 else 0.01 * n**-0.5) for n in ns}
    assert ccmc.estimation_slope(bent, n_last=3) == pytest.approx(-0.5)
    assert ccmc.estimation_slope(bent, n_last=5) < -0.5
    with pytest.raises(ValueError, match="two sample sizes"):
        ccmc.estimation_slope({10: np.ones(2)})


def test_generation_run_and_final_window_see_a_collapse():
    k, L, window = 4, 300, 50
    W = 6.0 * torch.eye(k, dtype=torch.float64)  # the base chain nearly always stays
    prompt = ccmc.balanced_prompt(k, 8, seed=0)
    at = np.array([window, L])
    run = ccmc.generation_run(W, prompt, L, n_traj=16, window=window, at=at, seed=7)
    assert torch.equal(run["tokens"], ccmc.generate(W, prompt, L, n_traj=16, seed=7))
    end = ccmc.final_window(run, window)
    last = run["tokens"][:, -window:].numpy()
    top = np.array([np.bincount(r, minlength=k).max() / window for r in last])
    assert end["share"] == pytest.approx(top.mean()) and end["share"] > 0.9
    assert end["winners"].sum() == 16 and end["all_single_stable"]
    assert end["single"] == pytest.approx(np.mean([len(set(r)) == 1 for r in last]))
    assert run["stable"] == list(range(k))
    # the Markov chain with the same (sticky) base kernel still switches now and then
    assert end["distinct_markov"] >= end["distinct"]


def test_context_shares_by_hand():
    k = 3
    tokens = torch.tensor([[0, 1, 1, 2], [2, 2, 2, 2]])
    prompt = torch.tensor([0, 1, 2])
    shares = ccmc.context_shares(tokens, prompt, k, [1, 2, 4])
    for row, n in zip(shares, [1, 2, 4]):
        expected = np.mean(
            [
                np.bincount(np.concatenate([prompt.numpy(), t[:n]]), minlength=k)
                / (3 + n)
                for t in tokens.numpy()
            ],
            axis=0,
        )
        assert np.allclose(row, expected)


def test_chapter_parameters_go_through_the_one_helper():
    check_chapter_parameters("ccmc", **GOOD, scale="auto")
    with pytest.raises(
        ValueError, match=r"^prompt_len must be an integer in \[8, 256\]"
    ):
        check_chapter_parameters("ccmc", **{**GOOD, "prompt_len": 7})
    with pytest.raises(ValueError, match="^scale must be one of"):
        check_chapter_parameters("ccmc", **GOOD, scale="huge")
    with pytest.raises(ValueError, match="no parameter"):
        check_chapter_parameters("ccmc", **GOOD, p=0.5)


def test_token_counts_equal_a_one_hot_sum():
    x = ccmc.sample_prompts(500, 9, 5, seed=3)
    slow = torch.nn.functional.one_hot(x, 5).sum(1).double()
    assert torch.equal(ccmc.token_counts(x, 5), slow)


def test_fit_W_is_the_stationary_point_of_the_penalised_likelihood():
    """Independent of the Newton steps' bookkeeping: autograd's gradient of
    -1/n Σ log P_W(y|x) + ridge/2 ‖W‖² vanishes at the fitted W."""
    k, T, ridge = 5, 7, 1e-3
    W = ccmc.random_W(k, sigma=1.0, seed=8)
    x = ccmc.sample_prompts(6000, T, k, seed=9)
    pos = torch.linspace(0, 1, T, dtype=torch.float64)
    for p in (None, pos):
        y = ccmc.sample_next(W, x, pos=p, seed=10)
        W_hat = ccmc.fit_W(x, y, k, pos=p, ridge=ridge).requires_grad_(True)
        c = torch.zeros(len(x), k, dtype=torch.float64)
        weight = torch.ones(x.shape, dtype=torch.float64) if p is None else p.exp()
        c = c.scatter_add(1, x, weight.expand(x.shape))
        logits = c.log() + W_hat[x[:, -1]]
        f = (
            torch.nn.functional.cross_entropy(logits, y)
            + 0.5 * ridge * (W_hat**2).sum()
        )
        (g,) = torch.autograd.grad(f, W_hat)
        assert g.abs().max() < 1e-9


def test_the_generation_summary_is_the_runs_own_reductions(tmp_path, monkeypatch):
    """The CCMC chapter's derived value (measures.generation) against
    :func:`ccmc.generation_run` itself: its bands are the mean and the 10 and 90 %
    quantiles over the trajectories at the same lengths, its end the run's
    final_window, its shares the run's tokens' context_shares; kept in the result
    store and read back equal."""
    from markovlib.companion.measures import generation as g
    from markovlib.runs.derived import derived, same_value

    monkeypatch.setenv("MARKOVLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("MARKOVLIB_DERIVED_SHIPPED", "0")
    W, L, window = ccmc.random_W(4, sigma=1.0, seed=0) + 3 * torch.eye(4), 300, 20
    prompt = ccmc.balanced_prompt(4, 8, seed=2)
    got = derived(g.generation_summary, W, prompt, L, n_traj=16, window=window, seed=7)
    at = np.unique(np.geomspace(window, L, g.N_LENGTHS).round().astype(int))
    run = ccmc.generation_run(W, prompt, L, n_traj=16, window=window, at=at, seed=7)
    for src in ("stats", "markov"):
        assert np.array_equal(got[src]["n"], run[src]["n"]) and got[src]["n"][0] == 20
        for stat in ("distinct", "entropy", "top_share"):
            values, band = run[src][stat], got[src][stat]
            assert np.allclose(band["mean"], values.mean(0), rtol=0, atol=1e-12)
            ordered = np.sort(values, axis=0)  # the quantile between two order stats
            for q, edge in zip(g.BAND, ("low", "high")):
                h = (len(values) - 1) * q
                lo, hi = ordered[math.floor(h)], ordered[math.ceil(h)]
                want = lo + (h - math.floor(h)) * (hi - lo)
                assert np.allclose(band[edge], want, rtol=0, atol=1e-12)
    end = ccmc.final_window(run, window)
    assert got["end"]["share"] == end["share"] and got["end"]["single"] == end["single"]
    assert np.array_equal(got["end"]["winners"], end["winners"])
    assert got["stable"] == run["stable"] and np.allclose(got["pi"], run["pi"])
    checkpoints = got["checkpoints"]
    assert checkpoints[0] == 1 and checkpoints[-1] == L
    shares = ccmc.context_shares(run["tokens"], prompt, 4, checkpoints)
    assert np.allclose(got["context_shares"], shares, rtol=0, atol=1e-12)
    assert len(list((tmp_path / "results").rglob("*.json.gz"))) == 1  # kept

    def not_again(*args, **kwargs):
        raise AssertionError("generated again: the kept value was not read")

    monkeypatch.setattr(ccmc, "generation_run", not_again)
    again = derived(
        g.generation_summary, W, prompt, L, n_traj=16, window=window, seed=7
    )
    assert same_value(again, got) and again["end"]["winners"].dtype == np.int64
