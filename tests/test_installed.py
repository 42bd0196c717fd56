"""markovlib installed from a wheel (as on Colab), outside any clone, in an interpreter
that cannot see the clone's editable install (issue 63: the wheel held no
``markovlib/companion/`` and this test passed anyway, the editable install's import
hook supplying the missing modules): every module imports, the command runs, results go
to the user's cache, the commands that need a clone say so, and a chapter executes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import nbformat
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

# Every module of the installed package, walked from its own tree; the import hooks of
# an editable install (setuptools' __editable__ finder) must not be there
IMPORT_ALL = """
import importlib, json, pathlib, sys
import markovlib
top = pathlib.Path(markovlib.__file__).parent
names = sorted(
    ".".join(("markovlib", *p.relative_to(top).with_suffix("").parts))
    for p in top.rglob("*.py")
)
for name in names:
    if not name.endswith(".__main__"):  # it runs the command: run as python -m
        importlib.import_module(name.removesuffix(".__init__"))
hooks = [type(f).__name__ for f in sys.meta_path if "editable" in repr(f).lower()]
print(json.dumps({"top": str(top), "modules": names, "hooks": hooks}))
"""

# the last cell of the chapter run from the wheel: which markovlib its kernel imported
KERNEL_CHECK = """
import sys, markovlib
assert not any("editable" in repr(f).lower() for f in sys.meta_path), sys.meta_path
print("markovlib from", markovlib.__file__)
"""


def clean_copy(into: Path) -> Path:
    """The files git tracks (and the untracked ones it does not ignore) of the clone,
    copied to ``into``: what a fresh clone holds, without build/ or egg-info."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        if (ROOT / name).is_file() and not name.startswith("data/"):
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into


def pip(*args: str) -> None:
    """``pip ARGS`` with this interpreter, offline; fails the test with pip's words."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--quiet", "--no-index"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def isolated_env(tmp: Path, site: Path) -> dict[str, str]:
    """The environment of an interpreter run as ``python -S`` (no site module: no
    ``.pth`` file runs, so no editable install's import hook): ``site`` (the wheel's
    folder), then this venv's site-packages (the dependencies) on PYTHONPATH; a kernel
    "isolated" started the same way; caches and home in ``tmp``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARKOVLIB_")}
    packages = sysconfig.get_paths()["purelib"]
    kernel = tmp / "jupyter" / "kernels" / "isolated"
    kernel.mkdir(parents=True, exist_ok=True)
    (tmp / "home").mkdir(exist_ok=True)
    argv = [sys.executable, "-S", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "isolated", "language": "python"}
    (kernel / "kernel.json").write_text(json.dumps(spec))
    env.update(
        PYTHONPATH=os.pathsep.join([str(site), packages]),
        JUPYTER_PATH=str(tmp / "jupyter"),
        XDG_CACHE_HOME=str(tmp / "cache"),
        HOME=str(tmp / "home"),
        MPLBACKEND="Agg",
    )
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A wheel built from a clean copy of the clone, installed into a folder of its
    own (``site``)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = clean_copy(tmp / "source")
    pip(
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(tmp / "dist"),
        str(source),
    )
    [wheel] = (tmp / "dist").glob("markovlib-*.whl")
    pip("install", "--no-deps", "--target", str(tmp / "site"), str(wheel))
    return tmp


def _run(tmp, *args, cwd, env=None):
    """``python -S ARGS`` in the isolated environment, in ``cwd``."""
    env = {**isolated_env(tmp, tmp / "site"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-S", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_every_module_imports_from_the_wheel_alone(installed, tmp_path):
    """The wheel holds every module of the clone's markovlib/ and each imports in an
    interpreter that sees no editable install (the old package list: "No module
    named 'markovlib.companion'")."""
    out = _run(installed, "-c", IMPORT_ALL, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout)
    assert Path(found["top"]) == installed / "site" / "markovlib"
    assert found["hooks"] == []
    clone = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "markovlib").rglob("*.py")
    )
    assert found["modules"] == clone
    assert not list((installed / "site").rglob("__editable__*"))


