"""Training one model on fresh Markov samples (the authors' optimiser and schedule,
from their configs).

AdamW (0.9, 0.95), weight decay on the linear layers' weights only, one-cycle schedule:
2 % linear warm-up from lr/100, cosine down to lr/5. Every batch is a fresh draw from
the chain; the test loss is measured on fresh batches from a separate random stream. All
randomness (initialisation, training data, test data) is derived from ``seed`` through
``numpy.random.SeedSequence``: same seed, same history, bit for bit, on CPU.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import platform
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import (
    tqdm,
)  # text bars (stderr): no widget dependency in notebooks and the built book

from ._checks import check_choice, check_int, check_number, check_vocab, seeded
from ._version import __version__
from .chains import Chain
from .device import resolve_device
from .model import Transformer, TransformerConfig, attention_off, attention_skipped

__all__ = [
    "TrainConfig",
    "Execution",
    "train",
    "train_many",
    "TrainResult",
    "seed_streams",
    "make_optimizer",
    "make_schedule",
    "cross_entropy",
    "escape_curve",
    "diverged_step",
    "final_loss",
    "provenance",
    "cpu_model",
]

SCHEDULES = ("one-cycle", "constant")
STARTS = ("stationary", "uniform")
PRECISIONS = ("fp32", "bf16", "fp16", "fp16-scaled")
# fp16-scaled: the static loss scale (2^16) that the authors' loop does not use
LOSS_SCALE = 2.0**16


def _check_positive_int(name: str, value) -> int:
    return check_int(name, value, 1)


def _check_lr(lr) -> float:
    return check_number("lr", lr, low=0.0, open_low=True, what="a positive number")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines the optimisation of one run, besides the seed
    (the authors' settings, from their configs).

    AdamW (0.9, 0.95) with ``weight_decay`` on the weights of the linear layers (W_Q,
    W_K, W_V, W_O, W_1, W_2 and an untied head), as the authors' optimiser groups do;
    ``decay_embeddings=True`` also decays the token and positional embeddings
    (markovlib 0.1). The hash of a run's spec is computed from these fields.
    """

    steps: int
    batch_size: int
    seq_len: int
    lr: float = 2e-3
    eval_every: int = 10  # steps between two test-loss evaluations
    eval_batches: int = 4  # fresh batches per test-loss evaluation
    # 'one-cycle' (2 % warm-up from lr/100, cosine to lr/5) or 'constant'
    schedule: str = "one-cycle"
    weight_decay: float = 1e-3
    decay_embeddings: bool = False
    start: str = "stationary"  # law of the first state: 'stationary' or 'uniform'
    # 'fp32'; 'bf16' (autocast); 'fp16': the forward pass under float16 autocast and
    # no loss scaling, the authors' train_base (no GradScaler); 'fp16-scaled': the same
    # with a static loss scale of 2^16 (gradients unscaled before the step)
    precision: str = "fp32"

    def __post_init__(self):
        for name in ("steps", "batch_size", "seq_len", "eval_every", "eval_batches"):
            object.__setattr__(
                self, name, _check_positive_int(name, getattr(self, name))
            )
        object.__setattr__(self, "lr", _check_lr(self.lr))
        object.__setattr__(
            self,
            "weight_decay",
            check_number(
                "weight_decay", self.weight_decay, low=0.0, what="a number >= 0"
            ),
        )
        if not isinstance(self.decay_embeddings, bool):
            raise ValueError(
                f"decay_embeddings must be True or False; got {self.decay_embeddings!r}"
            )
        check_choice("schedule", self.schedule, SCHEDULES)
        check_choice("start", self.start, STARTS)
        check_choice("precision", self.precision, PRECISIONS)

    @classmethod
    def build(
        cls, settings: TrainConfig | dict | None = None, **changes
    ) -> TrainConfig:
        """``settings`` (a TrainConfig or a dict of its fields) with ``changes``
        applied; unknown names raise."""
        base = (
            settings.to_dict()
            if isinstance(settings, TrainConfig)
            else dict(settings or {})
        )
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted((set(base) | set(changes)) - fields)
        if unknown:
            raise ValueError(
                f"unknown training settings {unknown}; allowed: {sorted(fields)}"
            )
        missing = sorted(
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING
            and f.name not in base
            and f.name not in changes
        )
        if missing:
            raise ValueError(f"training settings need {missing}")
        return cls(**{**base, **changes})

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        """Read a stored spec; specs written before ``decay_embeddings`` existed decayed
        the embeddings."""
        return cls.build({"decay_embeddings": True, **d})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def replace(self, **changes) -> TrainConfig:
        return self.build(self, **changes)


