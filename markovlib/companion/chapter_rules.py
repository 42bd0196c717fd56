"""The parameters each chapter takes and their allowed values (``markovlib rerun``'s
help lists them: this module imports nothing heavy)."""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

__all__ = ["Range", "CHAPTER_SEED_LIMIT", "SEED_RULE", "CHAPTER_RULES", "check_range"]


class Range(NamedTuple):
    """Allowed values of a numeric parameter (``optional``: None as well)."""

    # ``low`` or ``high`` may name another parameter of the same call (the CCMC
    # prompt must hold every token: ``prompt_len >= k``)
    low: float | str
    high: float | str
    open_low: bool = False
    open_high: bool = False
    integer: bool = False
    optional: bool = False
    why: str = ""
    where: str = ""  # the range in words, where the numbers say it badly


# A chapter's runs take the seeds seed, seed + 1, ... (at most 2**16 of them), which a
# result store holds below 2**63: a chapter's seed is refused above this, before work.
CHAPTER_SEED_LIMIT = 2**63 - 2**16
SEED_RULE = Range(
    0,
    CHAPTER_SEED_LIMIT,
    open_high=True,
    integer=True,
    where=">= 0 and < 2**63 - 2**16",
    why=" (a chapter's runs take the seeds seed, seed + 1, ..., which a result store "
    "holds below 2**63)",
)
# Allowed values of the chapters' parameters: a _Range or a tuple of choices.
_OPEN01, _CLOSED01 = Range(0.0, 1.0, True, True), Range(0.0, 1.0)
CHAPTER_RULES = {
    "framework": dict(
        p=_CLOSED01,
        q=_CLOSED01,
        k=Range(2, 12, integer=True),
        p_multi=Range(0.0, 1.0, open_low=True),
    ),
    "global_minimum": dict(p=_OPEN01, q=_OPEN01),
    "bad_local_minima": dict(
        p=_OPEN01,
        q=_OPEN01,
        preset=("gpt2", "theory"),
        noise=Range(0.0, math.inf, True, True),
    ),
    "saddles": dict(p=_OPEN01, q=_OPEN01, noise=Range(0.0, math.inf, True, True)),
    "trapped": dict(p=_OPEN01, q=_OPEN01),
    "multi_state": dict(k=Range(2, 12, integer=True), p=Range(0.0, 1.0, True)),
    "depth": dict(p=_OPEN01, q=_OPEN01, order=Range(2, 6, integer=True)),
    "initialisation": dict(p=_OPEN01, q=_OPEN01),
    "incontext": dict(
        k=Range(2, 8, integer=True),
        alpha=Range(0.0, 100.0, open_low=True),
        length=Range(8, 1024, integer=True),
    ),
    "ccmc": dict(
        k=Range(2, 64, integer=True),
        prompt_len=Range(
            "k", 256, integer=True, why=" (section 3's prompt holds every token)"
        ),
        sigma=Range(0, 5, open_low=True),
        beta=Range(0, 10),
        gamma=Range(-20, 20),
        n_traj=Range(10, math.inf, open_high=True, integer=True, optional=True),
        gen_len=Range(10, math.inf, open_high=True, integer=True, optional=True),
    ),
}


def check_range(name: str, value, rule: Range, params: dict) -> None:
    """``value`` of ``name`` within ``rule`` (``params``: the others), or why not."""
    if rule.optional and value is None:
        return
    low, high = (params[b] if isinstance(b, str) else b for b in (rule.low, rule.high))
    kind = "an integer" if rule.integer else "a number"
    ok = (
        isinstance(value, numbers.Integral if rule.integer else numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (low < value if rule.open_low else low <= value)
        and (value < high if rule.open_high else value <= high)
    )
    if not ok:
        lo, hi = ("(" if rule.open_low else "["), (")" if rule.open_high else "]")
        where = rule.where or (
            f">= {low:g}" if high == math.inf else f"in {lo}{low:g}, {high:g}{hi}"
        )
        raise ValueError(f"{name} must be {kind} {where}{rule.why}; got {value!r}")
