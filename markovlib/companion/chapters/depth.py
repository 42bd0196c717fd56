"""``book/depth.ipynb``'s own numbers, checks and sentences: what its page states
beside the scorecard's claims."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import RunRecord

__all__ = [
    "LABELS",
    "shares_text",
]

FIG1_DEPTHS = (1, 2, 4, 8)  # the paper's Fig 1

# this page's label of each shipped group its claims read (claims.measured): Fig 1's
# fp16 runs by name (a page at a smaller scale loads fewer depths), its float32 control
# and the higher-order runs by depth, Fig 1's trapped runs continued by precision
LABELS = {
    **{f"depth-fig1-fp16-L{L}": f"L{L}" for L in FIG1_DEPTHS},
    "depth-fig1-fp16-L2-untied": "L2-untied",
    "depth-fig1-fp16-L2-mirror": "L2-mirror",
    "depth-fig1-fp16-L2-trapstarts": "L2 from trapped starts",
    **{f"depth-fig1-L{L}": L for L in FIG1_DEPTHS},
    **{f"higher-order-L{L}": L for L in (1, 2, 3)},
    **{
        f"continue-depth-fig1-fp16-L1-{precision}": f"depth 1, {precision}"
        for precision in ("fp32", "fp16-scaled")
    },
}


def shares_text(records: Sequence[RunRecord]) -> str:
    """Each run's share of the gap, to three decimals, as the chapters print them."""
    return " ".join(f"{r.share:.3f}" for r in records)
