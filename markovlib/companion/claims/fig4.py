"""The claims of Thm 3 and Fig 4 (the saddle, the grid of chains), in page order."""

from __future__ import annotations

from .. import measures, thesis
from .claim import Claim

__all__ = ["CLAIMS"]

CLAIMS: tuple[Claim, ...] = (
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
        reads={"records": "fig4-500-untied-fp16"},
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
        "Fig 4: tied cells above p + q = 1 collapse to the marginal, untied cells and "
        "tied cells below it do not",
        "the Fig 4 grid, GPT-2; 8 independently initialised runs per tied cell above "
        "the line, 3 per other cell",
        "tied cells above the line with at least half of their runs at H(π); runs of "
        "untied cells and of tied cells below the line at H(π) (none may be)",
        "fig-trapped-cells",
        rule=measures.fig4_cells,
        reads={
            "cells": "fig4-cells-400-tied-fp16",
            "tied": "fig4-400-tied-fp16",
            "untied": "fig4-500-untied-fp16",
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
        reads={"tied": "fig4-400-tied-fp16", "untied": "fig4-500-untied-fp16"},
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
        reads={"tied": "fig4-400-tied-fp16", "untied": "fig4-500-untied-fp16"},
        authors="fig4",
    ),
    Claim(
        "below_minima",
        "trapped",
        "paper, as this book reads it",
        "Sec. 4.1, as this book reads it: for p + q < 1 the follow-up paper's reduced "
        "model has minima at H(π) (curving upwards in e at (e, w) = (0, −1), past the "
        "saddle in w; downwards at w = 0), and tied runs from the standard "
        "initialisation escape",
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
)
