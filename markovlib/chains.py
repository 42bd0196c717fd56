"""Markov sources: kernels, stationary law, entropies and a parallel sampler
(paper Sec. 2, "Data").

The sampler draws one uniform ``U_n`` per position and turns step ``n`` into the map
``f_n(i) = F_i^{-1}(U_n)`` (inverse CDF of row ``i`` of ``P``): every state is moved by
the same uniform, a grand coupling. Then ``x_{n+1} = f_n(x_n)`` and
``x_n = (f_{n-1} ∘ … ∘ f_1)(x_1)``. The positions are cut into blocks of about
sqrt(L/2) steps, all advanced together: one pass composes each block's maps (the k
coupled paths that enter it, one vectorised gather per step), one short pass carries the
real state from block to block, one pass fills in the path inside every block: about 3
sqrt(L) vectorised steps instead of ``L`` sequential ``torch.multinomial`` calls. For
k = 2 every map is a constant, the identity or the swap, and the composition has a
closed form (last constant step + parity of swaps since), used instead. Each ``x_{n+1}``
given the past has law ``P[x_n]`` because ``U_n`` is independent of ``U_1..U_{n-1}``.
"""

from __future__ import annotations

import math
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import torch

from ._checks import (
    check_int as _check_int,
    check_probability as _check_probability,
    check_square as _check_square,
    generator as _make_generator,
)

__all__ = [
    "Chain",
    "stationary_law",
    "MarkovChain",
    "HigherOrderChain",
    "binary",
    "symmetric",
    "kth_order",
    "lag_switching",
    "random_kth_order",
    "binary_entropy",
    "lag_one_correlation",
    "empirical_kernel",
    "marginal_law",
    "entropy_grid",
]

_ATOL = 1e-8


def _xlogx(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0)


def binary_entropy(a) -> np.ndarray | float:
    """h(a) = -a log a - (1-a) log(1-a), in nats (0 at a in {0, 1})."""
    out = -(_xlogx(a) + _xlogx(1.0 - np.asarray(a, dtype=np.float64)))
    return float(out) if np.ndim(out) == 0 else out


@runtime_checkable
class Chain(Protocol):
    """What the rest of markovlib needs of a source: :class:`MarkovChain` and
    :class:`HigherOrderChain` both are."""

    k: int  # number of states (the model's vocabulary)
    name: str

    def stationary(self) -> np.ndarray: ...

    def entropy_rate(self) -> float: ...

    def unigram_entropy(self) -> float: ...

    def next_nll(self, x: torch.Tensor) -> torch.Tensor: ...

    def sample(
        self,
        batch: int,
        length: int,
        *,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        device: str | torch.device = "cpu",
        start: str = "stationary",
    ) -> torch.Tensor: ...


def stationary_law(P) -> np.ndarray:
    """The stationary law pi of a row-stochastic kernel: pi (P - I) = 0, sum pi = 1,
    solved by least squares on the stacked system (unique for an irreducible chain),
    clipped at 0 and renormalised."""
    P = np.asarray(P, dtype=np.float64)
    k = P.shape[0]
    A = np.vstack([(P - np.eye(k)).T, np.ones((1, k))])
    b = np.concatenate([np.zeros(k), [1.0]])
    pi, *_ = np.linalg.lstsq(A, b, rcond=None)
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


class _Sampler:
    """The ``sample`` of :class:`MarkovChain` and :class:`HigherOrderChain`: argument
    checks and the random generator, then the class's own ``_draw``."""

    def sample(
        self,
        batch: int,
        length: int,
        *,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        device: str | torch.device = "cpu",
        start: Literal["stationary", "uniform"] = "stationary",
    ) -> torch.Tensor:
        """Draw ``batch`` independent paths of ``length`` states; int64 tensor
        (batch, length). The first state (of a higher-order chain: the first context)
        follows the stationary law, or the uniform one with ``start="uniform"``."""
        batch, length = _check_int("batch", batch, 1), _check_int("length", length, 1)
        if start not in ("stationary", "uniform"):
            raise ValueError(f"start must be 'stationary' or 'uniform'; got {start!r}")
        device = torch.device(device)
        gen = _make_generator(seed, generator, device)
        return self._draw(batch, length, gen, device, start)


