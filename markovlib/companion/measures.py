"""Each trained claim's measurement, as a function of runs: the scorecard, the CLI and
the chapters call these, so a verdict is computed in one place.

A run enters as a :class:`~markovlib.companion.records.RunRecord` (its chain, learnt
kernel, test history and spec), built by :mod:`markovlib.companion.records`. Every
count of runs uses the one rule of :mod:`markovlib.analysis` (the share of the gap
H(π) − H_rate a run has learnt), never a tolerance in nats.

What a page states beside these claims (a chapter's own numbers, checks and sentences)
is in :mod:`markovlib.companion.chapters`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import theory
from .._checks import one_thread
from ..analysis import (
    AT_UNIGRAM,
    AT_UNIGRAM_BELOW,
    CLAIM_SHARE,
    ESCAPED,
    ESCAPED_ABOVE,
    cell_shares,
    share_interval,
)
from ..noise import banded_survival, eval_tokens
from .records import RunRecord

__all__ = [
    "grid_shares",
    "Measure",
    "classes",
    "trap_count",
    "survival_of",
    "at_step",
    "cell_classes",
    "above_line",
    "trapped_text",
    "by_seed",
    "fig3a",
    "float32_plateau",
    "precision_traps",
    "trap_models",
    "escape_claim",
    "untied_escape",
    "appendix_d_property",
    "appendix_d_control",
    "fig3c",
    "fig4",
    "fig4_float32",
    "fig1_depths",
    "depth_factors",
    "trapped_starts",
    "cell_trap_table",
    "fig4_cells",
    "fig5_halves",
    "fig5_figure",
    "loss_share",
    "plateau_steps",
    "plateau_then_drop",
    "FIG5_FIGURE_SHARE",
    "below_line",
    "fig3c_untied",
    "bias_prediction",
    "bad_minimum",
    "higher_order",
    "masking",
]


def grid_shares(records: Sequence[RunRecord], ps, qs) -> np.ndarray:
    """Mean share of the gap per binary chain (p, q) of a grid of runs, rows q and
    columns p (:func:`markovlib.analysis.cell_shares`)."""

    cells: dict = {}
    for r in records:
        cells.setdefault((r.spec.chain["p"], r.spec.chain["q"]), []).append(r.share)
    return cell_shares(cells, ps, qs)


@dataclass(frozen=True)
class Measure:
    """One claim measured: the value as printed, whether the claim's check held, and
    for trained claims the runs judged and how many of them are at H(π)."""

    value: str
    ok: bool
    applicable: bool = True
    runs: int | None = None
    trapped: int | None = None
    groups: tuple = ()
    details: dict = field(default_factory=dict)
    # the runs that behave as the claim says, per part of the claim: (part, k, n);
    # the verdict rule (analysis.claim_outcome) judges each part, the worst decides
    counts: tuple = ()


def _n(k: int, n: int, what: str = "runs") -> str:
    """ "k of n runs" ("k of 1 run")."""
    return f"{k} of {n} {what[:-1] if n == 1 and what.endswith('s') else what}"


def classes(records: Sequence[RunRecord]) -> list[str | None]:
    """The final class of each run by the rule."""
    return [r.cls for r in records]


def trap_count(records: Sequence[RunRecord]) -> tuple[int, int]:
    """(runs, runs at H(π) at the end) by the rule."""
    cls = classes(records)
    return len(cls), sum(c == AT_UNIGRAM for c in cls)


def survival_of(records: Sequence[RunRecord]):
    """:func:`~markovlib.noise.banded_survival` of runs of one chain and one setting:
    the noise band of their test losses from their evaluations' size."""
    tokens = eval_tokens(records[0].spec.train)
    return banded_survival(records[0].chain, [r.history for r in records], tokens)


def at_step(records: Sequence[RunRecord], step: int) -> int:
    """Runs still at H(π) at ``step`` (their loss share, :func:`survival_of`)."""
    s = survival_of(records)
    return round(s.at(step) * s.n)


def fig3a(records: Sequence[RunRecord], groups=()) -> Measure:
    """Fig 3(a): tied runs on a chain with p + q > 1 stay at H(π): the claim holds when
    at least :data:`~markovlib.analysis.CLAIM_SHARE` of them are at H(π) at the end."""
    n, t = trap_count(records)
    steps = records[0].steps
    return Measure(
        f"{_n(t, n)} at H(π) after {steps} iterations",
        t >= CLAIM_SHARE * n,
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=(("at H(π)", t, n),),
    )


def float32_plateau(
    budget: Sequence[RunRecord], longer: Sequence[RunRecord], groups=()
) -> Measure:
    """This book: in float32 the trap is a plateau that training leaves: fewer than
    half of the tied runs are at H(π) at the authors' budget, and at 1000 iterations."""
    (n1, t1), (n2, t2) = trap_count(budget), trap_count(longer)
    s = survival_of(longer)
    med = "–" if s.median_escape is None else f"{s.median_escape:.0f}"
    return Measure(
        f"{_n(t1, n1)} at H(π) after {budget[0].steps} iterations; {_n(t2, n2)} after "
        f"{longer[0].steps} (median escape step {med})",
        t1 < CLAIM_SHARE * n1 and t2 < CLAIM_SHARE * n2,
        runs=n1 + n2,
        trapped=t1 + t2,
        groups=tuple(groups),
    )


def _seeds_at(records: Sequence[RunRecord]) -> set[int]:
    return {r.spec.seed for r in records if r.cls == AT_UNIGRAM}


def precision_traps(
    fp16: Sequence[RunRecord], fp32: Sequence[RunRecord], groups=()
) -> Measure:
    """This book: fp16 without loss scaling keeps tied runs at H(π) that float32 (same
    seeds, same batches) frees."""
    (n16, t16), (n32, t32) = trap_count(fp16), trap_count(fp32)
    only16 = len(_seeds_at(fp16) - _seeds_at(fp32))
    return Measure(
        f"fp16 {_n(t16, n16)}, float32 {_n(t32, n32)} at H(π) after "
        f"{fp16[0].steps} iterations ({only16} seeds at H(π) in fp16 only)",
        t16 > t32,
        runs=n16 + n32,
        trapped=t16 + t32,
        groups=tuple(groups),
        details={"fp16": t16, "fp32": t32, "fp16_only": only16},
    )


