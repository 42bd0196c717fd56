"""Training one model on fresh Markov samples (the authors' optimiser and schedule, PAPER.md).

AdamW (0.9, 0.95), weight decay on matrices only, one-cycle schedule: 2 % linear warm-up from lr/100,
cosine down to lr/5. Every batch is a fresh draw from the chain; the test loss is measured on fresh
batches from a separate random stream. All randomness (initialisation, training data, test data) is
derived from ``seed`` through ``numpy.random.SeedSequence``: same seed, same history, bit for bit, on CPU.
"""
from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm  # text bars (stderr): no widget dependency in notebooks and the built book

from .chains import MarkovChain
from .model import Transformer, TransformerConfig
from .presets import resolve_device
from .theory import exact_loss_function

__all__ = ["train", "train_many", "TrainResult", "seed_streams", "make_optimizer", "make_schedule", "cross_entropy",
           "escape_curve", "population_descent"]


def _check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    return int(value)


def _check_lr(lr) -> float:
    if not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    return lr


def _generator(seed: int, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def seed_streams(seed: int) -> tuple[int, int, int]:
    """The (initialisation, training data, test data) seeds of a run, derived from ``seed`` (numpy SeedSequence)."""
    init, data, test = (int(s) for s in np.random.SeedSequence(seed).generate_state(3))
    return init, data, test


def cross_entropy(model, x: torch.Tensor) -> torch.Tensor:
    """Next-state cross entropy averaged over positions: inputs x[..., :-1], targets x[..., 1:] (nats).

    For a single model x is (batch, length + 1) and the result a scalar; for an ensemble x is
    (N, batch, length + 1) and the result the N per-model losses.
    """
    logits = model(x[..., :-1])
    if x.dim() == 2:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[..., 1:].reshape(-1), reduction="none")
    return nll.view(x.shape[0], -1).mean(1)


