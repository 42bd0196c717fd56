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
