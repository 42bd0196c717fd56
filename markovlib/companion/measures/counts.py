"""What every rule reads and prints: :class:`Measure` (one claim measured), the
counts of runs by the rule (:func:`trap_count`, :func:`classes`), survival curves, a
grid's shares and a group's table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...analysis import (
    AT_UNIGRAM,
    cell_shares,
)
from ...noise import banded_survival, eval_tokens
from ..records import RunRecord

__all__ = [
    "grid_shares",
    "Measure",
    "classes",
    "trap_count",
    "survival_of",
    "at_step",
    "run_table",
]


def grid_shares(records: Sequence[RunRecord], ps, qs) -> np.ndarray:
    """Mean share of the gap per binary chain (p, q) of a grid of runs, rows q and
    columns p (:func:`markovlib.analysis.cell_shares`)."""

    cells: dict = {}
    for r in records:
        cells.setdefault((r.spec.chain["p"], r.spec.chain["q"]), []).append(r.share)
    return cell_shares(cells, ps, qs)


@dataclass(frozen=True)
class Measure:
    """One claim measured: the value as printed, whether the claim's check held, and
    for trained claims the runs judged and how many of them are at H(π)."""

    value: str
    ok: bool
    applicable: bool = True
    runs: int | None = None
    trapped: int | None = None
    details: dict = field(default_factory=dict)
    # the runs that behave as the claim says, per part of the claim: (part, k, n);
    # the verdict rule (analysis.claim_outcome) judges each part, the worst decides
    counts: tuple = ()

    @classmethod
    def over(cls, records: Sequence[RunRecord], value: str, ok: bool, **rest):
        """A claim measured on the runs ``records``: how many, how many at H(π)."""
        n, t = trap_count(records)
        return cls(value, ok, runs=n, trapped=t, **rest)


def _n(k: int, n: int, what: str = "runs") -> str:
    """ "k of n runs" ("k of 1 run")."""
    return f"{k} of {n} {what[:-1] if n == 1 and what.endswith('s') else what}"


def classes(records: Sequence[RunRecord]) -> list[str | None]:
    """The final class of each run by the rule."""
    return [r.cls for r in records]


def trap_count(records: Sequence[RunRecord]) -> tuple[int, int]:
    """(runs, runs at H(π) at the end) by the rule."""
    cls = classes(records)
    return len(cls), sum(c == AT_UNIGRAM for c in cls)


def survival_of(records: Sequence[RunRecord]):
    """:func:`~markovlib.noise.banded_survival` of runs of one chain and one setting:
    the noise band of their test losses from their evaluations' size."""
    tokens = eval_tokens(records[0].spec.train)
    return banded_survival(records[0].chain, [r.history for r in records], tokens)


def at_step(records: Sequence[RunRecord], step: int) -> int:
    """Runs still at H(π) at ``step`` (their loss share, :func:`survival_of`)."""
    s = survival_of(records)
    return round(s.at(step) * s.n)


# ----------------------------------------- per-run tables and the claims this book adds
def _span(values, fmt: str) -> str:
    """'a to b' of the smallest and largest of ``values`` ('a' when they print alike;
    'none' when empty)."""
    if not len(values):
        return "none"
    a, b = format(min(values), fmt), format(max(values), fmt)
    return a if a == b else f"{a} to {b}"


def run_table(groups: dict[str, Sequence[RunRecord]]) -> pd.DataFrame:
    """One row per run (``groups``: label → its records): its chain's p (and q), seed,
    iterations, share of the gap, class by the rule, the largest |K − P| of its learnt
    kernel K and the range of K's diagonal (the probabilities of staying put)."""
    rows = []
    for label, records in groups.items():
        for r in records:
            K, P = np.asarray(r.kernel), np.asarray(r.chain.P)
            chain = {k: v for k, v in r.spec.chain.items() if k in ("p", "q")}
            rows.append(
                {
                    "runs": label,
                    **chain,
                    "seed": r.spec.seed,
                    "iterations": r.steps,
                    "share of the gap": round(r.share, 3),
                    "class": r.cls,
                    "max |K − P|": round(float(np.abs(K - P).max()), 4),
                    "K_ii learnt": _span(K.diagonal(), ".3f"),
                    "K_ii true": _span(P.diagonal(), ".3f"),
                }
            )
    return pd.DataFrame(rows)
