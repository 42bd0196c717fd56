"""The one place where the book's run sizes live: ``smoke`` / ``cpu`` / ``paper``, and
per chapter at ``paper``.

``resolve("auto")`` picks ``paper`` when CUDA is available and ``cpu`` otherwise. The
environment variable ``MARKOVLIB_SCALE`` overrides whatever a notebook asks for (CI
forces ``smoke`` with it). ``resolve(scale, chapter="depth")`` applies that chapter's
settings at the ``paper`` scale, each with its source. The authors' own settings are
:data:`AUTHORS` (per figure, from their config and scripts; :func:`authors` gives a
figure's scale); the ``paper`` scale's 1000 float32 iterations are this book's control,
longer than the authors' 400 and in another precision, and said as such.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np
import torch

from .device import resolve_device
from .train import TrainConfig

__all__ = [
    "Scale",
    "PRESETS",
    "CHAPTERS",
    "CCMCSizes",
    "CCMC_SIZES",
    "ccmc_sizes",
    "InitSizes",
    "INIT_SIZES",
    "init_sizes",
    "HigherOrderSizes",
    "HIGHER_ORDER_SIZES",
    "higher_order_sizes",
    "resolve",
    "with_overrides",
    "AuthorsSetting",
    "AUTHORS",
    "authors",
    "resolve_device",  # re-exported from markovlib.device (its old home)
    "ENV_VAR",
]

ENV_VAR = "MARKOVLIB_SCALE"


@dataclass(frozen=True)
class Scale:
    """Sizes of one scale. ``converges`` says whether runs at this scale are long enough
    to claim convergence."""

    name: str
    steps: int  # optimisation steps per run
    batch_size: int
    seq_len: int
    seeds: int  # independent runs where a chapter reports seed statistics
    # runs where a chapter reports the fraction of runs on a plateau (needs many)
    trap_seeds: int
    d_model: int
    eval_every: int  # steps between two test-loss evaluations
    eval_batches: int  # fresh batches per test-loss evaluation
    lr: float = 2e-3
    converges: bool = True
    variant_seeds: int | None = (
        None  # runs per side variant of a trap experiment (None: trap_seeds)
    )
    trap_steps: int | None = (
        None  # steps of the runs that count plateaus, where they differ from ``steps``
    )
    chapter: str | None = None  # the chapter whose settings were applied, if any
    source: str = ""  # where these sizes come from
    precision: str = "fp32"  # TrainConfig.precision of this scale's runs
    # bad_local_minima: Fig 3(c)'s runs are the authors' fp16 runs (False: its own
    # float32 runs; the fp16 runs are the trapped chapter's)
    fig3c_fp16: bool = True

    @property
    def train(self):
        """The :class:`~markovlib.train.TrainConfig` of this scale (AdamW, one-cycle,
        weight decay 1e-3)."""
        return TrainConfig(
            steps=self.steps,
            batch_size=self.batch_size,
            seq_len=self.seq_len,
            lr=self.lr,
            eval_every=self.eval_every,
            eval_batches=self.eval_batches,
            precision=self.precision,
        )

    @property
    def trap_train(self):
        """The training settings of plateau-counting runs (``trap_steps`` steps)."""
        return self.train.replace(steps=self.trap_steps or self.steps)

    @property
    def n_variant_seeds(self) -> int:
        return self.variant_seeds or self.trap_seeds

    def train_kwargs(self) -> dict:
        """Keyword arguments for :func:`markovlib.train.train` (the fields of
        :attr:`train`)."""
        return self.train.to_dict()


# The authors' model and optimiser (their configs: batch 16, length 1024, d = 8, AdamW
# lr 2e-3, one-cycle) run for 1000 float32 iterations: this book's control. The authors
# ran 400 iterations in fp16 (AUTHORS).
_PAPER = Scale(
    "paper",
    steps=1000,
    batch_size=16,
    seq_len=1024,
    seeds=3,
    trap_seeds=32,
    d_model=8,
    eval_every=10,
    eval_batches=4,
    source="this book's control: the authors' model and optimiser (their configs: "
    "batch 16, length 1024, d = 8, AdamW (0.9, 0.95), lr 2e-3, one-cycle), 1000 "
    "float32 iterations (the authors ran 400 in fp16)",
)

PRESETS: dict[str, Scale] = {
    # seconds: exercises every code path, claims nothing about convergence
    "smoke": Scale(
        "smoke",
        steps=30,
        batch_size=4,
        seq_len=64,
        seeds=2,
        trap_seeds=4,
        d_model=8,
        eval_every=10,
        eval_batches=1,
        converges=False,
        source="CI: every code path in seconds",
    ),
    # minutes on a 2-core laptop: the paper's model and optimiser, shorter sequences
    "cpu": replace(
        _PAPER,
        name="cpu",
        steps=400,
        seq_len=256,
        eval_every=20,
        source="the paper's model and optimiser at a quarter of its length, "
        "evaluated every 20 steps",
    ),
    "paper": _PAPER,
}

# Per chapter at the paper scale: what differs from PRESETS["paper"], and why; under
# "cpu", what differs from PRESETS["cpu"] in a reader's re-run (two cores, a few
# minutes: each size sized by the runs the chapter's claims at the reader's chain
# need; counts of 12 runs decide a share under the rule: 10 of 12 has a 95 % lower
# bound above 1/2).
CHAPTERS: dict[str, dict] = {
    "global_minimum": dict(
        source="Fig 3(b) as this book's control: length 1024, 1000 float32 "
        "iterations, 3 runs per model; the authors' settings (400 iterations, fp16, "
        "8 runs per model) are AUTHORS['fig3']"
    ),
    "bad_local_minima": dict(
        cpu=dict(
            trap_seeds=12,
            variant_seeds=4,
            fig3c_fp16=False,
            source="a reader's re-run: 12 tied runs per model (a trap share decided "
            "under the rule), 4 per side variant (theory + LN, init 0.2); Fig 3(c) "
            "from its float32 runs (the fp16 runs are the trapped chapter's)",
        ),
        variant_seeds=8,
        source="Fig 3(a) as this book's control: length 1024, 1000 float32 "
        "iterations (the authors': 400 in fp16, the trapped chapter). Trap statistics "
        "are this "
        "book's question: 32 runs each for "
        "the GPT-2 and the theory model (the paper shows single runs); 8 runs for "
        "each side variant "
        "(theory + LN, init 0.2)",
    ),
    "saddles": dict(
        cpu=dict(
            trap_seeds=12,
            source="a reader's re-run: 12 runs per model and tying (a trap share "
            "decided under the rule); Fig 4's grid is read from the paper edition",
        ),
        seeds=1,
        source="Fig 4 as this book's control: length 1024, 1000 float32 iterations, "
        "one run per (p, q) cell and tying; "
        "trap statistics: 32 runs each, GPT-2 and theory model, tied and untied",
    ),
    "multi_state": dict(
        cpu=dict(
            seq_len=128,
            source="a reader's re-run: length 128 (Fig 5's runs at the authors' "
            "precision, fp16, cost 3.5 times float32 on a CPU)",
        ),
        steps=5000,
        seeds=1,
        trap_steps=1000,
        source="Fig 5 as this book's control: k = 5, length 1024, 5000 float32 "
        "iterations, one run per p and tying (the authors' precision is fp16: "
        "AUTHORS['fig5']); the threshold runs (this "
        "book's question) 1000 iterations, one run per p and model",
    ),
    "depth": dict(
        cpu=dict(
            seq_len=128,
            trap_seeds=8,
            source="a reader's re-run: length 128, 8 single-layer runs, depths 1 "
            "and 2 (Fig 1 at the authors' precision, fp16, costs 3.5 times float32 on "
            "a CPU, and depth 4 four times depth 1); the higher-order runs are the "
            "paper edition's (their chains do not depend on (p, q))",
        ),
        steps=500,
        seq_len=512,
        source="Fig 1 as this book's control: depths 1, 2, 4, 8, length 512, 500 "
        "float32 iterations, 3 runs (the authors' precision is fp16: "
        "AUTHORS['fig1']); the lag chain (poster) the same",
    ),
    "trapped": dict(
        cpu=dict(
            trap_seeds=6,
            source="a reader's re-run: 6 tied runs per model and precision (two of "
            "its four distinct groups run in fp16, twice float32 on a CPU); Fig 4's "
            "grids are read from the paper edition",
        ),
        steps=400,
        source="the authors' first-order config (Markov-LLM/src/config/markov.py): "
        "400 iterations, length 1024, forward pass in fp16 autocast without loss "
        "scaling (their train_base); 32 tied runs per model and precision, 3 runs per "
        "Fig 4 cell and tying (their untied grid's script runs 500 iterations: "
        "AUTHORS['fig4'])",
    ),
    "initialisation": dict(
        variant_seeds=8,
        source="Local to Global (Makkuva et al. 2024): flows and exact gradient "
        "descent, sized by INIT_SIZES; the "
        "trap runs it reads are those of bad_local_minima at that chapter's settings",
    ),
}


# The CCMC chapter (Ildiz et al.) trains nothing: its sizes are sample sizes.
@dataclass(frozen=True)
class CCMCSizes:
    """Sizes of the CCMC chapter at one scale."""

    n_check: int  # random prompts for the equivalence checks
    n_traj: int  # trajectories (seeds) generated from one prompt
    gen_len: int  # tokens generated per trajectory
    window: int  # trailing window of the trajectory statistics
    est_sizes: tuple[
        int, ...
    ]  # sample sizes n of the maximum-likelihood estimation of W
    est_reps: int  # independent data sets per sample size


CCMC_SIZES: dict[str, CCMCSizes] = {
    "smoke": CCMCSizes(
        n_check=64,
        n_traj=32,
        gen_len=400,
        window=50,
        est_sizes=(2000, 8000, 32000),
        est_reps=2,
    ),
    "cpu": CCMCSizes(
        n_check=1024,
        n_traj=256,
        gen_len=10000,
        window=200,
        est_sizes=(2000, 8000, 32000, 128000, 512000),
        est_reps=4,
    ),
    "paper": CCMCSizes(
        n_check=4096,
        n_traj=1024,
        gen_len=20000,
        window=500,
        est_sizes=(2000, 8000, 32000, 128000, 512000, 2048000),
        est_reps=8,
    ),
}


def _sizes(table: dict, scale):
    """``table``'s entry for a :class:`Scale` (or its name)."""
    name = getattr(scale, "name", scale)
    if name not in table:
        raise ValueError(
            f"scale must be one of {', '.join(map(repr, table))}; got {name!r}"
        )
    return table[name]


