"""Where tensors live: the one device rule of the library ('auto' → CUDA when present,
else the CPU). Below both :mod:`~markovlib.presets` and :mod:`~markovlib.train`."""

from __future__ import annotations

import torch

__all__ = ["resolve_device"]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """'auto' → CUDA when present, else CPU."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
