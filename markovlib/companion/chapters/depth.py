"""``book/depth.ipynb``'s own numbers, checks and sentences: what its page states
beside the scorecard's claims."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import RunRecord

__all__ = [
    "LABELS",
    "labels",
    "shares_text",
]

FIG1_DEPTHS = (1, 2, 4, 8)  # the paper's Fig 1

# this page's label of each shipped group its claims read (claims.measured): Fig 1's
# fp16 runs by name, its float32 control and the higher-order runs by depth
LABELS = {
    **{f"depth-fig1-fp16-L{L}": f"L{L}" for L in FIG1_DEPTHS},
    "depth-fig1-fp16-L2-untied": "L2-untied",
    "depth-fig1-fp16-L2-mirror": "L2-mirror",
    "depth-fig1-fp16-L2-trapstarts": "L2 from trapped starts",
    **{f"depth-fig1-L{L}": L for L in FIG1_DEPTHS},
    **{f"higher-order-L{L}": L for L in (1, 2, 3)},
}


def labels(depths) -> dict:
    """:data:`LABELS` of the groups a page that trained Fig 1 at ``depths`` has."""
    lacks = {f"depth-fig1-fp16-L{L}" for L in FIG1_DEPTHS if L not in depths}
    return {g: label for g, label in LABELS.items() if g not in lacks}


def shares_text(records: Sequence[RunRecord]) -> str:
    """Each run's share of the gap, to three decimals, as the chapters print them."""
    return " ".join(f"{r.share:.3f}" for r in records)
