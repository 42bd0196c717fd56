"""The one error path of the ``markovlib`` command: a command raises
:class:`CommandFailed`; :func:`report` prints its one line and gives its exit status.

Exit statuses: 0 done, 1 the work failed (a damaged file, a full disk, a failed
chapter or check), 2 refused before any work (bad arguments or environment), 130
interrupted (SIGINT), 143 terminated (SIGTERM)."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import warnings

FAILED, USAGE, INTERRUPTED, TERMINATED = 1, 2, 130, 143
# what a stopped command keeps, unless it says more
KEPT = "what was finished is kept, re-run the same command to go on"


class CommandFailed(Exception):
    """A command's end: ``main`` prints ``label: message``, exits ``status``."""

    def __init__(self, status: int, message: str, label: str = "error"):
        super().__init__(message)
        self.status, self.message, self.label = status, message, label


class UsageError(CommandFailed):
    """Bad input found after parsing: one line, exit status 2, before any work."""

    def __init__(self, message: str):
        super().__init__(USAGE, message)


def one_line(text) -> str:
    """A message on one line (some errors quote multi-line text, e.g. a schema)."""
    return " ".join(str(text).split())


def stopped(stop: KeyboardInterrupt, kept: str = KEPT) -> CommandFailed:
    """The one Ctrl-C (or SIGTERM: ``stop.signum``) end of a command: what is kept."""
    # nbclient leaves a kernel poll unawaited and the interrupted cell's task
    # unretrieved: neither is reported at exit (asyncio logs the latter with the
    # cell's traceback when the task is collected); the line says it all
    warnings.filterwarnings("ignore", "coroutine", RuntimeWarning)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    if getattr(stop, "signum", signal.SIGINT) == signal.SIGTERM:
        return CommandFailed(TERMINATED, f"terminated; {kept}", label="")
    return CommandFailed(INTERRUPTED, f"interrupted; {kept}", label="")


def interrupt_in(error: BaseException) -> KeyboardInterrupt | None:
    """The stop that ``error`` was raised from, if any: a Ctrl-C or SIGTERM that lands
    while a class is made (a lazy import) comes back as a RuntimeError caused by it
    (fresh-clone make test, 2026-11-29: "Error calling __set_name__ ...")."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


_LOST: list[KeyboardInterrupt] = []  # stops raised where Python could not raise them


@contextlib.contextmanager
def keep_lost_stops():
    """Keep a Ctrl-C (or SIGTERM) that lands in a callback Python cannot raise from
    (a weak reference's, during an import: fresh-clone make test, 2026-11-30, `verify`
    printed "Exception ignored in: <function _get_module_lock.<locals>.cb>" and went on
    to exit 0) for :func:`lost_stop`, and print nothing of it."""
    previous = sys.unraisablehook
    _LOST.clear()

    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _LOST.append(unraisable.exc_value.with_traceback(None))  # frames freed
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def lost_stop() -> KeyboardInterrupt | None:
    """The first stop :func:`keep_lost_stops` kept since the last call, if any."""
    lost = _LOST[0] if _LOST else None
    _LOST.clear()
    return lost


def report(command: str, failure: CommandFailed) -> int:
    """``failure`` as ``markovlib COMMAND: label: message`` on stderr; its status."""
    label = f"{failure.label}: " if failure.label else ""
    print(
        f"markovlib {command}: {label}{one_line(failure.message)}",
        file=sys.stderr,
        flush=True,
    )
    return failure.status
