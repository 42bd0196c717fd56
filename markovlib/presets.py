"""The one place where the book's run sizes live: ``smoke`` / ``cpu`` / ``paper``.

``resolve("auto")`` picks ``paper`` when CUDA is available and ``cpu`` otherwise. The environment
variable ``MARKOVLIB_SCALE`` overrides whatever a notebook asks for (CI forces ``smoke`` with it).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

import torch

ENV_VAR = "MARKOVLIB_SCALE"


@dataclass(frozen=True)
class Scale:
    """Sizes of one scale. ``converges`` says whether runs at this scale are long enough to claim convergence."""

    name: str
    steps: int          # optimisation steps per run
    batch_size: int
    seq_len: int
    seeds: int          # independent runs where a chapter reports seed statistics
    trap_seeds: int     # runs where a chapter reports the fraction of runs on a plateau (needs many)
    d_model: int
    eval_every: int     # steps between two test-loss evaluations
    eval_batches: int   # fresh batches per test-loss evaluation
    lr: float = 2e-3
    converges: bool = True

    def train_kwargs(self) -> dict:
        """Keyword arguments for :func:`markovlib.train.train`."""
        return dict(steps=self.steps, batch_size=self.batch_size, seq_len=self.seq_len, lr=self.lr,
                    eval_every=self.eval_every, eval_batches=self.eval_batches)


PRESETS: dict[str, Scale] = {
    # seconds: exercises every code path, claims nothing about convergence
    "smoke": Scale("smoke", steps=30, batch_size=4, seq_len=64, seeds=2, trap_seeds=4, d_model=8,
                   eval_every=10, eval_batches=1, converges=False),
    # minutes on a 2-core laptop: the paper's model and optimiser, shorter sequences
    "cpu": Scale("cpu", steps=400, batch_size=16, seq_len=256, seeds=3, trap_seeds=32, d_model=8,
                 eval_every=10, eval_batches=4),
    # the authors' settings (PAPER.md): batch 16, length 1024, 1000 iterations
    "paper": Scale("paper", steps=1000, batch_size=16, seq_len=1024, seeds=5, trap_seeds=64, d_model=8,
                   eval_every=10, eval_batches=8),
}


def resolve(scale: str | Scale = "auto") -> Scale:
    """Return the :class:`Scale` for ``scale`` ('auto', 'smoke', 'cpu', 'paper'); ``$MARKOVLIB_SCALE`` wins."""
    forced = os.environ.get(ENV_VAR, "").strip()
    if forced:
        scale = forced
    if isinstance(scale, Scale):
        return scale
    if scale == "auto":
        scale = "paper" if torch.cuda.is_available() else "cpu"
    if scale not in PRESETS:
        raise ValueError(f"scale must be one of 'auto', {', '.join(map(repr, PRESETS))}; got {scale!r}")
    return PRESETS[scale]


def with_overrides(scale: Scale, **changes) -> Scale:
    """A copy of ``scale`` with some fields changed (e.g. ``steps=2000``)."""
    return replace(scale, **changes)


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """'auto' → CUDA when present, else CPU."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
