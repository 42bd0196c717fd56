"""``book/framework.ipynb``'s own numbers, checks and sentences: what its page states
beside the scorecard's claims."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import theory
from ...chains import (
    MarkovChain,
    binary,
    binary_entropy,
    lag_one_correlation,
    symmetric,
)

__all__ = [
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
]


SWITCHING_REGIMES = {
    1: "above 1: the chain prefers to switch state (its lag-one correlation is "
    "negative). This is the regime of Theorem 2, where a tied single-layer "
    "transformer has a bad local minimum",
    -1: "below 1: the chain prefers to keep its state (its lag-one correlation is "
    "positive). In this regime the paper finds that training from the standard "
    "initialisation reaches the global minimum, tied or not (Sec. 4.1: local minima "
    "exist here too, but the standard Gaussian initialisation falls outside their "
    "basin)",
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
