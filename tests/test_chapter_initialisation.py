"""markovlib.companion.chapters.initialisation: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

import numpy as np


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
