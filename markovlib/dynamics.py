"""Learning dynamics on the canonical low-rank manifold of the single-layer model (Makkuva et al. 2024,
arXiv 2406.03072, "Local to Global").

The paper (NeurIPS 2024) reduces the single-layer transformer on a binary chain (p = P(1|0), q = P(0|1)) to two
scalars, an embedding scale e and a feed-forward scale w, plus the bias b. This module derives that reduction for THIS
library's model, ``TransformerConfig.theory(tied=True)`` (no layer norm, ReLU, tied head with a biased 2-logit head).

The manifold (``lowrank_model``), with α the first basis vector of R^d, β the first of the hidden space R^{ff_mult d}
and s = sign(e) (+1 at e = 0):
  token embeddings   E_1 = (e/2) α,  E_0 = -(e/2) α      (centred: the head's difference vector E_1 - E_0 = e α)
  positions          p_n = 0
  attention          W_V = W_O = 0 (W_Q = W_K = 0): the attention output is 0, and so are ∂L/∂W_V and ∂L/∂W_O
  feed-forward       W_1 = 2|w| s β α^T,  W_2 = 2 w s α β^T  (one balanced ReLU neuron, reading the direction of E_1)
  head               tied (A = E), bias (b_0, b_1) = (0, b)
With the input x_n = E_{x_n}, the neuron fires only on state 1 (pre-activation |w||e|), so z = x + 2 w|w| e α·1{x_n = 1}
and the logit difference f = <E_1 - E_0, z> + b_1 - b_0 = logit of P(x_{n+1} = 1 | x_n) is
  f1 = (1/2 + 2 w|w|) e² + b,    f0 = b - e²/2                                  (paper, Sec. 3, canonical model),
the paper's formulas exactly. The population loss is then (``reduced_loss``; paper's loss with π = (q, p)/(p+q))
  L = -π_1 [q log σ(-f1) + (1-q) log σ(f1)] - π_0 [p log σ(f0) + (1-p) log σ(-f0)].
Where this differs from the paper's formulas / conventions:
  * The library's head has two logits; only f = logit_1 - logit_0 matters (softmax = sigmoid(f)), so the paper's
    single logit is the difference, b = b_1 - b_0, and e = ‖E_1 - E_0‖ (the embeddings are centred, E_0 = -E_1,
    which is what produces the paper's -e²/2 at state 0; an uncentred E_0 = 0 would give f0 = b instead).
  * The factor 2 of the paper's 2 w|w| lives in the feed-forward weights (2|w| in, 2w out, one neuron); the sign s
    makes the neuron read E_1 for e < 0 too, so that L is even in e as in the paper (with s = +1 it would be e|e|).
  * The gradient flow here is the paper's: Euclidean in (e, w), b held at its optimum (``flow``). The full model's
    Euclidean metric restricted to this manifold is diag(1/2, 8) in (e, w) (‖∂θ/∂e‖² = 2 (1/2)², ‖∂θ/∂w‖² = 2·2²),
    so the full-model flow, were it to stay on the manifold, would be ė = -2 ∂_e L, ẇ = -∂_w L / 8, with the conserved
    quantity e² - 16 (w² + sign(w) log|w|) instead of the paper's ``energy``. It does not stay exactly: at a generic
    point the full gradient is zero on W_Q, W_K, W_V, W_O and tangent on (W_1, W_2), but it has a common-mode
    component on E_0 + E_1 and on the positions p_n (the directions the paper's canonical form sets aside).
    Its projection on the manifold, (∂θ/∂e, ∂θ/∂w)·∇_θ L, is exactly ``reduced_gradient`` (tested).
On the line e = 0 (Thm 2's unigram point θ_π, every w) the gradient vanishes; ∂²L/∂e² = 2c (1 + 2 w|w|) with
c = pq (p+q-1)/(p+q)² (``markovlib.theory.unigram_curvature``), hence the saddle at w = -1/√2 and the swap at p + q = 1.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from .chains import MarkovChain, binary
from .model import Transformer, TransformerConfig

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
]


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * np.asarray(x, dtype=float)))


def _pi(p: float, q: float) -> tuple[float, float]:
    return q / (p + q), p / (p + q)


def logits(e, w, b):
    """(f1, f0): logit of P(next = 1) after state 1 and after state 0 on the manifold (paper Sec. 3)."""
    e, w = np.asarray(e, dtype=float), np.asarray(w, dtype=float)
    return (0.5 + 2 * w * np.abs(w)) * e**2 + b, b - e**2 / 2


def optimal_bias(e, w, p: float, q: float):
    """argmin_b L(e, w, b) in closed form: the positive root u = e^b of q e^{f1+f0-2b} u² + (q-p) e^{f0-b} u - p = 0."""
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
    """Population loss L(e, w, b) of the canonical model, b at its optimum unless given (paper Sec. 3, loss L(θ))."""
    return _loss_at(e, w, optimal_bias(e, w, p, q) if b is None else b, p, q)


def reduced_gradient(e, w, p: float, q: float):
    """(∂L/∂e, ∂L/∂w) with b at its optimum (envelope theorem): A = π_1 (σ(f1) - 1 + q) times (2e(1+2w|w|), 4|w|e²)."""
    e, w = np.asarray(e, dtype=float), np.asarray(w, dtype=float)
    f1, _ = logits(e, w, optimal_bias(e, w, p, q))
    A = _pi(p, q)[1] * (_sigmoid(f1) - 1 + q)  # ∂L/∂f1 = -∂L/∂f0 at the optimal b
    return 2 * A * e * (1 + 2 * w * np.abs(w)), 4 * A * np.abs(w) * e**2


def energy(e, w):
    """E(e, w) = e² - w² - sign(w) log|w|, constant along the (e, w) gradient flow (paper Sec. 4, energy)."""
    e, w = np.asarray(e, dtype=float), np.asarray(w, dtype=float)
    with np.errstate(divide="ignore"):
        return e**2 - w**2 - np.sign(w) * np.log(np.abs(w))


def saddle_energy() -> float:
    """E at the saddle (0, -1/√2): -(1 + log 2)/2, the level of the basin boundary (paper Sec. 4)."""
    return float(energy(0.0, -1 / math.sqrt(2)))


def _curvature_e(w: float, p: float, q: float, h: float = 1e-3) -> float:
    """∂²L/∂e² at e = 0 by a central difference (L is even in e): 2 (L(h) - L(0)) / h²."""
    return 2 * float(reduced_loss(h, w, p, q) - reduced_loss(0.0, w, p, q)) / h**2


def saddle_w(p: float, q: float, bracket: tuple[float, float] = (-3.0, 3.0)) -> float:
    """The w on e = 0 where ∂²L/∂e² changes sign (minima ↔ maxima), by Brent's method (paper Sec. 4: -1/√2)."""
    if p + q == 1:
        raise ValueError("p + q = 1: the loss is flat in e on e = 0 (no saddle)")
    return float(brentq(_curvature_e, *bracket, args=(p, q), xtol=1e-12))


