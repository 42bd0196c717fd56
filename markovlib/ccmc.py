"""Self-attention as a context-conditioned Markov chain (CCMC), after Ildiz
et al. (2024).

One attention layer over one-hot tokens: the query is the last token x_T, the keys and
values are the prompt tokens x_1..x_T, the score of position t is W[x_T, x_t] (+ a
positional term b_t) and the output, a probability vector over the k tokens, is the
attention-weighted sum of the one-hot values. The next token is drawn from it, so it is
always a token of the prompt:

    P(next = j | x) = Σ_{t: x_t = j} softmax_t(W[x_T, x_t] + b_t)
                    = c_j(x) exp(W[x_T, j]) / Σ_l c_l(x) exp(W[x_T, l]),
    c_j(x) = Σ_{t: x_t = j} exp(b_t),

a base chain P_base = row-softmax(W) whose row x_T is re-weighted by the
(position-weighted) counts c(x) of the prompt. Without positional term c_j is the number
of occurrences of j. Generating appends each new token to the context, so its count
grows: the chain is not Markov in the last token alone and, for a W whose base chain
prefers to stay put, a trajectory collapses onto one token ("winner takes all").

Conventions: tokens are int64 in {0..k-1}, prompts are (B, T) tensors (a 1-D prompt is
one prompt), probabilities are (B, k). Everything random takes ``seed`` or a
``torch.Generator``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import (
    check_int as _check_int,
    check_square as _check_square,
    generator as _generator,
    one_thread,
    seeded,
)
from .chains import MarkovChain, stationary_law
from .presets import CCMC_SIZES as SIZES, CCMCSizes, ccmc_sizes

__all__ = [
    "CCMCSizes",
    "SIZES",
    "sizes",
    "SelfAttentionSampler",
    "token_counts",
    "ccmc_probs",
    "base_chain",
    "random_W",
    "balanced_prompt",
    "generate",
    "markov_comparison",
    "trajectory_stats",
    "stable_vertices",
    "context_law",
    "mean_field",
    "sample_prompts",
    "sample_next",
    "nll",
    "fit_W",
    "row_centred",
    "estimation_error",
    "estimation_curve",
    "equivalence",
    "estimation_slope",
    "generation_run",
    "final_window",
    "context_shares",
]


# ------------------------------------------------- sizes per scale (defined in presets)
sizes = ccmc_sizes


# ---------------------------------------------------------------- validation
def _check_W(W) -> torch.Tensor:
    W = torch.as_tensor(W)
    if not W.is_floating_point():
        W = W.double()
    _check_square("W", W, "tokens")
    if not torch.isfinite(W).all():
        raise ValueError("W must have finite entries")
    return W


def _check_prompts(x, k: int) -> torch.Tensor:
    x = torch.as_tensor(x)
    if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise ValueError(f"prompts must be integer tokens; got dtype {x.dtype}")
    x = x.long()
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2:
        raise ValueError(
            f"prompts must be a (T,) or (B, T) tensor; got shape {tuple(x.shape)}"
        )
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"prompts must be non-empty; got shape {tuple(x.shape)}")
    if x.min() < 0 or x.max() >= k:
        raise ValueError(
            f"tokens must be in 0..{k - 1}; got values in "
            f"{int(x.min())}..{int(x.max())}"
        )
    return x


def _check_pos(pos, length: int, dtype) -> torch.Tensor | None:
    if pos is None:
        return None
    pos = torch.as_tensor(pos, dtype=dtype)
    if pos.ndim != 1 or pos.shape[0] < length:
        raise ValueError(
            f"pos must be a 1-D table of at least {length} positional scores; got "
            f"shape {tuple(pos.shape)}"
        )
    if not torch.isfinite(pos).all():
        raise ValueError("pos must have finite entries")
    return pos


# ------------------------------------------------------------ the model and the formula
class SelfAttentionSampler(nn.Module):
    """One attention layer whose output is a prompt token: P(next=j) = Σ_{t: x_t=j}
    softmax_t(W[x_T, x_t] + b_t)."""

    def __init__(self, W, pos=None):
        super().__init__()
        W = _check_W(W)
        self.k = W.shape[0]
        self.W = nn.Parameter(W.clone())
        self.pos = (
            None if pos is None else nn.Parameter(_check_pos(pos, 1, W.dtype).clone())
        )

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """Attention of the last token on the prompt: softmax_t(e_{x_T}ᵀ W
        e_{x_t} + b_t), shape (B, T)."""
        x = _check_prompts(x, self.k)
        E = F.one_hot(x, self.k).to(self.W.dtype)  # (B, T, k): keys and values
        query = E[:, -1] @ self.W  # (B, k): e_{x_T}ᵀ W
        scores = (E @ query.unsqueeze(-1)).squeeze(-1)  # (B, T): W[x_T, x_t]
        if self.pos is not None:
            scores = (
                scores + _check_pos(self.pos, x.shape[1], self.W.dtype)[: x.shape[1]]
            )
        return torch.softmax(scores, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Next-token law Σ_t att_t e_{x_t} (the attention output over one-hot values),
        shape (B, k)."""
        x = _check_prompts(x, self.k)
        E = F.one_hot(x, self.k).to(self.W.dtype)
        return (self.attention(x).unsqueeze(1) @ E).squeeze(1)


