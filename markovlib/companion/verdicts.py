"""The scorecard's verdict rule, one for every claim and every scale, apart from
evaluating the claims (:mod:`markovlib.companion.computed`) and the page
(:mod:`markovlib.companion.scorecard`).

The rule (:func:`verdict`), stated on the scorecard page:

* **reproduced** — the claim's check holds; for a trained claim with ``counts``
  (one per part, as its measure counts: per tying, per depth, per half; issue 67)
  every part's 95 % interval of k/n (:func:`~markovlib.analysis.claim_outcome`) lies
  above 1/2 too: counts that all hold never override a check that failed (the row
  then *differs*: a part its counts left out failed);
* **too few runs** — a part has so few runs (n <= 5) that no k could decide;
* **partly** — a part's interval contains 1/2 (the worst part decides: too few runs,
  then partly, then differs);
* **differs** — the check fails (a part's interval lies below 1/2), for an exact
  (untrained) claim at any scale, or for a trained claim at a scale whose runs are
  long enough to claim convergence (``cpu``, ``paper``);
* **not tested at this scale** — a trained claim at a scale that claims nothing about
  convergence (``smoke``), whatever its check says; any claim a part of which has no
  run to judge, or an exact claim not computed at this scale (at any scale); at a
  reduced scale (``cpu``: fewer and shorter runs than the paper edition's), a trained
  claim its runs leave undecided (too few runs, partly), or one that counts runs at
  H(π) judged on runs whose length, batch or (shorter) iterations differ from the
  authors' (``unlike``: settings the trapped chapters measured to change how many
  runs stay; issue 70);
* **not applicable to this chain** — the reader's chain is outside the claim's setting
  (e.g. a claim about p + q > 1 on a chain with p + q < 1).
"""

from __future__ import annotations

from ..analysis import (
    FAILS,
    HOLDS,
    PARTLY as PARTLY_HOLDS,
    TOO_FEW as TOO_FEW_RUNS,
    claim_outcome,
    share_interval,
)
from ..presets import AUTHORS
from .claims import Claim

__all__ = [
    "REPRODUCED",
    "DIFFERS",
    "PARTLY",
    "TOO_FEW",
    "NOT_TESTED",
    "NOT_APPLICABLE",
    "VERDICTS",
    "verdict",
    "smaller_than_the_paper",
    "unlike_the_authors",
    "interval_text",
    "counts_text",
    "with_intervals",
]

REPRODUCED, DIFFERS, PARTLY = "reproduced", "differs", "partly"
TOO_FEW = "too few runs"  # no k of the part's n could decide (n <= 5)
NOT_TESTED, NOT_APPLICABLE = "not tested at this scale", "not applicable to this chain"
VERDICTS = (REPRODUCED, TOO_FEW, PARTLY, DIFFERS, NOT_TESTED, NOT_APPLICABLE)
# analysis.claim_outcome of a part of a claim -> its verdict; the worst part decides
_OUTCOME = {
    HOLDS: REPRODUCED,
    TOO_FEW_RUNS: TOO_FEW,
    PARTLY_HOLDS: PARTLY,
    FAILS: DIFFERS,
}


def verdict(
    ok: bool,
    scale=None,
    *,
    exact: bool = False,
    applicable: bool = True,
    counts: tuple = (),
    unlike: bool = False,
) -> str:
    """The page's rule: see the module docstring. ``scale`` is a
    :class:`~markovlib.presets.Scale`; ``counts``: the runs that behave as a trained
    claim says, per part, (part, k, n), judged by
    :func:`~markovlib.analysis.claim_outcome` (the worst part decides; a part of no
    runs leaves the claim not tested); ``unlike``: the claim says runs stay at H(π)
    and its runs differ from the authors' (:func:`unlike_the_authors`)."""
    if not isinstance(ok, bool):
        ok = bool(ok)
    if not applicable:
        return NOT_APPLICABLE
    if scale is None or not (exact or scale.converges):
        return NOT_TESTED  # no runs read, or too small a scale to judge runs
    if not exact and any(n == 0 for _, _, n in counts):
        return NOT_TESTED  # no verdict from zero runs
    v = REPRODUCED if ok else DIFFERS
    if counts and not exact:  # each part decides, the worst first
        outcomes = [_OUTCOME[claim_outcome(k, n)] for _, k, n in counts]
        worst = (REPRODUCED, TOO_FEW, PARTLY, DIFFERS)
        v = max(outcomes, key=worst.index)
        v = DIFFERS if v == REPRODUCED and not ok else v  # a check no count holds
    cut = not exact and smaller_than_the_paper(scale)
    return NOT_TESTED if cut and (unlike or v in (TOO_FEW, PARTLY)) else v


def smaller_than_the_paper(scale) -> bool:
    """Whether ``scale`` trains fewer or shorter runs than the paper edition's and
    claims convergence (``cpu``, a reader's re-run; issue 46)."""
    return scale is not None and scale.converges and scale.name != "paper"


def unlike_the_authors(c: Claim, scale) -> list[str]:
    """Where ``c`` counts runs at H(π) (:attr:`Claim.traps`): how the runs of
    ``scale`` differ from the authors' of its figure
    (:data:`~markovlib.presets.AUTHORS`) in what the book measured to change how many
    runs stay (fewer iterations: a run at H(π) may still leave; the length and batch:
    the trapped chapter's tokens per batch), e.g. ['length 256 (the authors' 1024)'];
    empty otherwise."""
    A = AUTHORS.get(c.authors) if c.authors else None
    if not (c.traps and A and scale is not None):
        return []
    out = [f"{scale.steps} iterations (the authors' {A.steps})"]
    out = out if scale.steps < A.steps else []
    for name, mine, theirs in (
        ("length", scale.seq_len, A.seq_len),
        ("batch", scale.batch_size, A.batch_size),
    ):
        out += [f"{name} {mine} (the authors' {theirs})"] if mine != theirs else []
    return out


def interval_text(k: int, n: int) -> str:
    """The 95 % interval of a share of k of n runs: '60–91 %' ('—': no runs)."""
    if n == 0:
        return "—"
    low, high = share_interval(k, n)
    return f"{100 * low:.0f}–{100 * high:.0f} %"


def counts_text(counts: tuple) -> str:
    """The 95 % interval of each part's share of runs, beside the count it belongs
    to (issue 67): '95 % interval: at H(π) 25 of 32, 60–91 %', per part where the
    claim has several."""
    head = "95 % interval: " if len(counts) == 1 else "95 % intervals: "
    return head + "; ".join(
        f"{part} {k} of {n}, {interval_text(k, n)}" for part, k, n in counts
    )


def with_intervals(c: Claim, value: str, counts: tuple) -> str:
    """A trained row's measured value with each part's interval (:func:`counts_text`)
    beside it, as the chapters glue it and the scorecard prints it."""
    return f"{value} ({counts_text(counts)})" if counts and not c.exact else value
