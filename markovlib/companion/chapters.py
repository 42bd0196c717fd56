"""Each chapter's own numbers, checks and sentences: what a page states beside the
scorecard's claims (:mod:`markovlib.companion.measures`).

Grouped by chapter in the order of the book (``_toc.yml``): a chapter calls these
instead of defining functions in a cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .. import ccmc, theory
from ..analysis import cell_shares, curvature_c
from ..chains import (
    MarkovChain,
    binary,
    binary_entropy,
    lag_one_correlation,
    symmetric,
)
from ..train import one_cycle_factor
from .measures import (
    APPD_MATRICES,
    Measure,
    RunRecord,
    above_line,
    appendix_d_runs,
    by_seed,
    fig4,
    grid_shares,
    survival_of,
)
from .notebook import shown_number

__all__ = [
    "APPD_ROWS",
    "appendix_d_rows",
    "runs_complete",
    "chain_facts",
    "transition_table",
    "transition_facts",
    "sampler_checks",
    "marginal_checks",
    "entropy_facts",
    "entropy_checks",
    "entropy_grid_checks",
    "symmetric_facts",
    "symmetric_checks",
    "parameter_facts",
    "parameter_checks",
    "forward_checks",
    "rank_ratio_table",
    "weights_at",
    "decay_factor",
    "appendix_d_steps",
    "change_text",
    "construction_claim",
    "perturbation_text",
    "TRAP_KEYS",
    "trap_variant_texts",
    "trap_training_text",
    "fig4_kernel_maps",
    "saddle_sides_text",
    "saddle_grid_text",
    "thm3_holds",
    "fig4_by_grid",
    "by_seed_text",
    "gradient_table",
    "zero_share_text",
    "crossover_text",
    "crossover_lines",
    "plateau_ends",
    "InitialisationVerdict",
    "initialisation_verdict",
    "initialisation_trap_text",
    "most_learnt",
    "shares_text",
    "ccmc_equivalence_facts",
    "ccmc_estimation_facts",
    "ccmc_rate",
    "ccmc_generation_report",
    "ccmc_generation_facts",
    "CollapseVerdict",
    "ccmc_collapse",
    "ccmc_mean_field_text",
    "ccmc_checks",
    "ccmc_claims",
]


# --------------------------------------------------------------------- several chapters
def runs_complete(runs, steps: int) -> bool:
    """Whether every run's history has ``steps`` + 1 rows and finite test losses."""
    return all(
        len(r.history) == steps + 1 and np.isfinite(r.test_history["test_loss"]).all()
        for r in runs
    )


# ---------------------------------------------------------------- the framework chapter
SWITCHING_REGIMES = {
    1: "above 1: the chain prefers to switch state (its lag-one correlation is "
    "negative). This is the regime of Theorem 2, where a tied single-layer "
    "transformer has a bad local minimum",
    -1: "below 1: the chain prefers to keep its state (its lag-one correlation is "
    "positive). In this regime the paper finds that training always reaches the "
    "global minimum, tied or not",
    0: "exactly 1: consecutive states are independent, so the chain is an i.i.d. "
    "sequence and there is nothing to learn beyond its marginal law",
}  # keyed by the side of p + q = 1: -1 below, 0 on, 1 above
EXACT = 1e-12  # the framework chapter's exact identities, up to floating point


def chain_facts(p: float, q: float) -> dict:
    """The framework chapter's numbers of binary(p, q) (Sec. 2): π, the switching
    factor p + q, the lag-one correlation 1 - p - q and the regime they put it in."""
    chain = binary(p, q)
    pi, s = chain.stationary(), chain.switching
    side = int(np.sign(round(s - 1, 12)))
    return dict(
        fw_p=p,
        fw_q=q,
        fw_pi_0=float(pi[0]),
        fw_pi_1=float(pi[1]),
        fw_switching=round(s, 6),
        fw_lag_one_corr=round(1 - p - q, 6),
        fw_regime=SWITCHING_REGIMES[side],
    )


def transition_table(chain: MarkovChain, est: dict) -> pd.DataFrame:
    """The sampler's estimates of p = P(1|0) and q = P(0|1) against the truth, with
    their transitions (counts), standard errors and z-scores; shown through
    :func:`markovlib.companion.notebook.page_table`."""
    at = ([0, 1], [1, 0])
    return pd.DataFrame(
        {
            "transition": ["P(1 | 0) = p", "P(0 | 1) = q"],
            "true": chain.P[at],
            "empirical": est["P_hat"][at],
            "transitions n_i": np.asarray(est["n_from"]).astype(np.int64),
            "std. error": est["stderr"][at],
            "z": est["z"][at],
        }
    )


def transition_facts(est: dict, z_max: float) -> dict:
    """Glued numbers of the sampler check: transitions counted, the estimates of p and
    q, their standard errors and the largest |z|."""
    return dict(
        fw_n_transitions=int(est["counts"].sum()),
        fw_p_hat=float(est["P_hat"][0, 1]),
        fw_q_hat=float(est["P_hat"][1, 0]),
        fw_p_stderr=float(est["stderr"][0, 1]),
        fw_q_stderr=float(est["stderr"][1, 0]),
        fw_transition_zmax=z_max,
    )


def sampler_checks(chain: MarkovChain, x, est: dict, limit: float) -> dict[str, bool]:
    """The sampler's paths ``x`` are binary and every transition is counted, and the
    estimated kernel ``est`` lies within ``limit`` standard errors of the chain's."""
    paths = np.asarray(x)
    return {
        "binary paths, every transition counted": set(np.unique(paths)) <= {0, 1}
        and int(est["counts"].sum()) == paths.shape[0] * (paths.shape[1] - 1),
        f"transition frequencies within {limit:g} std. errors": bool(
            np.abs(est["z"][[0, 1], [1, 0]]).max() <= limit
            and np.all(np.abs(est["P_hat"] - chain.P) <= limit * est["stderr"] + EXACT)
        ),
    }