def trap_models(
    theory: Sequence[RunRecord], gpt2: Sequence[RunRecord], groups=()
) -> Measure:
    """This book: the theory model (no layer norm) is trapped more often than GPT-2."""
    (nt, tt), (ng, tg) = trap_count(theory), trap_count(gpt2)
    return Measure(
        f"theory {_n(tt, nt)}, GPT-2 {_n(tg, ng)} at H(π) after "
        f"{theory[0].steps} iterations",
        tt > tg,
        runs=nt + ng,
        trapped=tt + tg,
        groups=tuple(groups),
    )


def escape_claim(records: Sequence[RunRecord], groups=()) -> Measure:
    """Runs that should learn the chain (untied, p + q < 1): the claim holds when at
    least :data:`~markovlib.analysis.CLAIM_SHARE` of them escaped."""
    cls = classes(records)
    n, e, t = (
        len(cls),
        sum(c == ESCAPED for c in cls),
        sum(c == AT_UNIGRAM for c in cls),
    )
    return Measure(
        f"{_n(e, n)} escaped (share of the gap > {ESCAPED_ABOVE:g})",
        e >= CLAIM_SHARE * n,
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=(("escaped", e, n),),
    )


def untied_escape(records: Sequence[RunRecord], groups=()) -> Measure:
    """Untied runs escape θ_π: :func:`escape_claim` of the runs above p + q = 1."""
    return escape_claim(above_line(records), groups)


# Fig 3(d) per position (rule written 2026-11-27, before it was computed): a run
# predicts along a path when at least ALONG_SHARE of the positions after a zero of one
# test path (FIG3D_SEED, the run's length) are within the fig3c tolerance
ALONG_SHARE, FIG3D_SEED = 0.9, 31337


@torch.no_grad()
def along_path(model, record: RunRecord) -> np.ndarray:
    """P(x_{n+1} = 1 | x_1^n) that ``model`` predicts at the positions after a zero of
    one test path of its run's chain and length (seed :data:`FIG3D_SEED`)."""
    x = record.chain.sample(1, record.spec.train.seq_len, seed=FIG3D_SEED)
    model.eval()
    first = next(model.parameters(), None) if hasattr(model, "parameters") else None
    on = x if first is None else x.to(first.device)  # a model on the GPU
    probs = model.probabilities(on)[0, :, 1].double().cpu().numpy()
    return probs[np.flatnonzero(x[0].numpy() == 0)]


def fig3c(trapped: Sequence[RunRecord], groups=(), load=None) -> Measure:
    """Fig 3(c, d): a run at θ_π predicts π₁ after a zero, an escaped one p: each
    within :data:`~markovlib.analysis.AT_UNIGRAM_BELOW` of the distance p − π₁, by
    its learnt kernel; with ``load`` (record -> model) also position by position along
    one test path (:func:`along_path`, :data:`ALONG_SHARE`), in at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the runs of each kind."""
    stuck = [r for r in trapped if r.cls == AT_UNIGRAM]
    free = [r for r in trapped if r.cls == ESCAPED]
    chain = trapped[0].chain
    p, pi1 = float(chain.P[0, 1]), float(chain.stationary()[1])
    if not stuck or not free:
        return Measure(
            f"{_n(len(stuck), len(trapped))} at θ_π, {len(free)} escaped: nothing to "
            "compare",
            False,
            runs=len(trapped),
            trapped=len(stuck),
            groups=tuple(groups),
            counts=tuple(  # the kind with no run: a part of 0 runs, not tested
                (f"{kind} after a zero", 0, 0)
                for kind, rs in (
                    ("at θ_π predict π₁", stuck),
                    ("escaped predict p", free),
                )
                if not rs
            ),
        )
    s = min(stuck, key=lambda r: r.share)
    f = max(free, key=lambda r: r.share)
    a, b = float(s.kernel[0, 1]), float(f.kernel[0, 1])
    tol = AT_UNIGRAM_BELOW * abs(p - pi1)
    kinds = ((stuck, pi1, "at θ_π predict π₁"), (free, p, "escaped predict p"))
    counts = [  # every run of each kind, not only the two the figure shows
        (
            f"{text} after a zero",
            sum(abs(float(r.kernel[0, 1]) - want) < tol for r in rs),
            len(rs),
        )
        for rs, want, text in kinds
    ]
    ok = abs(a - pi1) < tol and abs(b - p) < tol
    if load is not None:
        for rs, want, text in kinds:
            k = sum(
                bool(
                    np.mean(np.abs(along_path(load(r), r) - want) < tol) >= ALONG_SHARE
                )
                for r in rs
            )
            counts.append((f"{text} along a path", k, len(rs)))
            ok = ok and k >= CLAIM_SHARE * len(rs)
    return Measure(
        f"P(1|0) {a:.3f} at θ_π (π₁ = {pi1:.3f}), {b:.3f} escaped (p = {p:g})",
        ok,
        runs=len(trapped),
        trapped=len(stuck),
        groups=tuple(groups),
        details={"stuck_seed": s.spec.seed, "free_seed": f.spec.seed},
        counts=tuple(counts),
    )


def cell_classes(records: Sequence[RunRecord]) -> dict[tuple[float, float], str]:
    """Per binary chain (p, q): *at H(π)* when at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of its runs are, else *escaped* when as
    many escaped, else *in between*; cells on p + q = 1 are left out (no gap)."""
    cells: dict = {}
    for r in records:
        cells.setdefault((r.spec.chain["p"], r.spec.chain["q"]), []).append(r.cls)
    out = {}
    for cell, cls in sorted(cells.items()):
        if any(c is None for c in cls):
            continue
        if sum(c == AT_UNIGRAM for c in cls) >= CLAIM_SHARE * len(cls):
            out[cell] = AT_UNIGRAM
        elif sum(c == ESCAPED for c in cls) >= CLAIM_SHARE * len(cls):
            out[cell] = ESCAPED
        else:
            out[cell] = "in between"
    return out