def global_minimum_curve(p: float, q: float, ws):
    """e ≥ 0 on the global-minimum curve (1 + 2 w|w|) e² = log((1-p)(1-q)/(pq)); NaN where no e solves it (Sec. 4)."""
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
    """The full ``Transformer`` at the manifold point (e, w, b) (module docstring); b = None: the optimal bias."""
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
    """A gradient-flow solution: times ``t``, states ``e``, ``w``, the ``endpoint`` and the energy ``drift``."""

    def __init__(self, sol):
        self.t, (self.e, self.w) = sol.t, sol.y
        self.success, self.message = sol.success, sol.message
        self.endpoint = (float(self.e[-1]), float(self.w[-1]))
        E = energy(self.e, self.w)
        self.drift = float(np.max(np.abs(E - E[0])))  # max_t |E(t) - E(0)|

    def __repr__(self) -> str:
        return f"Trajectory(endpoint={self.endpoint}, drift={self.drift:.2e}, n={len(self.t)})"


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
) -> Trajectory:
    """Integrate (ė, ẇ) = -∇L(e, w), b at its optimum, with ``solve_ivp`` (DOP853) on [0, t_max] (paper Sec. 4)."""

    def rhs(_, y):
        ge, gw = reduced_gradient(y[0], y[1], p, q)
        return [-float(ge), -float(gw)]

    sol = solve_ivp(
        rhs,
        (0.0, t_max),
        [e0, w0],
        method="DOP853",
        rtol=rtol,
        atol=atol,
        t_eval=np.linspace(0.0, t_max, n_points),
    )
    return Trajectory(sol)


def flow_many(
    e0,
    w0,
    p: float,
    q: float,
    t_max: float = 500.0,
    *,
    rtol: float = 1e-9,
    atol: float = 1e-12,
) -> tuple[np.ndarray, np.ndarray]:
    """``flow`` for many starts at once (one vectorised ODE): endpoints (N, 2), energy drifts |E(t_max) - E(0)| (N,)."""
    e0, w0 = np.broadcast_arrays(
        np.asarray(e0, dtype=float).ravel(), np.asarray(w0, dtype=float).ravel()
    )
    n = len(e0)

    def rhs(_, y):
        ge, gw = reduced_gradient(y[:n], y[n:], p, q)
        return -np.concatenate([ge, gw])

    sol = solve_ivp(
        rhs,
        (0.0, t_max),
        np.concatenate([e0, w0]),
        method="DOP853",
        rtol=rtol,
        atol=atol,
    )
    e, w = sol.y[:n, -1], sol.y[n:, -1]
    return np.stack([e, w], axis=1), np.abs(energy(e, w) - energy(e0, w0))


def classify(endpoint, p: float, q: float, tol: float = 1e-2) -> str:
    """'local' (on e = 0, the unigram line), 'global' (on the global-minimum curve), else 'saddle' (undecided)."""
    e, w = endpoint
    if abs(e) < tol:
        return "saddle" if abs(w + 1 / math.sqrt(2)) < tol else "local"
    gap = (1 + 2 * w * abs(w)) * e**2
    return (
        "global" if abs(gap - math.log((1 - p) * (1 - q) / (p * q))) < tol else "saddle"
    )


def predicted_basin(e0: float, w0: float, p: float, q: float) -> str:
    """Basin of (e0, w0) from the energy level through the saddle, E_s = -(1 + log 2)/2 (paper Sec. 4).

    For w < 0, E < E_s: the level set splits into a branch w < -1/√2 and a branch -1/√2 < w < 0, each reaching
    e = 0; the branch whose end on e = 0 is a minimum (w < -1/√2 for p + q < 1, else -1/√2 < w) goes 'local'.
    For w > 0 the level set reaches e = 0 (a minimum only for p + q > 1); w = 0 is invariant. Else 'global'.
    """
    if e0 == 0:
        return "local"
    below = w0 < 0 and float(energy(e0, w0)) < saddle_energy()
    left = w0 < -1 / math.sqrt(2)
    if p + q < 1:
        return "local" if below and left else "global"
    if p + q > 1:
        return "local" if w0 >= 0 or (below and not left) else "global"
    return "local"  # p + q = 1: e = 0 is the global minimum (the chain is i.i.d.)