def marginal_checks(
    z_stationary: float, uniform, exact_uniform, n_paths: int, limit: float
) -> dict[str, bool]:
    """From π the law of x_n is π at every n (the largest deviation ``z_stationary``
    within ``limit`` standard errors); from the uniform start the measured frequencies
    ``uniform`` follow the exact law ``exact_uniform`` within ``limit`` as well."""
    se = np.sqrt(exact_uniform * (1 - exact_uniform) / n_paths)
    return {
        "stationary start: pi_1 at every position": z_stationary <= limit,
        "uniform start: the exact marginal law": bool(
            np.all(np.abs(uniform - exact_uniform) <= limit * se + 1e-9)
        ),
    }


def entropy_facts(chain: MarkovChain, grid, rate, unigram) -> dict:
    """Glued numbers of the entropy section (Sec. 2): H_rate, H(π), their gap (also in
    % of H(π)), and the (p, q) grid's range and largest gap."""
    H_rate, H_pi, gap = (
        chain.entropy_rate(),
        chain.unigram_entropy(),
        chain.mutual_information(),
    )
    return dict(
        fw_entropy_rate=H_rate,
        fw_unigram_entropy=H_pi,
        fw_mutual_information=gap,
        fw_gap_percent=100 * gap / H_pi if H_pi > 0 else 0.0,
        fw_grid_min=float(grid[0]),
        fw_grid_max=float(grid[-1]),
        fw_grid_n=len(grid),
        fw_gap_max=float((unigram - rate).max()),
        fw_log2=float(np.log(2)),
    )


def entropy_checks(chain: MarkovChain) -> dict[str, bool]:
    """H_rate = π_0 h(p) + π_1 h(q), H(π) = h(π_1), their gap I(x_n; x_{n+1}) > 0 off
    p + q = 1 and 0 on it (Sec. 2), for one binary chain."""
    p, q, pi = chain.P[0, 1], chain.P[1, 0], chain.stationary()
    H_rate, H_pi, gap = (
        chain.entropy_rate(),
        chain.unigram_entropy(),
        chain.mutual_information(),
    )
    closed = pi[0] * binary_entropy(p) + pi[1] * binary_entropy(q)
    return {
        "pi = (q, p) / (p + q)": np.allclose(
            pi, np.array([q, p]) / (p + q), atol=EXACT, rtol=0
        ),
        "corr(x_n, x_n+1) = 1 - p - q": abs(lag_one_correlation(chain) - (1 - p - q))
        < 1e-9,
        "H_rate and H(pi): closed forms": abs(H_rate - closed) < EXACT
        and abs(H_pi - binary_entropy(pi[1])) < EXACT
        and abs(gap - (H_pi - H_rate)) < EXACT,
        "gap > 0 off p + q = 1, 0 on it": abs(gap) < 1e-9
        if abs(p + q - 1) < 1e-12
        else (gap > EXACT or not p * q > 0),
    }


def entropy_grid_checks(grid, rate, unigram) -> dict[str, bool]:
    """The (p, q) maps of H_rate and H(π) (rows q, columns p): closed forms, the gap
    zero exactly on p + q = 1, symmetry about p = q, H(π) constant along rays, log 2
    on the diagonal, and the largest gap at both corners."""
    gap, grid = unigram - rate, np.asarray(grid)
    PG, QG = np.meshgrid(grid, grid)
    pi1, on_line = PG / (PG + QG), np.abs(PG + QG - 1) < 1e-9
    half, ln2, top, exact = (
        int(np.argmin(np.abs(grid - 0.5))),
        np.log(2),
        gap.max(),
        dict(atol=EXACT, rtol=0),
    )
    n = len(grid) // 2
    return {
        "grid: closed forms": np.allclose(
            rate, (1 - pi1) * binary_entropy(PG) + pi1 * binary_entropy(QG), **exact
        )
        and np.allclose(unigram, binary_entropy(pi1), **exact),
        "grid: gap zero exactly on p + q = 1": on_line.sum() == len(grid)
        and bool(
            np.all(np.abs(gap[on_line]) < EXACT) and np.all(gap[~on_line] > EXACT)
        ),
        "grid: symmetric about p = q": all(
            np.allclose(v, v.T, **exact) for v in (rate, unigram, gap)
        ),
        "grid: H(pi) constant along rays": np.allclose(
            unigram[:n, :n], unigram[1 : 2 * n + 1 : 2, 1 : 2 * n + 1 : 2], **exact
        ),
        "grid: H(pi) = log 2 on p = q, H_rate only at 1/2": np.allclose(
            np.diag(unigram), ln2, **exact
        )
        and abs(rate[half, half] - ln2) < EXACT
        and np.sum(rate > ln2 - 1e-9) == 1,
        "grid: largest gap at both corners": max(
            abs(gap[0, 0] - top), abs(gap[-1, -1] - top)
        )
        < EXACT
        and top < ln2,
    }


def symmetric_facts(k: int, p: float) -> dict:
    """Glued numbers of the symmetric k-state chain that leaves its state with
    probability p: H_rate, log k = H(π) and their gap."""
    chain = symmetric(k, p)
    return dict(
        fw_multi_k=k,
        fw_multi_p=p,
        fw_multi_entropy_rate=chain.entropy_rate(),
        fw_multi_log_k=float(np.log(k)),
        fw_multi_gap=chain.mutual_information(),
    )


PAPER_ENTROPIES = {(0.5, 0.8): (0.6190, 0.6663), (0.2, 0.3): (0.5446, 0.6730)}
PAPER_SYMMETRIC = (5, 0.1, 0.4637)  # k, p and H_rate of the paper's k-state example


