"""Curvature at a point of the loss, Thm 2's test away from θ_π: the gradient and the
extreme eigenvalues of the Hessian over every parameter, by Lanczos on Hessian-vector
products (forward over reverse, ``torch.func``), in float64.

:func:`trap_curvature` is the test at a trained run's weights on a large fixed batch;
:func:`curvature` the same at any point of any loss (the exact population loss of
:mod:`markovlib.theory` included, where it is checked against the full Hessian).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, jvp

from ._checks import one_thread, seeded
from .chains import MarkovChain
from .model import Transformer, TransformerConfig
from .theory import _exact_math

__all__ = [
    "lanczos",
    "Curvature",
    "curvature",
    "batch_loss_function",
    "trap_curvature",
]


def lanczos(hvp, n: int, *, iterations: int = 60, seed: int = 0):
    """Ritz values (ascending) of the symmetric operator ``hvp`` on R^n and the
    residual ‖H y − θ y‖ of each Ritz pair: Lanczos with full reorthogonalisation
    from a seeded Gaussian start, float64."""
    ritz, residuals, _ = _lanczos(hvp, n, iterations, seed)
    return ritz, residuals


def _lanczos(hvp, n: int, iterations: int, seed: int):
    """:func:`lanczos`, and the unit Ritz vector of the smallest Ritz value."""
    q = torch.randn(n, generator=seeded(seed), dtype=torch.float64)
    basis, alphas, betas = [q / q.norm()], [], []
    for j in range(min(iterations, n)):
        w = hvp(basis[-1])
        alphas.append(float(w @ basis[-1]))
        Q = torch.stack(basis)
        for _ in range(2):  # twice is enough (Kahan): orthogonal to working precision
            w = w - Q.T @ (Q @ w)
        beta = float(w.norm())
        if j == min(iterations, n) - 1 or beta < 1e-12 * max(map(abs, alphas)):
            break
        betas.append(beta)
        basis.append(w / beta)
    T = np.diag(alphas) + np.diag(betas, 1) + np.diag(betas, -1)
    ritz, vectors = np.linalg.eigh(T)
    lowest = torch.stack(basis).T @ torch.as_tensor(vectors[:, 0])
    return ritz, np.abs(beta * vectors[-1, :]), lowest / lowest.norm()


@dataclass(frozen=True)
class Curvature:
    """A loss at one point: its value, gradient norm and the extreme eigenvalues of
    its Hessian (Ritz values of :func:`lanczos`, ascending, with their residuals)."""

    loss: float
    grad_norm: float
    ritz: np.ndarray
    residuals: np.ndarray
    n_params: int
    # the curvature along the smallest Ritz value's vector of a second loss on data
    # the first did not see: free of the selection that makes the smallest Ritz value
    # of a sampled loss negative where the expected loss has none (None: not asked)
    held_out: float | None = None
    held_out_se: float | None = None  # its standard error, from the losses' spread

    @property
    def min_eigenvalue(self) -> float:
        """The smallest Ritz value: an upper bound on the smallest eigenvalue, within
        its residual of an eigenvalue."""
        return float(self.ritz[0])

    @property
    def max_eigenvalue(self) -> float:
        return float(self.ritz[-1])


def curvature(
    f, params: dict, *, iterations: int = 60, seed: int = 0, held_out=()
) -> Curvature:
    """Thm 2's test at any point ``params`` (name → float64 tensor) of the scalar loss
    ``f(params)``: its gradient and the extreme eigenvalues of its Hessian, by
    :func:`lanczos` on Hessian-vector products (forward over reverse, torch.func);
    with ``held_out`` (losses on other data, each of the same weight), the mean of
    vᵀ ∇²loss v over them along the unit Ritz vector v of the smallest Ritz value, and
    its standard error from their spread."""
    names = list(params)
    shapes = [params[n].shape for n in names]
    flat = torch.cat([params[n].reshape(-1) for n in names]).double()

    def flat_of(loss):
        def flat_f(v: torch.Tensor) -> torch.Tensor:
            out, i = {}, 0
            for name, shape in zip(names, shapes):
                out[name] = v[i : i + math.prod(shape)].view(shape)
                i += math.prod(shape)
            return loss(out)

        return flat_f

    flat_f = flat_of(f)
    with _exact_math():
        gradient = grad(flat_f)(flat)
        ritz, residuals, v = _lanczos(
            lambda u: jvp(grad(flat_f), (flat,), (u,))[1],
            flat.numel(),
            iterations,
            seed,
        )
        value = float(flat_f(flat))
        other = [float(v @ jvp(grad(flat_of(g)), (flat,), (v,))[1]) for g in held_out]
    mean = float(np.mean(other)) if other else None
    se = (
        float(np.std(other, ddof=1) / math.sqrt(len(other))) if len(other) > 1 else None
    )
    return Curvature(
        value, float(gradient.norm()), ritz, residuals, flat.numel(), mean, se
    )


def batch_loss_function(model: Transformer, x: torch.Tensor):
    """``params ↦`` the mean next-token cross entropy of ``model`` at ``params`` on
    the fixed paths ``x`` (a loss of eq. (2) on one large batch)."""

    def loss(params: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = functional_call(model, params, (x[:, :-1],))
        return F.cross_entropy(logits.flatten(0, -2), x[:, 1:].flatten())

    return loss


@one_thread()
def trap_curvature(
    config: TransformerConfig,
    chain: MarkovChain,
    weights: dict,
    *,
    batch: int = 128,
    length: int = 128,
    seed: int = 0,
    iterations: int = 60,
    fresh_batch: int = 0,
    fresh_seed: int = 1,
) -> Curvature:
    """Thm 2's local-minimum test at a trained run's ``weights`` (a state dict): the
    gradient and the extreme Hessian eigenvalues of the loss on ``batch`` fixed paths
    of ``length`` states (seeded), over every parameter, in float64; with
    ``fresh_batch``, the smallest Ritz value's direction held out on that many other
    paths (seed ``fresh_seed``), ``batch`` at a time (the memory of one batch)."""
    model = Transformer(config).double().eval()
    params = {
        name: torch.as_tensor(weights[name]).double()
        for name, _ in model.named_parameters()
    }

    if fresh_batch % batch:
        raise ValueError(f"fresh_batch {fresh_batch} is not a multiple of {batch}")
    x = chain.sample(batch, length, generator=seeded(seed))
    fresh = []
    if fresh_batch:
        y = chain.sample(fresh_batch, length, generator=seeded(fresh_seed))
        fresh = [batch_loss_function(model, part) for part in y.split(batch)]
    return curvature(
        batch_loss_function(model, x),
        params,
        iterations=iterations,
        seed=seed,
        held_out=fresh,
    )