def ccmc_sizes(scale) -> CCMCSizes:
    """The CCMC chapter's sizes for a :class:`Scale` (or its name)."""
    return _sizes(CCMC_SIZES, scale)


# The initialisation chapter (Local to Global): gradient flows on (e, w) and full-model
# runs from the manifold.
@dataclass(frozen=True)
class InitSizes:
    """Sizes of the initialisation chapter at one scale."""

    grid: int  # flow starts per axis of the (e, w) grid, per chain
    t_max: float  # flow time of each start
    full_e: int  # full-model starts: values of e0 ...
    full_w: int  # ... times values of w0, per chain
    gd_steps: int  # gradient-descent steps on the exact loss per full-model run
    gd_lr: float  # their step size (time t = lr x steps)
    exact_len: int  # path length of the exact loss
    # (the AdamW runs from the manifold train at the scale's own settings, S.train)

    def starts(self) -> np.ndarray:
        """The full-model starts (e0, w0), per chain: ``full_e`` values of e0 in
        [0.25, 1.25] times ``full_w`` values of w0 in [-1.4, 1.1], rounded to 6
        digits (they are part of the runs' keys); shape (full_e * full_w, 2)."""
        e0 = np.linspace(0.25, 1.25, self.full_e)
        w0 = np.linspace(-1.4, 1.1, self.full_w)
        return np.array([(e, w) for e in e0 for w in w0]).round(6)