def symmetric_checks(k: int, p: float) -> dict[str, bool]:
    """The symmetric chain: uniform π, H(π) = log k and the closed-form H_rate; and the
    paper's check values (H_rate, H(π)) of its binary and k-state examples, to 4
    decimals."""
    chain = symmetric(k, p)
    rate = (
        -(1 - p) * np.log(1 - p) - p * np.log(p / (k - 1)) if p < 1 else np.log(k - 1)
    )
    k5, p5, rate5 = PAPER_SYMMETRIC
    return {
        "k-state chain: uniform pi, H(pi) = log k, closed-form H_rate": np.allclose(
            chain.stationary(), 1 / k, atol=1e-9
        )
        and abs(chain.unigram_entropy() - np.log(k)) < 1e-9
        and abs(chain.entropy_rate() - rate) < 1e-9,
        "the paper's check values": all(
            abs(binary(*c).entropy_rate() - hr) < 5e-5
            and abs(binary(*c).unigram_entropy() - hp) < 5e-5
            for c, (hr, hp) in PAPER_ENTROPIES.items()
        )
        and abs(symmetric(k5, p5).entropy_rate() - rate5) < 5e-5,
    }


def parameter_facts(n_params: dict, d: int, max_len: int) -> dict:
    """Glued parameter counts of the four models ((preset, tying) -> count), the
    positional table's T d and its share of the tied theory model."""
    facts = {f"fw_n_params_{pr}_{t}": n for (pr, t), n in n_params.items()}
    return facts | dict(
        fw_d_model=d,
        fw_max_len=max_len,
        fw_n_params_positional=max_len * d,
        fw_positional_percent=100 * max_len * d / n_params["theory", "tied"],
    )


def parameter_checks(configs: dict, n_params: dict, d: int) -> dict[str, bool]:
    """Each model's parameter count is the closed form of :func:`theory.n_params`;
    untying adds k d (k = 2), GPT-2's layer norms (2 L + 1) d (L = 1)."""
    return {
        "parameter counts: the formula in the text": all(
            n_params[key] == theory.n_params(cfg) for key, cfg in configs.items()
        ),
        "untied = tied + k d; GPT-2 = theory + (2L + 1) d": all(
            n_params[pr, "untied"] - n_params[pr, "tied"] == 2 * d
            for pr in ("theory", "gpt2")
        )
        and all(
            n_params["gpt2", t] - n_params["theory", t] == 3 * d
            for t in ("tied", "untied")
        ),
    }


def forward_checks(shapes: dict, init_dev: dict, batch: int, length: int) -> dict:
    """The forward pass returns (batch, length, 2) logits, and at initialisation every
    prediction is near 1/2 (within 0.02; GPT-2, after its final layer norm, 0.2)."""
    return {
        "forward pass: (batch, length, k) logits": all(
            shape == (batch, length, 2) for shape in shapes.values()
        ),
        "initialisation: probabilities near 1/2": init_dev["theory"] < 0.02
        and init_dev["gpt2"] < 0.2,
    }


# ----------------------------------------------------------- the global_minimum chapter
APPD_ROWS = {"App. D model": "tied", "tied": "gpt2", "untied": "untied"}


def appendix_d_rows(runs: dict, records: dict, x, length: int) -> tuple[dict, dict]:
    """App. D inside every run (``runs``/``records`` by label: the "App. D model" and
    the GPT-2 "tied" and "untied" runs): :func:`markovlib.theory.appendix_d` of each on
    the paths ``x``, and the scorecard's rows (:func:`~markovlib.companion.measures.
    appendix_d_runs`: the four rows from App. D's model, the GPT-2 runs as this
    book's controls; a label without runs gives no row)."""
    inside = {
        label: [theory.appendix_d(r.model, x, length) for r in rs]
        for label, rs in runs.items()
    }
    rows = {APPD_ROWS[label]: label for label in runs if inside[label]}
    measured = appendix_d_runs(
        {row: inside[label] for row, label in rows.items()},
        {row: records[label] for row, label in rows.items()},
    )
    return inside, measured


def rank_ratio_table(first: dict) -> pd.DataFrame:
    """App. D's s_2/s_1 of every weight matrix, one column per model (``first``: label
    -> :func:`markovlib.theory.appendix_d`); a matrix a model lacks (the tied model's
    head is its embedding) says so instead of NaN."""
    names = list(dict.fromkeys(n for d in first.values() for n in d["rank_ratio"]))
    table = pd.DataFrame(
        {
            label: [
                f"{d['rank_ratio'][n]:.3f}" if n in d["rank_ratio"] else "tied to wte"
                for n in names
            ]
            for label, d in first.items()
        },
        index=[n.replace("blocks.0.", "").replace(".weight", "") for n in names],
    )
    table["App. D names it"] = [n.endswith(APPD_MATRICES) for n in names]
    return table


def weights_at(result, which: str = "checkpoint"):
    """The model of a trained run with its ``"checkpoint"`` weights (those after
    step ``result.checkpoint_step``) or its ``"final"`` ones; None where the run kept no
    checkpoint (runs shorter than the checkpoint step)."""

    if which == "final":
        return result.model
    if which != "checkpoint":
        raise ValueError(f"which must be 'checkpoint' or 'final'; got {which!r}")
    return result.checkpoint_model()


def decay_factor(train, start: int = 0) -> float:
    """How much AdamW's decoupled weight decay alone shrinks a decayed matrix over the
    steps after ``start`` of a run trained with ``train`` (a TrainConfig):
    Π (1 − lr_t · weight_decay) over the schedule's learning rates. (The token and
    positional embeddings are not decayed unless ``train.decay_embeddings``.)"""

    factors = [
        one_cycle_factor(t, train.steps) if train.schedule == "one-cycle" else 1.0
        for t in range(start, train.steps)
    ]
    return float(np.prod([1 - train.lr * f * train.weight_decay for f in factors]))


