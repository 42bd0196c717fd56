"""Each trained claim's measurement, as a function of runs: the scorecard, the CLI and
the chapters call these, so a verdict is computed in one place.

A run enters as a :class:`~markovlib.companion.records.RunRecord` (its chain, learnt
kernel, test history and spec), built by :mod:`markovlib.companion.records`. Every
count of runs uses the one rule of :mod:`markovlib.analysis` (the share of the gap
H(π) − H_rate a run has learnt), never a tolerance in nats.

One module per figure, each rule beside the others of its figure: :mod:`.fig3`,
:mod:`.fig4`, :mod:`.fig5` (and the k-state threshold), :mod:`.depth` (Fig 1, Sec.
4.4), :mod:`.appendix_d`; what they all read and print in :mod:`.counts`. What a page
states beside these claims (a chapter's own numbers, checks and sentences) is in
:mod:`markovlib.companion.chapters`. Two modules are not imported here: :mod:`.along`
(Fig 3(d)'s averages at trained runs) and :mod:`.generation` (the CCMC chapter's
generation, summarised), each a derived value keyed on its own code."""

from . import (  # the modules under their own names: fig4 is also a rule's
    appendix_d as _appendix_d,
    counts as _counts,
    depth as _depth,
    fig3 as _fig3,
    fig4 as _fig4,
    fig5 as _fig5,
    incontext as _incontext,
)
from .appendix_d import *  # noqa: F403
from .counts import *  # noqa: F403
from .depth import *  # noqa: F403
from .fig3 import *  # noqa: F403
from .fig4 import *  # noqa: F403
from .fig5 import *  # noqa: F403
from .incontext import *  # noqa: F403

# each module's names, as it exports them: what it reads and prints, then by figure
__all__ = [
    *_counts.__all__,
    *_fig3.__all__,
    *_fig4.__all__,
    *_fig5.__all__,
    *_depth.__all__,
    *_appendix_d.__all__,
    *_incontext.__all__,
]