INIT_SIZES: dict[str, InitSizes] = {
    "smoke": InitSizes(
        grid=6, t_max=2000.0, full_e=2, full_w=3, gd_steps=400, gd_lr=0.1, exact_len=10
    ),
    "cpu": InitSizes(
        grid=16,
        t_max=2000.0,
        full_e=3,
        full_w=6,
        gd_steps=3000,
        gd_lr=0.1,
        exact_len=10,
    ),
    # The 56 AdamW runs from the manifold are shipped in the paper edition
    # (experiments.init_manifold): the paper's length, no training at build time.
    "paper": InitSizes(
        grid=24,
        t_max=2000.0,
        full_e=4,
        full_w=7,
        gd_steps=6000,
        gd_lr=0.1,
        exact_len=10,
    ),
}


# The higher-order depth runs (ICLR Sec. 4.4): the authors' own runs of the question
# (Markov-LLM-depth/src/schedule2.sh): random order-2 chains, d = 16, n_head = order,
# batch 128, their shortest length 64, 10 000 iterations, start uniform, 3 runs.
@dataclass(frozen=True)
class HigherOrderSizes:
    """Sizes of the higher-order depth runs at one scale."""

    steps: int
    batch_size: int
    seq_len: int
    d_model: int
    n_heads: int
    depths: tuple[int, ...]
    seeds: int  # runs per depth; run s learns the random chain of seed s
    eval_every: int

    def train(self, S: Scale):
        """The :class:`~markovlib.train.TrainConfig` of these runs at ``S``."""
        return S.train.replace(
            steps=self.steps,
            batch_size=self.batch_size,
            seq_len=self.seq_len,
            eval_every=self.eval_every,
            start="uniform",
        )


