"""What a command checks before any work, beyond its options' own values: the
environment variables it reads, the device, the memory its sizes need."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .errors import UsageError

if TYPE_CHECKING:
    from .. import presets


def environment_scale() -> str:
    """``$MARKOVLIB_SCALE`` ('' when unset), refused in one line unless a scale."""
    from .. import presets

    forced = os.environ.get(presets.ENV_VAR, "").strip()
    if forced and forced not in ("auto", *presets.PRESETS):
        raise UsageError(
            f"environment variable {presets.ENV_VAR}: must be one of 'auto', "
            f"{', '.join(map(repr, presets.PRESETS))}; got {forced!r} "
            "(unset it or give --scale)"
        )
    return forced


def check_environment(args, command: str) -> int:
    """The scale, CPU speed and worker variables checked; the sweeps' worker count."""
    from ..runs.sweep import default_workers, fixed_speed

    if args.scale is None:
        environment_scale()
    try:
        fixed_speed()
        return default_workers(f"markovlib {command}")
    except ValueError as e:
        raise UsageError(str(e)) from None


def workers_for_kernels(workers: int, default: int = 1) -> None:
    """``$MARKOVLIB_WORKERS`` for the kernels: ``workers`` if set, else ``default``."""
    from ..runs.sweep import WORKERS_VAR

    given = os.environ.get(WORKERS_VAR, "").strip()
    os.environ[WORKERS_VAR] = str(workers if given else default)


def scale(args) -> presets.Scale:
    """``--scale`` when given (it wins), else ``$MARKOVLIB_SCALE``, else 'auto'."""
    from .. import presets

    if args.scale is not None:
        return presets.resolve(args.scale, environ=False)
    environment_scale()
    return presets.resolve("auto")


def check_device(device: str, *, here: bool = True) -> None:
    """``device`` is auto, cpu, cuda, cuda:N or mps, and (``here``) on this machine."""
    import torch

    try:
        parsed = None if device == "auto" else torch.device(device)
    except RuntimeError:
        parsed = torch.device("meta")
    if parsed is not None and parsed.type not in ("cpu", "cuda", "mps"):
        raise UsageError(
            f"argument --device: must be auto, cpu, cuda, cuda:N or mps; got {device!r}"
        )
    if parsed is None or not here or parsed.type == "cpu":
        return
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError(
            f"argument --device: {device} is not available on this machine "
            "(torch.backends.mps.is_available() is False); give cpu or auto"
        )
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise UsageError(
                f"argument --device: {device}, but CUDA is not available on this "
                "machine (torch.cuda.is_available() is False); give cpu or auto"
            )
        if (parsed.index or 0) >= count:
            raise UsageError(
                f"argument --device: {device}, but this machine has {count} CUDA "
                f"device(s): give cuda:0 to cuda:{count - 1}"
            )


def check_arguments(parser, args) -> None:
    """Checks across arguments, after parsing: one line and exit status 2."""
    if getattr(args, "p", None) is not None and getattr(args, "q", None) is not None:
        ps = args.p if isinstance(args.p, list) else [args.p]
        qs = args.q if isinstance(args.q, list) else [args.q]
        if any(p + q == 0 for p in ps for q in qs):
            parser.error("argument --q: p + q must be > 0 (p = q = 0 never switches)")
    if getattr(args, "device", None) is not None:
        # a Ray task's device is on the cluster's nodes, not necessarily here
        check_device(args.device, here=getattr(args, "executor", "local") != "ray")


def settings(args) -> tuple[dict, dict]:
    """The training and model sizes: each option given, else its scale's."""
    sizes = scale(args)
    train = dict(
        steps=args.steps or sizes.steps,
        batch_size=args.batch_size or sizes.batch_size,
        seq_len=args.seq_len or sizes.seq_len,
        lr=args.lr if args.lr is not None else sizes.lr,
        eval_every=sizes.eval_every,
        eval_batches=sizes.eval_batches,
        precision=args.precision,
    )
    config = dict(
        d_model=args.d_model or sizes.d_model,
        n_layers=args.layers,
        max_len=max(1024, train["seq_len"]),
    )
    check_memory(train, config)
    return train, config


def step_bytes(train: dict, config: dict) -> int:
    """A generous estimate of one step's memory: weights, moments, activations."""
    d, L, T, B = (
        config["d_model"],
        config["n_layers"],
        train["seq_len"],
        train["batch_size"],
    )
    params = 12 * L * d * d + (config["max_len"] + 2) * d
    return 4 * (4 * params + 24 * B * T * d * L + 3 * B * T * T * L)


def check_memory(train: dict, config: dict) -> None:
    """The sizes fit in this machine's free memory, or one line naming them."""
    from ..runs.executors import memory_available

    need, available = step_bytes(train, config), memory_available()
    if available is None or need <= available:
        return
    raise UsageError(
        f"arguments --batch-size, --seq-len, --d-model, --layers: batch "
        f"{train['batch_size']} x length {train['seq_len']}, d {config['d_model']}, "
        f"{config['n_layers']} layer(s) need about {need / 2**30:.3g} GiB per step; "
        f"this machine has {available / 2**30:.3g} GiB free"
    )
