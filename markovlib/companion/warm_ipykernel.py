"""Jupyter kernels forked from a warm process: a chapter's kernel starts with torch,
pandas, matplotlib and markovlib already imported (issue 69).

A pool worker that executes several chapters (``make book``, ``markovlib book``)
starts, at its first kernel, one *template* process with the kernel's own command
prefix, environment and folder, ``python -m markovlib.companion.warm_ipykernel FD``.
The template imports :data:`PRELOAD` once, runs nothing else, and forks each later
kernel of that worker from itself: the child takes the kernel's session, environment,
folder and stdio, and runs ``ipykernel_launcher``'s own entry point with the kernel's
arguments. Each chapter's kernel is still a fresh process of its own (nothing a
chapter defines reaches another); what it skips is the interpreter's start and the
imports, about 6 s of CPU a chapter on an AMD EPYC.

The template is its worker's child in a session of its own (a terminal's Ctrl-C
reaches neither it nor its kernels; :func:`~.chapter_runner.end_started_processes`
finds both in the worker's tree); it ends, killing the kernels it forked, once its
worker's end of the socket closes. Where a kernel cannot be forked (no ``os.fork`` or
``os.pidfd_open``, another command than ``python -m ipykernel_launcher``, a template
that failed), the kernel is launched as Jupyter launches it.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid

__all__ = ["PRELOAD", "fork_kernel", "connection_file", "close_templates"]

# What the chapters import (their import cells, then what their computations import
# on first use: torch.func's dynamo and jvp decompositions, 1.7-2.3 s in five of them,
# `python -X importtime`, 2026-11-29), in the order a kernel imports them;
# matplotlib's backend is the kernel's inline one (``$MPLBACKEND``, as ipykernel sets
# it), whose module is imported in the kernel
PRELOAD = (
    "ipykernel.kernelapp",
    "numpy",
    "pandas",
    "torch",
    "scipy.stats",
    "matplotlib.pyplot",
    "seaborn",
    "markovlib",
    "markovlib.companion.notebook",
    "markovlib.companion.figures.style",
    "markovlib.companion.scorecard",
    "markovlib.companion.chapters",
    "myst_nb.ext.glue",
    "pandas.io.formats.style",
    "pyarrow.dataset",
    "tabulate",
    "torch._dynamo",
    "torch._decomp.decompositions_for_jvp",
)
INLINE = "module://matplotlib_inline.backend_inline"
# a kernel's own variables, which differ between kernels of one template
PER_KERNEL = ("JPY_SESSION_NAME", "JPY_PARENT_PID")


def _kernel_command(cmd: list[str]) -> tuple[list[str], list[str]] | None:
    """(interpreter and its options, the launcher's arguments) of ``python [opts] -m
    ipykernel_launcher ARGS``; None for any other command."""
    for i in range(1, len(cmd) - 1):
        if cmd[i] == "-m":
            return (
                (cmd[:i], cmd[i + 2 :]) if cmd[i + 1] == "ipykernel_launcher" else None
            )
    return None


class _Forked:
    """A forked kernel, as Jupyter's provisioner handles its process (``Popen``'s
    poll, wait, send_signal, kill, terminate): its end seen through a pidfd."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None
        self._fd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        return self.wait(0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None and select.select([self._fd], [], [], timeout)[0]:
            self.returncode = 0  # its template reaps it; the status is not shared
            os.close(self._fd)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_FOLDER: list[str] = []


def connection_file() -> str:
    """A new kernel connection file's path, in this process's folder of them (named
    on its templates' command lines: a stopped command's cleanup removes it)."""
    if not _FOLDER:
        _FOLDER.append(tempfile.mkdtemp(prefix="markovlib-kernels-"))
    return os.path.join(_FOLDER[0], f"kernel-{uuid.uuid4()}.json")


class _Template:
    """A warm process started with one kernel prefix, environment and folder."""

    def __init__(self, prefix: list[str], env: dict, cwd: str | None):
        mine, theirs = socket.socketpair()
        module = "markovlib.companion.warm_ipykernel"
        folder = os.path.dirname(connection_file())
        self.process = subprocess.Popen(
            [*prefix, "-m", module, str(theirs.fileno()), folder],
            env=env,
            cwd=cwd,
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        self.socket, self.lines = mine, mine.makefile("r")

    def fork(self, args: list[str], env: dict, cwd: str | None, quiet: bool) -> int:
        """A kernel forked with ``args``; its pid (OSError when the template failed)."""
        request = {"args": args, "env": env, "cwd": cwd, "quiet": quiet}
        self.socket.sendall((json.dumps(request) + "\n").encode())
        answer = self.lines.readline()
        if not answer:
            raise OSError("the kernel template ended")
        return int(json.loads(answer)["pid"])

    def close(self) -> None:
        """Close its socket: the template ends (:func:`_serve`); wait for that."""
        self.lines.close()  # the socket's file: the descriptor closes with both
        self.socket.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)


_TEMPLATES: dict = {}


def fork_kernel(cmd: list[str], kw: dict) -> _Forked | None:
    """The kernel of ``cmd`` (Jupyter's launch arguments ``kw``) forked from this
    process's template for its prefix, environment and folder; None where it cannot
    be (the caller launches it as Jupyter does)."""
    split = _kernel_command(cmd)
    if split is None or not (hasattr(os, "fork") and hasattr(os, "pidfd_open")):
        return None
    env = dict(kw.get("env") or os.environ)
    cwd = None if kw.get("cwd") is None else str(kw["cwd"])
    shared = {k: v for k, v in env.items() if k not in PER_KERNEL}
    key = (tuple(split[0]), cwd, tuple(sorted(shared.items())))
    try:
        template = _TEMPLATES.get(key) or _TEMPLATES.setdefault(
            key, _Template(split[0], shared, cwd)
        )
        quiet = kw.get("stderr") is subprocess.DEVNULL
        return _Forked(template.fork(split[1], env, cwd, quiet))
    except (OSError, ValueError):
        _TEMPLATES.pop(key, None)
        return None


@atexit.register
def close_templates() -> None:
    """Close every template of this process: each ends, and kills the kernels it
    forked that still run (a pool's worker closes them by ending)."""
    while _TEMPLATES:
        _TEMPLATES.popitem()[1].close()


# ------------------------------------------------------------------- the template
def _serve(fd: int, folder: str) -> None:
    """The template: import :data:`PRELOAD`, then fork a kernel per request."""
    for name in (signal.SIGINT, signal.SIGTERM):
        signal.signal(name, signal.SIG_IGN)  # its worker's tree ends it
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]  # as ipykernel_launcher: the kernel adds its folder back
    os.environ.setdefault("MPLBACKEND", INLINE)
    conn = socket.socket(fileno=fd)
    lines, children = conn.makefile("r"), set()
    _preload()
    signal.signal(signal.SIGCHLD, lambda *_: _reap(children))
    for line in lines:
        pid = os.fork()
        if pid == 0:
            conn.close()
            _kernel(json.loads(line))
        children.add(pid)
        conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
    for pid in list(children):  # the worker ended: so do the kernels it left
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


