"""Learning dynamics on the canonical low-rank manifold of the single-layer model
(Makkuva et al. 2024, arXiv 2406.03072, "Local to Global").

The paper (NeurIPS 2024) reduces the single-layer transformer on a binary chain
(p = P(1|0), q = P(0|1)) to two scalars, an embedding scale e and a feed-forward scale
w, plus the bias b. This module derives that reduction for THIS library's model,
``TransformerConfig.theory(tied=True)`` (no layer norm, ReLU, tied head with a biased
2-logit head).

The manifold (``lowrank_model``), with α the first basis vector of R^d, β the first of
the hidden space R^{ff_mult d} and s = sign(e) (+1 at e = 0):
  token embeddings   E_1 = (e/2) α,  E_0 = -(e/2) α
                     (centred: the head's difference vector E_1 - E_0 = e α)
  positions          p_n = 0
  attention          W_V = W_O = 0 (W_Q = W_K = 0): the attention output is 0,
                     and so are ∂L/∂W_V and ∂L/∂W_O
  feed-forward       W_1 = 2|w| s β α^T,  W_2 = 2 w s α β^T
                     (one balanced ReLU neuron, reading the direction of E_1)
  head               tied (A = E), bias (b_0, b_1) = (0, b)
With the input x_n = E_{x_n}, the neuron fires only on state 1 (pre-activation |w||e|),
so z = x + 2 w|w| e α·1{x_n = 1} and the logit difference
f = <E_1 - E_0, z> + b_1 - b_0 = logit of P(x_{n+1} = 1 | x_n) is
  f1 = (1/2 + 2 w|w|) e² + b,    f0 = b - e²/2
  (paper, Sec. 3, canonical model),
the paper's formulas exactly. The population loss is then (``reduced_loss``; paper's
loss with π = (q, p)/(p+q))
  L = -π_1 [q log σ(-f1) + (1-q) log σ(f1)]
      - π_0 [p log σ(f0) + (1-p) log σ(-f0)].
Where this differs from the paper's formulas / conventions:
  * The library's head has two logits; only f = logit_1 - logit_0 matters
    (softmax = sigmoid(f)), so the paper's single logit is the difference,
    b = b_1 - b_0, and e = ‖E_1 - E_0‖ (the embeddings are centred, E_0 = -E_1,
    which is what produces the paper's -e²/2 at state 0; an uncentred E_0 = 0 would
    give f0 = b instead).
  * The factor 2 of the paper's 2 w|w| lives in the feed-forward weights (2|w| in, 2w
    out, one neuron); the sign s makes the neuron read E_1 for e < 0 too, so that L is
    even in e as in the paper (with s = +1 it would be e|e|).
  * The gradient flow here is the paper's: Euclidean in (e, w), b held at its optimum
    (``flow``). The full model's Euclidean metric restricted to this manifold is
    diag(1/2, 8) in (e, w) (‖∂θ/∂e‖² = 2 (1/2)²,
    ‖∂θ/∂w‖² = 2·2²), so the full-model flow, were it to stay on the
    manifold, would be ė = -2 ∂_e L, ẇ = -∂_w L / 8, with the conserved quantity
    e² - 16 (w² + sign(w) log|w|) instead of the paper's ``energy``. It does not stay
    exactly: at a generic point the full gradient is zero on W_Q, W_K, W_V, W_O and
    tangent on (W_1, W_2), but it has a common-mode component on E_0 + E_1 and on the
    positions p_n (the directions the paper's canonical form sets aside). Its projection
    on the manifold, (∂θ/∂e, ∂θ/∂w)·∇_θ L, is exactly ``reduced_gradient``
    (tested).
On the line e = 0 (Thm 2's unigram point θ_π, every w) the gradient vanishes;
∂²L/∂e² = 2c (1 + 2 w|w|) with c = pq (p+q-1)/(p+q)²
(``markovlib.theory.unigram_curvature``), hence the saddle at w = -1/√2 and the swap
at p + q = 1.
"""

from __future__ import annotations

import functools
import math
from contextlib import nullcontext
from dataclasses import dataclass, replace