HIGHER_ORDER_SIZES: dict[str, HigherOrderSizes] = {
    "smoke": HigherOrderSizes(30, 4, 32, 16, 2, (1, 2), 2, 10),
    "cpu": HigherOrderSizes(2000, 64, 64, 16, 2, (1, 2, 3), 3, 50),
    "paper": HigherOrderSizes(10000, 128, 64, 16, 2, (1, 2, 3), 3, 50),
}


def higher_order_sizes(scale) -> HigherOrderSizes:
    """The higher-order depth runs' sizes for a :class:`Scale` (or its name)."""
    return _sizes(HIGHER_ORDER_SIZES, scale)


def init_sizes(scale) -> InitSizes:
    """The initialisation chapter's sizes for a :class:`Scale` (or its name)."""
    return _sizes(INIT_SIZES, scale)


def resolve(
    scale: str | Scale = "auto", chapter: str | None = None, *, environ: bool = True
) -> Scale:
    """The :class:`Scale` for ``scale`` ('auto', 'smoke', 'cpu', 'paper');
    ``$MARKOVLIB_SCALE`` wins unless ``environ=False`` (the paper edition, the CLI's
    explicit ``--scale``).

    With ``chapter``, the ``paper`` and ``cpu`` scales take that chapter's settings
    from :data:`CHAPTERS` (``cpu``: its ``"cpu"`` entry, a reader's re-run).
    """
    forced = os.environ.get(ENV_VAR, "").strip() if environ else ""
    if forced:
        scale = forced
    if isinstance(scale, Scale):
        return scale
    if scale == "auto":
        scale = "paper" if torch.cuda.is_available() else "cpu"
    if scale not in PRESETS:
        raise ValueError(
            "scale must be one of 'auto', "
            f"{', '.join(map(repr, PRESETS))}; got {scale!r}"
        )
    if chapter is not None and chapter not in CHAPTERS:
        raise ValueError(
            f"chapter must be one of {', '.join(map(repr, CHAPTERS))} or "
            f"None; got {chapter!r}"
        )
    if chapter is None:
        return PRESETS[scale]
    sizes = {k: v for k, v in CHAPTERS[chapter].items() if k != "cpu"}
    if scale == "paper":
        return replace(PRESETS[scale], chapter=chapter, **sizes)
    if scale == "cpu":
        return replace(
            PRESETS[scale], chapter=chapter, **CHAPTERS[chapter].get("cpu", {})
        )
    return replace(PRESETS[scale], chapter=chapter)


