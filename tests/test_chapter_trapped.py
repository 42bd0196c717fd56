"""markovlib.companion.chapters.trapped: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from made_up_runs import at_chain, at_marginal, record

from markovlib.chains import binary
from markovlib.companion import chapters, measures


def test_fig4_by_grid_only_complete_grids():
    tied = [at_marginal(0.6, 0.8), at_chain(0.2, 0.3)]
    untied = [at_chain(0.6, 0.8), at_chain(0.2, 0.3)]
    groups = SimpleNamespace(
        wanted={
            ("a", "tied"): 2,
            ("a", "untied"): 2,
            ("b", "tied"): 3,
            ("b", "untied"): 2,
            ("c", "untied"): 2,  # an untied grid alone (the authors' 500 iterations)
        },
        records={
            ("a", "tied"): tied,
            ("a", "untied"): untied,
            ("b", "tied"): tied,
            ("b", "untied"): untied,
            ("c", "untied"): untied,
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


def test_leave_text_says_when_the_test_loss_cannot_resolve_the_chain():
    """Issue 70: the page states where its curves count a run as leaving H(π), and
    near p + q = 1 that a sampled test loss cannot tell θ_π from the chain."""
    from markovlib import noise

    steps = np.arange(0, 400, 10)
    flat = pd.DataFrame({"step": steps, "test_loss": np.full(40, 0.6)})
    tokens = 4 * 16 * 256
    wide = noise.banded_survival(binary(0.3, 0.9), [flat], tokens)
    assert chapters.trapped.leave_text({"a": wide}) == f"{wide.leave_at:.2f}"
    assert 0.4 < wide.leave_at < 0.5
    lost = noise.banded_survival(binary(0.52, 0.5), [flat], tokens)
    text = chapters.trapped.leave_text({"a": wide, "b": lost})
    assert text.startswith("0.90 (the noise") and "cannot tell" in text


def test_labels_name_groups_its_trained_claims_read():
    from markovlib.companion.claims import CLAIMS

    read = {g for c in CLAIMS if c.chapter == "trapped" for g in c.groups}
    assert set(chapters.trapped.LABELS) <= read
