"""markovlib.companion.chapters.ccmc: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

import numpy as np
import pytest

from markovlib.companion import chapters
from markovlib.companion.measures.generation import generation_summary


def test_the_ccmc_verdicts_follow_their_rules():
    """The rate holds within ±0.15 of -1/2; collapse needs a top share above 0.9 (and,
    for W+, a Markov chain whose top token holds under half); the mean-field sentence
    counts the tokens its limit keeps above 1 %."""
    from markovlib.companion.chapters.ccmc import (
        ccmc_collapse,
        ccmc_mean_field_text,
        ccmc_rate,
    )

    ns, err = [2000, 8000, 32000], [0.4, 0.2, 0.1]
    assert ccmc_rate(ns, err, -0.5, "paper", True)[0]
    assert ccmc_rate(ns, err, -0.64, "paper", True)[0]
    ok, text = ccmc_rate(ns, err, -0.7, "paper", True)
    assert not ok and "away from the $n^{-1/2}$ rate" in text
    assert "from 0.400 at n = 2000 to 0.1000 at n = 32000" in text
    assert "too few" in ccmc_rate(ns, err, -0.5, "smoke", False)[1]

    def end(share, markov, distinct=1.0):
        return dict(
            share=share,
            share_markov=markov,
            single=0.5,
            distinct=distinct,
            distinct_markov=7.5,
        )

    v = ccmc_collapse(end(0.97, 0.3), end(0.6, 0.3, 3.2), 500, 20000, 5)
    assert v.plus and not v.minus
    assert (
        "collapses: in the last 500 tokens" in v.text and "5 different tokens" in v.text
    )
    assert "**no** single winner" in v.text and "3.20 distinct" in v.text
    assert "only when the base chain favours repeating it" in v.summary
    v = ccmc_collapse(end(0.97, 0.6), end(0.95, 0.3), 500, 20000, 5)
    assert not v.plus and v.minus and "has **not** collapsed" in v.text
    assert "do not separate" in v.summary

    limit = np.array([0.5, 0.495, 0.005, 0.0])
    text = ccmc_mean_field_text(0.02, limit, [0.4, 0.4, 0.15, 0.05], 20000, 3, 2)
    assert "keeps 2 of the 4 tokens" in text and "(tokens 0, 1)" in text
    assert "still holds 0.150" in text and "3 stable single-token states" in text
    text = ccmc_mean_field_text(0.02, limit, [0.5, 0.5, 0.0, 0.0], 20000, 1, 1)
    assert "already (almost) gone" in text and "attractors" not in text
    assert "every token survives" in ccmc_mean_field_text(
        0.0, [0.25] * 4, [0.25] * 4, 9, 1, 1
    )


def test_ccmc_facts_checks_and_claims_from_a_small_run():
    import torch

    from markovlib import ccmc

    W = ccmc.random_W(4, sigma=1.0, seed=0)
    eq = ccmc.equivalence(W, ccmc.sample_prompts(16, 8, 4, seed=1), seed=2)
    facts, text = chapters.ccmc.ccmc_equivalence_facts(eq, 16)
    assert facts["cc_nprompts"] == 16 and text.startswith("16 prompts: max difference")
    errors = {100: np.array([1.0, 1.0]), 400: np.array([0.5]), 1600: np.array([0.25])}
    facts, text = chapters.ccmc.ccmc_estimation_facts(errors, -0.5, W)
    assert facts["cc_est_const"] == pytest.approx(10.0) and facts["cc_est_reps"] == 2
    assert facts["cc_est_n_tail"] == 100 and "n = 100..1600: -0.500" in text
    prompt = ccmc.balanced_prompt(4, 8, seed=2)
    runs = {
        name: generation_summary(V, prompt, 30, n_traj=8, window=10, seed=3)
        for name, V in (("W+", W + 3 * torch.eye(4)), ("W-", W - 3 * torch.eye(4)))
    }
    ends = {name: run["end"] for name, run in runs.items()}
    facts = chapters.ccmc.ccmc_generation_facts(runs, ends, 2)
    assert facts["cc_share_plus"] == ends["W+"]["share"] and facts["cc_n_winners"] == 2
    assert facts["cc_stable_minus"] == len(runs["W-"]["stable"])
    report = chapters.ccmc.ccmc_generation_report(runs, ends, 30, 10)
    assert report.count("stable single-token states") == 2
    collapse = chapters.ccmc.ccmc_collapse(ends["W+"], ends["W-"], 10, 30, 2)
    mean_err = np.array([1.0, 0.5])
    args = (W, prompt, ends, 0.01, collapse)
    checks = chapters.ccmc.ccmc_checks(
        eq, mean_err, *args, converges=False, default_regime=True
    )
    assert len(checks) == 4 and checks["attention = the CCMC formula"]
    off = eq | {"max_diff": 1e-3}
    assert not chapters.ccmc.ccmc_checks(
        off, mean_err, *args, converges=False, default_regime=True
    )["attention = the CCMC formula"]
    odd = prompt[:7]
    assert not chapters.ccmc.ccmc_checks(
        eq, mean_err, W, odd, *args[2:], converges=False, default_regime=False
    )["the prompt holds every token equally often"]
    claims = chapters.ccmc.ccmc_claims(eq, -0.46, True, 0.96789, collapse)
    assert claims["ccmc_rate"] == ("-0.46", True)
    assert claims["ccmc_collapse"] == ("0.968", collapse.plus)
    assert claims["ccmc_equivalence"][1] is True
