"""The reproduction scorecard: one row per claim of the paper (and of this book), its
verdict by one rule.

A chapter checks each of its claims at the scale it ran and calls :func:`record` with
the number it measured (already formatted, as the chapter prints it) and whether the
claim's check held. ``record`` glues ``sc_<id>_value`` and ``sc_<id>_verdict``; the
scorecard page (``book/scorecard.md``, written by :func:`page` and kept in sync by a
test) pastes both from the chapter, so the page never types a number and building the
book at another scale changes numbers and verdicts by itself.

The rule (:func:`verdict`, stated on the page):

* **reproduced** — the chapter's check of the claim holds;
* **differs** — it fails, for an exact (untrained) claim at any scale, or for a
  trained claim at a scale whose runs are long enough to claim convergence
  (``cpu``, ``paper``);
* **not tested at this scale** — a trained claim at a scale that claims nothing about
  convergence (``smoke``), whatever its check says;
* **not applicable to this chain** — the reader's chain is outside the claim's setting
  (e.g. a claim about p + q > 1 on a chain with p + q < 1).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Claim",
    "CLAIMS",
    "VERDICTS",
    "claim",
    "verdict",
    "record",
    "page",
    "write_page",
]

REPRODUCED, DIFFERS = "reproduced", "differs"
NOT_TESTED, NOT_APPLICABLE = "not tested at this scale", "not applicable to this chain"
VERDICTS = (REPRODUCED, DIFFERS, NOT_TESTED, NOT_APPLICABLE)


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


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "thm1",
        "global_minimum",
        "paper",
        "Thm 1: the construction is a global minimum",
        "any (p, q), tied or untied",
        "largest |loss − H_rate| over the constructions",
        "thm-global-minimum",
        exact=True,
    ),
    Claim(
        "fig3b",
        "global_minimum",
        "paper",
        "Fig 3(b): tied and untied reach H_rate on (0.2, 0.3)",
        "p + q < 1, GPT-2 model, length 1024",
        "largest excess loss over H_rate (nats)",
        "fig-gm-curves",
    ),
    Claim(
        "appd_attention",
        "global_minimum",
        "paper",
        "App. D: attention contributes nothing",
        "learnt models, p + q < 1",
        "largest change of the predictions without attention",
        "fig-gm-appendix-d",
    ),
    Claim(
        "appd_positions",
        "global_minimum",
        "paper",
        "App. D: positional embeddings constant in n",
        "learnt models, p + q < 1",
        "spread of p_n relative to ‖e_1 − e_0‖",
        "fig-gm-appendix-d",
    ),
    Claim(
        "appd_rank",
        "global_minimum",
        "paper",
        "App. D: weight matrices near rank one",
        "learnt models, p + q < 1",
        "largest s_2 / s_1 over the weight matrices",
        "fig-gm-appendix-d",
    ),
    Claim(
        "appd_formula",
        "global_minimum",
        "paper",
        "App. D: learnt P(1|0) ≈ p and P(0|1) ≈ q",
        "learnt models, p + q < 1",
        "largest |learnt − true| transition probability",
        "fig-gm-predictions",
    ),
    Claim(
        "thm2",
        "bad_local_minima",
        "paper",
        "Thm 2: θ_π is a local minimum (tied, p + q > 1)",
        "tied, p + q > 1",
        "smallest Hessian eigenvalue on the (e, b) block",
        "thm-bad-local-minimum",
        exact=True,
    ),
    Claim(
        "fig3a",
        "bad_local_minima",
        "paper",
        "Fig 3(a): tied runs stay at H(π) on (0.5, 0.8)",
        "tied, p + q > 1, GPT-2 model",
        "fraction of GPT-2 runs still at H(π) at the end",
        "fig-blm-trap",
    ),
    Claim(
        "fig3c",
        "bad_local_minima",
        "paper",
        "Fig 3(c, d): stuck runs predict π_1, escaped ones p",
        "tied, p + q > 1",
        "predicted P(1|0) of the most stuck run vs π_1",
        "fig-blm-predictions",
    ),
    Claim(
        "trap_models",
        "bad_local_minima",
        "this book",
        "The theory model (no layer norm) is trapped more often than GPT-2",
        "tied, p + q > 1",
        "trap fraction theory / GPT-2 at the end",
        "fig-blm-trap",
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
        "saddles",
        "paper",
        "Untied runs escape θ_π and reach H_rate",
        "untied, p + q > 1, GPT-2 and theory models",
        "fraction of untied runs that escaped",
        "fig-saddle-tied-untied",
    ),
    Claim(
        "fig4",
        "saddles",
        "paper",
        "Fig 4: tied cells above p + q = 1 miss H_rate, untied do not",
        "grid p, q ∈ {0.2, …, 0.8}, GPT-2 model",
        "mean excess tied above / untied (nats)",
        "fig-saddle-grid",
    ),
    Claim(
        "fig5",
        "multi_state",
        "paper",
        "Fig 5: k = 5 tied and untied reach H_rate at p ≤ 0.6",
        "symmetric k = 5 chain, 5000 iterations",
        "largest excess over H_rate at p ≤ 0.6",
        "fig-ms-fig5",
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
        "Fig 1: every depth reaches H_rate, deeper sooner",
        "(0.5, 0.8), tied, depths 1, 2, 4, 8, length 512",
        "largest final loss − H_rate",
        "fig-depth-fig1",
    ),
    Claim(
        "poster_depth",
        "depth",
        "poster",
        "Second order: depth does not help",
        "lag-2 chain, full attention",
        "best loss over depths − H_rate",
        "fig-depth-fig1",
    ),
    Claim(
        "poster_masking",
        "depth",
        "poster",
        "Second order: masking helps",
        "lag-2 chain, one layer, window 1",
        "windowed loss − H_rate",
        "fig-depth-window",
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


def verdict(
    ok: bool, scale=None, *, exact: bool = False, applicable: bool = True
) -> str:
    """The page's rule: see the module docstring. ``scale`` is a
    :class:`~markovlib.presets.Scale`."""
    if not isinstance(ok, bool):
        ok = bool(ok)
    if not applicable:
        return NOT_APPLICABLE
    if not exact and (scale is None or not scale.converges):
        return NOT_TESTED
    return REPRODUCED if ok else DIFFERS


def record(
    claim_id: str, value: str, ok: bool, scale, *, applicable: bool = True
) -> str:
    """Glue ``sc_<id>_value`` (the measured number, as text) and ``sc_<id>_verdict``;
    return the verdict."""
    from .book import glue

    c = claim(claim_id)
    if not isinstance(value, str):
        raise TypeError(
            f"value must be the number as the chapter prints it (a str); got {value!r}"
        )
    v = verdict(ok, scale, exact=c.exact, applicable=applicable)
    glue(f"sc_{c.id}_value", value, display=False)
    glue(f"sc_{c.id}_verdict", v, display=False)
    return v


PAGE_INTRO = """\
# Scorecard

