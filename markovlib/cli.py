"""The ``markovlib`` command: train one model, run a sweep into a result store, build a
reader's edition, or re-run one chapter.

    markovlib train --p 0.5 --q 0.8 --tied --steps 400
    markovlib sweep --p 0.2,0.5,0.8 --q 0.2,0.5,0.8 --tied both --seeds 5
    markovlib book --p 0.6 --q 0.7 --scale cpu --out my-book
    markovlib rerun framework --p 0.3 --q 0.9  # one chapter: notebook + HTML page
    markovlib verify --sample 2   # the shipped data is what this library produces
    markovlib edition status      # progress of the paper edition's runs
    markovlib import results/unsaved-20261126-101500-4242.sqlite  # a side file

Bad arguments exit with status 2 and one line naming the argument.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import fcntl
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the commands import what they run
    import pandas as pd

    from . import presets
    from .runs.executors import ClusterUnreachable
    from .runs.store import ResultStore

PLAN_BYTES_PER_RUN = 4096  # memory to plan and report one run of a sweep (generous)
# folders of a clone that `book --out` never writes into: sources and shipped data
PROTECTED = (  # the repository's tracked folders
    *("book", "_static", "tools", "data", "markovlib", "tests", "binder", ".git"),
    *(".github", ".ci", "benchmarks", ".venv"),
)
# each command's line in `markovlib --help` (its options are added only when it is
# the command given: the help of the others imports nothing)
HELP = {
    "train": "train one model and compare its loss with H_rate and H(pi)",
    "sweep": "train a (p, q) grid × tying × seeds into a result store",
    "book": "execute every chapter with your (p, q) and build your own HTML edition",
    "rerun": (
        "execute one chapter with your chain into a notebook and an HTML page that "
        "read like the book's"
    ),
    "verify": "check the shipped run data and re-train a random sample bit for bit",
    "scorecard": (
        "the paper edition's scorecard, computed from the shipped runs (trains nothing)"
    ),
    "edition": "produce the paper edition: train its runs, export them as data",
    "import": "take in the runs of a side file that a busy or failing store could not",
}
MAX_STEPS = 10_000_000  # a step takes at least a millisecond: more is weeks of work
MAX_LR = 1e6  # larger learning rates overflow float32 in the one-cycle schedule
EDITION_MARKER = ".markovlib-edition"  # in every folder `markovlib book` writes


class UsageError(Exception):
    """Bad input found after parsing: ``main`` prints it as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage block) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _probabilities(text: str) -> list[float]:
    """'0.2,0.4' → [0.2, 0.4], each in [0, 1]; no empty items, no two values equal to
    6 significant digits."""
    items = [v.strip() for v in text.split(",")]
    if any(not v for v in items):
        raise argparse.ArgumentTypeError(
            f"has an empty item; give comma-separated numbers in [0, 1]; got {text!r}"
        )
    try:
        values = [float(v) for v in items]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated numbers in [0, 1]; got {text!r}"
        ) from None
    if any(not 0 <= v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"must be numbers in [0, 1]; got {text!r}")
    shown = [f"{v:g}" for v in values]
    for i, a in enumerate(shown):
        if a in shown[:i] and values[shown.index(a)] != values[i]:
            raise argparse.ArgumentTypeError(
                f"values {items[shown.index(a)]} and {items[i]} differ "
                "below the printed "
                f"precision (both print as {a}); give distinct values"
            )
    return list(dict.fromkeys(values))


def _probability(text: str) -> float:
    values = _probabilities(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"must be one number in [0, 1]; got {text!r}")
    return values[0]


def _argument_type(convert, what: str, accept, *, show_value: bool = False):
    """An argparse type: ``convert(text)`` where ``accept`` holds it; else an error
    saying it must be ``what`` and quoting the text (with ``show_value``, the converted
    value when only ``accept`` failed)."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}; got {text!r}") from None
        if not accept(value):
            got = value if show_value else repr(text)
            raise argparse.ArgumentTypeError(f"must be {what}; got {got}")
        return value

    return parse


def _int_at_least(low: int):
    """An argparse type: an integer >= ``low``."""
    return _argument_type(
        int, f"an integer >= {low}", lambda v: v >= low, show_value=True
    )


_positive_int, _nonnegative_int = _int_at_least(1), _int_at_least(0)


def _sample(value: str):
    """``verify --sample``: a count of runs, or 'all'."""
    return "all" if value == "all" else _nonnegative_int(value)


# a folder named on the command line: an empty name would mean the current folder
_folder = _argument_type(str, "a folder path, not empty", lambda v: v.strip() != "")
_nonnegative_number = _argument_type(
    float, "a number >= 0", lambda v: 0 <= v < float("inf")
)
_positive_float = _argument_type(float, "a number > 0", lambda v: v > 0)  # inf allowed
_learning_rate = _argument_type(
    float, f"a number > 0 and <= {MAX_LR:g}", lambda v: 0 < v <= MAX_LR, show_value=True
)


def _seed(text: str) -> int:
    """An argparse type: a seed a result store holds (an integer >= 0, < 2**63)."""
    from .runs.store import SEED_LIMIT

    what, limit = "an integer >= 0 and < 2**63", SEED_LIMIT
    return _argument_type(int, what, lambda v: 0 <= v < limit, show_value=True)(text)


def _chapter_seed(text: str) -> int:
    """An argparse type: a seed of ``book`` and ``rerun``, the chapters' own rule."""
    from .companion.notebook import CHAPTER_SEED_LIMIT, SEED_RULE

    what, limit = f"an integer {SEED_RULE.where}{SEED_RULE.why}", CHAPTER_SEED_LIMIT
    return _argument_type(int, what, lambda v: 0 <= v < limit, show_value=True)(text)


def _add_chain(sub: argparse.ArgumentParser, values) -> None:
    """--p and --q of the binary chain (``values``: the argparse type, one number or a
    list)."""
    sub.add_argument("--p", type=values, required=True)
    sub.add_argument("--q", type=values, required=True)


def _add_training(sub: argparse.ArgumentParser) -> None:
    from . import presets

    sub.add_argument(
        "--scale",
        choices=["auto", *presets.PRESETS],
        default=None,
        help="sizes for the options below that are not given (default: "
        "$MARKOVLIB_SCALE, else auto); given, it wins over $MARKOVLIB_SCALE",
    )
    sub.add_argument(
        "--steps",
        type=_argument_type(
            int,
            f"an integer >= 1 and <= {MAX_STEPS}",
            lambda v: 1 <= v <= MAX_STEPS,
            show_value=True,
        ),
    )
    sub.add_argument("--batch-size", type=_positive_int)
    sub.add_argument("--seq-len", type=_positive_int)
    sub.add_argument("--d-model", type=_positive_int)
    sub.add_argument("--layers", type=_positive_int, default=1)
    sub.add_argument("--lr", type=_learning_rate)
    sub.add_argument("--preset", choices=["gpt2", "theory"], default="gpt2")
    sub.add_argument(
        "--device",
        default="auto",
        help="auto (CUDA when present), cpu, cuda, cuda:1, mps",
    )
    sub.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="bf16: bfloat16 autocast",
    )
    sub.add_argument(
        "--compile", action="store_true", help="train through torch.compile"
    )


def _environment_scale() -> str:
    """``$MARKOVLIB_SCALE`` ('' when unset), refused in one line unless a scale."""
    from . import presets

    forced = os.environ.get(presets.ENV_VAR, "").strip()
    if forced and forced not in ("auto", *presets.PRESETS):
        raise UsageError(
            f"environment variable {presets.ENV_VAR}: must be one of 'auto', "
            f"{', '.join(map(repr, presets.PRESETS))}; got {forced!r} "
            "(unset it or give --scale)"
        )
    return forced


def _check_environment(args, command: str) -> int:
    """``$MARKOVLIB_SCALE`` (unless ``--scale`` is given), ``$MARKOVLIB_CPU_SPEED`` and
    ``$MARKOVLIB_WORKERS`` read and checked before any work, each refused in one line
    naming it; the sweeps' worker processes, capped (one line when they are)."""
    from .runs.sweep import default_workers, fixed_speed

    if args.scale is None:
        _environment_scale()
    try:
        fixed_speed()
        return default_workers(f"markovlib {command}")
    except ValueError as e:
        raise UsageError(str(e)) from None


