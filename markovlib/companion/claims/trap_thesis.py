"""The claims of Sec. 4.2's thesis (issue 66: is the trap Thm 2's local minimum?)."""

from __future__ import annotations

from .. import thesis
from .claim import Claim

__all__ = ["CLAIMS"]

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "thesis_fig1",
        "depth",
        "paper, as this book reads it",
        "Sec. 4.2, as this book reads it: Fig 1's trapped single-layer runs sit at a "
        "local minimum (no direction of negative curvature)",
        "(0.5, 0.8), GPT-2, tied, depth 1, the runs at H(π)",
        "trapped runs whose smallest Ritz direction on 128 fixed paths of 128 states "
        "(every parameter, float64) does not curve below −1 % of the size of Thm 3's "
        "saddle on 4096 fresh paths (rule of 2026-11-30, after the Hessians)",
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
            "(0.5, 0.8), GPT-2, tied, depth 1; every run at H(π) of this book's 32 at "
            "Fig 1's settings (fp16 "
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
        "paper, as this book reads it",
        "Sec. 4.2, as this book reads it: Fig 3(a)'s trapped runs sit at a local "
        "minimum (no direction of negative curvature)",
        "(0.5, 0.8), GPT-2, tied, the runs at H(π)",
        "trapped runs whose smallest Ritz direction on 128 fixed paths of 128 states "
        "does not curve below −1 % of the size of Thm 3's saddle on 4096 fresh paths "
        "(rule of 2026-11-30, after the Hessians)",
        "sec-trapped-thesis",
        rule=thesis.shipped_curvature,
        reads={"records": "trap400-gpt2-tied-fp16"},
        uses=("weights_of",),
        authors="fig3",
    ),
    Claim(
        "curvature_null",
        "trapped",
        "this book",
        "The curvature test finds no direction of negative curvature at θ_π (tied), "
        "a local minimum by Thm 2 (theory model) and by descent (GPT-2, thm2_descent)",
        "(0.5, 0.8), tied, θ_π of GPT-2 and of the theory model (the trapped runs' "
        "models); the fixed batch and the fresh paths of the curvature rows",
        "the curvature on the fresh paths along the fixed batch's smallest Ritz "
        "vector, against −1 % of the size of Thm 3's saddle",
        "sec-trapped-thesis",
        exact=True,
    ),
    Claim(
        "thesis_theory_hessian",
        "trapped",
        "this book",
        "The theory model's trapped runs (float32) have no direction of negative "
        "curvature",
        "(0.5, 0.8), the theory model (no layer norm, ReLU), tied, the runs at H(π)",
        "trapped runs whose smallest Ritz direction on 128 fixed paths of 128 states "
        "does not curve below −1 % of the size of Thm 3's saddle on 4096 fresh paths "
        "(rule of 2026-11-30, after the Hessians)",
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
        "Thm 2, to second order, at every tied chain above the line of Fig 4's grid",
        "the 10 chains of the Fig 4 grid with p + q > 1, the theory model, tied, exact",
        "the Hessian's smallest eigenvalue at θ_π against its closed form; f, L, ∇L",
        "sec-trapped-thesis",
        exact=True,
    ),
    Claim(
        "thm3_point",
        "trapped",
        "paper",
        "App. B.5: the untied θ_π has f = π₁, L = H(π) and ∇L = 0 (Thm 2's parts "
        "(ii)–(iv))",
        "the 10 chains of the Fig 4 grid with p + q > 1, the theory model, untied, "
        "exact",
        "largest deviation of f, L and ∇L",
        "sec-trapped-thesis",
        exact=True,
    ),
    Claim(
        "depth_curvature",
        "trapped",
        "paper, as this book reads it",
        "Sec. 4.4, as this book reads it: more layers positively affect the loss "
        "curvature, to second order, at θ_π (every weight zero, b = logit π₁)",
        "(0.5, 0.8), the theory model, tied, depths 1, 2 and 4, θ_π exact",
        "the smallest Hessian eigenvalue at θ_π per depth, to second order (every "
        "parameter) and of its (e, b) block",
        "sec-trapped-thesis",
        exact=True,
    ),
)
