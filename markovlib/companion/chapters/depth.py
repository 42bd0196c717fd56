"""``book/depth.ipynb``'s own numbers, checks and sentences: what its page states
beside the scorecard's claims."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import RunRecord

__all__ = [
    "shares_text",
]


def shares_text(records: Sequence[RunRecord]) -> str:
    """Each run's share of the gap, to three decimals, as the chapters print them."""
    return " ".join(f"{r.share:.3f}" for r in records)