def _workers_for_kernels(workers: int, default: int = 1) -> None:
    """``$MARKOVLIB_WORKERS`` for the chapters' kernels: ``workers`` (checked and
    capped by :func:`_check_environment`) where it is set, else ``default``."""
    from .runs.sweep import WORKERS_VAR

    given = os.environ.get(WORKERS_VAR, "").strip()
    os.environ[WORKERS_VAR] = str(workers if given else default)


def _scale(args) -> presets.Scale:
    """The scale of ``--scale`` when given (it wins over ``$MARKOVLIB_SCALE``), else of
    ``$MARKOVLIB_SCALE``, else 'auto'."""
    from . import presets

    if args.scale is not None:
        return presets.resolve(args.scale, environ=False)
    _environment_scale()
    return presets.resolve("auto")


def _check_device(device: str, *, here: bool = True) -> None:
    """``device`` is auto, cpu, cuda, cuda:N or mps, and (``here``) present on this
    machine."""
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


def _settings(args) -> tuple[dict, dict]:
    scale = _scale(args)
    train = dict(
        steps=args.steps or scale.steps,
        batch_size=args.batch_size or scale.batch_size,
        seq_len=args.seq_len or scale.seq_len,
        lr=args.lr if args.lr is not None else scale.lr,
        eval_every=scale.eval_every,
        eval_batches=scale.eval_batches,
        precision=args.precision,
    )
    config = dict(
        d_model=args.d_model or scale.d_model,
        n_layers=args.layers,
        max_len=max(1024, train["seq_len"]),
    )
    _check_memory(train, config)
    return train, config


def step_bytes(train: dict, config: dict) -> int:
    """A generous estimate of the memory one training step of one model needs:
    weights, gradients and AdamW's two moments (12 d² per layer, the tables), the
    float32 activations kept for the backward pass, and the attention matrices."""
    d, L, T, B = (
        config["d_model"],
        config["n_layers"],
        train["seq_len"],
        train["batch_size"],
    )
    params = 12 * L * d * d + (config["max_len"] + 2) * d
    return 4 * (4 * params + 24 * B * T * d * L + 3 * B * T * T * L)


def _check_memory(train: dict, config: dict) -> None:
    """The sizes fit in this machine's free memory, or one line naming them."""
    from .runs.executors import memory_available

    need, available = step_bytes(train, config), memory_available()
    if available is None or need <= available:
        return
    raise UsageError(
        f"arguments --batch-size, --seq-len, --d-model, --layers: batch "
        f"{train['batch_size']} x length {train['seq_len']}, d {config['d_model']}, "
        f"{config['n_layers']} layer(s) need about {need / 2**30:.3g} GiB per step; "
        f"this machine has {available / 2**30:.3g} GiB free"
    )


def add_train_parser(subs) -> None:
    train = subs.add_parser("train", help=HELP["train"])
    _add_chain(train, _probability)
    train.add_argument("--tied", action=argparse.BooleanOptionalAction, default=True)
    train.add_argument("--seed", type=_seed, default=0)
    _add_training(train)
    train.set_defaults(run=cmd_train)


def cmd_train(args) -> int:
    from .chains import binary
    from .model import TransformerConfig
    from .train import Execution, train

    chain = binary(args.p, args.q)
    train_kwargs, config_kwargs = _settings(args)
    config = getattr(TransformerConfig, args.preset)(tied=args.tied, **config_kwargs)
    result = train(
        chain,
        config,
        seed=args.seed,
        execution=Execution(  # no bar in logs: an error stays one line
            device=args.device, compile=args.compile, progress=sys.stderr.isatty()
        ),
        **train_kwargs,
    )
    if result.diverged_step is not None:
        print(
            f"markovlib train: error: the run diverged: its loss is not finite from "
            f"step {result.diverged_step} of {train_kwargs['steps']} (lr "
            f"{train_kwargs['lr']:g}); no final loss to report",
            file=sys.stderr,
        )
        return 1
    final, h_rate, h_pi = (
        result.final_test_loss,
        chain.entropy_rate(),
        chain.unigram_entropy(),
    )
    kernel = result.learnt_kernel()
    print(
        f"{chain.name}, {'tied' if args.tied else 'untied'} {args.preset}, "
        f"{train_kwargs['steps']} steps, seed {args.seed}"
    )
    print(
        f"final test loss {final:.4f}   H_rate {h_rate:.4f} (gap "
        f"{final - h_rate:+.4f})   "
        f"H(pi) {h_pi:.4f} (gap {final - h_pi:+.4f})"
    )
    print(
        f"learnt P(1|0) {kernel[0, 1]:.4f} (p = {args.p:g})   P(0|1) "
        f"{kernel[1, 0]:.4f} (q = {args.q:g})   "
        f"escape step {result.escape_step()}"
    )
    return 0


def _check_seed_count(args, cells: int) -> None:
    """The sweep's seeds stay below 2**63 and its runs fit in this machine's memory."""
    from .runs.executors import memory_available
    from .runs.store import SEED_LIMIT

    last = args.seed + args.seeds - 1
    if last >= SEED_LIMIT:
        raise UsageError(
            f"argument --seeds: seeds {args.seed} to {last} pass 2**63 - 1, the "
            "largest seed a result store holds; give fewer seeds or a smaller --seed"
        )
    available = memory_available()
    if available is None or cells * args.seeds * PLAN_BYTES_PER_RUN <= available:
        return
    most = max(0, available // (PLAN_BYTES_PER_RUN * cells))
    raise UsageError(
        f"argument --seeds: {args.seeds} seeds make {cells * args.seeds} runs, "
        f"more than this machine's {available / 2**30:.1f} GiB of free memory "
        f"can plan ({PLAN_BYTES_PER_RUN} bytes a run); give at most {most} "
        "seeds per command"
    )


def add_sweep_parser(subs) -> None:
    sub = subs.add_parser("sweep", help=HELP["sweep"])
    _add_chain(sub, _probabilities)
    sub.add_argument("--tied", choices=["both", "tied", "untied"], default="both")
    sub.add_argument(
        "--seeds", type=_positive_int, default=1, help="number of seeds per cell"
    )
    sub.add_argument("--seed", type=_seed, default=0, help="first seed")
    _add_results(sub)
    sub.add_argument(
        "--ensemble-size",
        type=_positive_int,
        default=8,
        help="models trained per batched step",
    )
    sub.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local: here, one ensemble after the other; ray: one Ray "
        "task per ensemble",
    )
    sub.add_argument(
        "--address",
        default=None,
        help="Ray cluster address host:port (default: $RAY_ADDRESS, "
        "else a new Ray instance on this machine)",
    )
    sub.add_argument(
        "--cpus-per-task",
        type=_positive_int,
        default=None,
        help="CPUs (and torch threads) per Ray task (default 1)",
    )
    sub.add_argument(
        "--gpus-per-task",
        type=_nonnegative_number,
        default=None,
        help="GPUs per Ray task, fractions allowed: 0.125 puts 8 ensembles on "
        "one GPU (default 0)",
    )
    _add_training(sub)
    sub.set_defaults(run=cmd_sweep)


def _sweep_specs(args) -> list:
    """The sweep's runs: the (p, q) grid × tying × seeds at the command's sizes;
    refused in one line where the seeds do not fit or a Ray option lacks Ray."""
    from .runs.spec import grid

    train_kwargs, config_kwargs = _settings(args)
    tied = {"both": (True, False), "tied": (True,), "untied": (False,)}[args.tied]
    _check_seed_count(args, len(args.p) * len(args.q) * len(tied))
    ray_only = {
        "--address": args.address,
        "--cpus-per-task": args.cpus_per_task,
        "--gpus-per-task": args.gpus_per_task,
    }
    for option, value in ray_only.items():
        if value is not None and args.executor != "ray":
            raise UsageError(f"argument {option}: needs --executor ray")
    return grid(
        args.p,
        args.q,
        tied=tied,
        seeds=range(args.seed, args.seed + args.seeds),
        preset=args.preset,
        config_kwargs=config_kwargs,
        **train_kwargs,
    )


