"""``markovlib edition``'s training (produce, retrain) and judging (judge, retrain):
the run layer trains, the book layer judges and compares (``replication``)."""

from __future__ import annotations

import json
import signal
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from .errors import UsageError


def device_of(name: str) -> str:
    """``--device``'s value, 'auto' resolved by the library's one rule."""
    from ..device import resolve_device

    return str(resolve_device(name))


def produce(args, groups, store, shipped_dir, *, longest_first=False) -> int:
    """Train the runs of ``groups`` into ``store``: in one process, or ``--workers``."""
    from ..runs.edition import produce, produce_parallel
    from ..runs.shipped import ShippedData

    kwargs = dict(
        threads=args.threads,
        device=device_of(args.device),
        ensemble_size=args.ensemble,
        longest_first=longest_first,
    )
    if args.workers == 1:
        shipped = ShippedData(shipped_dir) if shipped_dir is not None else None
        return produce(groups, store, shipped=shipped, **kwargs)
    return produce_parallel(
        groups, store.directory, workers=args.workers, shipped_dir=shipped_dir, **kwargs
    )


def judge(args, groups, directory) -> int:
    """``edition judge``: the classes and verdicts of --data into --report (JSON)."""
    from ..companion import replication
    from ..runs.shipped import ShippedData

    if directory is None or args.report is None:
        raise UsageError("edition judge needs --data (or data/paper here) and --report")
    judged = replication.judge(ShippedData(directory), groups)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(judged, indent=1, ensure_ascii=False))
    n, rows = len(judged["runs"]), len(judged["verdicts"])
    print(f"{n} runs and {rows} verdicts in {args.report}")
    return 0


def reference_of(args, groups, directory) -> dict:
    """What a retrain is compared with: ``--against``, else the shipped data judged."""
    from ..companion import replication
    from ..runs.shipped import ShippedData

    if args.results is None:
        raise UsageError(
            "edition retrain needs --results DIR: a new folder for its store"
        )
    if args.against is None and directory is None:
        raise UsageError(
            "edition retrain: no shipped data here to compare with; give --against FILE"
        )
    if args.against is not None:
        return json.loads(Path(args.against).read_text())
    return replication.judge(ShippedData(directory), groups)


def retrain(args, groups, directory) -> int:
    """``edition retrain``: every run into a new store, then judged and compared."""
    import torch

    from ..companion import replication
    from ..runs.store import ResultStore

    reference = reference_of(args, groups, directory)
    device, results = device_of(args.device), Path(args.results)
    store = ResultStore(results)
    runs = sum(len(specs) for _, specs in groups)
    print(
        f"re-training {runs} runs of {len(groups)} groups on {device}, "
        f"{args.workers} process(es), ensembles of up to {args.ensemble}",
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        produce(args, groups, store, None, longest_first=True)
    except (KeyboardInterrupt, BrokenProcessPool):  # judge what there is
        print(f"interrupted: judging the {len(store)} runs stored", file=sys.stderr)
    seconds = time.perf_counter() - t0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the report is written whole
    name = torch.cuda.get_device_name() if device == "cuda" else device
    path, page = replication.judge_retrained(
        groups,
        store,
        results,
        reference,
        report=args.report or results / "retrain.json",
        device=name,
        seconds=seconds,
        workers=args.workers,
        ensemble=args.ensemble,
    )
    print(page, end="")
    print(f"report: {path} and {path.with_suffix('.md')}")
    return 0
