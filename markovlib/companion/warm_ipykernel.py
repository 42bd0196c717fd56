"""Jupyter kernels forked from a warm process: a chapter's kernel starts with torch,
pandas, matplotlib and markovlib already imported (issue 69).

A pool worker that executes several chapters (``make book``, ``markovlib book``)
starts, at its first kernel, one *template* process with the kernel's own command
prefix, environment and folder, ``python -m markovlib.companion.warm_ipykernel FD``.
The template imports :data:`PRELOAD` once, runs nothing else, and forks each kernel
of that worker from itself: the child takes the kernel's session, environment and
folder (its stdin /dev/null, its stderr too for a quiet kernel, its stdout the
template's, the worker's), and runs ``ipykernel_launcher``'s own entry point with
the kernel's arguments. Each chapter's kernel is still a fresh process of its own
(nothing a chapter defines reaches another); what it skips is the interpreter's
start and the imports, about 6 s of CPU a chapter on an AMD EPYC.

A template that cannot stand for a fresh kernel ends before its first fork, and the
kernels are launched as Jupyter launches them: one whose imports wrote anything,
warned, logged, removed a variable or started a Python thread (the variables they
set are set in each kernel too). So does a worker
without ``os.fork`` or a working ``pidfd_open``, a command other than ``python -m
ipykernel_launcher``, or a template that fails or does not answer.

The template is its worker's child in a session of its own (a terminal's Ctrl-C
reaches neither it nor its kernels; :func:`~.chapter_runner.end_started_processes`
finds both in the worker's tree); it ends, killing the kernels it forked, once its
worker's end of the socket closes.
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
# seconds a template may take to answer: its first fork follows its imports
FIRST_ANSWER, ANSWER = 300.0, 30.0


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
    poll, wait, send_signal, kill, terminate), through a pidfd: its end is seen and
    a signal never reaches another process. Its template reaps it: ``returncode`` is
    0 once it ended, whatever its status."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None
        self._fd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        return self.wait(0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None:
            ended = select.poll()
            ended.register(self._fd, select.POLLIN)
            if ended.poll(None if timeout is None else timeout * 1000):
                self.returncode = 0
                os.close(self._fd)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._fd, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Template:
    """A warm process started with one kernel prefix, environment and folder."""

    def __init__(self, prefix: list[str], env: dict, cwd: str | None, folder: str):
        mine, theirs = socket.socketpair()
        module = "markovlib.companion.warm_ipykernel"
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
        self.socket, self.lines, self.answered = mine, mine.makefile("r"), False

    def fork(self, args: list[str], env: dict, cwd: str | None, quiet: bool) -> int:
        """A kernel forked with ``args``; its pid (OSError when the template failed
        or took too long)."""
        request = {"args": args, "env": env, "cwd": cwd, "quiet": quiet}
        self.socket.settimeout(ANSWER if self.answered else FIRST_ANSWER)
        self.socket.sendall((json.dumps(request) + "\n").encode())
        answer = self.lines.readline()
        if not answer:
            raise OSError("the kernel template ended")
        answer = json.loads(answer)
        if "pid" not in answer:
            raise OSError(answer.get("error", "the kernel template failed"))
        self.answered = True
        return int(answer["pid"])

    def close(self) -> None:
        """Close its socket: the template ends (:func:`_serve`); wait for that (kill
        it if it does not)."""
        self.lines.close()  # the socket's file: the descriptor closes with both
        self.socket.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """End a failed template at once (its kernels see their parent go)."""
        self.process.kill()
        self.process.wait()


# this process's templates and folder of connection files (a forked child starts
# with none), and whether kernels are forked here at all
_STATE: dict = {}


def _state() -> dict:
    if _STATE.get("pid") != os.getpid():
        _STATE.clear()
        _STATE.update(pid=os.getpid(), templates={}, folder=None, usable=_pidfd())
    return _STATE


def _pidfd() -> bool:
    """Whether this system forks and opens pidfds (Linux 5.3 and a seccomp profile
    that allows it)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return hasattr(os, "fork")


def _folder() -> str:
    """This process's folder of kernel connection files (named on its templates'
    command lines: a stopped command's cleanup removes it), made at first use."""
    state = _state()
    if state["folder"] is None:
        state["folder"] = tempfile.mkdtemp(prefix="markovlib-kernels-")
    return state["folder"]


def connection_file() -> str:
    """A new kernel connection file's path, in this process's folder of them."""
    return os.path.join(_folder(), f"kernel-{uuid.uuid4()}.json")


