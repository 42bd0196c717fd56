"""The scorecard computed from the data: the rows of the paper edition that
``markovlib scorecard`` computes from the shipped runs (each claim judged by
:func:`~markovlib.companion.claims.evaluate`) and the exact theory, without
executing a notebook; the others (the related papers' chapters) are computed by
their chapters when the book is built."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from ..analysis import (
    hessian_blocks,
)
from ..chains import binary
from ..model import TransformerConfig
from ..presets import AUTHORS, resolve
from ..runs.experiments import paper_edition
from ..runs.shipped import ShippedData, default_data_dir, no_data_message
from ..theory import (
    construction_checks,
    gradient_norm,
    hessian,
    population_loss,
    unigram_curvature,
    unigram_hessian,
    unigram_point,
)
from . import thesis
from .claims import CLAIMS, Claim, evaluate
from .measures import Measure, k_threshold
from .records import Groups, Incomplete
from .verdicts import NOT_TESTED, verdict, with_intervals

__all__ = ["COMPUTED", "Row", "compute", "setting_text", "authors_mismatches"]


EXACT = ("thm1", "thm2", "thm3", "k_threshold", "thm2_grid", "thm3_point")
EXACT += ("thm2_descent",)
EXACT += ("depth_curvature", "curvature_null")
COMPUTED = tuple(c.id for c in CLAIMS if c.groups or c.id in EXACT)


@dataclass(frozen=True)
class Row:
    """One computed row of the scorecard."""

    id: str
    claim: str
    source: str
    setting: str
    measure: str
    value: str
    verdict: str
    runs: int | None = None
    trapped: int | None = None
    groups: tuple = ()

    def as_dict(self) -> dict:

        d = asdict(self)
        d["groups"] = list(self.groups)
        if d["runs"] is None:  # exact rows: no runs
            del d["runs"], d["trapped"]
        return d


def _exact(edition: dict) -> dict:
    """The exact rows: Thm 1's constructions at (0.2, 0.3) and at (0.5, 0.8), where
    p + q > 1, Thm 2's and Thm 3's Hessians at the paper's chains, the k-state threshold
    (bisection on the exact Hessian)."""

    trap = binary(0.5, 0.8)
    built = {  # Thm 1 holds for every (p, q): below the line and above it
        (chain, name): c
        for chain in (binary(0.2, 0.3), trap)
        for name, c in construction_checks(chain)[0].items()
    }
    dev = max(abs(c["loss"] - ch.entropy_rate()) for (ch, _), c in built.items())
    thm1 = dev < 1e-9 and all(
        c["kernel_error"] < 1e-6 and c["grad"] < 1e-6 for c in built.values()
    )
    out = {"thm1": Measure(f"{dev:.1e} over {len(built)} constructions", thm1)}
    for cid, tied in (("thm2", True), ("thm3", False)):
        H = unigram_hessian(trap, TransformerConfig.theory(tied=tied))
        closed = unigram_curvature(trap, tied=tied)
        sign = H.min_eigenvalue > 0 if tied else H.min_eigenvalue < 0
        out[cid] = Measure(
            f"{H.min_eigenvalue:.4f} (closed form {closed:.4f})",
            bool(sign and abs(H.min_eigenvalue - closed) < 1e-6),
        )
    point = thm2_point(trap)
    out["thm2"] = Measure(
        f"{out['thm2'].value}; {point.value}", out["thm2"].ok and point.ok
    )
    out["k_threshold"] = k_threshold()
    out["thm2_grid"], out["thm3_point"] = thesis.thm2_grid(), thesis.thm3_point()
    out["thm2_descent"] = thesis.thm2_perturbed(0.5, 0.8)
    out["depth_curvature"] = thesis.depth_rule(thesis.depth_curvature(trap), trap)
    nulls = thesis.null_curvatures(trap, thesis.null_configs(edition))
    out["curvature_null"] = thesis.null_rule(nulls, trap)
    return out


THM2_LENGTH = 3  # the Hessian at θ_π does not depend on the length (stationary start)


def thm2_point(chain, length: int = THM2_LENGTH) -> Measure:
    """The rest of Thm 2 at θ_π (tied, exact over every path of ``length``): f = π₁
    whatever the input, L = H(π), ∇L = 0, and the Hessian of every parameter zero
    outside the rows and columns of (e, b); each below 1e-9."""
    model = unigram_point(chain, TransformerConfig.theory(max_len=length)).double()
    with torch.no_grad():  # b = log π in float64, not float32
        model.head.bias.copy_(torch.as_tensor(np.log(chain.stationary())))
    x = chain.sample(64, length, seed=0)
    f = float((model.probabilities(x)[..., 1] - chain.stationary()[1]).abs().max())
    loss = population_loss(model, chain, length=length, exact=True).mean
    gap = abs(loss - chain.unigram_entropy())
    grad = gradient_norm(model, chain, length)
    H, labels = hessian(model, chain, length)
    outside = hessian_blocks(H, labels, ("wte.weight", "head.bias")).outside
    worst = max(f, gap, grad, outside)
    return Measure(
        f"at θ_π, f = π₁, L = H(π), ∇L = 0 and the Hessian outside (e, b) zero "
        f"over {len(labels)} parameters: largest deviation "
        f"{thesis.rounding_text(worst)}",
        worst < 1e-9,
    )


PRECISION_TEXT = {
    "fp32": "float32",
    "bf16": "bf16 autocast",
    "fp16": "fp16 autocast without loss scaling",
    "fp16-scaled": "fp16 autocast with a loss scale of 65536",
}


def _values(xs) -> str:
    """The distinct values of ``xs``, sorted, as 'a' or 'a, b, c'."""
    return ", ".join(map(str, sorted(set(xs))))


def _iterations(specs) -> str:
    """'400 iterations', or by tying where the tyings differ in it: '400 iterations
    tied, 500 untied'."""
    by_tying = {}
    for s in specs:
        by_tying.setdefault(s.config.tied, set()).add(s.train.steps)
    if len(by_tying) < 2 or by_tying[True] == by_tying[False]:
        return f"{_values(s.train.steps for s in specs)} iterations"
    tied, untied = (_values(by_tying[k]) for k in (True, False))
    return f"{tied} iterations tied, {untied} untied"


