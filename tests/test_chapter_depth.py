"""markovlib.companion.chapters.depth: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

from made_up_runs import at_chain, at_marginal

from markovlib.companion import chapters


def test_shares_text_prints_one_share_per_run():
    text = chapters.depth.shares_text([at_chain(0.3, 0.6), at_marginal(0.3, 0.6)])
    assert text == "1.000 0.000"


def test_labels_name_every_group_its_trained_claims_read_at_each_depth():
    from markovlib.companion.claims import CLAIMS

    read = {g for c in CLAIMS if c.chapter == "depth" for g in c.groups}
    assert set(chapters.depth.LABELS) <= read
    has = chapters.depth.labels([1, 2])
    assert "depth-fig1-fp16-L2" in has and "depth-fig1-fp16-L4" not in has
    assert "depth-fig1-L4" in has  # the float32 control: the paper's depths
