"""python -m markovlib: the same as the markovlib command."""

import sys

from .cli import entry

sys.exit(entry())
