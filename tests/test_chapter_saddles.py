"""markovlib.companion.chapters.saddles: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from made_up_runs import at_chain, at_marginal

from markovlib.chains import binary
from markovlib.companion import chapters


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
    fig4 = "tied: 3 of 10 cells"
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


def test_labels_name_every_group_its_trained_claims_read():
    from markovlib.companion.claims import CLAIMS

    read = {g for c in CLAIMS if c.chapter == "saddles" for g in c.groups}
    assert read == set(chapters.saddles.LABELS)
