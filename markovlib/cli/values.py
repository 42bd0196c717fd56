"""The values the ``markovlib`` command's options take (argparse types): each refuses a
bad value in one line that names what it must be."""

from __future__ import annotations

import argparse

MAX_STEPS = 10_000_000  # a step takes at least a millisecond: more is weeks of work
MAX_LR = 1e6  # larger learning rates overflow float32 in the one-cycle schedule


def probabilities(text: str) -> list[float]:
    """'0.2,0.4' → [0.2, 0.4], each in [0, 1], none empty, none equal to 6 digits."""
    items = [v.strip() for v in text.split(",")]
    if any(not v for v in items):
        raise argparse.ArgumentTypeError(
            f"has an empty item; give comma-separated numbers in [0, 1]; got {text!r}"
        )
    try:
        values = [float(v) for v in items]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated numbers in [0, 1]; got {text!r}"
        ) from None
    if any(not 0 <= v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"must be numbers in [0, 1]; got {text!r}")
    shown = [f"{v:g}" for v in values]
    for i, a in enumerate(shown):
        if a in shown[:i] and values[shown.index(a)] != values[i]:
            raise argparse.ArgumentTypeError(
                f"values {items[shown.index(a)]} and {items[i]} differ "
                "below the printed "
                f"precision (both print as {a}); give distinct values"
            )
    return list(dict.fromkeys(values))


def probability(text: str) -> float:
    """One number in [0, 1]."""
    values = probabilities(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"must be one number in [0, 1]; got {text!r}")
    return values[0]


def argument_type(convert, what: str, accept, *, show_value: bool = False):
    """A type: ``convert(text)`` where ``accept`` holds, else "must be ``what``"."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}; got {text!r}") from None
        if not accept(value):
            got = value if show_value else repr(text)
            raise argparse.ArgumentTypeError(f"must be {what}; got {got}")
        return value

    return parse


def int_at_least(low: int):
    """A type: an integer >= ``low``."""
    return argument_type(
        int, f"an integer >= {low}", lambda v: v >= low, show_value=True
    )


positive_int, nonnegative_int = int_at_least(1), int_at_least(0)
steps = argument_type(
    int, f"an integer >= 1 and <= {MAX_STEPS}", lambda v: 1 <= v <= MAX_STEPS,
    show_value=True,
)  # fmt: skip
# a folder named on the command line: an empty name would mean the current folder
folder = argument_type(str, "a folder path, not empty", lambda v: v.strip() != "")
nonnegative_number = argument_type(
    float, "a number >= 0", lambda v: 0 <= v < float("inf")
)
positive_float = argument_type(float, "a number > 0", lambda v: v > 0)  # inf allowed
learning_rate = argument_type(
    float, f"a number > 0 and <= {MAX_LR:g}", lambda v: 0 < v <= MAX_LR, show_value=True
)


def sample(value: str):
    """``verify --sample``: a count of runs, or 'all'."""
    return "all" if value == "all" else nonnegative_int(value)


def seed(text: str) -> int:
    """A seed a result store holds (an integer >= 0, < 2**63)."""
    from ..runs.store import SEED_LIMIT

    what, limit = "an integer >= 0 and < 2**63", SEED_LIMIT
    return argument_type(int, what, lambda v: 0 <= v < limit, show_value=True)(text)


def chapter_seed(text: str) -> int:
    """A seed of ``book`` and ``rerun``, by the chapters' own rule."""
    from ..companion.chapter_rules import CHAPTER_SEED_LIMIT, SEED_RULE

    what, limit = f"an integer {SEED_RULE.where}{SEED_RULE.why}", CHAPTER_SEED_LIMIT
    return argument_type(int, what, lambda v: 0 <= v < limit, show_value=True)(text)


def group_prefixes(text: str) -> list[str]:
    """``--only``: non-empty comma-separated prefixes of group names."""
    prefixes = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(prefixes):
        raise argparse.ArgumentTypeError(
            f"must be comma-separated group name prefixes, none empty; got {text!r}"
        )
    return prefixes
