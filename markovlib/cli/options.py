"""Every option that more than one command takes, declared once, and the readers of
their values (the scale, the result store's folder, the shipped data's folder)."""

from __future__ import annotations

from pathlib import Path

from .errors import UsageError
from .values import chapter_seed, folder, learning_rate, positive_int, steps

# markovlib.presets.PRESETS's names, written out: `--help` imports no torch (a test
# checks they are the same)
SCALES = ("smoke", "cpu", "paper")
RESULTS_DEFAULT = (
    "~/.cache/markovlib/results"  # default_results_dir() without a variable
)
RAY_ADDRESS_HELP = (
    "Ray cluster address host:port (default: $RAY_ADDRESS, else a new Ray instance on "
    "this machine)"
)


def add_chain(sub, values, *, required: bool = True, helps=(None, None)) -> None:
    """--p and --q of the binary chain (``values``: one number or a list)."""
    sub.add_argument("--p", type=values, required=required, help=helps[0])
    sub.add_argument("--q", type=values, required=required, help=helps[1])


def add_scale(sub, what: str) -> None:
    """``--scale``: the sizes ``what`` are taken at."""
    sub.add_argument(
        "--scale",
        choices=["auto", *SCALES],
        default=None,
        help=f"{what} (default: $MARKOVLIB_SCALE, else auto); given, it wins over "
        "$MARKOVLIB_SCALE",
    )


def add_training(sub) -> None:
    """The sizes, model, device and precision of ``train`` and ``sweep``."""
    add_scale(sub, "sizes for the options below that are not given")
    sub.add_argument("--steps", type=steps)
    sub.add_argument("--batch-size", type=positive_int)
    sub.add_argument("--seq-len", type=positive_int)
    sub.add_argument("--d-model", type=positive_int)
    sub.add_argument("--layers", type=positive_int, default=1)
    sub.add_argument("--lr", type=learning_rate)
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


def add_results(sub, default: str = RESULTS_DEFAULT) -> None:
    """``--results DIR``: the result store's folder (see :func:`results_dir`)."""
    sub.add_argument(
        "--results",
        type=folder,
        default=None,
        help="folder of the result store (default: $MARKOVLIB_RESULTS, else "
        f"{default})",
    )


def add_data(sub, help: str) -> None:
    """``--data DIR``: the shipped data folder (see :func:`data_dir`)."""
    sub.add_argument("--data", type=folder, default=None, help=help)


def add_ray(sub, executor_help: str) -> None:
    """``--executor local|ray`` and ``--address`` (only with ray: :func:`ray_only`)."""
    sub.add_argument(
        "--executor", choices=["local", "ray"], default="local", help=executor_help
    )
    sub.add_argument("--address", default=None, help=RAY_ADDRESS_HELP)


def add_out(sub, default: str) -> None:
    """``--out DIR``: the folder a chapter or an edition is written to."""
    sub.add_argument(
        "--out",
        type=folder,
        default=None,
        help=f"output directory (default: {default} in the clone)",
    )


def add_chapter_seed(sub) -> None:
    """``--seed`` of ``book`` and ``rerun``: the chapters' seed, by their own rule."""
    sub.add_argument("--seed", type=chapter_seed, default=0)


def add_jobs(sub, help: str) -> None:
    """``--jobs N``: processes at once."""
    sub.add_argument("--jobs", type=positive_int, default=1, help=help)


def ray_only(args, *options: str) -> None:
    """Each of ``options`` given without ``--executor ray`` is refused in one line."""
    for option in options:
        value = getattr(args, option.lstrip("-").replace("-", "_"))
        if value is not None and args.executor != "ray":
            raise UsageError(f"argument {option}: needs --executor ray")


def results_dir(args) -> Path:
    """``--results``, else ``$MARKOVLIB_RESULTS``, else the user's cache."""
    from ..runs.store import default_results_dir

    return Path(args.results) if args.results is not None else default_results_dir()


def data_dir(args) -> Path | None:
    """``--data``, else ``$MARKOVLIB_DATA``, else data/paper here or above, or None."""
    from ..runs.shipped import default_data_dir

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


__all__ = [
    "SCALES", "add_chain", "add_scale", "add_training", "add_results", "add_data",
    "add_ray", "add_out", "add_chapter_seed", "add_jobs", "ray_only", "results_dir",
    "data_dir",
]  # fmt: skip