# The authors' own settings, per figure, each field from their config, script or
# model file (Bond1995/Markov; read, never copied). Common to every folder:
# src/config/markov.py (batch 16, length 1024, lr 2e-3, weight decay 1e-3, betas
# (0.9, 0.95), warm-up 2 %, scheduler 'cos', dtype float16, n_head 1, n_layer 1,
# dropout 0, bias False, initial 'steady'), src/main.py (AdamW; OneCycleLR with
# pct_start 0.02, div_factor 100, final_div_factor 0.05: from lr/100 up to lr and down
# to lr/5) and src/optim/base.py (forward pass under float16 autocast, backward() with
# no GradScaler). models/base.py: N(0, 0.02) init, residual projections
# 0.02/sqrt(2L); weight decay on nn.Linear weights only (embedding tables and biases
# none). Here fp16 is CPU float16 autocast (see the trapped chapter).
_COMMON = (
    "src/config/markov.py (batch 16, length 1024, lr 2e-3, weight decay 1e-3, "
    "betas (0.9, 0.95), one-cycle with 2 % warm-up, float16, --initial 'steady'), "
    "models/base.py (weight decay on the linear weights only), src/main.py (AdamW, "
    "OneCycleLR) and src/optim/base.py (float16 autocast, no GradScaler)"
)
_GPT2 = "pre-LN GPT-2 blocks with a final LN and GELU (models/base.py)"
_SIMPLE = (
    "models/base.py with its ln_1, ln_2, ln_f lines commented out: no LayerNorm, ReLU"
)
_CONFIG = f"Markov-LLM/{_COMMON}: iterations 400 (not overridden by their scripts)"


