"""The claims of the scorecard, one :class:`Claim` per row, in the page's order: what
the paper (or the poster, or this book) says, in what setting, what the row measures,
and for a trained row the rule that judges it (a function of
:mod:`markovlib.companion.measures` or :mod:`markovlib.companion.thesis`) and the
shipped groups it reads, by the rule's argument names. :func:`evaluate` judges one
claim on the runs of a :class:`~markovlib.companion.records.Groups`; the verdict and
its rendering are :mod:`markovlib.companion.scorecard`'s."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from . import measures, thesis
from .records import Incomplete

__all__ = [
    "Claim",
    "CLAIMS",
    "claim",
    "evaluate",
    "measured",
    "chain_text",
    "paper_figures",
]


@dataclass(frozen=True)
class Claim:
    """One row of the scorecard."""

    id: str  # glue keys sc_<id>_value / sc_<id>_verdict
    chapter: str  # the notebook (book/<chapter>.ipynb) that measures it
    source: str  # whose claim: "paper", "poster", "this book", "Ildiz et al."
    claim: str  # the claim in one line
    setting: str  # the paper's setting
    measure: str  # what the number in the row is
    target: str  # label of the figure or theorem the row links to
    exact: bool = False  # no training: tested at every scale
    # a trained row's rule: called with the records of ``reads`` by name, ``given``
    # and ``uses``; None for exact rows and for rows that only their chapter computes
    rule: Callable | None = None
    # the rule's arguments read from the shipped groups (data/paper/<group>-*.parquet):
    # a group, a tuple of groups (their runs in one list) or a dict of groups
    reads: Mapping = field(default_factory=dict, hash=False)
    given: Mapping = field(default_factory=dict, hash=False)  # its fixed arguments
    # what else of the runs it reads: "load" (a run's model), "weights_of" (its weights)
    uses: tuple[str, ...] = ()
    # the figure of presets.AUTHORS whose settings the row's runs are compared with: a
    # row is the paper's only when every run it reads is at those settings
    authors: str | None = None
    # how a control at the authors' settings differs from their experiment by design
    design: str = ""
    # the claim says runs stay at H(π) (to the end of the authors' runs): runs shorter
    # than theirs cannot test it (a run at H(π) may still leave it)
    stays: bool = False
    # the claim counts runs at H(π) (that stay or leave): the trapped chapter measured
    # those counts to move with the runs' length (tokens per batch) and iterations, so
    # runs unlike the authors' in them cannot judge it (issue 70); every ``stays`` claim
    traps: bool = False

    def __post_init__(self):
        if self.stays:
            object.__setattr__(self, "traps", True)

    @property
    def groups(self) -> tuple[str, ...]:
        """The shipped groups the row reads, in the order of :attr:`reads`."""
        return tuple(g for v in self.reads.values() for g in _group_names(v))

    @property
    def chain(self) -> tuple[float, float] | None:
        """The paper's chain (p, q) the claim is about, where its setting opens with
        it: '(0.5, 0.8), GPT-2, tied'; None for a claim about no one chain."""
        m = _OPENING_CHAIN.match(self.setting)
        return (float(m[1]), float(m[2])) if m else None

    @property
    def label(self) -> str:
        """What the claim's source calls it, where its text opens with that: 'Fig
        3(a)', 'Sec. 4.1'; '' otherwise."""
        m = _LABEL.match(self.claim)
        return m[0].removesuffix(": ") if m else ""

    def asked_of(self, p: float, q: float) -> str:
        """The claim asked of another chain (issue 70): its source's label dropped
        ('Fig 3(a): '), its chain replaced by (p, q), or ', on (p, q)' added."""
        text = _LABEL.sub("", self.claim, count=1)
        theirs, yours = chain_text(*self.chain), chain_text(p, q)
        if theirs in text:
            return text.replace(theirs, yours)
        return f"{text}, on {yours}"


def _group_names(read) -> tuple[str, ...]:
    """The groups of one of a rule's inputs: a group, a tuple or a dict of groups."""
    if isinstance(read, str):
        return (read,)
    return tuple(read.values() if isinstance(read, Mapping) else read)


def _read(runs, read):
    """One of a rule's inputs: the records of a group or of a tuple of groups (one
    list), or of a dict of groups (the same keys)."""
    if isinstance(read, Mapping):
        return {k: runs(g) for k, g in read.items()}
    return runs(*_group_names(read))