def fork_kernel(cmd: list[str], kw: dict) -> _Forked | None:
    """The kernel of ``cmd`` (Jupyter's launch arguments ``kw``) forked from this
    process's template for its prefix, environment and folder; None where it cannot
    be (the caller launches it as Jupyter does; after a failure, every later kernel
    of this process too)."""
    split, state = _kernel_command(cmd), _state()
    if split is None or not state["usable"]:
        return None
    env = {**(kw.get("env") or os.environ), "JPY_PARENT_PID": str(os.getpid())}
    cwd = None if kw.get("cwd") is None else os.path.abspath(kw["cwd"])
    shared = {k: v for k, v in env.items() if k not in PER_KERNEL}
    key = (tuple(split[0]), cwd, tuple(sorted(shared.items())))
    template = state["templates"].get(key)
    try:
        if template is None:
            template = _Template(split[0], shared, cwd, _folder())
            state["templates"][key] = template
        pid = template.fork(split[1], env, cwd, kw.get("stderr") is subprocess.DEVNULL)
        return _Forked(pid)
    except (OSError, ValueError) as e:
        # killed at once, with any kernel it forked late (their parent gone, they
        # end); the folder stays: it holds this kernel's connection file
        state["usable"], state["why"] = False, str(e) or type(e).__name__
        for failed in state["templates"].values():
            failed.kill()
        _close(state)
        return None


def _close(state: dict) -> None:
    """Close every template of ``state`` (each ends, and kills the kernels it forked
    that still run)."""
    while state["templates"]:
        state["templates"].popitem()[1].close()


def close_templates() -> None:
    """Close every template of this process and remove its folder of connection
    files; at this process's end, a pool worker's included."""
    state = _state()
    _close(state)
    if state["folder"] is not None:
        shutil.rmtree(state["folder"], ignore_errors=True)
        state["folder"] = None


atexit.register(close_templates)
with contextlib.suppress(ImportError):  # a multiprocessing worker skips atexit
    from multiprocessing import util

    util.Finalize(None, close_templates, exitpriority=10)


# ------------------------------------------------------------------- the template
def _serve(fd: int) -> None:
    """The template: import :data:`PRELOAD` (ending at once where a kernel would not
    have started so, :func:`_preload`), then fork a kernel per request."""
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]  # as ipykernel_launcher: the kernel adds its folder back
    os.set_inheritable(fd, False)
    conn = socket.socket(fileno=fd)
    lines, children = conn.makefile("r"), set()
    imported = _preload()
    if isinstance(imported, str):  # why it stands down, for its worker
        conn.sendall((json.dumps({"error": imported}) + "\n").encode())
        return
    signal.signal(signal.SIGCHLD, lambda *_: _reap(children))
    held = {signal.SIGCHLD}  # no reaping between a fork and its pid noted
    template = os.getpid()
    try:
        for line in lines:
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
            pid = os.fork()
            if pid == 0:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
                lines.close()
                conn.close()
                request = json.loads(line)
                _kernel({**request, "env": {**request["env"], **imported}}, template)
            children.add(pid)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
            conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
    finally:  # the worker ended (or went): so do the kernels it left
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _reap(children)
        for pid in list(children):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # one not yet in a session of its own