def by_seed(records: Sequence[RunRecord]) -> dict[int, tuple[int, int]]:
    """(runs, runs at H(π)) per seed: in a grid every cell trains seed i from the same
    initialisation, so a seed's runs across cells share their starting weights."""
    out: dict[int, list] = {}
    for r in records:
        out.setdefault(int(r.spec.seed), []).append(r)
    return {s: trap_count(rs) for s, rs in sorted(out.items())}


def _above(cells: dict) -> dict:
    return {c: v for c, v in cells.items() if c[0] + c[1] > 1}


def above_line(records: Sequence[RunRecord]) -> list[RunRecord]:
    """The runs of binary chains with p + q > 1 (where Thm 2's local minimum exists)."""
    return [r for r in records if r.spec.chain["p"] + r.spec.chain["q"] > 1]


def trapped_text(records: Sequence[RunRecord]) -> str:
    """ "k of n runs" at H(π) by the rule, as the chapters print it."""
    n, t = trap_count(records)
    return f"{t} of {n} runs"


def _cells_text(cells) -> str:
    return ", ".join(f"({p:g}, {q:g})" for p, q in cells) or "none"


def fig4(tied: Sequence[RunRecord], untied: Sequence[RunRecord], groups=()) -> Measure:
    """Fig 4: tied cells above p + q = 1 collapse to the marginal (at H(π)), untied
    ones do not: at least half of the tied cells above the line are at H(π), fewer than
    half of the untied ones."""
    ct, cu = _above(cell_classes(tied)), _above(cell_classes(untied))
    tt = [c for c, v in ct.items() if v == AT_UNIGRAM]
    tu = [c for c, v in cu.items() if v == AT_UNIGRAM]
    n, t = trap_count([*tied, *untied])
    rt, ru = above_line(tied), above_line(untied)
    return Measure(
        f"tied: {_n(len(tt), len(ct), 'cells')} above the line at H(π) "
        f"({_cells_text(tt)}), {trapped_text(rt)}; untied: "
        f"{_n(len(tu), len(cu), 'cells')}, {trapped_text(ru)}",
        len(tt) >= CLAIM_SHARE * len(ct) and len(tu) < CLAIM_SHARE * len(cu),
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=(
            ("tied above the line at H(π)", trap_count(rt)[1], len(rt)),
            ("untied above the line not at H(π)", len(ru) - trap_count(ru)[1], len(ru)),
        ),
        details={
            "tied_cells": tt,
            "untied_cells": tu,
            "tied_below": trapped_text(
                [r for r in tied if r.spec.chain["p"] + r.spec.chain["q"] < 1]
            ),
        },
    )


def fig4_float32(
    tied: Sequence[RunRecord], untied: Sequence[RunRecord], groups=()
) -> Measure:
    """This book: in float32 after 1000 iterations the tied cells above the line leave
    H(π) (fewer than half of them at H(π)); the cells still there are named."""
    m = fig4(tied, untied, groups)
    n, k = trap_count(above_line(tied))
    ct = _above(cell_classes(tied))
    tt = m.details["tied_cells"]
    return Measure(
        f"tied: {_n(len(tt), len(ct), 'cells')} above the line at H(π) "
        f"({_cells_text(tt)}); untied: "
        f"{_n(len(m.details['untied_cells']), len(ct), 'cells')}",
        len(tt) < CLAIM_SHARE * len(ct),
        runs=m.runs,
        trapped=m.trapped,
        groups=m.groups,
        details=m.details,
        counts=(("tied above the line left H(π)", n - k, n),),
    )


def higher_order(by_depth: dict[int, Sequence[RunRecord]], groups=()) -> Measure:
    """ICLR Sec. 4.4: deeper models learn a second-order chain given enough iterations:
    at least half of the runs of each depth ≥ 2 escaped (share of the gap from the
    tail of the test loss)."""
    parts, ok, deep = [], True, []
    for L, rs in sorted(by_depth.items()):
        esc = sum(r.cls == ESCAPED for r in rs)
        shares = " ".join(f"{r.share:.2f}" for r in rs)
        parts.append(f"depth {L}: {_n(esc, len(rs))} escaped (shares {shares})")
        if L >= 2:
            ok &= esc >= CLAIM_SHARE * len(rs)
            deep += rs
    n, t = trap_count([r for rs in by_depth.values() for r in rs])
    e = sum(r.cls == ESCAPED for r in deep)
    return Measure(
        "; ".join(parts),
        ok,
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=(("depth ≥ 2 escaped", e, len(deep)),),
    )


def masking(
    window: Sequence[RunRecord], full: Sequence[RunRecord], groups=()
) -> Measure:
    """Poster: masking helps on a lag-2 chain, judged by k of n: at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the one-layer runs with the matched
    window escaped, and as many learnt more of the gap than the full-attention run of
    the same seed."""
    by_seed = {r.spec.seed: r.share for r in full}
    escaped = sum(r.cls == ESCAPED for r in window)
    paired = [r for r in window if r.spec.seed in by_seed]
    above = sum(r.share > by_seed[r.spec.seed] for r in paired)
    w = float(np.mean([r.share for r in window]))
    f = float(np.mean([r.share for r in full]))
    n, t = trap_count([*window, *full])
    return Measure(
        f"window 1: {_n(escaped, len(window))} escaped, {_n(above, len(paired))} above "
        f"full attention with the same seed (mean shares of the gap {w:.3f} and "
        f"{f:.3f})",
        escaped >= CLAIM_SHARE * len(window) and above >= CLAIM_SHARE * len(paired),
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=tuple(
            part
            for part in (
                ("window 1 escaped", escaped, len(window)),
                ("above full attention", above, len(paired)),
            )
            if part[2]  # a part with no runs has nothing to count
        ),
    )


# ------------------------------------------ the figures at the authors' settings
# These rules were written before the groups they judge were trained (the groups of
# the paper edition at the authors' settings): Fig 1 per depth and Sec. 4.4's
# "regardless of these factors", Fig 4 from independent runs per cell, both halves of
# Sec. 4.3 (Fig 5).