@dataclass(frozen=True)
class AuthorsSetting:
    """What the authors ran for one figure: every field a run's spec must match to be
    called theirs (model, optimiser, schedule, sizes, precision), where they say so
    (``source``), and how many runs per cell this book ships at it (``runs``)."""

    figure: str
    steps: int
    seq_len: int
    runs: int  # runs per cell shipped at these settings (this book's choice)
    source: str  # their folder's config, script and model file, and the paper's text
    batch_size: int = 16
    d_model: int = 8
    n_heads: int = 1
    precision: str = "fp16"
    trap_runs: int | None = None  # runs where trap shares are counted (None: runs)
    # the model: GPT-2 blocks (LayerNorm, GELU) or their no-LN, ReLU folders
    layer_norm: bool = True
    activation: str = "gelu"
    embedding: str = "table"  # "uni": x_n e (their binary Markov-Simple2 model)
    tied: tuple[bool, ...] = (True, False)  # the tyings their scripts run
    n_layers: tuple[int, ...] = (1,)  # the depths their scripts run
    untied_steps: int | None = None  # where their untied runs ran other iterations
    init_std: float = 0.02
    ff_mult: int = 4
    window: int | None = None  # their --memory -1: full causal attention
    # the optimiser (betas (0.9, 0.95) are make_optimizer's, checked by a test)
    lr: float = 2e-3
    weight_decay: float = 1e-3
    decay_embeddings: bool = False
    schedule: str = "one-cycle"
    # their --initial 'steady' (the stationary law in intent; the x_1 their
    # samplers draw is in each entry's source)
    start: str = "stationary"
    betas: tuple[float, float] = (0.9, 0.95)

    def wanted(self) -> dict:
        """Each field a spec has, with the authors' value (a tuple: any of them)."""
        names = ("layer_norm", "activation", "embedding", "init_std", "ff_mult")
        names += ("window", "d_model", "n_heads", "tied", "n_layers", "steps")
        names += ("seq_len", "batch_size", "precision", "lr", "weight_decay")
        names += ("decay_embeddings", "schedule", "start")
        return {n: getattr(self, n) for n in names}

    def mismatches(self, spec) -> list[str]:
        """The fields of a run's spec (a RunSpec) that differ from these settings, as
        'field: spec value (authors' value)'; empty when the run is theirs."""
        have = {**spec.config.to_dict(), **spec.train.to_dict()}
        have.setdefault("embedding", "table")
        wanted, shown = self.wanted(), {}
        if self.untied_steps is not None and not spec.config.tied:
            wanted["steps"] = self.untied_steps
            shown["steps"] = f"{self.untied_steps} untied"
        return [
            f"{k}: {have[k]} ({shown.get(k) or _shown(want)})"
            for k, want in wanted.items()
            if (have[k] not in want if isinstance(want, tuple) else have[k] != want)
        ]


def _shown(want) -> str:
    """An authors' value as a mismatch shows it (a tuple of choices: 'a or b')."""
    return " or ".join(map(str, want)) if isinstance(want, tuple) else str(want)


