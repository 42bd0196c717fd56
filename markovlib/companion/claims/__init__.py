"""The claims of the scorecard, one :class:`Claim` per row, in the page's order: what
the paper (or the poster, or this book) says, in what setting, what the row measures,
and for a trained row the rule that judges it (a function of
:mod:`markovlib.companion.measures` or :mod:`markovlib.companion.thesis`) and the
shipped groups it reads, by the rule's argument names. :func:`evaluate` judges one
claim on the runs of a :class:`~markovlib.companion.records.Groups`; the verdict and
its rendering are :mod:`markovlib.companion.scorecard`'s."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from ..records import Incomplete
from . import fig1, fig3b, fig4, fig5, incontext, related, thm2, trap_thesis
from .claim import Claim, _group_names, chain_text

__all__ = [
    "Claim",
    "CLAIMS",
    "claim",
    "evaluate",
    "measured",
    "chain_text",
    "paper_figures",
]


def _read(runs, read):
    """One of a rule's inputs: the records of a group or of a tuple of groups (one
    list), or of a dict of groups (the same keys)."""
    if isinstance(read, Mapping):
        return {k: runs(g) for k, g in read.items()}
    return runs(*_group_names(read))


def _having(read, labels: Mapping):
    """One of a rule's inputs as a chapter has it: the groups of a tuple or a dict that
    ``labels`` names; a single group, or nothing where ``labels`` lacks it."""
    if isinstance(read, str):
        return read if read in labels else ()
    if isinstance(read, Mapping):
        return {k: g for k, g in read.items() if g in labels}
    return tuple(g for g in read if g in labels)


def evaluate(c: Claim, runs, labels: Mapping | None = None, **given):
    """The :class:`~markovlib.companion.measures.Measure` of trained claim ``c`` on the
    records ``runs`` (a :class:`~markovlib.companion.records.Groups`) holds of the
    groups it reads (``labels``: a chapter's label for each, where the chapter names
    them its own way: judged on those it loaded, as a page at a smaller scale has fewer
    depths), ``given`` in place of its fixed arguments (a chapter's chain);
    :class:`~markovlib.companion.records.Incomplete` while a group is not all there
    (or an input has none)."""
    if labels is not None:
        loaded = {g: label for g, label in labels.items() if label in runs.records}
        c = replace(c, reads={n: _having(r, loaded) for n, r in c.reads.items()})
        if not all(c.reads.values()):  # an input of which the page loaded no group
            return Incomplete(0, 0)
        runs = runs.relabelled({g: loaded[g] for g in c.groups})
    if not runs.complete(*c.groups):
        return Incomplete(*runs.counts(*c.groups))
    inputs = {name: _read(runs, read) for name, read in c.reads.items()}
    inputs.update({name: getattr(runs, name) for name in c.uses})
    return c.rule(**inputs, **{**c.given, **given})


def measured(claim_id: str, runs, labels: Mapping, **given):
    """:func:`evaluate` of claim ``claim_id`` on a chapter's groups ``runs``
    (``labels``: its label for each group the claim reads), as a page prints it: None
    while a group is not all there."""
    m = evaluate(claim(claim_id), runs, labels, **given)
    return None if isinstance(m, Incomplete) else m


# the page's order: its sections, each in its order
CLAIMS: tuple[Claim, ...] = (
    *fig3b.CLAIMS,
    *thm2.CLAIMS,
    *trap_thesis.CLAIMS,
    *fig4.CLAIMS,
    *fig5.CLAIMS,
    *fig1.CLAIMS,
    *incontext.CLAIMS,
    *related.CLAIMS,
)

_BY_ID = {c.id: c for c in CLAIMS}


def claim(claim_id: str) -> Claim:
    """The :class:`Claim` with this id."""
    if claim_id not in _BY_ID:
        raise ValueError(f"claim must be one of {', '.join(_BY_ID)}; got {claim_id!r}")
    return _BY_ID[claim_id]


# "Fig N", or "the Fig N" (the article taken in: "the Fig 4 grid", not "the the")
_PAPER_FIGURE = re.compile(
    r"(?<![\w'’.])(?<!paper's )(?<!paper’s )(?:[Tt]he )?(Fig) (\d)"
)


def paper_figures(text: str) -> str:
    """The paper's figures named as the paper's ("the paper's Fig 3(b)") on a page
    whose own figures are "Fig. N" (issue 49)."""
    named = _PAPER_FIGURE.sub(r"the paper's \1 \2", text)
    start = _PAPER_FIGURE.match(text) and text[0].isupper()
    return "The" + named[3:] if start else named
