"""What fp16 autocast without loss scaling (the authors' ``train_base``) does to the
gradient: the same weights and batch, differentiated in float32, in fp16 without
scaling and in fp16 with a static 2^16 loss scale.

The loss is a mean over batch × length tokens, so each token's gradient at the logits
is at most 1 / (batch × length): 6.1e-5 for 16 × 1024, fp16's smallest normal number.
Backpropagated through fp16 matmuls, the small gradients of the attention and the
first layers flush to zero; the loss scale lifts them back into range.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .model import Transformer
from .train import LOSS_SCALE, cross_entropy

__all__ = ["gradients", "gradient_comparison", "FP16_TINY"]

FP16_TINY = float(torch.finfo(torch.float16).tiny)  # smallest normal fp16: 6.1e-5


def gradients(model: Transformer, x: torch.Tensor, precision: str) -> dict:
    """The gradient of the mean next-state loss on paths ``x`` (batch, length + 1) with
    respect to every parameter, computed in ``precision``: 'fp32', 'fp16' (autocast,
    no loss scaling) or 'fp16-scaled' (autocast, loss × 2^16, gradients ÷ 2^16)."""
    if precision not in ("fp32", "fp16", "fp16-scaled"):
        raise ValueError(
            f"precision must be 'fp32', 'fp16' or 'fp16-scaled'; got {precision!r}"
        )
    model.zero_grad(set_to_none=True)
    half = precision != "fp32"
    scale = LOSS_SCALE if precision == "fp16-scaled" else 1.0
    with torch.autocast(x.device.type, dtype=torch.float16, enabled=half):
        loss = cross_entropy(model, x).float()
    (loss * scale).backward()
    out = {
        name: p.grad.detach().clone() / scale
        for name, p in model.named_parameters()
        if p.grad is not None
    }
    model.zero_grad(set_to_none=True)
    return out


def gradient_comparison(model: Transformer, x: torch.Tensor) -> pd.DataFrame:
    """Per parameter: the float32 gradient's norm and share of exact zeros (rows of
    the positional table beyond the batch's length get none), and for fp16 without
    scaling and with the 2^16 scale the share of entries that are exactly zero and the
    cosine to the float32 gradient (NaN where a gradient is all zeros)."""
    grads = {pr: gradients(model, x, pr) for pr in ("fp32", "fp16", "fp16-scaled")}
    rows = []
    for name, g32 in grads["fp32"].items():
        row = {
            "parameter": name,
            "fp32 norm": float(g32.norm()),
            "fp32 zero share": float((g32 == 0).float().mean()),
        }
        for pr in ("fp16", "fp16-scaled"):
            g = grads[pr][name]
            denom = float(g.norm() * g32.norm())
            row[f"{pr} zero share"] = float((g == 0).float().mean())
            row[f"{pr} cosine"] = (
                float((g * g32).sum()) / denom if denom > 0 else np.nan
            )
        rows.append(row)
    return pd.DataFrame(rows).set_index("parameter")