class MarkovChain(_Sampler):
    """A first-order Markov chain on states {0, …, k-1} with row-stochastic kernel
    ``P``."""

    def __init__(self, P, *, name: str | None = None):
        P = np.array(P, dtype=np.float64)
        _check_square("P", P, "states")
        if not np.all(np.isfinite(P)) or np.any(P < 0) or np.any(P > 1):
            raise ValueError("P must have entries in [0, 1]")
        rows = P.sum(axis=1)
        if np.any(np.abs(rows - 1.0) > 1e-6):
            raise ValueError(
                "P must be row-stochastic (each row sums to 1); row sums are "
                f"{np.round(rows, 6).tolist()}"
            )
        self.P = P / rows[:, None]
        self.k = P.shape[0]
        self.name = name or f"MarkovChain(k={self.k})"
        self._pi = self._solve_stationary()
        # inverse-CDF thresholds used by the sampler: state j is chosen when
        # U >= cumsum(P[i])[j-1]
        self._cdf = np.cumsum(self.P, axis=1)[:, :-1]
        self._cdf_pi = np.cumsum(self._pi)[:-1]
        # the coupled map f_U depends only on which interval between consecutive
        # thresholds (of all rows) U is in: at most k(k-1)+1 intervals, each with its
        # map, so a step's map is one grid lookup + one table lookup
        self._breaks = np.unique(self._cdf)
        starts = np.concatenate([[0.0], self._breaks])
        self._interval_maps = (self._cdf[None, :, :] <= starts[:, None, None]).sum(
            -1
        )  # (intervals, k)
        self._grid = _interval_grid(self._breaks.astype(np.float32))
        self._cache: dict = {}

    # ---------------------------------------------------------------- closed forms
    def _solve_stationary(self) -> np.ndarray:
        return stationary_law(self.P)

    def stationary(self) -> np.ndarray:
        """Stationary law pi (pi P = pi); for the binary chain (q, p)/(p+q)."""
        return self._pi.copy()

    def entropy_rate(self) -> float:
        """H_rate = sum_i pi_i H(P[i]) in nats: the loss of the Bayes predictor, the
        global minimum (Thm 1)."""
        return float(-(self._pi * _xlogx(self.P).sum(axis=1)).sum())

    def unigram_entropy(self) -> float:
        """H(pi) in nats: the loss of predicting the stationary law everywhere, the bad
        local minimum (Thm 2)."""
        return float(-_xlogx(self._pi).sum())

    def mutual_information(self) -> float:
        """I(x_n; x_{n+1}) = H(pi) - H_rate under the stationary law (0 iff the rows of
        P are equal)."""
        return self.unigram_entropy() - self.entropy_rate()

    @property
    def switching(self) -> float | None:
        """p + q for a binary chain (None for k > 2)."""
        return float(self.P[0, 1] + self.P[1, 0]) if self.k == 2 else None

    def __repr__(self) -> str:
        return f"{self.name} with P={np.round(self.P, 4).tolist()}"

    # ---------------------------------------------------------------- sampling
    def _tables(self, device: torch.device):
        if device not in self._cache:
            lo, inner = self._grid
            self._cache[device] = (
                torch.tensor(self._cdf, dtype=torch.float32, device=device),
                torch.tensor(self._cdf_pi, dtype=torch.float32, device=device),
                torch.tensor(lo, dtype=torch.int32, device=device),
                torch.tensor(inner, dtype=torch.float32, device=device).T.contiguous(),
                torch.tensor(self._interval_maps, dtype=torch.int64, device=device),
            )
        return self._cache[device]

    def _draw(self, batch, length, gen, device, start) -> torch.Tensor:
        """The coupled sampler of the module docstring."""
        cdf, cdf_pi, lo, inner, interval_maps = self._tables(device)
        u = torch.rand(batch, length, generator=gen, device=device)
        if start == "uniform":
            x0 = (u[:, 0] * self.k).long().clamp_(max=self.k - 1)
        else:
            x0 = (u[:, :1] >= cdf_pi).sum(-1)
        if length == 1:
            return x0[:, None]
        if self.k == 2:
            return _binary_paths(x0, u, cdf[0, 0], cdf[1, 0])
        return _blocked_paths(x0, u[:, 1:], lo, inner, interval_maps)

    def next_nll(self, x: torch.Tensor) -> torch.Tensor:
        """-log P(x_{n+1} | x_1^n) = -log P[x_n, x_{n+1}] along paths x (batch, L):
        (batch, L-1), float64."""
        log_P = torch.as_tensor(np.log(np.clip(self.P, 1e-300, None)), device=x.device)
        return -log_P[x[:, :-1], x[:, 1:]]

    def transition_counts(self, x: torch.Tensor) -> np.ndarray:
        """k×k matrix of observed transitions i→j in the paths ``x``
        (batch, length)."""
        x = torch.as_tensor(x)
        pairs = x[:, :-1] * self.k + x[:, 1:]
        return (
            torch.bincount(pairs.reshape(-1).cpu(), minlength=self.k * self.k)
            .reshape(self.k, self.k)
            .numpy()
        )