import numpy as np
import torch
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from ._checks import one_thread, seeded
from .chains import MarkovChain, binary
from .model import Transformer, TransformerConfig, attention_off, attention_skipped
from .theory import expected_loss
from .train import seed_streams

__all__ = [
    "logits",
    "reduced_loss",
    "optimal_bias",
    "reduced_gradient",
    "energy",
    "saddle_energy",
    "saddle_w",
    "global_minimum_curve",
    "lowrank_model",
    "Trajectory",
    "flow",
    "flow_many",
    "classify",
    "predicted_basin",
    "PAPER_METRIC",
    "FULL_MODEL_METRIC",
    "FlowGrid",
    "flow_grid",
    "manifold_coordinates",
    "attention_off_loss",
    "loss_class",
    "ManifoldRuns",
    "manifold_descent",
    "manifold_trained",
    "init_coordinates",
    "predicted_basins",
    "attention_off_gap",
]


PAPER_METRIC = (1.0, 1.0)
# the full model's Euclidean metric pulled back to the manifold:
# ‖∂θ/∂e‖² = 1/2, ‖∂θ/∂w‖² = 8, so its gradient flow, restricted to
# the manifold, is ė = -2 ∂_e L, ẇ = -∂_w L / 8 (module docstring)
FULL_MODEL_METRIC = (2.0, 0.125)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * np.asarray(x, dtype=float)))


def _pi(p: float, q: float) -> tuple[float, float]:
    return q / (p + q), p / (p + q)


def logits(e, w, b):
    """(f1, f0): logit of P(next = 1) after state 1 and after state 0 on the manifold
    (paper Sec. 3)."""
    e, w = np.asarray(e, dtype=float), np.asarray(w, dtype=float)
    return (0.5 + 2 * w * np.abs(w)) * e**2 + b, b - e**2 / 2


def optimal_bias(e, w, p: float, q: float):
    """argmin_b L(e, w, b) in closed form: the positive root u = e^b of q e^{f1+f0-2b}
    u² + (q-p) e^{f0-b} u - p = 0."""
    e, w = np.asarray(e, dtype=float), np.asarray(w, dtype=float)
    c1, c0 = logits(e, w, 0.0)
    gap = c1 - c0  # (1 + 2 w|w|) e² = f1 - f0
    # S = sqrt((q-p)² + 4pq e^gap), computed in logs
    log_s = 0.5 * np.logaddexp(
        2 * math.log(abs(q - p)) if p != q else -np.inf, math.log(4 * p * q) + gap
    )
    if q >= p:  # u = 2p / (e^{c0} ((q-p) + S))
        with np.errstate(divide="ignore"):
            return (
                math.log(2 * p)
                - c0
                - np.logaddexp(math.log(q - p) if q > p else -np.inf, log_s)
            )
    return (
        np.logaddexp(math.log(p - q), log_s) - math.log(2 * q) - c1
    )  # u = ((p-q) + S) / (2q e^{c1})


def _loss_at(e, w, b, p: float, q: float):
    pi0, pi1 = _pi(p, q)
    f1, f0 = logits(e, w, b)
    return pi1 * (q * _softplus(f1) + (1 - q) * _softplus(-f1)) + pi0 * (
        p * _softplus(-f0) + (1 - p) * _softplus(f0)
    )


def reduced_loss(e, w, p: float, q: float, b=None):
    """Population loss L(e, w, b) of the canonical model, b at its optimum unless given
    (paper Sec. 3, loss L(θ))."""
    return _loss_at(e, w, optimal_bias(e, w, p, q) if b is None else b, p, q)


def reduced_gradient(e, w, p: float, q: float):
    """(∂L/∂e, ∂L/∂w) with b at its optimum (envelope theorem): A = π_1
    (σ(f1) - 1 + q) times (2e(1+2w|w|), 4|w|e²)."""
    e, w = np.asarray(e, dtype=float), np.asarray(w, dtype=float)
    f1, _ = logits(e, w, optimal_bias(e, w, p, q))
    # ∂L/∂f1 = -∂L/∂f0 at the optimal b
    A = _pi(p, q)[1] * (_sigmoid(f1) - 1 + q)
    return 2 * A * e * (1 + 2 * w * np.abs(w)), 4 * A * np.abs(w) * e**2