def fig1_depths(by_depth: dict[int, Sequence[RunRecord]], groups=()) -> Measure:
    """Fig 1, per depth: the single layer stays at H(π) (at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of its runs at H(π)) and every depth ≥ 2
    reaches H_rate (at least that share of its runs escaped)."""
    parts, ok, hits = [], True, {1: [0, 0], 2: [0, 0]}
    for L, rs in sorted(by_depth.items()):
        side = AT_UNIGRAM if L == 1 else ESCAPED
        k = sum(r.cls == side for r in rs)
        parts.append(
            f"depth {L}: {_n(k, len(rs))} {'at H(π)' if L == 1 else 'escaped'}"
        )
        ok &= k >= CLAIM_SHARE * len(rs)
        hits[min(L, 2)][0] += k
        hits[min(L, 2)][1] += len(rs)
    n, t = trap_count([r for rs in by_depth.values() for r in rs])
    counts = (("depth 1 at H(π)", *hits[1]), ("depth ≥ 2 escaped", *hits[2]))
    return Measure(
        "; ".join(parts),
        ok,
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=tuple(c for c in counts if c[2]),
    )


def depth_factors(
    untied: Sequence[RunRecord], mirror: Sequence[RunRecord], groups=()
) -> Measure:
    """Sec. 4.4: depth ≥ 2 reaches H_rate "regardless of these factors" (weight
    tying, switching): at least :data:`~markovlib.analysis.CLAIM_SHARE` of the untied
    depth-2 runs and of the tied depth-2 runs on the mirror chain (1 − p, 1 − q)
    escaped."""
    eu, em = (sum(r.cls == ESCAPED for r in rs) for rs in (untied, mirror))
    c = mirror[0].spec.chain
    n, t = trap_count([*untied, *mirror])
    return Measure(
        f"depth 2 untied: {_n(eu, len(untied))} escaped; depth 2 tied on "
        f"({c['p']:g}, {c['q']:g}): {_n(em, len(mirror))} escaped",
        eu >= CLAIM_SHARE * len(untied) and em >= CLAIM_SHARE * len(mirror),
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=(("escaped", eu + em, len(untied) + len(mirror)),),
    )


PLATEAU_STEPS = 50  # Sec. 4.4's plateau: at least this many iterations at H(π)


def plateau_steps(record: RunRecord) -> int | None:
    """Iterations a run sat at H(π) before leaving it: from its first evaluation within
    :data:`~markovlib.analysis.AT_UNIGRAM_BELOW` of the gap of H(π) to its first
    evaluation above that (None: it never came within it)."""
    h = record.history
    unigram, rate = record.chain.unigram_entropy(), record.chain.entropy_rate()
    share = (unigram - h["test_loss"].to_numpy()) / (unigram - rate)
    steps = h["step"].to_numpy()
    near = np.flatnonzero(np.abs(share) < AT_UNIGRAM_BELOW)
    if not len(near):
        return None
    left = np.flatnonzero((share >= AT_UNIGRAM_BELOW) & (steps > steps[near[0]]))
    end = steps[left[0]] if len(left) else steps[-1]
    return int(end - steps[near[0]])


def plateau_then_drop(records: Sequence[RunRecord], groups=()) -> Measure:
    """Sec. 4.4: the deeper models "first plateau" at H(π) and then reach H_rate: of
    the runs that escaped, at least :data:`~markovlib.analysis.CLAIM_SHARE` sat
    :data:`PLATEAU_STEPS` iterations or more at H(π) first (:func:`plateau_steps`)."""
    free = [r for r in records if r.cls == ESCAPED]
    lengths = [plateau_steps(r) or 0 for r in free]
    k = sum(n >= PLATEAU_STEPS for n in lengths)
    n, t = trap_count(records)
    median = f"{np.median(lengths):.0f}" if lengths else "—"
    return Measure(
        f"{_n(k, len(free))} that escaped sat {PLATEAU_STEPS} iterations or more at "
        f"H(π) first (median {median} iterations; {len(free)} of {n} runs escaped)",
        bool(free) and k >= CLAIM_SHARE * len(free),
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=((f"at H(π) for {PLATEAU_STEPS}+ iterations, then down", k, len(free)),),
    )


def trapped_starts(records: Sequence[RunRecord], groups=()) -> Measure:
    """Introduction: "deeper models converge regardless of initialization": at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the depth-2 runs started from the seeds
    that trapped the single layer escaped. (Rule written on 2026-11-27, before these
    runs were trained.)"""
    e = sum(r.cls == ESCAPED for r in records)
    n, t = trap_count(records)
    return Measure(
        f"depth 2 from the {n} seeds that trapped depth 1: {_n(e, n)} escaped, "
        f"{t} at H(π)",
        e >= CLAIM_SHARE * n,
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=(("escaped", e, n),),
    )


def cell_trap_table(records: Sequence[RunRecord]) -> pd.DataFrame:
    """Per binary chain (p, q): runs, runs at H(π), their share and its 95 %
    interval (:func:`~markovlib.analysis.share_interval`)."""
    cells: dict = {}
    for r in records:
        cells.setdefault((r.spec.chain["p"], r.spec.chain["q"]), []).append(r)
    rows = []
    for (p, q), rs in sorted(cells.items()):
        n, t = trap_count(rs)
        low, high = share_interval(t, n)
        rows.append(dict(p=p, q=q, runs=n, trapped=t, share=t / n, low=low, high=high))
    return pd.DataFrame(
        rows, columns=["p", "q", "runs", "trapped", "share", "low", "high"]
    )


