"""The claims of Fig 3(b), Thm 1 and App. D (the global minimum), in page order."""

from __future__ import annotations

from .. import measures
from .claim import Claim

__all__ = ["CLAIMS"]

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
        "runs that escaped (learnt > 90 % of the gap), per tying",
        "fig-gm-curves",
        rule=measures.escape_per_tying,
        reads={
            "tied": "global_minimum-400-fp16-tied",
            "untied": "global_minimum-400-fp16-untied",
        },
        authors="fig3",
    ),
    Claim(
        "fig3b_fp32",
        "global_minimum",
        "this book",
        "Fig 3(b) in float32 at 1000 iterations",
        "(0.2, 0.3), GPT-2, tied and untied",
        "runs that escaped, per tying",
        "fig-gm-curves",
        rule=measures.escape_per_tying,
        reads={"tied": "global_minimum-tied", "untied": "global_minimum-untied"},
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
                "the attention's contribution negligible (y ≈ x)",
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
                "the feed-forward matrices W₁ and W₂ are near rank one",
                "runs with s_2 / s_1 of W_1 and W_2 below 0.1",
            ),
            (
                "formula",
                "the learnt weights put into the formula predict P(1|0) ≈ p and "
                "P(0|1) ≈ q",
                "runs whose formula's predictions from their weights are within 10 % "
                "of |p + q − 1| of p and 1 − q",
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
        "sec31_rank",
        "global_minimum",
        "paper",
        'Sec. 3.1: "the weight matrices are all approximately rank-one"',
        # App. D's tied model: the runs App. D's own rows read
        "(0.2, 0.3), the weight-tied model of App. D (no LayerNorm, ReLU, "
        "uni-embedding), every run",
        "runs whose largest s_2 / s_1 over every weight matrix is below 0.1",
        "fig-gm-appendix-d",
        rule=measures.appendix_d_property,
        reads={"records": "appd-uni-fp16-tied"},
        given={"prop": "rank_all"},
        uses=("load",),
        authors="appd",
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
)
