"""``book/saddles.ipynb``'s own numbers, checks and sentences: what its page states
beside the scorecard's claims."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ... import theory
from ...analysis import cell_shares, curvature_c
from ...chains import (
    MarkovChain,
)
from ..measures import (
    Measure,
    grid_shares,
)
from ..records import RunRecord

__all__ = [
    "LABELS",
    "fig4_kernel_maps",
    "saddle_sides_text",
    "saddle_grid_text",
    "thm3_holds",
]

# this page's label of each shipped group its claims read (claims.measured): its
# untied runs by (model, tying), the float32 Fig 4 grid by tying
LABELS = {
    "trap-gpt2-untied": ("gpt2", "untied"),
    "trap-theory-untied": ("theory", "untied"),
    "fig4-tied": "tied",
    "fig4-untied": "untied",
}


def fig4_kernel_maps(
    records: Sequence[RunRecord], grid: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """Fig 4's two maps of a grid of runs, rows q and columns p: the mean learnt
    P(0|1) per cell, and the mean share of the gap (NaN on p + q = 1)."""
    cells: dict = {}
    for r in records:
        cells.setdefault((r.spec.chain["p"], r.spec.chain["q"]), []).append(
            r.kernel[1, 0]
        )
    return cell_shares(cells, grid, grid), grid_shares(records, grid, grid)


def saddle_sides_text(
    summary: dict, untied: Measure, scale: str, converges: bool, chain_name: str
) -> str:
    """The saddles chapter's sentence on its tied and untied runs: ``summary`` maps
    (model, tying) to :class:`~markovlib.analysis.EscapeStats`, ``untied`` is the
    untied runs' :func:`~markovlib.companion.measures.escape_claim`."""
    g2u, g2t = summary["gpt2", "untied"], summary["gpt2", "tied"]
    th = summary["theory", "tied"]
    text = (
        f"Measured at the `{scale}` scale ({g2t.n} runs per model on {chain_name}): "
        f"untied, {untied.value}; tied, {g2t.n_escaped} of {g2t.n} GPT-2 runs and "
        f"{th.n_escaped} of {th.n} theory-model runs escaped (median escape step of "
        f"the GPT-2 runs: untied {g2u.median_text}, tied {g2t.median_text})."
    )
    return (
        text if converges else text + " These runs are far too short to say anything."
    )


def saddle_grid_text(fig4: str, scale: str, converges: bool) -> str:
    """The saddles chapter's sentence on its (p, q) grid (``fig4``: the value of
    :func:`~markovlib.companion.measures.fig4_float32`, or the runs shipped so far)."""
    text = f"Measured at the `{scale}` scale in float32: {fig4}."
    return text if converges else text + " (Far too short to converge.)"


def thm3_holds(hessian, chain: MarkovChain, pairing: float, drop: float) -> bool:
    """Thm 3 at θ_π, untied: the eigenvalues -c and +c, d times each, the smallest
    -|c| as the closed form, its direction pairs e with -a and the loss drops along
    it (False on p + q = 1, where c = 0)."""
    ev, c = np.asarray(hessian.eigenvalues), curvature_c(chain)
    d = len(ev[hessian.blocks["e"]])
    n_minus, n_plus = (int(np.sum(np.abs(ev + s * abs(c)) < 1e-6)) for s in (1, -1))
    closed = theory.unigram_curvature(chain, tied=False)
    return bool(
        abs(c) > 1e-12
        and n_minus == n_plus == d
        and hessian.min_eigenvalue < 0
        and abs(hessian.min_eigenvalue - closed) < 1e-6
        and abs(pairing + np.sign(c)) < 1e-6
        and drop > 0
    )
