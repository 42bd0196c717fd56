"""Compute the Hessians at the paper edition's trapped runs into a result store.

    MARKOVLIB_RESULTS=DIR python tools/curvatures.py

One :func:`~markovlib.curvature.trap_curvature` per trapped run
(:data:`~markovlib.runs.experiments.TRAPPED_SEEDS`), kept as derived values in DIR
(``tools/derive.py --store DIR`` then ships them with the chapters' values); about
25 s a run on one core of an AMD EPYC. Resumable: a value already in DIR is read.
"""

from __future__ import annotations

import os
import time

import torch


def main() -> int:
    torch.set_num_threads(1)
    os.environ.setdefault("MARKOVLIB_DERIVED_SHIPPED", "0")
    from markovlib.companion import thesis
    from markovlib.companion.scorecard import shipped_records
    from markovlib.runs.experiments import paper_edition
    from markovlib.runs.shipped import shipped_data

    data = shipped_data("auto")
    sources = thesis.trapped_sources(dict(paper_edition()))
    for name, specs in sources.items():
        for record in shipped_records(data, specs):
            t0 = time.perf_counter()
            (c,) = thesis.trap_curvatures(
                [record], lambda r: data.record(r.key)["weights"]
            )
            print(
                f"{name} seed {record.spec.seed}: smallest {c.min_eigenvalue:.3g}, "
                f"largest {c.max_eigenvalue:.3g}, gradient {c.grad_norm:.2g} "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