def _sweep_into(store: ResultStore, specs: list, args) -> pd.DataFrame:
    """:func:`~markovlib.runs.sweep.sweep` of ``specs`` into ``store`` with the
    command's executor; a Ray cluster that cannot run them is one line (exit 2)."""
    from .runs.executors import ClusterUnreachable, InfeasibleRequest
    from .runs.sweep import sweep

    try:
        return sweep(
            specs,
            store,
            ensemble_size=args.ensemble_size,
            workers=args.workers,
            device=args.device,
            compile=args.compile,
            executor=args.executor,
            address=args.address,
            cpus_per_task=args.cpus_per_task or 1,
            gpus_per_task=args.gpus_per_task or 0.0,
            progress=sys.stderr.isatty(),  # no bar in logs: an error stays one line
        )
    except InfeasibleRequest as e:
        raise UsageError(f"argument {e.option}: {e}") from None
    except ClusterUnreachable as e:
        raise _unreachable(e) from None


def _unreachable(e: ClusterUnreachable) -> UsageError:

    hint = f"; {e.hint}" if e.hint else ""
    return UsageError(
        f"argument --address: cannot reach a Ray cluster at {e.address}{hint}"
    )


def _usable_executor(args) -> None:
    """A Ray executor the sweep cannot use is refused before the result store is
    created: ray not installed, or an address that no cluster answers (one line)."""
    from .runs.executors import ClusterUnreachable, probe_address

    if args.executor != "ray":
        return
    if importlib.util.find_spec("ray") is None:
        raise UsageError(
            "argument --executor: ray is not installed (pip install 'markovlib[ray]')"
        )
    if args.address not in (None, "auto"):
        try:
            probe_address(args.address)
        except ClusterUnreachable as e:
            raise _unreachable(e) from None


RESULTS_DEFAULT = (
    "~/.cache/markovlib/results"  # default_results_dir() without a variable
)


def _add_results(sub: argparse.ArgumentParser, default: str = RESULTS_DEFAULT) -> None:
    """``--results DIR``: the result store's folder (see :func:`_results_dir`)."""
    sub.add_argument(
        "--results",
        type=_folder,
        default=None,
        help="folder of the result store (default: $MARKOVLIB_RESULTS, else "
        f"{default})",
    )


def _results_dir(args) -> Path:
    """The result store's folder of every command that writes one: ``--results``,
    else ``$MARKOVLIB_RESULTS``, else the user's cache (never the working folder)."""
    from .runs.store import default_results_dir

    return Path(args.results) if args.results is not None else default_results_dir()


def cmd_sweep(args) -> int:
    from .runs.store import ResultStore

    specs = _sweep_specs(args)
    args.workers = _check_environment(args, "sweep")
    _usable_executor(args)
    store = ResultStore(_results_dir(args))
    before = len(store)
    try:
        frame = _sweep_into(store, specs, args)
    except KeyboardInterrupt:
        print(
            f"interrupted: {len(store)} runs stored in {store.path} "
            f"({len(store) - before} new); "
            "re-run the same command to finish the rest",
            file=sys.stderr,
        )
        return 130
    print(sweep_summary(frame).round(4).to_string())
    diverged = int(frame["excess"].isna().sum())
    if diverged:
        print(f"{diverged} of {len(frame)} runs diverged (excluded from the means)")
    print(f"{len(frame)} runs in {store.path} ({len(store) - before} new)")
    return 0


def sweep_summary(frame):
    """Per tying and chain: mean and largest final loss minus H_rate over the runs that
    stayed finite, how many did, and how many diverged (their loss is NaN)."""
    grouped = frame.groupby(["config.tied", "chain.p", "chain.q"])["excess"]
    summary = grouped.agg(["mean", "max", "count"]).rename(columns={"count": "finite"})
    summary["diverged"] = grouped.size() - summary["finite"]
    return summary


def _book_out(args, root: Path, default: str = "editions/p<p>-q<q>") -> Path:
    """The ``--out`` folder, refused unless new, empty or an earlier edition (it holds
    :data:`EDITION_MARKER`), and outside the book's own sources."""
    from .runs.store import permitted

    out = Path(args.out).resolve()
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"argument --out: {out} is an existing file; give a new folder"
        )
    if (
        out == root
        or root.is_relative_to(out)
        or any(out.is_relative_to(root / d) for d in PROTECTED)
    ):
        raise UsageError(
            f"argument --out: {out} is inside the book's own sources or shipped data "
            f"in {root}; give a folder outside them (default: {default})"
        )
    if out.is_dir() and any(out.iterdir()) and not (out / EDITION_MARKER).is_file():
        raise UsageError(
            f"argument --out: {out} is a folder with files of its own (no "
            f"{EDITION_MARKER}, so not an earlier markovlib edition); give a new or "
            "empty folder"
        )
    folder = next(p for p in (out, *out.parents) if p.exists())
    if not permitted(folder, os.W_OK):  # its mode counts for root too
        raise UsageError(
            f"argument --out: {folder} is not writable (permission denied, mode "
            f"{folder.stat().st_mode & 0o777:03o}); give a folder you can write"
        )
    return out


def _chapter_parameters(args, sources: list[Path]) -> dict[Path, dict]:
    """Per notebook, the parameters ``book`` gives it; refused in one line where the
    chapter itself would refuse them
    (:func:`markovlib.companion.notebook.check_chapter_parameters`),
    before anything is written."""
    from .companion.notebook import (
        CHAPTER_RULES,
        chapter_parameters,
        check_chapter_parameters,
    )

    given = dict(seed=args.seed, scale=args.scale or "auto")
    out = {}
    for source in sources:
        try:
            defaults = chapter_parameters(source)
        except ValueError:  # no parameters cell (Reproducibility declares none)
            defaults = {}
        params = {k: v for k, v in given.items() if k in defaults}
        if {"p", "q"} <= set(defaults):  # binary chapters; k-state and CCMC keep theirs
            chain = {k: getattr(args, k, None) for k in ("p", "q")}
            params.update({k: v for k, v in chain.items() if v is not None})
        if source.stem in CHAPTER_RULES:
            try:
                check_chapter_parameters(source.stem, **{**defaults, **params})
            except ValueError as e:
                name = str(e).split()[0]
                where = f"argument --{name}" if name in params else "chapter"
                raise UsageError(f"{where}: {e} (chapter {source.stem})") from None
        out[source] = params
    return out


def _claim_edition(out: Path) -> int:
    """Create ``out``, mark it as an edition and lock it (``fcntl.flock`` on the
    marker, released when this process ends); the marker's descriptor. A second
    build of the same folder is refused in one line."""
    out.mkdir(parents=True, exist_ok=True)
    marker = out / EDITION_MARKER
    fd = os.open(marker, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(
            f"argument --out: another markovlib book is building {out} now (it "
            f"holds the lock on {marker}); wait for it or give another folder"
        ) from None
    return fd


def _write_marker(fd: int, args) -> None:
    text = json.dumps(dict(p=args.p, q=args.q, seed=args.seed, scale=args.scale))
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"markovlib edition {text}\n".encode(), 0)


def add_book_parser(subs) -> None:
    from . import presets

    book = subs.add_parser(
        "book",
        help=HELP["book"],
    )
    _add_chain(book, _probability)
    book.add_argument("--seed", type=_chapter_seed, default=0)
    book.add_argument(
        "--scale",
        choices=["auto", *presets.PRESETS],
        default=None,
        help="the chapters' scale (default: $MARKOVLIB_SCALE, else auto); given, it "
        "wins over $MARKOVLIB_SCALE",
    )
    book.add_argument(
        "--out",
        type=_folder,
        default=None,
        help="output directory (default: editions/p<p>-q<q> in the clone)",
    )
    book.add_argument(
        "--source",
        default=".",
        help="the clone of the book to build from (default: here or above)",
    )
    book.add_argument(
        "--jobs",
        type=_positive_int,
        default=1,
        help="chapters executed at once, each on one torch thread (default: 1)",
    )
    book.add_argument(
        "--strict",
        action="store_true",
        help="fail on any Sphinx warning or broken reference (as make test does)",
    )
    book.set_defaults(run=cmd_book)


