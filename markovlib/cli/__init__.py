"""The ``markovlib`` command: a package of one module per command (see ``program``)."""

from .program import COMMANDS, HELP, build_parser, entry, main

__all__ = ["main", "entry", "build_parser", "HELP", "COMMANDS"]
