"""What one training run is: :class:`RunSpec` (chain, architecture, training settings,
seed), its key (the SHA-256 of its canonical JSON, by which shipped data and the local
store find it), chain construction from a spec's chain dict, grids of specs, and how a
group of specs is trained (:func:`train_specs`).

The bottom of the run layer: it imports only the maths layer.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ..chains import Chain, binary, lag_switching, random_kth_order, symmetric
from ..incontext import InContextChain
from ..model import Transformer, TransformerConfig
from ..train import Execution, TrainConfig, TrainResult, train, train_many

__all__ = [
    "RunSpec",
    "ensembles",
    "spec_key",
    "make_chain",
    "start_weights",
    "continued",
    "sources_of",
    "grid",
    "chain_grid",
    "train_specs",
    "CHECKPOINT_STEP",
]

CHECKPOINT_STEP = (
    50  # every stored run also keeps its weights after this step (quick verification)
)


def make_chain(spec: dict) -> Chain:
    """A chain from its description: {'kind': 'binary', 'p', 'q'},
    {'kind': 'symmetric', 'k', 'p'}, {'kind': 'lag', 'order', 'p', 'q'}
    (:func:`~markovlib.chains.lag_switching`) or
    {'kind': 'random', 'order', 'k', 'alpha', 'seed'}
    (:func:`~markovlib.chains.random_kth_order`) or {'kind': 'incontext', 'k', 'alpha'}
    (a kernel drawn per sequence, :class:`~markovlib.incontext.InContextChain`)."""
    kind = spec.get("kind")
    if kind == "binary":
        return binary(spec["p"], spec["q"])
    if kind == "symmetric":
        return symmetric(spec["k"], spec["p"])
    if kind == "lag":
        return lag_switching(spec["order"], spec["p"], spec["q"])
    if kind == "random":
        return random_kth_order(
            spec["order"], spec["k"], alpha=spec["alpha"], seed=spec["seed"]
        )
    if kind == "incontext":
        return InContextChain(spec["k"], spec["alpha"])
    raise ValueError(
        "chain kind must be 'binary', 'symmetric', 'lag', 'random' or 'incontext'; "
        f"got {kind!r}"
    )


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines one training run.

    ``init`` says where the weights start: None, drawn from the seed's initialisation
    stream (every run of the paper's figures); ``{"kind": "manifold", "e": e0,
    "w": w0}``, the point (e0, w0) of the low-rank manifold with the optimal bias
    (:func:`~markovlib.dynamics.lowrank_model`, binary chains and the tied theory
    model); ``{"kind": "run", "key": k}``, the final weights of the stored run ``k``
    (training continued, :func:`continued`). A spec without ``init`` has the key it
    had before ``init`` existed."""

    chain: dict  # e.g. {"kind": "binary", "p": 0.5, "q": 0.8}
    config: TransformerConfig
    train: TrainConfig
    seed: int
    init: dict | None = None

    def __post_init__(self):
        if self.init is not None and self.init.get("kind") == "run":
            _check_run_init(self.init)
        elif self.init is not None:
            start_weights(self)  # validates the starting point (ValueError)

    def as_dict(self) -> dict:
        d = {
            "chain": dict(self.chain),
            "config": self.config.to_dict(),
            "train": self.train.to_dict(),
            "seed": int(self.seed),
        }
        if self.init is not None:
            d["init"] = dict(self.init)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RunSpec:
        """The spec of a stored run (specs stored by older versions are read with their
        old meaning)."""
        return cls(
            dict(d["chain"]),
            TransformerConfig(**d["config"]),
            TrainConfig.from_dict(d["train"]),
            int(d["seed"]),
            None if d.get("init") is None else dict(d["init"]),
        )

    @property
    def key(self) -> str:
        """SHA-256 of the canonical JSON of the specification (the library version is
        stored, not hashed)."""
        return spec_key(self.as_dict())

    @property
    def group(self) -> str:
        """Runs with the same group share an architecture and settings, so they can form
        one ensemble."""
        d = self.as_dict()
        return json.dumps({"config": d["config"], "train": d["train"]}, sort_keys=True)


def _check_run_init(init: dict) -> None:
    """A continued run's start names one run by its key (:func:`spec_key`)."""
    key = init.get("key")
    if set(init) != {"kind", "key"} or not (
        isinstance(key, str) and re.fullmatch("[0-9a-f]{20}", key)
    ):
        raise ValueError(
            f"init of kind 'run' must be {{'kind': 'run', 'key': <20 hex digits>}}; "
            f"got {init!r}"
        )


def continued(source: RunSpec, precision: str, offset: int) -> RunSpec:
    """Training of ``source`` continued from its final weights for its own budget
    again (a new schedule and optimiser state), in ``precision``, on the batches of
    seed ``source.seed + offset``."""
    return RunSpec(
        dict(source.chain),
        source.config,
        source.train.replace(precision=precision),
        source.seed + offset,
        {"kind": "run", "key": source.key},
    )


def sources_of(specs: Iterable[RunSpec]) -> list[str]:
    """The keys of the runs that ``specs`` continue (init kind 'run'), in order."""
    keys = [s.init["key"] for s in specs if s.init and s.init.get("kind") == "run"]
    return list(dict.fromkeys(keys))