def cmd_book(args) -> int:
    from . import presets
    from .companion.chapter_runner import Stopped, stopping
    from .companion.notebook import find_repository
    from .runs.executors import capped_processes
    from .runs.sweep import WORKERS_VAR

    root = find_repository(args.source)
    if root is None:
        raise UsageError(
            f"argument --source: no clone of the book at or above {args.source} "
            "(a folder with _toc.yml and book/)"
        )
    # by default in the clone, never in the working folder
    args.out = args.out or str(root / "editions" / f"p{args.p:g}-q{args.q:g}")
    out = _book_out(args, root)
    sources = sorted((root / "book").glob("*.ipynb"))
    params = _chapter_parameters(args, sources)
    workers = _check_environment(args, "book")
    args.jobs = capped_processes(args.jobs, "--jobs", "markovlib book")
    # every chapter's sweeps: --jobs × $MARKOVLIB_WORKERS training processes in all
    what, total = f"--jobs {args.jobs} × ${WORKERS_VAR}", args.jobs * workers
    total = capped_processes(total, what, "markovlib book")
    _workers_for_kernels(max(1, total // args.jobs))  # the chapters read them
    _check_room(out)
    fd = _claim_edition(out)
    saved = os.environ.pop(presets.ENV_VAR, None) if args.scale else None
    try:
        _write_marker(fd, args)
        with stopping():  # its chapters, kernels, workers and build end with it
            return _build_book(args, root, out, params)
    except Stopped as e:
        kept = "what was finished is kept, re-run the same command to go on"
        return _stopped("book", e, kept)
    except OSError as e:  # a full disk: say where (os.pwrite names no file)
        raise OSError(e.errno, e.strerror, e.filename or str(out)) from None
    finally:
        if saved is not None:
            os.environ[presets.ENV_VAR] = saved
        os.close(fd)


def _build_book(args, root: Path, out: Path, params: dict[Path, dict]) -> int:
    """Copy the book's sources to ``out``, execute each chapter with its ``params`` and
    build the HTML."""
    _book_sources(root, out, f"edition p = {args.p:g}, q = {args.q:g}")
    if _execute_chapters(out, params, args.jobs) != 0:
        return 1
    for notebook in params:
        _built_as_executed(out / "book" / notebook.name)
    strict = ["-W", "-n", "--keep-going"] if args.strict else []
    built = _jupyter_book(out, strict)
    if built.returncode != 0:
        print(
            f"markovlib book: error: jupyter-book build of {out} failed (exit status "
            f"{built.returncode}; its output is above)",
            file=sys.stderr,
        )
        return 1
    print(f"Your edition: file://{out / '_build' / 'html' / 'index.html'}")
    return 0


def _book_sources(root: Path, out: Path, edition: str, toc: dict | None = None) -> None:
    """Everything the book's build reads besides the chapters, copied to ``out``: the
    pages, bibliography, favicon, CSS, local extension, pyproject.toml (the repository
    it names), ``toc`` (default the book's) and the book's configuration, its title
    followed by ``edition``, execution off (papermill executes the chapters first)."""
    import yaml  # optional: the book's dependencies (papermill, PyYAML)

    support = [
        root / "_toc.yml",
        root / "pyproject.toml",
        root / "tools" / "sphinx_fixes.py",
        *(f for f in (root / "book").iterdir() if f.is_file() and f.suffix != ".ipynb"),
        *(f for f in (root / "_static").rglob("*") if f.is_file()),
    ]
    for path in support:
        (out / path.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, out / path.relative_to(root))
    config = yaml.safe_load((root / "_config.yml").read_text())
    config["title"] = f"{config['title']} — {edition}"
    config["execute"]["execute_notebooks"] = "off"
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    if toc is not None:
        (out / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))


def _jupyter_book(
    folder: Path, options: list[str], **run
) -> subprocess.CompletedProcess:
    """``jupyter-book build`` of ``folder`` into ``folder/_build`` (the one beside this
    Python)."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    command = [str(jupyter_book), "build", str(folder), "--path-output", str(folder)]
    return subprocess.run([*command, *options], **run)


def _papermill(source: Path, target: Path, params: dict, **options) -> None:
    """Execute chapter ``source`` into ``target`` with ``params``, in its own folder,
    its kernel quiet on the terminal (``book`` and ``rerun``)."""
    import papermill as pm  # optional: the book's dependencies

    from .companion.chapter_runner import quiet_kernel_manager

    pm.execute_notebook(
        str(source),
        str(target),
        cwd=str(source.parent),
        parameters=params,
        kernel_manager_class=quiet_kernel_manager(),
        **options,
    )


def _shown(params: dict) -> str:
    """A chapter's parameters as the progress line shows them: "p=0.3, q=0.9"."""
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _failure(error) -> str:
    """A papermill execution error in one line: "Name: message"."""
    return f"{error.ename}: {' '.join(str(error.evalue).split())}"


def _execute_one(source: Path, target: Path, given: dict, threads: str | None):
    """Execute one chapter with papermill (in a worker process of ``book --jobs``);
    its seconds, or the one-line reason it failed."""
    import papermill as pm

    if threads is not None:  # the kernel inherits it: one torch thread per worker
        os.environ["OMP_NUM_THREADS"] = threads
    start = time.perf_counter()
    try:
        _papermill(source, target, given, progress_bar=False)
    except pm.PapermillExecutionError as e:
        return None, _failure(e)
    return time.perf_counter() - start, None


def _built_as_executed(notebook: Path) -> None:
    """The build shows ``notebook`` as papermill executed it: a page that asks the build
    to execute it itself (Reproducibility, ``mystnb.execution_mode: force``, for ``make
    book``) has just been executed for this edition (10 s more in the build)."""
    import nbformat

    executed = nbformat.read(str(notebook), as_version=4)
    if executed.metadata.get("mystnb", {}).pop("execution_mode", None) is not None:
        nbformat.write(executed, str(notebook))


def _execute_chapters(out: Path, params: dict[Path, dict], jobs: int) -> int:
    """Execute every chapter into ``out/book``, ``jobs`` at a time (each worker's
    kernel on one torch thread when ``jobs`` > 1); 1 at the first failure."""
    from .companion.chapter_runner import run_chapters

    threads = "1" if jobs > 1 else None
    tasks = {}
    for source, given in params.items():
        print(f"executing {source.name} with {_shown(given)}", flush=True)
        tasks[source.name] = (
            _execute_one,
            (source, out / "book" / source.name, given, threads),
        )
    failed = run_chapters(tasks, jobs, tag="executed")
    if failed:
        name, error = failed
        print(
            f"markovlib book: error: {name} failed ({error}); "
            f"see {out / 'book' / name}",
            file=sys.stderr,
        )
        return 1
    return 0


def add_rerun_parser(subs) -> None:
    """``markovlib rerun CHAPTER [--p P --q Q] [--set NAME=VALUE ...]``: one chapter,
    as notebook and page."""
    from . import presets
    from .companion.notebook import CHAPTER_RULES

    chapters = ", ".join(f"{c} ({' '.join(CHAPTER_RULES[c])})" for c in CHAPTER_RULES)
    rerun = subs.add_parser(
        "rerun",
        help=HELP["rerun"],
        description="Re-run one chapter with your parameters. Chapters (and the "
        f"parameters each takes): {chapters}.",
    )
    rerun.add_argument(
        "chapter", metavar="CHAPTER", help="one of: " + ", ".join(CHAPTER_RULES)
    )
    rerun.add_argument("--p", type=_probability, help="P(1|0) (binary chapters)")
    rerun.add_argument("--q", type=_probability, help="P(0|1) (binary chapters)")
    rerun.add_argument(
        "--set",
        dest="params",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="any other parameter of the chapter, e.g. --set k=4 (multi_state)",
    )
    rerun.add_argument("--seed", type=_chapter_seed, default=0)
    rerun.add_argument(
        "--scale",
        choices=["auto", *presets.PRESETS],
        default=None,
        help="the chapter's scale (default: $MARKOVLIB_SCALE, else auto); given, it "
        "wins over $MARKOVLIB_SCALE",
    )
    rerun.add_argument(
        "--out",
        type=_folder,
        default=None,
        help="output directory (default: reruns/<chapter>-<parameters> in the clone)",
    )
    rerun.add_argument(
        "--verbose",
        action="store_true",
        help="papermill's own log: each cell as it runs, with its output",
    )
    rerun.set_defaults(run=cmd_rerun)


def _rerun_source(chapter: str) -> tuple[Path, Path]:
    """The clone here and its ``book/<chapter>.ipynb``."""
    from .companion.notebook import CHAPTER_RULES, find_repository

    if chapter not in CHAPTER_RULES:
        raise UsageError(
            f"argument CHAPTER: must be one of {', '.join(CHAPTER_RULES)}; "
            f"got {chapter!r}"
        )
    root = find_repository()
    if root is None:
        raise UsageError(
            f"no clone of the book at or above {Path.cwd()} (a folder with _toc.yml "
            "and book/); run markovlib rerun from a clone"
        )
    return root, root / "book" / f"{chapter}.ipynb"


def _rerun_parameters(args, source: Path) -> dict:
    """The parameters a re-run gives its chapter: --p, --q and each --set NAME=VALUE
    (typed as the chapter's default), refused in one line before any work."""
    from .companion.notebook import CHAPTER_RULES, chapter_parameters

    defaults = chapter_parameters(source)
    given = {}
    for name in ("p", "q"):
        if getattr(args, name) is not None:
            if name not in defaults:
                raise UsageError(
                    f"argument --{name}: {source.stem} has no parameter {name} (it "
                    f"takes {', '.join(CHAPTER_RULES[source.stem])})"
                )
            given[name] = getattr(args, name)
    for item in args.params:
        name, eq, text = item.partition("=")
        name = name.strip()
        if not eq or name not in CHAPTER_RULES[source.stem]:
            raise UsageError(
                f"argument --set: {item!r} is not NAME=VALUE with NAME one of "
                f"{', '.join(CHAPTER_RULES[source.stem])} (chapter {source.stem})"
            )
        if name in ("seed", "scale"):
            raise UsageError(f"argument --set: give {name} as --{name}")
        if name in given:
            option = name in ("p", "q") and getattr(args, name) is not None
            before = f"--{name} {given[name]:g}" if option else "another --set"
            raise UsageError(
                f"argument --set: {item!r} conflicts with {before}; give {name} once"
            )
        rule = CHAPTER_RULES[source.stem][name]
        given[name] = _typed(name, text.strip(), defaults.get(name), rule)
    return given


def _typed(name: str, text: str, default, rule):
    """``text`` as the type of the chapter's default value of ``name``; where that is
    None, as its ``rule`` says (an integer or a number, or 'none')."""
    if default is None and getattr(rule, "optional", False) and text.lower() == "none":
        return None
    kind = type(default) if default is not None else float
    if default is None and getattr(rule, "integer", False):
        kind = int
    words = {bool: "true or false", int: "an integer", float: "a number"}
    try:
        if kind is bool:
            return {"true": True, "false": False}[text.lower()]
        return kind(text)
    except (ValueError, KeyError):
        what = words.get(kind, kind.__name__)
        raise UsageError(
            f"argument --set: {name} must be {what}; got {text!r}"
        ) from None


def cmd_rerun(args) -> int:
    """Check everything, then re-run one chapter into ``--out``; Ctrl-C: exit 130."""
    from . import presets
    from .companion.chapter_runner import stopping
    from .companion.notebook import chapter_parameters

    root, source = _rerun_source(args.chapter)
    given = _rerun_parameters(args, source)
    shown = "-".join(
        f"{k}{v:g}" if isinstance(v, float) else f"{k}{v}" for k, v in given.items()
    )
    args.out = args.out or str(
        root / "reruns" / "-".join(filter(None, (args.chapter, shown)))
    )
    out = _book_out(args, root, default="reruns/<chapter>-<parameters>")
    params = {**_chapter_parameters(args, [source])[source], **given}
    _check_rerun(source.stem, {**chapter_parameters(source), **params})
    # the chapter's sweeps share their ensembles among the machine's cores
    workers = _check_environment(args, "rerun")
    _workers_for_kernels(workers, min(4, os.cpu_count() or 1))
    _check_room(out)
    fd = _claim_edition(out)
    saved = os.environ.pop(presets.ENV_VAR, None) if args.scale else None
    try:
        _write_marker(fd, args)
        with stopping():  # its kernel and the kernel's workers end with it
            return _rerun(root, source, out, params, args.verbose)
    except KeyboardInterrupt as e:  # Stopped, or Ctrl-C before the kernel started
        kept = _cut_off(out / source.name)
        return _stopped(
            "rerun", e, f"the runs that finished are kept in the result store{kept}"
        )
    finally:
        if saved is not None:
            os.environ[presets.ENV_VAR] = saved
        os.close(fd)


def _stopped(command: str, stop: KeyboardInterrupt, kept: str) -> int:
    """The one line of a command stopped by SIGINT or SIGTERM (``stop``; every process
    it started has ended) and its exit status: 130, or 143 for SIGTERM."""
    # nbclient leaves a kernel poll unawaited and the interrupted cell's task
    # unretrieved: neither is reported at exit (asyncio logs the latter with the
    # cell's traceback when the task is collected); the line below says it all
    warnings.filterwarnings("ignore", "coroutine", RuntimeWarning)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    terminated = getattr(stop, "signum", signal.SIGINT) == signal.SIGTERM
    print(
        f"markovlib {command}: {'terminated' if terminated else 'interrupted'}; {kept}",
        file=sys.stderr,
        flush=True,
    )
    return 143 if terminated else 130


MIN_FREE_BYTES = 200 * 2**20  # a chapter's notebook, page and runs: well under this


def _check_room(out: Path) -> None:
    """Before a chapter runs: the result store it will write takes a run now (not
    read-only, not locked), and the folders of ``out`` and of the store have room."""
    from .runs.store import ResultStore, default_results_dir

    store = ResultStore(default_results_dir())
    store.check_writable()
    for folder in (out, store.directory):
        existing = next(p for p in (folder, *folder.parents) if p.exists())
        free = shutil.disk_usage(existing).free
        if free < MIN_FREE_BYTES:
            raise UsageError(
                f"{folder}: {free / 2**20:.0f} MB free on its disk, under the "
                f"{MIN_FREE_BYTES / 2**20:.0f} MB a chapter's runs and pages need; "
                "free some or give another folder"
            )


def _cut_off(target: Path) -> str:
    """Rename the notebook a cut-off re-run left half executed to
    ``<chapter>.interrupted.ipynb`` (a re-run's page is never a partial one); the
    words that say where it is."""
    if not target.exists():
        return ""
    partial = _partial(target)
    target.replace(partial)
    return f", the half-executed notebook in {partial}"


def _partial(target: Path) -> Path:
    """Where a cut-off re-run sets its half-executed notebook ``target`` aside."""
    return target.with_suffix(".interrupted.ipynb")


def _check_rerun(chapter: str, params: dict) -> None:
    """The chapter's own check of ``params`` (with its defaults), in one line."""
    from .companion.notebook import check_chapter_parameters

    try:
        check_chapter_parameters(chapter, **params)
    except ValueError as e:
        name = str(e).split()[0]
        where = name if name in ("p", "q", "seed") else "set"
        raise UsageError(f"argument --{where}: {e} (chapter {chapter})") from None


def _rerun(root: Path, source: Path, out: Path, params: dict, verbose=False) -> int:
    """Execute ``source`` with ``params`` into ``out``: a notebook and an HTML page.
    On the terminal: the chapter's progress, what it trains and the training bar, its
    verdicts and the page (``verbose``: papermill's log of every cell instead)."""
    import nbformat  # optional: the book's dependencies (nbformat, papermill)
    import papermill as pm

    from .companion.chapter_runner import ChapterProgress, failure_lines

    target, shown = out / source.name, _shown(params)
    print(f"executing {source.name} with {shown}", flush=True)
    cells = len(nbformat.read(str(source), as_version=4).cells) + 1  # + injected
    progress = ChapterProgress(source.stem, cells)
    options = progress.options() if not verbose else _VERBOSE
    start = time.perf_counter()
    try:
        with _papermill_log(verbose):
            _papermill(source, target, params, **options)
    except pm.PapermillExecutionError as e:
        if e.ename == "KeyboardInterrupt":  # Ctrl-C reached the kernel first
            raise KeyboardInterrupt from None
        progress.close()
        print("\n".join(failure_lines(e)), file=sys.stderr)
        print(
            f"markovlib rerun: error: {source.name} failed ({_failure(e)}); "
            f"the partial notebook: {target}",
            file=sys.stderr,
        )
        return 1
    finally:
        progress.close()
    _partial(target).unlink(missing_ok=True)  # completed: no stale partial beside it
    return _rerun_page(root, source, out, shown, time.perf_counter() - start)


_VERBOSE = {"log_output": True, "progress_bar": True}


@contextlib.contextmanager
def _papermill_log(verbose: bool):
    """papermill's own log on stderr (each cell as it runs, its output) when
    ``verbose``; else papermill says nothing."""
    import logging

    if not verbose:
        yield
        return
    log, handler = logging.getLogger("papermill"), logging.StreamHandler(sys.stderr)
    log.addHandler(handler)
    level, log.level = log.level, logging.INFO
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.level = level


def _rerun_page(root: Path, source: Path, out: Path, shown: str, seconds: float):
    """After the chapter ran: its verdicts, then its page built; the paths."""
    import nbformat

    from .companion.chapter_runner import chapter_report
    from .companion.myst_markdown import chapter_titles, render_roles

    target = out / source.name
    executed = nbformat.read(str(target), as_version=4)
    tty = sys.stdout.isatty()
    width = max(60, shutil.get_terminal_size().columns - 1) if tty else 200
    report = chapter_report(executed, width)
    print(f"{source.stem}: ran in {seconds:.0f} s", *report, sep="\n", flush=True)
    titles = chapter_titles(source.parent)
    nbformat.write(render_roles(executed, titles), str(target))  # for Jupyter
    try:
        page = _page(root, source.stem, executed, out, f"re-run with {shown}", titles)
    except RuntimeError as e:  # the notebook stands; say why its page does not
        print(f"markovlib rerun: error: {e}; the notebook: {target}", file=sys.stderr)
        return 1
    print(f"notebook: {target}\nHTML page: {page}")
    return 0


def _page(
    root: Path, stem: str, nb, out: Path, edition: str, titles: dict[str, str]
) -> Path:
    """Executed chapter ``nb`` as a page of the book (its theme, maths typeset
    offline, citations, numbered figures): a one-page book built in ``out/.page``,
    its HTML moved to ``out/html``. Links to the other chapters become their
    ``titles`` (:func:`chapter_titles`)."""
    import nbformat

    from .companion.myst_markdown import chapter_labels, other_chapters_named

    site, html = out / ".page", out / "html"
    shutil.rmtree(site, ignore_errors=True)
    toc = {"format": "jb-book", "root": f"book/{stem}"}
    toc["chapters"] = [{"file": "book/bibliography"}]
    _book_sources(root, site, edition, toc)
    nb.cells = _one_parameters_cell(nb.cells)
    labels = chapter_labels(root / "book")
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _DOC_ROLE.sub(
                lambda m: (
                    m[0] if m[1] == "bibliography" else f"*{titles.get(m[1], m[1])}*"
                ),
                other_chapters_named(cell.source, stem, labels, titles),
            )
    nbformat.write(nb, str(site / "book" / f"{stem}.ipynb"))
    built = _jupyter_book(site, ["--quiet"], capture_output=True, text=True)
    if built.returncode != 0:
        tail = (built.stderr or built.stdout).strip().splitlines()[-1:]
        raise RuntimeError(f"the page of {stem} did not build: {' '.join(tail)}")
    shutil.rmtree(html, ignore_errors=True)
    shutil.move(str(site / "_build" / "html"), str(html))
    shutil.rmtree(site, ignore_errors=True)
    return html / "book" / f"{stem}.html"


_DOC_ROLE = re.compile(r"\{doc\}`([\w-]+)`")


def _one_parameters_cell(cells: list) -> list:
    """The chapter's parameters cell with papermill's injected values written in
    place of its defaults (comments kept), and the injected cell dropped: the page
    shows one parameters cell, the reader's."""
    import ast

    tagged = {tag: i for i, c in enumerate(cells) for tag in c.metadata.get("tags", [])}
    if "parameters" not in tagged or "injected-parameters" not in tagged:
        return cells
    injected = cells[tagged["injected-parameters"]].source
    given = {
        node.targets[0].id: ast.get_source_segment(injected, node.value)
        for node in ast.parse(injected).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    cell = cells[tagged["parameters"]]
    lines = cell.source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    text = cell.source
    nodes = [n for n in ast.parse(text).body if isinstance(n, ast.AnnAssign)]
    for node in reversed(nodes):
        name = getattr(node.target, "id", None)
        if name in given and node.value is not None:
            a = starts[node.value.lineno - 1] + node.value.col_offset
            b = starts[node.value.end_lineno - 1] + node.value.end_col_offset
            text = text[:a] + given[name] + text[b:]
    cell.source = text
    return [c for i, c in enumerate(cells) if i != tagged["injected-parameters"]]


def _data_dir(args) -> Path | None:
    """``--data``, else ``$MARKOVLIB_DATA``, else data/paper here or above (None where
    there is none); refused in one line where it names a file."""
    from .runs.shipped import default_data_dir

    directory = Path(args.data) if args.data else default_data_dir()
    if directory is not None and directory.exists() and not directory.is_dir():
        where = (
            "argument --data" if args.data else "environment variable MARKOVLIB_DATA"
        )
        raise UsageError(
            f"{where}: {directory} is a file, not a folder; give the shipped data "
            "folder (data/paper)"
        )
    return directory


def _add_verify_sample(verify) -> None:
    """``verify``'s arguments that choose the runs to re-train."""
    verify.add_argument(
        "--seed",
        type=_nonnegative_int,
        default=None,
        help="seed of the sample (default: random)",
    )
    verify.add_argument(
        "--quick",
        action="store_true",
        help="re-train each run only to its checkpoint (step 50) and "
        "compare up to there",
    )
    verify.add_argument(
        "--max-seconds",
        type=_positive_float,
        default=None,
        help="draw only among runs that took at most this long to train",
    )
    verify.add_argument(
        "--exact-only",
        action="store_true",
        help="draw only among runs this CPU can reproduce bit for bit",
    )


def add_verify_parser(subs) -> None:
    verify = subs.add_parser(
        "verify",
        help=HELP["verify"],
    )
    verify.add_argument(
        "--data",
        type=_folder,
        default=None,
        help="shipped data folder (default: data/paper here or above)",
    )
    verify.add_argument(
        "--sample",
        type=_sample,
        default=2,
        help="runs to re-train (default 2; all: every shipped run)",
    )
    verify.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="where the re-training runs: here, or one Ray task per ensemble",
    )
    verify.add_argument(
        "--address",
        default=None,
        help="Ray cluster address host:port (default: $RAY_ADDRESS, "
        "else a new Ray instance on this machine)",
    )
    _add_verify_sample(verify)
    verify.add_argument(
        "--complete",
        action="store_true",
        help="fail unless every run of the paper edition is shipped",
    )
    verify.add_argument(
        "--jobs",
        type=_positive_int,
        default=1,
        help="processes for the checks without training, one torch thread each "
        "(default 1)",
    )
    verify.add_argument(
        "--retrain-only",
        action="store_true",
        help="skip the run-by-run checks without training (a verify just ran them); "
        "the manifest and every hash are still checked",
    )
    verify.set_defaults(run=cmd_verify)


def _verify_refusal(args, directory) -> str:
    """Why ``markovlib verify`` refuses these options, in one line ('' if it does
    not)."""
    from .runs.shipped import no_data_message

    if directory is None or not directory.is_dir():
        return "argument --data: " + (
            f"{no_data_message()}; or give --data DIR"
            if directory is None
            else f"no shipped data folder {directory}"
        )
    if args.address is not None and args.executor != "ray":
        return "argument --address: needs --executor ray"
    if args.retrain_only and args.sample == 0:
        return (
            "argument --retrain-only: with --sample 0 it checks no run and re-trains "
            "none; drop one of them"
        )
    return ""


def cmd_verify(args) -> int:
    from .runs.executors import ClusterUnreachable, capped_processes
    from .runs.shipped import ShippedDataError
    from .runs.sweep import sigterm_as_interrupt
    from .runs.verify import VerificationError, verify

    directory = _data_dir(args)
    refusal = _verify_refusal(args, directory)
    if refusal:
        print(f"markovlib verify: error: {refusal}", file=sys.stderr)
        return 2
    args.jobs = capped_processes(args.jobs, "--jobs", "markovlib verify")
    recomputed = []

    def log(line: str) -> None:  # counts the derived values it recomputes
        recomputed.extend(["x"] if line.startswith("derived value ") else [])
        print(line, flush=True)

    try:
        with sigterm_as_interrupt():  # SIGTERM ends it as Ctrl-C does: one line
            n = verify(
                directory,
                sample=args.sample,
                seed=args.seed,
                quick=args.quick,
                max_seconds=args.max_seconds,
                exact_only=args.exact_only,
                complete=args.complete,
                executor=args.executor,
                address=args.address,
                jobs=args.jobs,
                checks=not args.retrain_only,
                log=log,
            )
    except (ShippedDataError, VerificationError) as e:
        print(f"markovlib verify: FAILED: {_one_line(e)}", file=sys.stderr)
        return 1
    except ClusterUnreachable as e:
        print(f"markovlib verify: error: argument --address: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        if e.name != "ray":
            raise
        print(
            "markovlib verify: error: argument --executor: ray is not installed (pip "
            "install 'markovlib[ray]')",
            file=sys.stderr,
        )
        return 2
    print(f"verified: {_verified(args, n, len(recomputed))}")
    return 0


def _verified(args, n: int, derived: int = 0) -> str:
    """What a verify that passed checked, and how (its last line)."""
    done = [
        "the manifest, every file's SHA-256 and spec key, every derived value's key"
    ]
    if not args.retrain_only:
        done.append(
            "every run's stored fields checked against each other without training"
        )
    if n:
        how = "to step 50" if args.quick else "to the end"
        done.append(f"{n} of {n} re-trained runs reproduced ({how})")
    if derived:
        done.append(f"{derived} derived value{'s' if derived > 1 else ''} recomputed")
    if not n:
        done.append("no run re-trained (--sample 0)")
    return "; ".join(done)


def add_scorecard_parser(subs) -> None:
    card = subs.add_parser(
        "scorecard",
        help=HELP["scorecard"],
    )
    card.add_argument(
        "--data",
        type=_folder,
        default=None,
        help="shipped data folder (default: data/paper)",
    )
    card.add_argument("--json", action="store_true", help="print the rows as JSON")
    card.set_defaults(run=cmd_scorecard)


def cmd_scorecard(args) -> int:
    from .companion.computed import compute
    from .companion.scorecard import by_source, source_counts

    t0 = time.perf_counter()
    rows = compute(_data_dir(args))
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=1, ensure_ascii=False))
        return 0
    id_width = max(len(r.id) for r in rows)
    verdict_width = max(len(r.verdict) for r in rows)
    indent = 2 + id_width + 1 + verdict_width + 1
    width = max(shutil.get_terminal_size().columns, indent + 40)
    for source, group in by_source(rows):
        print(f"{source}:")
        for r in group:  # the value wrapped under its own column (issue 49)
            lines = textwrap.wrap(r.value, width - indent) or [""]
            print(f"  {r.id:{id_width}s} {r.verdict:{verdict_width}s} {lines[0]}")
            for line in lines[1:]:
                print(" " * indent + line)
    print(f"{source_counts(rows)} ({time.perf_counter() - t0:.0f} s)")
    return 0


