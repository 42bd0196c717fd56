"""The ``markovlib`` program: its parser, the lazy registry of its commands (a
command's module is imported only when it is the command given), and ``main``, the one
place that turns a command's failure into a line and an exit status."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from importlib import import_module

from .errors import (
    FAILED,
    INTERRUPTED,
    TERMINATED,
    CommandFailed,
    interrupt_in,
    keep_lost_stops,
    lost_stop,
    report,
    stopped,
)
from .values import MAX_LR, MAX_STEPS

DESCRIPTION = """The ``markovlib`` command: train one model, run a sweep into a result store, build a
reader's edition, or re-run one chapter.

    markovlib train --p 0.5 --q 0.8 --tied --steps 400
    markovlib sweep --p 0.2,0.5,0.8 --q 0.2,0.5,0.8 --tied both --seeds 5
    markovlib book --p 0.6 --q 0.7 --scale cpu --out my-book
    markovlib rerun framework --p 0.3 --q 0.9  # one chapter: notebook + HTML page
    markovlib verify --sample 2   # the shipped data is what this library produces
    markovlib edition status      # progress of the paper edition's runs
    markovlib import results/unsaved-20261126-101500-4242.sqlite  # a side file

Bad arguments exit with status 2 and one line naming the argument.
"""  # noqa: E501
# each command's line in `markovlib --help` and its module (under markovlib.cli):
# `add(subs)` declares its options, `run(args)` does it
HELP = {
    "train": "train one model and compare its loss with H_rate and H(pi)",
    "sweep": "train a (p, q) grid × tying × seeds into a result store",
    "book": "execute every chapter with your (p, q) and build your own HTML edition",
    "rerun": (
        "execute one chapter with your chain into a notebook and an HTML page that "
        "read like the book's"
    ),
    "verify": "check the shipped run data and re-train a random sample bit for bit",
    "scorecard": (
        "the paper edition's scorecard, computed from the shipped runs (trains nothing)"
    ),
    "edition": "produce the paper edition: train its runs, export them as data",
    "import": "take in the runs of a side file that a busy or failing store could not",
}
COMMANDS = {name: name for name in HELP} | {"import": "import_runs"}
__all__ = ["main", "build_parser", "Parser", "HELP", "COMMANDS", "MAX_LR", "MAX_STEPS"]


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage block) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def command(name: str):
    """The module of command ``name`` (imported now)."""
    return import_module(f"{__package__}.{COMMANDS[name]}")


def build_parser(argv: list[str] | None = None) -> Parser:
    """The parser of ``markovlib ARGV``: the command given with its options."""
    parser = Parser(
        prog="markovlib",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subs = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    given = next((a for a in argv or [] if not a.startswith("-")), None)
    for name in COMMANDS:
        if argv is None or name == given:
            module = command(name)
            module.add(subs, HELP[name]).set_defaults(run=module.run)
        else:
            subs.add_parser(name, help=HELP[name])
    return parser


def main(argv: list[str] | None = None) -> int:
    """``markovlib ARGV``: 0 done, 1 failed, 2 refused, 130/143 stopped; a command
    that would end with 0 after a stop Python could not raise (imports included) ends
    as stopped."""
    argv = sys.argv[1:] if argv is None else argv
    with keep_lost_stops():
        command, status = _main(argv)
    lost = lost_stop()  # taken whatever the status: none is left for a later call
    if status == 0 and lost is not None:
        return report(command, stopped(lost))
    return status


def _main(argv: list[str]) -> tuple[str, int]:
    """The command's name and :func:`main`'s status before a lost stop is judged."""
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    return args.command, _run(parser, args)


def _run(parser, args) -> int:
    """Run the parsed command; every failure and stop as its one line."""
    from ..runs.shipped import ShippedDataError  # a command runs: its imports now
    from ..runs.store import StoreError
    from .environment import check_arguments

    try:
        check_arguments(parser, args)
        return args.run(args)
    except CommandFailed as e:
        return report(args.command, e)
    except (StoreError, ShippedDataError) as e:  # a damaged or foreign file: which
        return report(args.command, CommandFailed(FAILED, str(e)))
    except OSError as e:  # a full disk, a read-only folder: which, and where
        where = f": {e.filename}" if e.filename else ""
        return report(args.command, CommandFailed(FAILED, f"{e.strerror or e}{where}"))
    except KeyboardInterrupt as e:
        return report(args.command, stopped(e))
    except Exception as e:  # a stop that came back as another error
        if (stop := interrupt_in(e)) is None:
            raise
        return report(args.command, stopped(stop))


# seconds a stopped command's process may take to exit after its line
STOP_GRACE = 20.0


def entry() -> int:
    """The ``markovlib`` command and ``python -m markovlib``: :func:`main`, and a
    stopped command's process ended within :data:`STOP_GRACE` seconds of its line even
    where an exit hook hangs (CI, 2026-11-29: a Ctrl-C'd sweep on two worker processes
    printed its line and never exited). In-process callers use :func:`main`."""
    status = main()
    if status in (INTERRUPTED, TERMINATED):
        timer = threading.Timer(STOP_GRACE, os._exit, args=(status,))
        timer.daemon = True
        timer.start()  # before the flushes: a full or closed pipe cannot hold it
        with contextlib.suppress(OSError):
            sys.stdout.flush()
            sys.stderr.flush()
    return status