def fig4_cells(
    cells: Sequence[RunRecord],
    tied: Sequence[RunRecord],
    untied: Sequence[RunRecord],
    groups=(),
) -> Measure:
    """Fig 4 from independent runs per cell: at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the tied cells above p + q = 1 have at
    least that share of their runs at H(π) (``cells``: independently initialised runs
    per tied cell above the line), and no run of an untied cell nor of a tied cell
    below the line is at H(π) (``tied``, ``untied``: the grids; cells on the line,
    without a gap, are left out)."""
    table = cell_trap_table(above_line(cells))
    held = table[table["share"] >= CLAIM_SHARE]
    below = [r for r in tied if r.spec.chain["p"] + r.spec.chain["q"] < 1 - 1e-9]
    untied = [
        r for r in untied if abs(r.spec.chain["p"] + r.spec.chain["q"] - 1) > 1e-9
    ]
    (nu, tu), (nb, tb) = trap_count(untied), trap_count(below)
    n, t = trap_count([*cells, *untied, *below])
    return Measure(
        f"tied above the line: {_n(len(held), len(table), 'cells')} with at least "
        f"half of their runs at H(π) ({trapped_text(above_line(cells))}); untied: "
        f"{_n(tu, nu)} at H(π); tied below the line: {_n(tb, nb)}",
        len(table) > 0 and len(held) >= CLAIM_SHARE * len(table) and tu == tb == 0,
        runs=n,
        trapped=t,
        groups=tuple(groups),
        details={"table": table},
        counts=(
            ("tied above the line at H(π)", *trap_count(above_line(cells))[::-1]),
            ("untied, tied below the line: not at H(π)", nu - tu + nb - tb, nu + nb),
        ),
    )


def _on_side(records: Sequence[RunRecord], ps, want: str) -> tuple[int, int, bool]:
    """(runs on the side ``want`` at the p of ``ps``, runs, whether at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the runs of every p are)."""
    k = n = 0
    ok = True
    for p in ps:
        cell = [r for r in records if r.spec.chain["p"] == p]
        hit = sum(r.cls == want for r in cell)
        ok &= hit >= CLAIM_SHARE * len(cell)
        k, n = k + hit, n + len(cell)
    return k, n, ok


def fig5_halves(
    tied: Sequence[RunRecord], untied: Sequence[RunRecord], p_max=0.6, groups=()
) -> Measure:
    """Sec. 4.3 (Fig 5), both halves: at every p ≤ ``p_max`` at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the tied and of the untied runs
    escaped; at every p above it at least that share of the tied runs are at H(π)
    ("stuck in local minima (unigram)") and of the untied runs escaped."""
    ps = sorted({r.spec.chain["p"] for r in [*tied, *untied]})
    low = [p for p in ps if p <= p_max + 1e-12]
    high = [p for p in ps if p > p_max + 1e-12]
    ok, parts, halves = True, [], []
    for side, tied_want in ((low, ESCAPED), (high, AT_UNIGRAM)):
        if not side:
            continue
        texts, hit, runs = [], 0, 0
        for label, rs, want in (
            ("tied", tied, tied_want),
            ("untied", untied, ESCAPED),
        ):
            k, n, held = _on_side(rs, side, want)
            ok &= held
            what = "at H(π)" if want == AT_UNIGRAM else "escaped"
            texts.append(f"{label} {_n(k, n)} {what}")
            hit, runs = hit + k, runs + n
        where = f"p = {', '.join(f'{p:g}' for p in side)}"
        parts.append(f"{where}: {', '.join(texts)}")
        halves.append((f"{where}, on the claimed side", hit, runs))
    n, t = trap_count([*tied, *untied])
    return Measure(
        "; ".join(parts),
        ok,
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=tuple(halves),
    )


# Where the authors' own Fig 5 curves end: their figures/loss09.pdf (Markov-Simple, read
# as vector data) draws the mean of the 3 tied runs at p = 0.9 (a moving average of 10
# evaluations) up to iteration 4000, the figure's right edge (plt.xlim((0, 4000)) in
# their figures/loss-states.py; the runs are 5000 iterations), ending at 1.6006 nats:
# 0.24 of the gap H(π) − H_rate = ln 5 − 1.5728 covered, under a dotted line drawn at
# 1.601. The text calls these runs "stuck in local minima (unigram)".
FIG5_FIGURE_P, FIG5_FIGURE_STEP, FIG5_FIGURE_SHARE = 0.9, 4000, 0.24
FIG5_FIGURE_WITHIN = 0.1  # a run "ends where the figure's curves end": |share - 0.24|


def loss_share(record: RunRecord, step: int) -> float:
    """The share of the gap H(π) − H_rate covered by ``record``'s test loss at its last
    evaluation up to ``step``."""
    h = record.history[record.history["step"] <= step]
    unigram, rate = record.chain.unigram_entropy(), record.chain.entropy_rate()
    return float((unigram - h["test_loss"].iloc[-1]) / (unigram - rate))


def fig5_figure(tied: Sequence[RunRecord], groups=()) -> Measure:
    """Fig 5 as drawn: at least :data:`~markovlib.analysis.CLAIM_SHARE` of the tied runs
    at p = :data:`FIG5_FIGURE_P` have covered, at the figure's right edge (iteration
    :data:`FIG5_FIGURE_STEP`), a share of the gap within :data:`FIG5_FIGURE_WITHIN` of
    :data:`FIG5_FIGURE_SHARE`, where the authors' own curves end."""
    runs = [r for r in tied if abs(r.spec.chain["p"] - FIG5_FIGURE_P) < 1e-12]
    shares = [loss_share(r, FIG5_FIGURE_STEP) for r in runs]
    k = sum(abs(x - FIG5_FIGURE_SHARE) <= FIG5_FIGURE_WITHIN for x in shares)
    listed = ", ".join(f"{x:.2f}" for x in sorted(shares))
    n, t = trap_count(runs)
    return Measure(
        f"tied, p = {FIG5_FIGURE_P:g}, iteration {FIG5_FIGURE_STEP}: shares of the gap "
        f"{listed} (the authors' curves: {FIG5_FIGURE_SHARE:g}); {_n(k, len(runs))} "
        f"within {FIG5_FIGURE_WITHIN:g} of it",
        k >= CLAIM_SHARE * len(runs) and bool(runs),
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=(("where the authors' curves end", k, len(runs)),),
    )


