"""What verify's final test-loss check gives up by reading the learnt kernel's pass.

verify evaluates each run's final weights once, on the learnt kernel's 8 paths of L
states: the per-path losses of that pass average L - 1 transitions, the stored test
loss L. Per group whose test losses are judged by control variates, this prints the
mean over its runs' paths of (mean over L transitions - mean over the first L - 1) on
fresh paths of L + 1 states, its standard error, and (|mean| + 2 standard errors) as a
share of the group's median tolerance (LOSS_SIGMAS standard errors of the stored test
loss): what the shortened mean can shift a verdict by. One JSON line per group, then
the largest share.

usage: python benchmarks/verify_bias.py [DATA]   (default data/paper)
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F

from markovlib.runs import verify as V
from markovlib.runs.shipped import ShippedData
from markovlib.runs.stacked import stack


def shortfalls(data: ShippedData) -> dict[str, tuple[list, list]]:
    """Group -> (per-path shortfalls of the final weights, per-run tolerances)."""
    out = defaultdict(lambda: ([], []))
    for _, keys in V._stacks(data, V._check_ensembles(data)):
        runs = [V._alone(data, key) for key in keys]
        if V._controls(runs[0].result, torch.zeros(1, 3, dtype=torch.long)) is None:
            continue  # judged on fresh batches of L + 1 states: unchanged
        paths = V._Paths([run.result for run in runs])
        x = torch.stack(
            [paths.batch(i, 0)[: V.CONTROLLED_PATHS] for i in range(len(runs))]
        )
        model = stack(runs[0].spec.config, [run.record["weights"] for run in runs])
        with torch.no_grad():
            logits = model(x[..., :-1]).float()
        nll = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            x[..., 1:].reshape(-1),
            reduction="none",
        ).view(*x.shape[:2], -1)
        m = nll.double().mean(-1)
        gap = m - nll[..., :-1].double().mean(-1)
        for run, g, row in zip(runs, gap, m):
            if run.result.diverged_step is None and torch.isfinite(g).all():
                sigma = float(row.std())
                out[run.spec.group][0].extend(g.tolist())
                out[run.spec.group][1].append(
                    V.LOSS_SIGMAS * V._stored_error(run.result, sigma)
                )
    return out


def main(directory: str = "data/paper") -> None:
    torch.set_num_threads(1)
    worst = 0.0
    for group, (gaps, tolerances) in shortfalls(ShippedData(directory)).items():
        g = np.asarray(gaps)
        mean, se = float(g.mean()), float(g.std(ddof=1) / math.sqrt(len(g)))
        share = (abs(mean) + 2 * se) / float(np.median(tolerances))
        worst = max(worst, share)
        train = json.loads(group)["train"]
        line = {"seq_len": train["seq_len"], "paths": len(g), "mean": mean}
        print(json.dumps({**line, "se": se, "share_of_tolerance": round(share, 4)}))
    print(f"largest share of the tolerance: {worst:.4f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
