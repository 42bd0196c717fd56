"""markovlib installed from a wheel (as on Colab), outside any clone: results go to the
user's cache, never into site-packages, and the commands that need a clone of the book
say so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import markovlib, pathlib
from markovlib.runs.spec import grid
from markovlib.runs.store import default_results_dir
from markovlib.runs.sweep import sweep_results
from markovlib.runs.shipped import default_data_dir
specs = grid([0.3], [0.4], tied=[True], seeds=[0], config_kwargs=dict(max_len=16), \
steps=2, batch_size=2, seq_len=8)
[r] = sweep_results(specs, device="cpu", progress=False)
print(pathlib.Path(markovlib.__file__).parent)
print(default_results_dir())
print(default_data_dir())
print(r.final_test_loss > 0)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # setuptools writes build/ beside the sources: use a copy
    shutil.copytree(
        ROOT / "markovlib",
        source / "markovlib",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    [wheel] = (tmp / "dist").glob("markovlib-*.whl")
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(tmp / "site"),
            str(wheel),
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    return tmp


def _run(tmp, *args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARKOVLIB_")}
    env.update(
        PYTHONPATH=str(tmp / "site"),
        XDG_CACHE_HOME=str(tmp / "cache"),
        HOME=str(tmp / "home"),
    )
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_results_go_to_the_user_cache_not_site_packages(installed, tmp_path):
    out = _run(installed, "-c", SCRIPT, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    package, results, data, trained = out.stdout.split("\n")[:4]
    assert Path(package).is_relative_to(installed / "site")  # the wheel, not the clone
    assert Path(results) == installed / "cache" / "markovlib" / "results"
    assert (
        (Path(results) / "runs.sqlite").is_file()
        and data == "None"
        and trained == "True"
    )
    assert not list((installed / "site").rglob("runs.sqlite")) and not list(
        tmp_path.iterdir()
    )


def test_book_command_needs_a_clone(installed, tmp_path):
    out = _run(
        installed,
        "-m",
        "markovlib",
        "book",
        "--p",
        "0.3",
        "--q",
        "0.4",
        "--out",
        str(tmp_path / "e"),
        cwd=tmp_path,
    )
    assert out.returncode == 2 and "--source: no clone of the book" in out.stderr


def test_scorecard_without_shipped_data_says_how_to_get_it(installed, tmp_path):
    """An installed markovlib ships no runs: one line naming the repository (read
    from the wheel's metadata) and MARKOVLIB_DATA, no traceback."""
    out = _run(installed, "-m", "markovlib", "scorecard", cwd=tmp_path)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert out.returncode == 1 and out.stdout == "", out
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("markovlib scorecard: error: no shipped data found")
    assert f"clone {project['urls']['Repository']} and run" in out.stderr
    assert "MARKOVLIB_DATA=" in out.stderr and not any(tmp_path.iterdir())