def energy(e, w, metric=PAPER_METRIC):
    """E(e, w) = e² - w² - sign(w) log|w|, constant along the (e, w) gradient flow
    (paper Sec. 4, energy).

    With ``metric`` = (m_e, m_w), the flow ė = -m_e ∂_e L, ẇ = -m_w ∂_w
    L (``flow``) conserves e²/m_e - (w² + sign(w) log|w|)/m_w instead
    (d/dt = -4Ae²(1 + 2w|w|) + (2w + 1/|w|) 4A|w|e² = 0); the paper's metric (1, 1)
    gives the paper's E, ``FULL_MODEL_METRIC`` = (2, 1/8) the full model's.
    """
    e, w = np.asarray(e, dtype=float), np.asarray(w, dtype=float)
    m_e, m_w = metric
    with np.errstate(divide="ignore", invalid="ignore"):  # w = 0: E is undefined (NaN)
        return e**2 / m_e - (w**2 + np.sign(w) * np.log(np.abs(w))) / m_w


def saddle_energy(metric=PAPER_METRIC) -> float:
    """E at the saddle (0, -1/√2): -(1 + log 2)/2, the level of the basin boundary
    (paper Sec. 4)."""
    return float(energy(0.0, -1 / math.sqrt(2), metric))


def _curvature_e(w: float, p: float, q: float, h: float = 1e-3) -> float:
    """∂²L/∂e² at e = 0 by a central difference (L is even in e):
    2 (L(h) - L(0)) / h²."""
    return 2 * float(reduced_loss(h, w, p, q) - reduced_loss(0.0, w, p, q)) / h**2


def saddle_w(p: float, q: float, bracket: tuple[float, float] = (-3.0, 3.0)) -> float:
    """The w on e = 0 where ∂²L/∂e² changes sign (minima ↔ maxima), by Brent's
    method (paper Sec. 4: -1/√2)."""
    if p + q == 1:
        raise ValueError("p + q = 1: the loss is flat in e on e = 0 (no saddle)")
    return float(brentq(_curvature_e, *bracket, args=(p, q), xtol=1e-12))


def global_minimum_curve(p: float, q: float, ws):
    """e ≥ 0 on the global-minimum curve (1 + 2 w|w|) e² = log((1-p)(1-q)/(pq)); NaN
    where no e solves it (Sec. 4)."""
    ws = np.asarray(ws, dtype=float)
    target = math.log((1 - p) * (1 - q) / (p * q))
    with np.errstate(divide="ignore", invalid="ignore"):
        e2 = target / (1 + 2 * ws * np.abs(ws))
    return np.where(e2 > 0, np.sqrt(np.where(e2 > 0, e2, 0.0)), np.nan)


def _pq(chain_or_pq) -> tuple[float, float]:
    if isinstance(chain_or_pq, MarkovChain):
        if chain_or_pq.k != 2:
            raise ValueError(
                f"the low-rank reduction is for binary chains; got k={chain_or_pq.k}"
            )
        return float(chain_or_pq.P[0, 1]), float(chain_or_pq.P[1, 0])
    p, q = chain_or_pq
    binary(p, q)  # validates
    return float(p), float(q)


@torch.no_grad()
def lowrank_model(
    e: float,
    w: float,
    b: float | None,
    chain_or_pq,
    config: TransformerConfig | None = None,
    dtype=torch.float64,
) -> Transformer:
    """The full ``Transformer`` at the manifold point (e, w, b) (module docstring);
    b = None: the optimal bias."""
    config = config or TransformerConfig.theory(tied=True)
    if (
        config.vocab_size != 2
        or not config.tied
        or config.layer_norm
        or config.activation != "relu"
    ):
        raise ValueError(
            "lowrank_model needs TransformerConfig.theory(vocab_size=2, tied=True)"
        )
    p, q = _pq(chain_or_pq)
    b = float(optimal_bias(e, w, p, q)) if b is None else float(b)
    model = Transformer(config).to(dtype)
    for prm in model.parameters():
        prm.zero_()
    s = 1.0 if e >= 0 else -1.0
    model.wte.weight[0, 0], model.wte.weight[1, 0] = (
        -e / 2,
        e / 2,
    )  # E_0 = -(e/2) α, E_1 = (e/2) α (head tied)
    ff = model.blocks[0].ff
    ff.W_1.weight[0, 0] = 2 * abs(w) * s  # W_1 = 2|w| s β α^T
    ff.W_2.weight[0, 0] = 2 * w * s  # W_2 = 2w s α β^T
    model.head.bias[1] = b  # (b_0, b_1) = (0, b)
    return model


