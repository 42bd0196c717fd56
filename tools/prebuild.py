"""Execute the book's chapters into Jupyter Book's cache, several at a time.

``make book`` runs this before ``jupyter-book build``: each chapter whose code has no
up-to-date record in the build's jupyter-cache (``_build/.jupyter_cache``) is executed
the way myst-nb would execute it (jupyter-cache's ``single_nb_execution``, in the
chapter's folder, with the ``execute:`` timeout of ``_config.yml``) and cached; the
build then finds every chapter cached and executes none. Chapters run ``--jobs`` at a
time, each kernel on one torch thread, the slowest of the last build first.

A page of the build's facts (``metadata.markovlib.build_facts``: the Reproducibility
page, its date, commit and versions) is executed with them whenever the build will
read it (:func:`read_by_the_build`), cached or not, so that what it shows is read at
this build; Sphinx executed it alone, in a cold kernel, after the chapters (6.7 s of
a 58 s ``make book``, Intel Xeon, 2026-11-29).

    python tools/prebuild.py --jobs 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import suppress
from pathlib import Path

import nbformat
import yaml

from markovlib.companion.chapter_runner import quiet_kernel_manager, run_chapters

ROOT = Path(__file__).resolve().parents[1]


def _cache(path: Path):
    from jupyter_cache import get_cache

    return get_cache(str(path))


def cached(cache_path: Path, notebook: Path) -> bool:
    """Whether the cache holds this notebook's code (myst-nb's match)."""
    nb = nbformat.read(notebook, as_version=4)
    with suppress(KeyError):
        return _cache(cache_path).match_cache_notebook(nb) is not None
    return False


def _forced(notebook: Path) -> bool:
    """A page the build always executes itself (``mystnb.execution_mode``: 'force')
    or never ('off')."""
    meta = nbformat.read(notebook, as_version=4).metadata.get("mystnb", {})
    return meta.get("execution_mode") in ("force", "off")


def build_facts(notebook: Path) -> bool:
    """A page of the build's facts (``metadata.markovlib.build_facts``)."""
    meta = nbformat.read(notebook, as_version=4).metadata.get("markovlib", {})
    return bool(meta.get("build_facts"))


# What makes Sphinx read every page again when it changed: the configuration, the
# table of contents, the book's own extension, the pinned packages (a new Sphinx or
# extension discards the environment)
EVERY_PAGE = ("_config.yml", "_toc.yml", "tools/sphinx_fixes.py", "requirements.txt")


def read_by_the_build(notebook: Path, build: Path = ROOT / "_build") -> bool:
    """Whether ``jupyter-book build`` (HTML or PDF: one environment) will read
    ``notebook``: Sphinx reads every page without an environment (``build/.doctrees``)
    or after a change of :data:`EVERY_PAGE`, and a page changed since or without its
    doctree."""
    doctrees = build / ".doctrees"
    env, tree = doctrees / "environment.pickle", doctrees / "book" / notebook.stem
    if not (env.is_file() and tree.with_suffix(".doctree").is_file()):
        return True
    since = env.stat().st_mtime
    sources = [notebook, *(ROOT / name for name in EVERY_PAGE)]
    return any(p.is_file() and p.stat().st_mtime > since for p in sources)


def due(cache_path: Path, notebook: Path) -> str | None:
    """Why the prebuild executes ``notebook`` (not forced): "lacking" (its code is not
    cached), "facts" (a page of the build's facts that the build will read); None."""
    if not cached(cache_path, notebook):
        return "lacking"
    if build_facts(notebook) and read_by_the_build(notebook, cache_path.parent):
        return "facts"
    return None


