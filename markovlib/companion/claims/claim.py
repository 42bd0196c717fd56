"""One row of the scorecard: a :class:`Claim`, what the paper (or the poster, or this
book) says, in what setting, what the row measures, and for a trained row the rule that
judges it and the shipped groups it reads."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["Claim", "chain_text"]


@dataclass(frozen=True)
class Claim:
    """One row of the scorecard."""

    id: str  # glue keys sc_<id>_value / sc_<id>_verdict
    chapter: str  # the notebook (book/<chapter>.ipynb) that measures it
    # whose claim: "paper", "poster", "this book", "Ildiz et al."; "paper, as this
    # book reads it": the paper's claim in a form the book chose to test (issue 67)
    source: str
    claim: str  # the claim in one line
    setting: str  # the paper's setting
    measure: str  # what the number in the row is
    target: str  # label of the figure or theorem the row links to
    exact: bool = False  # no training: tested at every scale
    # a trained row's rule: called with the records of ``reads`` by name, ``given``
    # and ``uses``; None for exact rows and for rows that only their chapter computes
    rule: Callable | None = None
    # the rule's arguments read from the shipped groups (data/paper/<group>-*.parquet):
    # a group, a tuple of groups (their runs in one list) or a dict of groups
    reads: Mapping = field(default_factory=dict, hash=False)
    given: Mapping = field(default_factory=dict, hash=False)  # its fixed arguments
    # what else of the runs it reads: "load" (a run's model), "weights_of" (its weights)
    uses: tuple[str, ...] = ()
    # the figure of presets.AUTHORS whose settings the row's runs are compared with: a
    # row is the paper's only when every run it reads is at those settings
    authors: str | None = None
    # how a control at the authors' settings differs from their experiment by design
    design: str = ""
    # the claim says runs stay at H(π) (to the end of the authors' runs): runs shorter
    # than theirs cannot test it (a run at H(π) may still leave it)
    stays: bool = False
    # the claim counts runs at H(π) (that stay or leave): the trapped chapter measured
    # those counts to move with the runs' length (tokens per batch) and iterations, so
    # runs unlike the authors' in them cannot judge it (issue 70); every ``stays`` claim
    traps: bool = False

    def __post_init__(self):
        if self.stays:
            object.__setattr__(self, "traps", True)

    @property
    def groups(self) -> tuple[str, ...]:
        """The shipped groups the row reads, in the order of :attr:`reads`."""
        return tuple(g for v in self.reads.values() for g in _group_names(v))

    @property
    def chain(self) -> tuple[float, float] | None:
        """The paper's chain (p, q) the claim is about, where its setting opens with
        it: '(0.5, 0.8), GPT-2, tied'; None for a claim about no one chain."""
        m = _OPENING_CHAIN.match(self.setting)
        return (float(m[1]), float(m[2])) if m else None

    @property
    def label(self) -> str:
        """What the claim's source calls it, where its text opens with that: 'Fig
        3(a)', 'Sec. 4.1'; '' otherwise."""
        m = _LABEL.match(self.claim)
        return m[0].removesuffix(": ") if m else ""

    def asked_of(self, p: float, q: float) -> str:
        """The claim asked of another chain (issue 70): its source's label dropped
        ('Fig 3(a): '), its chain replaced by (p, q), or ', on (p, q)' added."""
        text = _LABEL.sub("", self.claim, count=1)
        theirs, yours = chain_text(*self.chain), chain_text(p, q)
        if theirs in text:
            return text.replace(theirs, yours)
        return f"{text}, on {yours}"


def _group_names(read) -> tuple[str, ...]:
    """The groups of one of a rule's inputs: a group, a tuple or a dict of groups."""
    if isinstance(read, str):
        return (read,)
    return tuple(read.values() if isinstance(read, Mapping) else read)


def chain_text(p: float, q: float) -> str:
    """A binary chain as the claims write it: '(0.5, 0.8)'."""
    return f"({p:g}, {q:g})"


_OPENING_CHAIN = re.compile(r"\((\d*\.?\d+), (\d*\.?\d+)\)")
_LABEL = re.compile(r"^(Fig \d\S*( \S+\))?|Sec\. [\d.]+|App\. \w+|Thm \d): ")