def below_line(
    tied: Sequence[RunRecord], untied: Sequence[RunRecord], groups=()
) -> Measure:
    """Sec. 1 and 4.2: on chains with p + q < 1 the runs learn the chain "irrespective
    of the weight tying": for each tying, at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the grid's cells below the line are
    escaped (:func:`cell_classes`)."""
    parts, ok, runs, counts = [], True, [], []
    for label, rs in (("tied", tied), ("untied", untied)):
        rs = [r for r in rs if r.spec.chain["p"] + r.spec.chain["q"] < 1 - 1e-9]
        cells = cell_classes(rs)
        e = sum(v == ESCAPED for v in cells.values())
        k = sum(r.cls == ESCAPED for r in rs)
        parts.append(
            f"{label}: {_n(e, len(cells), 'cells')} escaped ({_n(k, len(rs))})"
        )
        ok &= e >= CLAIM_SHARE * len(cells)
        runs += rs
        counts.append((f"{label} escaped", k, len(rs)))
    n, t = trap_count(runs)
    return Measure(
        "; ".join(parts),
        ok,
        runs=n,
        trapped=t,
        groups=tuple(groups),
        counts=tuple(counts),
    )


def fig3c_untied(records: Sequence[RunRecord], p: float, q: float, groups=()):
    """Fig 3(c)'s untied curve: untied runs on (p, q), p + q > 1, predict p after a
    zero: at least :data:`~markovlib.analysis.CLAIM_SHARE` of them have a learnt
    P(1|0) within :data:`~markovlib.analysis.AT_UNIGRAM_BELOW` of the distance
    p − π₁ from p."""
    rs = [r for r in records if (r.spec.chain["p"], r.spec.chain["q"]) == (p, q)]
    pi1 = float(rs[0].chain.stationary()[1])
    tol = AT_UNIGRAM_BELOW * abs(p - pi1)
    got = [float(r.kernel[0, 1]) for r in rs]
    k = sum(abs(g - p) < tol for g in got)
    return Measure(
        f"untied P(1|0) {' '.join(f'{g:.3f}' for g in got)} (p = {p:g}, π₁ = "
        f"{pi1:.3f}): {_n(k, len(rs))} within {tol:.3g} of p",
        k >= CLAIM_SHARE * len(rs),
        runs=len(rs),
        trapped=trap_count(rs)[1],
        groups=tuple(groups),
        counts=(("predict p after a zero", k, len(rs)),),
    )


def bias_prediction(model) -> float:
    """P(x_{n+1} = 1) that the head's bias alone gives (softmax of b): Thm 2's
    f = σ(b) when the output ignores the input."""
    return float(torch.softmax(model.head.bias.detach().double(), -1)[1])


def bad_minimum(records: Sequence[RunRecord], load, groups=()) -> Measure:
    """Sec. 4.1: at θ_π "the output ignores the input", f = σ(b) = π₁, in two parts on
    the runs at H(π) among ``records``: f = π₁ whatever the input (its learnt kernel's
    P(1|0) and P(1|1) both within :data:`~markovlib.analysis.AT_UNIGRAM_BELOW` of the
    distance p − π₁ from π₁), and f = σ(b) (the head's bias alone,
    :func:`bias_prediction` of ``load(record)``, within the same distance). Printed
    beside: the embedding gap ‖e₁ − e₀‖ (a = e = 0 at the theorem's θ_π)."""
    stuck = [r for r in records if r.cls == AT_UNIGRAM]
    chain = records[0].chain
    p, pi1 = float(chain.P[0, 1]), float(chain.stationary()[1])
    tol = AT_UNIGRAM_BELOW * abs(p - pi1)
    after0 = [float(r.kernel[0, 1]) for r in stuck]
    after1 = [float(r.kernel[1, 1]) for r in stuck]
    k = sum(abs(a - pi1) < tol and abs(b - pi1) < tol for a, b in zip(after0, after1))
    models = [load(r) for r in stuck]
    bias = [bias_prediction(m) for m in models]
    kb = sum(abs(b - pi1) < tol for b in bias)  # the bias alone makes the prediction
    e = [float((m.wte.weight[1] - m.wte.weight[0]).detach().norm()) for m in models]
    value = (
        f"f after a 0 and after a 1, medians {np.median(after0):.3f} and "
        f"{np.median(after1):.3f} (π₁ = {pi1:.3f}): {_n(k, len(stuck))} at H(π) "
        f"within {tol:.3g} of π₁ after both; the head's bias alone, σ(b), within it "
        f"in {_n(kb, len(stuck))} (median {np.median(bias):.3f}); ‖e₁ − e₀‖ median "
        f"{np.median(e):.3f}"
        if stuck
        else "no run at H(π)"
    )
    parts = (
        ("f = π₁ whatever the input", k, len(stuck)),
        ("f = σ(b), the bias alone", kb, len(stuck)),
    )
    return Measure(
        value,
        bool(stuck) and all(c >= CLAIM_SHARE * n for _, c, n in parts),
        runs=len(records),
        trapped=len(stuck),
        groups=tuple(groups),
        counts=parts,  # none at H(π): parts of 0 runs, not tested
    )


# App. D: what the paper says of the learnt weights (p + q < 1)
NEAR_ZERO = 0.1  # a ratio "≈ 0" (attention's share, positional spread) is below 0.1
NEAR_RANK_ONE = 0.1  # a matrix is "near rank one" when s_2 / s_1 < 0.1
APPD_MATRICES = ("ff.W_1.weight", "ff.W_2.weight")  # the matrices App. D names


# App. D's properties, each judged in the parts the paper states it in
APPD_PARTS = {
    "attention": ("the paper's ratio ‖attn‖/‖x+attn‖", "removing attention"),
    "positions": ("p_n constant in n",),
    "rank": ("W₁, W₂ (App. D)", "every weight matrix (Sec. 3.1)"),
    "formula": ("the formula's predictions p and 1 − q",),
    "direction": ("e, p_n, W₁, W₂ along one v",),
}
# "along v": |cos| with v at least ALIGNED (within 26°); rule written 2026-11-27,
# after App. D's runs were shipped and before their cosines were computed
ALIGNED = 0.9


def aligned(direction: dict) -> bool:
    """App. D's one direction v (:func:`markovlib.theory.shared_direction`): e, the
    mean p_n (unless below NEAR_ZERO × ‖e‖: 0 · v), W₂'s column and W₁'s and W₂'s
    hidden directions within ALIGNED of v (and w)."""
    return _smallest_cos(direction) >= ALIGNED