def run_settings(specs) -> str:
    """The training settings of ``specs`` as the page prints them (read from the
    specs, so the text cannot disagree with the runs): iterations, batch × length, d,
    depth where it is not 1, precision and the number of runs."""
    t, c = [s.train for s in specs], [s.config for s in specs]
    parts = [
        _iterations(specs),
        f"batch {_values(x.batch_size for x in t)} × length "
        f"{_values(x.seq_len for x in t)}",
        f"d {_values(x.d_model for x in c)}",
    ]
    if {x.n_layers for x in c} != {1}:
        parts.append(f"depth {_values(x.n_layers for x in c)}")
    parts.append(_values(PRECISION_TEXT[x.precision] for x in t))
    return ", ".join(parts) + f"; {len(specs)} runs"


def authors_mismatches(c: Claim, specs) -> list[str]:
    """How the runs of ``c`` differ from the authors' settings of its figure
    (:data:`~markovlib.presets.AUTHORS`), e.g. 'steps: 1000 (400)'; empty when they are
    theirs (and for a row compared with no figure: ``['no published settings']``)."""
    if c.authors is None:
        return ["no published settings"]
    A = AUTHORS[c.authors]
    started = {"continued from a run's final weights" for s in specs if s.init}
    return sorted({m for s in specs for m in A.mismatches(s)} | started)


def setting_text(c: Claim, specs) -> str:
    """The Setting column of a trained row: what is compared, the runs' settings, and
    whether they are the authors' (:func:`authors_mismatches`) or this book's
    control."""
    differ = authors_mismatches(c, specs)
    if c.design:
        whose = f"this book's control at the authors' settings: {c.design}"
    elif not differ:
        whose = f"the authors' settings ({AUTHORS[c.authors].figure})"
    elif c.authors is None:
        whose = "this book's settings (no published ones to match)"
    else:
        whose = f"this book's control, not the authors' settings ({'; '.join(differ)})"
    return f"{c.setting}; {run_settings(specs)}; {whose}"


def _trained(data, edition: dict) -> dict:
    """Every trained row's :class:`~markovlib.companion.measures.Measure` from the
    shipped data (:class:`~markovlib.companion.records.Incomplete` for a row whose runs
    are not all shipped yet)."""
    trained = [c for c in CLAIMS if c.groups]
    runs = Groups.shipped(data, {g: edition[g] for c in trained for g in c.groups})
    return {c.id: evaluate(c, runs) for c in trained}


def compute(data=None) -> list[Row]:
    """The rows of :data:`COMPUTED` from the shipped data (``data``: a folder or a
    :class:`~markovlib.runs.shipped.ShippedData`; default :func:`default_data_dir`) and
    the exact theory, in the page's order. Trains nothing; a row whose runs are not all
    shipped yet is *not tested*, with how many are there. A trained row's setting is
    read from the specs of its runs (:func:`setting_text`)."""

    if not isinstance(data, ShippedData):
        directory = default_data_dir() if data is None else data
        if directory is None:
            raise FileNotFoundError(no_data_message())
        data = ShippedData(directory)
    paper = resolve("paper", environ=False)
    edition = dict(paper_edition())
    measured = {**_exact(edition), **_trained(data, edition)}
    rows = []
    for c in CLAIMS:
        if c.id not in COMPUTED:
            continue
        m = measured[c.id]
        specs = [s for g in c.groups for s in edition[g]]
        common = dict(
            id=c.id,
            claim=c.claim,
            source=c.source,
            setting=setting_text(c, specs) if specs else c.setting,
            measure=c.measure,
            groups=c.groups,
        )
        if isinstance(m, Incomplete):  # not all shipped yet
            value, verdict_, runs, trapped = (
                f"{m.done} of {m.wanted} {m.what} so far",
                NOT_TESTED,
                m.done,
                None,
            )
        else:
            value, runs, trapped = (
                with_intervals(c, m.value, m.counts),
                m.runs,
                m.trapped,
            )
            verdict_ = verdict(
                m.ok, paper, exact=c.exact, applicable=m.applicable, counts=m.counts
            )
        rows.append(
            Row(**common, value=value, verdict=verdict_, runs=runs, trapped=trapped)
        )
    return rows
