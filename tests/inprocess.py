"""The `markovlib` command run in this process (issue 51): for properties that hold
before any work (a refusal's one line and exit status), without the 2-4 s of imports
a new interpreter pays. What needs a process of its own (signals, kills, a second
interpreter's start-up) keeps ``subprocess``."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """``markovlib ARGS`` in this process, in ``cwd`` (default: the clone) with the
    environment ``env`` (default: this one), as a CompletedProcess: its exit status
    (argparse's SystemExit included), stdout and stderr. The working folder, the
    environment, the signal handlers and torch's thread count are restored."""
    from markovlib.cli import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    threads = torch.get_num_threads()
    out, err = io.StringIO(), io.StringIO()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.chdir(cwd or ROOT)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:
                code = (
                    e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                )
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for s, h in handlers.items():
            signal.signal(s, h)
        torch.set_num_threads(threads)
    return subprocess.CompletedProcess(
        ["markovlib", *map(str, args)], code or 0, out.getvalue(), err.getvalue()
    )


def cli(*args, cwd=None, env=None, timeout=300, process=False):
    """``markovlib ARGS``: in this process (:func:`run`: what a command does before any
    work, without a new interpreter's 2-4 s), or with ``process`` in a new one (in
    ``cwd``, default the clone; ``env``, default this environment)."""
    if not process:
        return run(*args, cwd=cwd, env=env)
    return subprocess.run(
        [sys.executable, "-m", "markovlib", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=timeout,
    )


# every module that binds paper_edition (verify reads it through experiments)
EDITION_USERS = (  # (the CLI imports it from experiments when a command runs)
    "markovlib.runs.edition",
    "markovlib.runs.experiments",
    "markovlib.companion.replication",
    "markovlib.companion.computed",
)


def use_edition(monkeypatch, groups) -> None:
    """:func:`run`'s commands see ``groups`` as the paper edition (restored by
    ``monkeypatch`` after the test)."""
    for module in EDITION_USERS:
        monkeypatch.setattr(f"{module}.paper_edition", lambda: groups)