Which of the paper's claims does this book reproduce? One row per claim: the paper's \
theorems and
figures, the poster's second-order claims, the follow-up paper's initialisation story, \
and this
book's own findings. The number in each row is pasted from the chapter that measures \
it, at the scale
this edition was built ({glue:text}`global_minimum.ipynb::scale_text:s`: sequences of \
length
{glue:text}`global_minimum.ipynb::seq_len:d`, \
{glue:text}`global_minimum.ipynb::steps:d` training
steps in the binary chapters); building the book at another scale, or with another \
chain, changes
the numbers and the verdicts by itself.

**The rule.** Each chapter checks each claim in its last cell, at the scale it ran, \
and the verdict
follows from that check alone:

- *reproduced*: the chapter's check of the claim holds;
- *differs*: it fails, for an exact claim (a construction, a Hessian, an identity: no \
training) at any
  scale, or for a trained claim at a scale whose runs are long enough to claim \
convergence
  (`cpu`, `paper`);
- *not tested at this scale*: a trained claim at the `smoke` scale, which claims \
nothing about
  convergence;
- *not applicable to this chain*: the chain is outside the claim's setting (e.g. a \
claim about
  p + q > 1 on a chain with p + q < 1).

"""


def page() -> str:
    """The scorecard page (MyST): the rule, then every claim with its number and verdict
    pasted."""
    rows = []
    for c in CLAIMS:
        paste = f"{c.chapter}.ipynb::sc_{c.id}"
        rows += [
            f"* - {c.claim} ({c.source})",
            f"  - {c.setting}",
            f"  - {c.measure}: {{glue:text}}`{paste}_value:s`",
            f"  - {{glue:text}}`{paste}_verdict:s`",
            f"  - {{numref}}`{c.target}`"
            if c.target.startswith("fig-")
            else f"  - {{prf:ref}}`{c.target}`",
        ]
    header = [
        "```{list-table}",
        ":header-rows: 1",
        ":widths: 30 20 30 10 10",
        ":name: tab-scorecard",
        "",
        "* - Claim",
        "  - Setting",
        "  - Measured in this edition",
        "  - Verdict",
        "  - Where",
    ]
    return PAGE_INTRO + "\n".join([*header, *rows, "```"]) + "\n"


def write_page(path="book/scorecard.md") -> None:
    """Write :func:`page` to ``path`` (``python -m markovlib.scorecard`` from the
    repository root)."""
    from pathlib import Path

    Path(path).write_text(page(), encoding="utf-8")


if __name__ == "__main__":
    write_page()
