"""``book/trapped.ipynb``'s own numbers, checks and sentences: what its page states
beside the scorecard's claims."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...analysis import AT_UNIGRAM
from ...runs.experiments import CONTINUE_PRECISIONS
from ..measures import (
    Measure,
    above_line,
    by_seed,
    cell_classes,
    fig4,
    survival_of,
)
from ..notebook import shown_number
from ..records import RunRecord
from ..thesis import CHAPTER_SOURCES

__all__ = [
    "LABELS",
    "NULL_GROUPS",
    "cells_at_unigram",
    "fig4_by_grid",
    "by_seed_text",
    "gradient_table",
    "zero_share_text",
    "crossover_text",
    "crossover_lines",
    "plateau_ends",
    "leave_text",
]

# this page's label of each shipped group its claims read (claims.measured): its tied
# runs by name, Fig 4's grids by (name, tying), the independent runs per cell, the
# trapped runs continued and the layer-norm control
# the curvature test's control at θ_π: each model of the trapped runs, by group label
NULL_GROUPS = {"GPT-2": "GPT-2, fp16", "theory model": "theory, float32"}
LABELS = {
    "trap400-gpt2-tied-fp16": "GPT-2, fp16",
    "trap400-gpt2-tied-fp32": "GPT-2, float32",
    "fig4-400-tied-fp16": ("fp16, 400", "tied"),
    "fig4-400-untied-fp16": ("fp16, 400", "untied"),
    "fig4-500-untied-fp16": ("fp16, 500", "untied"),
    "fig4-cells-400-tied-fp16": "cells",
    "trap400-theory-tied-fp32": "theory, float32",
    "trap400-theory-ln-tied-fp32": "theory + LN",
    **{  # the trapped runs continued, by "<label>, <precision>"
        f"continue-{source}-{precision}": f"{label}, {precision}"
        for label, source in CHAPTER_SOURCES.items()
        for precision in CONTINUE_PRECISIONS
    },
}


def cells_at_unigram(records: Sequence[RunRecord]) -> list[tuple[float, float]]:
    """The cells (p, q) that :func:`~markovlib.companion.measures.cell_classes` puts at
    H(π) (for the figure's marks)."""
    return [c for c, v in cell_classes(records).items() if v == AT_UNIGRAM]


def fig4_by_grid(groups) -> dict[str, Measure]:
    """:func:`~markovlib.companion.measures.fig4` of each grid of ``groups`` (a
    :class:`markovlib.companion.records.Groups` keyed (grid name, tying)) that has
    tied and untied runs, all here."""
    names = dict.fromkeys(name for name, _ in groups.wanted)
    both = [n for n in names if {(n, "tied"), (n, "untied")} <= groups.wanted.keys()]
    return {
        n: fig4(groups.records[n, "tied"], groups.records[n, "untied"])
        for n in both
        if groups.complete((n, "tied"), (n, "untied"))
    }


def by_seed_text(records: Sequence[RunRecord]) -> str:
    """Runs above p + q = 1 at H(π) per seed: "seed s: t of n cells; ..." (each
    cell of a grid holds one run per seed)."""
    seeds = by_seed(above_line(records))
    text = "; ".join(f"seed {s}: {t} of {n} cells" for s, (n, t) in seeds.items())
    return text or "no run shipped yet"


def gradient_table(table: pd.DataFrame) -> pd.DataFrame:
    """A :func:`markovlib.precision.gradient_comparison` table as the page shows it: 4
    decimals, and "none (all 0)" for the cosine of a gradient that is exactly zero
    (no direction to compare)."""
    shown = table.round(4).astype(object)
    cosines = [c for c in table.columns if c.endswith("cosine")]
    shown[cosines] = shown[cosines].where(table[cosines].notna(), "none (all 0)")
    return shown


def zero_share_text(table: pd.DataFrame, rows: Sequence[str]) -> str:
    """The smallest share of exactly-zero fp16 gradient entries over ``rows`` of a
    :func:`markovlib.precision.gradient_comparison` table: "all" or "at least 97 %"."""
    share = float(table.loc[list(rows), "fp16 zero share"].min())
    return "all" if share == 1 else f"at least {share:.0%}".replace("%", " %")


def crossover_text(cross) -> str:
    """Runs at H(π) per optimiser and start of a
    :func:`markovlib.analysis.optimizer_crossover`, as MyST: "gd from $\\theta_\\pi$ +
    noise: k of n at $H(\\pi)$; ..."."""
    return "; ".join(
        f"{opt} from {_STARTS.get(start, start)}: {cross.at_unigram((opt, start))} of "
        f"{len(v)} at $H(\\pi)$"
        for (opt, start), v in cross.losses.items()
    )


_STARTS = {"θ_π + noise": r"$\theta_\pi$ + noise"}  # the starts as MyST maths


def crossover_lines(cross) -> str:
    """One line per optimiser and start of a
    :func:`markovlib.analysis.optimizer_crossover`: the share of the gap each run
    covered at the end, to 3 decimals (no negative zero)."""
    return "\n".join(
        f"{opt:8s} from {start:13s}: share of the gap at the end "
        + ", ".join(shown_number(round(v, 3) + 0.0) for v in cross.shares((opt, start)))
        for opt, start in cross.losses
    )


def plateau_ends(records: Sequence[RunRecord]) -> pd.DataFrame:
    """The runs above p + q = 1: their distance p + q - 1, the step where each run's
    test loss first covers 90 % of the gap (NaN: never) and its last step."""
    rows = []
    for r in above_line(records):
        first = survival_of([r]).escapes[0]
        distance = r.spec.chain["p"] + r.spec.chain["q"] - 1
        rows.append((distance, np.nan if first is None else float(first), r.steps))
    return pd.DataFrame(rows, columns=["above_line", "escape", "steps"])


def leave_text(curves: dict) -> str:
    """Where the survival curves count a run as leaving H(π) (the largest
    :attr:`~markovlib.noise.BandedSurvival.leave_at` of ``curves``), and whether their
    test losses can tell θ_π from the chain at all (issue 70)."""
    if not curves:
        return "0.1"
    at = max(s.leave_at for s in curves.values())
    noise = max(s.noise for s in curves.values())
    if all(s.resolved for s in curves.values()):
        return f"{at:.2f}"
    return (
        f"{at:.2f} (the noise of a sampled test loss spans {noise:.2g} times the gap "
        "here: the curves cannot tell a run at H(π) from one that learnt the chain; "
        "the counts can)"
    )
