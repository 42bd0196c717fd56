"""The rules of Fig 4 (the grid of chains): cells classed by their runs, above and
below p + q = 1, tied and untied, the independent cells' runs."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ...analysis import (
    AT_UNIGRAM,
    CLAIM_SHARE,
    ESCAPED,
    share_interval,
)
from ..records import RunRecord
from .counts import Measure, _n, trap_count
from .fig3 import escape_claim

__all__ = [
    "untied_escape",
    "cell_classes",
    "by_seed",
    "above_line",
    "trapped_text",
    "fig4",
    "fig4_float32",
    "cell_trap_table",
    "fig4_cells",
    "below_line",
]


def untied_escape(records: Sequence[RunRecord]) -> Measure:
    """Untied runs escape θ_π: :func:`escape_claim` of the runs above p + q = 1."""
    return escape_claim(above_line(records))


def cell_classes(records: Sequence[RunRecord]) -> dict[tuple[float, float], str]:
    """Per binary chain (p, q): *at H(π)* when at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of its runs are, else *escaped* when as
    many escaped, else *in between*; cells on p + q = 1 are left out (no gap)."""
    cells: dict = {}
    for r in records:
        cells.setdefault((r.spec.chain["p"], r.spec.chain["q"]), []).append(r.cls)
    out = {}
    for cell, cls in sorted(cells.items()):
        if any(c is None for c in cls):
            continue
        if sum(c == AT_UNIGRAM for c in cls) >= CLAIM_SHARE * len(cls):
            out[cell] = AT_UNIGRAM
        elif sum(c == ESCAPED for c in cls) >= CLAIM_SHARE * len(cls):
            out[cell] = ESCAPED
        else:
            out[cell] = "in between"
    return out


def by_seed(records: Sequence[RunRecord]) -> dict[int, tuple[int, int]]:
    """(runs, runs at H(π)) per seed: in a grid every cell trains seed i from the same
    initialisation, so a seed's runs across cells share their starting weights."""
    out: dict[int, list] = {}
    for r in records:
        out.setdefault(int(r.spec.seed), []).append(r)
    return {s: trap_count(rs) for s, rs in sorted(out.items())}


def _above(cells: dict) -> dict:
    return {c: v for c, v in cells.items() if c[0] + c[1] > 1}


def above_line(records: Sequence[RunRecord]) -> list[RunRecord]:
    """The runs of binary chains with p + q > 1 (where Thm 2's local minimum exists)."""
    return [r for r in records if r.spec.chain["p"] + r.spec.chain["q"] > 1]


def trapped_text(records: Sequence[RunRecord]) -> str:
    """ "k of n runs" at H(π) by the rule, as the chapters print it."""
    n, t = trap_count(records)
    return f"{t} of {n} runs"


def _cells_text(cells) -> str:
    return ", ".join(f"({p:g}, {q:g})" for p, q in cells) or "none"


def fig4(tied: Sequence[RunRecord], untied: Sequence[RunRecord]) -> Measure:
    """Fig 4: tied cells above p + q = 1 collapse to the marginal (at H(π)), untied
    ones do not: at least half of the tied cells above the line are at H(π), fewer than
    half of the untied ones."""
    ct, cu = _above(cell_classes(tied)), _above(cell_classes(untied))
    tt = [c for c, v in ct.items() if v == AT_UNIGRAM]
    tu = [c for c, v in cu.items() if v == AT_UNIGRAM]
    rt, ru = above_line(tied), above_line(untied)
    return Measure.over(
        [*tied, *untied],
        f"tied: {_n(len(tt), len(ct), 'cells')} above the line at H(π) "
        f"({_cells_text(tt)}), {trapped_text(rt)}; untied: "
        f"{_n(len(tu), len(cu), 'cells')}, {trapped_text(ru)}",
        len(tt) >= CLAIM_SHARE * len(ct) and len(tu) < CLAIM_SHARE * len(cu),
        counts=(
            ("tied above the line at H(π)", trap_count(rt)[1], len(rt)),
            ("untied above the line not at H(π)", len(ru) - trap_count(ru)[1], len(ru)),
        ),
        details={
            "tied_cells": tt,
            "untied_cells": tu,
            "tied_below": trapped_text(
                [r for r in tied if r.spec.chain["p"] + r.spec.chain["q"] < 1]
            ),
        },
    )


