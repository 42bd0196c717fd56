"""Made-up run records on binary chains, shared by the tests of
markovlib.companion.measures and
markovlib.companion.chapters.<chapter>."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from markovlib.chains import binary
from markovlib.companion.records import RunRecord
from markovlib.train import TrainConfig


def record(p, q, kernel, seed=0):
    """A run on (p, q) whose learnt kernel is ``kernel``."""
    chain = binary(p, q)
    history = pd.DataFrame({"step": [0, 10], "test_loss": [0.7, 0.6]})
    train = TrainConfig(steps=10, batch_size=16, seq_len=1024)
    spec = SimpleNamespace(chain={"p": p, "q": q}, seed=seed, train=train)
    return RunRecord(chain, np.asarray(kernel, dtype=float), history, spec)


def at_chain(p, q):
    """A run that learnt the chain."""
    return record(p, q, binary(p, q).P)


def at_marginal(p, q):
    """A run that predicts the stationary marginal from every state."""
    pi = binary(p, q).stationary()
    return record(p, q, np.vstack([pi, pi]))