def token_counts(x, k: int, pos=None) -> torch.Tensor:
    """c_j(x) = Σ_{t: x_t = j} exp(b_t) (plain counts #{t: x_t = j} without ``pos``),
    shape (B, k), float64."""
    k = _check_int("k", k, 2)
    x = _check_prompts(x, k)
    pos = _check_pos(pos, x.shape[1], torch.float64)
    if pos is None:  # integer counts: bincounts over blocks of prompts
        B, block = x.shape[0], 1 << 16
        out = torch.empty(B, k, dtype=torch.float64)
        offset = k * torch.arange(min(B, block))[:, None]
        for lo in range(0, B, block):
            xb = x[lo : lo + block]
            bins = (xb + offset[: len(xb)]).reshape(-1)
            out[lo : lo + len(xb)] = torch.bincount(bins, minlength=len(xb) * k).view(
                -1, k
            )
        return out
    weight = torch.exp(pos[: x.shape[1]]).expand(x.shape)
    return torch.zeros(x.shape[0], k, dtype=torch.float64).scatter_add_(1, x, weight)


def _log_counts(x, k: int, pos=None) -> torch.Tensor:
    """log c_j(x), computed stably (b shifted by its max, which cancels in the CCMC);
    -inf for absent tokens."""
    T = _check_prompts(x, k).shape[1]
    if pos is not None:
        pos = _check_pos(pos, T, torch.float64)[:T]
        pos = pos - pos.max()
    return torch.log(token_counts(x, k, pos))


def ccmc_probs(W, x, pos=None) -> torch.Tensor:
    """CCMC: P(next = j | x) ∝ c_j(x) exp(W[x_T, j]) (counts, no attention), shape
    (B, k)."""
    W = _check_W(W)
    x = _check_prompts(x, W.shape[0])
    logits = _log_counts(x, W.shape[0], pos) + W.double()[x[:, -1]]
    return torch.softmax(logits, dim=-1).to(W.dtype)


def base_chain(W) -> torch.Tensor:
    """Base transition matrix P_base = row-softmax(W): the CCMC when every token occurs
    once (k×k)."""
    return torch.softmax(_check_W(W), dim=1)


def stable_vertices(W) -> list[int]:
    """Tokens i with W[i, i] > W[i, j] for all j ≠ i: where "only token i in the
    context" is a stable state.

    Linearisation (this book's, not a theorem of the paper): with a share ε_j << 1 of
    token j in a context of n tokens that are otherwise all i, the CCMC emits j with
    probability ≈ ε_j exp(W[i, j] - W[i, i]), so dε_j/dn ≈ ε_j
    (exp(W[i, j] - W[i, i]) - 1) / n, which shrinks for every j exactly under this
    condition.
    """
    W = _check_W(W)
    off = W.clone().fill_diagonal_(-math.inf)
    return [i for i in range(W.shape[0]) if bool(W[i, i] > off[i].max())]


def random_W(
    k: int, *, sigma: float = 1.0, diag: float = 0.0, seed: int = 0
) -> torch.Tensor:
    """W = diag · I + sigma · G with G i.i.d. N(0, 1) (float64, seeded)."""
    k = _check_int("k", k, 2)
    if not (sigma >= 0 and math.isfinite(sigma)) or not math.isfinite(diag):
        raise ValueError(
            "sigma must be finite and >= 0 and diag finite; got "
            f"sigma={sigma!r}, diag={diag!r}"
        )
    g = seeded(seed)
    return diag * torch.eye(k, dtype=torch.float64) + sigma * torch.randn(
        k, k, generator=g, dtype=torch.float64
    )


