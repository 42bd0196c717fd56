"""`make test`'s stages in turn, one of them beside the others.

Usage: ``python tools/test_stages.py lint unit book-strict browser --beside verify
--from book-strict``: each stage is ``make <stage> SHOTS=screen``, its wall-clock
seconds printed as it passes ("make test: unit passed in 369 s", what CI's log
shows); the ``--beside`` stage starts with the ``--from`` stage in a process group of
its own, its output in ``_build/<stage>.log`` (printed when it ends), one torch thread
per process. It shares the machine with stages that leave a core idle (the strict
build's one Sphinx process; the browser check: 70 s of CPU in 86 s on 2 cores,
2026-11-27). Beside every stage at niceness 19 it slowed them more than it gained
(680 s against 631 s after set-up, 2026-11-27). A failing stage stops everything
(exit 2; Ctrl-C or SIGTERM: 130), the stage beside it included."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _make(stage: str) -> list[str]:
    return [
        os.environ.get("MAKE", "make"),
        "--no-print-directory",
        stage,
        "SHOTS=screen",
    ]


def _start_beside(stage: str) -> tuple[subprocess.Popen, Path, float]:
    """``make stage`` in a process group of its own (stopped as a group), output to a
    log; in this session, where the CPU is shared by process (Linux gives each session
    an equal share, autogroups)."""
    log = ROOT / "_build" / f"{stage}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
    }  # two cores shared: no spinning threads
    with log.open("w") as out:
        proc = subprocess.Popen(
            _make(stage), cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, env=env,
            process_group=0,
        )  # fmt: skip
    print(f"make test: {stage} started beside the next stages (log: {log})", flush=True)
    return proc, log, time.monotonic()


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run(stages: list[str], beside: str | None, start_with: str | None) -> int:
    """The stages in turn and ``beside`` from ``start_with`` on; the exit status."""
    job = None
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        for stage in stages:
            if beside and stage == start_with:
                job = _start_beside(beside)
            start = time.monotonic()
            if subprocess.run(_make(stage), cwd=ROOT).returncode != 0:
                print(f"make test: {stage} failed", file=sys.stderr)
                return 2
            passed = f"make test: {stage} passed in {time.monotonic() - start:.0f} s"
            print(passed, flush=True)  # before the next stage's own output
        if job is None:
            return 0
        proc, log, start = job
        code = proc.wait()
        sys.stdout.write(log.read_text())
        sys.stdout.flush()
        if code != 0:
            print(f"make test: {beside} failed", file=sys.stderr)
            return 2
        print(
            f"make test: {beside} passed in {time.monotonic() - start:.0f} s "
            f"(beside {', '.join(stages[stages.index(start_with) :])})",
            flush=True,
        )
        return 0
    except KeyboardInterrupt:
        print("make test: interrupted", file=sys.stderr)
        return 130
    finally:
        _stop(job[0] if job else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stages", nargs="+")
    parser.add_argument("--beside", help="a stage that runs beside the others")
    parser.add_argument("--from", dest="start_with", help="the stage it starts with")
    args = parser.parse_args()
    if (args.beside is None) != (args.start_with is None):
        parser.error("--beside and --from go together")
    if args.start_with is not None and args.start_with not in args.stages:
        parser.error(f"--from {args.start_with}: not one of the stages {args.stages}")
    sys.exit(run(args.stages, args.beside, args.start_with))


if __name__ == "__main__":
    main()