class _NoStore:
    """The result store that is not there (``edition status`` creates none)."""

    def __init__(self, path: Path | None):
        self.path = path

    def keys(self) -> set[str]:
        return set()

    def __len__(self) -> int:
        return 0

    def frame(self):

        import pandas as pd

        return pd.DataFrame()


def _edition_paths(args) -> tuple[Path | None, Path | None]:
    """(data folder, result store folder) of the edition commands: ``--data``, else the
    first data/paper with a manifest here or above (as ``verify``); ``--results``, else
    ``$MARKOVLIB_RESULTS``, else results/paper-edition beside that data/ folder (or
    in the clone of the book around the working directory). None where there is
    none."""
    from .companion.notebook import find_repository

    data = _data_dir(args)
    if args.results is not None or os.environ.get("MARKOVLIB_RESULTS"):
        return data, _results_dir(args)
    if data is not None and data.parent.name == "data":
        root = data.resolve().parent.parent
    else:
        root = find_repository()
    return data, None if root is None else root / "results" / "paper-edition"


def _edition_store(args, results: Path | None):
    """The edition's result store: opened read-only where it exists for ``status`` and
    ``export`` (nothing created or written there), created by ``produce``."""
    from .runs.store import ResultStore

    if results is not None and results.exists() and not results.is_dir():
        raise UsageError(
            f"argument --results: {results} is a file, not a folder; give the "
            "edition's result store folder"
        )
    if args.action != "produce":  # status and export only read it
        if results is None or not (results / "runs.sqlite").is_file():
            return _NoStore(results)
        return ResultStore(results, read_only=True)
    if results is None:
        raise UsageError(
            "argument --results: no data/paper folder or clone of the book here or "
            "above to put results/paper-edition in; give --results DIR"
        )
    return ResultStore(results)