def balanced_prompt(k: int, length: int, *, seed: int = 0) -> torch.Tensor:
    """A shuffled prompt of ``length`` >= k tokens where the counts of any two tokens
    differ by at most one."""
    k, length = _check_int("k", k, 2), _check_int("length", length, 1)
    if length < k:
        raise ValueError(
            "a balanced prompt needs length >= k so that every token occurs; got "
            f"length {length} < k = {k}"
        )
    g = seeded(seed)
    return (torch.arange(length) % k)[torch.randperm(length, generator=g)]


# ---------------------------------------------------------------- generation
@one_thread()
def generate(
    W,
    prompt,
    length: int,
    *,
    n_traj: int | None = None,
    pos=None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    via: str = "counts",
) -> torch.Tensor:
    """Autoregressive CCMC: x_{T+s+1} ~ P(· | x_1..x_{T+s}), each new token appended
    (its count grows); (B, length).

    ``prompt`` is (T,) (repeated ``n_traj`` times) or (B, T). ``via="counts"`` updates
    the counts in O(k) per step; ``via="attention"`` runs :class:`SelfAttentionSampler`
    on the whole context each step (O(T), for checks). Both draw the same random
    numbers, so with the same seed they give the same trajectories.
    """
    W = _check_W(W).double()
    k = W.shape[0]
    length = _check_int("length", length, 1)
    x = _check_prompts(prompt, k)
    if n_traj is not None:
        n_traj = _check_int("n_traj", n_traj, 1)
        if torch.as_tensor(prompt).ndim == 2 and n_traj != x.shape[0]:
            raise ValueError(
                f"n_traj={n_traj} disagrees with the {x.shape[0]} prompts given"
            )
        x = x.expand(n_traj, -1)
    if via not in ("counts", "attention"):
        raise ValueError(f"via must be 'counts' or 'attention'; got {via!r}")
    B, T = x.shape
    pos = _check_pos(pos, T + length, torch.float64)
    if pos is not None:
        pos = pos - pos[: T + length].max()
    g = _generator(seed, generator)
    out = torch.empty(B, length, dtype=torch.long)
    rows = torch.arange(B)
    if via == "attention":
        model = SelfAttentionSampler(W, pos)
        context = x.clone()
        with torch.no_grad():
            for s in range(length):
                nxt = torch.multinomial(model(context), 1, generator=g).squeeze(1)
                out[:, s] = nxt
                context = torch.cat([context, nxt[:, None]], dim=1)
        return out
    weights = token_counts(x, k, pos)  # c_j, updated in place
    expW, last = torch.exp(W - W.max(dim=1, keepdim=True).values), x[:, -1].clone()
    for s in range(length):
        nxt = torch.multinomial(weights * expW[last], 1, generator=g).squeeze(1)
        out[:, s] = nxt
        weights[rows, nxt] += 1.0 if pos is None else float(torch.exp(pos[T + s]))
        last = nxt
    return out


