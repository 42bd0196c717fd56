"""Compute the paper edition's derived values and ship them.

Executes, at scale ``paper`` with their default parameters, every chapter that calls
``derived(...)`` (:mod:`markovlib.runs.derived`), and the scorecard's rows (the values
its rules derive at trained runs: Fig 3(d)'s averages over test paths, the in-context
runs' scores), two at a time,
into a fresh result store without reading the shipped values; then ships the values
they computed and the shipped ones whose keys are still current (the Hessians at the
trapped runs, from ``tools/curvatures.py``): ``data/paper/derived/`` and the manifest's
``derived`` list. Run it after a change to the maths layer (a test says when the
shipped values are stale).

    python tools/derive.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def chapters() -> list[Path]:
    """The chapters whose code calls derived()."""
    return sorted(
        p for p in (ROOT / "book").glob("*.ipynb") if "derived(" in p.read_text()
    )


def environment(store: Path) -> dict:
    """The environment of a computation into ``store`` at ``paper``, shipped values
    unread, one thread."""
    return {
        **os.environ,
        "MARKOVLIB_SCALE": "paper",
        "MARKOVLIB_RESULTS": str(store),
        "MARKOVLIB_DERIVED_SHIPPED": "0",
        "OMP_NUM_THREADS": "1",
    }


def execute(notebook: Path, store: Path, out: Path) -> tuple[float, str]:
    env = environment(store)
    papermill = Path(sys.executable).with_name("papermill")
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            str(papermill),
            str(notebook),
            str(out / notebook.name),
            "--cwd",
            str(notebook.parent),
            "--no-progress-bar",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - t0, done.stderr[-3000:] if done.returncode else ""


def score(store: Path) -> tuple[float, str]:
    """The scorecard's rows computed from the shipped runs into ``store``: the derived
    values its rules compute at trained runs (Fig 3(d)'s averages over test paths)."""
    code = "from markovlib.companion import computed; computed.compute()"
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=environment(store),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - t0, done.stderr[-3000:] if done.returncode else ""


def keep_current(data: Path, store: Path) -> int:
    """Copy into ``store`` every shipped derived value whose key is still its call's
    (the Hessians at the trapped runs, which a chapter at `paper` only reads): a value
    no chapter computed again is kept while today's code would compute the same key."""
    from markovlib.runs.derived import FOLDER, is_current

    target = store / FOLDER
    target.mkdir(parents=True, exist_ok=True)
    kept = 0
    for path in sorted((data / FOLDER).glob("*.json.gz")):
        if not (target / path.name).exists() and is_current(path):
            (target / path.name).write_bytes(path.read_bytes())
            kept += 1
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from markovlib.companion.chapter_runner import run_chapters
    from markovlib.runs.derived import ship

    with tempfile.TemporaryDirectory(prefix="markovlib-derive-") as work:
        store, out = Path(work) / "results", Path(work) / "out"
        out.mkdir()
        tasks = {nb.name: (execute, (nb, store, out)) for nb in chapters()}
        tasks["the scorecard"] = (score, (store,))
        failed = run_chapters(tasks, args.jobs, tag="derive")
        if failed:
            print(f"derive: {failed[0]} failed:\n{failed[1]}", file=sys.stderr)
            return 1
        kept = keep_current(ROOT / "data" / "paper", store)
        n = ship(store, ROOT / "data" / "paper")
        print(f"derive: {kept} shipped values still current kept (not computed again)")
    print(f"derive: {n} derived values shipped in data/paper/derived")
    return 0


if __name__ == "__main__":
    sys.exit(main())
