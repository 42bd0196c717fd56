"""The claims of Fig 1 and Sec. 4.4 (depth) and the poster's, in page order."""

from __future__ import annotations

from .. import measures
from .claim import Claim

__all__ = ["CLAIMS"]

CLAIMS: tuple[Claim, ...] = (
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
        "this book",
        "Sec. 4.4: depth ≥ 2 reaches H_rate regardless of weight tying and switching "
        "(the paper's claim; its runs, untied and on the mirror chain, are this "
        "book's: no script of the authors runs them)",
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
        'Abstract: deeper models "reliably converge to the ground-truth bigram", '
        "from the seeds that trapped one layer",
        "depth 2, GPT-2, tied, (0.5, 0.8), from 8 of the 11 seeds that trapped one "
        "layer (4 and 5 are in Fig 1's depth-2 runs, 26 left out: one ensemble of 8)",
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
        "random order-2 chains, one per run (the authors draw one per sequence), "
        "GPT-2, tied, depths 1-3, 2 heads",
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
        "Second order: masking helps (the poster's claim; the poster gives no "
        "settings)",
        "lag-2 chain, GPT-2, one layer, window 1 against full attention",
        "window-1 runs escaped, and above the full-attention run of their seed",
        "fig-depth-window",
        rule=measures.masking,
        reads={"window": "depth-lag2-window1", "full": "depth-lag2-L1"},
    ),
)
