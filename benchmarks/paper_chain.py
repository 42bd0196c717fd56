"""A reader's re-run checked against the paper edition: each chapter re-run at scale
``cpu`` with its default parameters (the paper's own chain), and every scorecard
verdict the re-run glues set beside the paper edition's (``tests/scorecard_paper.json``,
pinned from the shipped runs).

Usage: ``python benchmarks/paper_chain.py [--chapters a,b] [--out DIR]`` (default out:
a temporary folder; the result store is ``DIR/store``, shared by the chapters as a
reader's would be). Prints a Markdown table and writes it to
``benchmarks/results/paper-chain.md``; a cpu verdict that is neither the paper
edition's nor "not tested at this scale" is what this check exists to catch (exit
status 1; issue 46).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from project import facts  # benchmarks/ is this script's folder, on sys.path

from markovlib.runs.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = (
    "global_minimum",
    "bad_local_minima",
    "saddles",
    "trapped",
    "multi_state",
    "depth",
    "initialisation",
)


def glued_verdicts(notebook: Path) -> dict[str, str]:
    """{row id: verdict} of the ``sc_<id>_verdict`` values an executed chapter glued."""
    out = {}
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name", "")
            if name.startswith("sc_") and name.endswith("_verdict"):
                value = next(iter(output["data"].values()))
                out[name[3 : -len("_verdict")]] = value.strip("'\"")
    return out


def rerun(chapter: str, out: Path, scale: str = "cpu") -> tuple[dict[str, str], float]:
    """Re-run ``chapter`` at ``scale`` with its defaults; its verdicts and seconds."""
    env = {**os.environ, "MARKOVLIB_RESULTS": str(out / "store")}
    folder = out / (chapter if scale == "cpu" else f"{chapter}-{scale}")
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "markovlib", "rerun", chapter, "--scale", scale,
         "--out", str(folder)],
        cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    return glued_verdicts(folder / f"{chapter}.ipynb"), seconds


def unpinned(chapter: str, verdicts: dict[str, str], paper: dict, out: Path) -> dict:
    """The paper edition's verdicts of ``chapter``'s rows that are not pinned (the
    initialisation chapter's): its own execution at scale paper, from the shipped runs
    (nothing trained)."""
    if all(row in paper for row in verdicts):
        return {}
    return rerun(chapter, out, "paper")[0]


def table(found: dict[str, tuple[dict, float]], paper: dict[str, str]) -> list[str]:
    """One line per (chapter, row) the re-run judged: the paper edition's verdict and
    the re-run's, and whether a cpu verdict contradicts it."""
    lines = [
        "| chapter | row | paper edition | cpu re-run | agrees |",
        "| --- | --- | --- | --- | --- |",
    ]
    for chapter, (verdicts, seconds) in found.items():
        for row, cpu in sorted(verdicts.items()):
            ref = paper.get(row, "—")
            agrees = (
                "yes"
                if cpu == ref
                else "not judged at cpu"
                if cpu.startswith("not tested")
                else "no"
            )
            lines.append(
                f"| {chapter} ({seconds:.0f} s) | {row} | {ref} | {cpu} | {agrees} |"
            )
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", default=",".join(CHAPTERS))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    chapters = [c for c in args.chapters.split(",") if c]
    unknown = sorted(set(chapters) - set(CHAPTERS))
    if unknown:
        parser.error(
            f"--chapters: unknown {', '.join(unknown)}; one of {', '.join(CHAPTERS)}"
        )
    out = args.out or Path(tempfile.mkdtemp(prefix="paper-chain-"))
    paper = {
        r["id"]: r["verdict"]
        for r in json.loads((ROOT / "tests/scorecard_paper.json").read_text())
    }
    store = out / "store" / "runs.sqlite"
    held = len(ResultStore(store.parent)) if store.exists() else 0
    found = {}
    for chapter in chapters:
        found[chapter] = rerun(chapter, out)
        print(f"{chapter}: {found[chapter][1]:.0f} s", file=sys.stderr, flush=True)
        paper = {**unpinned(chapter, found[chapter][0], paper, out), **paper}
    lines = table(found, paper)
    page = ROOT / "benchmarks" / "results" / "paper-chain.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    info = facts(ROOT)  # date, commit and CPU, as benchmarks/project.py reports them
    start = (
        f"{held} runs already in the result store {store.parent} (trained by an "
        "earlier call with this --out: the seconds are the chapters' execution only)"
        if held
        else "an empty result store (the seconds include training)"
    )
    page.write_text(
        f"Re-runs at scale cpu on the paper's chains ({info['date']}, commit "
        f"{info['commit']}, {info['cpu']}; "
        f"{start}):\n\n" + "\n".join(lines) + "\n"
    )
    print("\n".join(lines))
    return 1 if any(line.endswith("| no |") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