def make_optimizer(model: Transformer, lr: float, weight_decay: float = 1e-3) -> torch.optim.AdamW:
    """AdamW(0.9, 0.95) with weight decay on matrix parameters only (per model: dim ≥ 2).

    AdamW is elementwise, so on an ensemble's stacked parameters it is N independent optimisers.
    """
    matrices = {id(p) for p in model.matrix_parameters()}
    params = list(model.parameters())  # a tied weight appears once
    groups = [{"params": [p for p in params if id(p) in matrices], "weight_decay": weight_decay},
              {"params": [p for p in params if id(p) not in matrices], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def one_cycle_factor(step: int, steps: int, warmup: float = 0.02, start: float = 0.01, end: float = 0.2) -> float:
    """lr multiplier at ``step``: linear warm-up from ``start`` to 1 over 2 % of the steps, cosine from 1 to ``end``."""
    w = max(1, math.ceil(warmup * steps))
    if step < w:
        return start + (1.0 - start) * step / w
    progress = (step - w) / max(1, steps - 1 - w)
    return end + (1.0 - end) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def make_schedule(optimizer, schedule: str, steps: int, lr: float):
    """'one-cycle': 2 % warm-up from lr/100 to lr, cosine to lr/5 at the last step; 'constant': lr throughout."""
    if schedule == "one-cycle":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: one_cycle_factor(step, steps))
    if schedule == "constant":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    raise ValueError(f"schedule must be 'one-cycle' or 'constant'; got {schedule!r}")


@dataclass
class TrainResult:
    """What a run returns: the trained model and its per-step history."""

    chain: MarkovChain
    config: TransformerConfig
    model: Transformer
    history: pd.DataFrame          # one row per step (0 = before training): lr, train_loss, test_loss (NaN between evals)
    seed: int
    settings: dict = field(default_factory=dict)
    seconds: float = float("nan")
    test_seed: int = 0

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def test_history(self) -> pd.DataFrame:
        """Rows where the test loss was measured."""
        return self.history.dropna(subset=["test_loss"])

    @property
    def final_test_loss(self) -> float:
        return float(self.test_history["test_loss"].iloc[-1])

    def escape_step(self, tol: float = 0.005) -> int | None:
        """First step at which the test loss came within ``tol`` nats of H_rate (None if never)."""
        close = self.test_history[self.test_history["test_loss"] <= self.chain.entropy_rate() + tol]
        return None if close.empty else int(close["step"].iloc[0])

    def test_sequence(self, length: int | None = None, *, seed: int | None = None) -> torch.Tensor:
        """One fresh test path (1, length) drawn from the chain (reproducible from the run's seed)."""
        length = length or self.settings["seq_len"]
        seed = self.test_seed + 1 if seed is None else seed
        return self.chain.sample(1, length, seed=seed, device=self.device)

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """P(x_{n+1} = j | x_1^n) predicted along the paths x: (batch, length, k), on the CPU."""
        self.model.eval()
        return self.model.probabilities(x.to(self.device)).cpu()

    def probability_along(self, x: torch.Tensor, i: int = 0, j: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Positions n of a single path x where x_n = i, and the predicted P(x_{n+1} = j | x_1^n) there (Fig 3c-d)."""
        x = x.reshape(1, -1)
        probs = self.probabilities(x)[0, :, j].numpy()
        positions = np.flatnonzero(x[0].cpu().numpy() == i)
        return positions, probs[positions]

    def learnt_kernel(self, x: torch.Tensor | None = None) -> np.ndarray:
        """k×k average predicted P(x_{n+1} = j | x_n = i) over test paths x (default: 8 fresh paths)."""
        if x is None:
            x = self.chain.sample(8, self.settings["seq_len"], seed=self.test_seed + 2, device=self.device)
        probs = self.probabilities(x).double()
        onehot = F.one_hot(x.cpu(), self.chain.k).double()
        sums = torch.einsum("bni,bnj->ij", onehot, probs)
        counts = onehot.sum((0, 1))[:, None]
        return (sums / counts.clamp(min=1)).numpy()


def train(chain: MarkovChain, config: TransformerConfig, *, steps: int, batch_size: int, seq_len: int,
          lr: float = 2e-3, seed: int = 0, device: str | torch.device = "auto", eval_every: int = 10,
          eval_batches: int = 4, schedule: str = "one-cycle", weight_decay: float = 1e-3,
          start: str = "stationary", precision: str = "fp32", compile: bool = False, progress: bool = True,
          desc: str | None = None) -> TrainResult:
    """Train a fresh :class:`Transformer` on samples of ``chain``; returns a :class:`TrainResult`.

    ``device="auto"`` picks CUDA when present (data are sampled on the device); ``precision="bf16"`` runs
    forward passes under bfloat16 autocast; ``compile=True`` trains through ``torch.compile``.
    """
    return _fit([chain], config, [seed], False, steps=steps, batch_size=batch_size, seq_len=seq_len, lr=lr,
                device=device, eval_every=eval_every, eval_batches=eval_batches, schedule=schedule,
                weight_decay=weight_decay, start=start, precision=precision, compile=compile, progress=progress,
                desc=desc or f"{chain.name} {'tied' if config.tied else 'untied'}")[0]


def train_many(chains: MarkovChain | Sequence[MarkovChain], config: TransformerConfig, *, seeds: Sequence[int],
               steps: int, batch_size: int, seq_len: int, lr: float = 2e-3, device: str | torch.device = "auto",
               eval_every: int = 10, eval_batches: int = 4, schedule: str = "one-cycle", weight_decay: float = 1e-3,
               start: str = "stationary", precision: str = "fp32", compile: bool = False, progress: bool = True,
               desc: str | None = None) -> list[TrainResult]:
    """Train N = len(seeds) independent models of one architecture in one batched step (an ensemble).

    Member i has its own seed and chain (``chains`` is one chain for all or a list of N) and gives the
    same history, to float rounding, as ``train(chains[i], config, seed=seeds[i], ...)``.
    """
    seeds = [seeds] if isinstance(seeds, (int, np.integer)) else list(seeds)
    if not seeds or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of integers; got {seeds!r}")
    chains = [chains] * len(seeds) if isinstance(chains, MarkovChain) else list(chains)
    if len(chains) != len(seeds):
        raise ValueError(f"chains must be one chain or one per seed ({len(seeds)}); got {len(chains)}")
    return _fit(chains, config, seeds, True, steps=steps, batch_size=batch_size, seq_len=seq_len, lr=lr,
                device=device, eval_every=eval_every, eval_batches=eval_batches, schedule=schedule,
                weight_decay=weight_decay, start=start, precision=precision, compile=compile, progress=progress,
                desc=desc or f"ensemble of {len(seeds)} {'tied' if config.tied else 'untied'}")


def _fit(chains: list[MarkovChain], config: TransformerConfig, seeds: list[int], ensemble: bool, *, steps, batch_size,
         seq_len, lr, device, eval_every, eval_batches, schedule, weight_decay, start, precision, compile, progress,
         desc) -> list[TrainResult]:
    """The training loop of :func:`train` (one model) and :func:`train_many` (an ensemble)."""
    steps, batch_size, seq_len = (_check_positive_int(n, v) for n, v in
                                  (("steps", steps), ("batch_size", batch_size), ("seq_len", seq_len)))
    eval_every, eval_batches = _check_positive_int("eval_every", eval_every), _check_positive_int("eval_batches", eval_batches)
    _check_lr(lr)
    if seq_len > config.max_len:
        raise ValueError(f"seq_len must be <= config.max_len ({config.max_len}); got {seq_len}")
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be 'fp32' or 'bf16'; got {precision!r}")
    for chain in chains:
        if config.vocab_size != chain.k:
            raise ValueError(f"config.vocab_size ({config.vocab_size}) must equal the chain's k ({chain.k})")

    device = resolve_device(device)
    n = len(seeds)
    # per member: initialisation, training data and test data streams, all derived from its seed
    streams = [seed_streams(seed) for seed in seeds]
    cpu = torch.device("cpu")
    if ensemble:
        model = Transformer(config, n_models=n, generators=[_generator(s[0], cpu) for s in streams]).to(device)
    else:
        model = Transformer(config, generator=_generator(streams[0][0], cpu)).to(device)
    optimizer = make_optimizer(model, lr, weight_decay)
    scheduler = make_schedule(optimizer, schedule, steps, lr)
    forward = torch.compile(model) if compile else model   # shares the parameters of model

    def loss_of(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            return cross_entropy(forward, x).float()

    train_gens = [_generator(s[1], device) for s in streams]
    test_gens = [_generator(s[2], device) for s in streams]

    def draw(gens) -> torch.Tensor:
        xs = [c.sample(batch_size, seq_len + 1, generator=g, device=device, start=start) for c, g in zip(chains, gens)]
        return torch.stack(xs) if ensemble else xs[0]

    @torch.no_grad()
    def test_loss() -> torch.Tensor:
        model.eval()
        losses = torch.stack([loss_of(draw(test_gens)) for _ in range(eval_batches)]).mean(0)
        model.train()
        return losses.reshape(n).cpu()

    lrs, train_losses, test_losses = [float("nan")], [], {0: test_loss()}
    t0 = time.perf_counter()
    bar = tqdm(range(1, steps + 1), desc=desc, disable=not progress, leave=False, mininterval=0.5)
    model.train()
    for step in bar:
        losses = loss_of(draw(train_gens))
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()            # member i's gradient is that of its own loss
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        train_losses.append(losses.detach().reshape(n))  # kept on the device: no host sync per step on CUDA
        if step % eval_every == 0 or step == steps:
            test_losses[step] = test_loss()
            bar.set_postfix(train=f"{train_losses[-1].mean().item():.4f}", test=f"{test_losses[step].mean():.4f}")
    bar.close()
    seconds = time.perf_counter() - t0
    model.eval()
    train_matrix = torch.stack(train_losses).cpu().T.tolist()       # (n, steps)
    settings = dict(steps=steps, batch_size=batch_size, seq_len=seq_len, lr=lr, eval_every=eval_every,
                    eval_batches=eval_batches, schedule=schedule, weight_decay=weight_decay, start=start,
                    device=str(device), precision=precision, compile=compile, ensemble_size=n if ensemble else 1)
    results = []
    for i, (chain, seed, stream) in enumerate(zip(chains, seeds, streams)):
        history = pd.DataFrame({"step": np.arange(steps + 1), "lr": lrs, "train_loss": [float("nan")] + train_matrix[i],
                                "test_loss": [float(test_losses[s][i]) if s in test_losses else float("nan")
                                              for s in range(steps + 1)]})
        member = model.member(i) if ensemble else model
        results.append(TrainResult(chain, config, member.eval(), history, int(seed), settings, seconds, stream[2]))
    return results


def escape_curve(results: Sequence[TrainResult], tol: float = 0.005) -> pd.DataFrame:
    """Fraction of ``results`` that have escaped (test loss within ``tol`` of H_rate at least once) by each
    evaluated step; columns step, escaped, plateau (= 1 - escaped)."""
    if not results:
        raise ValueError("results must hold at least one run")
    steps = results[0].test_history["step"].to_numpy()
    first = np.array([np.inf if (s := r.escape_step(tol)) is None else s for r in results])
    escaped = (first[None, :] <= steps[:, None]).mean(1)
    return pd.DataFrame({"step": steps, "escaped": escaped, "plateau": 1 - escaped})


def population_descent(model: Transformer, chain: MarkovChain, *, steps: int, lr: float, length: int = 10,
                       start: str = "stationary") -> tuple[Transformer, np.ndarray]:
    """Plain gradient descent θ ← θ - lr ∇L(θ) on the exact population loss over paths of ``length`` states.

    No sampling noise, no optimiser state: the deterministic dynamics near a stationary point (Thm 2, 3).
    Returns a trained copy of ``model`` and the exact loss before every step and after the last.
    """
    steps, lr = _check_positive_int("steps", steps), _check_lr(lr)
    model = copy.deepcopy(model)
    params = [p for p in model.parameters() if p.requires_grad]
    exact_loss = exact_loss_function(model, chain, length, start)     # paths enumerated once, not per step
    losses = []
    for _ in range(steps):
        loss = exact_loss()
        losses.append(float(loss.detach()))
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(lr * g)
    with torch.no_grad():
        losses.append(float(exact_loss()))
    return model.eval(), np.array(losses)