def add_edition_parser(subs) -> None:
    edition = subs.add_parser("edition", help=HELP["edition"])
    edition.add_argument(
        "action",
        choices=["status", "produce", "export", "retrain", "judge"],
        help="retrain: every run into a new --results store (fresh, shipped or not), "
        "then judged against the shipped runs; judge: write the classes and verdicts "
        "of --data to --report",
    )
    _add_results(edition, "results/paper-edition beside the data/ folder")
    edition.add_argument(
        "--data",
        type=_folder,
        default=None,
        help="shipped data folder to export to (default: data/paper here or above)",
    )
    edition.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        help="torch threads per process (default 1)",
    )
    edition.add_argument(
        "--only",
        type=_group_prefixes,
        default=None,
        help="comma-separated group name prefixes (e.g. fig5-k5-theory)",
    )
    edition.add_argument(
        "--ensemble",
        type=_positive_int,
        default=None,
        help="runs trained together in one batched step (default 8)",
    )
    _add_retrain_arguments(edition)
    edition.set_defaults(run=cmd_edition)


def _add_retrain_arguments(edition) -> None:
    """``edition``'s options of produce and retrain on other machines."""
    edition.add_argument(
        "--device",
        choices=["cpu", "cuda", "auto"],
        default=None,
        help="where produce and retrain train (default cpu; auto: cuda if any)",
    )
    edition.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        help="processes that train at once, each claiming its ensembles (default 1)",
    )
    edition.add_argument(
        "--against",
        type=_folder,
        default=None,
        help="retrain: a judgement (JSON of `edition judge`) to compare with, "
        "instead of judging the shipped data",
    )
    edition.add_argument(
        "--report",
        type=Path,
        default=None,
        help="judge, retrain: the JSON to write (retrain: a Markdown page beside it; "
        "default <results>/retrain.json)",
    )


