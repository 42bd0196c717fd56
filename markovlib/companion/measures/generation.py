"""Section 3's generation from one prompt (the CCMC chapter), summarised: what the
chapter's report, figures and rule read of :func:`markovlib.ccmc.generation_run`,
without its tokens. The chapter calls it through ``derived()``: computed once per
edition and shipped in ``data/paper/derived/`` for the chapter's default parameters
(its key hashes this module's code): at the paper's scale the generation was 23 of the
chapter's 36 s of cells on one thread (AMD EPYC, 2026-11-29), its tokens 2 x 1 024 x
20 000."""

from __future__ import annotations

import numpy as np

from ... import ccmc

__all__ = ["BAND", "generation_summary"]

BAND = (0.1, 0.9)  # the figure's band over the trajectories
# lengths n (at most), evenly on a log scale, where the last window is read
N_LENGTHS = 100
N_CHECKPOINTS = 40  # context lengths (at most) at which the context's shares are read


def _bands(stats: dict) -> dict:
    """Each statistic of :func:`~markovlib.ccmc.trajectory_stats` (B, A) as its mean
    over the B trajectories and its :data:`BAND` quantiles, (A,) each; ``n`` as is."""
    out = {"n": stats["n"]}
    for name in ("distinct", "entropy", "top_share"):
        low, high = np.quantile(stats[name], BAND, axis=0)
        out[name] = {"mean": stats[name].mean(0), "low": low, "high": high}
    return out


def generation_summary(W, prompt, length: int, *, n_traj: int, window: int, seed: int):
    """Section 3: :func:`~markovlib.ccmc.generation_run` of ``W`` from ``prompt``
    (``n_traj`` trajectories of ``length`` tokens, seed ``seed``), its trailing
    ``window`` read at up to :data:`N_LENGTHS` lengths from ``window`` to ``length``.

    Returns ``W``, ``pi``, ``stable`` as the run has them; ``stats`` and ``markov``
    (the CCMC's and the Markov chain's) as :func:`_bands`; ``end``, its
    :func:`~markovlib.ccmc.final_window`; ``checkpoints`` (up to :data:`N_CHECKPOINTS`
    lengths from 1 to ``length``) and ``context_shares`` there
    (:func:`~markovlib.ccmc.context_shares`)."""
    at = np.unique(np.geomspace(window, length, N_LENGTHS).round().astype(int))
    run = ccmc.generation_run(
        W, prompt, length, n_traj=n_traj, window=window, at=at, seed=seed
    )
    k = run["W"].shape[0]
    checkpoints = np.unique(np.geomspace(1, length, N_CHECKPOINTS).round().astype(int))
    return {
        "W": run["W"],
        "pi": run["pi"],
        "stable": run["stable"],
        "stats": _bands(run["stats"]),
        "markov": _bands(run["markov"]),
        "end": ccmc.final_window(run, window),
        "checkpoints": checkpoints,
        "context_shares": ccmc.context_shares(run["tokens"], prompt, k, checkpoints),
    }
