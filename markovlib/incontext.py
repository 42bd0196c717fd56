"""Chains drawn per sequence, learnt in context (issue 68; Sec. 4.4 and its citations).

Each sequence has its own first-order kernel, every row drawn from a symmetric
Dirichlet(α) prior; the first state is uniform. No fixed kernel is there to learn: a
model must estimate the kernel from the sequence it reads. Three levels of the
next-token loss frame a run:

- **the ceiling**: the marginal, uniform by symmetry, log k;
- **unigram in context**: the add-α estimate of the state frequencies in the prefix,
  E[-log (c_j(x_1^n) + α) / (n + kα)] (no use of the current state);
- **the floor**: the Bayes-optimal in-context predictor, the posterior mean of the
  kernel's row x_n given the transitions seen so far, (c_{x_n, j} + α) / (c_{x_n} +
  kα) (the bigram statistic an induction head computes).

The levels are expectations over sequences, estimated by Monte Carlo with their
standard errors (:func:`levels`).
"""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from .model import Transformer
from .presets import Scale, resolve

__all__ = ["InContextChain", "bayes_nll", "unigram_nll", "Levels", "levels"]
__all__ += ["induction_score", "previous_token_score", "kernel_rates", "RATE_KERNELS"]
__all__ += ["SIZES", "SOURCE", "LAYERS", "scale", "Heads", "heads", "model_nll"]
__all__ += ["head_ablated", "uniform_attention", "EVAL_PATHS", "EVAL_SEED"]
__all__ += ["INDUCTION_LIFT", "PREVIOUS_TOKEN", "has_induction_head", "scores"]

# This book's sizes for sequences whose kernel is drawn per sequence (issue 68): the
# paper publishes none for first-order chains (its abstract states the finding from the
# work it cites; its only such runs are order 2, in the depth runs), so none
# of these is the authors'. Fixed before any shipped run, after a pilot of two-layer
# untied runs (6 seeds each, not shipped): an induction head by the rule in 1 of 6 at
# 6000 steps and lr 3e-3, in 1 of 6 at 3000 steps and lr 1e-2, in 0 of 6 at 3000 steps
# on sequences of 32; the others ended 0.005-0.026 nats above the Bayes floor.
SOURCE = (
    "this book's sizes (the paper trains no in-context chain): GPT-2 blocks, d = 16, "
    "1 head, sequences of 64, batch 32, AdamW lr 3e-3 one-cycle"
)
_COMMON = dict(d_model=16, seq_len=64, batch_size=32, lr=3e-3, eval_batches=4)
SIZES = {
    "smoke": dict(_COMMON, steps=40, seeds=2, eval_every=10, batch_size=8),
    "cpu": dict(_COMMON, steps=1500, seeds=2, eval_every=50),
    "paper": dict(_COMMON, steps=6000, seeds=12, eval_every=50),
}
LAYERS = (1, 2)  # the depths compared: one layer against two
EVAL_PATHS, EVAL_SEED = 1024, 20_680  # the paths every run is scored on (issue 68)


def scale(
    name: str | Scale = "auto", *, length: int | None = None, environ: bool = True
) -> Scale:
    """The in-context chapter's :class:`~markovlib.presets.Scale` at ``name``
    (``auto`` and ``$MARKOVLIB_SCALE`` as :func:`~markovlib.presets.resolve`), its
    sequences ``length`` long where given."""
    S = resolve(name, environ=environ)
    sizes = {"trap_seeds": SIZES[S.name]["seeds"], **SIZES[S.name]}
    if length is not None:
        sizes["seq_len"] = int(length)
    return replace(S, chapter="incontext", source=SOURCE, **sizes)


