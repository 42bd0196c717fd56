"""Shared set-up for the markovlib unit tests.

Two CPU threads in one process, one per pytest-xdist worker (the target machine has 2
cores; CPU results are bit-reproducible only with a fixed thread count), a
non-interactive matplotlib backend, and a few helpers exposed as fixtures.
"""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from scipy import stats  # noqa: E402

# one torch thread per pytest-xdist worker (two workers on two cores: more threads spin
# against each other), two in a single process; the processes a worker starts (the
# CLI, sweeps, kernels) inherit one thread too (issue 51: `make` exports
# OMP_NUM_THREADS=2, with which a test's sweep beside the other worker took 144 s
# instead of 27 s)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)


def _random_kernel(k: int, seed: int = 0, alpha: float = 2.0) -> np.ndarray:
    """A random non-symmetric row-stochastic k×k kernel with rows ~ Dirichlet(alpha),
    all entries > 0."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(k, alpha), size=k)
    assert np.all(P > 0) and not np.allclose(P, P.T)
    return P


def _markov_chi2(counts: np.ndarray, P: np.ndarray) -> tuple[float, int, float]:
    """Goodness of fit of observed transition counts to a kernel (Anderson–Goodman
    row-wise chi-square).

    Conditionally on the visits to state i, the successors of i are i.i.d. P[i]
    (Markov property), so sum_ij (N_ij - N_i P_ij)^2 / (N_i P_ij) is asymptotically
    chi-square with sum_i (#{j: P_ij > 0} - 1) dof. A transition with P_ij = 0 that is
    observed makes the statistic infinite (p-value 0).
    """
    counts = np.asarray(counts, dtype=np.float64)
    P = np.asarray(P, dtype=np.float64)
    n_i = counts.sum(1, keepdims=True)
    expected = n_i * P
    if np.any((P == 0) & (counts > 0)):
        return float("inf"), 1, 0.0
    mask = (P > 0) & (n_i > 0)
    stat = float((((counts - expected) ** 2)[mask] / expected[mask]).sum())
    dof = int(
        sum(
            max(int((P[i] > 0).sum()) - 1, 0)
            for i in range(P.shape[0])
            if n_i[i, 0] > 0
        )
    )
    return stat, dof, float(stats.chi2.sf(stat, dof))


@pytest.fixture
def random_kernel():
    """Factory: ``random_kernel(k, seed)`` -> a fixed random non-symmetric kernel."""
    return _random_kernel


@pytest.fixture
def markov_chi2():
    """Factory: ``markov_chi2(counts, P)`` -> (statistic, dof, p-value)."""
    return _markov_chi2


@pytest.fixture(autouse=True)
def _no_scale_override(monkeypatch):
    """Tests never inherit a MARKOVLIB_SCALE from the caller's shell (CI sets it for the
    notebooks)."""
    monkeypatch.delenv("MARKOVLIB_SCALE", raising=False)