def fig4_float32(tied: Sequence[RunRecord], untied: Sequence[RunRecord]) -> Measure:
    """This book: in float32 after 1000 iterations the tied cells above the line leave
    H(π) (fewer than half of them at H(π)); the cells still there are named."""
    m = fig4(tied, untied)
    n, k = trap_count(above_line(tied))
    ct = _above(cell_classes(tied))
    tt = m.details["tied_cells"]
    return Measure(
        f"tied: {_n(len(tt), len(ct), 'cells')} above the line at H(π) "
        f"({_cells_text(tt)}); untied: "
        f"{_n(len(m.details['untied_cells']), len(ct), 'cells')}",
        len(tt) < CLAIM_SHARE * len(ct),
        runs=m.runs,
        trapped=m.trapped,
        details=m.details,
        counts=(("tied runs above the line that left H(π)", n - k, n),),
    )


def cell_trap_table(records: Sequence[RunRecord]) -> pd.DataFrame:
    """Per binary chain (p, q): runs, runs at H(π), their share and its 95 %
    interval (:func:`~markovlib.analysis.share_interval`)."""
    cells: dict = {}
    for r in records:
        cells.setdefault((r.spec.chain["p"], r.spec.chain["q"]), []).append(r)
    rows = []
    for (p, q), rs in sorted(cells.items()):
        n, t = trap_count(rs)
        low, high = share_interval(t, n)
        rows.append(dict(p=p, q=q, runs=n, trapped=t, share=t / n, low=low, high=high))
    return pd.DataFrame(
        rows, columns=["p", "q", "runs", "trapped", "share", "low", "high"]
    )


def fig4_cells(
    cells: Sequence[RunRecord],
    tied: Sequence[RunRecord],
    untied: Sequence[RunRecord],
) -> Measure:
    """Fig 4 from independent runs per cell: at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the tied cells above p + q = 1 have at
    least that share of their runs at H(π) (``cells``: independently initialised runs
    per tied cell above the line), and no run of an untied cell nor of a tied cell
    below the line is at H(π) (``tied``, ``untied``: the grids; cells on the line,
    without a gap, are left out)."""
    table = cell_trap_table(above_line(cells))
    held = table[table["share"] >= CLAIM_SHARE]
    below = [r for r in tied if r.spec.chain["p"] + r.spec.chain["q"] < 1 - 1e-9]
    untied = [
        r for r in untied if abs(r.spec.chain["p"] + r.spec.chain["q"] - 1) > 1e-9
    ]
    (nu, tu), (nb, tb) = trap_count(untied), trap_count(below)
    n, t = trap_count([*cells, *untied, *below])
    return Measure(
        f"tied above the line: {_n(len(held), len(table), 'cells')} with at least "
        f"half of their runs at H(π) ({trapped_text(above_line(cells))}); untied: "
        f"{_n(tu, nu)} at H(π); tied below the line: {_n(tb, nb)}",
        len(table) > 0 and len(held) >= CLAIM_SHARE * len(table) and tu == tb == 0,
        runs=n,
        trapped=t,
        details={"table": table},
        counts=(
            ("tied above the line at H(π)", *trap_count(above_line(cells))[::-1]),
            ("untied not at H(π)", nu - tu, nu),  # each claim a part (issue 67)
            ("tied below the line not at H(π)", nb - tb, nb),
        ),
    )


def below_line(tied: Sequence[RunRecord], untied: Sequence[RunRecord]) -> Measure:
    """Sec. 1 and 4.2: on chains with p + q < 1 the runs learn the chain "irrespective
    of the weight tying": for each tying, at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the grid's cells below the line are
    escaped (:func:`cell_classes`)."""
    parts, ok, runs, counts = [], True, [], []
    for label, rs in (("tied", tied), ("untied", untied)):
        rs = [r for r in rs if r.spec.chain["p"] + r.spec.chain["q"] < 1 - 1e-9]
        cells = cell_classes(rs)
        e = sum(v == ESCAPED for v in cells.values())
        k = sum(r.cls == ESCAPED for r in rs)
        parts.append(
            f"{label}: {_n(e, len(cells), 'cells')} escaped ({_n(k, len(rs))})"
        )
        ok &= e >= CLAIM_SHARE * len(cells)
        runs += rs
        counts.append((f"{label} escaped", k, len(rs)))
    return Measure.over(runs, "; ".join(parts), ok, counts=tuple(counts))
