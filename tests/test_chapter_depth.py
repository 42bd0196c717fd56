"""markovlib.companion.chapters.depth: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

from made_up_runs import at_chain, at_marginal

from markovlib.companion import chapters


def test_shares_text_prints_one_share_per_run():
    text = chapters.depth.shares_text([at_chain(0.3, 0.6), at_marginal(0.3, 0.6)])
    assert text == "1.000 0.000"


def test_labels_name_groups_its_trained_claims_read():
    from markovlib.companion.claims import CLAIMS

    read = {g for c in CLAIMS if c.chapter == "depth" for g in c.groups}
    assert set(chapters.depth.LABELS) <= read


def test_fig1s_continued_runs_are_judged_per_precision_once_all_are_here():
    from markovlib.companion.claims import measured
    from markovlib.companion.records import Groups

    labels = chapters.depth.LABELS
    records = {
        "depth 1, fp32": [at_marginal(0.5, 0.8)] + [at_chain(0.5, 0.8)] * 2,
        "depth 1, fp16-scaled": [at_marginal(0.5, 0.8)] * 2,
    }
    wanted = {"depth 1, fp32": 3, "depth 1, fp16-scaled": 3}  # one scaled run missing
    fp32 = measured("fig1_stays_fp32", Groups(records, wanted), labels)
    assert fp32.counts == (("at H(π)", 1, 3),)
    assert "depth 1, the paper's Fig 1" in fp32.value
    assert measured("fig1_stays_scaled", Groups(records, wanted), labels) is None
    none = Groups({}, {})  # no run at H(π) to continue: nothing to judge
    assert measured("fig1_stays_fp32", none, labels) is None