def _having(read, labels: Mapping):
    """One of a rule's inputs as a chapter at a smaller scale has it: the groups of a
    tuple or a dict that ``labels`` names (a single group stays)."""
    if isinstance(read, str):
        return read
    if isinstance(read, Mapping):
        return {k: g for k, g in read.items() if g in labels}
    return tuple(g for g in read if g in labels)


def evaluate(c: Claim, runs, labels: Mapping | None = None, **given):
    """The :class:`~markovlib.companion.measures.Measure` of trained claim ``c`` on the
    records ``runs`` (a :class:`~markovlib.companion.records.Groups`) holds of the
    groups it reads (``labels``: a chapter's label for each it has, where the chapter
    names them its own way), ``given`` in place of its fixed arguments (a chapter's
    chain); :class:`~markovlib.companion.records.Incomplete` while a group is not all
    there."""
    if labels is not None:  # a chapter's groups: those of the claim's it has
        c = replace(c, reads={n: _having(r, labels) for n, r in c.reads.items()})
        runs = runs.relabelled({g: labels[g] for g in c.groups})
    if not runs.complete(*c.groups):
        return Incomplete(*runs.counts(*c.groups))
    inputs = {name: _read(runs, read) for name, read in c.reads.items()}
    inputs.update({name: getattr(runs, name) for name in c.uses})
    return c.rule(**inputs, **{**c.given, **given})


def measured(claim_id: str, runs, labels: Mapping, **given):
    """:func:`evaluate` of claim ``claim_id`` on a chapter's groups ``runs``
    (``labels``: its label for each group the claim reads), as a page prints it: None
    while a group is not all there."""
    m = evaluate(claim(claim_id), runs, labels, **given)
    return None if isinstance(m, Incomplete) else m


def chain_text(p: float, q: float) -> str:
    """A binary chain as the claims write it: '(0.5, 0.8)'."""
    return f"({p:g}, {q:g})"


