"""Chapters run as notebooks in a pool of kernels (``make book``, ``markovlib book``,
``markovlib rerun``, ``tools/derive.py``): quiet kernels, the progress a terminal
shows, a chapter's report and a failure in a few lines; a stop (SIGINT, SIGTERM)
ends every process they started."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = [
    "quiet_kernel_manager",
    "run_chapters",
    "Stopped",
    "stopping",
    "end_started_processes",
    "ChapterProgress",
    "chapter_report",
    "failure_lines",
]


def quiet_kernel_manager(warm: bool = False):
    """A Jupyter kernel manager whose kernel process writes nothing on the terminal:
    its own log (TCP warnings, the ZMQ traceback of a kernel stopped by Ctrl-C) goes
    to /dev/null; cells' output still reaches the notebook through the kernel's
    messages; a ``$MPLBACKEND`` set for scripts (Agg) is dropped, or the figures
    would never reach the page. ``warm``: each kernel forked from this process's
    warm template (:mod:`.warm_ipykernel`), for a process that runs several chapters.
    Pass as ``papermill.execute_notebook(..., kernel_manager_class=...)``."""
    from jupyter_client.manager import AsyncKernelManager

    from .warm_ipykernel import connection_file, fork_kernel

    class QuietKernelManager(AsyncKernelManager):
        async def _async_pre_start_kernel(self, **kw):
            if warm and not self.connection_file:
                self.connection_file = connection_file()
            return await super()._async_pre_start_kernel(**kw)

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            kw.setdefault("stderr", subprocess.DEVNULL)
            kw["env"] = {
                k: v
                for k, v in (kw.get("env") or os.environ).items()
                if k != "MPLBACKEND"
            }
            forked = fork_kernel(kernel_cmd, kw) if warm else None
            if forked is None:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            p = self.provisioner
            p.process, p.pid, p.pgid = forked, forked.pid, forked.pid
            p.cwd = kw.get("cwd")
            self._reconcile_connection_info(p.connection_info)

    return QuietKernelManager


class Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM (``signum``) stopped a command; all it started has ended."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"signal {signum}")


@contextlib.contextmanager
def stopping():
    """Within: SIGINT or SIGTERM ends every process started, then raises Stopped."""
    # after a stop both signals stay ignored: the command is ending, and a second
    # Ctrl-C must not cut its last line short

    def stop(signum, frame):
        for name in (signal.SIGINT, signal.SIGTERM):
            signal.signal(name, signal.SIG_IGN)
        end_started_processes()
        raise Stopped(signum)

    try:
        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not in the main thread: leave signals alone
        yield
        return
    try:
        yield
    except Stopped:
        raise  # the command is ending: both signals stay ignored
    except BaseException:
        _restore(previous)
        raise
    _restore(previous)


def _restore(handlers: dict) -> None:
    for name, handler in handlers.items():
        signal.signal(name, handler)


def end_started_processes(seconds: float = 5.0) -> None:
    """Kill every process this one started, however deep; remove their temp files."""
    # a chapter pool's workers, their Jupyter kernels (each in a session of its own),
    # the kernels' training workers: each is frozen (SIGSTOP) until the tree stops
    # growing, so that none starts another, writes on or reacts to another's end
    # (a kernel re-parented to init would be out of reach), then all are killed
    import psutil  # the book's dependency

    held: dict[int, psutil.Process] = {}
    while new := [
        p for p in psutil.Process().children(recursive=True) if p.pid not in held
    ]:
        for process in new:
            held[process.pid] = process
            with contextlib.suppress(psutil.Error):
                process.suspend()
    leftovers = {path for p in held.values() for path in _leftovers(p)}
    for process in held.values():
        with contextlib.suppress(psutil.Error):
            process.kill()
    deadline = time.monotonic() + seconds
    while any(map(_running, held.values())) and time.monotonic() < deadline:
        time.sleep(0.02)
    for path in leftovers:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _running(process) -> bool:
    """Whether ``process`` still runs (a zombie has ended; its adopter reaps it)."""
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _leftovers(process) -> list[Path]:
    """The temporary files ``process`` removes at its end (killed, it cannot)."""
    # a Jupyter kernel's connection file (-f FILE in its command line) or a warm
    # template's folder of them (markovlib-kernels-*), the pymp-* folder of a
    # multiprocessing manager's socket
    import psutil

    temp = Path(tempfile.gettempdir())
    try:
        line = process.cmdline()
        sockets = [c.laddr for c in process.net_connections("unix")]
    except psutil.Error:
        return []
    paths = [Path(line[line.index("-f") + 1])] if "-f" in line[:-1] else []
    paths = [f for f in paths if f.suffix == ".json" and "ipykernel" in " ".join(line)]
    if "markovlib.companion.warm_ipykernel" in line:  # its kernels' connection files
        paths.append(Path(line[-1]))
    paths = [
        f.parent if f.parent.name.startswith("markovlib-kernels-") else f for f in paths
    ]
    for socket in filter(None, sockets):
        folder = Path(socket).parent
        paths += [folder] if folder.name.startswith("pymp-") else []
    return [p for p in paths if p.parent == temp]


def _left_to_the_driver() -> None:
    """In a chapter worker, SIGINT and SIGTERM do nothing: the driver ends it."""
    # a terminal's Ctrl-C reaches the whole group; caught, not ignored, so that the
    # kernel the worker starts gets the default dispositions
    for name in (signal.SIGINT, signal.SIGTERM):
        signal.signal(name, _nothing)


def _nothing(signum, frame) -> None:
    pass


def run_chapters(tasks: dict, jobs: int, *, tag: str) -> tuple[str, str] | None:
    """Run ``tasks`` (name -> (function, args); each call returns (seconds, error text,
    '' when it passed)) in ``jobs`` worker processes, in the given order, printing each
    as it ends; at the first failure cancel the rest and return (name, error), else
    None; SIGINT or SIGTERM end the workers and their kernels and raise
    :class:`Stopped`. One helper for ``make book`` (tools/prebuild.py), ``markovlib
    book`` and the derived values (tools/derive.py)."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(max(1, jobs), initializer=_left_to_the_driver)
    with stopping(), pool:
        running = {pool.submit(f, *args): name for name, (f, args) in tasks.items()}
        while running:
            # a timeout: the main thread runs a signal's handler within a second
            done, _ = wait(running, timeout=1, return_when=FIRST_COMPLETED)
            for job in done:
                name = running.pop(job)
                seconds, error = job.result()
                if error:
                    pool.shutdown(cancel_futures=True)
                    return name, error
                print(f"{tag}: {name} in {seconds:.0f} s", flush=True)
    return None


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BAR = re.compile(
    r"training: +\d+%"
)  # markovlib.runs.sweep's bar, as a kernel sends it


