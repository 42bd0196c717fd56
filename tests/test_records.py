"""markovlib.companion.records: the one loader of run records, on made-up runs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from markovlib.companion.records import records_of, runs_complete


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


def test_records_of_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="2 results for 1 specs"):
        records_of([object(), object()], [object()])


def test_relabelled_groups_are_read_under_the_claims_names():
    from made_up_runs import at_chain, at_marginal

    from markovlib.companion.claims import claim as claim_of, evaluate, measured
    from markovlib.companion.records import Groups

    runs = {"tied": [at_chain(0.2, 0.3)], "untied": [at_marginal(0.2, 0.3)]}
    page = Groups(runs, {"tied": 1, "untied": 2})
    labels = {"global_minimum-tied": "tied", "global_minimum-untied": "untied"}
    read = page.relabelled(labels)
    assert read("global_minimum-tied", "global_minimum-untied") == page(
        "tied", "untied"
    )
    assert read.counts() == (2, 3) and not read.complete()
    c = claim_of("fig3b_fp32")
    assert evaluate(c, page, labels) == (2, 3, "runs shipped")  # not all there
    assert measured("fig3b_fp32", page, labels) is None
    page.wanted["untied"] = 1
    m = measured("fig3b_fp32", page, labels)
    assert m == evaluate(
        c, Groups(dict(zip(labels, runs.values())), dict.fromkeys(labels, 1))
    )
    assert m.runs == 2


def test_a_chapter_at_a_smaller_scale_is_judged_on_the_groups_it_has():
    from made_up_runs import at_chain

    from markovlib.companion.claims import claim, evaluate, measured
    from markovlib.companion.records import Groups

    page = Groups({"L2": [at_chain(0.5, 0.8)]}, {"L2": 1})  # no depth 4 or 8 here
    labels = {f"depth-fig1-fp16-L{L}": f"L{L}" for L in (2, 4, 8)}
    m = measured("depth_plateau", page, labels)
    assert m == evaluate(claim("depth_plateau"), page, labels) and m.runs == 1
    assert evaluate(claim("fig3a"), page, labels) == (0, 0, "runs shipped")  # none


def test_groups_loaded_apart_are_joined_for_one_claim():
    from made_up_runs import at_chain, at_marginal

    from markovlib.companion.records import Groups

    run = object()
    loaded = Groups.loaded({"a": ([run], [at_chain(0.5, 0.8)])}, {"a": [None, None]})
    assert loaded.counts() == (1, 2) and loaded.runs == {"a": [run]}
    other = Groups({"b": [at_marginal(0.5, 0.8)]}, {"b": 1})
    both = loaded.joined(other)
    assert both("a", "b") == [*loaded("a"), *other("b")]
    assert both.complete("b") and not both.complete()