def _appd_parts(d: dict, record: RunRecord) -> dict[str, bool]:
    """App. D's parts (:data:`APPD_PARTS`) for one learnt model (``d``:
    :func:`markovlib.theory.appendix_d`), each relative to what it could be."""
    chain = record.chain
    effect = abs(1 - chain.P[0, 0] - chain.P[1, 1])
    named = max(v for k, v in d["rank_ratio"].items() if k.endswith(APPD_MATRICES))
    formula = np.asarray(d["formula_kernel"])[:, 1]  # P(1 | 0), P(1 | 1)
    return dict(
        zip(
            (part for parts in APPD_PARTS.values() for part in parts),
            (
                d["ratio_mean"] < NEAR_ZERO,
                d["ablation"] < NEAR_ZERO * effect,
                d["spread"] < NEAR_ZERO,
                named < NEAR_RANK_ONE,
                d["largest_rank_ratio"] < NEAR_RANK_ONE,
                float(np.abs(formula - chain.P[:, 1]).max())
                < AT_UNIGRAM_BELOW * effect,
                aligned(d["direction"]),
            ),
        )
    )


def _appd_properties(d: dict, record: RunRecord) -> dict[str, bool]:
    """App. D's four properties of one learnt model: each with all of its parts."""
    parts = _appd_parts(d, record)
    return {prop: all(parts[p] for p in names) for prop, names in APPD_PARTS.items()}


def _appendix_d_tied(
    inside: Sequence[dict], rs: Sequence[RunRecord], groups=()
) -> dict[str, Measure]:
    """App. D's four rows from the runs of its weight-tied model."""
    tied = [_appd_properties(d, r) for d, r in zip(inside, rs)]
    common = dict(runs=len(rs), trapped=trap_count(rs)[1], groups=tuple(groups))
    table = appendix_d_table({"tied": inside}, {"tied": rs})
    effect = abs(1 - rs[0].chain.P[0, 0] - rs[0].chain.P[1, 1])
    med, top = table.median(numeric_only=True), table.max(numeric_only=True)
    extra = {  # what each property's runs measured, beside the count
        "attention": f"the paper's ratio median {med['‖attn‖/‖x+attn‖']:.3f}; "
        f"largest change without attention {top['attention removed: Δ']:.4f}",
        "positions": f"spread median {table['positional spread'].median():.3f}",
        "rank": f"s₂/s₁ of W₁, W₂ median {table['W₁, W₂ s₂/s₁'].median():.3f}, of "
        f"every matrix {table['all matrices s₂/s₁'].median():.3f}",
        "formula": f"largest |formula − P| {top['max|formula − P|'] / effect:.1%} of "
        f"|p + q − 1| (learnt kernel {top['max|K − P|'] / effect:.1%})",
        "direction": f"smallest |cos| with v median {med['min |cos| with v']:.3f}",
    }
    parts = [_appd_parts(d, r) for d, r in zip(inside, rs)]
    out = {}
    for prop, text in extra.items():
        counts = tuple(
            (part, sum(h[part] for h in parts), len(parts)) for part in APPD_PARTS[prop]
        )
        k = sum(h[prop] for h in tied)
        out[f"appd_{prop}"] = Measure(
            f"tied: {_n(k, len(tied))} ({text})",
            k >= CLAIM_SHARE * len(tied),
            counts=counts,
            **common,
        )
    return out


def appendix_d_runs(
    inside: dict[str, Sequence[dict]],
    records: dict[str, Sequence[RunRecord]],
    groups=(),
) -> dict[str, Measure]:
    """App. D over every run (``inside[label][i]``: :func:`markovlib.theory.appendix_d`
    of ``records[label][i]``): the four rows from the weight-tied model of App. D
    ("tied"), and this book's controls where given: the untied GPT-2 model
    ("untied": appd_untied) and the tied GPT-2 model ("gpt2": appd_gpt2). A run has
    a property when: removing attention moves no predicted
    probability by :data:`NEAR_ZERO` × |p + q − 1| or more (the paper's ratio
    ‖attn‖ / ‖x + attn‖ printed beside); the positional spread is below
    :data:`NEAR_ZERO`; s_2 / s_1 of W_1 and W_2 is below :data:`NEAR_RANK_ONE`; the
    learnt kernel is within :data:`~markovlib.analysis.AT_UNIGRAM_BELOW` × |p + q − 1|
    of P. A row holds when at least :data:`~markovlib.analysis.CLAIM_SHARE` of the runs
    have its property."""
    out = (
        _appendix_d_tied(inside["tied"], records["tied"], groups)
        if "tied" in inside
        else {}
    )
    for label, cid in (("untied", "appd_untied"), ("gpt2", "appd_gpt2")):
        if label in inside:
            out[cid] = appendix_d_properties(
                label, inside[label], records[label], groups
            )
    return out


@one_thread()  # forward passes of d = 8 models on a few paths: small tensors
def appendix_d_inside(records: Sequence[RunRecord], load) -> list[dict]:
    """:func:`markovlib.theory.appendix_d` of each run's model (``load(record)``) on 8
    paths of its chain and length."""
    out = []
    for r in records:
        x = r.chain.sample(8, r.spec.train.seq_len, seed=12345)
        out.append(theory.appendix_d(load(r), x, r.spec.train.seq_len))
    return out


def appendix_d_property(
    records: Sequence[RunRecord], load, prop: str, groups=()
) -> Measure:
    """App. D's row ``prop`` ("attention", "positions", "rank", "formula",
    "direction") over the runs of its weight-tied model (:func:`appendix_d_runs`)."""
    inside = appendix_d_inside(records, load)
    return _appendix_d_tied(inside, records, groups)[f"appd_{prop}"]


def appendix_d_control(
    records: Sequence[RunRecord], load, label: str, groups=()
) -> Measure:
    """App. D's four properties on one of this book's controls ("untied", "gpt2"):
    :func:`appendix_d_properties` of its runs' models (``load(record)``)."""
    inside = appendix_d_inside(records, load)
    return appendix_d_properties(label, inside, records, groups)