AUTHORS: dict[str, AuthorsSetting] = {
    "fig1": AuthorsSetting(
        "Fig 1",
        steps=500,
        seq_len=512,
        runs=8,
        trap_runs=32,
        n_layers=(1, 2, 4, 8),
        tied=(True,),
        source="Markov-LLM-k/src/schedule.sh at commit 9b3fed7 (wandb project "
        "markov-LLM-layers-iclr, read by figures/loss-layers-std.py): depths 1, 2, 4, "
        f"8 at length 512, 500 iterations, tied only; {_GPT2}; the rest from "
        f"Markov-LLM-k/{_COMMON}; their 'steady' start draws x_1 = 1 with probability "
        "pi_0 (src/optim/utils.py), where this book draws x_1 from pi; the paper "
        "shows mean ± std of 3 runs; Sec. 4.4's text claims untied runs too "
        "('regardless of these factors'), which no script of theirs runs",
    ),
    "fig3": AuthorsSetting(
        "Fig 3",
        steps=400,
        seq_len=1024,
        runs=8,
        trap_runs=32,
        source="the script of its runs is in none of their commits (their plotting "
        "scripts, Markov-LLM-k/figures/notebook_final_*.py, read one run per curve "
        f"from their wandb project markov-LLM-1-final), so {_CONFIG}; {_GPT2}; "
        "Markov-LLM's 'steady' start draws x_1 from pi, Markov-LLM-k's with "
        "P(x_1 = 1) = pi_0",
    ),
    "appd": AuthorsSetting(
        "App. D",
        steps=500,
        seq_len=1024,
        runs=8,
        d_model=4,
        layer_norm=False,
        activation="relu",
        embedding="uni",
        tied=(True,),
        source="Markov-Simple2/src/schedule.sh at commit 9b3fed7 (wandb project "
        "markov-simple-att, read by figures/approx-error.py): (p, q) = (0.2, 0.3), "
        "500 iterations, 5 runs; its config: n_embd 4; its models/base.py logs App. "
        "D's quantities (the attention's share of the residual, the singular-value "
        "energies of W_1): "
        f"{_SIMPLE}, uni-embedding x_n e (nn.Linear(1, d), weight-decayed) with one "
        f"logit, tied (a = e, bias b); the rest from Markov-Simple2/{_COMMON}; their "
        "'steady' start draws x_1 uniformly (src/optim/utils.py), where this book "
        "draws it from pi; the paper averages five runs of the weight-tied model "
        "(this book ships 8)",
    ),
    "fig4": AuthorsSetting(
        "Fig 4",
        steps=400,
        seq_len=1024,
        runs=8,
        untied_steps=500,
        source="untied grid: Markov-LLM-k/src/schedule2.sh at commit bcd8dc7 "
        "(2024-05-22: the 25 cells, --no_tying, 500 iterations, one run per cell, "
        "wandb project markov-LLM-no-tying-new, plotted by its "
        "figures/notebook-average-p-new.py; its 'steady' start draws x_1 = 1 with "
        "probability pi_0, src/optim/utils.py); tied grid (project "
        "markov-PQ-add-beta, plotted by figures/notebook-average-p-new2.py): its runs' "
        "script is in none of their commits (their plotting script averages the "
        f"runs of a cell), so Markov-LLM/{_COMMON}: its 400 iterations; {_GPT2}",
    ),
    "fig5": AuthorsSetting(
        "Fig 5",
        steps=5000,
        seq_len=1024,
        runs=3,
        layer_norm=False,
        activation="relu",
        source="Markov-Simple (plotted by figures/loss-states.py from wandb project "
        "markov-simple-states-new: k = 5, p = 0.1, 0.3, 0.6, 0.9, tied and "
        f"--no_tying): {_SIMPLE}, n_embd 8, nn.Embedding(5, d) tied to the biased "
        "head; 5000 iterations, 3 runs per curve: at commit a76f965 (2024-08-06) "
        "their src/schedule3.sh runs the tied curves (rewritten at 9b3fed7 for k = 10) "
        "and src/schedule4.sh the --no_tying ones (unchanged since); the rest from "
        f"Markov-Simple/{_COMMON}",
    ),
    "higher_order": AuthorsSetting(
        "ICLR Sec. 4.4",
        steps=10000,
        seq_len=64,
        batch_size=128,
        d_model=16,
        n_heads=2,
        runs=3,
        tied=(True,),
        n_layers=(3,),
        start="uniform",  # their Markov-LLM-depth config's --initial 'uniform'
        source="Markov-LLM-depth/src/schedule2.sh at commit 9b3fed7 (wandb project "
        "markov-LLM-depth-2): random order-2 "
        "chains (--chain random: a kernel drawn for every sequence), depth 3 only, "
        "n_head 2, 10 000 iterations, batch 128, lengths 64-256, n_embd 16 or 32; "
        "start uniform (their config's --initial); the forward pass in fp16 autocast "
        "(their training loop, src/optim/base.py; the configs that accept the "
        f"script's flags, a45c1fd and earlier, set float16); {_GPT2}",
    ),
}


def authors(figure: str, scale: Scale) -> Scale:
    """The scale of ``figure``'s runs at the authors' settings (:data:`AUTHORS`): at
    ``paper`` their iterations, length, batch, d and precision with this book's run
    counts; below it, ``scale``'s sizes in their precision."""
    if figure not in AUTHORS:
        raise ValueError(
            f"figure must be one of {', '.join(map(repr, AUTHORS))}; got {figure!r}"
        )
    A = AUTHORS[figure]
    if scale.name != "paper":
        return replace(scale, precision=A.precision)
    return replace(
        scale,
        steps=A.steps,
        seq_len=A.seq_len,
        batch_size=A.batch_size,
        d_model=A.d_model,
        precision=A.precision,
        seeds=A.runs,
        trap_seeds=A.trap_runs or A.runs,
        source=A.source,
    )


def with_overrides(scale: Scale, **changes) -> Scale:
    """A copy of ``scale`` with some fields changed (e.g. ``steps=2000``)."""
    return replace(scale, **changes)
