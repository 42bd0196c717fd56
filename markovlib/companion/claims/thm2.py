"""The claims of Thm 2 and Fig 3(a, c) (the bad local minimum), in page order."""

from __future__ import annotations

from .. import measures
from .claim import Claim

__all__ = ["CLAIMS"]

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "thm2",
        "bad_local_minima",
        "paper",
        "Thm 2, to second order, on (0.5, 0.8): at θ_π (tied) f = π₁, L = H(π), "
        "∇L = 0, the Hessian positive definite on (e, b) and zero elsewhere",
        "(0.5, 0.8), tied",
        "smallest Hessian eigenvalue on the (e, b) block; at θ_π: f = π₁, L = H(π), "
        "∇L = 0, the Hessian zero outside (e, b)",
        "thm-bad-local-minimum",
        exact=True,
    ),
    Claim(
        "thm2_descent",
        "bad_local_minima",
        "paper, as this book reads it",
        "Thm 2's local minimum, tested by descent on (0.5, 0.8): gradient descent on "
        "the exact loss from θ_π plus noise returns to H(π) (tied)",
        "(0.5, 0.8), tied, the theory model and GPT-2; N(0, 0.05²) on every parameter, "
        "4 draws each, 300 steps of exact gradient descent (paths of 10 states); the "
        "mirror chain (0.5, 0.2) as a control",
        "every descent back within 0.1 of the gap H(π) − H_rate of H(π); every "
        "descent on the mirror more than half-way down to H_rate",
        "fig-blm-perturbed",
        exact=True,
    ),
    Claim(
        "fig3a",
        "trapped",
        "paper",
        "Fig 3(a): tied runs end at H(π) on (0.5, 0.8)",
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
        "Fig 3(c, d), read from the learnt kernel: after a zero, a run at H(π) "
        "predicts π₁, an escaped one p",
        "(0.5, 0.8), GPT-2, tied",
        "learnt P(1|0) of every run at H(π) and every escaped run, and of the two "
        "this book's figure shows",
        "fig-blm-predictions",
        rule=measures.fig3c,
        reads={"trapped": "trap400-gpt2-tied-fp16"},
        authors="fig3",
    ),
    Claim(
        "fig3d_path",
        "bad_local_minima",
        "this book",
        "Fig 3(d)'s reading position by position, asked of (0.5, 0.8)'s tied runs: "
        "along test paths, after a zero, a run at H(π) predicts π₁, an escaped one p",
        "(0.5, 0.8), GPT-2, tied; 1024 test paths of the runs' length",
        "runs of each kind within 0.1 × |p − π₁| of their target at 90 % or more of "
        "the positions after a zero, over 1024 test paths",
        "fig-blm-predictions",
        rule=measures.fig3d_path,
        reads={"trapped": "trap400-gpt2-tied-fp16"},
        uses=("load",),
        authors="fig3",
        design="the paper draws Fig 3(d) along one test path (the summary does not "
        "name its chain); this row asks "
        "its reading of the runs of Fig 3(a, c) on (0.5, 0.8), each position's "
        "prediction averaged over 1024 test paths",
    ),
    Claim(
        "fig3c_untied",
        "trapped",
        "paper",
        "Fig 3(c): an untied run on (0.5, 0.8) predicts p after a zero",
        "(0.5, 0.8), GPT-2, untied (the cell of the 400-iteration untied grid: Fig 3 "
        "at their config's 400 iterations)",
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
        "Sec. 4.1: at the bad minimum the output ignores the input, f = π₁ (Thm 2's "
        "f = π₁ everywhere)",
        "(0.5, 0.8), GPT-2, tied, the runs at H(π)",
        "runs at H(π) predicting π₁ after a zero and after a one",
        "fig-trapped-survival",
        rule=measures.bad_minimum,
        reads={"records": "trap400-gpt2-tied-fp16"},
        uses=("load",),
        authors="fig3",
    ),
    Claim(
        "bad_minimum_bias",
        "trapped",
        "paper, as this book reads it",
        "Sec. 4.1: at the bad minimum f = σ(b) = π₁: the head's bias alone gives π₁",
        "(0.5, 0.8), GPT-2, tied, the runs at H(π)",
        "runs at H(π) whose head's bias alone, σ(b), is π₁",
        "fig-trapped-survival",
        rule=measures.bad_minimum_bias,
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
)
