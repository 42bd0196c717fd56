"""Compute the Hessians at the paper edition's trapped runs, and ship them.

    python tools/curvatures.py [--ship]

One :func:`~markovlib.curvature.trap_curvature` per trapped run
(:data:`~markovlib.runs.experiments.TRAPPED_SEEDS`), kept as a derived value in the
result store (``$MARKOVLIB_RESULTS``); about 40-60 s a run on one core of an AMD EPYC.
Resumable: a value already stored is read. ``--ship`` then makes them shipped values
of ``data/paper`` beside the ones shipped there whose keys are still current
(``tools/derive.py`` keeps them the same way).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def compute() -> int:
    """Every trapped run's Hessian into the store; how many."""
    from markovlib.companion import thesis
    from markovlib.companion.records import shipped_records
    from markovlib.runs.experiments import paper_edition
    from markovlib.runs.shipped import shipped_data

    data, n = shipped_data("auto"), 0
    for name, specs in thesis.trapped_sources(dict(paper_edition())).items():
        for record in shipped_records(data, specs):
            t0 = time.perf_counter()
            (c,) = thesis.trap_curvatures(
                [record], lambda r: data.record(r.key)["weights"]
            )
            n += 1
            print(
                f"{name} seed {record.spec.seed}: smallest {c.min_eigenvalue:.3g}, "
                f"largest {c.max_eigenvalue:.3g}, gradient {c.grad_norm:.2g} "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ship", action="store_true", help="ship them in data/paper")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    os.environ.setdefault("MARKOVLIB_DERIVED_SHIPPED", "0")
    sys.path.insert(0, str(ROOT / "tools"))
    from derive import keep_current

    from markovlib.runs.derived import ship
    from markovlib.runs.store import default_results_dir

    print(f"curvatures: {compute()} trapped runs' Hessians in the store")
    if args.ship:
        store, data = default_results_dir(), ROOT / "data" / "paper"
        kept = keep_current(data, store)
        print(f"curvatures: {ship(store, data)} derived values shipped ({kept} kept)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