class _Sink:
    """A file papermill writes a kernel's stream output to (``stdout_file``)."""

    def __init__(self, take):
        self.take = take

    def write(self, text: str) -> None:
        self.take(text)

    def flush(self) -> None:
        pass


class ChapterProgress:
    """What the terminal shows while papermill executes a chapter (``markovlib
    rerun``): the chapter's cells done of n, in place on a terminal; the kernel's
    ``markovlib:`` lines (what a sweep will train, on which device, how long) and
    its training bar; nothing else (the notebook keeps every output). Pass
    :meth:`options` to ``papermill.execute_notebook``."""

    def __init__(self, name: str, cells: int, stream=None):
        self.name, self.cells, self.done = name, cells, 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.line = None  # what the cursor's line holds: "progress", "bar" or None
        self.pending = {}  # a kernel's stream text after its last newline, by stream

    def options(self) -> dict:
        return dict(
            log_output=False,
            progress_bar=False,
            stdout_file=_Sink(self.stdout),
            stderr_file=_Sink(self.stderr),
            on_cell_start=self.cell_start,
        )

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _clear(self) -> None:
        """The cursor at the start of an empty line."""
        if self.line == "progress":
            self._write("\r\x1b[K")
        elif self.line == "bar":
            self._write("\n")
        self.line = None

    def cell_start(self, cell=None, cell_index: int = 0, **_) -> None:
        self.done = cell_index
        if self.tty and self.line != "bar":
            self._write(f"\r\x1b[K{self.name}: {self.done} of {self.cells} cells")
            self.line = "progress"

    def stdout(self, text: str) -> None:
        self._take("stdout", text)

    def stderr(self, text: str) -> None:
        self._take("stderr", text)

    def _take(self, name: str, text: str) -> None:
        """A kernel's stream text: its ``markovlib:`` lines and the training bar
        shown, the rest left to the notebook; a bar is shown as it comes, other
        lines when whole."""
        *lines, rest = (self.pending.pop(name, "") + text).split("\n")
        for line in lines:
            if _BAR.search(line) or self.line == "bar":
                self._bar(line + "\n")
            elif line.startswith("markovlib:"):
                self._clear()
                self._write(line + "\n")
        if _BAR.search(rest):
            self._bar(rest)
        elif rest:
            self.pending[name] = rest

    def _bar(self, text: str) -> None:
        if self.line == "progress":
            self._clear()
        self._write(text)
        self.line = None if text.endswith("\n") else "bar"

    def close(self) -> None:
        """The line under way ended (the chapter ran, or failed)."""
        self._clear()


def chapter_report(nb, width: int = 100) -> list[str]:
    """The last lines an executed chapter printed (:func:`~markovlib.companion.
    scorecard.claims_report`): its exact claims held, then its claims on the
    scorecard with their verdicts, each cut to ``width`` characters."""
    for cell in reversed(nb.cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "") if output.get("name") == "stdout" else ""
            start = text.find("The exact claims of this chapter hold")
            if start >= 0:
                lines = _ANSI.sub("", text[start:]).rstrip().splitlines()
                return [
                    ln if len(ln) <= width else ln[: width - 1] + "…" for ln in lines
                ]
    return []


def failure_lines(error, lines: int = 6) -> list[str]:
    """A papermill execution error in a few lines: the failing cell and the last
    ``lines`` lines of its traceback, without colours."""
    trace = _ANSI.sub("", "\n".join(error.traceback)).rstrip().splitlines()
    trace = [ln for ln in trace if ln.strip() and not set(ln.strip()) <= {"-"}]
    cell = f"cell {error.exec_count}" if error.exec_count else "a cell"
    return [f"{cell} failed:", *(f"  {ln}" for ln in trace[-lines:])]
