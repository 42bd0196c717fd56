"""Fig 3(d)'s prediction after a zero, position by position, averaged over test paths:
at any model, and at a trained run's weights as a derived value (computed once per
edition and shipped in ``data/paper/derived/``; its key hashes this module's code, so
an edit of the rules in :mod:`.fig3` does not re-key it)."""

from __future__ import annotations

import numpy as np
import torch

from ...chains import MarkovChain
from ...model import Transformer, TransformerConfig
from ...runs.derived import derived, held

__all__ = ["mean_after_zero", "along_weights", "along_run"]


@torch.no_grad()
def mean_after_zero(
    model, chain: MarkovChain, length: int, paths: int, seed: int, batch: int = 32
) -> np.ndarray:
    """P(x_{n+1} = 1 | x_1^n) that ``model`` predicts at each position n, averaged
    over the ``paths`` test paths of ``chain`` and ``length`` (seed ``seed``) with
    x_n = 0 there; positions no path has a zero at left out."""
    x = chain.sample(paths, length, seed=seed)
    model.eval()
    first = next(model.parameters(), None) if hasattr(model, "parameters") else None
    total, zeros = np.zeros(x.shape[1]), np.zeros(x.shape[1])
    for i in range(0, paths, batch):
        chunk = x[i : i + batch]
        on = chunk if first is None else chunk.to(first.device)  # a model on the GPU
        probs = model.probabilities(on)[..., 1].double().cpu().numpy()
        zero = chunk.numpy() == 0
        total += np.where(zero, probs, 0.0).sum(0)
        zeros += zero.sum(0)
    return total[zeros > 0] / zeros[zeros > 0]


def along_weights(
    config: TransformerConfig,
    chain: MarkovChain,
    weights: dict,
    length: int,
    *,
    paths: int,
    seed: int,
) -> np.ndarray:
    """:func:`mean_after_zero` of the transformer ``config`` at ``weights`` (a state
    dict), on the CPU: the derived value of a trained run."""
    model = Transformer(config)
    model.load_state_dict(weights)
    return mean_after_zero(model.eval(), chain, length, paths, seed)


def along_run(model, record, paths: int, seed: int, *, compute: bool = True):
    """:func:`mean_after_zero` of a run's learnt ``model`` on its chain and length:
    for a transformer the derived :func:`along_weights` at its weights (the shipped
    value where the edition ships it; ``compute=False``: None where nothing holds
    it), any other model computed."""
    length = record.spec.train.seq_len
    if not isinstance(model, Transformer):
        return mean_after_zero(model, record.chain, length, paths, seed)
    weights = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    look = derived if compute else held
    return look(
        along_weights,
        record.spec.config,
        record.chain,
        weights,
        length,
        paths=paths,
        seed=seed,
    )