def _preload() -> dict | str:
    """Import :data:`PRELOAD` as a kernel's cells would: matplotlib with the inline
    backend's name, pandas seeing a kernel's shell (``get_ipython()`` with a
    ``kernel``: ``display.max_columns`` 20, a terminal's 0; the one import-time look
    at the shell among these modules), what a module binds as its output at import
    (torch's log handlers) writing to the kernel's output of the moment. The
    variables the imports set (torch's ``TORCHINDUCTOR_CACHE_DIR``), for each
    kernel's environment; where the imports wrote, warned, logged, rebound the
    streams or the warnings' display or the root logger, removed a variable or
    started a Python thread, why (the template stands down). (The native threads
    they start, the OpenBLAS pools of numpy and scipy and pyarrow's jemalloc
    thread, are rebuilt after a fork by their libraries' own fork handlers.)"""
    import builtins
    import importlib
    import logging
    import threading
    import types
    import warnings

    os.environ.setdefault("MPLBACKEND", INLINE)
    before, said = dict(os.environ), []
    streams, shown = (sys.stdout, sys.stderr), warnings.showwarning
    proxies = _Current("stdout", said), _Current("stderr", said)
    sys.stdout, sys.stderr = proxies
    builtins.get_ipython = lambda: types.SimpleNamespace(kernel=None)
    logged = logging.Handler(logging.WARNING)
    logged.emit = said.append
    logging.root.addHandler(logged)
    recorder = warnings.showwarning = lambda *warned, **_: said.append(warned)
    with _written(said):  # what C code writes on the descriptors
        try:
            for name in PRELOAD:
                importlib.import_module(name)
        finally:
            changed = [
                warnings.showwarning is not recorder,
                (sys.stdout, sys.stderr) != proxies,
                logging.root.handlers != [logged],
            ]
            warnings.showwarning = shown
            del builtins.get_ipython
            logging.root.removeHandler(logged)
            sys.stdout, sys.stderr = streams
    for proxy in proxies:
        proxy._said = None
    why = [
        (said, f"its imports wrote, warned or logged: {str(said[:1])[:200]}"),
        (any(changed), "an import rebound the streams, warnings or logging"),
        (set(before) - set(os.environ), "an import removed a variable"),
        (threading.active_count() > 1, "an import started a Python thread"),
    ]
    for found, reason in why:
        if found:
            return reason
    # what the imports left is kept out of every kernel's garbage collections: they
    # would walk it, and write on each of its pages (copies of the template's)
    gc.collect()
    gc.freeze()
    return {k: v for k, v in os.environ.items() if before.get(k) != v}


@contextlib.contextmanager
def _written(said: list):
    """Descriptors 1 and 2 into a file for the block; what was written noted."""
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(1), os.dup(2)
        os.dup2(captured.fileno(), 1)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            if os.fstat(captured.fileno()).st_size:
                said.append("output on a descriptor")


class _Current:
    """``sys.stdout`` or ``sys.stderr`` as it is at each write (in a kernel, its
    stream to the notebook); what is written while the template imports is noted."""

    def __init__(self, name: str, said: list):
        self._name, self._said = name, said

    def _stream(self):
        stream = getattr(sys, self._name)
        return getattr(sys, f"__{self._name}__") if stream is self else stream

    def write(self, text: str) -> int:
        if self._said is None:
            return self._stream().write(text)
        if text:
            self._said.append(text)
        return len(text)

    def __getattr__(self, name: str):
        if name.startswith("_"):  # unset own attributes (a copy's)
            raise AttributeError(name)
        return getattr(self._stream(), name)


def _reap(children: set) -> None:
    """Collect every ended kernel."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)


def _kernel(request: dict, template: int) -> None:
    """In the forked child of ``template`` (its pid): become the kernel of
    ``request`` as a fresh interpreter would (its own session, Python's signal
    handlers, fresh seeds, stdin /dev/null and stderr too for a quiet kernel, the
    request's folder and environment, its parent watched); never returns."""
    code = 1
    try:
        os.setsid()
        _dies_with(template)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
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
        from ipykernel.kernelapp import IPKernelApp

        sys.argv = [ipykernel_launcher.__file__, *request["args"]]
        # its template is its parent: the kernel ends when the template does
        IPKernelApp.launch_instance(parent_handle=template)
        code = 0
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException:
        with contextlib.suppress(BaseException):
            sys.excepthook(*sys.exc_info())  # as the interpreter reports it
    finally:
        _finalize(code)


def _dies_with(template: int) -> None:
    """The kernel killed when its template ends (Linux's ``PR_SET_PDEATHSIG``), and
    ended now if it already has (its parent no longer the pid taken before the
    fork)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PDEATHSIG
    if os.getppid() != template:
        os._exit(1)


def _exit_code(e: SystemExit) -> int:
    """The status Python exits with on ``e`` (its message written to stderr)."""
    if e.code is None or isinstance(e.code, int):
        return e.code or 0
    with contextlib.suppress(Exception):
        print(e.code, file=sys.stderr)
    return 1


def _finalize(code: int) -> None:
    """End as the interpreter does: join the threads, run the exit functions, flush
    the streams."""
    import threading

    with contextlib.suppress(BaseException):
        threading._shutdown()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _reseed() -> None:
    """Python's, numpy's and torch's global generators seeded afresh, as a new
    process seeds them (every chapter seeds its own draws)."""
    import random

    import numpy as np
    import torch

    random.seed()
    np.random.seed()
    torch.seed()


if __name__ == "__main__":
    try:
        _serve(int(sys.argv[1]))
    except BaseException:  # a failed template: its worker launches kernels itself
        os._exit(1)
    os._exit(0)
