"""markovlib.chains: the parallel sampler (statistically and exactly), the closed forms,
and input validation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from markovlib.chains import (
    HigherOrderChain,
    MarkovChain,
    _binary_paths,
    _blocked_paths,
    _buckets,
    _interval_grid,
    binary,
    binary_entropy,
    lag_switching,
    random_kth_order,
    symmetric,
)

# a correct sampler with a fixed seed passes a test at this level essentially always
P_MIN = 1e-4
Z_MAX = 5.0


def _kstate_chains(random_kernel):
    return {
        "symmetric(5,0.3)": symmetric(5, 0.3),
        "random 3x3": MarkovChain(random_kernel(3, seed=1)),
        "random 4x4": MarkovChain(random_kernel(4, seed=2)),
    }


def _z(successes: int, n: int, p: float) -> float:
    return (successes - n * p) / math.sqrt(n * p * (1 - p))


# --------------------------------------------------------------- transition frequencies
@pytest.mark.parametrize("p,q", [(0.2, 0.3), (0.5, 0.8), (0.9, 0.05)])
def test_binary_transition_frequencies_match_kernel(p, q, markov_chi2):
    chain = binary(p, q)
    x = chain.sample(256, 800, seed=11)
    counts = chain.transition_counts(x)
    assert counts.sum() == 256 * 799
    _, _, pval = markov_chi2(counts, chain.P)
    assert pval > P_MIN
    # and each switching probability separately, as a binomial z-score
    assert abs(_z(counts[0, 1], counts[0].sum(), p)) < Z_MAX
    assert abs(_z(counts[1, 0], counts[1].sum(), q)) < Z_MAX


@pytest.mark.parametrize("name", ["symmetric(5,0.3)", "random 3x3", "random 4x4"])
def test_kstate_transition_frequencies_match_kernel(name, random_kernel, markov_chi2):
    chain = _kstate_chains(random_kernel)[name]
    x = chain.sample(
        200, 1000, seed=5
    )  # 999 steps: 32 blocks of 31, the last one padded
    counts = chain.transition_counts(x)
    assert counts.sum() == 200 * 999
    _, _, pval = markov_chi2(counts, chain.P)
    assert pval > P_MIN


@pytest.mark.parametrize("name", ["binary", "symmetric(5,0.3)", "random 4x4"])
def test_perturbed_kernel_is_rejected(name, random_kernel, markov_chi2):
    """The same statistic has power: it rejects a kernel that is 0.03 off in one row."""
    chain = (
        binary(0.3, 0.6) if name == "binary" else _kstate_chains(random_kernel)[name]
    )
    x = chain.sample(200, 1000, seed=5)
    counts = chain.transition_counts(x)
    wrong = chain.P.copy()
    j = int(np.argmax(wrong[0]))
    other = (j + 1) % chain.k
    wrong[0, j] -= 0.03
    wrong[0, other] += 0.03
    _, _, pval_right = markov_chi2(counts, chain.P)
    _, _, pval_wrong = markov_chi2(counts, wrong)
    assert pval_right > P_MIN
    assert pval_wrong < 1e-8


def test_transition_counts_is_exact():
    chain = symmetric(3, 0.5)
    x = torch.tensor([[0, 1, 1, 2], [2, 0, 0, 0]])
    expected = np.zeros((3, 3), dtype=np.int64)
    for row in x.tolist():
        for a, b in zip(row[:-1], row[1:]):
            expected[a, b] += 1
    np.testing.assert_array_equal(chain.transition_counts(x), expected)


# -------------------------------------------------------- exact path law on short paths
def _path_probabilities(
    P: np.ndarray, pi0: np.ndarray, length: int
) -> dict[tuple, float]:
    k = P.shape[0]
    out = {}
    for path in itertools.product(range(k), repeat=length):
        prob = pi0[path[0]]
        for a, b in zip(path[:-1], path[1:]):
            prob *= P[a, b]
        out[path] = prob
    return out


@pytest.mark.parametrize("start", ["stationary", "uniform"])
@pytest.mark.parametrize("which,length", [("binary", 6), ("kstate", 4)])
def test_joint_law_of_short_paths(which, length, start):
    """Every path of a short length appears with frequency pi0(x_1) prod P(x_n, x_n+1)
    (i.i.d. over the batch)."""
    P = (
        np.array([[0.7, 0.3], [0.6, 0.4]])
        if which == "binary"
        else np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.25, 0.25, 0.5]])
    )
    chain = MarkovChain(P)
    n = 40_000
    x = chain.sample(n, length, seed=3, start=start)
    k = chain.k
    pi0 = chain.stationary() if start == "stationary" else np.full(k, 1 / k)
    law = _path_probabilities(P, pi0, length)
    codes = (x * (k ** torch.arange(length - 1, -1, -1))).sum(1)
    observed = np.bincount(codes.numpy(), minlength=k**length)
    expected = (
        np.array([law[path] for path in itertools.product(range(k), repeat=length)]) * n
    )
    assert expected.min() >= 5  # chi-square approximation is valid
    _, pval = stats.chisquare(observed, expected)
    assert pval > P_MIN


# ---------------------------------------- white-box: scan and closed form vs sequential
def _sequential_from_uniforms(
    P: np.ndarray, x0: torch.Tensor, u: torch.Tensor
) -> torch.Tensor:
    """x_{n+1} = F^{-1}_{x_n}(U_{n+1}), one position at a time."""
    cdf = torch.tensor(np.cumsum(P, 1)[:, :-1], dtype=torch.float32)
    states = [x0]
    for n in range(1, u.shape[1]):
        states.append((u[:, n, None] >= cdf[states[-1]]).sum(-1))
    return torch.stack(states, 1)


@pytest.mark.parametrize("length", [2, 3, 4, 5, 10, 17, 65, 257, 1025])
@pytest.mark.parametrize(
    "P",
    [symmetric(3, 0.6).P, np.random.default_rng(4).dirichlet(np.ones(6), size=6)],
    ids=["symmetric3", "dirichlet6"],
)
def test_blocked_paths_equal_sequential(length, P):
    """Lengths with every block shape: exact squares, a padded last block, a single
    step."""
    chain = MarkovChain(P)
    g = torch.Generator().manual_seed(length)
    u = torch.rand(32, length, generator=g)
    x0 = torch.randint(0, chain.k, (32,), generator=g)
    _, _, lo, inner, maps = chain._tables(torch.device("cpu"))
    got = _blocked_paths(x0, u[:, 1:].contiguous(), lo, inner, maps)
    assert torch.equal(got, _sequential_from_uniforms(chain.P, x0, u))


def test_interval_grid_equals_bucketize():
    """The grid lookup counts #{breaks <= u} exactly like torch.bucketize(right=True):
    breaks on cell edges, several in one cell, duplicates, 0 and 1, probed at, just
    below and just above every break and edge."""
    cells = 16
    breaks = np.sort(
        np.array(
            [0.0, 0.0625, 0.1, 0.1001, 0.10011, 0.5, 0.5, 0.75, 0.999, 1.0],
            dtype=np.float32,
        )
    )
    lo, inner = (torch.tensor(a) for a in _interval_grid(breaks, cells=cells))
    assert inner.shape[1] == 3  # 0.1, 0.1001, 0.10011 share cell 1
    b = torch.tensor(breaks)
    probes = torch.cat(
        [
            b,
            torch.arange(cells) / cells,
            torch.rand(20_000, generator=torch.Generator().manual_seed(1)),
        ]
    )
    probes = torch.cat(
        [
            probes,
            torch.nextafter(probes, torch.tensor(0.0)),
            torch.nextafter(probes, torch.tensor(1.0)),
        ]
    )
    probes = probes[(probes >= 0) & (probes < 1)].contiguous()
    assert torch.equal(
        _buckets(probes, lo, inner.T.contiguous()),
        torch.bucketize(probes, b, right=True),
    )


@pytest.mark.parametrize(
    "p,q", [(0.2, 0.3), (0.7, 0.9), (1.0, 1.0), (0.0, 0.4), (0.5, 0.5)]
)
@pytest.mark.parametrize("length", [2, 5, 100])
def test_binary_closed_form_equals_sequential(p, q, length):
    chain = binary(p, q)
    g = torch.Generator().manual_seed(17)
    u = torch.rand(64, length, generator=g)
    x0 = torch.randint(0, 2, (64,), generator=g)
    cdf = torch.tensor(chain._cdf, dtype=torch.float32)
    got = _binary_paths(x0, u.clone(), cdf[0, 0], cdf[1, 0])
    assert torch.equal(got, _sequential_from_uniforms(chain.P, x0, u))


# ---------------------------------------------------------------- start distributions
@pytest.mark.parametrize(
    "chain",
    [binary(0.2, 0.3), binary(0.9, 0.05), symmetric(4, 0.7)],
    ids=lambda c: c.name,
)
def test_stationary_start_marginals(chain):
    n = 20_000
    pi = chain.stationary()
    x1 = chain.sample(n, 1, seed=1)[:, 0]
    x = chain.sample(n, 40, seed=2)
    for column in (x1, x[:, 0], x[:, 17], x[:, -1]):
        observed = np.bincount(column.numpy(), minlength=chain.k)
        _, pval = stats.chisquare(observed, n * pi)
        assert pval > P_MIN


def test_uniform_start_is_uniform_and_differs_from_stationary():
    chain = binary(0.9, 0.05)  # pi = (0.053, 0.947): far from uniform
    n = 20_000
    x1 = chain.sample(n, 30, seed=4, start="uniform")[:, 0]
    observed = np.bincount(x1.numpy(), minlength=2)
    assert stats.chisquare(observed, [n / 2, n / 2]).pvalue > P_MIN
    assert stats.chisquare(observed, n * chain.stationary()).pvalue < 1e-10
    # k-state uniform start
    c5 = symmetric(5, 0.2)
    observed5 = np.bincount(
        c5.sample(n, 3, seed=4, start="uniform")[:, 0].numpy(), minlength=5
    )
    assert stats.chisquare(observed5, np.full(5, n / 5)).pvalue > P_MIN


def test_uniform_start_later_position_follows_the_chain():
    """From a uniform start, x_2 has law (1/2, 1/2) P, not pi."""
    chain = binary(0.9, 0.05)
    n = 20_000
    x2 = chain.sample(n, 2, seed=8, start="uniform")[:, 1]
    law = np.array([0.5, 0.5]) @ chain.P
    observed = np.bincount(x2.numpy(), minlength=2)
    assert stats.chisquare(observed, n * law).pvalue > P_MIN


# ---------------------------------------------------------- first-order Markov property
def test_binary_sampler_is_first_order():
    """P(x_{n+1}=1 | x_n=b, x_{n-1}=a) does not depend on a: p for b=0, 1-q for b=1."""
    p, q = 0.3, 0.6  # p + q != 1: x_{n-1} is informative about x_n
    chain = binary(p, q)
    x = chain.sample(400, 500, seed=21).numpy()
    a, b, c = x[:, :-2].ravel(), x[:, 1:-1].ravel(), x[:, 2:].ravel()
    for state, target in ((0, p), (1, 1 - q)):
        table = []
        for prev in (0, 1):
            sel = (b == state) & (a == prev)
            ones, total = int(c[sel].sum()), int(sel.sum())
            assert total > 5_000
            assert abs(_z(ones, total, target)) < Z_MAX
            table.append([ones, total - ones])
        # the two conditional laws are the same (2x2 contingency test)
        assert stats.chi2_contingency(table).pvalue > P_MIN


def test_kstate_sampler_is_first_order(random_kernel):
    """For a random 3-state kernel, the successor law given (x_{n-1}, x_n) = (a, b) is
    P[b] for every a."""
    P = random_kernel(3, seed=1)
    chain = MarkovChain(P)
    x = chain.sample(300, 600, seed=22).numpy()
    a, b, c = x[:, :-2].ravel(), x[:, 1:-1].ravel(), x[:, 2:].ravel()
    for prev, state in itertools.product(range(3), repeat=2):
        sel = (a == prev) & (b == state)
        observed = np.bincount(c[sel], minlength=3)
        assert stats.chisquare(observed, observed.sum() * P[state]).pvalue > P_MIN


# ---------------------------------------------------------------- edge chains
@pytest.mark.parametrize("start", ["stationary", "uniform"])
def test_deterministic_alternation(start):
    chain = binary(1.0, 1.0)
    np.testing.assert_allclose(chain.stationary(), [0.5, 0.5], atol=1e-12)
    x = chain.sample(64, 33, seed=0, start=start)
    assert torch.equal(x[:, 1:], 1 - x[:, :-1])
    assert set(x[:, 0].tolist()) == {0, 1}


def test_absorbing_in_zero():
    p, q = 0.0, 0.4
    chain = binary(p, q)
    np.testing.assert_allclose(chain.stationary(), [1.0, 0.0], atol=1e-12)
    assert chain.entropy_rate() == pytest.approx(0.0, abs=1e-12)
    assert torch.all(chain.sample(256, 50, seed=0) == 0)  # stationary start: always 0
    x = chain.sample(2_000, 50, seed=1, start="uniform")
    counts = chain.transition_counts(x)
    assert counts[0, 1] == 0  # never leaves 0
    assert abs(_z(counts[1, 0], counts[1].sum(), q)) < Z_MAX  # leaves 1 with prob q
    # every path is 1…1 0…0: non-increasing
    assert torch.all(x[:, 1:] <= x[:, :-1])


def test_absorbing_in_one():
    chain = binary(0.35, 0.0)
    np.testing.assert_allclose(chain.stationary(), [0.0, 1.0], atol=1e-12)
    x = chain.sample(1_000, 40, seed=2, start="uniform")
    assert torch.all(x[:, 1:] >= x[:, :-1])
    counts = chain.transition_counts(x)
    assert counts[1, 0] == 0 and abs(_z(counts[0, 1], counts[0].sum(), 0.35)) < Z_MAX


# ------------------------------------------------------ seeds, generators, dtype, shape
@pytest.mark.parametrize(
    "chain", [binary(0.2, 0.3), symmetric(5, 0.3)], ids=lambda c: c.name
)
def test_seeding(chain):
    a = chain.sample(8, 100, seed=123)
    b = chain.sample(8, 100, seed=123)
    c = chain.sample(8, 100, seed=124)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    g = torch.Generator().manual_seed(123)
    first = chain.sample(8, 100, generator=g)
    second = chain.sample(8, 100, generator=g)
    assert torch.equal(first, a)  # seed=s is the same stream as a generator seeded s
    assert not torch.equal(first, second)  # the generator advances
    torch.manual_seed(99)
    d = chain.sample(8, 100)
    torch.manual_seed(99)
    assert torch.equal(d, chain.sample(8, 100))  # seed=None: torch's global RNG


def test_seed_and_generator_together_raise():
    with pytest.raises(ValueError, match="seed"):
        binary(0.2, 0.3).sample(2, 5, seed=0, generator=torch.Generator())


@pytest.mark.parametrize(
    "chain", [binary(0.2, 0.3), symmetric(5, 0.3)], ids=lambda c: c.name
)
@pytest.mark.parametrize("batch,length", [(3, 1), (1, 2), (4, 17)])
def test_dtype_shape_and_range(chain, batch, length):
    for start in ("stationary", "uniform"):
        x = chain.sample(batch, length, seed=0, start=start)
        assert x.dtype == torch.int64
        assert x.shape == (batch, length)
        assert int(x.min()) >= 0 and int(x.max()) < chain.k


def test_numpy_integer_sizes_are_accepted():
    x = binary(0.2, 0.3).sample(np.int64(3), np.int32(4), seed=0)
    assert x.shape == (3, 4)


# --------------------------------------------- closed forms vs independent computations
def _independent_pi(P: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eig(P.T)
    vec = np.real(v[:, np.argmin(np.abs(w - 1))])
    return vec / vec.sum()


def _independent_rates(P: np.ndarray) -> tuple[float, float]:
    pi = _independent_pi(P)
    k = P.shape[0]
    h_rate = 0.0
    for i in range(k):
        for j in range(k):
            if P[i, j] > 0:
                h_rate -= pi[i] * P[i, j] * math.log(P[i, j])
    h_pi = -sum(a * math.log(a) for a in pi if a > 0)
    return h_rate, h_pi


def _chains_for_entropy(random_kernel):
    return [
        binary(0.5, 0.8),
        binary(0.2, 0.3),
        binary(0.9, 0.05),
        binary(0.3, 0.7),
        symmetric(5, 0.1),
        symmetric(3, 0.7),
        MarkovChain(random_kernel(4, seed=2)),
        MarkovChain(random_kernel(6, seed=3)),
    ]


def test_entropies_match_independent_computation(random_kernel):
    for chain in _chains_for_entropy(random_kernel):
        h_rate, h_pi = _independent_rates(chain.P)
        assert chain.entropy_rate() == pytest.approx(h_rate, abs=1e-10), chain.name
        assert chain.unigram_entropy() == pytest.approx(h_pi, abs=1e-10), chain.name
        np.testing.assert_allclose(
            chain.stationary(), _independent_pi(chain.P), atol=1e-10
        )
        np.testing.assert_allclose(
            chain.stationary() @ chain.P, chain.stationary(), atol=1e-12
        )


@pytest.mark.parametrize(
    "p,q,h_rate,h_pi", [(0.5, 0.8, 0.6190, 0.6663), (0.2, 0.3, 0.5446, 0.6730)]
)
def test_paper_check_values_binary(p, q, h_rate, h_pi):
    chain = binary(p, q)
    assert chain.entropy_rate() == pytest.approx(h_rate, abs=1e-4)
    assert chain.unigram_entropy() == pytest.approx(h_pi, abs=1e-4)
    # paper Sec. 2: H_rate = pi_0 h(p) + pi_1 h(q), H(pi) = h(pi_1)
    pi = chain.stationary()
    assert chain.entropy_rate() == pytest.approx(
        pi[0] * binary_entropy(p) + pi[1] * binary_entropy(q), abs=1e-12
    )
    assert chain.unigram_entropy() == pytest.approx(binary_entropy(pi[1]), abs=1e-12)


def test_paper_check_values_symmetric():
    chain = symmetric(5, 0.1)
    assert chain.entropy_rate() == pytest.approx(0.4637, abs=1e-4)
    assert chain.unigram_entropy() == pytest.approx(math.log(5), abs=1e-12)
    np.testing.assert_allclose(chain.stationary(), np.full(5, 0.2), atol=1e-12)
    for k, p in [(3, 0.3), (7, 0.6)]:
        expected = -(1 - p) * math.log(1 - p) - p * math.log(p / (k - 1))
        assert symmetric(k, p).entropy_rate() == pytest.approx(expected, abs=1e-12)


def test_binary_entropy_function():
    assert binary_entropy(0.5) == pytest.approx(math.log(2), abs=1e-15)
    assert binary_entropy(0.0) == 0.0 and binary_entropy(1.0) == 0.0
    np.testing.assert_allclose(
        binary_entropy(np.array([0.1, 0.9])), [0.3250829733914482] * 2, atol=1e-15
    )


@pytest.mark.parametrize(
    "p,q", [(0.2, 0.3), (0.5, 0.8), (0.9, 0.05), (1.0, 0.5), (0.3, 0.0)]
)
def test_binary_stationary_closed_form(p, q):
    np.testing.assert_allclose(
        binary(p, q).stationary(), np.array([q, p]) / (p + q), atol=1e-12
    )


def test_stationary_returns_a_copy():
    chain = binary(0.2, 0.3)
    pi = chain.stationary()
    pi[:] = 0
    np.testing.assert_allclose(chain.stationary(), [0.6, 0.4], atol=1e-12)


def test_mutual_information():
    for p, q in [
        (0.3, 0.7),
        (0.5, 0.5),
        (0.9, 0.1),
    ]:  # p + q = 1: rows equal, x_{n+1} ⟂ x_n
        assert binary(p, q).mutual_information() == pytest.approx(0.0, abs=1e-12)
    for p, q in [(0.3, 0.6), (0.5, 0.8), (0.2, 0.3), (0.9, 0.9)]:
        chain = binary(p, q)
        assert chain.mutual_information() > 1e-3
        assert chain.mutual_information() == pytest.approx(
            chain.unigram_entropy() - chain.entropy_rate(), abs=1e-15
        )
    row = [0.2, 0.5, 0.3]
    assert MarkovChain([row, row, row]).mutual_information() == pytest.approx(
        0.0, abs=1e-12
    )
    assert symmetric(4, 0.5).mutual_information() > 1e-3


def test_switching_and_repr():
    assert binary(0.2, 0.3).switching == pytest.approx(0.5)
    assert symmetric(3, 0.2).switching is None
    assert "binary" in repr(binary(0.2, 0.3)) and "P=" in repr(binary(0.2, 0.3))


def test_kernel_is_stored_row_normalised():
    chain = MarkovChain([[0.5, 0.5 + 1e-8], [0.2, 0.8]])
    np.testing.assert_allclose(chain.P.sum(1), 1.0, atol=1e-15)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize("bad", [float("nan"), -0.1, 1.5, "abc", None, float("inf")])
def test_binary_rejects_bad_p_and_q(bad):
    with pytest.raises(ValueError, match=r"^p\b"):
        binary(bad, 0.3)
    with pytest.raises(ValueError, match=r"^q\b"):
        binary(0.3, bad)


def test_binary_rejects_numeric_string():
    with pytest.raises(ValueError, match=r"^p\b"):
        binary("0.5", 0.2)


def test_binary_rejects_p_plus_q_zero():
    with pytest.raises(ValueError, match=r"p \+ q"):
        binary(0.0, 0.0)


@pytest.mark.parametrize("k", [1, 0, -2, 2.5, True, "3"])
def test_symmetric_rejects_bad_k(k):
    with pytest.raises(ValueError, match=r"^k\b"):
        symmetric(k, 0.3)


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5, float("nan")])
def test_symmetric_rejects_bad_p(p):
    with pytest.raises(ValueError, match=r"^p\b"):
        symmetric(3, p)


@pytest.mark.parametrize(
    "P,pattern",
    [
        (np.ones((2, 3)) / 3, r"^P must be a square"),
        ([0.5, 0.5], r"^P must be a square"),
        (np.ones((2, 2, 2)) / 2, r"^P must be a square"),
        ([[0.5, 0.4], [0.5, 0.5]], r"^P must be row-stochastic"),
        ([[0.6, 0.6], [0.5, 0.5]], r"^P must be row-stochastic"),
        ([[1.2, -0.2], [0.5, 0.5]], r"^P must have entries"),
        ([[float("nan"), 1.0], [0.5, 0.5]], r"^P must have entries"),
        ([[1.0]], r"^k \(number of states\)"),
    ],
)
def test_markovchain_rejects_bad_kernels(P, pattern):
    with pytest.raises(ValueError, match=pattern):
        MarkovChain(P)


@pytest.mark.parametrize("batch", [0, -1, 2.0, "4"])
def test_sample_rejects_bad_batch(batch):
    with pytest.raises(ValueError, match=r"^batch\b"):
        binary(0.2, 0.3).sample(batch, 5)


@pytest.mark.parametrize("length", [0, -3, 1.5])
def test_sample_rejects_bad_length(length):
    with pytest.raises(ValueError, match=r"^length\b"):
        symmetric(3, 0.3).sample(2, length)


@pytest.mark.parametrize("start", ["random", "", None])
def test_sample_rejects_bad_start(start):
    with pytest.raises(ValueError, match=r"^start\b"):
        binary(0.2, 0.3).sample(2, 5, start=start)


@pytest.mark.parametrize(
    "P",
    [
        symmetric(5, 0.3).P,
        np.random.default_rng(1).dirichlet(np.ones(8), size=8),
        np.array([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8], [1.0, 0.0, 0.0]]),
    ],
    ids=["symmetric5", "dirichlet8", "with-zeros"],
)
def test_interval_lookup_equals_inverse_cdf_maps(P):
    """The sampler's step maps (grid lookup of the interval between merged
    thresholds + a table lookup) equal the inverse-CDF maps computed row by row, also
    exactly at and just below every threshold."""
    chain = MarkovChain(P)
    cdf, _, lo, inner, table = chain._tables(torch.device("cpu"))
    edges = cdf.flatten()
    u = torch.cat(
        [
            torch.rand(50_000, generator=torch.Generator().manual_seed(0)),
            edges,
            torch.nextafter(edges, torch.tensor(0.0)),
            torch.tensor([0.0]),
        ]
    )
    u = u[u < 1].contiguous()
    direct = (u[:, None, None] >= cdf).sum(-1)
    assert torch.equal(table[_buckets(u, lo, inner)], direct)


# ---------------------------------------------------------------- higher-order chains
def _path_probability(chain: HigherOrderChain, path) -> float:
    """P(x_1..x_n) of one path (n >= order): first `order` symbols from the context law,
    then the kernel."""
    context = 0
    for s in path[: chain.order]:
        context = context * chain.k + s
    prob = chain.context_law()[context]
    for s in path[chain.order :]:
        prob *= chain.P[context, s]
        context = (context * chain.k + s) % chain.k**chain.order
    return prob


def _path_entropy(chain: HigherOrderChain, n: int) -> float:
    """H(x_1..x_n) by enumerating every path."""
    probs = [
        _path_probability(chain, path)
        for path in itertools.product(range(chain.k), repeat=n)
    ]
    return -sum(prob * math.log(prob) for prob in probs if prob > 0)


@pytest.mark.parametrize(
    "chain",
    [
        lag_switching(2, 0.5, 0.8),
        lag_switching(3, 0.2, 0.3),
        random_kth_order(2, 3, seed=4),
    ],
    ids=lambda c: c.name,
)
def test_higher_order_entropy_rate_is_the_increment_of_path_entropy(chain):
    """Stationary: H(x_1..x_{n+1}) - H(x_1..x_n) = H_rate for n >= order (independent
    computation by enumeration)."""
    n = chain.order + 1
    assert _path_entropy(chain, n + 1) - _path_entropy(chain, n) == pytest.approx(
        chain.entropy_rate(), abs=1e-12
    )


def test_lag_switching_interleaves_binary_chains():
    base = binary(0.5, 0.8)
    one = lag_switching(1, 0.5, 0.8)
    np.testing.assert_allclose(one.P, base.P)
    for order in (1, 2, 3):
        chain = lag_switching(order, 0.5, 0.8)
        assert chain.entropy_rate() == pytest.approx(base.entropy_rate(), abs=1e-12)
        assert chain.unigram_entropy() == pytest.approx(
            base.unigram_entropy(), abs=1e-12
        )
        np.testing.assert_allclose(chain.stationary(), base.stationary(), atol=1e-12)
    # order 1: the last symbol is the context; order >= 2: it is independent of the next
    # symbol
    assert one.bigram_entropy() == pytest.approx(base.entropy_rate(), abs=1e-12)
    assert lag_switching(2, 0.5, 0.8).bigram_entropy() == pytest.approx(
        base.unigram_entropy(), abs=1e-12
    )


@pytest.mark.parametrize(
    "chain",
    [lag_switching(2, 0.3, 0.9), random_kth_order(2, 3, alpha=0.7, seed=1)],
    ids=lambda c: c.name,
)
def test_higher_order_sampler_matches_the_kernel(chain):
    """Context → next-symbol frequencies within 4.5 binomial standard errors of P;
    symbol frequencies vs pi."""
    x = chain.sample(400, 500, seed=3).numpy()
    assert x.shape == (400, 500) and x.min() >= 0 and x.max() < chain.k
    n = chain.k**chain.order
    contexts = np.zeros_like(x[:, chain.order - 1 : -1])
    for lag in range(chain.order):
        contexts = contexts * chain.k + x[:, lag : x.shape[1] - chain.order + lag]
    nxt = x[:, chain.order :]
    counts = np.zeros((n, chain.k))
    np.add.at(counts, (contexts.ravel(), nxt.ravel()), 1)
    total = counts.sum(1, keepdims=True)
    assert total.min() > 1000
    freq = counts / total
    se = np.sqrt(chain.P * (1 - chain.P) / total) + 1e-12
    assert np.all(np.abs(freq - chain.P) < 4.5 * se + 1e-9)
    marg = np.bincount(x.ravel(), minlength=chain.k) / x.size
    assert np.abs(marg - chain.stationary()).max() < 0.01
    # the first context comes from the stationary context law
    first = np.zeros(400, dtype=np.int64)
    for lag in range(chain.order):
        first = first * chain.k + x[:, lag]
    assert (
        np.abs(np.bincount(first, minlength=n) / 400 - chain.context_law()).max() < 0.1
    )


def test_kth_order_builds_from_a_kernel():
    from markovlib.chains import kth_order

    P = random_kth_order(2, 3, seed=9).P
    chain = kth_order(P, 2, name="mine")
    np.testing.assert_allclose(chain.P, P, rtol=0, atol=1e-15)
    assert chain.name == "mine" and chain.k == 3 and chain.order == 2


def test_higher_order_sampler_short_and_seeded():
    chain = random_kth_order(3, 2, seed=0)
    assert chain.sample(5, 2, seed=1).shape == (5, 2)
    assert torch.equal(chain.sample(5, 40, seed=1), chain.sample(5, 40, seed=1))
    assert not torch.equal(chain.sample(5, 40, seed=1), chain.sample(5, 40, seed=2))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: HigherOrderChain(np.ones((3, 2)) / 2, 2), "rows"),
        (lambda: HigherOrderChain(np.ones((4, 2)), 2), "sum to 1"),
        (lambda: lag_switching(0, 0.2, 0.3), "^order"),
        (lambda: lag_switching(2, 1.5, 0.3), "^p"),
        (lambda: random_kth_order(2, 1), "^k"),
        (lambda: random_kth_order(2, 2, alpha=0.0), "^alpha"),
    ],
)
def test_higher_order_rejects_bad_parameters(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    "chain",
    [
        lag_switching(2, 0.5, 0.8),
        random_kth_order(3, 2, seed=2),
        random_kth_order(2, 3, seed=7),
    ],
    ids=lambda c: c.name,
)
def test_higher_order_next_nll_sums_to_the_path_log_probability(chain):
    """Σ_n -log P(x_{n+1} | x_1^n) + (-log P(x_1)) = -log P(x_1..x_L), with P(path)
    computed independently."""
    x = chain.sample(20, 6, seed=0)
    nll = chain.next_nll(x)
    assert nll.shape == (20, 5) and nll.dtype == torch.float64
    pi = chain.stationary()
    for row, path in zip(nll.numpy(), x.tolist()):
        assert row.sum() - math.log(pi[path[0]]) == pytest.approx(
            -math.log(_path_probability(chain, path)), abs=1e-9
        )


def test_next_nll_first_order_and_lag_one_agree():
    x = binary(0.3, 0.6).sample(8, 30, seed=1)
    torch.testing.assert_close(
        lag_switching(1, 0.3, 0.6).next_nll(x), binary(0.3, 0.6).next_nll(x)
    )


# ------------------------------------------------------- facts of the framework chapter
def test_lag_one_correlation_is_one_minus_p_minus_q():
    from markovlib.chains import lag_one_correlation

    for p, q in [(0.2, 0.3), (0.5, 0.8), (0.9, 0.9), (1.0, 0.5)]:
        assert lag_one_correlation(binary(p, q)) == pytest.approx(1 - p - q)
    x = binary(0.2, 0.3).sample(64, 2000, seed=0).double().numpy()
    empirical = np.corrcoef(x[:, :-1].ravel(), x[:, 1:].ravel())[0, 1]
    assert abs(empirical - 0.5) < 0.02  # 1 - p - q = 0.5
    with pytest.raises(ValueError, match="binary"):
        lag_one_correlation(symmetric(3, 0.2))


def test_empirical_kernel_counts_by_hand():
    from markovlib.chains import empirical_kernel

    chain = binary(0.3, 0.6)
    x = chain.sample(8, 50, seed=2)
    est = empirical_kernel(chain, x)
    counts = np.zeros((2, 2), dtype=int)
    for row in x.numpy():
        for a, b in zip(row[:-1], row[1:]):
            counts[a, b] += 1
    assert (est["counts"] == counts).all() and (est["n_from"] == counts.sum(1)).all()
    P_hat = counts / counts.sum(1, keepdims=True)
    assert np.allclose(est["P_hat"], P_hat)
    se = np.sqrt(chain.P * (1 - chain.P) / counts.sum(1, keepdims=True))
    assert np.allclose(est["stderr"], se) and np.allclose(
        est["z"], (P_hat - chain.P) / se
    )
    # a deterministic row (p = 1): no standard error, z = 0
    est = empirical_kernel(binary(1.0, 0.5), binary(1.0, 0.5).sample(4, 20, seed=0))
    assert est["stderr"][0, 1] == 0 and est["z"][0, 1] == 0


def test_marginal_law_closed_forms():
    from markovlib.chains import marginal_law

    chain = binary(0.2, 0.5)
    pi1 = chain.stationary()[1]
    n = np.arange(1, 31)
    law = marginal_law(chain, 30, start="uniform")
    assert np.allclose(law[:, 1], pi1 + (0.5 - pi1) * (1 - 0.7) ** (n - 1))
    assert np.allclose(marginal_law(chain, 5, start="stationary"), chain.stationary())
    three = marginal_law(symmetric(3, 0.4), 10)
    assert np.allclose(three.sum(1), 1) and np.allclose(three, 1 / 3)
    with pytest.raises(ValueError, match="start"):
        marginal_law(chain, 5, start="zero")


def test_entropy_grid_closed_forms():
    from markovlib.chains import entropy_grid

    values = [0.1, 0.4, 0.9]
    rate, unigram = entropy_grid(values)
    P, Q = np.meshgrid(values, values)  # rows q, columns p
    pi1 = P / (P + Q)
    assert np.allclose(rate, (1 - pi1) * binary_entropy(P) + pi1 * binary_entropy(Q))
    assert np.allclose(unigram, binary_entropy(pi1))


def test_stationary_law_is_the_fixed_point_used_by_chains_and_ccmc():
    from markovlib.ccmc import context_law
    from markovlib.chains import stationary_law

    p, q = 0.3, 0.6
    assert np.allclose(
        stationary_law([[1 - p, p], [q, 1 - q]]), [q / (p + q), p / (p + q)]
    )
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(5), size=5)
    pi = stationary_law(P)
    assert np.allclose(pi @ P, pi, atol=1e-12) and np.isclose(pi.sum(), 1.0)
    # the CCMC's frozen-shares chain Q_c(i, j) ∝ c_j exp(W[i, j]) goes through the
    # same solver
    W, c = rng.standard_normal((4, 4)), np.array([0.1, 0.2, 0.3, 0.4])
    Q = c * np.exp(W)
    Q /= Q.sum(1, keepdims=True)
    nu = context_law(W, c)
    assert np.allclose(nu @ Q, nu, atol=1e-12)