# Seconds of each chapter at the paper scale, two at a time, one torch thread each (AMD
# EPYC, 2026-11-29, after the CCMC generation, the curvature grid and the k-state
# thresholds were shipped): the order of a build whose cache holds no earlier time (the
# longest first; by file size, the in-context chapter came last and the build waited
# 56 s on it alone). A chapter not listed: its size in kB.
EXPECTED_SECONDS = {
    "trapped.ipynb": 23,
    "saddles.ipynb": 20,
    "global_minimum.ipynb": 19,
    "incontext.ipynb": 18,
    "multi_state.ipynb": 18,
    "bad_local_minima.ipynb": 17,
    "depth.ipynb": 17,
    "initialisation.ipynb": 14,
    "ccmc.ipynb": 11,
    "framework.ipynb": 10,
    "reproducibility.ipynb": 3,  # Intel Xeon, 2026-11-29 (Sphinx, cold kernel: 6.7 s)
}


def last_seconds(cache_path: Path) -> dict[str, float]:
    """Seconds of each notebook's latest cached execution, by file name."""
    if not cache_path.is_dir():
        return {}
    out = {}
    for record in _cache(cache_path).list_cache_records():
        seconds = (record.data or {}).get("execution_seconds")
        if seconds is not None:
            out[Path(record.uri).name] = float(seconds)
    return out


def execute_one(cache_path: Path, notebook: Path, timeout: int) -> tuple[float, str]:
    """Execute ``notebook`` as myst-nb's cache mode does and cache it: its seconds and
    the error text ('' on success). Runs in a worker process."""
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.executors.utils import single_nb_execution

    os.environ["OMP_NUM_THREADS"] = "1"  # the kernel inherits it
    cache = _cache(cache_path)
    nb = nbformat.read(notebook, as_version=4)
    record = cache.add_nb_to_project(str(notebook))
    result = single_nb_execution(
        nb,
        cwd=str(notebook.parent),
        allow_errors=False,
        timeout=timeout,
        meta_override=True,
        kernel_manager_class=quiet_kernel_manager(warm=True),  # forked warm kernels
    )
    if result.err is not None:
        return result.time, result.exc_string or repr(result.err)
    bundle = CacheBundleIn(nb, record.uri, data={"execution_seconds": result.time})
    cache.cache_notebook_bundle(bundle, check_validity=False, overwrite=True)
    return result.time, ""


def prebuild(notebooks: list[Path], cache_path: Path, jobs: int, timeout: int) -> int:
    """Execute and cache every notebook the cache lacks, and the pages of the build's
    facts that the build will read (:func:`due`), ``jobs`` at a time; 1 at the first
    failure (its traceback printed), else 0."""
    forced = [nb for nb in notebooks if _forced(nb)]
    why = {nb: due(cache_path, nb) for nb in notebooks if nb not in forced}
    todo = [nb for nb, reason in why.items() if reason]
    lacking = [nb for nb in todo if why[nb] == "lacking"]
    again = len(todo) - len(lacking)
    print(
        f"prebuild: {len(notebooks) - len(forced) - len(lacking)} of {len(notebooks)} "
        f"pages cached, {len(forced)} left to the build; executing {len(todo)}"
        f"{f' ({again} cached: the build reads its facts again)' if again else ''}, "
        f"{jobs} at a time",
        flush=True,
    )
    seconds = {**EXPECTED_SECONDS, **last_seconds(cache_path)}
    todo.sort(key=lambda nb: -seconds.get(nb.name, nb.stat().st_size / 1e3))
    start = time.perf_counter()
    tasks = {nb.name: (execute_one, (cache_path, nb, timeout)) for nb in todo}
    failed = run_chapters(tasks, jobs, tag="prebuild")
    if failed:
        print(f"prebuild: {failed[0]} failed:\n{failed[1]}", file=sys.stderr)
        return 1
    print(f"prebuild: done in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--cache", type=Path, default=ROOT / "_build" / ".jupyter_cache"
    )
    args = parser.parse_args(argv)
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    notebooks = sorted((ROOT / "book").glob("*.ipynb"))
    return prebuild(
        notebooks, args.cache, max(1, args.jobs), int(config["execute"]["timeout"])
    )


if __name__ == "__main__":
    sys.exit(main())
