"""Moved to :mod:`markovlib.runs.executors` (the run layer).

This old name is the same module object, so that
``from markovlib.executors import ...`` keeps working, private names and
monkeypatching included.
"""

import sys

from .runs import executors as _module

sys.modules[__name__] = _module
