"""markovlib.companion.chapters: each chapter's own numbers, checks and sentences, on
small
made-up runs and chains (the chapters call these instead of defining functions in a
cell)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from made_up_runs import at_chain, at_marginal, record

from markovlib.chains import binary
from markovlib.companion import chapters, measures
from markovlib.companion.records import RunRecord, runs_complete


# --------------------------------------------------------------------- several chapters
def test_runs_complete_needs_every_step_and_finite_losses():
    def run(n, bad=False):
        loss = np.full(n, 0.6)
        loss[-1] = np.nan if bad else 0.6
        frame = pd.DataFrame({"step": np.arange(n), "test_loss": loss})
        return SimpleNamespace(history=frame, test_history=frame)

    assert runs_complete([run(11), run(11)], 10)
    assert not runs_complete([run(11), run(10)], 10)
    assert not runs_complete([run(11, bad=True)], 10)
    assert runs_complete([], 10)


# ---------------------------------------------------------------- the framework chapter
def test_framework_facts_and_checks_hold_for_chains_and_catch_errors():
    from markovlib import chains
    from markovlib.model import Transformer, TransformerConfig

    facts = chapters.framework.chain_facts(0.5, 0.8)
    assert facts["fw_pi_0"] == pytest.approx(8 / 13) and facts["fw_switching"] == 1.3
    assert facts["fw_regime"].startswith("above 1")
    assert chapters.framework.chain_facts(0.2, 0.3)["fw_regime"].startswith("below 1")
    assert chapters.framework.chain_facts(0.3, 0.7)["fw_regime"].startswith("exactly 1")
    for p, q in ((0.5, 0.8), (0.3, 0.7), (0.2, 0.3)):
        assert all(chapters.framework.entropy_checks(binary(p, q)).values()), (p, q)
    grid = np.round(np.linspace(0.02, 0.98, 49), 10)
    rate, unigram = chains.entropy_grid(grid)
    assert all(chapters.framework.entropy_grid_checks(grid, rate, unigram).values())
    bent = rate.copy()
    bent[3, 7] += 1e-6
    bad = chapters.framework.entropy_grid_checks(grid, bent, unigram)
    assert not bad["grid: closed forms"] and not bad["grid: symmetric about p = q"]
    assert chapters.framework.entropy_facts(binary(0.5, 0.8), grid, rate, unigram)[
        "fw_gap_max"
    ] == pytest.approx((unigram - rate).max())
    chain = binary(0.5, 0.8)
    x = chain.sample(64, 200, seed=0)
    est = chains.empirical_kernel(chain, x)
    assert all(chapters.framework.sampler_checks(chain, x, est, 5.0).values())
    wrong = chains.empirical_kernel(chain, binary(0.3, 0.8).sample(64, 200, seed=0))
    assert not chapters.framework.sampler_checks(chain, x, wrong, 5.0)[
        "transition frequencies within 5 std. errors"
    ]
    table = chapters.framework.transition_table(chain, est)
    assert table["transitions n_i"].dtype.kind == "i"  # counts, not 1.208e+04
    assert table["transitions n_i"].sum() == est["counts"].sum()
    assert all(chapters.framework.symmetric_checks(5, 0.1).values())
    assert chapters.framework.symmetric_facts(5, 0.1)[
        "fw_multi_entropy_rate"
    ] == pytest.approx(0.4637, abs=5e-5)
    configs = {
        (pr, t): getattr(TransformerConfig, pr)(
            vocab_size=2, d_model=4, tied=t == "tied"
        )
        for pr in ("theory", "gpt2")
        for t in ("tied", "untied")
    }
    n = {key: Transformer(cfg).n_params() for key, cfg in configs.items()}
    assert all(chapters.framework.parameter_checks(configs, n, 4).values())
    assert not all(
        chapters.framework.parameter_checks(
            configs, n | {("gpt2", "tied"): 1}, 4
        ).values()
    )
    facts = chapters.framework.parameter_facts(n, 4, 16)
    assert facts["fw_n_params_positional"] == 64 and facts["fw_max_len"] == 16
    shapes, dev = (
        {"theory": (2, 8, 2), "gpt2": (2, 8, 2)},
        {"theory": 0.01, "gpt2": 0.1},
    )
    assert all(chapters.framework.forward_checks(shapes, dev, 2, 8).values())
    assert not all(chapters.framework.forward_checks(shapes, dev, 2, 9).values())
    exact = np.full(10, 0.5)
    assert all(chapters.framework.marginal_checks(1.0, exact, exact, 100, 5.0).values())
    assert not all(
        chapters.framework.marginal_checks(1.0, exact + 0.4, exact, 100, 5.0).values()
    )


# ----------------------------------------------------------- the global_minimum chapter
def test_rank_ratio_table_says_why_a_cell_is_empty():
    from markovlib.companion.chapters.global_minimum import rank_ratio_table

    tied = {"rank_ratio": {"wte.weight": 0.2, "blocks.0.ff.W_1.weight": 0.38312}}
    untied = {"rank_ratio": {**tied["rank_ratio"], "head.weight": 0.124}}
    table = rank_ratio_table({"tied": tied, "untied": untied})
    assert list(table.index) == ["wte", "ff.W_1", "head"]
    assert table.loc["head", "tied"] == "tied to wte"
    assert (
        table.loc["ff.W_1", "tied"] == "0.383"
        and table.loc["head", "untied"] == "0.124"
    )
    assert list(table["App. D names it"]) == [False, True, False]
    assert not table.isna().any().any()


def test_change_text_reads_the_first_and_last_rows():
    table = pd.DataFrame({"s": [0.241, 0.448]}, index=[50, 1000])
    assert chapters.global_minimum.change_text(table, "s") == "grew from 0.241 to 0.448"
    assert (
        chapters.global_minimum.change_text(table.iloc[::-1], "s")
        == "fell from 0.448 to 0.241"
    )
    one = table.iloc[[-1]]
    assert chapters.global_minimum.change_text(one, "s").startswith(
        "is 0.448 (no checkpoint"
    )


def test_construction_claim_needs_the_kernel_the_loss_and_flat_slices():
    from markovlib.companion.chapters.global_minimum import construction_claim

    ok = {"kernel_error": 1e-8, "grad": 1e-9, "loss": 0.5 + 1e-12}
    flat = {"a": 0.5 + np.linspace(-1, 1, 5) ** 2}
    claim = construction_claim({"tied, direct": ok}, flat, 0.5)
    assert claim.ok and claim.value == "1.0e-12"
    assert not construction_claim({"x": {**ok, "grad": 1e-3}}, flat, 0.5).ok
    assert not construction_claim({"x": {**ok, "loss": 0.6}}, flat, 0.5).ok
    dips = {"a": 0.5 - np.linspace(-1, 1, 5) ** 2}  # a slice below H_rate
    assert not construction_claim({"x": ok}, dips, 0.5).ok


# --------------------------------------------------------- the bad_local_minima chapter
def test_the_bad_local_minima_sentences_count_the_runs():
    from markovlib.companion.chapters.bad_local_minima import (
        perturbation_text,
        trap_training_text,
    )

    def result(p, q, returned):
        returned = np.array(returned, dtype=bool)
        return SimpleNamespace(chain=binary(p, q), returned=returned, left=~returned)

    perturbed = {
        ("theory", "this chain"): result(0.5, 0.8, [True, True, False]),
        ("theory", "mirror"): result(0.5, 0.2, [False, False, False]),
    }
    text = perturbation_text(perturbed, 0.5, 0.8, False)
    assert "theory model, this chain (p + q = 1.30): 2 of 3 runs returned" in text
    assert "1 left towards" in text and "3 left towards" in text
    assert "**not** the clean picture" in text
    assert "As Thm 2 predicts" in perturbation_text(perturbed, 0.5, 0.8, True)
    assert "Thm 2 does not apply" in perturbation_text(perturbed, 0.5, 0.2, True)
    assert "inconclusive" in perturbation_text(perturbed, 0.5, 0.5, True)
    assert "far too short" in trap_training_text("smoke", False, 0.5, 0.8, ["x"])
    assert "no bad local minimum" in trap_training_text("cpu", True, 0.2, 0.3, [])
    text = trap_training_text("paper", True, 0.5, 0.8, ["a of b", "c of d"])
    assert text.startswith("Measured at the `paper` scale in float32: a of b; c of d.")


def test_trap_variant_texts_glue_every_model_as_k_of_n():
    from markovlib.companion.chapters.bad_local_minima import (
        TRAP_KEYS,
        trap_variant_texts,
    )

    def stats(k, median):
        return SimpleNamespace(
            plateau_text=lambda at_end=False: f"{0 if at_end else k} of 32",
            median_text=median,
        )

    texts = trap_variant_texts(
        {name: stats(i, f"{100 * i}") for i, name in enumerate(TRAP_KEYS)}, "theory"
    )
    assert texts["blm_preset"] == "`theory`"
    assert texts["trap_fraction_at_400"] == "1 of 32" == texts["trap_fraction_theory"]
    assert texts["trap_fraction_end"] == "0 of 32"
    assert texts["median_escape_step"] == "100"
    assert texts["trap_fraction_gpt2_wide"] == "3 of 32"
    assert texts["median_escape_theory_ln"] == "200"
    assert len(texts) == 4 + 2 * len(TRAP_KEYS)


# ------------------------------------------------------------------ the saddles chapter
def test_fig4_kernel_maps_learnt_q_and_share_per_cell():
    grid = (0.3, 0.6)
    recs = [at_chain(0.3, 0.6), at_marginal(0.3, 0.6), at_chain(0.6, 0.6)]
    learnt_q, share = chapters.saddles.fig4_kernel_maps(recs, grid)
    pi0 = binary(0.3, 0.6).stationary()[0]
    assert learnt_q[1, 0] == pytest.approx((0.6 + pi0) / 2)  # q = 0.6, p = 0.3
    assert learnt_q[1, 1] == pytest.approx(0.6)
    assert share[1, 0] == pytest.approx(0.5) and share[1, 1] == pytest.approx(1.0)
    assert np.isnan(learnt_q[0, 0]) and np.isnan(share[0, 1])  # no runs there


def test_the_saddles_sentences_carry_the_counts():
    from markovlib.companion.chapters.saddles import saddle_grid_text, saddle_sides_text

    def stats(n_escaped, n, median):
        return SimpleNamespace(n_escaped=n_escaped, n=n, median_text=median)

    summary = {
        ("gpt2", "untied"): stats(32, 32, "40"),
        ("gpt2", "tied"): stats(5, 32, "never"),
        ("theory", "tied"): stats(2, 32, "never"),
    }
    untied = SimpleNamespace(value="64 of 64 runs escaped")
    text = saddle_sides_text(summary, untied, "paper", True, "binary(p=0.5, q=0.8)")
    assert "(32 runs per model on binary(p=0.5, q=0.8)): untied, 64 of 64" in text
    assert "tied, 5 of 32 GPT-2 runs and 2 of 32 theory-model runs escaped" in text
    assert "untied 40, tied never)." in text and "too short" not in text
    assert "too short" in saddle_sides_text(summary, untied, "smoke", False, "c")
    fig4 = SimpleNamespace(value="tied: 3 of 10 cells")
    assert saddle_grid_text(fig4, "cpu", True) == (
        "Measured at the `cpu` scale in float32: tied: 3 of 10 cells."
    )
    assert saddle_grid_text(fig4, "smoke", False).endswith(
        "(Far too short to converge.)"
    )


def test_thm3_holds_on_both_sides_of_the_line_not_on_it():
    from markovlib import analysis, theory
    from markovlib.model import TransformerConfig

    cfg = TransformerConfig.theory(tied=False, max_len=6)
    for p, q in ((0.5, 0.8), (0.2, 0.3)):
        chain = binary(p, q)
        h = theory.unigram_hessian(chain, cfg, length=6)
        v = h.eigenvector(0)
        pairing = analysis.ea_cosine(h, v)
        assert chapters.saddles.thm3_holds(h, chain, pairing, drop=0.01)
        assert not chapters.saddles.thm3_holds(h, chain, pairing, drop=0.0)
        assert not chapters.saddles.thm3_holds(h, chain, -pairing, drop=0.01)
    on = binary(0.4, 0.6)
    h = theory.unigram_hessian(on, cfg, length=6)
    assert not chapters.saddles.thm3_holds(h, on, -1.0, drop=0.01)


# ------------------------------------------------------------------ the trapped chapter
def test_fig4_by_grid_only_complete_grids():
    tied = [at_marginal(0.6, 0.8), at_chain(0.2, 0.3)]
    untied = [at_chain(0.6, 0.8), at_chain(0.2, 0.3)]
    groups = SimpleNamespace(
        wanted={
            ("a", "tied"): 2,
            ("a", "untied"): 2,
            ("b", "tied"): 3,
            ("b", "untied"): 2,
        },
        records={
            ("a", "tied"): tied,
            ("a", "untied"): untied,
            ("b", "tied"): tied,
            ("b", "untied"): untied,
        },
    )
    groups.complete = lambda *names: all(
        len(groups.records[n]) == groups.wanted[n] for n in names
    )
    out = chapters.trapped.fig4_by_grid(groups)
    assert list(out) == ["a"]
    assert out["a"].value == measures.fig4(tied, untied).value


def test_by_seed_text_counts_cells_above_the_line_per_seed():
    recs = [
        record(0.6, 0.8, np.vstack([binary(0.6, 0.8).stationary()] * 2), seed=0),
        record(0.8, 0.8, binary(0.8, 0.8).P, seed=0),
        record(0.6, 0.8, binary(0.6, 0.8).P, seed=1),
        record(0.2, 0.3, binary(0.2, 0.3).P, seed=1),  # below the line: not counted
    ]
    assert (
        chapters.trapped.by_seed_text(recs)
        == "seed 0: 1 of 2 cells; seed 1: 0 of 1 cells"
    )
    assert chapters.trapped.by_seed_text([]) == "no run shipped yet"


def _gradient_table():
    return pd.DataFrame(
        {
            "fp16 zero share": [1.0, 0.97, 0.0],
            "fp16 cosine": [np.nan, 0.5, 1.0],
            "fp16-scaled cosine": [0.99, 0.98, 1.0],
        },
        index=["W_Q", "W_K", "head.bias"],
    )


def test_gradient_table_names_the_cosine_of_a_zero_gradient():
    shown = chapters.trapped.gradient_table(_gradient_table())
    assert shown.loc["W_Q", "fp16 cosine"] == "none (all 0)"
    assert shown.loc["W_K", "fp16 cosine"] == 0.5
    assert not shown.isna().any().any()


def test_zero_share_text_all_or_at_least():
    t = _gradient_table()
    assert chapters.trapped.zero_share_text(t, ["W_Q"]) == "all"
    assert chapters.trapped.zero_share_text(t, ["W_Q", "W_K"]) == "at least 97 %"


def test_crossover_text_counts_runs_at_the_unigram_loss():
    cross = SimpleNamespace(
        losses={
            ("gd", "θ_π + noise"): np.zeros((2, 3)),
            ("adamw", "standard init"): np.zeros((3, 3)),
        },
        at_unigram=lambda key: 2 if key[0] == "gd" else 0,
    )
    text = chapters.trapped.crossover_text(cross)
    first, second = text.split("; ")
    assert first == r"gd from $\theta_\pi$ + noise: 2 of 2 at $H(\pi)$"
    assert second == r"adamw from standard init: 0 of 3 at $H(\pi)$"


def test_plateau_ends_only_above_the_line_nan_when_never():
    from dataclasses import replace

    stays = at_marginal(0.6, 0.8)
    flat = pd.DataFrame({"step": [0, 10], "test_loss": [0.69, 0.69]})  # above H(π)
    stays = replace(stays, history=flat)
    t = chapters.trapped.plateau_ends([stays, at_chain(0.2, 0.3), at_chain(0.5, 0.8)])
    assert t["above_line"].tolist() == pytest.approx([0.4, 0.3])  # not (0.2, 0.3)
    assert np.isnan(t["escape"].iloc[0]) and t["escape"].iloc[1] == 10
    assert t["steps"].tolist() == [10, 10]


# ----------------------------------------------------------- the initialisation chapter
def _manifold_runs(found, common=None):
    from markovlib.dynamics import ManifoldRuns

    found = np.array(found)
    n = len(found)
    common = np.zeros(n) if common is None else np.asarray(common, dtype=float)
    return ManifoldRuns(
        0.5,
        0.8,
        np.zeros((n, 2)),
        np.array([0]),
        np.zeros((n, 1, 2)),
        np.zeros((n, 1)),
        {"common": common},
        found,
        True,
        "AdamW (test)",
    )


def test_the_initialisation_verdict_counts_what_it_says():
    """The rows are the agreements of the runs with the predictions; the sentences
    carry those numbers and take their branches from them."""
    from markovlib.companion.chapters.initialisation import (
        initialisation_trap_text,
        initialisation_verdict,
    )

    chains = {"this chain": (0.5, 0.8), "mirror": (0.5, 0.2)}
    pred = {
        "this chain": np.array(["local", "global", "local", "global"]),
        "mirror": np.array(["local", "global", "global", "global"]),
    }
    gd = {
        "this chain": _manifold_runs(["local", "global", "global", "global"]),
        "mirror": _manifold_runs(["global"] * 4, common=[0.3, 0, 0, 0]),
    }
    adam = {
        "this chain": _manifold_runs(["local", "global", "undecided", "global"]),
        "mirror": _manifold_runs(["global"] * 4),
    }
    init_local = {
        ("N(0, 0.02²)", "this chain"): 1.0,
        ("N(0, 0.02²)", "mirror"): 0.0,
        ("init 0.2", "this chain"): 0.75,
        ("init 0.2", "mirror"): 0.0,
    }
    v = initialisation_verdict(chains, init_local, gd, adam, pred, pred)
    assert v.rows["this chain"] == dict(paper=0.75, metric=0.75, adam=0.75, undecided=1)
    assert v.rows["mirror"] == dict(paper=0.75, metric=0.75, adam=0.75, undecided=0)
    assert v.escaped_below and v.metric_better and v.agreement == 0.75
    assert "sends 100% of the standard initialisations and 75% of those" in v.portrait
    assert "the sign of p + q - 1 alone decides" in v.portrait
    assert "in 75% of the 8 runs" in v.full
    assert "none of the 1 runs started" in v.full and "is 0.30 (median" in v.full
    assert "75% as predicted (1 undecided), 75% as predicted (0 undecided)" in v.full
    # a mirror run that stays local: not escaped, and no sentence says it did
    gd["mirror"] = _manifold_runs(["local", "global", "global", "global"])
    v = initialisation_verdict(chains, init_local, gd, adam, pred, pred)
    assert not v.escaped_below and "none of the" not in v.full
    text, headline = initialisation_trap_text(
        "smoke",
        False,
        np.array([True, True, False, True]),
        {"theory": np.array([1, 0, 0, 0.0]), "gpt2, init 0.2": np.array([1, 1.0])},
        0.5,
    )
    assert (
        "puts 75% of" in text
        and "25% of those runs" in text
        and "100% of the GPT-2" in text
    )
    assert "far too short" in text and "`smoke` scale" in headline


# -------------------------------------------------------------- the multi_state chapter
def test_most_learnt_picks_the_best_run_on_the_chain():
    from markovlib.chains import symmetric

    def rec(p, kernel):
        chain = symmetric(5, p)
        history = pd.DataFrame({"step": [0, 10], "test_loss": [1.6, 1.6]})
        spec = SimpleNamespace(chain={"p": p}, seed=0)
        return RunRecord(chain, np.asarray(kernel, dtype=float), history, spec)

    uniform = np.full((5, 5), 0.2)
    exact = symmetric(5, 0.9).P
    top = chapters.multi_state.most_learnt(
        [rec(0.9, uniform), rec(0.9, exact), rec(0.1, exact)], 0.9
    )
    assert top["p"] == 0.9 and top["class"] == "escaped" and top["share"] == 1.0
    assert top["stay"] == "0.100 to 0.100" and top["true"] == 0.1
    none = chapters.multi_state.most_learnt([rec(0.1, exact)], 0.9)
    assert none["class"] == "not shipped" and none["share"] == "–"


# -------------------------------------------------------------------- the depth chapter
def test_shares_text_prints_one_share_per_run():
    text = chapters.depth.shares_text([at_chain(0.3, 0.6), at_marginal(0.3, 0.6)])
    assert text == "1.000 0.000"


# --------------------------------------------------------------------- the CCMC chapter
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
    kw = dict(n_traj=8, window=10, at=np.array([10, 30]))
    runs = {
        name: ccmc.generation_run(V, prompt, 30, seed=3, **kw)
        for name, V in (("W+", W + 3 * torch.eye(4)), ("W-", W - 3 * torch.eye(4)))
    }
    ends = {name: ccmc.final_window(run, 10) for name, run in runs.items()}
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


def test_crossover_lines_print_no_negative_zero():
    """Issue 41: the trapped chapter printed "[ 0. -0.]" for the crossover's shares."""
    from types import SimpleNamespace

    from markovlib.companion.chapters.trapped import crossover_lines

    cross = SimpleNamespace(
        losses={("gd", "θ_π + noise"): None, ("adamw", "standard init"): None},
        shares=lambda key: [-1e-9, 0.01234] if key[0] == "gd" else [0.9876, 1.0],
    )
    lines = crossover_lines(cross).splitlines()
    assert lines[0].endswith("share of the gap at the end 0, 0.012")
    assert lines[1].startswith("adamw    from standard init") and "0.988, 1" in lines[1]