def appendix_d_steps(result, x, length: int) -> pd.DataFrame:
    """App. D's numbers of one run at its checkpoint and at the end (one row per step):
    the paper's attention ratio, the positional spread with its two norms, and s_1,
    s_2 and s_2 / s_1 of the matrices App. D names
    (:data:`~markovlib.companion.measures.APPD_MATRICES`)."""

    rows = {}
    for which, step in (("checkpoint", result.checkpoint_step), ("final", None)):
        model = weights_at(result, which)
        if model is None:
            continue
        d = theory.appendix_d(model, x, length)
        with torch.no_grad():
            pos = model.wpe.weight[:length].double()
            emb = model.wte.weight.double()
        row = {
            "attention ratio": d["ratio_mean"],
            "positional spread": d["spread"],
            "mean ‖pₙ − p̄‖": float((pos - pos.mean(0)).norm(dim=-1).mean()),
            "‖e₁ − e₀‖": float((emb[1] - emb[0]).norm()),
        }
        for name, s in d["svals"].items():
            if name.endswith(APPD_MATRICES):
                short = name.split(".")[-2].replace("_1", "₁").replace("_2", "₂")
                row[f"{short} s₁"], row[f"{short} s₂"] = float(s[0]), float(s[1])
                row[f"{short} s₂/s₁"] = d["rank_ratio"][name]
        rows[result.train_config.steps if step is None else int(step)] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("step")


def change_text(table: pd.DataFrame, column: str) -> str:
    """How ``column`` of a per-step table (:func:`appendix_d_steps`) changed from its
    first to its last row: "grew from a to b" or "fell from a to b"; a table of one
    row (a run shorter than the checkpoint step) says so."""
    a, b = float(table[column].iloc[0]), float(table[column].iloc[-1])
    if len(table) < 2:
        return f"is {b:.3f} (no checkpoint: the run is shorter)"
    return f"{'grew' if b > a else 'fell'} from {a:.3f} to {b:.3f}"


