"""The project's own timings, from a fresh clone: ``make test`` stage by stage, the
paper edition's build chapter by chapter, and a reader's re-run of each chapter.

Usage: ``python benchmarks/project.py [--what test,book,rerun] [--chapters a,b]
[--scale cpu] [--json PATH] [--keep]``

- test: ``git clone`` of this repository's HEAD into a temporary folder, then
  ``make install`` (set-up: venv, pinned requirements) and each stage of ``make test``
  (lint, unit, verify, book-strict, browser), one wall-clock time each;
- book: ``make book`` in the same clone (paper edition, nothing trained): each chapter's
  execution seconds as ``tools/prebuild.py`` prints them (two at a time), the whole
  build, and a second ``make book`` with nothing changed;
- rerun: ``markovlib rerun CHAPTER`` at ``--scale`` (default cpu) from an empty result
  store, with (p, q) = (0.3, 0.9) for the binary chapters and each other chapter's own
  parameters (k = 4 for multi_state), one wall-clock time each, beside the estimate the
  chapter printed before it trained.

Every command runs with the machine's environment minus markovlib's variables; the
report (a Markdown table and, with --json, JSON) names the date, the commit, the CPU,
the load average before and after, and the machine's speed then: the seconds of a fixed
single-thread torch workload (:func:`yardstick`) before and after. This machine's speed
varies within a day (the yardstick, ``import torch`` and ``make test`` all took about
1.4 times as long at 21:45 UTC as at 20:00 UTC on 2026-11-27), so two reports compare
only with their yardsticks. Stop anything else that runs for numbers to quote.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READER = ["--p", "0.3", "--q", "0.9"]  # the binary chapters (markovlib rerun)
# the chapters without a binary chain: k = 4 states; the CCMC and in-context chapters
# their defaults
OWN = {"multi_state": ["--set", "k=4"], "ccmc": [], "incontext": []}
WHAT = ("test", "book", "rerun")
SCALES = ("smoke", "cpu", "paper")


def _env(**changes) -> dict:
    names = ("MARKOVLIB_SCALE", "MARKOVLIB_DATA", "MARKOVLIB_RESULTS")
    return {
        **{k: v for k, v in os.environ.items() if k not in names},
        **changes,
    }


def timed(
    command: list[str], cwd: Path, log: Path, check: bool = True, **env
) -> tuple[float, str]:
    """Wall-clock seconds of ``command`` and its output (also written to ``log``); a
    failure raises with the output's tail (``check=False``: the seconds of a failed
    command are negative)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        command, cwd=cwd, env=_env(**env), capture_output=True, text=True
    )
    seconds = time.perf_counter() - t0
    out = proc.stdout + proc.stderr
    log.write_text(out)
    if proc.returncode and check:
        raise RuntimeError(f"{' '.join(command)} failed:\n{out[-3000:]}")
    return (seconds if proc.returncode == 0 else -seconds), out


def clone(into: Path) -> Path:
    """A fresh clone of this repository's HEAD (committed work only)."""
    subprocess.run(
        ["git", "clone", "--quiet", str(ROOT), str(into)], check=True, cwd=ROOT
    )
    return into


def test_rows(repo: Path, logs: Path) -> list[dict]:
    """``make install``, then ``make test`` as CI runs it, with the stage times it
    prints ("make test: unit passed in 369 s"; verify beside the last two stages)."""
    rows = []
    install, _ = timed(["make", "install"], repo, logs / "make-install.log", False)
    rows.append({"what": "make install", "seconds": abs(install)})
    seconds, out = timed(["make", "test"], repo, logs / "make-test.log", False)
    for stage, s, beside in re.findall(
        r"^make test: (\S+) passed in (\d+) s( \(beside [^)]*\))?$", out, re.M
    ):
        rows.append({"what": f"  {stage}{beside}", "seconds": float(s)})
    failed = " (FAILED)" if seconds < 0 or install < 0 else ""
    rows.append({"what": f"make test after set-up{failed}", "seconds": abs(seconds)})
    rows.append(
        {"what": "make test (set-up included)", "seconds": abs(install) + abs(seconds)}
    )
    print("\n".join(f"{r['what']}: {r['seconds']:.0f} s" for r in rows), flush=True)
    return rows


def book_rows(repo: Path, logs: Path) -> list[dict]:
    """``make book`` (per chapter from prebuild's lines), then again unchanged."""
    seconds, out = timed(["make", "book"], repo, logs / "make-book.log")
    rows = [
        {"what": f"  {name}", "seconds": float(s)}
        for name, s in re.findall(r"prebuild: (\w+)\.ipynb in (\d+) s", out)
    ]
    rows.append({"what": "make book (after set-up)", "seconds": seconds})
    again, _ = timed(["make", "book"], repo, logs / "make-book-again.log")
    rows.append({"what": "make book, nothing changed", "seconds": again})
    print(f"make book: {seconds:.0f} s; again, nothing changed: {again:.0f} s")
    return rows


