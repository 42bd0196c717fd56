"""``book/multi_state.ipynb``'s own numbers, checks and sentences: what its page states
beside the scorecard's claims."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import RunRecord

__all__ = [
    "LABELS",
    "most_learnt",
]

# this page's label of each shipped group its claims read (claims.measured): Fig 5's
# runs, its GPT-2 control and its float32 control, each loaded as tied and untied
LABELS = {
    "fig5-k5-theory-fp16-tied": "tied",
    "fig5-k5-theory-fp16-untied": "untied",
    "fig5-k5-fp16-tied": "tied",
    "fig5-k5-fp16-untied": "untied",
    "fig5-k5-tied": "tied",
    "fig5-k5-untied": "untied",
}


def most_learnt(records: Sequence[RunRecord], p: float) -> dict[str, object]:
    """The run of ``records`` on the chain p that learnt most: p, its class, its share
    of the gap, the range of its learnt probabilities of staying put K_ii and the
    chain's 1 - p ("not shipped" when no run is on that chain)."""
    on = [r for r in records if r.spec.chain["p"] == p]
    top = max(on, key=lambda r: r.share) if on else None
    stay = top.kernel.diagonal() if top else None
    return {
        "p": p,
        "class": top.cls if top else "not shipped",
        "share": round(top.share, 2) if top else "–",
        "stay": f"{stay.min():.3f} to {stay.max():.3f}" if top else "not shipped",
        "true": round(1 - p, 3),
    }