# the options each action of `markovlib edition` reads; any other is refused
EDITION_OPTIONS = {
    "status": ("results", "data", "only"),
    "export": ("results", "data", "only"),
    "produce": ("results", "data", "only", "threads", "ensemble", "device", "workers"),
    "retrain": (
        *("results", "data", "only", "threads", "ensemble", "device", "workers"),
        *("against", "report"),
    ),
    "judge": ("data", "only", "report"),
}
EDITION_DEFAULTS = dict(threads=1, ensemble=8, device="cpu", workers=1)


def _edition_options(args) -> None:
    """An option the action does not read is refused in one line (``edition status
    --against x`` ignored it); the others get their defaults, ``--workers`` capped
    (:func:`~markovlib.runs.executors.capped_processes`)."""
    from .runs.executors import capped_processes

    takes = EDITION_OPTIONS[args.action]
    for name in dict.fromkeys(n for names in EDITION_OPTIONS.values() for n in names):
        if getattr(args, name) is not None and name not in takes:
            raise UsageError(
                f"argument --{name}: edition {args.action} does not use it (it takes "
                f"{', '.join('--' + n for n in takes)})"
            )
    for name, value in EDITION_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if "workers" in takes:
        args.workers = capped_processes(args.workers, "--workers", "markovlib edition")


def _group_prefixes(text: str) -> list[str]:
    """``--only``'s value: non-empty comma-separated prefixes of group names."""
    prefixes = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(prefixes):
        raise argparse.ArgumentTypeError(
            f"must be comma-separated group name prefixes, none empty; got {text!r}"
        )
    return prefixes


