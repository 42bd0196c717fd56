"""The small helpers the chapters call instead of defining functions in a cell:
records of runs, printed shares, a grid of shares, the change of a weight statistic,
and the plateau count of a group of runs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from markovlib import measures
from markovlib.analysis import EscapeStats
from markovlib.chains import binary
from markovlib.measures import RunRecord


def _record(p, q, kernel, seed=0):
    chain = binary(p, q)
    history = pd.DataFrame({"step": [0, 10], "test_loss": [0.7, 0.6]})
    spec = SimpleNamespace(chain={"p": p, "q": q}, seed=seed)
    return RunRecord(chain, np.asarray(kernel, dtype=float), history, spec)


def _at_chain(p, q):
    return _record(p, q, binary(p, q).P)


def _at_marginal(p, q):
    pi = binary(p, q).stationary()
    return _record(p, q, np.vstack([pi, pi]))


def test_shares_text_prints_one_share_per_run():
    text = measures.shares_text([_at_chain(0.3, 0.6), _at_marginal(0.3, 0.6)])
    assert text == "1.000 0.000"


def test_grid_shares_averages_the_runs_of_each_cell_rows_q_columns_p():
    ps, qs = (0.3, 0.5), (0.6, 0.8)
    recs = [_at_chain(0.3, 0.6), _at_marginal(0.3, 0.6), _at_chain(0.5, 0.8)]
    grid = measures.grid_shares(recs, ps, qs)
    assert grid.shape == (2, 2)
    assert grid[0, 0] == pytest.approx(0.5)  # q = 0.6, p = 0.3: one of each
    assert grid[1, 1] == pytest.approx(1.0)  # q = 0.8, p = 0.5
    assert np.isnan(grid[0, 1]) and np.isnan(grid[1, 0])  # no runs there


def test_records_of_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="2 results for 1 specs"):
        measures.records_of([object(), object()], [object()])


def test_change_text_reads_the_first_and_last_rows():
    table = pd.DataFrame({"s": [0.241, 0.448]}, index=[50, 1000])
    assert measures.change_text(table, "s") == "grew from 0.241 to 0.448"
    assert measures.change_text(table.iloc[::-1], "s") == "fell from 0.448 to 0.241"
    one = table.iloc[[-1]]
    assert measures.change_text(one, "s").startswith("is 0.448 (no checkpoint")


def test_plateau_text_counts_runs_on_the_plateau():
    st = EscapeStats(
        tol=0.005,
        at_step=10,
        escapes=(None, 20, 10),
        curve=pd.DataFrame(),
        trap_fraction=2 / 3,
        trap_fraction_end=1 / 3,
        median_escape=None,
        near_unigram=1 / 3,
        finals=np.zeros(3),
    )
    assert st.plateau_text() == "2 of 3"
    assert st.plateau_text(at_end=True) == "1 of 3"


def test_fig4_counts_cells_by_majority_and_runs_above_and_below_the_line():
    # tied: (0.8, 0.5) 2 of 3 runs at H(pi) -> the cell is at H(pi); (0.6, 0.6) 1 of 3
    tied = [_at_marginal(0.8, 0.5)] * 2 + [_at_chain(0.8, 0.5)]
    tied += [_at_marginal(0.6, 0.6)] + [_at_chain(0.6, 0.6)] * 2
    tied += [_at_marginal(0.2, 0.4)]  # below the line
    untied = [_at_chain(0.8, 0.5)] * 3 + [_at_chain(0.6, 0.6)] * 3
    m = measures.fig4(tied, untied)
    assert m.details["tied_cells"] == [(0.8, 0.5)]
    assert measures.cells_at_unigram(tied) == [(0.2, 0.4), (0.8, 0.5)]
    assert "1 of 2 cells" in m.value and "3 of 6 runs" in m.value
    assert m.details["tied_below"] == "1 of 1 runs"
    assert len(measures.above_line(tied)) == 6
    assert measures.trapped_text(tied) == "4 of 7 runs"
    assert m.ok  # 1 of 2 tied cells (>= half), 0 of 2 untied
    assert (m.runs, m.trapped) == (13, 4)


def test_by_seed_counts_each_seeds_runs_across_cells():
    recs = [
        _record(0.8, 0.5, np.vstack([binary(0.8, 0.5).stationary()] * 2), seed=0),
        _record(0.6, 0.6, np.vstack([binary(0.6, 0.6).stationary()] * 2), seed=0),
        _record(0.6, 0.6, binary(0.6, 0.6).P, seed=1),
    ]
    assert measures.by_seed(recs) == {0: (2, 2), 1: (1, 0)}


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
    from markovlib.measures import initialisation_trap_text, initialisation_verdict

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


def test_the_ccmc_verdicts_follow_their_rules():
    """The rate holds within ±0.15 of -1/2; collapse needs a top share above 0.9 (and,
    for W+, a Markov chain whose top token holds under half); the mean-field sentence
    counts the tokens its limit keeps above 1 %."""
    from markovlib.measures import ccmc_collapse, ccmc_mean_field_text, ccmc_rate

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


def test_the_bad_local_minima_sentences_count_the_runs():
    from markovlib.measures import perturbation_text, trap_training_text

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


def test_the_saddles_sentences_carry_the_counts():
    from markovlib.measures import saddle_grid_text, saddle_sides_text

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