def seed_streams(seed: int) -> tuple[int, int, int]:
    """The (initialisation, training data, test data) seeds of a run, derived from
    ``seed`` (numpy SeedSequence)."""
    init, data, test = (int(s) for s in np.random.SeedSequence(seed).generate_state(3))
    return init, data, test


def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance(
    device: torch.device, *, ensemble_size: int = 1, compile: bool = False
) -> dict:
    """Where and how a run was computed: library and torch versions, device, CPU model
    and capability, threads."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()
    return {
        "markovlib": __version__,
        "torch": torch.__version__,
        "device": str(device),
        "device_name": name,
        "cpu_model": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "ensemble_size": int(ensemble_size),
        "compile": bool(compile),
    }


def cross_entropy(model, x: torch.Tensor) -> torch.Tensor:
    """Next-state cross entropy averaged over positions: inputs x[..., :-1], targets
    x[..., 1:] (nats).

    For a single model x is (batch, length + 1) and the result a scalar; for an ensemble
    x is (N, batch, length + 1) and the result the N per-model losses.
    """
    logits = model(x[..., :-1])
    if x.dim() == 2:
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)
        )
    nll = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), x[..., 1:].reshape(-1), reduction="none"
    )
    return nll.view(x.shape[0], -1).mean(1)


def make_optimizer(
    model: Transformer,
    lr: float,
    weight_decay: float = 1e-3,
    *,
    decay_embeddings: bool = False,
) -> torch.optim.AdamW:
    """AdamW(0.9, 0.95); weight decay on :meth:`Transformer.decayed_parameters` only
    (the authors' configs).

    AdamW is elementwise, so on an ensemble's stacked parameters it is N independent
    optimisers.
    """
    decayed = {id(p) for p in model.decayed_parameters(embeddings=decay_embeddings)}
    params = list(model.parameters())  # a tied weight appears once
    groups = [
        {
            "params": [p for p in params if id(p) in decayed],
            "weight_decay": weight_decay,
        },
        {"params": [p for p in params if id(p) not in decayed], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def one_cycle_factor(
    step: int, steps: int, warmup: float = 0.02, start: float = 0.01, end: float = 0.2
) -> float:
    """lr multiplier at ``step``: linear warm-up from ``start`` to 1 over 2 % of the
    steps, cosine from 1 to ``end``."""
    w = max(1, math.ceil(warmup * steps))
    if step < w:
        return start + (1.0 - start) * step / w
    progress = (step - w) / max(1, steps - 1 - w)
    return end + (1.0 - end) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def make_schedule(optimizer, schedule: str, steps: int, lr: float):
    """'one-cycle': 2 % warm-up from lr/100 to lr, cosine to lr/5 at the last step;
    'constant': lr throughout."""
    if schedule == "one-cycle":
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: one_cycle_factor(step, steps)
        )
    if schedule == "constant":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    raise ValueError(f"schedule must be 'one-cycle' or 'constant'; got {schedule!r}")


def diverged_step(history: pd.DataFrame, settings: TrainConfig) -> int | None:
    """The first step at which a run's loss is not finite (NaN or ±inf), None for a run
    that stayed finite: read at the steps every stored history keeps (the evaluations,
    each training step up to the checkpoint at 50) and at any infinite training loss."""
    step = history["step"].to_numpy()
    train = history["train_loss"].to_numpy(dtype=float)
    test = history["test_loss"].to_numpy(dtype=float)
    evaluated = (step % settings.eval_every == 0) | (step == settings.steps)
    stored = (evaluated | (step <= 50)) & (step >= 1)  # where a train loss is kept
    bad = (evaluated & ~np.isfinite(test)) | (stored & ~np.isfinite(train))
    bad |= np.isinf(train)
    return int(step[bad][0]) if bad.any() else None


def final_loss(history: pd.DataFrame, settings: TrainConfig) -> float:
    """A run's last evaluated test loss; NaN when it diverged (:func:`diverged_step`),
    never the last finite loss before the divergence."""
    if diverged_step(history, settings) is not None:
        return float("nan")
    return float(history["test_loss"].dropna().iloc[-1])


@dataclass
class TrainResult:
    """What a run returns: the trained model, its per-step history and where it was
    computed."""

    chain: Chain
    config: TransformerConfig
    model: Transformer
    # one row per step (0 = before training): lr, train_loss, test_loss
    # (NaN between evals)
    history: pd.DataFrame
    seed: int
    train_config: TrainConfig
    seconds: float = float("nan")
    provenance: dict = field(default_factory=dict)
    checkpoint_step: int | None = (
        None  # weights were also saved after this step (verification)
    )
    checkpoint: dict | None = None
    # the metrics stored with the run (learnt kernel, entropies, ...), where it was read
    # back from a result store or the shipped data; empty for a run trained here
    metrics: dict = field(default_factory=dict)

    @property
    def test_seed(self) -> int:
        """Seed of the run's test-data stream (derived from ``seed``)."""
        return seed_streams(self.seed)[2]

    @property
    def settings(self) -> dict:
        """The training settings and the device, as one flat dict."""
        return {**self.train_config.to_dict(), "device": str(self.device)}

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def test_history(self) -> pd.DataFrame:
        """Rows where the test loss was measured."""
        return self.history.dropna(subset=["test_loss"])

    @property
    def final_test_loss(self) -> float:
        """The last test loss; NaN for a run that diverged (:attr:`diverged_step`)."""
        return final_loss(self.history, self.train_config)

    @property
    def diverged_step(self) -> int | None:
        """The first evaluated step whose loss is not finite (:func:`diverged_step`)."""
        return diverged_step(self.history, self.train_config)

    def checkpoint_model(self) -> Transformer | None:
        """The model with its weights after step ``checkpoint_step`` (a copy); None
        where the run kept no checkpoint (runs shorter than the checkpoint step)."""
        if self.checkpoint is None:
            return None
        model = copy.deepcopy(self.model)
        model.load_state_dict(self.checkpoint)
        return model.eval()

    def escape_step(self, tol: float = 0.005) -> int | None:
        """First step at which the test loss came within ``tol`` nats of H_rate
        (None if never)."""
        close = self.test_history[
            self.test_history["test_loss"] <= self.chain.entropy_rate() + tol
        ]
        return None if close.empty else int(close["step"].iloc[0])

    def test_sequence(
        self, length: int | None = None, *, seed: int | None = None
    ) -> torch.Tensor:
        """One fresh test path (1, length) drawn from the chain (reproducible from the
        run's seed)."""
        length = length or self.train_config.seq_len
        seed = self.test_seed + 1 if seed is None else seed
        return self.chain.sample(1, length, seed=seed, device=self.device)

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """P(x_{n+1} = j | x_1^n) predicted along the paths x: (batch, length, k), on
        the CPU."""
        self.model.eval()
        return self.model.probabilities(x.to(self.device)).cpu()

    def probability_along(
        self, x: torch.Tensor, i: int = 0, j: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """Positions n of a single path x where x_n = i, and the predicted
        P(x_{n+1} = j | x_1^n) there (Fig 3c-d)."""
        x = x.reshape(1, -1)
        probs = self.probabilities(x)[0, :, j].numpy()
        positions = np.flatnonzero(x[0].cpu().numpy() == i)
        return positions, probs[positions]

    def learnt_kernel(self, x: torch.Tensor | None = None) -> np.ndarray:
        """k×k average predicted P(x_{n+1} = j | x_n = i) over test paths x (default: 8
        fresh paths)."""
        if x is None:
            x = self.chain.sample(
                8,
                self.train_config.seq_len,
                seed=self.test_seed + 2,
                device=self.device,
            )
        probs = self.probabilities(x).double()
        onehot = F.one_hot(x.cpu(), self.chain.k).double()
        sums = torch.einsum("bni,bnj->ij", onehot, probs)
        counts = onehot.sum((0, 1))[:, None]
        return (sums / counts.clamp(min=1)).numpy()


@dataclass(frozen=True)
class Execution:
    """How a run is executed, none of which changes what it computes (nothing here is
    hashed into a run's key): ``device`` ('auto' picks CUDA when present; data are
    sampled on the device), ``compile`` (train through ``torch.compile``),
    ``progress`` (a text bar) and its ``desc``, ``checkpoint=s`` (also keep a copy of
    the weights after step s), ``stop_after=s`` (end the run after step s: its first s
    steps, exactly as in the full run; verification), ``on_step`` (called with each
    step's number as it ends: a sweep's progress bar)."""

    device: str | torch.device = "auto"
    compile: bool = False
    progress: bool = True
    desc: str | None = None
    checkpoint: int | None = None
    stop_after: int | None = None
    on_step: Callable[[int], None] | None = None

    def replace(self, **changes) -> Execution:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


EXECUTION_FIELDS = tuple(f.name for f in dataclasses.fields(Execution))


def _execution(execution: Execution | None, changes: dict) -> Execution:
    """``execution`` (default :class:`Execution()`), refusing its fields given loose
    (the signature before :class:`Execution`) with a message that says where they
    go."""
    loose = [name for name in EXECUTION_FIELDS if name in changes]
    if loose:
        given = ", ".join(f"{name}={changes[name]!r}" for name in loose)
        raise TypeError(
            f"{', '.join(loose)} belong(s) to how a run executes: pass "
            f"execution=Execution({given})"
        )
    if execution is None:
        return Execution()
    if not isinstance(execution, Execution):
        raise TypeError(
            f"execution must be an Execution; got {type(execution).__name__}"
        )
    return execution


def train(
    chain: Chain,
    config: TransformerConfig,
    settings: TrainConfig | None = None,
    *,
    seed: int = 0,
    init: dict | None = None,
    execution: Execution | None = None,
    **changes,
) -> TrainResult:
    """Train a fresh :class:`Transformer` on samples of ``chain``; returns a
    :class:`TrainResult`.

    ``settings`` is a :class:`TrainConfig`; keyword ``changes``
    (``steps=400, batch_size=16, ...``) build or amend it. ``init`` gives the starting
    weights (every parameter by name, as ``dict(model.named_parameters())``; None:
    drawn from the seed's initialisation stream). ``execution`` says how the run
    executes (:class:`Execution`: device, compile, progress bar, checkpoint, early
    stop), e.g. ``execution=Execution(device="cpu", progress=False)``.
    """
    run = _execution(execution, changes)
    settings = TrainConfig.build(settings, **changes)
    if run.desc is None:
        run = run.replace(desc=f"{chain.name} {'tied' if config.tied else 'untied'}")
    inits = None if init is None else [init]
    return _fit([chain], config, settings, [seed], inits, run)[0]


def train_many(
    chains: Chain | Sequence[Chain],
    config: TransformerConfig,
    settings: TrainConfig | None = None,
    *,
    seeds: Sequence[int],
    inits: Sequence[dict | None] | None = None,
    execution: Execution | None = None,
    **changes,
) -> list[TrainResult]:
    """Train N = len(seeds) independent models of one architecture in one batched step
    (an ensemble).

    Member i has its own seed and chain (``chains`` is one chain for all or a list of N)
    and gives the same history, to float rounding, as
    ``train(chains[i], config, settings, seed=seeds[i], init=inits[i])``; ``inits``
    (None, or one starting point or None per seed) and ``execution`` as in
    :func:`train`.
    """
    run = _execution(execution, changes)
    settings = TrainConfig.build(settings, **changes)
    seeds = [seeds] if isinstance(seeds, (int, np.integer)) else list(seeds)
    if not seeds or not all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in seeds
    ):
        raise ValueError(f"seeds must be a non-empty list of integers; got {seeds!r}")
    chains = [chains] * len(seeds) if isinstance(chains, Chain) else list(chains)
    if len(chains) != len(seeds):
        raise ValueError(
            f"chains must be one chain or one per seed ({len(seeds)}); "
            f"got {len(chains)}"
        )
    if run.desc is None:
        tying = "tied" if config.tied else "untied"
        run = run.replace(desc=f"ensemble of {len(seeds)} {tying}")
    if inits is not None and len(inits) != len(seeds):
        raise ValueError(
            f"inits must be None or one per seed ({len(seeds)}); got {len(inits)}"
        )
    return _fit(chains, config, settings, seeds, inits, run, ensemble=True)


HALF = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp16-scaled": torch.float16}


def _bounds(
    config: TransformerConfig, settings: TrainConfig, run: Execution
) -> tuple[int | None, int]:
    """The checkpoint step (None: none) and the last step a run trains, both checked."""
    if settings.seq_len > config.max_len:
        raise ValueError(
            f"seq_len must be <= config.max_len ({config.max_len}); "
            f"got {settings.seq_len}"
        )
    checkpoint, last = run.checkpoint, settings.steps
    if checkpoint is not None:
        checkpoint = min(_check_positive_int("checkpoint", checkpoint), settings.steps)
    if run.stop_after is not None:
        last = min(_check_positive_int("stop_after", run.stop_after), settings.steps)
    return checkpoint, last


def _initial_model(
    config: TransformerConfig,
    streams: list[tuple[int, int, int]],
    inits: list[dict | None] | None,
    device: torch.device,
    ensemble: bool,
) -> Transformer:
    """The starting weights: each member's draw from its initialisation stream, or
    ``inits`` where given."""
    cpu = torch.device("cpu")
    if ensemble:
        gens = [seeded(stream[0], cpu) for stream in streams]
        model = Transformer(config, n_models=len(streams), generators=gens)
    else:
        model = Transformer(config, generator=seeded(streams[0][0], cpu))
    model = model.to(device)
    if inits is not None:
        _start_from(model, inits)
    return model


@dataclass
class _Loop:
    """The state of one training loop (one model or an ensemble): the model, its
    optimiser and schedule, and each member's training and test data streams."""

    model: Transformer
    forward: object  # the model, or torch.compile of it (the same parameters)
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    chains: list[Chain]
    settings: TrainConfig
    device: torch.device
    train_gens: list[torch.Generator]
    test_gens: list[torch.Generator]
    ensemble: bool

    @classmethod
    def start(cls, model, chains, settings, streams, device, compile, ensemble):
        """AdamW and its schedule on ``model`` (the authors' configs), the data streams
        seeded."""
        s = settings
        optimizer = make_optimizer(
            model, s.lr, s.weight_decay, decay_embeddings=s.decay_embeddings
        )
        scheduler = make_schedule(optimizer, s.schedule, s.steps, s.lr)
        forward = torch.compile(model) if compile else model
        train_gens = [seeded(stream[1], device) for stream in streams]
        test_gens = [seeded(stream[2], device) for stream in streams]
        return cls(
            model,
            forward,
            optimizer,
            scheduler,
            chains,
            s,
            device,
            train_gens,
            test_gens,
            ensemble,
        )

    @property
    def n(self) -> int:
        """The number of members (1 for a single model)."""
        return len(self.chains)

    @property
    def scale(self) -> float:
        """The static loss scale: 2^16 for 'fp16-scaled', else 1."""
        return LOSS_SCALE if self.settings.precision == "fp16-scaled" else 1.0

    def batch(self, gens: list[torch.Generator]) -> torch.Tensor:
        """One fresh batch per member from its chain, (N, batch, length + 1) for an
        ensemble."""
        s = self.settings
        xs = [
            c.sample(
                s.batch_size,
                s.seq_len + 1,
                generator=g,
                device=self.device,
                start=s.start,
            )
            for c, g in zip(self.chains, gens)
        ]
        return torch.stack(xs) if self.ensemble else xs[0]

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        """The cross entropy of ``x`` in float32, the forward pass under the run's
        autocast precision."""
        dtype = HALF.get(self.settings.precision)
        with torch.autocast(
            self.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None
        ):
            return cross_entropy(self.forward, x).float()

    @torch.no_grad()
    def test_loss(self) -> torch.Tensor:
        """Each member's mean loss on ``eval_batches`` fresh test batches (CPU)."""
        self.model.eval()
        batches = range(self.settings.eval_batches)
        losses = torch.stack([self.loss(self.batch(self.test_gens)) for _ in batches])
        self.model.train()
        return losses.mean(0).reshape(self.n).cpu()

    def step(self) -> tuple[float, torch.Tensor]:
        """One AdamW step on a fresh batch; the lr it used and the members' losses (on
        the device: no host sync per step on CUDA)."""
        losses = self.loss(self.batch(self.train_gens))
        self.optimizer.zero_grad(set_to_none=True)
        # member i's gradient is that of its own loss
        (losses.sum() * self.scale).backward()
        if self.scale != 1.0:
            for p in self.model.parameters():
                if p.grad is not None:
                    p.grad.div_(self.scale)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        return lr, losses.detach().reshape(self.n)

    def weights(self) -> list[dict]:
        """A CPU copy of each member's weights (a checkpoint)."""
        members = [
            self.model.member(i) if self.ensemble else self.model for i in range(self.n)
        ]
        return [
            {k: v.detach().cpu().clone() for k, v in m.state_dict().items()}
            for m in members
        ]


@dataclass
class _Trace:
    """What a loop records: the lr and training losses of every step, the test losses
    by evaluated step, the checkpoint's weights and the seconds taken."""

    lrs: list[float]
    train_losses: list[torch.Tensor]
    test_losses: dict[int, torch.Tensor]
    saved: list[dict] | None = None
    seconds: float = float("nan")


def _run_loop(loop: _Loop, run: Execution, checkpoint: int | None, last: int) -> _Trace:
    """Steps 1 to ``last``, the test loss every ``eval_every`` steps and at the end, the
    weights kept after step ``checkpoint``."""
    s = loop.settings
    trace = _Trace([float("nan")], [], {0: loop.test_loss()})
    t0 = time.perf_counter()
    bar = tqdm(
        range(1, s.steps + 1),
        desc=run.desc,
        disable=not run.progress,
        leave=False,
        mininterval=0.5,
    )
    loop.model.train()
    for step in bar:
        lr, losses = loop.step()
        trace.lrs.append(lr)
        trace.train_losses.append(losses)
        if step % s.eval_every == 0 or step == s.steps:
            trace.test_losses[step] = loop.test_loss()
            bar.set_postfix(
                train=f"{losses.mean().item():.4f}",
                test=f"{trace.test_losses[step].mean():.4f}",
            )
        if step == checkpoint:
            trace.saved = loop.weights()
        if run.on_step is not None:
            run.on_step(step)
        if step == last:
            break
    bar.close()
    trace.seconds = time.perf_counter() - t0
    return trace


def _histories(trace: _Trace, last: int) -> list[pd.DataFrame]:
    """Each member's history: one row per step 0..last (lr, train_loss, test_loss;
    NaN where not measured)."""
    train_matrix = torch.stack(trace.train_losses).cpu().T.tolist()  # (n, steps)
    test = trace.test_losses
    return [
        pd.DataFrame(
            {
                "step": np.arange(last + 1),
                "lr": trace.lrs,
                "train_loss": [float("nan")] + train_row,
                "test_loss": [
                    float(test[t][i]) if t in test else float("nan")
                    for t in range(last + 1)
                ],
            }
        )
        for i, train_row in enumerate(train_matrix)
    ]


def _fit(
    chains: list[Chain],
    config: TransformerConfig,
    settings: TrainConfig,
    seeds: list[int],
    inits: list[dict | None] | None,
    run: Execution,
    *,
    ensemble: bool = False,
) -> list[TrainResult]:
    """The training loop of :func:`train` (one model) and :func:`train_many`
    (an ensemble). A run started (``inits``) with every attention weight 0 keeps them
    0 and skips computing attention (:func:`attention_skipped`: the same numbers bit
    for bit, about 4x faster at length 1024)."""
    checkpoint, last = _bounds(config, settings, run)
    for chain in chains:
        check_vocab(config, chain)
    device = resolve_device(run.device)
    # per member: initialisation, training data and test data streams, all derived
    # from its seed
    streams = [seed_streams(seed) for seed in seeds]
    model = _initial_model(config, streams, inits, device, ensemble)
    skip = inits is not None and _attention_zero(model)
    loop = _Loop.start(model, chains, settings, streams, device, run.compile, ensemble)
    with attention_skipped(model) if skip else nullcontext():
        trace = _run_loop(loop, run, checkpoint, last)
    model.eval()
    where = provenance(
        device, ensemble_size=loop.n if ensemble else 1, compile=run.compile
    )
    histories = _histories(trace, last)
    return [
        TrainResult(
            chain=chain,
            config=config,
            model=(model.member(i) if ensemble else model).eval(),
            history=histories[i],
            seed=int(seed),
            train_config=settings,
            seconds=trace.seconds,
            provenance=where,
            checkpoint_step=checkpoint,
            checkpoint=None if trace.saved is None else trace.saved[i],
        )
        for i, (chain, seed) in enumerate(zip(chains, seeds))
    ]


@torch.no_grad()
def _attention_zero(model: Transformer) -> bool:
    """Every attention weight 0 (W_Q = W_K = W_V = W_O = 0): attention is off
    (:func:`attention_off`) and stays off under AdamW, whose weight decay leaves a 0
    at 0, so skipping it changes nothing, bit for bit."""
    return attention_off(model) and all(
        float(b.attn.W_Q.weight.abs().max()) == 0.0
        and float(b.attn.W_K.weight.abs().max()) == 0.0
        for b in model.blocks
    )


@torch.no_grad()
def _start_from(model: Transformer, inits: list[dict | None]) -> None:
    """Set member i's weights (the model's own for a single model) to ``inits[i]``
    (every parameter by name); members with None keep their drawn weights."""
    params = dict(model.named_parameters())
    for i, state in enumerate(inits):
        if state is None:
            continue
        if set(state) != set(params):
            raise ValueError(
                "a starting point must give every parameter by name; missing "
                f"{sorted(set(params) - set(state))}, unknown "
                f"{sorted(set(state) - set(params))}"
            )
        for name, value in state.items():
            target = params[name] if model.n_models is None else params[name][i]
            target.copy_(torch.as_tensor(value))


def escape_curve(results: Sequence[TrainResult], tol: float = 0.005) -> pd.DataFrame:
    """Fraction of ``results`` that have escaped (test loss within ``tol`` of H_rate at
    least once) by each evaluated step; columns step, escaped, plateau
    (= 1 - escaped)."""
    if not results:
        raise ValueError("results must hold at least one run")
    steps = results[0].test_history["step"].to_numpy()
    first = np.array(
        [np.inf if (s := r.escape_step(tol)) is None else s for r in results]
    )
    escaped = (first[None, :] <= steps[:, None]).mean(1)
    return pd.DataFrame({"step": steps, "escaped": escaped, "plateau": 1 - escaped})
