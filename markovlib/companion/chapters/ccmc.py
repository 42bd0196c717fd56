"""``book/ccmc.ipynb``'s own numbers, checks and sentences: what its page states
beside the scorecard's claims."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import ccmc

__all__ = [
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
            "the random draws (every trajectory starts from the same prompt). "
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
        "The ODE follows the mean $W_-$ shares over the trajectories to within "
        f"{deviation:.3f} at every length. Its limit as $\\tau \\to \\infty$ keeps "
        f"{len(survivors)} of the {k} tokens above a share of 1% (tokens "
        f"{', '.join(map(str, survivors))}). "
    )
    if len(survivors) < k and left > 0.01:
        text += (
            f"The others die out, but as powers of $n$: after {gen_len} tokens one of "
            f"them still holds {left:.3f} of the context. So the generation does not "
            "mix like the Markov chain: its mean shares drift slowly towards a context "
            "made of a few tokens (each trajectory's own path is not compared here). "
        )
    elif len(survivors) < k:
        text += "The others are already (almost) gone from the context. "
    else:
        text += "Here every token survives: the context does not narrow. "
    if n_stable_plus > 1 and n_lead > 1:
        text += (
            f"With $W_+$ the ODE has several attractors ({n_stable_plus} stable "
            "single-token states), and the random draws, from the same prompt, "
            f"decide which one a trajectory falls into: {n_lead} different tokens "
            "lead the last window."
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