class InContextChain:
    """Sequences whose kernel is drawn per sequence: each of the k rows from a
    symmetric Dirichlet(``alpha``), the first state uniform (the setting of the
    in-context work Sec. 4.4 cites)."""

    def __init__(self, k: int = 2, alpha: float = 1.0):
        if int(k) != k or k < 2:
            raise ValueError(f"k must be an integer >= 2; got {k!r}")
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"alpha must be finite and > 0; got {alpha!r}")
        self.k, self.alpha = int(k), float(alpha)
        self.name = f"in-context(k={self.k}, alpha={self.alpha:g})"
        self._rate: float | None = None

    def stationary(self) -> np.ndarray:
        """The marginal of every position: uniform, by the prior's symmetry."""
        return np.full(self.k, 1.0 / self.k)

    def unigram_entropy(self) -> float:
        """The ceiling, log k: the loss of the marginal."""
        return math.log(self.k)

    def entropy_rate(self) -> float:
        """E[H_rate(P)] under the prior, by Monte Carlo over :data:`RATE_KERNELS`
        kernels (seed 0; standard error under 1e-3 of the value): the loss of a
        predictor told each sequence's kernel, the floor of infinite context."""
        if self._rate is None:
            self._rate = _mean_rate(self.k, self.alpha)
        return self._rate

    def kernels(self, batch: int, gen: torch.Generator, device) -> torch.Tensor:
        """(batch, k, k) kernels, each row a Dirichlet(alpha) draw: normalised
        Gamma(alpha) draws by the inverse transform of ``gen``'s uniforms (torch's
        Gamma sampler reads the global generator, not ``gen``)."""
        from scipy.special import gammaincinv  # scipy only where kernels are drawn

        u = torch.rand(batch, self.k, self.k, generator=gen, device=device)
        draws = gammaincinv(self.alpha, u.double().cpu().numpy().clip(1e-300))
        draws = torch.as_tensor(draws, device=device).clamp_min(1e-300)
        return draws / draws.sum(-1, keepdim=True)

    def sample(
        self,
        batch: int,
        length: int,
        *,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        device="cpu",
        start: str = "uniform",
    ) -> torch.Tensor:
        """``batch`` sequences of ``length`` states, a fresh kernel each: int64
        (batch, length); the first state uniform (``start`` is accepted for the
        :class:`~markovlib.chains.Chain` protocol: the marginal is uniform)."""
        if generator is None:
            generator = torch.Generator(device=device)
            generator.manual_seed(0 if seed is None else int(seed))
        P = self.kernels(batch, generator, device)
        u = torch.rand(batch, length, generator=generator, device=device)
        x = torch.empty(batch, length, dtype=torch.int64, device=device)
        x[:, 0] = (u[:, 0] * self.k).long().clamp_(max=self.k - 1)
        cdf = P.cumsum(-1)
        rows = torch.arange(batch, device=device)
        for n in range(1, length):
            row = cdf[rows, x[:, n - 1]]
            x[:, n] = (u[:, n, None] >= row[:, :-1]).sum(-1)
        return x

    def next_nll(self, x: torch.Tensor) -> torch.Tensor:
        """-log of the Bayes predictor's probability of x_{n+1} (:func:`bayes_nll`):
        (batch, L-1), float64."""
        return bayes_nll(x, self.k, self.alpha)


RATE_KERNELS = 200_000


@functools.cache
def _mean_rate(k: int, alpha: float) -> float:
    """:meth:`InContextChain.entropy_rate`, once per (k, alpha) in a process (the
    scorecard makes a chain per run: 72 draws of 200 000 kernels took 18 s)."""
    gen = torch.Generator().manual_seed(0)
    P = InContextChain(k, alpha).kernels(RATE_KERNELS, gen, "cpu")
    return float(kernel_rates(P).mean())


def kernel_rates(P: torch.Tensor) -> torch.Tensor:
    """H_rate of each kernel of ``P`` (n, k, k), float64: sum_i pi_i H(P_i), pi
    solving pi (P - I) = 0 with sum pi = 1 (one batched linear solve)."""
    k = P.shape[-1]
    A = P.transpose(-1, -2) - torch.eye(k, dtype=P.dtype, device=P.device)
    A[:, -1, :] = 1.0  # the last balance equation replaced by the normalisation
    b = torch.zeros(P.shape[0], k, dtype=P.dtype, device=P.device)
    b[:, -1] = 1.0
    pi = torch.linalg.solve(A, b)
    rows = -(P * torch.log(P.clamp_min(1e-300))).sum(-1)
    return (pi * rows).sum(-1)


