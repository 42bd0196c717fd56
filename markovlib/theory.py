"""Exact maths of the paper: the Thm 1 / Thm 2 constructions, the population loss,
App. D diagnostics.

Nothing here trains. Constructions return a :class:`~markovlib.model.Transformer` of the
theory preset (no layer norm) whose weights are set by the theorem; ``expected_loss``
computes the population loss exactly by enumerating every sequence, so gradients and
Hessians at these points are exact too.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, jvp, vmap

from ._checks import check_int, check_number, check_vocab, one_thread, seeded
from .chains import MarkovChain, symmetric
from .model import Transformer, TransformerConfig

__all__ = [
    "global_minimum",
    "unigram_point",
    "expected_loss",
    "population_loss",
    "PopulationLoss",
    "gradient_norm",
    "loss_slice",
    "attention_ratio",
    "ablate_attention",
    "singular_values",
    "positional_spread",
    "exact_loss_function",
    "hessian",
    "UnigramHessian",
    "unigram_hessian",
    "unigram_curvature",
    "perturbed",
    "population_descent",
    "construction_checks",
    "appendix_d",
    "unigram_min_eigenvalue",
    "unigram_threshold",
    "n_params",
]

_MAX_ENUMERATED = 2**18


def _logit(a: float) -> float:
    return math.log(a) - math.log1p(-a)


def _zero_model(config: TransformerConfig) -> Transformer:
    model = Transformer(config)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model


def _binary_gain(chain: MarkovChain) -> float | None:
    """<a, e> of Thm 1's binary construction, logit(1 - q) - logit(p) (None for
    k > 2); p + q = 1 up to rounding gives 0."""
    if chain.k != 2:
        return None
    gain = _logit(1 - chain.P[1, 0]) - _logit(chain.P[0, 1])
    return 0.0 if -1e-9 < gain < 0 else gain  # e.g. 1 - 0.9 < 0.1 in floating point


def _construction(
    chain: MarkovChain, config: TransformerConfig, route: str, gain: float | None
) -> str:
    """The route of :func:`global_minimum` ('auto' resolved), checked against the
    chain and the model."""
    k, d = chain.k, config.d_model
    if route == "auto":
        route = "direct" if k == 2 and (not config.tied or gain >= 0) else "feedforward"
    if route not in ("direct", "feedforward"):
        raise ValueError(
            f"route must be 'auto', 'direct' or 'feedforward'; got {route!r}"
        )
    if (route == "feedforward" or k > 2) and d < k:
        raise ValueError(
            f"this construction needs d_model >= k; got d_model={d}, k={k}"
        )
    return route


def _direct_binary(model: Transformer, chain: MarkovChain, gain: float) -> None:
    """Thm 1's canonical θ* for k = 2: e_0 = 0, sigmoid(b) = p and <a, e> = ``gain``
    (tied: a = e, ||e||^2 = gain)."""
    E, A, b = model.wte.weight, model.head.weight, model.head.bias  # A is E when tied
    if model.config.tied:
        if gain < 0:
            raise ValueError(
                "the direct tied route needs p + q <= 1 (||e||^2 = logit(1-q) - "
                "logit(p) >= 0); "
                "use route='feedforward'"
            )
        E[1, 0] = math.sqrt(gain)
    else:
        E[1, 0], A[1, 0] = 1.0, gain
    b[1] = _logit(chain.P[0, 1])


def _direct_kernel(model: Transformer, chain: MarkovChain) -> None:
    """θ* for k > 2, untied: one-hot embeddings e_i and head rows log P, so that
    logit_j = log P[x_n, j]."""
    if model.config.tied:
        raise ValueError(
            "the direct route for k > 2 is untied only; use route='feedforward'"
        )
    k, E, A = chain.k, model.wte.weight, model.head.weight
    E[:, :k] = torch.eye(k)
    A[:, :k] = torch.as_tensor(np.log(chain.P).T, dtype=A.dtype)


def _feedforward_kernel(model: Transformer, chain: MarkovChain) -> None:
    """θ* through the ReLU layer (App. B.2's idea): one-hot e_i mapped to
    Σ_j log P_ij e_j, which the (tied) head reads as logits."""
    k, E, block = chain.k, model.wte.weight, model.blocks[0]
    E[:, :k] = torch.eye(k)
    if not model.config.tied:
        model.head.weight[:, :k] = torch.eye(k)
    unit = float(block.ff.act(torch.tensor(1.0)))  # act(1): 1 for ReLU, 0.841 for GELU
    block.ff.W_1.weight[:k, :k] = torch.eye(k)  # hidden unit i fires on e_i only
    # column i: Σ_j log P_ij e_j, reached as z = e_i + (target_i - e_i)
    target = torch.as_tensor(np.log(chain.P).T, dtype=E.dtype)
    block.ff.W_2.weight[:k, :k] = (target - torch.eye(k)) / unit


@torch.no_grad()
def global_minimum(
    chain: MarkovChain, config: TransformerConfig, route: str = "auto"
) -> Transformer:
    """Thm 1: weights θ* whose predictions equal the kernel,
    P(x_{n+1}=j | x_1^n) = P[x_n, j].

    Attention and positional embeddings contribute nothing (W_V = W_O = 0, p_n = 0).
    Routes: ``direct`` — the paper's canonical construction, FF off: for k = 2,
    e_0 = 0, logit = x_n <a, e> + b with sigmoid(b) = p and
    <a, e> = logit(1-q) - logit(p); tied (a = e) this needs p + q <= 1, untied any p, q
    and, for k > 2, one-hot embeddings with head rows log P (untied only).
    ``feedforward`` — any k, tied or not (App. B.2's idea): one-hot e_i, and the ReLU
    layer maps e_i to Σ_j log P_ij e_j, so the tied head reads log P_ij. Needs d >= k.
    ``auto`` picks direct when it applies.
    """
    if config.layer_norm:
        raise ValueError(
            "global_minimum builds the theory model: config.layer_norm must be False"
        )
    check_vocab(config, chain)
    if np.any(chain.P <= 0):
        raise ValueError(
            "Thm 1's construction needs every transition probability in (0, "
            "1) (finite logits)"
        )
    gain = _binary_gain(chain)
    route = _construction(chain, config, route, gain)
    model = _zero_model(config)
    if route == "feedforward":
        _feedforward_kernel(model, chain)
    elif chain.k == 2:
        _direct_binary(model, chain, gain)
    else:
        _direct_kernel(model, chain)
    return model


@torch.no_grad()
def unigram_point(chain: MarkovChain, config: TransformerConfig) -> Transformer:
    """Thm 2's θ_π: a = e = 0 (the output ignores the input), b = log π, so every
    prediction is π.

    Every other weight is 0 too, except layer-norm gains (GPT-2 preset), which keep
    their initial value 1.
    """
    check_vocab(config, chain)
    pi = chain.stationary()
    if np.any(pi <= 0):
        raise ValueError("unigram_point needs a stationary law with every entry > 0")
    model = _zero_model(config)
    model.head.bias.copy_(torch.as_tensor(np.log(pi)))
    for name, p in model.named_parameters():
        if "ln" in name:
            p.fill_(1.0)
    return model


def _check_enumerable(chain: MarkovChain, length: int) -> None:
    if not isinstance(chain, MarkovChain):
        raise ValueError(
            f"exact enumeration needs a first-order MarkovChain; got {chain!r} "
            "(use Monte Carlo)"
        )
    if chain.k**length > _MAX_ENUMERATED:
        raise ValueError(
            f"exact enumeration needs k**length <= {_MAX_ENUMERATED}; got "
            f"{chain.k}**{length}"
        )


def _all_paths(
    chain: MarkovChain, length: int, start: str
) -> tuple[torch.Tensor, torch.Tensor]:
    _check_enumerable(chain, length)
    k = chain.k
    x = torch.tensor(
        list(itertools.product(range(k), repeat=length)), dtype=torch.int64
    )
    pi0 = chain.stationary() if start == "stationary" else np.full(k, 1 / k)
    xn = x.numpy()
    prob = pi0[xn[:, 0]] * np.prod(chain.P[xn[:, :-1], xn[:, 1:]], axis=1)
    return x, torch.as_tensor(prob)


def expected_loss(
    model: Transformer,
    chain: MarkovChain,
    length: int = 10,
    start: str = "stationary",
    params: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Population loss E[(1/(L-1)) Σ_n -log f(x_{n+1} | x_1^n)] over paths of
    ``length`` states, exactly.

    Enumerates all k**length paths with their probabilities; differentiable (for
    gradients, Hessians). ``params`` (name → tensor) evaluates the model at other
    weights via ``torch.func.functional_call``.
    """
    return exact_loss_function(model, chain, length, start)(params)


def exact_loss_function(
    model: Transformer, chain: MarkovChain, length: int = 10, start: str = "stationary"
):
    """``params ↦`` the exact population loss of ``model`` (its own weights for
    ``params=None``), with the enumerated paths built once: for loops over many
    evaluations and for torch.func transforms.

    The last state of a path is never an input, so the sum over its k values is done
    in closed form: the k**(length - 1) inputs x_1..x_{L-1} are enumerated and
    position n is scored against the law P[x_n, ·] of the next state,
    Σ_x P(x_1..x_{L-1}) (1/(L-1)) Σ_n Σ_j P[x_n, j] (-log f_j(x_1^n)) — the same sum
    as over all k**length paths, with 1/k of the forward passes. An ensemble model
    (``n_models``) gives one loss per member."""
    if not isinstance(length, int) or length < 2:
        raise ValueError(f"length must be an integer >= 2; got {length!r}")
    _check_enumerable(chain, length)
    param = next(model.parameters())
    x, prob = (t.to(param.device) for t in _all_paths(chain, length - 1, start))
    prob = prob.to(param.dtype)
    target = torch.as_tensor(chain.P, dtype=param.dtype, device=param.device)[x]
    if model.n_models is not None:
        x = x.expand(model.n_models, *x.shape)

    def loss(params: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        logits = model(x) if params is None else functional_call(model, params, (x,))
        logp = torch.log_softmax(logits, dim=-1)
        nll = -(target * logp).sum(-1).mean(-1)  # (..., paths)
        return (prob * nll).sum(-1)

    return loss


@dataclass(frozen=True)
class PopulationLoss:
    """A population-loss estimate: ``mean`` ± ``stderr`` (0 when exact).

    ``excess`` ± ``excess_stderr`` is the paired estimate of
    E[loss(model) - loss(Bayes predictor P[x_n])] on the same paths: the KL gap to the
    global minimum. Near the optimum it is much less noisy than ``mean - H_rate``,
    because the path-to-path variation of the loss cancels in the difference.
    """

    mean: float
    stderr: float
    exact: bool
    length: int
    n_sequences: int
    excess: float = float("nan")
    excess_stderr: float = float("nan")

    def __str__(self) -> str:
        return (
            f"{self.mean:.4f} (exact)"
            if self.exact
            else f"{self.mean:.4f} ± {self.stderr:.4f}"
        )


@torch.no_grad()
def population_loss(
    model: Transformer,
    chain: MarkovChain,
    *,
    length: int = 256,
    exact: bool = False,
    n_sequences: int = 512,
    batch_size: int = 64,
    seed: int = 0,
    start: str = "stationary",
) -> PopulationLoss:
    """Population loss of ``model``: exact by enumeration (short lengths) or Monte Carlo
    with a standard error.

    Monte Carlo averages the per-sequence mean loss over ``n_sequences`` independent
    paths; the standard error is their standard deviation / sqrt(n_sequences).
    """
    if exact:
        value = float(expected_loss(model, chain, length, start))
        x, prob = _all_paths(chain, length, start)
        bayes = float((prob * chain.next_nll(x).mean(1)).sum())
        return PopulationLoss(
            value, 0.0, True, length, chain.k**length, value - bayes, 0.0
        )
    if n_sequences < 2:
        raise ValueError(
            f"n_sequences must be >= 2 for a standard error; got {n_sequences}"
        )
    device = next(model.parameters()).device
    g = seeded(seed, device)
    per_seq, excess = [], []
    for lo in range(0, n_sequences, batch_size):
        x = chain.sample(
            min(batch_size, n_sequences - lo),
            length,
            generator=g,
            device=device,
            start=start,
        )
        nll = F.cross_entropy(
            model(x[:, :-1]).transpose(1, 2), x[:, 1:], reduction="none"
        ).double()
        per_seq.append(nll.mean(1).cpu())
        excess.append((nll - chain.next_nll(x)).mean(1).cpu())
    per_seq, excess = torch.cat(per_seq), torch.cat(excess)
    se = math.sqrt(n_sequences)
    return PopulationLoss(
        float(per_seq.mean()),
        float(per_seq.std() / se),
        False,
        length,
        n_sequences,
        float(excess.mean()),
        float(excess.std() / se),
    )


@torch.no_grad()
@one_thread()
def loss_slice(
    model: Transformer, chain: MarkovChain, ts, *, seed: int = 0, length: int = 10
) -> np.ndarray:
    """Exact loss L(θ + t v) for each t, along a random unit direction v over all
    parameters (seeded)."""
    g = seeded(seed)
    theta = dict(
        model.named_parameters()
    )  # a tied weight appears once, functional_call re-ties it
    v = {
        name: torch.randn(p.shape, generator=g, dtype=p.dtype).to(p.device)
        for name, p in theta.items()
    }
    norm = torch.sqrt(sum((u**2).sum() for u in v.values()))
    loss = exact_loss_function(model, chain, length)
    return np.array(
        [float(loss({n: p + (t / norm) * v[n] for n, p in theta.items()})) for t in ts]
    )


@one_thread()
def gradient_norm(model: Transformer, chain: MarkovChain, length: int = 10) -> float:
    """‖∇_θ L(θ)‖ of the exact population loss over paths of ``length``
    states."""
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(
        expected_loss(model, chain, length), params, allow_unused=True
    )
    return float(
        torch.sqrt(sum((g.double() ** 2).sum() for g in grads if g is not None))
    )


@torch.no_grad()
def attention_ratio(model: Transformer, x: torch.Tensor, layer: int = 0) -> np.ndarray:
    """App. D: ‖attn_n‖ / ‖x_n + attn_n‖ per position (batch mean) — how much
    attention adds to the residual."""
    t = model.trace(x)["layers"][layer]
    # clamp: where x_n + attn_n = 0 (e.g. e_0 = p_n = 0 in Thm 1's construction)
    # attention adds nothing
    ratio = t["attention"].norm(dim=-1) / (t["input"] + t["attention"]).norm(
        dim=-1
    ).clamp_min(1e-30)
    return ratio.mean(0).cpu().numpy()


@torch.no_grad()
def ablate_attention(model: Transformer) -> Transformer:
    """A copy of ``model`` with every attention output removed (W_O = 0): App. D's
    'formula' predictor."""
    out = copy.deepcopy(model)
    for block in out.blocks:
        block.attn.W_O.weight.zero_()
    return out


@torch.no_grad()
def singular_values(model: Transformer) -> dict[str, np.ndarray]:
    """Singular values of every weight matrix (App. D: near rank one after training)."""
    return {
        name: torch.linalg.svdvals(p.detach().double().cpu()).numpy()
        for name, p in model.named_parameters()
        if p.dim() == 2 and name != "wpe.weight"
    }


@torch.no_grad()
def positional_spread(model: Transformer, length: int) -> float:
    """App. D: ‖p_n - mean_n p_n‖ averaged over n ≤ length, relative to
    ‖e_1 - e_0‖ (0: constant in n)."""
    p = model.wpe.weight[:length].double()
    e = model.wte.weight.double()
    return float((p - p.mean(0)).norm(dim=-1).mean() / (e[1] - e[0]).norm())


def shared_direction(model: Transformer, length: int) -> dict[str, float]:
    """App. D (eq. 27): e ∝ v, p_n ∝ v, W_1 = w vᵀ and W_2 = v wᵀ for one v in R^d.
    With v the top right singular vector of W_1 (first block) and w its left one:
    |cos| with v of e = e_1 − e_0, of the mean p_n (n < ``length``) and of W_2's top
    left singular vector, |cos| of w with W_2's top right one, and ‖mean p_n‖ / ‖e‖
    (a zero vector is 0 · v)."""
    ff = model.blocks[0].ff
    u1, _, v1 = torch.linalg.svd(ff.W_1.weight.detach().double())
    u2, _, v2 = torch.linalg.svd(ff.W_2.weight.detach().double())
    v, w = v1[0], u1[:, 0]
    e = (model.wte.weight[1] - model.wte.weight[0]).detach().double()
    p = model.wpe.weight[:length].detach().double().mean(0)

    def cos(a: torch.Tensor, b: torch.Tensor) -> float:
        norm = a.norm() * b.norm()
        return float((a @ b).abs() / norm) if norm > 0 else 0.0

    return {
        "e": cos(e, v),
        "p": cos(p, v),
        "W_2": cos(u2[:, 0], v),
        "w": cos(v2[0], w),
        "p_norm": float(p.norm() / e.norm()) if e.norm() > 0 else float("inf"),
    }


# -------------------------------------------------------- second order: Thm 2 and Thm 3
def _exact_math():
    """Exact second derivatives need an attention that autograd can differentiate twice:
    the math backend."""
    return torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH)


def _hessian_of(f, x: torch.Tensor, chunk_size: int = 64) -> torch.Tensor:
    """Hessian of the scalar function f at the vector x: Hessian-vector products
    (forward over reverse), vmapped."""

    def hvp(v):
        return jvp(grad(f), (x,), (v,))[1]

    with _exact_math():
        H = vmap(hvp, chunk_size=chunk_size)(
            torch.eye(x.numel(), dtype=x.dtype, device=x.device)
        )
    return (H + H.T) / 2


@one_thread()
def hessian(
    model: Transformer, chain: MarkovChain, length: int = 10, start: str = "stationary"
) -> tuple[np.ndarray, list[str]]:
    """Exact Hessian of the population loss over all parameters of ``model``
    (flattened), and a label per coordinate.

    The positional table counts in full: build the model with ``max_len = length`` to
    keep the matrix small.
    """
    named = [
        (n, p.detach()) for n, p in model.named_parameters()
    ]  # a tied weight appears once
    shapes = [p.shape for _, p in named]
    flat = torch.cat([p.reshape(-1) for _, p in named])

    loss = exact_loss_function(model, chain, length, start)

    def f(v: torch.Tensor) -> torch.Tensor:
        params, i = {}, 0
        for (name, _), shape in zip(named, shapes):
            n = math.prod(shape)
            params[name] = v[i : i + n].view(shape)
            i += n
        return loss(params)

    labels = [f"{name}{list(idx)}" for name, p in named for idx in np.ndindex(*p.shape)]
    return _hessian_of(f, flat).cpu().numpy(), labels


@dataclass
class UnigramHessian:
    """Exact Hessian of the population loss at θ_π (Thm 2 tied, Thm 3 untied) in the
    paper's coordinates.

    Coordinates: the embeddings e_i = E[i] and (untied) head rows a_i = A[i], and the
    biases b_i, for the states i = 1..k-1; state 0 is held at its value at θ_π
    (E[0] = A[0] = 0, b_0 = log π_0). For the head's rows and the biases this removes
    the directions along which the softmax does not change (one vector added to every
    row, one number to every bias); for the embeddings (tied: the same rows) it is a
    restriction, whose cross term with e has zero mean at θ_π; for k = 2 it is exactly
    the paper's single-logit model, logit = <a, x_n e + ...> + b. Every other
    parameter (attention, feed-forward, positions) stays at θ_π: at θ_π the Hessian
    has no entries between those and these coordinates (see the book's chapter), so
    this block carries the curvature.
    ``matrix`` is ordered e, [a], b.
    """

    matrix: np.ndarray
    labels: list[str]
    blocks: dict[str, slice]
    model: Transformer

    @property
    def eigenvalues(self) -> np.ndarray:
        return np.linalg.eigvalsh(self.matrix)

    @property
    def min_eigenvalue(self) -> float:
        return float(self.eigenvalues[0])

    def eigenvector(self, i: int = 0) -> np.ndarray:
        """Unit eigenvector of the i-th smallest eigenvalue (0: the direction of most
        negative curvature)."""
        return np.linalg.eigh(self.matrix)[1][:, i]

    def params(self, v: np.ndarray) -> dict[str, torch.Tensor]:
        """Parameters θ_π + v (v in these coordinates), for
        ``expected_loss(model, chain, params=...)``."""
        return _unigram_params(
            self.model, torch.as_tensor(np.asarray(v), dtype=torch.float64)
        )


def _unigram_params(model: Transformer, v: torch.Tensor) -> dict[str, torch.Tensor]:
    cfg = model.config
    k, d = cfg.vocab_size, cfg.d_model
    params = {n: p.detach() for n, p in model.named_parameters()}
    i = 0
    names = ["wte.weight"] + ([] if cfg.tied else ["head.weight"])
    for name in names:
        rows = v[i : i + (k - 1) * d].view(k - 1, d)
        params[name] = params[name] + torch.cat([rows.new_zeros(1, d), rows])
        i += (k - 1) * d
    params["head.bias"] = params["head.bias"] + torch.cat(
        [v.new_zeros(1), v[i : i + k - 1]]
    )
    return params


@one_thread()
def unigram_hessian(
    chain: MarkovChain,
    config: TransformerConfig,
    *,
    length: int = 10,
    start: str = "stationary",
) -> UnigramHessian:
    """The exact Hessian at Thm 2's θ_π in the coordinates of :class:`UnigramHessian`
    (float64)."""
    model = unigram_point(chain, config).double()
    with torch.no_grad():
        model.head.bias.copy_(
            torch.as_tensor(np.log(chain.stationary()))
        )  # b = log π in float64, not float32
    k, d = config.vocab_size, config.d_model
    n_emb = (k - 1) * d
    embeddings = ["e"] if config.tied else ["e", "a"]
    blocks = {
        name: slice(i * n_emb, (i + 1) * n_emb) for i, name in enumerate(embeddings)
    }
    size = len(embeddings) * n_emb + k - 1
    blocks["b"] = slice(size - (k - 1), size)

    loss = exact_loss_function(model, chain, length, start)

    def f(v: torch.Tensor) -> torch.Tensor:
        return loss(_unigram_params(model, v))

    labels = [
        f"{name}_{i}[{j}]" for name in embeddings for i in range(1, k) for j in range(d)
    ]
    labels += [f"b_{i}" for i in range(1, k)]
    H = _hessian_of(f, torch.zeros(size, dtype=torch.float64)).numpy()
    return UnigramHessian(H, labels, blocks, model)


def unigram_curvature(chain: MarkovChain, tied: bool = True) -> float:
    """Closed form of the smallest Hessian eigenvalue at θ_π in
    :class:`UnigramHessian` coordinates (any k).

    To second order at θ_π the loss changes by Σ_ij M_ij <a_j, e_i> + the bias term,
    with M = diag(π)(1 π^T - P) (M_ij = E[1{x_n=i}(π_j - 1{x_{n+1}=j})]). Tied
    (a = e) the embedding block is (M + M^T) ⊗ I; untied it is
    [[0, M ⊗ I], [M^T ⊗ I, 0]], eigenvalues ±(singular values of M); the bias block
    is diag(π) - π π^T. All restricted to states 1..k-1 (state 0 is the reference).
    For k = 2, M_11 = c = pq(p+q-1)/(p+q)^2: tied min(2c, π_0 π_1), positive exactly
    when p + q > 1; untied -|c|.
    """
    pi = chain.stationary()
    M = (np.diag(pi) @ (np.outer(np.ones(chain.k), pi) - chain.P))[1:, 1:]
    bias = (np.diag(pi) - np.outer(pi, pi))[1:, 1:]
    if tied:
        emb = np.linalg.eigvalsh(M + M.T)
    else:
        s = np.linalg.svd(M, compute_uv=False)
        emb = np.concatenate([-s, s])
    return float(min(emb.min(), np.linalg.eigvalsh(bias).min()))


@torch.no_grad()
def perturbed(model: Transformer, std: float, *, seed: int = 0) -> Transformer:
    """A copy of ``model`` with independent N(0, std^2) noise added to every parameter
    (seeded)."""
    if not std >= 0:
        raise ValueError(f"std must be >= 0; got {std!r}")
    out = copy.deepcopy(model)
    g = seeded(seed)
    for p in out.parameters():
        p.add_(std * torch.randn(p.shape, generator=g, dtype=p.dtype).to(p.device))
    return out


@one_thread()
def population_descent(
    model: Transformer,
    chain: MarkovChain,
    *,
    steps: int,
    lr: float,
    length: int = 10,
    start: str = "stationary",
) -> tuple[Transformer, np.ndarray]:
    """Plain gradient descent θ ← θ - lr ∇L(θ) on the exact population loss over
    paths of ``length`` states.

    No sampling noise, no optimiser state: the deterministic dynamics near a stationary
    point (Thm 2, 3). Returns a trained copy of ``model`` and the exact loss before
    every step and after the last (an ensemble: each member descends its own loss;
    losses of shape (members, steps + 1)).
    """
    steps = check_int("steps", steps, 1)
    lr = check_number("lr", lr, low=0.0, open_low=True, what="a positive number")
    model = copy.deepcopy(model)
    params = [p for p in model.parameters() if p.requires_grad]
    exact_loss = exact_loss_function(
        model, chain, length, start
    )  # paths enumerated once, not per step
    losses = []
    for _ in range(steps):
        loss = exact_loss()
        losses.append(loss.detach().cpu().numpy())
        grads = torch.autograd.grad(loss.sum(), params)  # members are independent
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(lr * g)
    with torch.no_grad():
        losses.append(exact_loss().cpu().numpy())
    return model.eval(), np.array(losses, dtype=float).T


# ---------------------------------------------------------------- chapter-level checks
def construction_checks(
    chain: MarkovChain, *, d_model: int = 8, seed: int = 0, length: int = 10
) -> tuple[dict[str, dict], dict[str, str]]:
    """Thm 1 checked for every construction: tied and untied theory models, ``route``
    direct and feedforward.

    Returns ``(available, unavailable)``: ``available[name]`` holds the float64
    ``model``, its ``kernel_error`` (largest |f - P[x_n]| on 64 sampled paths of 200
    states, seeded), its exact ``loss`` over paths of ``length`` states and the ``grad``
    norm there; ``unavailable[name]`` says why a construction does not exist for this
    chain (the tied direct route needs p + q <= 1).
    """
    available, unavailable = {}, {}
    x = chain.sample(64, 200, seed=seed)
    for tied in (True, False):
        config = TransformerConfig.theory(d_model=d_model, tied=tied)
        for route in ("direct", "feedforward"):
            name = f"{'tied' if tied else 'untied'}, {route}"
            try:
                model = global_minimum(chain, config, route=route).double()
            except ValueError as err:
                unavailable[name] = str(err)
                continue
            with torch.no_grad():
                error = (model.probabilities(x) - torch.as_tensor(chain.P)[x]).abs()
            available[name] = dict(
                model=model,
                kernel_error=error.max().item(),
                loss=population_loss(model, chain, length=length, exact=True).mean,
                grad=gradient_norm(model, chain, length=length),
            )
    return available, unavailable


def appendix_d(model: Transformer, x: torch.Tensor, length: int) -> dict:
    """App. D's diagnostics of one trained model on test paths ``x`` (positions up to
    ``length``).

    ``formula_kernel``: App. D's formula, the prediction with attention dropped, after
    each state (row s: P(· | x_n = s), averaged over positions); ``ratio`` (per
    position) and ``ratio_mean``: attention's share
    ‖attn_n‖ / ‖x_n + attn_n‖; ``ablation``: the largest change of a predicted
    probability on ``x`` when attention is removed; ``spread``:
    :func:`positional_spread`; ``rank_ratio``: s_2 / s_1 of each weight matrix
    (0 for a zero matrix) and ``largest_rank_ratio`` their maximum; ``svals``: the
    singular values; ``direction``: :func:`shared_direction`.
    """
    ratio = attention_ratio(model, x)
    with torch.no_grad():
        formula = ablate_attention(model).probabilities(x)
        change = formula - model.probabilities(x)
    # App. D's formula (attention dropped): the prediction after each state, averaged
    # over the positions where it occurs; row s is P(· | x_n = s)
    states = range(formula.shape[-1])
    formula_kernel = np.stack(
        [formula[x == s].double().mean(0).cpu().numpy() for s in states]
    )
    svals = singular_values(model)
    # a zero matrix (Thm 1's switched-off layers) counts as rank one: ratio 0
    rank_ratio = {n: float(s[1] / s[0]) if s[0] > 0 else 0.0 for n, s in svals.items()}
    return dict(
        ratio=ratio,
        ratio_mean=float(ratio.mean()),
        ablation=change.abs().max().item(),
        spread=positional_spread(model, length),
        rank_ratio=rank_ratio,
        largest_rank_ratio=max(rank_ratio.values()),
        svals=svals,
        formula_kernel=formula_kernel,
        direction=shared_direction(model, length),
    )


def unigram_min_eigenvalue(k: int, p: float) -> float:
    """Smallest eigenvalue of the exact Hessian at the tied θ_π of the symmetric
    k-state chain (autodiff).

    Exact enumeration of all k^3 paths of length 3 (the Hessian at θ_π does not depend
    on the length under the stationary start), float64.
    """

    config = TransformerConfig.theory(vocab_size=k, tied=True, max_len=3)
    return unigram_hessian(symmetric(k, p), config, length=3).min_eigenvalue


def unigram_threshold(
    k: int, tol: float = 1e-6, *, lo: float = 0.3, hi: float = 1.0, min_eig=None
) -> float:
    """The switching probability p* where θ_π of the symmetric k-state chain turns
    into a local minimum.

    Bisection in p on the sign of :func:`unigram_min_eigenvalue` (or ``min_eig(k, p)``)
    until the bracket is shorter than ``tol``; returns its midpoint. The bracket
    [lo, hi] must have a negative smallest eigenvalue at ``lo`` and a positive one at
    ``hi`` (``ValueError`` otherwise).
    """
    check_number("tol", tol, low=0, high=1, open_low=True)
    min_eig = min_eig or unigram_min_eigenvalue
    if not min_eig(k, lo) < 0 < min_eig(k, hi):
        raise ValueError(
            f"the bracket [{lo}, {hi}] must have a negative smallest eigenvalue at lo "
            f"and a positive one at hi (k = {k})"
        )
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if min_eig(k, mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def n_params(config: TransformerConfig) -> int:
    """The number of parameters of ``Transformer(config)`` in closed form
    (framework chapter):
    k d (E) + T d (positions) + L (4 d² + 2 m d²) (attention,
    feed-forward of width m d) + k (b)
    + k d (A, untied only) + (2 L + 1) d (layer-norm gains, GPT-2 only)."""
    k, d, T, L = config.vocab_size, config.d_model, config.max_len, config.n_layers
    return (
        k * d
        + T * d
        + L * (4 * d**2 + 2 * config.ff_mult * d**2)
        + k
        + (0 if config.tied else k * d)
        + ((2 * L + 1) * d if config.layer_norm else 0)
    )