def _preload() -> None:
    """Import :data:`PRELOAD` as a kernel's cells would: matplotlib with the inline
    backend's name, pandas seeing a kernel's shell (``get_ipython()`` with a
    ``kernel``: its ``display.max_columns`` 20, where a terminal gets 0; the one
    import-time look at the shell among these modules)."""
    import builtins
    import importlib
    import types

    builtins.get_ipython = lambda: types.SimpleNamespace(kernel=None)
    try:
        for name in PRELOAD:
            importlib.import_module(name)
    finally:
        del builtins.get_ipython
    # what the imports left is kept out of every kernel's garbage collections: they
    # would walk it, and write on each of its pages (copies of the template's)
    gc.collect()
    gc.freeze()


def _reap(children: set) -> None:
    """Collect every ended kernel."""
    for pid in list(children):
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                children.discard(pid)
        except ChildProcessError:
            children.discard(pid)


def _kernel(request: dict) -> None:
    """In the forked child: become the kernel of ``request`` as a fresh interpreter
    would (its own session, Python's signal handlers, fresh seeds of the unseeded
    generators, the request's stdio, folder and environment); never returns."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for name in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(name, signal.SIG_DFL)
        _reseed()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        if request["quiet"]:
            os.dup2(null, 2)
        os.close(null)
        if request["cwd"] is not None:
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import ipykernel_launcher
        from ipykernel import kernelapp

        # its template is its parent: the kernel ends when the template does
        parent = f"--IPKernelApp.parent_handle={os.getppid()}"
        sys.argv = [ipykernel_launcher.__file__, *request["args"], parent]
        kernelapp.launch_new_instance()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reseed() -> None:
    """Python's and numpy's global generators seeded afresh, as in a new process
    (every chapter seeds its own draws; an unseeded draw differs between kernels)."""
    import random

    import numpy as np

    random.seed()
    np.random.seed()


if __name__ == "__main__":
    try:
        _serve(int(sys.argv[1]), sys.argv[2])
    except BaseException:  # a failed template: its worker launches kernels itself
        os._exit(1)
