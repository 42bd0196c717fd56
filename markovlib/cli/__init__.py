"""The ``markovlib`` command: a package of one module per command (see ``program``)."""

from .program import COMMANDS, HELP, build_parser, main

__all__ = ["main", "build_parser", "HELP", "COMMANDS"]
