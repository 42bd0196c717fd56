"""The markovlib command: train, sweep, book, and one-line errors with exit status 2."""

from __future__ import annotations

import subprocess
import sys
import time

import inprocess
import pytest

from markovlib.cli import main


def run(*args: str) -> subprocess.CompletedProcess:
    """``markovlib ARGS`` in this process (issue 51: a new interpreter's imports took
    3 of each call's 3.5-5 s; what needs one keeps ``subprocess``)."""
    return inprocess.run(*args)


@pytest.mark.parametrize(
    "args, argument",
    [
        (["train", "--p", "1.5", "--q", "0.3"], "--p"),
        (["train", "--p", "0.2", "--q", "abc"], "--q"),
        (["train", "--p", "0", "--q", "0"], "--q"),
        (["train", "--q", "0.3"], "--p"),
        (["train", "--p", "0.2", "--q", "0.3", "--steps", "0"], "--steps"),
        (["sweep", "--p", "0.2,x", "--q", "0.3"], "--p"),
        (["sweep", "--p", "0.2", "--q", "0.3", "--tied", "sometimes"], "--tied"),
        (["sweep", "--p", "0.2", "--q", "0.3", "--seeds", "-1"], "--seeds"),
        (["book", "--p", "0.2", "--q", "0.3", "--scale", "huge"], "--scale"),
        (["book", "--p", "0.2", "--q", "0.3", "--jobs", "0"], "--jobs"),
        (["verify", "--jobs", "two"], "--jobs"),
        (["fly"], "command"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, argument, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err and argument in err, err


def test_train_prints_loss_against_references():
    out = run(
        "train",
        "--p",
        "0.5",
        "--q",
        "0.8",
        "--tied",
        "--steps",
        "20",
        "--seq-len",
        "32",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--scale",
        "smoke",
    )
    assert out.returncode == 0, out.stderr
    assert (
        "H_rate 0.6190" in out.stdout
        and "H(pi) 0.6663" in out.stdout
        and "final test loss" in out.stdout
    )


def test_sweep_command_writes_the_store(tmp_path):
    args = [
        "sweep",
        "--p",
        "0.2,0.6",
        "--q",
        "0.3",
        "--tied",
        "both",
        "--seeds",
        "2",
        "--scale",
        "smoke",
        "--steps",
        "5",
        "--seq-len",
        "16",
        "--batch-size",
        "2",
        "--device",
        "cpu",
        "--results",
        str(tmp_path),
    ]
    first = run(*args)
    assert first.returncode == 0, first.stderr
    assert "8 runs" in first.stdout and "(8 new)" in first.stdout
    second = run(*args)
    assert "(0 new)" in second.stdout


def test_the_cli_and_a_sweep_import_neither_ray_nor_scipy():
    """Every CLI call and sweep worker process pays its imports: Ray only where the Ray
    executor runs, SciPy (0.5 s, issue 51) only where a manifold start or the exact
    dynamics need it."""
    code = (
        "import sys, markovlib, markovlib.runs.sweep, markovlib.runs.executors, "
        "markovlib.runs.verify, markovlib.cli; "
        "print(sorted({'ray', 'scipy'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


HEAVY = ("torch", "pandas", "markovlib.runs", "markovlib.companion", "markovlib.train")
LIGHT = ("markovlib.companion", "markovlib.companion.chapter_rules")  # no imports


@pytest.mark.parametrize(
    "args",
    [["--help"], ["verify", "--help"], ["scorecard", "--help"], ["edition", "-h"],
     ["import", "--help"], ["train", "--help"], ["sweep", "-h"], ["book", "--help"],
     ["rerun", "--help"]],
)  # fmt: skip
def test_help_imports_neither_torch_nor_the_run_and_book_layers(args):
    """Issue 65: `markovlib --help` took 3-4 s, `import markovlib` and the CLI's
    imports loading torch and every layer; a command's options and modules are
    loaded only when it is the command given. (rerun --help lists the chapters'
    parameters: of the book layer it loads markovlib.companion.chapter_rules alone,
    which imports nothing.)"""
    code = (
        "import sys\nfrom markovlib.cli import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit as e:\n    assert e.code == 0\n"
        f"print([m for m in sys.modules if m.startswith({HEAVY!r}) and m not in "
        f"{LIGHT!r}])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and "usage: markovlib" in out.stdout, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"


def test_the_scale_choices_are_the_presets():
    """--scale's choices are written out (its help imports no torch): the same names,
    in the same order, as markovlib.presets.PRESETS."""
    from markovlib import presets
    from markovlib.cli.options import SCALES

    assert SCALES == tuple(presets.PRESETS)


def test_a_sweep_without_ray_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    """--executor ray where ray is not installed: refused before the result store is
    created."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ray" else find_spec(name, *a),
    )
    out = inprocess.run(
        "sweep", "--p", "0.2", "--q", "0.3", "--scale", "smoke", "--executor", "ray",
        "--results", tmp_path / "results",
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr == (
        "markovlib sweep: error: argument --executor: ray is not installed (pip "
        "install 'markovlib[ray]')\n"
    )
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "args, says",
    [
        (
            ["status", "--against", "x"],
            "argument --against: edition status does not use it (it takes "
            "--results, --data, --only)",
        ),
        (["status", "--threads", "1"], "argument --threads: edition status does not"),
        (["export", "--workers", "2"], "argument --workers: edition export does not"),
        (["judge", "--results", "r"], "argument --results: edition judge does not"),
        (["produce", "--report", "r.json"], "argument --report: edition produce do"),
    ],
)
def test_an_option_its_edition_action_does_not_use_is_refused(tmp_path, args, says):
    """Issue 71: `edition status --against x` ignored the option; an option the
    action does not read is refused in one line (exit 2) before any work."""
    out = inprocess.run("edition", *args, cwd=tmp_path)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith(f"markovlib edition: error: {says}"), lines[0]
    assert out.stdout == "" and not any(tmp_path.iterdir())


def test_a_stop_that_comes_back_as_another_error_is_one_line_and_exit_130(
    monkeypatch, capsys
):
    """Fresh-clone make test, 2026-11-29: SIGTERM during torch's lazy import of its
    compiler (a class being made) surfaced as "RuntimeError: Error calling
    __set_name__" with 60 lines of traceback; the stop it came from is what counts."""
    from markovlib.cli import scorecard

    def run(args):
        try:
            raise KeyboardInterrupt("signal 15")
        except KeyboardInterrupt as stop:
            raise RuntimeError("Error calling __set_name__ on 'Field'") from stop

    monkeypatch.setattr(scorecard, "run", run)
    assert main(["scorecard"]) == 130
    err = capsys.readouterr().err
    assert err == (
        "markovlib scorecard: interrupted; what was finished is kept, re-run the same "
        "command to go on\n"
    )
    monkeypatch.setattr(scorecard, "run", lambda args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["scorecard"])  # any other error is not a stop


HANGS_AT_EXIT = """
import atexit, sys, time
from markovlib.cli import program, scorecard
atexit.register(time.sleep, 600)  # an exit hook that never returns
program.STOP_GRACE = 1.0

def run(args):
    raise KeyboardInterrupt

scorecard.run = run
sys.argv = ["markovlib", "scorecard"]
sys.exit(program.entry())
"""


def test_a_stopped_command_exits_even_where_an_exit_hook_hangs():
    """CI, 2026-11-29: a Ctrl-C'd two-worker sweep printed its line, then hung at exit
    (60 s, the test's limit). The command's process ends STOP_GRACE seconds after its
    line, with the stop's status, whatever an exit hook does."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", HANGS_AT_EXIT],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130 and time.perf_counter() - start < 30
    assert done.stderr == (
        "markovlib scorecard: interrupted; what was finished is kept, re-run the same "
        "command to go on\n"
    )


LOST_IN_A_CALLBACK = """
import sys
from markovlib.cli import program, scorecard

class Callback:  # a stop that lands where Python cannot raise it: printed, then lost
    def __del__(self):
        raise KeyboardInterrupt

def run(args):
    Callback()
    return 0

scorecard.run = run
sys.argv = ["markovlib", "scorecard"]
sys.exit(program.entry())
"""


def test_a_stop_python_could_not_raise_still_stops_the_command():
    """Fresh-clone make test, 2026-11-30: a Ctrl-C that landed in a weak reference's
    callback during an import printed Python's "Exception ignored in" and `verify`
    went on to exit 0. The command ends as stopped, with its one line only."""
    done = subprocess.run(
        [sys.executable, "-c", LOST_IN_A_CALLBACK],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == (
        "markovlib scorecard: interrupted; what was finished is kept, re-run the same "
        "command to go on\n"
    )
