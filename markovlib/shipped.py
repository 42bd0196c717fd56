"""Moved to :mod:`markovlib.runs.shipped` (the run layer).

This old name is the same module object, so that
``from markovlib.shipped import ...`` keeps working, private names and
monkeypatching included.
"""

import sys

from .runs import shipped as _module

sys.modules[__name__] = _module
