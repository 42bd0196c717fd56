"""Each trained claim's measurement, as a function of runs: the scorecard, the CLI and
the chapters call these, so a verdict is computed in one place.

A run enters as a :class:`~markovlib.companion.records.RunRecord` (its chain, learnt
kernel, test history and spec), built by :mod:`markovlib.companion.records`. Every
count of runs uses the one rule of :mod:`markovlib.analysis` (the share of the gap
H(π) − H_rate a run has learnt), never a tolerance in nats.

One module per figure, each rule beside the others of its figure: :mod:`.fig3`,
:mod:`.fig4`, :mod:`.fig5` (and the k-state threshold), :mod:`.depth` (Fig 1, Sec.
4.4), :mod:`.appendix_d`; what they all read and print in :mod:`.counts`. What a page
states beside these claims (a chapter's own numbers, checks and sentences) is in
:mod:`markovlib.companion.chapters`."""

from .appendix_d import (
    ALIGNED,
    APPD_MATRICES,
    APPD_PARTS,
    NEAR_RANK_ONE,
    NEAR_ZERO,
    aligned,
    appendix_d_control,
    appendix_d_properties,
    appendix_d_property,
    appendix_d_runs,
    appendix_d_table,
)
from .counts import (
    Measure,
    at_step,
    classes,
    grid_shares,
    run_table,
    survival_of,
    trap_count,
)
from .depth import (
    depth_factors,
    fig1_depths,
    higher_order,
    masking,
    plateau_steps,
    plateau_then_drop,
    trapped_starts,
)
from .fig3 import (
    bad_minimum,
    bias_prediction,
    escape_claim,
    fig3a,
    fig3c,
    fig3c_untied,
    float32_plateau,
    precision_traps,
    trap_models,
)
from .fig4 import (
    above_line,
    below_line,
    by_seed,
    cell_classes,
    cell_trap_table,
    fig4,
    fig4_cells,
    fig4_float32,
    trapped_text,
    untied_escape,
)
from .fig5 import (
    FIG5_FIGURE_SHARE,
    fig5_figure,
    fig5_halves,
    k_threshold,
    loss_share,
    threshold_sides,
)

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
    "NEAR_ZERO",
    "NEAR_RANK_ONE",
    "APPD_MATRICES",
    "APPD_PARTS",
    "ALIGNED",
    "aligned",
    "appendix_d_runs",
    "appendix_d_properties",
    "appendix_d_table",
    "run_table",
    "threshold_sides",
    "k_threshold",
]
