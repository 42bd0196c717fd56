"""Every chapter's first cell on Colab (``tools/notebooks.py furnish`` writes it): a
shallow clone of the book's repository (:func:`clone_command`: the library and the
paper edition's runs, about 75 MB), then :func:`install` from that clone. The cell runs
this file straight from the clone (``runpy.run_path``), before markovlib is installed:
it imports nothing but the standard library."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

DATA = Path("data") / "paper"  # the paper edition's runs in a clone
ENV_VAR = "MARKOVLIB_DATA"  # markovlib.runs.shipped.ENV_VAR: where a chapter reads them


def clone_command(url: str, into: str | Path, ref: str = "main") -> list[str]:
    """``git clone`` of ``ref`` (a branch or tag) of ``url``, one commit deep."""
    return ["git", "clone", "--quiet", "--depth", "1", "--branch", ref, url, str(into)]


def _git(clone: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(clone), *args], capture_output=True)
    return out.stdout.decode().strip()


def install(clone: str | Path) -> str:
    """pip-install markovlib from ``clone`` (into this interpreter), point
    ``$MARKOVLIB_DATA`` at the clone's shipped runs; the one line that says what was
    fetched and installed."""
    clone = Path(clone).resolve()
    pip = [sys.executable, "-m", "pip", "install", "--quiet", str(clone)]
    subprocess.run(pip, check=True)
    importlib.invalidate_caches()  # the new package is importable in this process
    data = clone / DATA
    os.environ[ENV_VAR] = str(data)
    manifest = json.loads((data / "manifest.json").read_text())
    where = _git(clone, "remote", "get-url", "origin") or str(clone)
    commit = _git(clone, "log", "-1", "--format=%h of %cs") or "unknown commit"
    return (
        f"markovlib: fetched {where} at {commit} into {clone} and installed markovlib "
        f"from it; the paper edition's {manifest['runs']} runs "
        f"({manifest['bytes'] / 1e6:.0f} MB): {ENV_VAR}={data}"
    )