def rerun_rows(repo: Path, logs: Path, chapters: list[str], scale: str) -> list[dict]:
    """``markovlib rerun`` per chapter at ``scale``, each from an empty store."""
    venv = repo / ".venv" / "bin"
    rows = []
    for chapter in chapters:
        store = Path(tempfile.mkdtemp(prefix=f"rerun-{chapter}-"))
        given = OWN.get(chapter, READER)
        command = [str(venv / "markovlib"), "rerun", chapter, *given]
        command += ["--scale", scale, "--out", str(store / "out")]
        seconds, out = timed(
            command, repo, logs / f"rerun-{chapter}.log", MARKOVLIB_RESULTS=str(store)
        )
        shutil.rmtree(store, ignore_errors=True)
        estimates = re.findall(
            r"about ([\d.]+) (s|min|h) on (?:one CPU thread|\d+ CPU processes)", out
        )
        scale_of = {"s": 1, "min": 60, "h": 3600}
        estimate = sum(float(v) * scale_of[u] for v, u in estimates) or None
        rows.append(
            {"what": f"rerun {chapter}", "seconds": seconds, "estimate": estimate}
        )
        print(f"rerun {chapter}: {seconds:.0f} s (estimate {estimate})", flush=True)
    return rows


def facts(repo: Path) -> dict:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout.strip()
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "python": platform.python_version(),
    }


YARDSTICK = (
    "import time, torch; torch.set_num_threads(1); "
    "a = torch.randn(256, 256, generator=torch.Generator().manual_seed(0)); "
    "t = time.perf_counter(); [a @ a for _ in range(2000)]; "
    "print(time.perf_counter() - t)"
)


def yardstick(repo: Path, rounds: int = 3) -> float:
    """Seconds of a fixed single-thread workload (2 000 products of 256 × 256
    float32 matrices) in the clone's Python, best of ``rounds``: the machine's speed."""
    python = repo / ".venv" / "bin" / "python"
    python = python if python.exists() else Path(sys.executable)
    runs = [
        float(subprocess.run([str(python), "-c", YARDSTICK], capture_output=True,
                             text=True, check=True).stdout)
        for _ in range(rounds)
    ]  # fmt: skip
    return min(runs)


def report(rows: list[dict], info: dict) -> str:
    speed = ""
    if "yardstick_before" in info:
        speed = (
            f"; yardstick {info['yardstick_before']:.2f} s before, "
            f"{info['yardstick_after']:.2f} s after"
        )
    lines = [
        f"Measured {info['date']} on {info['cpu']} (commit {info['commit']}, load "
        f"{info['load_before']:.2f} before, {info['load_after']:.2f} after{speed}):",
        "",
        "| what | seconds | estimate printed |",
        "|---|---:|---:|",
    ]
    for r in rows:
        est = r.get("estimate")
        lines.append(
            f"| {r['what']} | {r['seconds']:.0f} | "
            f"{'' if est is None else f'{est:.0f}'} |"
        )
    return "\n".join(lines)


def _chapters() -> list[str]:
    """The chapters a reader re-runs (every notebook but the reproducibility page)."""
    return sorted(
        p.stem for p in (ROOT / "book").glob("*.ipynb") if p.stem != "reproducibility"
    )


def _refused(what: set, scale: str, chapters: list[str] | None) -> str:
    """Why these options are refused, in one line ('' when they are fine)."""
    if not what or not what <= set(WHAT):
        return f"--what: give a comma-separated subset of {', '.join(WHAT)}"
    if scale not in SCALES:
        return f"--scale: must be one of {', '.join(SCALES)}; got {scale!r}"
    unknown = sorted(set(chapters or ()) - set(_chapters()))
    if unknown or (chapters is not None and not any(chapters)):
        return (
            f"--chapters: no chapter {', '.join(unknown) or repr('')}; chapters: "
            + (", ".join(_chapters()))
        )
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", default="test,book,rerun")
    parser.add_argument("--chapters", default=None, help="re-run only these")
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--json", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the clone")
    args = parser.parse_args(argv)
    what = set(args.what.split(","))
    chapters = None if args.chapters is None else args.chapters.split(",")
    refused = _refused(what, args.scale, chapters)
    if refused:  # before cloning or installing anything
        parser.error(refused)
    work = Path(tempfile.mkdtemp(prefix="markovlib-project-bench-"))
    logs = work / "logs"
    logs.mkdir()
    repo = clone(work / "clone")
    info = {
        **facts(repo),
        "load_before": os.getloadavg()[0],
        "yardstick_before": yardstick(repo),
    }
    rows = []
    if "test" in what:
        rows += test_rows(repo, logs)
    elif {"book", "rerun"} & what:
        rows.append(
            {
                "what": "make install",
                "seconds": timed(["make", "install"], repo, logs / "install.log")[0],
            }
        )
    if "book" in what:
        rows += book_rows(repo, logs)
    if "rerun" in what:
        rows += rerun_rows(repo, logs, chapters or _chapters(), args.scale)
    info["load_after"] = os.getloadavg()[0]
    info["yardstick_after"] = yardstick(repo)
    print(report(rows, info))
    print(f"logs: {logs}")
    if args.json:
        Path(args.json).write_text(json.dumps({**info, "rows": rows}, indent=1))
    if not args.keep:
        shutil.rmtree(repo, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
