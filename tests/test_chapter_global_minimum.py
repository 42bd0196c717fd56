"""markovlib.companion.chapters.global_minimum: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

import numpy as np
import pandas as pd

from markovlib.companion import chapters


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


def test_labels_name_groups_its_trained_claims_read():
    from markovlib.companion.claims import CLAIMS

    read = {g for c in CLAIMS if c.chapter == "global_minimum" for g in c.groups}
    assert set(chapters.global_minimum.LABELS) <= read