def start_weights(spec: RunSpec, sources: Mapping | None = None) -> dict | None:
    """The starting weights of ``spec`` (every parameter by name, float32), or None
    for the standard draw from its seed (``spec.init`` is None); a continued run's
    from ``sources`` (run key -> final weights)."""
    if spec.init is None:
        return None
    init = dict(spec.init)
    if init.get("kind") == "run":
        _check_run_init(init)
        if sources is None or init["key"] not in sources:
            raise ValueError(
                f"run {spec.key} continues run {init['key']}, whose weights were not "
                "given (neither shipped nor in the result store)"
            )
        state = sources[init["key"]]  # a state dict: buffers and a tied head too
        names = [name for name, _ in Transformer(spec.config).named_parameters()]
        return {name: state[name].detach().float().clone() for name in names}
    if init.get("kind") != "manifold" or set(init) != {"kind", "e", "w"}:
        raise ValueError(
            "init must be None, {'kind': 'manifold', 'e': e0, 'w': w0} or "
            "{'kind': 'run', 'key': k}; "
            f"got {spec.init!r}"
        )
    if spec.chain.get("kind") != "binary":
        raise ValueError(f"a manifold start needs a binary chain; got {spec.chain!r}")
    from ..dynamics import lowrank_model  # SciPy's import (0.5 s) only where needed

    pq = (spec.chain["p"], spec.chain["q"])
    model = lowrank_model(
        float(init["e"]), float(init["w"]), None, pq, spec.config, torch.float32
    )
    return {name: prm.detach() for name, prm in model.named_parameters()}


def spec_key(spec: dict) -> str:
    """The key of a spec given as a dict (:meth:`RunSpec.as_dict`): first 20 hex digits
    of its SHA-256."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:20]


def grid(
    ps: Sequence[float],
    qs: Sequence[float],
    *,
    tied: Iterable[bool] = (True, False),
    seeds: Iterable[int] = (0,),
    preset: str = "gpt2",
    config_kwargs: dict | None = None,
    train: TrainConfig | None = None,
    **train_kwargs,
) -> list[RunSpec]:
    """Specs for binary chains over ps × qs × tying × seeds (``train`` and/or its
    fields: steps, batch_size, ...)."""
    for p in ps:
        for q in qs:
            binary(p, q)  # validates p, q (ValueError naming the parameter)
    return chain_grid(
        [{"kind": "binary", "p": float(p), "q": float(q)} for p in ps for q in qs],
        tied=tied,
        seeds=seeds,
        preset=preset,
        config_kwargs=config_kwargs,
        train=train,
        **train_kwargs,
    )


def chain_grid(
    chains: Sequence[dict],
    *,
    tied: Iterable[bool] = (True, False),
    seeds: Iterable[int] = (0,),
    preset: str = "gpt2",
    config_kwargs: dict | None = None,
    train: TrainConfig | None = None,
    **train_kwargs,
) -> list[RunSpec]:
    """Specs for any chains (dicts as in :func:`make_chain`) × tying × seeds; the
    vocabulary is each chain's k."""
    if preset not in ("gpt2", "theory"):
        raise ValueError(f"preset must be 'gpt2' or 'theory'; got {preset!r}")
    settings = TrainConfig.build(train, **train_kwargs)
    make = {"gpt2": TransformerConfig.gpt2, "theory": TransformerConfig.theory}[preset]
    tied, seeds = list(tied), list(seeds)
    return [
        RunSpec(
            dict(c),
            make(vocab_size=make_chain(c).k, tied=t, **(config_kwargs or {})),
            settings,
            int(s),
        )
        for t in tied
        for c in chains
        for s in seeds
    ]


def train_specs(
    specs: Sequence[RunSpec],
    *,
    device: str | torch.device = "auto",
    compile: bool = False,
    progress: bool = False,
    stop_after: int | None = None,
    on_step=None,
    sources: Mapping | None = None,
) -> list[TrainResult]:
    """Train specs of one group: a single spec with :func:`~markovlib.train.train`,
    several as one ensemble, each from its starting point (:func:`start_weights`;
    ``sources``: the final weights of the runs they continue, by key);
    ``stop_after=s`` ends them after step s (verification); ``on_step`` is called with
    each step's number (a sweep's progress).

    Both keep the weights after :data:`CHECKPOINT_STEP`; an ensemble's members record
    each other's keys, since a member is reproduced bit for bit only by re-training the
    same ensemble.
    """
    first = specs[0]
    if any(s.group != first.group for s in specs):
        raise ValueError(
            "train_specs needs specs of one group (same architecture and "
            "training settings)"
        )
    run = Execution(
        device=device,
        compile=compile,
        progress=progress,
        checkpoint=CHECKPOINT_STEP,
        stop_after=stop_after,
        on_step=on_step,
    )
    if len(specs) == 1:
        chain, init = make_chain(first.chain), start_weights(first, sources)
        return [
            train(
                chain,
                first.config,
                first.train,
                seed=first.seed,
                init=init,
                execution=run,
            )
        ]
    chains = [make_chain(s.chain) for s in specs]
    seeds = [s.seed for s in specs]
    inits = [start_weights(s, sources) for s in specs]
    results = train_many(
        chains,
        first.config,
        first.train,
        seeds=seeds,
        inits=None if all(i is None for i in inits) else inits,
        execution=run,
    )
    for r in results:
        r.provenance = {**r.provenance, "ensemble_members": [s.key for s in specs]}
    return results


def ensembles(specs: Sequence[RunSpec], size: int) -> list[list[RunSpec]]:
    """``specs`` cut into ensembles of at most ``size`` runs of one architecture and
    training settings (:attr:`RunSpec.group`), in order; the same cut in every
    process, whatever is already trained."""
    by_group: dict[str, list[RunSpec]] = {}
    for spec in {s.key: s for s in specs}.values():
        by_group.setdefault(spec.group, []).append(spec)
    return [
        members[lo : lo + size]
        for members in by_group.values()
        for lo in range(0, len(members), size)
    ]
