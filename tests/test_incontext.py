"""Issue 68's maths: chains drawn per sequence, the in-context levels of the loss and
the induction-head scores, against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from markovlib.chains import MarkovChain
from markovlib.incontext import (
    InContextChain,
    bayes_nll,
    induction_score,
    kernel_rates,
    levels,
    previous_token_score,
    unigram_nll,
)


def test_kernel_rows_have_the_dirichlet_moments():
    """Each entry of a Dirichlet(α) row on k states: mean 1/k, variance
    (k - 1) / (k² (kα + 1))."""
    for k, alpha in ((2, 1.0), (3, 0.3)):
        P = InContextChain(k, alpha).kernels(
            20_000, torch.Generator().manual_seed(1), "cpu"
        )
        assert torch.allclose(P.sum(-1), torch.ones(()).double())
        var = (k - 1) / (k * k * (k * alpha + 1))
        cov = ((P[:, :, 0] - 1 / k) * (P[:, :, 1] - 1 / k)).mean().item()
        assert cov == pytest.approx(-1 / (k * k * (k * alpha + 1)), rel=0.06)
        assert P.var().item() == pytest.approx(var, rel=0.03)


def test_each_path_follows_its_own_kernel():
    """A long path's transition frequencies are its kernel's (the kernel redrawn from
    the same generator), not another path's."""
    chain = InContextChain(3, 1.0)
    x = chain.sample(2, 20_000, seed=7)
    P = chain.kernels(2, torch.Generator().manual_seed(7), "cpu")
    for b in range(2):
        counts = MarkovChain(np.full((3, 3), 1 / 3)).transition_counts(x[b : b + 1])
        freq = counts / counts.sum(1, keepdims=True)
        assert np.abs(freq - P[b].numpy()).max() < 0.03
    assert (P[0] - P[1]).abs().max().item() > 0.05  # two paths, two kernels


def _loop_nll(path: list[int], k: int, alpha: float, bigram: bool) -> list[float]:
    """The add-α predictor written out with Python counters."""
    out = []
    for n in range(len(path) - 1):
        prefix = path[: n + 1]
        if bigram:
            pairs = list(zip(prefix[:-1], prefix[1:]))
            row = [
                sum(1 for a, b in pairs if a == path[n] and b == j) for j in range(k)
            ]
        else:
            row = [prefix.count(j) for j in range(k)]
        out.append(-math.log((row[path[n + 1]] + alpha) / (sum(row) + k * alpha)))
    return out


@pytest.mark.parametrize("k", [2, 3])
def test_the_in_context_predictors_are_the_add_alpha_counts(k):
    x = InContextChain(k, 0.5).sample(3, 30, seed=2)
    for b, path in enumerate(x.tolist()):
        want_bi = _loop_nll(path, k, 0.5, bigram=True)
        want_uni = _loop_nll(path, k, 0.5, bigram=False)
        assert bayes_nll(x, k, 0.5)[b].numpy() == pytest.approx(want_bi, abs=1e-12)
        assert unigram_nll(x, k, 0.5)[b].numpy() == pytest.approx(want_uni, abs=1e-12)


def test_the_bayes_predictor_beats_a_misspecified_prior_and_the_levels_are_ordered():
    chain = InContextChain(2, 0.3)
    x = chain.sample(4000, 64, seed=3)
    right = bayes_nll(x, 2, 0.3).mean().item()
    assert right < bayes_nll(x, 2, 3.0).mean().item() - 0.01
    lv = levels(chain, 64, paths=4000, seed=3)
    assert lv.floor == pytest.approx(right)
    assert (
        lv.floor + 5 * lv.floor_se
        < lv.unigram
        < lv.ceiling
        == pytest.approx(math.log(2))
    )


def test_kernel_rates_are_each_chains_entropy_rate():
    P = InContextChain(3, 1.0).kernels(5, torch.Generator().manual_seed(4), "cpu")
    want = [MarkovChain(p.numpy()).entropy_rate() for p in P]
    assert kernel_rates(P).numpy() == pytest.approx(want, abs=1e-10)


