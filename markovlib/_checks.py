"""Argument checks and random-generator set-up shared by every module (private: import
from here, nowhere else).

Each check raises ``ValueError`` naming the parameter and its allowed range, and returns
the value normalised.
"""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager

import numpy as np
import torch


def check_int(name: str, value, low: int) -> int:
    """An integer (not a bool) >= ``low``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or value < low
    ):
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    return int(value)


def check_number(
    name: str,
    value,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    open_low: bool = False,
    what: str | None = None,
) -> float:
    """A finite real number (not a bool) in [low, high] (or (low, high] with
    ``open_low``)."""
    inside = (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (low < value if open_low else low <= value)
        and value <= high
    )
    if not inside:
        interval = what or f"a number in {'(' if open_low else '['}{low:g}, {high:g}]"
        raise ValueError(f"{name} must be {interval}; got {value!r}")
    return float(value)


def check_probability(name: str, value) -> float:
    """A number in [0, 1]."""
    return check_number(name, value, low=0.0, high=1.0)


def check_choice(name: str, value, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(
            f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}"
        )
    return value


def check_square(name: str, M, states: str) -> None:
    """A square k×k matrix (numpy or torch) with k >= 2 (``states``: what k counts)."""
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(
            f"{name} must be a square k×k matrix; got shape {tuple(M.shape)}"
        )
    if M.shape[0] < 2:
        raise ValueError(f"k (number of {states}) must be >= 2; got {M.shape[0]}")


def check_vocab(config, chain) -> None:
    """The model's vocabulary is the chain's state space."""
    if config.vocab_size != chain.k:
        raise ValueError(
            f"config.vocab_size ({config.vocab_size}) must equal the "
            f"chain's k ({chain.k})"
        )


def seeded(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A fresh torch generator on ``device`` seeded with ``seed``."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def generator(
    seed, generator: torch.Generator | None, device: str | torch.device = "cpu"
) -> torch.Generator | None:
    """``generator`` if given, else one seeded with ``seed``, else None (torch's global
    generator)."""
    if generator is not None:
        if seed is not None:
            raise ValueError("pass either seed or generator, not both")
        return generator
    return None if seed is None else seeded(seed, device)


@contextmanager
def one_thread():
    """One torch thread for the duration (also a decorator). For loops over small
    tensors (exact losses over a few hundred enumerated paths, the manifold runs):
    on a busy 2-core machine two threads made such loops 5 to 12 times slower in wall
    time and in CPU time (the threads spin, waiting for each other)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
