"""markovlib.companion.chapters.multi_state: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from markovlib.companion import chapters
from markovlib.companion.records import RunRecord


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


def test_labels_name_every_group_its_trained_claims_read():
    from markovlib.companion.claims import CLAIMS

    read = {g for c in CLAIMS if c.chapter == "multi_state" for g in c.groups}
    assert read == set(chapters.multi_state.LABELS)