def appendix_d_properties(
    label: str, inside: Sequence[dict], records: Sequence[RunRecord], groups=()
) -> Measure:
    """App. D's four properties on other runs than the authors' App. D model (this
    book's controls): how many runs have each; holds when at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of the runs have every one."""
    has = [_appd_properties(d, r) for d, r in zip(inside, records)]
    counts = {
        prop: sum(h[prop] for h in has)
        for prop in ("attention", "positions", "rank", "formula")
    }
    return Measure(
        f"{label}: "
        + ", ".join(f"{prop} {k} of {len(has)}" for prop, k in counts.items()),
        bool(has) and all(k >= CLAIM_SHARE * len(has) for k in counts.values()),
        runs=len(has),
        trapped=trap_count(records)[1] if has else 0,
        groups=tuple(groups),
        counts=tuple((prop, k, len(has)) for prop, k in counts.items()),
    )


def _smallest_cos(direction: dict) -> float:
    """The smallest |cos| with v that :func:`aligned` judges (the mean p_n left out
    when it is 0 · v)."""
    names = ["e", "W_2", "w"] + (["p"] if direction["p_norm"] >= NEAR_ZERO else [])
    return min(direction[k] for k in names)


def appendix_d_table(
    inside: dict[str, Sequence[dict]], records: dict[str, Sequence[RunRecord]]
) -> pd.DataFrame:
    """One row per run of :func:`appendix_d_runs`: the paper's ratio, the largest
    change of a prediction when attention is removed, the positional spread, the
    largest s_2 / s_1 of W_1 and W_2, max |K − P|, and which properties it has."""
    rows = []
    for label in inside:
        for d, r in zip(inside[label], records[label]):
            rank = [v for k, v in d["rank_ratio"].items() if k.endswith(APPD_MATRICES)]
            rows.append(
                {
                    "model": label,
                    "seed": r.spec.seed,
                    "‖attn‖/‖x+attn‖": d["ratio_mean"],
                    "attention removed: Δ": d["ablation"],
                    "positional spread": d["spread"],
                    "W₁, W₂ s₂/s₁": max(rank),
                    "all matrices s₂/s₁": d["largest_rank_ratio"],
                    "max|formula − P|": float(
                        np.abs(np.asarray(d["formula_kernel"]) - r.chain.P).max()
                    ),
                    "max|K − P|": float(np.abs(r.kernel - r.chain.P).max()),
                    "min |cos| with v": _smallest_cos(d["direction"]),
                    **_appd_properties(d, r),
                }
            )
    return pd.DataFrame(rows)


__all__ += [
    "NEAR_ZERO",
    "NEAR_RANK_ONE",
    "APPD_MATRICES",
    "APPD_PARTS",
    "ALIGNED",
    "aligned",
    "appendix_d_runs",
    "appendix_d_properties",
    "appendix_d_table",
]


# ----------------------------------------- per-run tables and the claims this book adds
def _span(values, fmt: str) -> str:
    """'a to b' of the smallest and largest of ``values`` ('a' when they print alike;
    'none' when empty)."""
    if not len(values):
        return "none"
    a, b = format(min(values), fmt), format(max(values), fmt)
    return a if a == b else f"{a} to {b}"


def run_table(groups: dict[str, Sequence[RunRecord]]) -> pd.DataFrame:
    """One row per run (``groups``: label → its records): its chain's p (and q), seed,
    iterations, share of the gap, class by the rule, the largest |K − P| of its learnt
    kernel K and the range of K's diagonal (the probabilities of staying put)."""
    rows = []
    for label, records in groups.items():
        for r in records:
            K, P = np.asarray(r.kernel), np.asarray(r.chain.P)
            chain = {k: v for k, v in r.spec.chain.items() if k in ("p", "q")}
            rows.append(
                {
                    "runs": label,
                    **chain,
                    "seed": r.spec.seed,
                    "iterations": r.steps,
                    "share of the gap": round(r.share, 3),
                    "class": r.cls,
                    "max |K − P|": round(float(np.abs(K - P).max()), 4),
                    "K_ii learnt": _span(K.diagonal(), ".3f"),
                    "K_ii true": _span(P.diagonal(), ".3f"),
                }
            )
    return pd.DataFrame(rows)


def threshold_sides(records: Sequence[RunRecord], star: float, groups=()) -> Measure:
    """This book: runs on symmetric chains on either side of the k-state threshold
    ``star``, judged by the rule. The runs *switch* at the threshold when at least
    :data:`~markovlib.analysis.CLAIM_SHARE` of those below it escaped and of those
    above it are at H(π); the classes and shares above it are reported."""
    below = [r for r in records if r.spec.chain["p"] < star]
    above = [r for r in records if r.spec.chain["p"] > star]
    esc = sum(r.cls == ESCAPED for r in below)
    count = {c: sum(r.cls == c for r in above) for c in (AT_UNIGRAM, "in between")}
    span = _span([r.share for r in above], ".2f")
    n, t = trap_count(records)
    return Measure(
        f"below p* = {star:.3f}: {_n(esc, len(below))} escaped; above it: "
        f"{_n(count[AT_UNIGRAM], len(above))} at H(π), {count['in between']} in "
        f"between (shares of the gap {span})",
        esc >= CLAIM_SHARE * len(below)
        and count[AT_UNIGRAM] >= CLAIM_SHARE * len(above),
        runs=n,
        trapped=t,
        groups=tuple(groups),
        details={
            "below": len(below),
            "escaped_below": esc,
            "above": len(above),
            **count,
        },
    )


def k_threshold(ks: Sequence[int] = (2, 3, 5), tol: float = 1e-4) -> Measure:
    """This book: the tied k-state θ_π turns into a local minimum at p = (k − 1)/k:
    the largest |bisection threshold − (k − 1)/k| over ``ks`` (bisection on the exact
    Hessian to ``tol``), the same computation as the scorecard's row."""

    devs = [abs(theory.unigram_threshold(k, tol) - (k - 1) / k) for k in ks]
    return Measure(f"{max(devs):.1e} (k = {', '.join(map(str, ks))})", max(devs) < tol)


__all__ += [
    "run_table",
    "threshold_sides",
    "k_threshold",
]
