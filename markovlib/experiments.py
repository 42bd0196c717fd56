"""Moved to :mod:`markovlib.runs.experiments` (the run layer).

This old name is the same module object, so that
``from markovlib.experiments import ...`` keeps working, private names and
monkeypatching included.
"""

import sys

from .runs import experiments as _module

sys.modules[__name__] = _module