def _only_groups(groups: list, only: list[str] | None) -> list:
    """The groups whose names start with one of ``only`` (all without it); a prefix
    that matches no group is refused in one line with the nearest names."""
    if only is None:
        return groups
    names = [name for name, _ in groups]
    for prefix in only:
        if not any(name.startswith(prefix) for name in names):
            near = difflib.get_close_matches(prefix, names, n=5, cutoff=0.4)
            hint = (
                f"nearest: {', '.join(near)}"
                if near
                else "group names start with "
                + ", ".join(sorted({n.split("-")[0] + "-" for n in names}))
            )
            raise UsageError(
                f"argument --only: no group of the paper edition starts with "
                f"{prefix!r} ({hint}); `markovlib edition status` lists them"
            )
    return [g for g in groups if any(g[0].startswith(p) for p in only)]


def cmd_edition(args) -> int:
    from .runs.edition import status
    from .runs.experiments import paper_edition
    from .runs.export import export
    from .runs.shipped import ShippedData

    _edition_options(args)
    groups = _only_groups(paper_edition(), args.only)
    directory, results = _edition_paths(args)
    if args.action == "judge":  # the classes and verdicts of --data
        return _edition_judge(args, groups, directory)
    if args.action == "retrain":
        return _edition_retrain(args, groups, directory)
    if args.action == "export" and directory is None:
        raise UsageError(
            "argument --data: no data/paper folder with a manifest.json here or "
            "above; give --data DIR"
        )
    store = _edition_store(args, results)
    shipped = (
        ShippedData(directory)
        if directory is not None and (directory / "manifest.json").exists()
        else None
    )
    if args.action == "produce":
        try:
            _produce(args, groups, store, directory if shipped is not None else None)
        except KeyboardInterrupt:
            print(
                f"interrupted: {len(store)} runs stored in "
                f"{store.path}; re-run to go on",
                file=sys.stderr,
            )
            return 130
    elif args.action == "export":
        written = export(groups, store, directory)
        print(f"{len(written)} new file(s) in {directory}")
        shipped = ShippedData(directory)
    rows = status(groups, store, shipped)
    for row in rows:
        print(
            f"{row['group']:28s} {row['stored']:3d} / {row['runs']:3d} runs  "
            f"{row['seconds']:9.0f} s"
        )
    done, total = sum(r["stored"] for r in rows), sum(r["runs"] for r in rows)
    print(
        f"{done} of {total} group entries done (stored or shipped); "
        f"{sum(r['seconds'] for r in rows) / 3600:.2f} h of training in the local store"
    )
    return 0


def _device(name: str) -> str:
    """``--device``'s value (cuda asked for without a GPU is refused when parsing)."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def _produce(args, groups, store, shipped_dir, *, longest_first=False) -> int:
    """``edition produce`` (and retrain's training): one process, or ``--workers``."""
    from .runs.edition import produce, produce_parallel
    from .runs.shipped import ShippedData

    kwargs = dict(
        threads=args.threads,
        device=_device(args.device),
        ensemble_size=args.ensemble,
        longest_first=longest_first,
    )
    if args.workers == 1:
        shipped = ShippedData(shipped_dir) if shipped_dir is not None else None
        return produce(groups, store, shipped=shipped, **kwargs)
    return produce_parallel(
        groups, store.directory, workers=args.workers, shipped_dir=shipped_dir, **kwargs
    )


def _edition_judge(args, groups, directory) -> int:
    """``edition judge``: the classes and verdicts of --data into --report (JSON)."""
    from .companion import replication
    from .runs.shipped import ShippedData

    if directory is None or args.report is None:
        raise UsageError("edition judge needs --data (or data/paper here) and --report")
    judged = replication.judge(ShippedData(directory), groups)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(judged, indent=1, ensure_ascii=False))
    n, rows = len(judged["runs"]), len(judged["verdicts"])
    print(f"{n} runs and {rows} verdicts in {args.report}")
    return 0


def _edition_retrain(args, groups, directory) -> int:
    """``edition retrain``: every run into a new store, exported beside it, judged and
    compared."""
    import torch

    from .companion import replication
    from .runs.export import export
    from .runs.shipped import ShippedData
    from .runs.store import ResultStore

    if args.results is None:
        raise UsageError(
            "edition retrain needs --results DIR: a new folder for its store"
        )
    if args.against is None and directory is None:
        raise UsageError(
            "edition retrain: no shipped data here to compare with; give --against FILE"
        )
    device = _device(args.device)
    reference = (
        json.loads(Path(args.against).read_text())
        if args.against is not None
        else replication.judge(ShippedData(directory), groups)
    )
    results = Path(args.results)
    store = ResultStore(results)
    runs = sum(len(specs) for _, specs in groups)
    print(
        f"re-training {runs} runs of {len(groups)} groups on {device}, "
        f"{args.workers} process(es), ensembles of up to {args.ensemble}",
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        _produce(args, groups, store, None, longest_first=True)
    except (KeyboardInterrupt, BrokenProcessPool):
        print(f"interrupted: judging the {len(store)} runs stored", file=sys.stderr)
    seconds = time.perf_counter() - t0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the report is written whole
    export(groups, store, results / "data", log=lambda *a, **k: None)
    fresh = replication.judge(ShippedData(results / "data"), groups)
    result = replication.compare(fresh, reference)
    name = torch.cuda.get_device_name() if device == "cuda" else device
    path = replication.write_report(
        args.report or results / "retrain.json",
        result,
        device=name,
        seconds=round(seconds, 1),
        trained=f"{len(store)} of {runs} runs",
        workers=args.workers,
        ensemble=args.ensemble,
        fresh=fresh,
    )
    page = replication.report_markdown(
        result, device=name, seconds=seconds, trained=f"{len(store)} of {runs} runs"
    )
    print(page, end="")
    print(f"report: {path} and {path.with_suffix('.md')}")
    return 0


def add_import_parser(subs) -> None:
    sub = subs.add_parser(
        "import",
        help=HELP["import"],
    )
    sub.add_argument("file", metavar="FILE", type=_folder, help="unsaved-*.sqlite")
    _add_results(sub)
    sub.set_defaults(run=cmd_import)


def cmd_import(args) -> int:
    from .runs.store import ResultStore

    store = ResultStore(_results_dir(args))
    n = store.import_file(args.file)
    print(f"{n} run(s) of {args.file} imported into {store.path}")
    return 0


COMMANDS = {  # each command's adder of its options (and of its function)
    "train": add_train_parser,
    "sweep": add_sweep_parser,
    "book": add_book_parser,
    "rerun": add_rerun_parser,
    "verify": add_verify_parser,
    "scorecard": add_scorecard_parser,
    "edition": add_edition_parser,
    "import": add_import_parser,
}


def build_parser(argv: list[str] | None = None) -> Parser:
    """The parser of ``markovlib ARGV``: the command ARGV names with its options, the
    others by name and help line only (``markovlib --help`` imports no command's
    modules); without ``argv``, every command's options."""
    parser = Parser(
        prog="markovlib",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subs = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    given = next((a for a in argv or [] if not a.startswith("-")), None)
    for name, add in COMMANDS.items():
        if argv is None or name == given:
            add(subs)
        else:
            subs.add_parser(name, help=HELP[name])
    return parser


def _one_line(text) -> str:
    """A message on one line (some errors quote multi-line text, e.g. a schema)."""
    return " ".join(str(text).split())


def _check_arguments(parser: Parser, args) -> None:
    """Checks across arguments, after parsing: one line and exit status 2."""
    if getattr(args, "p", None) is not None and getattr(args, "q", None) is not None:
        ps = args.p if isinstance(args.p, list) else [args.p]
        qs = args.q if isinstance(args.q, list) else [args.q]
        if any(p + q == 0 for p in ps for q in qs):
            parser.error("argument --q: p + q must be > 0 (p = q = 0 never switches)")
    if getattr(args, "device", None) is not None:
        # a Ray task's device is on the cluster's nodes, not necessarily here
        _check_device(args.device, here=getattr(args, "executor", "local") != "ray")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    from .runs.shipped import ShippedDataError  # a command runs: its imports now
    from .runs.store import StoreError

    try:
        _check_arguments(parser, args)
        return args.run(args)
    except UsageError as e:
        print(f"markovlib {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except (
        StoreError,
        ShippedDataError,
    ) as e:  # a damaged or foreign file, a full disk: one line naming it
        print(f"markovlib {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return 1
    except OSError as e:  # a full disk, a read-only folder: which, and where
        where = f": {e.filename}" if e.filename else ""
        print(
            f"markovlib {args.command}: error: {e.strerror or e}{where}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print(
            f"markovlib {args.command}: interrupted; what was finished is kept, "
            "re-run the same command to go on",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
