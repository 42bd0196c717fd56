"""Runs of one architecture evaluated as one stacked ensemble (``markovlib verify``).

The stored weights of N runs that share a :class:`~markovlib.model.TransformerConfig`
are loaded into one :class:`~markovlib.model.Transformer` with ``n_models=N`` (member i
holds run i's weights), and every member's own paths go through one batched forward
pass: the learnt kernels, the per-path test losses, and each run's first training step
recomputed from its seed. Member i computes what the one-model path computes to float
rounding (:mod:`markovlib.train`'s ensembles): the same paths, drawn from each run's
own streams.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .._checks import seeded
from ..model import Transformer, TransformerConfig
from ..train import HALF, cross_entropy, seed_streams
from .spec import RunSpec, make_chain, start_weights

__all__ = ["stack", "path_losses", "kernels", "first_losses"]


def stack(config: TransformerConfig, states: Sequence[dict]) -> Transformer:
    """The ensemble whose member i holds ``states[i]`` (state dicts of ``config``)."""
    model = Transformer(config, n_models=len(states))
    names = model.state_dict().keys()
    model.load_state_dict({n: torch.stack([s[n] for s in states]) for n in names})
    return model.eval()


@torch.no_grad()
def path_losses(model: Transformer, x: torch.Tensor) -> torch.Tensor:
    """Each member's mean next-state loss along each of its paths ``x`` (N, B, L + 1):
    (N, B) float64, the logits in float32."""
    return _mean_nll(model(x[..., :-1]), x[..., 1:])


def _mean_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-state loss along each path: (N, B) float64 from ``logits`` (N, B, L,
    k), taken in float32, and ``targets`` (N, B, L)."""
    nll = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]),
        targets.reshape(-1),
        reduction="none",
    )
    return nll.view(targets.shape).double().mean(-1)


@torch.no_grad()
def kernels(
    model: Transformer, y: torch.Tensor, k: int
) -> tuple[np.ndarray, torch.Tensor]:
    """Each member's learnt kernel on its paths ``y[..., :-1]`` (N, B, L): (N, k, k),
    the average predicted P(x_{n+1} = j | x_n = i) (:meth:`TrainResult.learnt_kernel`);
    and, from the same forward pass, its mean next-state loss along each path of ``y``
    (N, B, L + 1), over its L transitions: (N, B) float64, the logits in float32 (as
    :func:`path_losses`)."""
    x = y[..., :-1]
    logits = model(x)
    probs = logits.softmax(-1).double()
    onehot = F.one_hot(x, k).double()
    sums = torch.einsum("mbni,mbnj->mij", onehot, probs)
    counts = onehot.sum((1, 2))[:, :, None]
    return (sums / counts.clamp(min=1)).numpy(), _mean_nll(logits, y[..., 1:])


@torch.no_grad()
def first_losses(specs: Sequence[RunSpec], sources: dict | None = None) -> np.ndarray:
    """The training loss of each run's first step (the runs of one training, in its
    order): its starting weights on its first training batch, at its precision, as
    :func:`~markovlib.train.train` (one run) or :func:`~markovlib.train.train_many`
    (an ensemble) computes it, no step taken."""
    first, alone = specs[0], len(specs) == 1
    streams = [seed_streams(s.seed) for s in specs]
    gens = [seeded(stream[0]) for stream in streams]
    if alone:
        model = Transformer(first.config, generator=gens[0])
    else:
        model = Transformer(first.config, n_models=len(specs), generators=gens)
    params = dict(model.named_parameters())
    for i, spec in enumerate(specs):
        for name, value in (start_weights(spec, sources) or {}).items():
            (params[name] if alone else params[name][i]).copy_(torch.as_tensor(value))
    s = first.train
    x = torch.stack(
        [
            make_chain(spec.chain).sample(
                s.batch_size, s.seq_len + 1, generator=seeded(stream[1]), start=s.start
            )
            for spec, stream in zip(specs, streams)
        ]
    )
    dtype = HALF.get(s.precision)
    with torch.autocast(
        "cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None
    ):
        losses = cross_entropy(model, x[0] if alone else x).float()
    return losses.reshape(len(specs)).numpy()
