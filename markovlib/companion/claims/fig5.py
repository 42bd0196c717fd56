"""The claims of Fig 5 and the k-state threshold, in page order."""

from __future__ import annotations

from .. import measures
from .claim import Claim

__all__ = ["CLAIMS"]

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "fig5",
        "multi_state",
        "paper",
        'Fig 5: k = 5, above the threshold (p = 0.9) tied models "tend to get stuck '
        'in local minima (unigram), whereas those without converge to global minima" '
        "(Sec. 4.3)",
        "symmetric k = 5 chain, p = 0.9, the model of Fig 5 (no LayerNorm, ReLU), "
        "tied and untied",
        "runs on the claimed side per tying: tied at H(π), untied escaped",
        "fig-ms-fig5",
        rule=measures.fig5_halves,
        reads={
            "tied": "fig5-k5-theory-fp16-tied",
            "untied": "fig5-k5-theory-fp16-untied",
        },
        given={"half": "high"},
        authors="fig5",
        stays=True,
    ),
    Claim(
        "fig5_low",
        "multi_state",
        "paper",
        'Fig 5: k = 5, tied and untied models converge to H_rate "even at p = 0.6" '
        "(Sec. 4.3; and at p = 0.1, 0.3)",
        "symmetric k = 5 chains, p ∈ {0.1, 0.3, 0.6}, the model of Fig 5 (no "
        "LayerNorm, ReLU), tied and untied",
        "runs that escaped per tying",
        "fig-ms-fig5",
        rule=measures.fig5_halves,
        reads={
            "tied": "fig5-k5-theory-fp16-tied",
            "untied": "fig5-k5-theory-fp16-untied",
        },
        given={"half": "low"},
        authors="fig5",
    ),
    Claim(
        "fig5_figure",
        "multi_state",
        "paper",
        "Fig 5 as drawn: tied runs at p = 0.9 end (iteration 4000, the figure's "
        "edge) where the authors' curves end, at 0.24 of the gap (0.0089 nats below "
        "H(π)), not at H(π) as the text says",
        "symmetric k = 5 chain, p = 0.9, the model of Fig 5 (no LayerNorm, ReLU), tied",
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
        "runs on the claimed side per half (p ≤ 0.6, p = 0.9) and tying",
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
        "runs on the claimed side per half (p ≤ 0.6, p = 0.9) and tying",
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
)
