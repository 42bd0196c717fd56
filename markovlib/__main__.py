"""python -m markovlib: the same as the markovlib command."""

import contextlib
import sys

from .cli import entry


def _forget_caught_interrupt() -> None:
    """Under ``python -m`` (CPython 3.11), a Ctrl-C that ended an ``exec`` of a string
    (a dataclass or named tuple made as a module is imported) sets
    ``_Py_UnhandledKeyboardInterrupt`` although the command caught it and printed its
    line, and ``Py_RunMain`` then ends the process by SIGINT (exit -2) whatever its
    status: 4 of 28 verifies stopped 0.5 s into their re-training (the flag read 1 in
    2 of 2 looked at), 0 of 28 with it cleared (2026-11-29). The command returned:
    the flag cleared, its status stands."""
    import ctypes

    with contextlib.suppress(ValueError, AttributeError, OSError):
        flag = ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt")
        flag.value = 0


if __name__ == "__main__":
    status = entry()
    _forget_caught_interrupt()
    sys.exit(status)