def _counts_before(x: torch.Tensor, k: int) -> torch.Tensor:
    """c[b, n, i, j]: transitions i -> j among x_1..x_{n+1} of path b (the ones seen
    when predicting x_{n+2}), for n = 0..L-2: (batch, L-1, k, k), float64."""
    pairs = torch.nn.functional.one_hot(x[:, :-1] * k + x[:, 1:], k * k).double()
    seen = torch.cumsum(pairs, dim=1) - pairs  # before transition n -> n+1
    return seen.reshape(*seen.shape[:2], k, k)


def bayes_nll(x: torch.Tensor, k: int, alpha: float) -> torch.Tensor:
    """-log P(x_{n+1} | x_1^n) of the posterior-mean (add-α bigram) predictor, the
    Bayes-optimal one under the Dirichlet(α) prior: (batch, L-1), float64."""
    c = _counts_before(x, k)  # (batch, L-1, k, k): transitions before each step
    b = torch.arange(x.shape[0])[:, None]
    n = torch.arange(x.shape[1] - 1)[None, :]
    row = c[b, n, x[:, :-1]]  # (batch, L-1, k): the row of the current state
    hit = row.gather(-1, x[:, 1:, None]).squeeze(-1)
    return -torch.log((hit + alpha) / (row.sum(-1) + k * alpha))


def unigram_nll(x: torch.Tensor, k: int, alpha: float) -> torch.Tensor:
    """-log of the add-α estimate of the state frequencies in x_1^n at x_{n+1} (the
    unigram statistic in context, blind to x_n): (batch, L-1), float64."""
    seen = torch.cumsum(torch.nn.functional.one_hot(x, k).double(), dim=1)[:, :-1]
    hit = seen.gather(-1, x[:, 1:, None]).squeeze(-1)
    n = torch.arange(1, x.shape[1], dtype=torch.float64)[None, :]
    return -torch.log((hit + alpha) / (n + k * alpha))


@dataclass(frozen=True)
class Levels:
    """The three levels of the loss at one length, each a Monte Carlo mean over paths
    with its standard error (nats per token, averaged over the predicted positions)."""

    floor: float
    floor_se: float
    unigram: float
    unigram_se: float
    ceiling: float  # log k, exact
    paths: int


def levels(
    chain: InContextChain, length: int, *, paths: int = 4096, seed: int = 0
) -> Levels:
    """:class:`Levels` of ``chain`` at sequences of ``length``, from ``paths`` fresh
    sequences (the standard error over paths: each path's mean loss is one draw)."""
    x = chain.sample(paths, length, seed=seed)
    floor = bayes_nll(x, chain.k, chain.alpha).mean(1)
    uni = unigram_nll(x, chain.k, chain.alpha).mean(1)
    return Levels(
        float(floor.mean()),
        _standard_error(floor),
        float(uni.mean()),
        _standard_error(uni),
        chain.unigram_entropy(),
        paths,
    )


def _standard_error(per_path: torch.Tensor) -> float:
    """The standard error of the mean of independent per-path values."""
    return float(per_path.std() / math.sqrt(len(per_path)))


def induction_score(attention: torch.Tensor, x: torch.Tensor) -> float:
    """The share of attention from each position n to the positions i + 1 with
    x_i = x_n, i + 1 <= n (where the next state after an earlier visit of x_n sits),
    averaged over positions that have such an i: ``attention`` (batch, L, L), one
    head."""
    same = x[:, None, :-1] == x[:, :, None]  # (batch, n, i): x_i == x_n, i < L-1
    target = torch.zeros_like(attention, dtype=torch.bool)
    target[:, :, 1:] = same
    causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()
    target &= causal  # i + 1 <= n
    mass = (attention * target).sum(-1)
    has = target.any(-1)
    return float(mass[has].mean()) if has.any() else float("nan")