def markov_comparison(
    W,
    n_traj: int,
    length: int,
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Paths of the plain Markov chain with kernel P_base = row-softmax(W), stationary
    start; (n_traj, length)."""
    chain = MarkovChain(
        base_chain(W).double().numpy(), name="base chain row-softmax(W)"
    )
    return chain.sample(
        _check_int("n_traj", n_traj, 1),
        _check_int("length", length, 1),
        seed=seed,
        generator=generator,
    )


def trajectory_stats(
    tokens, k: int, *, window: int | None = None, at=None
) -> dict[str, np.ndarray]:
    """Statistics of generated tokens (B, L) after n = ``at`` steps, over the last
    min(n, window) of them.

    Returns ``n`` (A,) and, each (B, A): ``distinct`` (number of different tokens),
    ``entropy`` (of their empirical law, nats) and ``top_share`` (share of the most
    frequent one). ``window=None``: all n tokens. ``at`` defaults to about 120 lengths
    spaced evenly on a log scale from 1 to L.
    """
    k = _check_int("k", k, 2)
    tokens = _check_prompts(tokens, k)
    B, L = tokens.shape
    if window is not None:
        window = _check_int("window", window, 1)
    at = (
        np.unique(np.geomspace(1, L, 120).round().astype(int))
        if at is None
        else np.asarray(at, dtype=int).ravel()
    )
    if at.size == 0 or at.min() < 1 or at.max() > L:
        raise ValueError(f"at must be lengths in 1..{L}; got {at!r}")
    distinct, entropy, top = (np.empty((B, at.size)) for _ in range(3))
    x = (
        tokens.numpy() + k * np.arange(B)[:, None]
    )  # token j of trajectory b -> bin b k + j
    for a, n in enumerate(at):  # numpy: many tiny reductions, no thread pool
        lo = 0 if window is None else max(0, int(n) - window)
        counts = (
            np.bincount(x[:, lo:n].ravel(), minlength=B * k)
            .reshape(B, k)
            .astype(np.float64)
        )
        p = counts / (n - lo)
        distinct[:, a] = (counts > 0).sum(1)
        entropy[:, a] = -(p * np.log(np.where(p > 0, p, 1.0))).sum(1)
        top[:, a] = p.max(1)
    return {"n": at, "distinct": distinct, "entropy": entropy, "top_share": top}


def context_law(W, c) -> np.ndarray:
    """ν(c): stationary law of the chain Q_c(i, j) ∝ c_j exp(W[i, j]) that the CCMC
    runs while the shares c stay put."""
    W = _check_W(W).double().numpy()
    c = np.asarray(c, dtype=np.float64)
    if c.shape != (W.shape[0],) or np.any(c < 0) or not c.sum() > 0:
        raise ValueError(
            f"c must be {W.shape[0]} non-negative shares, not all zero; got {c!r}"
        )
    Q = c[None, :] * np.exp(W - W.max(1, keepdims=True))
    Q /= Q.sum(1, keepdims=True)
    return stationary_law(Q)


def mean_field(W, c0, taus, *, step: float = 0.01) -> np.ndarray:
    """Context shares c(τ) of dc/dτ = ν(c) - c with τ = log(n / n_0) (Euler), at
    each τ in ``taus``; (len(taus), k).

    Heuristic (stochastic approximation, this book's, not the paper's): the shares of a
    context of n tokens move by (e_{x_{n+1}} - c_n) / (n + 1) per step while x runs a
    chain that mixes fast on the scale of n, whose occupation law is ν(c_n)
    (:func:`context_law`). It predicts where the shares go when the limit does not
    depend on the noise (one attractor); when several attractors compete, which one a
    trajectory reaches is random.
    """
    c = np.asarray(c0, dtype=np.float64)
    c = c / c.sum()
    taus = np.asarray(taus, dtype=np.float64).ravel()
    if not step > 0 or taus.size == 0 or np.any(taus < 0) or np.any(np.diff(taus) < 0):
        raise ValueError("taus must be non-negative and non-decreasing and step > 0")
    out, tau = [], 0.0
    for target in taus:
        while tau < target - 1e-12:
            h = min(step, target - tau)
            c = np.clip(c + h * (context_law(W, c) - c), 0.0, None)
            c, tau = c / c.sum(), tau + h
        out.append(c.copy())
    return np.stack(out)


# ---------------------------------------------------------- learning W from IID prompts
def sample_prompts(
    n: int,
    T: int,
    k: int,
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """n i.i.d. prompts of T tokens, each uniform on {0..k-1}; (n, T)."""
    n, T, k = _check_int("n", n, 1), _check_int("T", T, 1), _check_int("k", k, 2)
    return torch.randint(0, k, (n, T), generator=_generator(seed, generator))


def sample_next(
    W, x, *, pos=None, seed: int | None = None, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One next token per prompt, y ~ CCMC(· | x); (B,)."""
    return torch.multinomial(
        ccmc_probs(_check_W(W).double(), x, pos),
        1,
        generator=_generator(seed, generator),
    ).squeeze(1)


def _check_outputs(x: torch.Tensor, y, log_c: torch.Tensor, k: int) -> torch.Tensor:
    y = torch.as_tensor(y).long().reshape(-1)
    if y.shape[0] != x.shape[0]:
        raise ValueError(
            f"need one output per prompt; got {y.shape[0]} outputs for "
            f"{x.shape[0]} prompts"
        )
    if y.min() < 0 or y.max() >= k:
        raise ValueError(f"outputs must be tokens in 0..{k - 1}")
    if torch.isinf(log_c.gather(1, y[:, None])).any():
        raise ValueError(
            "every output must occur in its prompt (the CCMC gives it "
            "probability 0 otherwise)"
        )
    return y


def nll(W, x, y, pos=None) -> float:
    """Mean negative log-likelihood -1/n Σ log P_W(y_i | x_i) of outputs y under the
    CCMC."""
    W = _check_W(W).double()
    x = _check_prompts(x, W.shape[0])
    log_c = _log_counts(x, W.shape[0], pos)
    y = _check_outputs(x, y, log_c, W.shape[0])
    return float(F.cross_entropy(log_c + W[x[:, -1]], y))


@one_thread()
def fit_W(
    x,
    y,
    k: int,
    *,
    pos=None,
    ridge: float = 1e-6,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> torch.Tensor:
    """Maximum likelihood: argmin_W -1/n Σ log P_W(y_i | x_i) + ridge/2 ‖W‖², by
    damped Newton steps (convex).

    Row i of W only meets the prompts whose last token is i, so the problem splits into
    k multinomial logistic regressions with offsets log c(x): row i's gradient is
    mean_{x_T = i}(p - e_y), its Hessian mean_{x_T = i}(diag p - p pᵀ). Adding a
    constant to a row of W changes no probability, so only the row-centred matrix is
    identified; the ridge term picks that representative (and keeps unseen rows at 0).
    """
    k = _check_int("k", k, 2)
    x = _check_prompts(x, k)
    if not (ridge > 0 and math.isfinite(ridge)):
        raise ValueError(
            "ridge must be finite and > 0 (it fixes the free constant of each "
            f"row); got {ridge!r}"
        )
    max_iter = _check_int("max_iter", max_iter, 1)
    log_c = _log_counts(x, k, pos)
    y = _check_outputs(x, y, log_c, k)
    return _fit_W(log_c, x[:, -1], y, k, ridge, max_iter, tol)


def _fit_W(log_c, last, y, k: int, ridge: float, max_iter: int, tol: float):
    """:func:`fit_W` on checked data: the log counts (n, k), last tokens and outputs.

    With c = exp(log c) the CCMC is P(j | x) = c_j e^{W_aj} / s, s = Σ_j c_j e^{W_aj}
    (a = x_T), so the log-likelihood is Σ_i log c_{y_i} + Σ_aj N_aj W_aj - Σ_i log s_i
    with N the (last token, answer) pair counts: each evaluation costs n k products and
    n logarithms (no n k exponentials), on each row's prompts side by side."""
    n = last.shape[0]
    order = torch.argsort(last, stable=True)  # each row's prompts side by side
    c, y, last = log_c[order].exp(), y[order], last[order]
    ends = torch.bincount(last, minlength=k).cumsum(0).tolist()
    rows = [c[a:b] for a, b in zip([0, *ends[:-1]], ends)]  # views, no copies
    pairs = torch.zeros(k * k, dtype=torch.float64)
    pairs = pairs.index_add_(0, last * k + y, torch.ones(n, dtype=torch.float64))
    pairs = pairs.view(k, k)  # N_aj: prompts ending in a answered by j
    log_cy = float(c.gather(1, y[:, None]).log().sum())  # Σ_i log c_{y_i}: constant
    eye = torch.eye(k, dtype=torch.float64)

    def objective(W) -> tuple[float, list[torch.Tensor]]:
        """The penalised mean negative log-likelihood at W, and each row's
        probabilities (the next Newton step needs them)."""
        e_W = W.exp()
        u = [rows[a] * e_W[a] for a in range(k)]  # c_j e^{W_aj}, row a's prompts
        s = [ua.sum(1, keepdim=True) for ua in u]
        log_s = sum(float(sa.log().sum()) for sa in s)
        nll = -(log_cy + float((pairs * W).sum()) - log_s) / n
        return nll + 0.5 * ridge * float((W * W).sum()), [
            ua / sa for ua, sa in zip(u, s)
        ]

    W = torch.zeros(k, k, dtype=torch.float64)
    f, p = objective(W)
    for _ in range(max_iter):
        mass = torch.stack([pa.sum(0) for pa in p])  # Σ_i p_i per row
        grad = (mass - pairs) / n + ridge * W
        if grad.abs().max() < tol:
            break
        hess = (
            torch.stack([torch.diag(m) - pa.T @ pa for m, pa in zip(mass, p)]) / n
            + ridge * eye
        )
        step = torch.linalg.solve(hess, grad.unsqueeze(-1)).squeeze(-1)
        decrease, t = float((grad * step).sum()), 1.0
        while t > 1e-10:  # backtracking (Armijo) line search
            f_new, p_new = objective(W - t * step)
            if f_new <= f - 0.25 * t * decrease:
                break
            t /= 2
        else:  # no step accepted: W moves by the last halved t, as before
            p_new = objective(W - t * step)[1]
        W, f, p = W - t * step, f_new, p_new
    return row_centred(W)


def row_centred(W) -> torch.Tensor:
    """W minus its row means: the representative of W that the CCMC identifies."""
    W = _check_W(W)
    return W - W.mean(dim=1, keepdim=True)


def estimation_error(W_hat, W) -> float:
    """Frobenius distance of the row-centred matrices, ‖(Ŵ - W) - row means‖_F."""
    W_hat, W = _check_W(W_hat).double(), _check_W(W).double()
    if W_hat.shape != W.shape:
        raise ValueError(f"shapes differ: {tuple(W_hat.shape)} vs {tuple(W.shape)}")
    return float(torch.linalg.norm(row_centred(W_hat) - row_centred(W)))


@one_thread()
def estimation_curve(
    W,
    T: int,
    sample_sizes,
    reps: int,
    *,
    pos=None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
) -> dict[int, np.ndarray]:
    """{n: errors}: :func:`estimation_error` of :func:`fit_W` on ``reps`` data sets of n
    i.i.d. (prompt, answer) pairs.

    Prompts are uniform of length ``T`` (:func:`sample_prompts`), answers drawn from the
    CCMC of ``W``; every draw comes, in order, from one generator, so the curve is
    reproducible from ``seed``.
    """
    W = _check_W(W).double()
    k, T, reps = W.shape[0], _check_int("T", T, 1), _check_int("reps", reps, 1)
    sample_sizes = [_check_int("n", n, 1) for n in sample_sizes]
    if not sample_sizes:
        raise ValueError("sample_sizes must name at least one sample size")
    g = _generator(seed, generator)
    curve = {}
    for n in sample_sizes:
        errs = []
        for _ in range(reps):
            x = sample_prompts(n, T, k, generator=g)
            # sample_next and fit_W, sharing one count of the prompts (valid by
            # construction: drawn in range, every answer occurs in its prompt)
            log_c, last = _log_counts(x, k, pos), x[:, -1]
            probs = torch.softmax(log_c + W[last], dim=-1)  # ccmc_probs(W, x, pos)
            y = torch.multinomial(probs, 1, generator=g).squeeze(1)
            W_hat = _fit_W(log_c, last, y, k, 1e-6, 100, 1e-10)  # fit_W's defaults
            errs.append(estimation_error(W_hat, W))
        curve[n] = np.array(errs)
    return curve


# ----------------------------------------------------------- the chapter's measurements
@torch.no_grad()
def equivalence(W, x, pos=None, *, seed: int = 0) -> dict:
    """Section 1 of the chapter: the attention layer against the CCMC formula
    (the theorem), in float64.

    On the prompts ``x`` (B, T), without and with the positional scores ``pos``:
    ``max_diff`` and ``max_diff_pos``, the largest |attention - :func:`ccmc_probs`|;
    ``base_diff``, the largest |attention - P_base[x_T]| on B prompts that are random
    permutations of the k tokens (drawn from ``seed``); ``absent_mass``, the largest
    probability of a token absent from its prompt (0 by the theorem); ``absent_share``,
    the fraction of prompts that miss some token; ``sums_to_one``, whether every
    attention output is a probability vector.
    """
    W = _check_W(W).double()
    k = W.shape[0]
    x = _check_prompts(x, k)
    model, model_pos = SelfAttentionSampler(W), SelfAttentionSampler(W, pos)
    p_model, p_model_pos = model(x), model_pos(x)
    g = torch.Generator().manual_seed(seed)
    x_once = torch.stack([torch.randperm(k, generator=g) for _ in range(x.shape[0])])
    absent = token_counts(x, k) == 0
    return dict(
        max_diff=(p_model - ccmc_probs(W, x)).abs().max().item(),
        max_diff_pos=(p_model_pos - ccmc_probs(W, x, pos)).abs().max().item(),
        base_diff=(model(x_once) - base_chain(W)[x_once[:, -1]]).abs().max().item(),
        absent_mass=p_model[absent].abs().max().item() if absent.any() else 0.0,
        absent_share=float(absent.any(1).float().mean()),
        sums_to_one=bool(
            torch.allclose(p_model.sum(1), torch.ones(x.shape[0], dtype=W.dtype))
        ),
    )


def estimation_slope(errors: dict, n_last: int = 3) -> float:
    """Log-log slope of the mean estimation error against n over the ``n_last`` largest
    sample sizes (``errors``: :func:`estimation_curve`'s {n: errors}); -1/2 is the
    parametric rate."""
    ns = np.array(sorted(errors), dtype=float)
    if len(ns) < 2:
        raise ValueError(f"errors must hold at least two sample sizes; got {len(ns)}")
    mean = np.array([np.mean(errors[int(n)]) for n in ns])
    tail = slice(max(0, len(ns) - n_last), None)
    return float(np.polyfit(np.log(ns[tail]), np.log(mean[tail]), 1)[0])


def generation_run(
    W, prompt, length: int, *, n_traj: int, window: int, at, seed: int
) -> dict:
    """Section 3: ``n_traj`` CCMC trajectories of ``length`` tokens from ``prompt``
    (drawn from ``seed``) and as many paths of the Markov chain with the base kernel
    (from ``seed + 100``).

    Returns ``W``, the ``tokens``, their :func:`trajectory_stats` (``stats``) and the
    Markov paths' (``markov``) over a trailing ``window`` at the lengths ``at``, the
    base chain's stationary law ``pi`` and the ``stable`` single-token states
    (:func:`stable_vertices`).
    """
    W = _check_W(W).double()
    k = W.shape[0]
    tokens = generate(W, prompt, length, n_traj=n_traj, seed=seed)
    markov = markov_comparison(W, n_traj, length, seed=seed + 100)
    return dict(
        W=W,
        tokens=tokens,
        stats=trajectory_stats(tokens, k, window=window, at=at),
        markov=trajectory_stats(markov, k, window=window, at=at),
        pi=MarkovChain(base_chain(W).numpy()).stationary(),
        stable=stable_vertices(W),
    )


def final_window(run: dict, window: int) -> dict:
    """The end of a :func:`generation_run`, over its last ``window`` tokens, mean over
    trajectories: ``share``, ``distinct``, ``entropy`` of the CCMC and
    ``share_markov``, ... of the Markov chain; ``single`` (fraction of trajectories
    writing one token only), ``winners`` (trajectories per top token), ``single_tokens``
    and ``all_single_stable`` (every single winner is a stable state)."""
    k = run["W"].shape[0]
    e = {
        key: float(run[src][stat][:, -1].mean())
        for key, src, stat in (
            ("share", "stats", "top_share"),
            ("distinct", "stats", "distinct"),
            ("entropy", "stats", "entropy"),
            ("share_markov", "markov", "top_share"),
            ("distinct_markov", "markov", "distinct"),
            ("entropy_markov", "markov", "entropy"),
        )
    }
    top_token = token_counts(run["tokens"][:, -window:], k).argmax(1).numpy()
    single = run["stats"]["distinct"][:, -1] == 1
    e["single"] = float(single.mean())
    e["winners"] = np.bincount(top_token, minlength=k)
    e["single_tokens"] = sorted(set(top_token[single].tolist()))
    e["all_single_stable"] = all(w in run["stable"] for w in e["single_tokens"])
    return e


def context_shares(tokens, prompt, k: int, checkpoints) -> np.ndarray:
    """Mean over trajectories of each token's share in the context (prompt + the first n
    generated tokens) at each n of ``checkpoints`` (increasing);
    (len(checkpoints), k)."""
    generated = _check_prompts(tokens, k).numpy()
    prompt_counts = np.bincount(_check_prompts(prompt, k).numpy().ravel(), minlength=k)
    T, running, previous, out = prompt_counts.sum(), np.zeros(k), 0, []
    for n in checkpoints:
        running += np.bincount(generated[:, previous:n].ravel(), minlength=k) / len(
            generated
        )
        previous = n
        out.append((prompt_counts + running) / (T + n))
    return np.array(out)