def construction_claim(
    constructions: dict, slices: dict, rate: float, tol: float = 1e-9
) -> Measure:
    """Thm 1: every construction θ* predicts the kernel (|f − P| and ||∇L|| < 1e-6),
    its exact loss is H_rate within ``tol``, and no loss slice through it goes below
    H_rate while each touches it at its middle point t = 0; value: the largest
    |L(θ*) − H_rate|."""
    dev = max(abs(c["loss"] - rate) for c in constructions.values())
    exact = all(
        c["kernel_error"] < 1e-6 and c["grad"] < 1e-6 for c in constructions.values()
    )
    flat = all(
        s.min() >= rate - tol and abs(s[len(s) // 2] - rate) < tol
        for s in slices.values()
    )
    return Measure(f"{dev:.1e}", bool(dev < tol and exact and flat))


# --------------------------------------------------------- the bad_local_minima chapter
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
            "As Thm 2 predicts, the tied point is stable for this chain (p + q > 1) "
            "and unstable for its mirror."
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
        return "For p + q <= 1 there is no bad local minimum to be trapped in (Thm 2)."
    return (
        f"Measured at the `{scale}` scale in float32: "
        + "; ".join(found)
        + ". At the authors' budget and precision the count changes: see "
        "{doc}`trapped`."
    )


# ------------------------------------------------------------------ the saddles chapter
def fig4_kernel_maps(
    records: Sequence[RunRecord], grid: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """Fig 4's two maps of a grid of runs, rows q and columns p: the mean learnt
    P(0|1) per cell, and the mean share of the gap (NaN on p + q = 1)."""
    cells: dict = {}
    for r in records:
        cells.setdefault((r.spec.chain["p"], r.spec.chain["q"]), []).append(
            r.kernel[1, 0]
        )
    return cell_shares(cells, grid, grid), grid_shares(records, grid, grid)


def saddle_sides_text(
    summary: dict, untied: Measure, scale: str, converges: bool, chain_name: str
) -> str:
    """The saddles chapter's sentence on its tied and untied runs: ``summary`` maps
    (model, tying) to :class:`~markovlib.analysis.EscapeStats`, ``untied`` is the
    untied runs' :func:`~markovlib.companion.measures.escape_claim`."""
    g2u, g2t = summary["gpt2", "untied"], summary["gpt2", "tied"]
    th = summary["theory", "tied"]
    text = (
        f"Measured at the `{scale}` scale ({g2t.n} runs per model on {chain_name}): "
        f"untied, {untied.value}; tied, {g2t.n_escaped} of {g2t.n} GPT-2 runs and "
        f"{th.n_escaped} of {th.n} theory-model runs escaped (median escape step of "
        f"the GPT-2 runs: untied {g2u.median_text}, tied {g2t.median_text})."
    )
    return (
        text if converges else text + " These runs are far too short to say anything."
    )


def saddle_grid_text(fig4: Measure, scale: str, converges: bool) -> str:
    """The saddles chapter's sentence on its (p, q) grid (``fig4``:
    :func:`~markovlib.companion.measures.fig4`)."""
    text = f"Measured at the `{scale}` scale in float32: {fig4.value}."
    return text if converges else text + " (Far too short to converge.)"


def thm3_holds(hessian, chain: MarkovChain, pairing: float, drop: float) -> bool:
    """Thm 3 at θ_π, untied: the eigenvalues -c and +c, d times each, the smallest
    -|c| as the closed form, its direction pairs e with -a and the loss drops along
    it (False on p + q = 1, where c = 0)."""
    ev, c = np.asarray(hessian.eigenvalues), curvature_c(chain)
    d = len(ev[hessian.blocks["e"]])
    n_minus, n_plus = (int(np.sum(np.abs(ev + s * abs(c)) < 1e-6)) for s in (1, -1))
    closed = theory.unigram_curvature(chain, tied=False)
    return bool(
        abs(c) > 1e-12
        and n_minus == n_plus == d
        and hessian.min_eigenvalue < 0
        and abs(hessian.min_eigenvalue - closed) < 1e-6
        and abs(pairing + np.sign(c)) < 1e-6
        and drop > 0
    )


# ------------------------------------------------------------------ the trapped chapter
def fig4_by_grid(groups) -> dict[str, Measure]:
    """:func:`~markovlib.companion.measures.fig4` of each grid of ``groups`` (a
    :class:`markovlib.companion.records.Groups` keyed (grid name, tying)) whose tied
    and untied runs
    are all here."""
    names = dict.fromkeys(name for name, _ in groups.wanted)
    return {
        n: fig4(groups.records[n, "tied"], groups.records[n, "untied"])
        for n in names
        if groups.complete((n, "tied"), (n, "untied"))
    }


def by_seed_text(records: Sequence[RunRecord]) -> str:
    """Runs above p + q = 1 at H(π) per seed: "seed s: t of n cells; ..." (each
    cell of a grid holds one run per seed)."""
    seeds = by_seed(above_line(records))
    text = "; ".join(f"seed {s}: {t} of {n} cells" for s, (n, t) in seeds.items())
    return text or "no run shipped yet"


def gradient_table(table: pd.DataFrame) -> pd.DataFrame:
    """A :func:`markovlib.precision.gradient_comparison` table as the page shows it: 4
    decimals, and "none (all 0)" for the cosine of a gradient that is exactly zero
    (no direction to compare)."""
    shown = table.round(4).astype(object)
    cosines = [c for c in table.columns if c.endswith("cosine")]
    shown[cosines] = shown[cosines].where(table[cosines].notna(), "none (all 0)")
    return shown


def zero_share_text(table: pd.DataFrame, rows: Sequence[str]) -> str:
    """The smallest share of exactly-zero fp16 gradient entries over ``rows`` of a
    :func:`markovlib.precision.gradient_comparison` table: "all" or "at least 97 %"."""
    share = float(table.loc[list(rows), "fp16 zero share"].min())
    return "all" if share == 1 else f"at least {share:.0%}".replace("%", " %")


def crossover_text(cross) -> str:
    """Runs at H(π) per optimiser and start of a
    :func:`markovlib.analysis.optimizer_crossover`, as MyST: "gd from $\\theta_\\pi$ +
    noise: k of n at $H(\\pi)$; ..."."""
    return "; ".join(
        f"{opt} from {_STARTS.get(start, start)}: {cross.at_unigram((opt, start))} of "
        f"{len(v)} at $H(\\pi)$"
        for (opt, start), v in cross.losses.items()
    )


_STARTS = {"θ_π + noise": r"$\theta_\pi$ + noise"}  # the starts as MyST maths


def crossover_lines(cross) -> str:
    """One line per optimiser and start of a
    :func:`markovlib.analysis.optimizer_crossover`: the share of the gap each run
    covered at the end, to 3 decimals (no negative zero)."""
    return "\n".join(
        f"{opt:8s} from {start:13s}: share of the gap at the end "
        + ", ".join(shown_number(round(v, 3) + 0.0) for v in cross.shares((opt, start)))
        for opt, start in cross.losses
    )


def plateau_ends(records: Sequence[RunRecord]) -> pd.DataFrame:
    """The runs above p + q = 1: their distance p + q - 1, the step where each run's
    test loss first covers 90 % of the gap (NaN: never) and its last step."""
    rows = []
    for r in above_line(records):
        first = survival_of([r]).escapes[0]
        distance = r.spec.chain["p"] + r.spec.chain["q"] - 1
        rows.append((distance, np.nan if first is None else float(first), r.steps))
    return pd.DataFrame(rows, columns=["above_line", "escape", "steps"])


# ----------------------------------------------------------- the initialisation chapter
@dataclass(frozen=True)
class InitialisationVerdict:
    """What the initialisation chapter concludes from its manifold runs: per chain the
    agreement of gradient descent with the paper's flow and with the flow in the full
    model's metric, AdamW's agreement and undecided runs (``rows``), and the sentences
    that say so."""

    rows: dict[str, dict]
    agreement: float  # share of all GD runs that end where the paper's flow predicts
    escaped_below: bool  # every GD run started 'local' on the p + q < 1 chain escaped
    metric_better: bool  # the full model's metric predicts at least as well, per chain
    portrait: str
    full: str


def initialisation_verdict(
    chains: dict[str, tuple[float, float]],
    init_local: dict[tuple[str, str], float],
    gd: dict,
    adam: dict,
    pred: dict[str, np.ndarray],
    pred_metric: dict[str, np.ndarray],
) -> InitialisationVerdict:
    """The initialisation chapter's verdict: ``chains`` names (p, q) of the chain and
    its mirror, ``init_local[(init, chain)]`` the share of an initialisation the reduced
    flow sends to a local minimum ('N(0, 0.02²)' and 'init 0.2'), ``gd`` and ``adam``
    the :class:`~markovlib.dynamics.ManifoldRuns` per chain, ``pred`` and
    ``pred_metric`` the basins predicted by the paper's flow and by the flow in the full
    model's metric."""
    below = next(c for c, (p, q) in chains.items() if p + q < 1)
    above = next(c for c in chains if c != below)
    rows = {
        c: dict(
            paper=gd[c].agreement(pred[c]),
            metric=gd[c].agreement(pred_metric[c]),
            adam=adam[c].agreement(pred[c]),
            undecided=int(np.sum(adam[c].found == "undecided")),
        )
        for c in chains
    }
    portrait = _basin_shares_text(chains, init_local, above, below)
    local_below = pred[below] == "local"
    escaped_below = bool(np.all(gd[below].found[local_below] == "global"))
    metric_better = all(r["metric"] >= r["paper"] for r in rows.values())
    agreement = float(np.mean([gd[c].found == pred[c] for c in chains]))
    n_runs = sum(len(pred[c]) for c in chains)
    full = _flow_agreement_text(agreement, n_runs, rows, metric_better)
    if escaped_below and np.any(local_below):
        full += _kink_escape_text(gd[below], local_below)
    full += (
        f"{adam[above].how}: "
        + ", ".join(
            f"{r['adam']:.0%} as predicted ({r['undecided']} undecided)"
            for r in rows.values()
        )
        + ", this chain then the mirror."
    )
    return InitialisationVerdict(
        rows, agreement, escaped_below, metric_better, portrait, full
    )


def _basin_shares_text(chains, init_local: dict, above: str, below: str) -> str:
    """The share of each initialisation that the reduced flow sends to a local minimum,
    on each side of p + q = 1."""
    std = {c: init_local["N(0, 0.02²)", c] for c in chains}
    wide = {c: init_local["init 0.2", c] for c in chains}
    portrait = (
        f"For the chain with p + q > 1 the reduced flow sends {std[above]:.0%} of the "
        f"standard initialisations and {wide[above]:.0%} of those at 0.2 to a local "
        f"minimum; for the one with p + q < 1, {std[below]:.0%} and {wide[below]:.0%}. "
    )
    if std[above] == 1 and std[below] == 0:
        portrait += (
            "The standard initialisation sits next to the origin, where the level sets "
            "hug e = 0: there the sign of p + q - 1 alone decides the basin."
        )
    return portrait


def _flow_agreement_text(
    agreement: float, n_runs: int, rows: dict, metric_better: bool
) -> str:
    """How often gradient descent on the full model ends where the reduced flow
    predicts, and the full model's metric where it predicts better."""
    text = (
        "Gradient descent on the full model ends where the paper's reduced flow "
        f"predicts in {agreement:.0%} of the {n_runs} runs. "
    )
    if agreement < 1 and metric_better:
        text += (
            "The full model's own metric moves the boundary (the flow in that metric "
            "predicts "
            + ", ".join(f"{r['metric']:.0%}" for r in rows.values())
            + " of the runs, this chain then the mirror). "
        )
    return text


def _kink_escape_text(runs, local: np.ndarray) -> str:
    """Why the p + q < 1 runs started in the reduced model's local basin all escape:
    its 'local minima' sit on the ReLU's kink."""
    common = float(np.median(runs.final["common"][local]))
    return (
        f"For p + q < 1 none of the {int(np.sum(local))} runs started in the "
        "reduced model's local basin stays there: those 'local minima' sit on the "
        "kink of the ReLU neuron (its pre-activation is 0 at e = 0), and the full "
        "model leaves them off the manifold; at the end the embeddings' common "
        f"mode $\\|E_0 + E_1\\|/2$ is {common:.2f} (median; 0 on the manifold). "
    )


def initialisation_trap_text(
    scale: str, converges: bool, pred_local, ended_local: dict, per_run: float
) -> tuple[str, str]:
    """The initialisation chapter's sentences on the trap runs of bad_local_minima
    (trained at ``scale``): the reduced flow's prediction ``pred_local`` (per theory
    run), the runs that ended nearer H(π) (``ended_local``, per model) and the per-run
    agreement; returns (the paragraph, the headline)."""
    theory_local, wide = ended_local["theory"].mean(), ended_local["gpt2, init 0.2"]
    text = (
        f"Measured at the `{scale}` scale: the reduced flow puts "
        f"{np.mean(pred_local):.0%} of the theory model's standard initialisations in "
        f"the local basin; {theory_local:.0%} of those runs ended nearer $H(\\pi)$ "
        f"than $H_{{\\rm rate}}$ (per-run agreement {per_run:.0%}), and "
        f"{wide.mean():.0%} of the GPT-2 "
        "runs initialised at 0.2 (a model with layer norm, outside the reduction). "
    )
    if not converges:
        text += (
            'These runs are far too short to say anything; re-run with `scale="cpu"` '
            'or `"paper"`.'
        )
    headline = (
        f"From the standard initialisation the reduced flow sends "
        f"{np.mean(pred_local):.0%} of the theory model's runs on this chain to a "
        f"local minimum; in {{doc}}`bad_local_minima` {theory_local:.0%} of them ended "
        f"nearer $H(\\pi)$ than $H_{{\\rm rate}}$ (`{scale}` scale)."
    )
    return text, headline


# -------------------------------------------------------------- the multi_state chapter
def most_learnt(records: Sequence[RunRecord], p: float) -> dict[str, object]:
    """The run of ``records`` on the chain p that learnt most: p, its class, its share
    of the gap, the range of its learnt probabilities of staying put K_ii and the
    chain's 1 - p ("not shipped" when no run is on that chain)."""
    on = [r for r in records if r.spec.chain["p"] == p]
    top = max(on, key=lambda r: r.share) if on else None
    stay = top.kernel.diagonal() if top else None
    return {
        "p": p,
        "class": top.cls if top else "not shipped",
        "share": round(top.share, 2) if top else "–",
        "stay": f"{stay.min():.3f} to {stay.max():.3f}" if top else "not shipped",
        "true": round(1 - p, 3),
    }


# -------------------------------------------------------------------- the depth chapter
def shares_text(records: Sequence[RunRecord]) -> str:
    """Each run's share of the gap, to three decimals, as the chapters print them."""
    return " ".join(f"{r.share:.3f}" for r in records)


# --------------------------------------------------------------------- the CCMC chapter
RATE_SLOPE, RATE_TOL = -0.5, 0.15  # the n^(-1/2) rate, read within ±0.15 of the slope
COLLAPSED_ABOVE = 0.9  # a window one token holds more than 90 % of has collapsed
MARKOV_MIXES_BELOW = 0.5  # ... while the Markov chain's top token holds under half


def ccmc_equivalence_facts(eq: dict, n_prompts: int) -> tuple[dict, str]:
    """Glued numbers and the printed line of the CCMC theorem's check
    (:func:`markovlib.ccmc.equivalence` over ``n_prompts`` prompts)."""
    facts = dict(
        cc_nprompts=n_prompts,
        cc_maxdiff=eq["max_diff"],
        cc_maxdiff_pos=eq["max_diff_pos"],
        cc_base_diff=eq["base_diff"],
        cc_absent_share=eq["absent_share"],
    )
    text = (
        f"{n_prompts} prompts: max difference {eq['max_diff']:.1e} (plain), "
        f"{eq['max_diff_pos']:.1e} (positional), {eq['base_diff']:.1e} (base chain); "
        f"{eq['absent_share']:.0%} of the prompts miss some token"
    )
    return facts, text


def ccmc_estimation_facts(errors: dict, slope: float, W) -> tuple[dict, str]:
    """Glued numbers and the printed line of the estimation of W: sample sizes, the
    mean error at the first and the last, the log-log slope over the three largest,
    ‖W‖_F and √n times the last error (``errors``: {n: errors per data set})."""
    ns = np.array(list(errors), dtype=float)
    mean = np.array([e.mean() for e in errors.values()])
    n_tail = int(ns[max(0, len(ns) - 3)])
    facts = dict(
        cc_est_reps=len(next(iter(errors.values()))),
        cc_est_n_first=int(ns[0]),
        cc_est_n_last=int(ns[-1]),
        cc_est_n_tail=n_tail,
        cc_est_err_first=float(mean[0]),
        cc_est_err_last=float(mean[-1]),
        cc_est_slope=slope,
        cc_W_norm=float(ccmc.row_centred(W).norm()),
        cc_est_const=float(np.sqrt(ns[-1]) * mean[-1]),
    )
    text = (
        f"log-log slope over n = {n_tail}..{int(ns[-1])}: {slope:.3f} (n^(-1/2): -0.5)"
    )
    return facts, text


def ccmc_rate(
    ns, mean_err, slope: float, scale: str, converges: bool
) -> tuple[bool, str]:
    """The CCMC chapter's estimation verdict: whether the log-log ``slope`` of the
    mean error ``mean_err`` over the sample sizes ``ns`` is the n^(-1/2) rate (within
    ±0.15), and the sentence that says so (at a scale that does not converge, that the
    sizes are too few)."""
    ok = bool(abs(slope - RATE_SLOPE) <= RATE_TOL)
    text = (
        f"The error falls from {mean_err[0]:.3f} at n = {int(ns[0])} to "
        f"{mean_err[-1]:.4f} at n = {int(ns[-1])}, with a log-log slope of "
        f"{slope:.2f} over the {min(3, len(ns))} largest n"
    )
    if not converges:
        text += (
            f". At the `{scale}` scale the sample sizes are too few to read a rate "
            "off them."
        )
    elif ok:
        text += ": the $n^{-1/2}$ rate of a regular parametric model."
    else:
        text += (
            ", away from the $n^{-1/2}$ rate of a regular parametric model at these "
            "sample sizes."
        )
    return ok, text


def ccmc_generation_report(runs: dict, ends: dict, gen_len: int, window: int) -> str:
    """The generation section's printed summary per run: stable states, the CCMC's and
    the Markov chain's last-window statistics and the winners."""
    lines = []
    for name, e in ends.items():
        lines += [
            f"{name}: stable single-token states {runs[name]['stable']}; after "
            f"{gen_len} tokens, last {window}:",
            f"    CCMC   top share {e['share']:.3f}, distinct {e['distinct']:.2f}, "
            f"entropy {e['entropy']:.3f} nats; {e['single']:.0%} of the trajectories "
            f"write one token only (tokens {e['single_tokens']})",
            "    top token of the last window, trajectories per token: "
            f"{e['winners'].tolist()}",
            f"    Markov top share {e['share_markov']:.3f}, distinct "
            f"{e['distinct_markov']:.2f}, entropy {e['entropy_markov']:.3f} nats "
            f"(stationary max pi_i = {runs[name]['pi'].max():.3f})",
        ]
    return "\n".join(lines)


def ccmc_generation_facts(runs: dict, ends: dict, n_lead: int) -> dict:
    """Glued numbers of the generation section: each run's (``W+``, ``W-``) last-window
    statistics (:func:`markovlib.ccmc.final_window`), its stable single-token states,
    and the ``n_lead`` tokens that lead some W+ trajectory."""
    keys = ("share", "distinct", "entropy", "share_markov", "distinct_markov")
    facts = {}
    for name, tag in (("W+", "plus"), ("W-", "minus")):
        for key in (*keys, "entropy_markov", "single"):
            facts[f"cc_{key}_{tag}"] = ends[name][key]
        facts[f"cc_stable_{tag}"] = len(runs[name]["stable"])
    return facts | dict(cc_n_winners=n_lead)


@dataclass(frozen=True)
class CollapseVerdict:
    """Whether generation from one prompt collapses with W+ and with W- (the last
    window's mean top-token share above 0.9, the Markov chain's below 0.5 for W+), and
    the sentences of the chapter and of its summary."""

    plus: bool
    minus: bool
    text: str
    summary: str


def ccmc_collapse(
    plus: dict, minus: dict, window: int, gen_len: int, n_lead: int
) -> CollapseVerdict:
    """The CCMC chapter's generation verdict from the last-window statistics ``plus``
    and ``minus`` of W+ and W- (:func:`markovlib.ccmc.final_window`) and the number
    ``n_lead`` of tokens that lead the last window of some W+ trajectory."""
    ep, em = plus, minus
    collapse_plus = bool(
        ep["share"] > COLLAPSED_ABOVE and ep["share_markov"] < MARKOV_MIXES_BELOW
    )
    collapse_minus = bool(em["share"] > COLLAPSED_ABOVE)
    if collapse_plus:
        text = (
            f"With $W_+$ the generation collapses: in the last {window} tokens the "
            f"most frequent token has a mean share of {ep['share']:.3f} and "
            f"{ep['single']:.0%} of the trajectories write nothing else, while the "
            "Markov chain with the same base kernel keeps visiting "
            f"{ep['distinct_markov']:.2f} tokens on average (top share "
            f"{ep['share_markov']:.3f}). The winner is not the same for every "
            f"trajectory: {n_lead} different tokens lead the last window, decided by "
            "the early random draws. "
        )
    else:
        text = (
            f"With $W_+$ the generation has **not** collapsed within {gen_len} tokens: "
            f"the mean top share in the last {window} tokens is {ep['share']:.3f} "
            f"(Markov chain: {ep['share_markov']:.3f}). "
        )
    if collapse_minus:
        text += f"With $W_-$ it collapses too (mean top share {em['share']:.3f})."
    else:
        text += (
            f"With $W_-$ there is **no** single winner within {gen_len} tokens: the "
            f"mean top share is {em['share']:.3f} and the window still holds "
            f"{em['distinct']:.2f} distinct tokens, though the top share is above the "
            f"Markov chain's {em['share_markov']:.3f}."
        )
    summary = (
        "With $W_+$ (a base chain that prefers to stay) the mean top share in the "
        f"last {window} tokens is {ep['share']:.3f}, with $W_-$ (one that prefers to "
        f"move) {em['share']:.3f}; the Markov chain with the same base kernels: "
        f"{ep['share_markov']:.3f} and {em['share_markov']:.3f}. "
    )
    summary += (
        "One token takes over only when the base chain favours repeating it."
        if ep["share"] > COLLAPSED_ABOVE >= em["share"]
        else (
            "At this scale and for these matrices the two do not separate into "
            "collapse and no collapse."
        )
    )
    return CollapseVerdict(collapse_plus, collapse_minus, text, summary)


def ccmc_mean_field_text(
    deviation: float,
    limit,
    final_share,
    gen_len: int,
    n_stable_plus: int,
    n_lead: int,
) -> str:
    """The CCMC chapter's sentence on the mean-field ODE: its largest ``deviation``
    from the measured W- context shares, the tokens its ``limit`` keeps above 1 %,
    how much of the context the others still hold at the end (``final_share``, per
    token) and, with W+, the ``n_stable_plus`` stable single-token states and
    ``n_lead`` leading tokens."""
    k = len(limit)
    survivors = [j for j in range(k) if limit[j] > 0.01]
    left = max(
        (float(final_share[j]) for j in range(k) if j not in survivors), default=0
    )
    text = (
        f"The ODE follows the measured $W_-$ shares to within {deviation:.3f} at every "
        f"length. Its limit as $\\tau \\to \\infty$ keeps {len(survivors)} of the {k} "
        f"tokens above a share of 1% (tokens {', '.join(map(str, survivors))}). "
    )
    if len(survivors) < k and left > 0.01:
        text += (
            f"The others die out, but as powers of $n$: after {gen_len} tokens one of "
            f"them still holds {left:.3f} of the context. So the generation does not "
            "mix like the Markov chain: it drifts, slowly and along the same path for "
            "every trajectory, towards a context made of a few tokens. "
        )
    elif len(survivors) < k:
        text += "The others are already (almost) gone from the context. "
    else:
        text += "Here every token survives: the context does not narrow. "
    if n_stable_plus > 1 and n_lead > 1:
        text += (
            f"With $W_+$ the ODE has several attractors ({n_stable_plus} stable "
            "single-token states), and the early random draws decide which one a "
            f"trajectory falls into: {n_lead} different tokens lead the last window."
        )
    return text


def ccmc_checks(
    eq, mean_err, W, prompt, ends, mf_dev, collapse, *, converges, default_regime
) -> dict[str, bool]:
    """The CCMC chapter's claims at the scale it ran: the theorem to 1e-12, a balanced
    prompt, the error falling below ‖W‖_F, the Markov chain visiting more tokens than
    W+'s CCMC; where the scale converges, the error halved, the ODE within 0.1 and only
    stable states won alone; in the default regime (β ≥ 2, σ ≤ 1) W+ alone collapses."""
    plus, minus, k = ends["W+"], ends["W-"], W.shape[0]
    eq_dev = max(eq["max_diff"], eq["max_diff_pos"], eq["base_diff"])
    counts = sorted(ccmc.token_counts(prompt, k)[0].tolist())
    checks = {
        "attention = the CCMC formula": eq_dev < 1e-12
        and eq["absent_mass"] == 0.0
        and eq["sums_to_one"],
        "the prompt holds every token equally often": counts == [counts[0]] * k,
        "the error falls, below ||W||_F": mean_err[-1] < mean_err[0]
        and mean_err[-1] < float(ccmc.row_centred(W).norm()),
        "the Markov chain visits more tokens than the CCMC (W+)": plus[
            "distinct_markov"
        ]
        > plus["distinct"],
    }
    if converges:
        checks["error halved, ODE within 0.1"] = (
            mean_err[-1] < 0.5 * mean_err[0] and mf_dev < 0.1
        )
        checks["single winners are stable states"] = (
            plus["all_single_stable"] and minus["all_single_stable"]
        )
    if converges and default_regime:
        checks["W+ collapses, W- does not"] = (
            collapse.plus and not collapse.minus and minus["distinct"] > 1
        )
    return checks


def ccmc_claims(eq: dict, slope: float, rate_ok: bool, share: float, collapse) -> dict:
    """The CCMC chapter's scorecard rows, claim id -> (value, holds): the theorem's
    largest deviation, the estimation slope and W+'s last-window top share."""
    eq_dev = max(eq["max_diff"], eq["max_diff_pos"], eq["base_diff"])
    equivalence = eq_dev < 1e-12 and eq["absent_mass"] == 0.0 and eq["sums_to_one"]
    return {
        "ccmc_equivalence": (f"{eq_dev:.1e}", equivalence),
        "ccmc_rate": (f"{slope:.2f}", rate_ok),
        "ccmc_collapse": (f"{share:.3f}", collapse.plus),
    }