class Trajectory:
    """A gradient-flow solution: times ``t``, states ``e``, ``w``, the ``endpoint`` and
    the energy ``drift``."""

    def __init__(self, sol, metric=PAPER_METRIC):
        self.t, (self.e, self.w) = sol.t, sol.y
        self.success, self.message = sol.success, sol.message
        self.endpoint = (float(self.e[-1]), float(self.w[-1]))
        E = energy(self.e, self.w, metric)
        self.drift = float(np.max(np.abs(E - E[0])))  # max_t |E(t) - E(0)|

    def __repr__(self) -> str:
        return (
            f"Trajectory(endpoint={self.endpoint}, drift={self.drift:.2e}, "
            f"n={len(self.t)})"
        )


def flow(
    e0: float,
    w0: float,
    p: float,
    q: float,
    t_max: float = 500.0,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    n_points: int = 200,
    metric=PAPER_METRIC,
) -> Trajectory:
    """Integrate (ė, ẇ) = -∇L(e, w), b at its optimum, with ``solve_ivp`` (DOP853)
    on [0, t_max] (paper Sec. 4).

    ``metric`` = (m_e, m_w) scales the two components: ė = -m_e ∂_e L, ẇ = -m_w
    ∂_w L (``FULL_MODEL_METRIC``: the full model's gradient flow on the manifold); the
    drift is that of the matching ``energy``."""
    m_e, m_w = metric

    def rhs(_, y):
        ge, gw = reduced_gradient(y[0], y[1], p, q)
        return [-m_e * float(ge), -m_w * float(gw)]

    sol = solve_ivp(
        rhs,
        (0.0, t_max),
        [e0, w0],
        method="DOP853",
        rtol=rtol,
        atol=atol,
        t_eval=np.linspace(0.0, t_max, n_points),
    )
    return Trajectory(sol, metric)