def test_the_scores_read_an_induction_and_a_previous_token_head():
    x = torch.tensor([[0, 1, 1, 0, 1, 0, 0, 1]])
    L = x.shape[1]
    target = torch.zeros(1, L, L)
    for n in range(L):
        hits = [i + 1 for i in range(n) if x[0, i] == x[0, n]]
        for j in hits:
            target[0, n, j] = 1 / len(hits)
        if not hits:
            target[0, n, n] = 1.0
    assert induction_score(target, x) == pytest.approx(1.0)
    uniform = torch.tril(torch.ones(L, L)) / torch.arange(1, L + 1)[:, None]
    assert 0 < induction_score(uniform[None], x) < 0.7
    previous = torch.zeros(1, L, L)
    previous[0, 0, 0] = 1.0
    previous[0, torch.arange(1, L), torch.arange(L - 1)] = 1.0
    assert previous_token_score(previous) == pytest.approx(1.0)
    assert previous_token_score(uniform[None]) < 0.5


def test_model_nll_is_the_cross_entropy_of_its_logits():
    """model_nll against torch's own cross entropy on the same logits."""
    from markovlib.incontext import model_nll
    from markovlib.model import Transformer, TransformerConfig

    torch.manual_seed(0)
    model = Transformer(TransformerConfig.gpt2(d_model=8, n_layers=2, max_len=16))
    x = InContextChain(2, 1.0).sample(5, 16, seed=3)
    logits = model(x)[:, :-1].double()
    want = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 2), x[:, 1:].reshape(-1), reduction="none"
    ).reshape(5, 15)
    assert torch.allclose(model_nll(model, x), want, atol=1e-6)


def test_an_ablated_layer_adds_nothing_and_the_model_is_left_alone():
    """head_ablated zeroes one layer's attention output (its block's attention adds 0)
    on a copy: the original's outputs are unchanged."""
    from markovlib.incontext import head_ablated
    from markovlib.model import Transformer, TransformerConfig

    torch.manual_seed(1)
    model = Transformer(TransformerConfig.gpt2(d_model=8, n_layers=2, max_len=16))
    x = InContextChain(2, 1.0).sample(4, 16, seed=4)
    before = model(x).detach().clone()
    off = head_ablated(model, 1)
    traced = off.trace(x)["layers"][1]
    assert float(traced["attention"].abs().max()) == 0.0
    assert torch.equal(model(x), before)
    assert not torch.allclose(off(x), before)


def test_heads_lift_is_zero_for_uniform_attention_and_one_on_the_targets():
    """Heads.lift: 0 at the uniform attention's own score, 1 at a score of 1."""
    from markovlib.incontext import Heads

    h = Heads(induction=(0.58, 1.0), previous=(0.9, 0.1), uniform=0.58)
    assert h.lift(0) == pytest.approx(0.0) and h.lift(-1) == pytest.approx(1.0)


def test_the_induction_head_rule_needs_both_layers():
    """has_induction_head: the last layer's lift and a previous-token layer below it;
    either alone is not a head, and a single layer never has the layer below."""
    from markovlib.incontext import Heads, has_induction_head

    u = 0.58
    assert has_induction_head(Heads((0.6, 0.9), (0.75, 0.1), u))
    assert not has_induction_head(Heads((0.6, 0.9), (0.2, 0.1), u))  # no prev-token
    assert not has_induction_head(Heads((0.6, 0.7), (0.75, 0.1), u))  # lift 0.29
    assert not has_induction_head(Heads((0.95,), (0.9,), u))  # one layer


def test_the_chapter_sizes_and_groups():
    """incontext.scale: its sizes at each scale (paper: 12 seeds); the groups: two
    layers first, each tying, the chain a spec rebuilds."""
    from markovlib import incontext
    from markovlib.runs.experiments import incontext_runs
    from markovlib.runs.spec import make_chain

    S = incontext.scale("paper", environ=False)
    assert (S.name, S.seeds, S.seq_len, S.d_model) == ("paper", 12, 64, 16)
    assert incontext.scale("smoke", environ=False).steps < S.steps
    groups = incontext_runs(3, 0.5, S)
    assert list(groups) == ["L2-untied", "L2-tied", "L1-untied", "L1-tied"]
    spec = groups["L1-tied"][0]
    assert (
        spec.config.n_layers == 1 and spec.config.tied and spec.config.vocab_size == 3
    )
    chain = make_chain(spec.chain)
    assert isinstance(chain, InContextChain) and (chain.k, chain.alpha) == (3, 0.5)