def previous_token_score(attention: torch.Tensor) -> float:
    """The mean attention from position n to n - 1 (n >= 2): a previous-token head
    puts it near 1; ``attention`` (batch, L, L), one head."""
    return float(attention.diagonal(offset=-1, dim1=-2, dim2=-1).mean())


def model_nll(model, x: torch.Tensor) -> torch.Tensor:
    """-log of the model's probability of x_{n+1}, every position of every path:
    (batch, L-1), float64 (the loss the Bayes floor :func:`bayes_nll` bounds)."""
    with torch.no_grad():
        logp = model(x).double().log_softmax(-1)[:, :-1]
    return -logp.gather(-1, x[:, 1:, None]).squeeze(-1)


def uniform_attention(length: int) -> torch.Tensor:
    """Causal attention spread evenly over 1..n: the baseline of the two scores."""
    return torch.tril(torch.ones(length, length)) / torch.arange(1, length + 1)[:, None]


@dataclass(frozen=True)
class Heads:
    """Per layer, the induction and previous-token scores of a one-head model on a
    batch of paths, and the induction score of uniform attention on the same paths."""

    induction: tuple[float, ...]
    previous: tuple[float, ...]
    uniform: float

    def lift(self, layer: int) -> float:
        """The induction score of ``layer`` as a share of the way from uniform attention
        (0) to all of it on the targets (1)."""
        return (self.induction[layer] - self.uniform) / (1 - self.uniform)


# the book's rule (issue 68, written before any run): an induction head is the last
# layer's attention on the targets (the positions after an earlier visit of the current
# state) at least halfway from uniform attention to all of it, above a layer whose
# attention on the previous position is at least PREVIOUS_TOKEN
INDUCTION_LIFT = 0.5
PREVIOUS_TOKEN = 0.5


def has_induction_head(h: Heads) -> bool:
    """The book's rule: the last layer's lift at least :data:`INDUCTION_LIFT` and a
    layer below it on the previous token (score at least :data:`PREVIOUS_TOKEN`)."""
    below = h.previous[:-1]
    return h.lift(-1) >= INDUCTION_LIFT and any(s >= PREVIOUS_TOKEN for s in below)


def heads(model, x: torch.Tensor) -> Heads:
    """:class:`Heads` of ``model`` (one head per layer) on the paths ``x``."""
    att = [t["attention_weights"][:, 0] for t in model.trace(x)["layers"]]
    flat = uniform_attention(x.shape[1]).expand(x.shape[0], -1, -1)
    return Heads(
        tuple(induction_score(a, x) for a in att),
        tuple(previous_token_score(a) for a in att),
        induction_score(flat, x),
    )


def scores(config, k: int, alpha: float, length: int, weights: dict) -> dict:
    """The :func:`heads` and the mean loss (:func:`model_nll`) of the model ``config``
    with ``weights`` on the evaluation paths (:data:`EVAL_PATHS` paths of ``length``
    states of ``InContextChain(k, alpha)``, seed :data:`EVAL_SEED`): what the chapter
    and the scorecard read of a trained run, derived once per edition."""
    model = Transformer(config, generator=torch.Generator())  # its draws overwritten
    model.load_state_dict(weights)
    model.eval()
    x = InContextChain(k, alpha).sample(EVAL_PATHS, length, seed=EVAL_SEED)
    h = heads(model, x)
    return {
        "induction": list(h.induction),
        "previous": list(h.previous),
        "uniform": h.uniform,
        "loss": float(model_nll(model, x).mean()),
    }


def head_ablated(model, layer: int):
    """A copy of ``model`` whose attention in ``layer`` is zeroed (W_O = 0): the
    block adds nothing of what it attends to."""
    out = copy.deepcopy(model)
    with torch.no_grad():
        out.blocks[layer].attn.W_O.weight.zero_()
    return out