def flow_many(
    e0,
    w0,
    p: float,
    q: float,
    t_max: float = 500.0,
    *,
    rtol: float = 1e-9,
    atol: float = 1e-12,
    metric=PAPER_METRIC,
    n_points: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """``flow`` for many starts at once (one vectorised ODE): endpoints (N, 2) and
    energy drifts (N,), the largest |E(t) - E(0)| over ``n_points`` times from 0 to
    t_max (the end included) along each trajectory."""
    e0, w0 = np.broadcast_arrays(
        np.asarray(e0, dtype=float).ravel(), np.asarray(w0, dtype=float).ravel()
    )
    n, (m_e, m_w) = len(e0), metric

    def rhs(_, y):
        ge, gw = reduced_gradient(y[:n], y[n:], p, q)
        return -np.concatenate([m_e * ge, m_w * gw])

    sol = solve_ivp(
        rhs,
        (0.0, t_max),
        np.concatenate([e0, w0]),
        method="DOP853",
        rtol=rtol,
        atol=atol,
        t_eval=np.linspace(0.0, t_max, max(2, n_points)),
    )
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    e, w = sol.y[:n], sol.y[n:]  # (N, times)
    drift = np.abs(energy(e, w, metric) - energy(e0, w0, metric)[:, None]).max(axis=1)
    return np.stack([e[:, -1], w[:, -1]], axis=1), drift


def classify(endpoint, p: float, q: float, tol: float = 1e-2) -> str:
    """'local' (on e = 0, the unigram line), 'global' (on the global-minimum curve),
    else 'saddle' (undecided)."""
    e, w = endpoint
    if abs(e) < tol:
        return "saddle" if abs(w + 1 / math.sqrt(2)) < tol else "local"
    gap = (1 + 2 * w * abs(w)) * e**2
    return (
        "global" if abs(gap - math.log((1 - p) * (1 - q) / (p * q))) < tol else "saddle"
    )


def predicted_basin(
    e0: float, w0: float, p: float, q: float, metric=PAPER_METRIC
) -> str:
    """Basin of (e0, w0) from the energy level through the saddle, E_s = -(1 + log 2)/2
    (paper Sec. 4).

    For w < 0, E < E_s: the level set splits into a branch w < -1/√2 and a branch
    -1/√2 < w < 0, each reaching e = 0; the branch whose end on e = 0 is a minimum
    (w < -1/√2 for p + q < 1, else -1/√2 < w) goes 'local'. For w > 0 the level set
    reaches e = 0 (a minimum only for p + q > 1); w = 0 is invariant. Else 'global'.
    With another ``metric`` the energy is that metric's (``energy``): the same picture,
    e rescaled by sqrt(m_e / m_w) (the full model's metric puts the boundary 4 times
    further out in e).
    """
    if e0 == 0:
        return "local"
    below = w0 < 0 and float(energy(e0, w0, metric)) < saddle_energy(metric)
    left = w0 < -1 / math.sqrt(2)
    if p + q < 1:
        return "local" if below and left else "global"
    if p + q > 1:
        return "local" if w0 >= 0 or (below and not left) else "global"
    return "local"  # p + q = 1: e = 0 is the global minimum (the chain is i.i.d.)


# ----------------------------------------------------------------------- grids of flows
@dataclass(frozen=True)
class FlowGrid:
    """Gradient flows from a grid of starts: each start's endpoint, class
    (``classify``), predicted basin (``predicted_basin``) and energy drift (largest
    |E(t) - E(0)| along its trajectory)."""

    p: float
    q: float
    starts: np.ndarray  # (N, 2): (e0, w0)
    ends: np.ndarray  # (N, 2)
    drift: np.ndarray  # (N,)
    found: np.ndarray  # (N,) 'global' | 'local' | 'saddle'
    predicted: np.ndarray  # (N,) 'global' | 'local'
    metric: tuple[float, float] = PAPER_METRIC

    @property
    def agree(self) -> np.ndarray:
        return self.found == self.predicted

    @property
    def agreement(self) -> float:
        """Fraction of starts whose flow ends in the predicted basin."""
        return float(np.mean(self.agree))

    @property
    def max_drift(self) -> float:
        return float(self.drift.max())


def flow_grid(
    p: float,
    q: float,
    es,
    ws,
    t_max: float = 2000.0,
    *,
    metric=PAPER_METRIC,
    rtol: float = 1e-9,
    atol: float = 1e-12,
) -> FlowGrid:
    """The flow from every (e0, w0) of the grid ``es`` × ``ws`` (one vectorised ODE),
    classified at t_max."""
    E0, W0 = np.meshgrid(np.asarray(es, dtype=float), np.asarray(ws, dtype=float))
    starts = np.stack([E0.ravel(), W0.ravel()], axis=1)
    ends, drift = flow_many(
        starts[:, 0], starts[:, 1], p, q, t_max, rtol=rtol, atol=atol, metric=metric
    )
    found = np.array([classify(x, p, q) for x in ends])
    predicted = np.array([predicted_basin(e, w, p, q, metric) for e, w in starts])
    return FlowGrid(p, q, starts, ends, drift, found, predicted, tuple(metric))


# ----------------------------------------------------- the full model from the manifold
def manifold_coordinates(model: Transformer) -> dict[str, np.ndarray]:
    """Read (e, w, b) off a theory model (one, or an ensemble: arrays over members), and
    how far it is off the manifold.

    e = ‖E_1 - E_0‖; w is the manifold's w with the same logit gap: with FF(x) = W_2
    ReLU(W_1 x) on the position-free inputs, g = <E_1 - E_0, FF(E_1) - FF(E_0)> / e²
    and w = sign(g) sqrt(|g|/2) (on the manifold g = 2 w|w|); b = b_1 - b_0. Off the
    manifold: ``common`` = ‖E_0 + E_1‖ / 2 (the common mode) and
    ``positions`` = max_n ‖p_n‖ (first ``max_len`` positions). Exact on the
    manifold; a projection elsewhere.
    """
    with torch.no_grad():
        E = model.wte.weight.double()
        ff = model.blocks[0].ff
        W1, W2 = ff.W_1.weight.double(), ff.W_2.weight.double()
        bias = model.head.bias.double()
        P = model.wpe.weight.double()
        if E.dim() == 2:  # one model: a leading axis of one
            E, W1, W2, bias, P = (t[None] for t in (E, W1, W2, bias, P))
        delta = E[:, 1] - E[:, 0]
        e = delta.norm(dim=-1)

        def ff_of(x):  # (N, d) -> (N, d)
            return torch.einsum(
                "nij,nj->ni", W2, torch.relu(torch.einsum("nij,nj->ni", W1, x))
            )

        gain = (delta * (ff_of(E[:, 1]) - ff_of(E[:, 0]))).sum(-1)
        g = torch.where(e > 0, gain / e.clamp_min(1e-300) ** 2, torch.zeros_like(e))
        w = torch.sign(g) * torch.sqrt(g.abs() / 2)
        out = dict(
            e=e,
            w=w,
            b=bias[:, 1] - bias[:, 0],
            common=(E[:, 0] + E[:, 1]).norm(dim=-1) / 2,
            positions=P.norm(dim=-1).max(dim=-1).values,
        )
    return {k: v.cpu().numpy() for k, v in out.items()}


@functools.lru_cache(maxsize=256)
def _joint_law(p: float, q: float) -> np.ndarray:
    """π_x P(y|x) of the binary chain (p, q), built once per chain: the loops of the
    manifold runs evaluate the loss thousands of times (read-only)."""
    chain = binary(p, q)
    joint = chain.stationary()[:, None] * chain.P
    joint.setflags(write=False)
    return joint


def attention_off_loss(
    model: Transformer, p: float, q: float, length: int
) -> torch.Tensor:
    """The exact population loss over paths of ``length`` states (as
    ``theory.expected_loss``, stationary start) of a model whose attention is off
    (W_V = W_O = 0 in every layer); differentiable.

    Then the logits at position n depend only on (x_n, n), so two constant paths give
    them all, and with x_n ~ π at every n: L = (1/(L-1)) Σ_n Σ_x π_x Σ_y P(y|x)
    (-log f_y(x, n)). The gradients equal those of the enumeration (W_V = W_O = 0: every
    attention gradient is zero either way), so gradient descent, which keeps
    W_V = W_O = 0, is the same with either. For an ensemble, the per-member losses (N,).
    ``length`` is free: no 2**length paths."""
    if not attention_off(model):
        raise ValueError(
            "attention_off_loss needs W_V = W_O = 0 in every layer (attention off)"
        )
    joint = _joint_law(float(p), float(q))
    dtype = next(model.parameters()).dtype
    device = next(model.parameters()).device
    idx = torch.tensor([[0] * (length - 1), [1] * (length - 1)], device=device)
    if model.n_models is not None:
        idx = idx.expand(model.n_models, 2, length - 1)
    logp = torch.log_softmax(model(idx).to(dtype), dim=-1)  # (..., 2 [x], L-1, 2 [y])
    weight = torch.tensor(joint, dtype=dtype, device=device)  # π_x P(y|x)
    return -(weight[:, None, :] * logp).sum((-3, -1)).mean(-1)


def _stack_on_manifold(
    starts, p: float, q: float, config: TransformerConfig, dtype
) -> Transformer:
    """An ensemble whose member i is
    ``lowrank_model(*starts[i], None, (p, q), config)``."""
    starts = np.asarray(starts, dtype=float).reshape(-1, 2)
    model = Transformer(config, n_models=len(starts)).to(dtype)
    with torch.no_grad():
        for i, (e, w) in enumerate(starts):
            single = lowrank_model(e, w, None, (p, q), config, dtype)
            for big, small in zip(model.parameters(), single.parameters()):
                big[i].copy_(small)
    return model


def loss_class(loss, p: float, q: float, frac: float = 0.05) -> np.ndarray:
    """'global' within ``frac`` of the gap H(π) - H_rate above H_rate, 'local' within
    it below H(π), else 'undecided' (a run that has not settled)."""
    chain = binary(p, q)
    lo, hi = chain.entropy_rate(), chain.unigram_entropy()
    loss = np.asarray(loss, dtype=float)
    tol = frac * (hi - lo)
    return np.where(
        loss < lo + tol,
        "global",
        np.where(np.abs(loss - hi) < tol, "local", "undecided"),
    )


@dataclass
class ManifoldRuns:
    """Full-model runs started on the manifold: per run its start, loss curve, (e, w)
    path and final class."""

    p: float
    q: float
    starts: np.ndarray  # (N, 2)
    steps: np.ndarray  # (K,) the steps at which ``path`` was read
    path: np.ndarray  # (N, K, 2): (e, w) read off the model (``manifold_coordinates``)
    loss: np.ndarray  # (N, K): exact loss (``attention_off_loss``) at those steps
    final: dict  # ``manifold_coordinates`` of the final models
    found: np.ndarray  # (N,) ``loss_class`` of the final loss
    attention_stayed_off: bool
    how: str = ""

    def agreement(self, predicted) -> float:
        """Fraction of runs whose final class equals ``predicted`` (N,)."""
        return float(np.mean(self.found == np.asarray(predicted)))


# The manifold runs skip their attention layers, which stay off (``_attention_skipped``:
# the same numbers bit for bit, about 3 times faster); False computes them (tests).
_SKIP_ATTENTION = True


def _skipping(model: Transformer):
    return attention_skipped(model) if _SKIP_ATTENTION else nullcontext(model)


def _theory_config(config, length: int) -> TransformerConfig:
    return config or TransformerConfig.theory(tied=True, max_len=max(length, 16))


class _Recorder:
    """The (e, w) path and the exact loss of every run of an ensemble, read at about
    ``n_records`` evenly spread steps of ``steps``."""

    def __init__(self, steps: int, n_records: int):
        self.steps = set(
            np.unique(np.linspace(0, steps, n_records).round().astype(int)).tolist()
        )
        self.at, self.path, self.losses = [], [], []

    def read(self, step: int, model: Transformer, loss: np.ndarray) -> None:
        c = manifold_coordinates(model)
        self.at.append(step)
        self.path.append(np.stack([c["e"], c["w"]], axis=1))
        self.losses.append(loss)

    def runs(
        self, model: Transformer, starts, p: float, q: float, how: str
    ) -> ManifoldRuns:
        """The :class:`ManifoldRuns` of what was read, ending at ``model``."""
        return ManifoldRuns(
            p,
            q,
            np.asarray(starts, dtype=float).reshape(-1, 2),
            np.array(self.at),
            np.stack(self.path, axis=1),
            np.stack(self.losses, axis=1),
            manifold_coordinates(model),
            loss_class(self.losses[-1], p, q),
            attention_off(model),
            how,
        )


def manifold_descent(
    starts,
    p: float,
    q: float,
    *,
    steps: int,
    lr: float,
    length: int = 10,
    config: TransformerConfig | None = None,
    n_records: int = 100,
) -> ManifoldRuns:
    """Plain gradient descent θ ← θ - lr ∇L(θ) on the exact population loss
    (paths of ``length`` states) of the full tied theory model, every parameter free,
    from each manifold point ``starts[i]`` = (e0, w0), b optimal.

    All runs are one ensemble in float64 (member i's gradient is that of its own loss).
    Time t = lr × steps corresponds to the manifold flow with ``FULL_MODEL_METRIC`` as
    long as the run stays on the manifold."""
    config = _theory_config(config, length)
    model = _stack_on_manifold(starts, p, q, config, torch.float64)
    params = list(model.parameters())
    rec = _Recorder(steps, n_records)
    with one_thread(), _skipping(model):
        _descend(model, params, p, q, steps, lr, length, rec)
    return rec.runs(
        model,
        starts,
        p,
        q,
        f"gradient descent on the exact loss, lr {lr:g}, {steps} "
        f"steps, length {length}",
    )


def _descend(model, params, p, q, steps, lr, length, rec: _Recorder):
    for step in range(steps + 1):
        loss = attention_off_loss(model, p, q, length)
        if step in rec.steps:
            rec.read(step, model, loss.detach().numpy().copy())
        if step == steps:
            break
        grads = torch.autograd.grad(loss.sum(), params, allow_unused=True)
        with torch.no_grad():
            for prm, g in zip(params, grads):
                if g is not None:  # None: a skipped attention weight (stays 0)
                    prm.sub_(lr * g)


def manifold_trained(results, starts, p: float, q: float) -> ManifoldRuns:
    """The :class:`ManifoldRuns` of training runs (``TrainResult`` objects, e.g. the
    authors' AdamW from the manifold: ``RunSpec(init={"kind": "manifold", ...})``)
    started at ``starts[i]`` = (e0, w0) with b optimal: (e, w) and the exact loss
    (``attention_off_loss`` at the training length) at the start, at the stored
    checkpoint and at the end; the class from the final exact loss."""
    starts = np.asarray(starts, dtype=float).reshape(-1, 2)
    if len(results) != len(starts):
        raise ValueError(
            f"one start per run: {len(starts)} starts, {len(results)} runs"
        )
    first = results[0]
    s, length = first.train_config, first.train_config.seq_len + 1
    at = {
        0: [
            lowrank_model(e, w, None, (p, q), r.config)
            for (e, w), r in zip(starts, results)
        ]
    }
    step = first.checkpoint_step
    if step and all(r.checkpoint is not None for r in results):
        at[step] = [r.checkpoint_model() for r in results]
    at[len(first.history) - 1] = [r.model for r in results]
    path, loss = [], []
    with torch.no_grad():
        for models in at.values():
            coords = [manifold_coordinates(m) for m in models]
            path.append([(float(x["e"][0]), float(x["w"][0])) for x in coords])
            loss.append([float(attention_off_loss(m, p, q, length)) for m in models])
    final = coords  # those of the final models, read last
    return ManifoldRuns(
        p,
        q,
        starts,
        np.array(list(at)),
        np.array(path).transpose(1, 0, 2),
        np.array(loss).T,
        {k: np.concatenate([f[k] for f in final]) for k in final[0]},
        loss_class(loss[-1], p, q),
        all(attention_off(r.model) for r in results),
        f"AdamW (the authors' optimiser), lr {s.lr:g}, {s.steps} steps, batch "
        f"{s.batch_size} x {s.seq_len}",
    )


def init_coordinates(
    config: TransformerConfig, seeds, init_std: float | None = None
) -> np.ndarray:
    """(e, w) of the initial weights of training runs with ``seeds`` (drawn as
    ``markovlib.train`` draws them: the initialisation stream of ``seed_streams``), read
    off by ``manifold_coordinates``; shape (len(seeds), 2).

    A projection: at initialisation attention, positions and the other neurons are not
    zero. ``init_std`` replaces the config's initialisation scale (the same draws,
    scaled).
    """

    if init_std is not None:
        config = replace(config, init_std=init_std)
    out = []
    for s in seeds:
        c = manifold_coordinates(
            Transformer(config, generator=seeded(seed_streams(int(s))[0], "cpu"))
        )
        out.append((float(c["e"][0]), float(c["w"][0])))
    return np.array(out).reshape(-1, 2)


def predicted_basins(starts, p: float, q: float, metric=PAPER_METRIC) -> np.ndarray:
    """``predicted_basin`` of every (e0, w0) row of ``starts``: an array of
    'global' / 'local'."""
    starts = np.asarray(starts, dtype=float).reshape(-1, 2)
    return np.array([predicted_basin(e, w, p, q, metric) for e, w in starts])


def attention_off_gap(model: Transformer, p: float, q: float, length: int) -> float:
    """Largest difference between ``attention_off_loss`` and the enumerated exact loss
    (``theory.expected_loss``) of ``model``, over the value and every entry of the
    gradient."""

    params = list(model.parameters())
    fast = attention_off_loss(model, p, q, length)
    slow = expected_loss(model, binary(p, q), length)
    gaps = [abs(float((fast - slow).detach()))]
    for a, b in zip(
        torch.autograd.grad(fast, params), torch.autograd.grad(slow, params)
    ):
        gaps.append(float((a - b).abs().max()))
    return max(gaps)
