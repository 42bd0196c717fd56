"""markovlib.companion.measures on small made-up runs: a grid of shares, Fig 4's cells
and runs by the rule, a seed's runs across cells, and the plateau count of a group of
runs. (A chapter's own numbers and sentences: tests/test_chapter_<chapter>.py.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from made_up_runs import at_chain, at_marginal, record

from markovlib.analysis import EscapeStats
from markovlib.chains import binary
from markovlib.companion import chapters, measures


def test_grid_shares_averages_the_runs_of_each_cell_rows_q_columns_p():
    ps, qs = (0.3, 0.5), (0.6, 0.8)
    recs = [at_chain(0.3, 0.6), at_marginal(0.3, 0.6), at_chain(0.5, 0.8)]
    grid = measures.grid_shares(recs, ps, qs)
    assert grid.shape == (2, 2)
    assert grid[0, 0] == pytest.approx(0.5)  # q = 0.6, p = 0.3: one of each
    assert grid[1, 1] == pytest.approx(1.0)  # q = 0.8, p = 0.5
    assert np.isnan(grid[0, 1]) and np.isnan(grid[1, 0])  # no runs there


def test_plateau_text_counts_runs_on_the_plateau():
    st = EscapeStats(
        tol=0.005,
        at_step=10,
        escapes=(None, 20, 10),
        curve=pd.DataFrame(),
        trap_fraction=2 / 3,
        trap_fraction_end=1 / 3,
        median_escape=None,
        near_unigram=1 / 3,
        finals=np.zeros(3),
    )
    assert st.plateau_text() == "2 of 3"
    assert st.plateau_text(at_end=True) == "1 of 3"


def test_fig4_counts_cells_by_majority_and_runs_above_and_below_the_line():
    # tied: (0.8, 0.5) 2 of 3 runs at H(pi) -> the cell is at H(pi); (0.6, 0.6) 1 of 3
    tied = [at_marginal(0.8, 0.5)] * 2 + [at_chain(0.8, 0.5)]
    tied += [at_marginal(0.6, 0.6)] + [at_chain(0.6, 0.6)] * 2
    tied += [at_marginal(0.2, 0.4)]  # below the line
    untied = [at_chain(0.8, 0.5)] * 3 + [at_chain(0.6, 0.6)] * 3
    m = measures.fig4(tied, untied)
    assert m.details["tied_cells"] == [(0.8, 0.5)]
    assert chapters.trapped.cells_at_unigram(tied) == [(0.2, 0.4), (0.8, 0.5)]
    assert "1 of 2 cells" in m.value and "3 of 6 runs" in m.value
    assert m.details["tied_below"] == "1 of 1 runs"
    assert len(measures.above_line(tied)) == 6
    assert measures.trapped_text(tied) == "4 of 7 runs"
    assert m.ok  # 1 of 2 tied cells (>= half), 0 of 2 untied
    assert (m.runs, m.trapped) == (13, 4)


def test_by_seed_counts_each_seeds_runs_across_cells():
    recs = [
        record(0.8, 0.5, np.vstack([binary(0.8, 0.5).stationary()] * 2), seed=0),
        record(0.6, 0.6, np.vstack([binary(0.6, 0.6).stationary()] * 2), seed=0),
        record(0.6, 0.6, binary(0.6, 0.6).P, seed=1),
    ]
    assert measures.by_seed(recs) == {0: (2, 2), 1: (1, 0)}