def _binary_paths(
    x0: torch.Tensor, u: torch.Tensor, t0: torch.Tensor, t1: torch.Tensor
) -> torch.Tensor:
    """Closed form of the scan for k = 2, where every step map is a constant, the
    identity or the swap.

    The coupled maps are f_n(0) = [U_n >= t0], f_n(1) = [U_n >= t1]. The state at n is
    the value v_r of the last constant map r <= n (position 1 counts as the constant
    x_1), flipped once per swap in (r, n]: x_n = v_r xor parity_r xor parity_n, with
    parity_n the parity of the number of swaps up to n. One cummax over keys
    (r << 2 | parity_r << 1 | v_r) finds the last constant map and carries both bits
    along.
    """
    from0, from1 = u >= t0, u >= t1
    from0[:, 0] = from1[:, 0] = x0.bool()
    parity = torch.cumsum(from0 & ~from1, dim=1, dtype=torch.int32).bitwise_and_(1)
    key = (
        (parity << 1)
        .bitwise_or_(from0)
        .bitwise_or_(torch.arange(u.shape[1], device=u.device, dtype=torch.int32) << 2)
    )
    last = torch.cummax(key.masked_fill_(from0 != from1, 0), dim=1).values
    return last.bitwise_xor_(last >> 1).bitwise_xor_(parity).bitwise_and_(1).long()


def _interval_grid(
    breaks: np.ndarray, cells: int = 4096
) -> tuple[np.ndarray, np.ndarray]:
    """Tables that give ``#{breaks <= u}`` (``torch.bucketize(u, breaks, right=True)``)
    for float32 ``u`` in [0, 1).

    Cell c = floor(u * cells) is exact for a power-of-two ``cells``. ``lo[c]`` counts
    the breaks <= c / cells, ``inner[c]`` lists the breaks strictly inside cell
    c (padded with 2 > u), so the count is ``lo[c] + sum_j [u >= inner[c, j]]``: a
    lookup and a few comparisons instead of a binary search.
    """
    edges = np.arange(cells, dtype=np.float32) / np.float32(cells)
    lo = np.searchsorted(breaks, edges, side="right")
    cell = np.floor(breaks.astype(np.float64) * cells).astype(np.int64)
    strictly_inside = (breaks.astype(np.float64) * cells != cell) & (cell < cells)
    counts = np.bincount(cell[strictly_inside], minlength=cells)
    inner = np.full((cells, max(int(counts.max(initial=0)), 0)), 2.0, dtype=np.float32)
    fill = np.zeros(cells, dtype=np.int64)
    for b, c in zip(breaks[strictly_inside], cell[strictly_inside]):
        inner[c, fill[c]] = b
        fill[c] += 1
    return lo, inner


def _buckets(u: torch.Tensor, lo: torch.Tensor, inner: torch.Tensor) -> torch.Tensor:
    """``torch.bucketize(u, breaks, right=True)`` through the tables of
    :func:`_interval_grid` (u contiguous)."""
    cell = (u * lo.shape[0]).to(lo.dtype).clamp_(max=lo.shape[0] - 1).view(-1)
    bucket = lo.index_select(0, cell)
    for row in inner:  # inner is stored transposed: one row per rank within a cell
        bucket += u.view(-1) >= row.index_select(0, cell)
    return bucket.view(u.shape)


