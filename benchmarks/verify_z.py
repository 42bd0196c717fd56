"""How verify's test-loss checks without training sit within their tolerance.

Runs the checks of ``markovlib verify --sample 0`` over every shipped run (one process,
one thread) and records, for each run's final and checkpoint weights, z = (the loss of
the stored weights estimated afresh - the stored test loss) / the standard error of
that difference: what LOSS_SIGMAS standard errors allow. Prints one JSON line: the
number of checks, the standard deviation of z, the largest |z|, the number above 3
and what a normal law would give there, and the seconds taken.

usage: python benchmarks/verify_z.py [DATA]   (default data/paper)
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch

from markovlib.runs import verify as V
from markovlib.runs.shipped import ShippedData


def z_scores(directory: str) -> list[float]:
    """z of every test-loss check of every shipped run (final and checkpoint)."""
    zs, within = [], V._within_noise

    def record(what: str, loss: float, stored: float, se: float) -> float:
        zs.append((loss - stored) / se)
        return within(what, loss, stored, se)

    V._within_noise = record
    try:
        data = ShippedData(directory)
        for _, keys in V._stacks(data, V._check_ensembles(data)):
            V._consistent(data, keys)
    finally:
        V._within_noise = within
    return zs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default="data/paper")
    args = parser.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    z = np.asarray(z_scores(args.data))
    normal = len(z) * math.erfc(3 / math.sqrt(2))
    print(
        json.dumps(
            {
                "checks": len(z),
                "sd": round(float(z.std()), 3),
                "max_abs": round(float(np.abs(z).max()), 2),
                "above_3": int((np.abs(z) > 3).sum()),
                "normal_above_3": round(normal, 1),
                "seconds": round(time.perf_counter() - t0),
            }
        )
    )


if __name__ == "__main__":
    main()
