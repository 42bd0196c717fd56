"""Each chapter's own numbers, checks and sentences, one module a chapter beside
:mod:`markovlib.companion.figures` (``book/<chapter>.ipynb`` imports
``markovlib.companion.chapters.<chapter>``): what a page states beside the
scorecard's claims (:mod:`markovlib.companion.measures`)."""

from . import (
    bad_local_minima,
    ccmc,
    depth,
    framework,
    global_minimum,
    incontext,
    initialisation,
    multi_state,
    saddles,
    trapped,
)

__all__ = [
    "bad_local_minima",
    "ccmc",
    "depth",
    "framework",
    "global_minimum",
    "incontext",
    "initialisation",
    "multi_state",
    "saddles",
    "trapped",
]
