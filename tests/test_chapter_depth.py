"""markovlib.companion.chapters.depth: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

from made_up_runs import at_chain, at_marginal

from markovlib.companion import chapters


def test_shares_text_prints_one_share_per_run():
    text = chapters.depth.shares_text([at_chain(0.3, 0.6), at_marginal(0.3, 0.6)])
    assert text == "1.000 0.000"
