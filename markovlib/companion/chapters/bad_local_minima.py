"""``book/bad_local_minima.ipynb``'s own numbers, checks and sentences: what its page
states beside the scorecard's claims."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "LABELS",
    "perturbation_text",
    "TRAP_KEYS",
    "trap_variant_texts",
    "trap_training_text",
]

# this page's label of each shipped group its claims read (claims.measured): the tied
# runs at the authors' budget by (model, precision), this page's longer float32 runs
LABELS = {
    "trap400-gpt2-tied-fp32": ("gpt2", "fp32"),
    "trap400-theory-tied-fp32": ("theory", "fp32"),
    "trap400-gpt2-tied-fp16": ("gpt2", "fp16"),
    "trap-gpt2-tied": "gpt2",
}


def perturbation_text(perturbed: dict, p: float, q: float, stable: bool) -> str:
    """The bad_local_minima chapter's sentence on gradient descent from θ_π + noise:
    per (model, chain) of ``perturbed`` (:func:`markovlib.analysis.perturb_theta_pi`
    results) how many runs returned to H(π) and how many left; then what Thm 2 says
    for this chain (``stable``: every run of the chain returned and every run of its
    mirror left, for every model)."""
    lines = [
        f"{m} model, {which} (p + q = {r.chain.switching:.2f}): "
        f"{int(r.returned.sum())} of {len(r.returned)} runs returned to $H(\\pi)$, "
        f"{int(r.left.sum())} left towards $H_{{\\rm rate}}$"
        for (m, which), r in perturbed.items()
    ]
    text = "Measured: " + "; ".join(lines) + ". "
    if p + q > 1:
        return text + (
            "As Thm 2 predicts, the tied point is stable for this chain (p + q > 1). "
            "On its mirror (p + q < 1), outside Thm 2, the (e, b) block has a "
            "negative eigenvalue and the point is unstable."
            if stable
            else "This is **not** the clean picture of Thm 2 for every model and "
            "chain; see the numbers."
        )
    if p + q < 1:
        return text + (
            "For this chain p + q < 1, so Thm 2 does not apply: the point is a "
            "saddle, and its mirror has p + q > 1."
        )
    return text + (
        "At p + q = 1 the curvature c vanishes and the second-order analysis is "
        "inconclusive."
    )


TRAP_KEYS = {  # the trap experiment's four tied models and their glue-name suffixes
    "gpt2": "gpt2",
    "theory": "theory",
    "theory + LN": "theory_ln",
    "gpt2, init 0.2": "gpt2_wide",
}


def trap_variant_texts(stats: dict, preset: str) -> dict[str, str]:
    """The bad_local_minima chapter's Markdown on its tied models (``stats``: model ->
    :class:`~markovlib.analysis.EscapeStats`): runs on the plateau ("k of n") and the
    median escape step of each model, and of ``preset`` at the read step and the end."""
    main = stats[preset]
    texts = {
        "blm_preset": f"`{preset}`",
        "trap_fraction_at_400": main.plateau_text(),
        "trap_fraction_end": main.plateau_text(True),
        "median_escape_step": main.median_text,
    }
    for name, key in TRAP_KEYS.items():
        texts[f"trap_fraction_{key}"] = stats[name].plateau_text()
        texts[f"median_escape_{key}"] = stats[name].median_text
    return texts


def trap_training_text(
    scale: str, converges: bool, p: float, q: float, found: Sequence[str]
) -> str:
    """The bad_local_minima chapter's sentence on its trained runs: the measured
    claims ``found`` (their values), unless the scale is too short or p + q <= 1."""
    if not converges:
        return f"At the `{scale}` scale the runs are far too short to say anything."
    if p + q <= 1:
        return (
            "For p + q < 1 Thm 2 does not apply: its point is no local minimum there; "
            "Sec. 4.1 says local minima exist for p + q < 1 and the standard Gaussian "
            "initialisation falls outside their basin (the trapped chapter computes "
            "part of that sentence)."
            if p + q < 1
            else "On p + q = 1 there is no gap (H(π) is the entropy rate): nothing to "
            "be trapped in."
        )
    return (
        f"Measured at the `{scale}` scale in float32: "
        + "; ".join(found)
        + ". At the authors' budget and precision the count changes: see "
        "{doc}`trapped`."
    )
