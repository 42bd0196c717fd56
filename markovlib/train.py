"""Training one model on fresh Markov samples (the authors' optimiser and schedule, PAPER.md).

AdamW (0.9, 0.95), weight decay on matrices only, one-cycle schedule: 2 % linear warm-up from lr/100,
cosine down to lr/5. Every batch is a fresh draw from the chain; the test loss is measured on fresh
batches from a separate random stream. All randomness (initialisation, training data, test data) is
derived from ``seed`` through ``numpy.random.SeedSequence``: same seed, same history, bit for bit, on CPU.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm  # text bars (stderr): no widget dependency in notebooks and the built book

from .chains import MarkovChain
from .model import Transformer, TransformerConfig
from .presets import resolve_device

__all__ = ["train", "TrainResult", "make_optimizer", "make_schedule", "cross_entropy"]


def _check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    return int(value)


def _generator(seed: int, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def cross_entropy(model: Transformer, x: torch.Tensor) -> torch.Tensor:
    """Next-state cross entropy averaged over positions: inputs x[:, :-1], targets x[:, 1:] (nats)."""
    logits = model(x[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float = 1e-3) -> torch.optim.AdamW:
    """AdamW(0.9, 0.95) with weight decay on matrix parameters (dim ≥ 2) only."""
    params = list(model.parameters())  # a tied weight appears once
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
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
          start: str = "stationary", progress: bool = True, desc: str | None = None) -> TrainResult:
    """Train a fresh :class:`Transformer` on samples of ``chain``; returns a :class:`TrainResult`."""
    steps, batch_size, seq_len = (_check_positive_int(n, v) for n, v in
                                  (("steps", steps), ("batch_size", batch_size), ("seq_len", seq_len)))
    eval_every, eval_batches = _check_positive_int("eval_every", eval_every), _check_positive_int("eval_batches", eval_batches)
    if not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    if seq_len > config.max_len:
        raise ValueError(f"seq_len must be <= config.max_len ({config.max_len}); got {seq_len}")
    if config.vocab_size != chain.k:
        raise ValueError(f"config.vocab_size ({config.vocab_size}) must equal the chain's k ({chain.k})")

    device = resolve_device(device)
    init_seed, train_seed, test_seed = (int(s) for s in np.random.SeedSequence(seed).generate_state(3))
    model = Transformer(config, generator=_generator(init_seed, torch.device("cpu"))).to(device)
    optimizer = make_optimizer(model, lr, weight_decay)
    scheduler = make_schedule(optimizer, schedule, steps, lr)
    train_gen, test_gen = _generator(train_seed, device), _generator(test_seed, device)

    @torch.no_grad()
    def test_loss() -> float:
        model.eval()
        losses = [cross_entropy(model, chain.sample(batch_size, seq_len + 1, generator=test_gen, device=device, start=start))
                  for _ in range(eval_batches)]
        model.train()
        return float(torch.stack(losses).mean())

    lrs, train_losses, test_losses = [float("nan")], [], {0: test_loss()}
    t0 = time.perf_counter()
    bar = tqdm(range(1, steps + 1), desc=desc or f"{chain.name} {'tied' if config.tied else 'untied'}",
               disable=not progress, leave=False, mininterval=0.5)
    model.train()
    for step in bar:
        x = chain.sample(batch_size, seq_len + 1, generator=train_gen, device=device, start=start)
        loss = cross_entropy(model, x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        train_losses.append(loss.detach())  # kept on the device: no host sync per step on CUDA
        if step % eval_every == 0 or step == steps:
            test_losses[step] = test_loss()
            bar.set_postfix(train=f"{train_losses[-1].item():.4f}", test=f"{test_losses[step]:.4f}")
    bar.close()
    seconds = time.perf_counter() - t0
    model.eval()
    history = pd.DataFrame({"step": np.arange(steps + 1), "lr": lrs,
                            "train_loss": [float("nan")] + torch.stack(train_losses).tolist(),
                            "test_loss": [test_losses.get(s, float("nan")) for s in range(steps + 1)]})
    settings = dict(steps=steps, batch_size=batch_size, seq_len=seq_len, lr=lr, eval_every=eval_every,
                    eval_batches=eval_batches, schedule=schedule, weight_decay=weight_decay, start=start,
                    device=str(device))
    return TrainResult(chain, config, model, history, seed, settings, seconds, test_seed)