_OPENING_CHAIN = re.compile(r"\((\d*\.?\d+), (\d*\.?\d+)\)")
_LABEL = re.compile(r"^(Fig \d\S*( \S+\))?|Sec\. [\d.]+|App\. \w+|Thm \d): ")


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "thm1",
        "global_minimum",
        "paper",
        "Thm 1: the construction is a global minimum",
        "any (p, q), tied or untied: (0.2, 0.3) and (0.5, 0.8), where p + q > 1",
        "largest |loss − H_rate| over the constructions at both chains",
        "thm-global-minimum",
        exact=True,
    ),
    Claim(
        "fig3b",
        "global_minimum",
        "paper",
        "Fig 3(b): tied and untied reach H_rate on (0.2, 0.3)",
        "(0.2, 0.3), GPT-2, tied and untied",
        "runs that escaped (learnt > 90 % of the gap)",
        "fig-gm-curves",
        rule=measures.escape_claim,
        reads={
            "records": (
                "global_minimum-400-fp16-tied",
                "global_minimum-400-fp16-untied",
            )
        },
        authors="fig3",
    ),
    Claim(
        "fig3b_fp32",
        "global_minimum",
        "this book",
        "Fig 3(b) in float32 at 1000 iterations",
        "(0.2, 0.3), GPT-2, tied and untied",
        "runs that escaped",
        "fig-gm-curves",
        rule=measures.escape_claim,
        reads={"records": ("global_minimum-tied", "global_minimum-untied")},
        authors="fig3",
    ),
    *(
        Claim(
            f"appd_{prop}",
            "global_minimum",
            "paper",
            f"App. D: {text}",
            "(0.2, 0.3), the weight-tied model of App. D (no LayerNorm, ReLU, "
            "uni-embedding), every run",
            measure,
            "fig-gm-appendix-d",
            rule=measures.appendix_d_property,
            reads={"records": "appd-uni-fp16-tied"},
            given={"prop": prop},
            uses=("load",),
            authors="appd",
        )
        for prop, text, measure in (
            (
                "attention",
                "attention contributes nothing (y ≈ x)",
                "runs where removing attention moves no prediction by 10 % of "
                "|p + q − 1|",
            ),
            (
                "positions",
                "positional embeddings constant in n",
                "runs whose spread of p_n is below 0.1 of ‖e₁ − e₀‖",
            ),
            (
                "rank",
                "the feed-forward matrices W₁, W₂ are near rank one",
                "runs with s_2 / s_1 of W_1 and W_2 below 0.1",
            ),
            (
                "formula",
                "learnt P(1|0) ≈ p and P(0|1) ≈ q",
                "runs whose learnt kernel is within 10 % of |p + q − 1| of P",
            ),
            (
                "direction",
                "e ∝ v, p_n ∝ v, W₁ = w vᵀ and W₂ = v wᵀ for one direction v",
                "runs where e, the mean p_n (unless under 0.1 of ‖e‖), W₂'s column "
                "and both hidden directions are within |cos| 0.9 of v and w",
            ),
        )
    ),
    Claim(
        "appd_untied",
        "global_minimum",
        "this book",
        "App. D's four properties, untied GPT-2 model (the paper claims them for the "
        "tied model only)",
        "(0.2, 0.3), GPT-2, untied, every run",
        "runs with each property",
        "fig-gm-appendix-d",
        rule=measures.appendix_d_control,
        reads={"records": "global_minimum-400-fp16-untied"},
        given={"label": "untied"},
        uses=("load",),
        authors="appd",
    ),
    Claim(
        "appd_gpt2",
        "global_minimum",
        "this book",
        "App. D's four properties on the tied GPT-2 model of Fig 3(b)",
        "(0.2, 0.3), GPT-2, tied, every run",
        "runs with each property",
        "fig-gm-appendix-d",
        rule=measures.appendix_d_control,
        reads={"records": "global_minimum-400-fp16-tied"},
        given={"label": "gpt2"},
        uses=("load",),
        authors="appd",
    ),
    Claim(
        "thm2",
        "bad_local_minima",
        "paper",
        "Thm 2: θ_π is a local minimum (tied, p + q > 1)",
        "tied, p + q > 1",
        "smallest Hessian eigenvalue on the (e, b) block; at θ_π: f = π₁, L = H(π), "
        "∇L = 0, the Hessian zero outside (e, b)",
        "thm-bad-local-minimum",
        exact=True,
    ),
    Claim(
        "thm2_descent",
        "bad_local_minima",
        "paper",
        "Thm 2: θ_π is a local minimum (tied, p + q > 1), tested by descent: gradient "
        "descent on the exact loss from θ_π plus noise returns to it",
        "(0.5, 0.8), tied, the theory model and GPT-2; N(0, 0.05²) on every parameter, "
        "4 draws each, 300 steps of exact gradient descent (paths of 10 states); the "
        "mirror chain (0.5, 0.2) as a control",
        "every descent back within 1e-3 nats of H(π)",
        "fig-blm-perturbed",
        exact=True,
    ),
    Claim(
        "fig3a",
        "trapped",
        "paper",
        "Fig 3(a): tied runs stay at H(π) on (0.5, 0.8)",
        "(0.5, 0.8), GPT-2, tied",
        "runs at H(π) (learnt < 10 % of the gap) at the end",
        "fig-trapped-survival",
        rule=measures.fig3a,
        reads={"records": "trap400-gpt2-tied-fp16"},
        authors="fig3",
        stays=True,
    ),
    Claim(
        "fig3c",
        "bad_local_minima",
        "paper",
        "Fig 3(c, d): a run at θ_π predicts π₁ after a zero, an escaped one p",
        "(0.5, 0.8), GPT-2, tied",
        "learnt P(1|0) of a run at θ_π and of an escaped run; every run of each kind "
        "position by position along one test path (90 % of the positions after a "
        "zero)",
        "fig-blm-predictions",
        rule=measures.fig3c,
        reads={"trapped": "trap400-gpt2-tied-fp16"},
        uses=("load",),
        authors="fig3",
    ),
    Claim(
        "fig3c_untied",
        "trapped",
        "paper",
        "Fig 3(c): an untied run on (0.5, 0.8) predicts p after a zero",
        "(0.5, 0.8), GPT-2, untied (the Fig 4 grid's cell)",
        "learnt P(1|0) of each untied run",
        "fig-trapped-grid",
        rule=measures.fig3c_untied,
        reads={"records": "fig4-400-untied-fp16"},
        given={"p": 0.5, "q": 0.8},
        authors="fig3",
    ),
    Claim(
        "bad_minimum",
        "trapped",
        "paper",
        "Sec. 4.1: at θ_π the output ignores the input, f = σ(b) = π₁",
        "(0.5, 0.8), GPT-2, tied, the runs at H(π)",
        "runs at H(π) predicting π₁ after a zero and after a one; runs whose head's "
        "bias alone, σ(b), is π₁",
        "fig-trapped-survival",
        rule=measures.bad_minimum,
        reads={"records": "trap400-gpt2-tied-fp16"},
        uses=("load",),
        authors="fig3",
    ),
    Claim(
        "fig3a_fp32",
        "bad_local_minima",
        "this book",
        "In float32 the trap is a plateau that training leaves",
        "(0.5, 0.8), GPT-2, tied",
        "runs at H(π) at the end of each budget",
        "fig-blm-trap",
        rule=measures.float32_plateau,
        reads={"budget": "trap400-gpt2-tied-fp32", "longer": "trap-gpt2-tied"},
        authors="fig3",
        traps=True,
    ),
    Claim(
        "trap_models",
        "bad_local_minima",
        "this book",
        "The theory model (no layer norm) is trapped more often than GPT-2",
        "(0.5, 0.8), tied, theory and GPT-2 models",
        "runs at H(π) at the end, theory / GPT-2",
        "fig-blm-trap",
        rule=measures.trap_models,
        reads={"theory": "trap400-theory-tied-fp32", "gpt2": "trap400-gpt2-tied-fp32"},
        authors="fig3",
        traps=True,
    ),
    Claim(
        "precision",
        "trapped",
        "this book",
        "fp16 without loss scaling keeps tied runs at H(π) that float32 frees",
        "(0.5, 0.8), GPT-2, tied, the same seeds and batches",
        "runs at H(π) at the end, fp16 / float32",
        "fig-trapped-survival",
        rule=measures.precision_traps,
        reads={"fp16": "trap400-gpt2-tied-fp16", "fp32": "trap400-gpt2-tied-fp32"},
        authors="fig3",
        stays=True,
    ),
    # The thesis (issue 66): is the trap Thm 2's local minimum?
    Claim(
        "thesis_fig1",
        "depth",
        "paper",
        "Sec. 4.2: the landscape explains Fig 1's single layer: its trapped runs have "
        "no direction of negative curvature (Thm 2's local minimum, to second order)",
        "(0.5, 0.8), GPT-2, tied, depth 1, the runs at H(π)",
        "trapped runs where Lanczos finds no Hessian eigenvalue (every parameter, "
        "float64, 128 fixed paths of 128 states) below −1 % of Thm 3's saddle",
        "sec-depth-thesis",
        rule=thesis.shipped_curvature,
        reads={"records": "depth-fig1-fp16-L1"},
        uses=("weights_of",),
        authors="fig1",
    ),
    *(
        Claim(
            f"fig1_stays_{tag}",
            "depth",
            "this book",
            f"Fig 1's trapped single-layer runs stay at H(π) when training goes on in "
            f"{words}",
            "(0.5, 0.8), GPT-2, tied, depth 1; every run at H(π) of Fig 1's 32 (fp16 "
            "without a loss scale, the authors' 500 iterations), trained again from "
            "its final weights for that budget, a new schedule",
            "continued runs still at H(π)",
            "sec-depth-thesis",
            rule=thesis.stays_trapped,
            reads={
                "by_source": {
                    "depth-fig1-fp16-L1": f"continue-depth-fig1-fp16-L1-{precision}"
                }
            },
            given={"precision": precision},
            authors="fig1",
            stays=True,
        )
        for tag, precision, words in (
            ("fp32", "fp32", "float32"),
            ("scaled", "fp16-scaled", "fp16 with a loss scale"),
        )
    ),
    Claim(
        "thesis_fig3a",
        "trapped",
        "paper",
        "Sec. 4.2: Fig 3(a)'s trapped runs have no direction of negative curvature "
        "(Thm 2's local minimum, to second order)",
        "(0.5, 0.8), GPT-2, tied, the runs at H(π)",
        "trapped runs where Lanczos finds no Hessian eigenvalue below −1 % of Thm 3's "
        "saddle",
        "sec-trapped-thesis",
        rule=thesis.shipped_curvature,
        reads={"records": "trap400-gpt2-tied-fp16"},
        uses=("weights_of",),
        authors="fig3",
    ),
    Claim(
        "thesis_theory_hessian",
        "trapped",
        "this book",
        "The theory model's trapped runs (float32) have no direction of negative "
        "curvature",
        "(0.5, 0.8), the theory model (no layer norm, ReLU), tied, the runs at H(π)",
        "trapped runs where Lanczos finds no Hessian eigenvalue below −1 % of Thm 3's "
        "saddle",
        "sec-trapped-thesis",
        rule=thesis.shipped_curvature,
        reads={"records": "trap400-theory-tied-fp32"},
        uses=("weights_of",),
        authors="fig3",
    ),
    *(
        Claim(
            f"thesis_stays_{tag}",
            "trapped",
            "this book",
            f"The trapped runs stay at H(π) when training goes on in {words}",
            "(0.5, 0.8), tied; every run at H(π) of Fig 3(a) (GPT-2, fp16) and of "
            "the theory model and GPT-2 in float32 at the authors' budget, trained "
            "again from its final weights for that budget, a new schedule",
            "continued runs still at H(π)",
            "sec-trapped-thesis",
            rule=thesis.stays_trapped,
            reads={
                "by_source": {
                    source: f"continue-{source}-{precision}"
                    for source in (
                        "trap400-gpt2-tied-fp16",
                        "trap400-theory-tied-fp32",
                        "trap400-gpt2-tied-fp32",
                    )
                }
            },
            given={"precision": precision},
            authors="fig3",
            stays=True,
        )
        for tag, precision, words in (
            ("fp32", "fp32", "float32"),
            ("scaled", "fp16-scaled", "fp16 with a loss scale"),
        )
    ),
    Claim(
        "thesis_theory",
        "trapped",
        "this book",
        "The model Thm 2 analyses (no layer norm) stays at H(π) in float32",
        "(0.5, 0.8), the theory model, tied, trained for the authors' budget and, "
        "where at H(π), for that budget again",
        "runs at H(π) after both budgets",
        "sec-trapped-thesis",
        rule=thesis.theory_model_stays,
        reads={
            "runs": "trap400-theory-tied-fp32",
            "continued": "continue-trap400-theory-tied-fp32-fp32",
        },
        authors="fig3",
        stays=True,
    ),
    Claim(
        "layer_norm",
        "trapped",
        "this book",
        "Sec. 2: we omit the layer norm since its influence is marginal in the "
        "settings we consider (tested in float32 on the theory model's traps)",
        "(0.5, 0.8), the theory model with and without layer norms, tied, the same "
        "seeds and batches",
        "runs at H(π) without and with layer norms: the 95 % interval of the "
        "difference of the shares within ±0.25",
        "sec-trapped-thesis",
        rule=thesis.layer_norm_marginal,
        reads={
            "without": "trap400-theory-tied-fp32",
            "with_ln": "trap400-theory-ln-tied-fp32",
        },
        authors="fig3",
        traps=True,
    ),
    Claim(
        "thm2_grid",
        "trapped",
        "paper",
        "Thm 2 at every tied chain above the line of Fig 4's grid",
        "the 10 chains of the Fig 4 grid with p + q > 1, the theory model, tied, exact",
        "the Hessian's smallest eigenvalue at θ_π against its closed form; f, L, ∇L",
        "sec-trapped-thesis",
        exact=True,
    ),
    Claim(
        "thm3_point",
        "trapped",
        "paper",
        "App. B.5: the untied θ_π has f = π₁, L = H(π) and ∇L = 0 (Thm 3 (ii)–(iv))",
        "the 10 chains of the Fig 4 grid with p + q > 1, the theory model, untied, "
        "exact",
        "largest deviation of f, L and ∇L",
        "sec-trapped-thesis",
        exact=True,
    ),
    Claim(
        "depth_curvature",
        "trapped",
        "paper",
        "Sec. 4.4: more layers positively affect the loss curvature at the bad local "
        "minima",
        "(0.5, 0.8), the theory model, tied, depths 1, 2 and 4, θ_π exact",
        "the smallest Hessian eigenvalue at θ_π per depth, to second order (every "
        "parameter) and of its (e, b) block",
        "sec-trapped-thesis",
        exact=True,
    ),
    Claim(
        "thm3",
        "saddles",
        "paper",
        "Thm 3: θ_π is a saddle when untied (p + q > 1)",
        "untied, p + q > 1",
        "smallest Hessian eigenvalue, untied",
        "thm-saddle",
        exact=True,
    ),
    Claim(
        "untied_escape",
        "trapped",
        "paper",
        "Untied runs escape θ_π and reach H_rate",
        "the Fig 4 grid's cells with p + q > 1, GPT-2, untied",
        "runs that escaped",
        "fig-trapped-grid",
        rule=measures.untied_escape,
        reads={"records": "fig4-400-untied-fp16"},
        authors="fig4",
    ),
    Claim(
        "untied_escape_fp32",
        "saddles",
        "this book",
        "Untied runs escape θ_π in float32, GPT-2 and theory models",
        "(0.5, 0.8), untied, GPT-2 and theory models",
        "runs that escaped",
        "fig-saddle-tied-untied",
        rule=measures.escape_claim,
        reads={"records": ("trap-gpt2-untied", "trap-theory-untied")},
        authors="fig3",
    ),
    Claim(
        "fig4",
        "trapped",
        "paper",
        "Fig 4: tied cells above p + q = 1 collapse to the marginal, untied do not",
        "the Fig 4 grid, GPT-2; 8 independently initialised runs per tied cell above "
        "the line, 3 per other cell",
        "tied cells above the line with at least half of their runs at H(π)",
        "fig-trapped-cells",
        rule=measures.fig4_cells,
        reads={
            "cells": "fig4-cells-400-tied-fp16",
            "tied": "fig4-400-tied-fp16",
            "untied": "fig4-400-untied-fp16",
        },
        authors="fig4",
        stays=True,
    ),
    Claim(
        "fig4_3runs",
        "trapped",
        "this book",
        "Fig 4 from 3 runs per cell (seed i starts alike in every cell)",
        "the Fig 4 grid, GPT-2, 3 runs per cell and tying",
        "cells above the line at H(π) (at least half of their runs)",
        "fig-trapped-grid",
        rule=measures.fig4,
        reads={"tied": "fig4-400-tied-fp16", "untied": "fig4-400-untied-fp16"},
        authors="fig4",
        design="seed i starts from the same weights in every cell, so the cells' runs "
        "are not independent",
        stays=True,
    ),
    Claim(
        "below_line",
        "trapped",
        "paper",
        "Sec. 4.2: p + q < 1 reaches H_rate irrespective of the weight tying",
        "the Fig 4 grid's cells with p + q < 1, GPT-2, tied and untied",
        "cells below the line escaped (at least half of their runs)",
        "fig-trapped-grid",
        rule=measures.below_line,
        reads={"tied": "fig4-400-tied-fp16", "untied": "fig4-400-untied-fp16"},
        authors="fig4",
    ),
    Claim(
        "below_minima",
        "trapped",
        "paper",
        "Sec. 4.1: local minima also exist for p + q < 1, but the standard Gaussian "
        "initialisation falls outside their basin",
        "the Fig 4 grid's cells with p + q < 1: the follow-up paper's reduced model "
        "(exact) and the GPT-2 runs, tied",
        "∂²L/∂e² on e = 0 past the saddle and at w = 0 (reduced model), and the tied "
        "runs from the standard initialisation that escaped",
        "sec-trapped-thesis",
        rule=thesis.below_line_minima,
        reads={"tied": "fig4-400-tied-fp16"},
        authors="fig4",
    ),
    Claim(
        "fig4_fp32",
        "saddles",
        "this book",
        "In float32 after 1000 iterations the tied cells above the line leave H(π)",
        "the Fig 4 grid, GPT-2, 1 run per cell and tying",
        "cells above the line at H(π)",
        "fig-saddle-grid",
        rule=measures.fig4_float32,
        reads={"tied": "fig4-tied", "untied": "fig4-untied"},
        authors="fig4",
    ),
    Claim(
        "fig5",
        "multi_state",
        "paper",
        "Fig 5: k = 5 tied and untied reach H_rate at p ≤ 0.6; above it tied runs "
        "stay at H(π), untied ones escape",
        "symmetric k = 5 chains, p ∈ {0.1, 0.3, 0.6, 0.9}, the authors' Fig 5 model "
        "(no LayerNorm, ReLU), tied and untied",
        "runs on the claimed side per p and tying",
        "fig-ms-fig5",
        rule=measures.fig5_halves,
        reads={
            "tied": "fig5-k5-theory-fp16-tied",
            "untied": "fig5-k5-theory-fp16-untied",
        },
        authors="fig5",
        stays=True,
    ),
    Claim(
        "fig5_figure",
        "multi_state",
        "paper",
        "Fig 5 as drawn: the tied curves at p = 0.9 end (iteration 4000, the "
        "figure's edge) at 0.24 of the gap (0.0089 nats below H(π)), not at H(π) as "
        "the text says",
        "symmetric k = 5 chain, p = 0.9, the authors' Fig 5 model, tied",
        "tied runs at p = 0.9 whose loss at iteration 4000 covers 0.24 ± 0.1 of the "
        "gap, where the authors' curves end",
        "fig-ms-fig5",
        rule=measures.fig5_figure,
        reads={"tied": "fig5-k5-theory-fp16-tied"},
        authors="fig5",
    ),
    Claim(
        "fig5_gpt2",
        "multi_state",
        "this book",
        "Fig 5's two halves with the GPT-2 model of Fig 3 and 4",
        "symmetric k = 5 chains, p ∈ {0.1, 0.3, 0.6, 0.9}, GPT-2, tied and untied",
        "runs on the claimed side per p and tying",
        "fig-ms-fig5",
        rule=measures.fig5_halves,
        reads={"tied": "fig5-k5-fp16-tied", "untied": "fig5-k5-fp16-untied"},
        authors="fig5",
        stays=True,
    ),
    Claim(
        "fig5_fp32",
        "multi_state",
        "this book",
        "Fig 5's two halves in float32",
        "symmetric k = 5 chains, GPT-2, tied and untied, 1 run per p",
        "runs on the claimed side per p and tying",
        "fig-ms-fig5",
        rule=measures.fig5_halves,
        reads={"tied": "fig5-k5-tied", "untied": "fig5-k5-untied"},
        authors="fig5",
        stays=True,
    ),
    Claim(
        "k_threshold",
        "multi_state",
        "this book",
        "The k-state trap threshold is p = (k − 1)/k",
        "symmetric k-state chains, tied",
        "largest |numerical threshold − (k − 1)/k|",
        "fig-ms-threshold",
        exact=True,
    ),
    Claim(
        "fig1",
        "depth",
        "paper",
        "Fig 1: the single layer stays at H(π); depth ≥ 2 reaches H_rate",
        "(0.5, 0.8), GPT-2, tied, depths 1, 2, 4, 8",
        "runs at H(π) (depth 1) and escaped (depth ≥ 2) per depth",
        "fig-depth-fig1",
        rule=measures.fig1_depths,
        reads={"by_depth": {L: f"depth-fig1-fp16-L{L}" for L in (1, 2, 4, 8)}},
        authors="fig1",
        stays=True,
    ),
    Claim(
        "depth_plateau",
        "depth",
        "paper",
        "Sec. 4.4: the deeper models first plateau at H(π), then reach H_rate",
        "(0.5, 0.8), GPT-2, tied, depths 2, 4, 8",
        "runs that escaped and sat at H(π) for 50 iterations or more first",
        "fig-depth-fig1",
        rule=measures.plateau_then_drop,
        reads={"records": tuple(f"depth-fig1-fp16-L{L}" for L in (2, 4, 8))},
        authors="fig1",
    ),
    Claim(
        "fig1_fp32",
        "depth",
        "this book",
        "Fig 1 in float32",
        "(0.5, 0.8), GPT-2, tied, depths 1, 2, 4, 8",
        "runs at H(π) (depth 1) and escaped (depth ≥ 2) per depth",
        "fig-depth-fig1",
        rule=measures.fig1_depths,
        reads={"by_depth": {L: f"depth-fig1-L{L}" for L in (1, 2, 4, 8)}},
        authors="fig1",
        traps=True,
    ),
    Claim(
        "depth_factors",
        "depth",
        "paper",
        "Sec. 4.4: depth ≥ 2 reaches H_rate regardless of weight tying and switching",
        "depth 2, GPT-2: untied on (0.5, 0.8), tied on (0.5, 0.2)",
        "runs that escaped",
        "fig-depth-fig1",
        rule=measures.depth_factors,
        reads={
            "untied": "depth-fig1-fp16-L2-untied",
            "mirror": "depth-fig1-fp16-L2-mirror",
        },
        authors="fig1",
    ),
    Claim(
        "depth_init",
        "depth",
        "paper",
        "Introduction: deeper models converge regardless of initialization",
        "depth 2, GPT-2, tied, (0.5, 0.8), from the seeds that trap one layer",
        "runs that escaped",
        "fig-depth-fig1",
        rule=measures.trapped_starts,
        reads={"records": "depth-fig1-fp16-L2-trapstarts"},
        authors="fig1",
    ),
    Claim(
        "higher_order",
        "depth",
        "this book",
        "Deeper models learn a second-order chain given enough iterations (ICLR Sec. "
        "4.4) in float32",
        "random order-2 chains, GPT-2, tied, depths 1-3, 2 heads",
        "runs that escaped per depth (share of the gap from the final test loss)",
        "fig-depth-higher-order",
        rule=measures.higher_order,
        reads={"by_depth": {L: f"higher-order-L{L}" for L in (1, 2, 3)}},
        authors="higher_order",
    ),
    Claim(
        "poster_masking",
        "depth",
        "this book",
        "Second order: masking helps (the poster's claim; its settings are not "
        "published)",
        "lag-2 chain, GPT-2, one layer, window 1 against full attention",
        "window-1 runs escaped, and above the full-attention run of their seed",
        "fig-depth-window",
        rule=measures.masking,
        reads={"window": "depth-lag2-window1", "full": "depth-lag2-L1"},
    ),
    Claim(
        "init_energy",
        "initialisation",
        "Local to Global",
        "Gradient flow on (e, w) conserves E = e² − w² − sign(w) log|w|",
        "the reduced single-layer model",
        "largest |ΔE| over all integrated trajectories",
        "fig-init-portrait",
        exact=True,
    ),
    Claim(
        "init_basins",
        "initialisation",
        "Local to Global",
        "The energy level through the saddle separates the basins",
        "grid of starts (e, w), both sides of p + q = 1",
        "fraction of starts whose flow ends in the predicted basin",
        "fig-init-portrait",
        exact=True,
    ),
    Claim(
        "init_full_model",
        "initialisation",
        "this book",
        "The full model started on the manifold ends where the reduced flow predicts",
        "tied theory model, gradient descent on the exact loss",
        "fraction of full-model runs ending in the predicted basin",
        "fig-init-full-model",
        exact=True,
    ),
    Claim(
        "ccmc_equivalence",
        "ccmc",
        "Ildiz et al.",
        "One attention layer is a context-conditioned Markov chain",
        "random prompts",
        "largest |attention − CCMC| probability",
        "thm-ccmc",
        exact=True,
    ),
    Claim(
        "ccmc_rate",
        "ccmc",
        "Ildiz et al.",
        "W is learnt at the parametric rate n^(−1/2)",
        "maximum likelihood",
        "log-log slope of the estimation error",
        "fig-ccmc-estimation",
    ),
    Claim(
        "ccmc_collapse",
        "ccmc",
        "Ildiz et al.",
        "Generation collapses onto a few tokens",
        "one trajectory from a balanced prompt",
        "top-token share of the last window",
        "fig-ccmc-collapse",
    ),
)

_BY_ID = {c.id: c for c in CLAIMS}


def claim(claim_id: str) -> Claim:
    """The :class:`Claim` with this id."""
    if claim_id not in _BY_ID:
        raise ValueError(f"claim must be one of {', '.join(_BY_ID)}; got {claim_id!r}")
    return _BY_ID[claim_id]


# "Fig N", or "the Fig N" (the article taken in: "the Fig 4 grid", not "the the")
_PAPER_FIGURE = re.compile(
    r"(?<![\w'’.])(?<!paper's )(?<!paper’s )(?:[Tt]he )?(Fig) (\d)"
)


def paper_figures(text: str) -> str:
    """The paper's figures named as the paper's ("the paper's Fig 3(b)") on a page
    whose own figures are "Fig. N" (issue 49)."""
    named = _PAPER_FIGURE.sub(r"the paper's \1 \2", text)
    start = _PAPER_FIGURE.match(text) and text[0].isupper()
    return "The" + named[3:] if start else named