def test_help_runs_from_the_wheel(installed, tmp_path):
    out = _run(installed, "-m", "markovlib", "--help", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("usage: markovlib") and "rerun" in out.stdout


def test_results_go_to_the_user_cache_not_site_packages(installed, tmp_path):
    out = _run(installed, "-c", SCRIPT, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    package, results, data, trained = out.stdout.split("\n")[:4]
    assert Path(package) == installed / "site" / "markovlib"  # the wheel, not the clone
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
    args = ["book", "--p", "0.3", "--q", "0.4", "--out", str(tmp_path / "e")]
    out = _run(installed, "-m", "markovlib", *args, cwd=tmp_path)
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


# The Colab cell, run as in Colab (google.colab imported) against this clone, then the
# chapter at scale paper in a kernel that sees only what the cell installed
COLAB = """
import json, sys, types, nbformat, papermill
sys.modules["google.colab"] = types.ModuleType("google.colab")
chapter, github, clone_url = sys.argv[1:4]
nb = nbformat.read(chapter, as_version=4)
[cell] = [c for c in nb.cells if "colab-install" in c.metadata.get("tags", [])]
exec(cell.source.replace(github, clone_url), {})
nb.cells.append(nbformat.v4.new_code_cell(sys.argv[4]))
nbformat.write(nb, "chapter.ipynb")
papermill.execute_notebook("chapter.ipynb", "out.ipynb", kernel_name="isolated",
                           parameters={"scale": "paper"}, progress_bar=False)
"""


def test_the_colab_cell_fetches_the_book_and_a_chapter_reads_its_runs(tmp_path):
    """The Colab cell, with this clone's URL for GitHub's, in an interpreter that
    sees no markovlib: a shallow clone, markovlib pip-installed from it (into
    ``site``, pip's --target standing for Colab's site-packages), one line that
    says so; then global_minimum at scale paper reads the paper edition's runs from
    the clone (MARKOVLIB_DATA) and trains nothing. Its kernel imports markovlib from
    what pip built and installed, outside the clone: the framework chapter's own run
    from the wheel (11 s) proved no more, and was folded here (issue 69)."""
    from markovlib.companion.notebook import REPOSITORY

    site = tmp_path / "site"
    site.mkdir()
    pip_env = {"PIP_TARGET": str(site), "PIP_NO_DEPS": "1", "PIP_NO_INDEX": "1"}
    pip_env["PIP_NO_BUILD_ISOLATION"] = "0"  # pip's env var reads "no" inverted
    env = {**isolated_env(tmp_path, site), **pip_env}
    env["MARKOVLIB_RESULTS"] = str(tmp_path / "results")
    args = [ROOT / "book" / "global_minimum.ipynb", f"https://github.com/{REPOSITORY}"]
    args += [ROOT.as_uri(), KERNEL_CHECK]
    argv = [sys.executable, "-S", "-c", COLAB, *map(str, args)]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    clone = tmp_path / REPOSITORY.rsplit("/", 1)[-1]
    said = out.stdout.strip()
    assert said.startswith(f"markovlib: fetched {ROOT.as_uri()} at ")
    manifest = json.loads((ROOT / "data" / "paper" / "manifest.json").read_text())
    size = f"({manifest['bytes'] / 1e6:.0f} MB)"  # the edition's, as it grows
    assert said.endswith(f"runs {size}: MARKOVLIB_DATA={clone / 'data' / 'paper'}")
    assert len(said.splitlines()) == 1 and (site / "markovlib" / "colab.py").is_file()
    done = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in done.cells for o in c.get("outputs", []))
    assert "markovlib: training" not in text and not (tmp_path / "results").exists()
    assert re.search(
        r"^  fig3b +reproduced +shipped +tied 8 of 8 runs escaped", text, re.M
    )
    assert f"markovlib from {site / 'markovlib'}/__init__.py" in text