def _blocked_paths(
    x0: torch.Tensor,
    u: torch.Tensor,
    lo: torch.Tensor,
    inner: torch.Tensor,
    interval_maps: torch.Tensor,
) -> torch.Tensor:
    """Paths x (batch, 1 + n) from x_0 and the uniforms u (batch, n) of the steps:
    x_{m+1} = f_m(x_m).

    The step maps are f_m = interval_maps[bucket(u_m)] (one k-vector each). The n steps
    are cut into nb blocks of L ≈ sqrt(n / 2), all advanced together. Pass 1 (L steps
    over batch × nb × k): the composed map of each block, i.e. where the coupled path
    that enters block j in state s leaves it. Pass 2 (nb steps over batch): the state
    entering block j is block j-1's map applied to the state entering block j-1. Pass
    3 (L steps over batch × nb): the real path inside every block from its entry state.
    Work O(n k) and few large temporaries (fresh large buffers cost page faults, which
    here cost more than the gathers).
    """
    batch, n = u.shape
    k = interval_maps.shape[1]
    L = max(1, math.isqrt(n // 2))
    nb = -(-n // L)
    # steps laid out (L, batch, nb) so that each step is one contiguous slab; the
    # padding after step n only ever follows the real steps, so it does not change them
    u = (
        torch.nn.functional.pad(u, (0, nb * L - n))
        .view(batch, nb, L)
        .permute(2, 0, 1)
        .contiguous()
    )
    bucket = _buckets(u, lo, inner)
    block = interval_maps.index_select(0, bucket[0].view(-1)).view(batch, nb, k)
    for t in range(1, L):
        step = interval_maps.index_select(0, bucket[t].view(-1)).view(batch, nb, k)
        block = step.gather(-1, block)
    entry = torch.empty(nb, batch, 1, dtype=interval_maps.dtype, device=u.device)
    entry[0, :, 0] = x0
    for j in range(1, nb):
        torch.gather(block[:, j - 1], -1, entry[j - 1], out=entry[j])
    flat, rest = (
        interval_maps.view(-1),
        torch.empty(L + 1, batch, nb, dtype=interval_maps.dtype, device=u.device),
    )
    rest[0] = entry.view(nb, batch).T
    bucket.mul_(k)
    for t in range(L):
        torch.index_select(
            flat, 0, (bucket[t] + rest[t]).view(-1), out=rest[t + 1].view(-1)
        )
    x = torch.empty(batch, 1 + nb * L, dtype=torch.int64, device=u.device)
    x[:, 0] = x0
    x[:, 1:].view(batch, nb, L).copy_(rest[1:].permute(1, 2, 0))
    return x if nb * L == n else x[:, : 1 + n].contiguous()


def binary(p: float, q: float) -> MarkovChain:
    """Binary chain with P(1|0) = p and P(0|1) = q (switching factor p + q); paper
    Sec. 2."""
    p = _check_probability("p", p)
    q = _check_probability("q", q)
    if p + q == 0:
        raise ValueError(
            "p + q must be > 0 (p = q = 0 never switches: no unique stationary law)"
        )
    return MarkovChain([[1 - p, p], [q, 1 - q]], name=f"binary(p={p:g}, q={q:g})")


def symmetric(k: int, p: float) -> MarkovChain:
    """k-state chain: stay with prob 1-p, move to each other state with prob p/(k-1);
    paper Sec. 5."""
    k = _check_int("k", k, 2)
    p = _check_probability("p", p)
    if p == 0:
        raise ValueError(
            "p must be > 0 for symmetric(k, p) (p = 0 never moves: no "
            "unique stationary law)"
        )
    P = np.full((k, k), p / (k - 1))
    np.fill_diagonal(P, 1 - p)
    return MarkovChain(P, name=f"symmetric(k={k}, p={p:g})")


class HigherOrderChain(_Sampler):
    """A chain of order ``order`` on {0, …, k-1}:
    x_{n+1} ~ P[(x_{n-order+1}, …, x_n)] (poster: "masking helps").

    ``P`` has one row per context, k**order rows, the context read as a base-k number
    whose last digit is x_n. The maths runs on the first-order chain of contexts
    (k**order states), :attr:`lifted`: its stationary law gives the law of the symbols,
    the entropy rate and the sampler (a path of contexts, one new symbol each).
    """

    def __init__(self, P, order: int, *, name: str | None = None):
        order = _check_int("order", order, 1)
        P = np.array(P, dtype=np.float64)
        if P.ndim != 2 or P.shape[1] < 2 or P.shape[0] != P.shape[1] ** order:
            raise ValueError(
                f"P must have k**order rows and k >= 2 columns; got shape {P.shape} "
                f"for order {order}"
            )
        if (
            not np.all(np.isfinite(P))
            or np.any(P < 0)
            or np.any(np.abs(P.sum(1) - 1) > 1e-6)
        ):
            raise ValueError("P must have entries in [0, 1] and rows that sum to 1")
        self.P, self.order, self.k = P / P.sum(1, keepdims=True), order, P.shape[1]
        self.name = name or f"order-{order} chain on {self.k} states"
        n = self.k**order
        lifted = np.zeros((n, n))
        for context in range(n):
            lifted[context, (context * self.k) % n + np.arange(self.k)] = self.P[
                context
            ]
        self.lifted = MarkovChain(lifted, name=f"contexts of {self.name}")

    def context_law(self) -> np.ndarray:
        """Stationary law of the context (x_{n-order+1}, …, x_n), indexed as the rows
        of P."""
        return self.lifted.stationary()

    def stationary(self) -> np.ndarray:
        """Stationary law of one symbol."""
        return self.context_law().reshape(-1, self.k).sum(0)

    def entropy_rate(self) -> float:
        """H_rate = Σ_c π(c) H(P[c]): the loss of the Bayes predictor that sees the
        last ``order`` symbols."""
        return float(-(self.context_law() * _xlogx(self.P).sum(1)).sum())

    def unigram_entropy(self) -> float:
        """H(π) of one symbol: the loss of predicting the marginal law everywhere."""
        return float(-_xlogx(self.stationary()).sum())

    def bigram_entropy(self) -> float:
        """H(x_{n+1} | x_n): the loss of the best predictor that sees only the last
        symbol (a first-order model)."""
        joint = (
            (self.context_law()[:, None] * self.P).reshape(-1, self.k, self.k).sum(0)
        )  # (x_n, x_{n+1})
        return float(-(_xlogx(joint).sum() - _xlogx(joint.sum(1)).sum()))

    def __repr__(self) -> str:
        return self.name

    def next_nll(self, x: torch.Tensor) -> torch.Tensor:
        """-log P(x_{n+1} | x_1^n) along paths x (batch, L) from the stationary start:
        (batch, L-1), float64.

        With a full context (n >= order) it is -log P[context, x_{n+1}]; before, the
        conditional of the stationary law of the first ``order`` symbols.
        """
        k, order, n = self.k, self.order, x.shape[1]
        log_P = torch.as_tensor(np.log(np.clip(self.P, 1e-300, None)), device=x.device)
        joint = self.context_law().reshape([k] * order)
        out = []
        for m in range(
            1, min(order, n)
        ):  # predict x_{m+1} from x_1..x_m with the stationary joint law
            num = torch.as_tensor(
                joint.sum(axis=tuple(range(m + 1, order))), device=x.device
            )
            den = torch.as_tensor(
                joint.sum(axis=tuple(range(m, order))), device=x.device
            )
            idx = tuple(x[:, i] for i in range(m + 1))
            out.append(
                (
                    torch.log(den[idx[:-1]].clamp_min(1e-300))
                    - torch.log(num[idx].clamp_min(1e-300))
                )[:, None]
            )
        if n > order:
            context = torch.zeros_like(x[:, order - 1 : -1])
            for lag in range(order):
                context = context * k + x[:, lag : n - order + lag]
            out.append(-log_P[context, x[:, order:]])
        return torch.cat(out, 1)

    def _draw(self, batch, length, gen, device, start) -> torch.Tensor:
        """The first ``order`` symbols are one context drawn from its stationary (or
        uniform) law, then one symbol per step of the lifted chain."""
        steps = max(1, length - self.order + 1)
        contexts = self.lifted._draw(batch, steps, gen, device, start)
        powers = self.k ** torch.arange(self.order - 1, -1, -1, device=contexts.device)
        first = (contexts[:, :1] // powers) % self.k  # digits of the first context
        return torch.cat([first, contexts[:, 1:] % self.k], dim=1)[:, :length]


def kth_order(P, order: int, *, name: str | None = None) -> HigherOrderChain:
    """A chain of order ``order`` with kernel P (k**order rows, one per context); see
    :class:`HigherOrderChain`."""
    return HigherOrderChain(P, order, name=name)


def lag_switching(order: int, p: float, q: float) -> HigherOrderChain:
    """Binary chain of order ``order`` where x_{n+1} depends only on x_{n-order+1}:
    switch 0→1 with p, 1→0 with q.

    It interleaves ``order`` independent copies of binary(p, q), so its entropy rate is
    binary(p, q)'s, and for order >= 2 the last symbol says nothing about the next one:
    a first-order predictor is stuck at H(π).
    """
    base = binary(p, q)
    order = _check_int("order", order, 1)
    oldest = np.arange(2**order) >> (
        order - 1
    )  # x_{n-order+1}, the leading digit of the context
    return HigherOrderChain(
        base.P[oldest], order, name=f"lag-{order} switching(p={p:g}, q={q:g})"
    )


def random_kth_order(
    order: int, k: int = 2, *, alpha: float = 1.0, seed: int = 0
) -> HigherOrderChain:
    """A chain of order ``order`` on k symbols whose rows are drawn from
    Dirichlet(alpha, …, alpha) (numpy, seeded)."""
    k = _check_int("k", k, 2)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0; got {alpha!r}")
    order = _check_int("order", order, 1)
    P = np.random.default_rng(seed).dirichlet(np.full(k, float(alpha)), size=k**order)
    return HigherOrderChain(
        P,
        order,
        name=f"random order-{order} chain (k={k}, alpha={alpha:g}, seed={seed})",
    )


# --------------------------------------------------- facts the framework chapter checks
def lag_one_correlation(chain: MarkovChain) -> float:
    """corr(x_n, x_{n+1}) of the stationary binary chain, from π and P; it equals
    1 - p - q, the second eigenvalue of P (1 - p - q also where a state has probability
    0 and the correlation is undefined)."""
    if chain.k != 2:
        raise ValueError(f"chain must be binary; got k = {chain.k}")
    pi, P = chain.stationary(), chain.P
    var = pi[0] * pi[1]
    if var <= 0:
        return float(1 - P[0, 1] - P[1, 0])
    return float((pi[1] * P[1, 1] - pi[1] ** 2) / var)


def empirical_kernel(chain: MarkovChain, x: torch.Tensor) -> dict[str, np.ndarray]:
    """The kernel estimated from paths ``x`` against ``chain.P``: ``counts`` (i → j),
    ``n_from`` (the transitions out of each state), ``P_hat`` = counts / n_from,
    ``stderr`` = sqrt(P (1 - P) / n_from) and ``z`` = (P_hat - P) / stderr (0 where the
    standard error is 0). Rows never left are 0."""
    counts = chain.transition_counts(x)
    n_from = counts.sum(axis=1)
    P_hat = counts / np.maximum(n_from, 1)[:, None]
    stderr = np.sqrt(chain.P * (1 - chain.P) / np.maximum(n_from, 1)[:, None])
    z = np.divide(P_hat - chain.P, stderr, out=np.zeros_like(P_hat), where=stderr > 0)
    return dict(counts=counts, n_from=n_from, P_hat=P_hat, stderr=stderr, z=z)


def marginal_law(
    chain: MarkovChain, length: int, start: Literal["stationary", "uniform"] = "uniform"
) -> np.ndarray:
    """The exact law of x_n for n = 1..length, (length, k): the start law times P^(n-1).
    From the stationary start it is π at every n; from the uniform start of a binary
    chain, P(x_n = 1) = π_1 + (1/2 - π_1)(1 - p - q)^(n-1)."""
    length = _check_int("length", length, 1)
    if start not in ("stationary", "uniform"):
        raise ValueError(f"start must be 'stationary' or 'uniform'; got {start!r}")
    law = chain.stationary() if start == "stationary" else np.full(chain.k, 1 / chain.k)
    out = np.empty((length, chain.k))
    for n in range(length):
        out[n] = law
        law = law @ chain.P
    return out


def entropy_grid(values) -> tuple[np.ndarray, np.ndarray]:
    """H_rate and H(π) of every binary chain (p, q) with p, q in ``values``: two arrays
    with rows q and columns p (as :func:`markovlib.companion.figures.style.heatmap`
    draws them)."""
    chains = [[binary(gp, gq) for gp in values] for gq in values]
    rate = np.array([[c.entropy_rate() for c in row] for row in chains])
    unigram = np.array([[c.unigram_entropy() for c in row] for row in chains])
    return rate, unigram
