"""Moved to :mod:`markovlib.runs.edition` (the run layer).

This old name is the same module object, so that
``from markovlib.edition import ...`` keeps working, private names and
monkeypatching included.
"""

import sys

from .runs import edition as _module

sys.modules[__name__] = _module
