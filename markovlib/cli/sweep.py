"""``markovlib sweep``: a (p, q) grid × tying × seeds trained into a result store, here
or on a Ray cluster; a summary per cell."""

from __future__ import annotations

import importlib.util
import sys

from .environment import check_environment, settings
from .errors import FAILED, CommandFailed, UsageError, stopped
from .options import (
    add_chain,
    add_ray,
    add_results,
    add_training,
    ray_only,
    results_dir,
)
from .values import nonnegative_number, positive_int, probabilities, seed

PLAN_BYTES_PER_RUN = 4096  # memory to plan and report one run of a sweep (generous)


def add(subs, help: str):
    """``sweep``'s options."""
    sub = subs.add_parser("sweep", help=help)
    add_chain(sub, probabilities)
    sub.add_argument("--tied", choices=["both", "tied", "untied"], default="both")
    sub.add_argument(
        "--seeds", type=positive_int, default=1, help="number of seeds per cell"
    )
    sub.add_argument("--seed", type=seed, default=0, help="first seed")
    add_results(sub)
    sub.add_argument(
        "--ensemble-size",
        type=positive_int,
        default=8,
        help="models trained per batched step",
    )
    add_ray(sub, "local: here, one ensemble after the other; ray: one Ray task per "
            "ensemble")  # fmt: skip
    sub.add_argument(
        "--cpus-per-task",
        type=positive_int,
        default=None,
        help="CPUs (and torch threads) per Ray task (default 1)",
    )
    sub.add_argument(
        "--gpus-per-task",
        type=nonnegative_number,
        default=None,
        help="GPUs per Ray task, fractions allowed: 0.125 puts 8 ensembles on "
        "one GPU (default 0)",
    )
    add_training(sub)
    return sub


def check_seed_count(args, cells: int) -> None:
    """The sweep's seeds stay below 2**63 and its runs fit in this machine's memory."""
    from ..runs.executors import memory_available
    from ..runs.store import SEED_LIMIT

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


def specs_of(args) -> list:
    """The sweep's runs; refused where the seeds or a Ray option do not fit."""
    from ..runs.spec import grid

    train_kwargs, config_kwargs = settings(args)
    tied = {"both": (True, False), "tied": (True,), "untied": (False,)}[args.tied]
    check_seed_count(args, len(args.p) * len(args.q) * len(tied))
    ray_only(args, "--address", "--cpus-per-task", "--gpus-per-task")
    return grid(
        args.p,
        args.q,
        tied=tied,
        seeds=range(args.seed, args.seed + args.seeds),
        preset=args.preset,
        config_kwargs=config_kwargs,
        **train_kwargs,
    )


def unreachable(e) -> UsageError:
    """A Ray cluster that does not answer, as ``--address``'s one line."""
    hint = f"; {e.hint}" if e.hint else ""
    return UsageError(
        f"argument --address: cannot reach a Ray cluster at {e.address}{hint}"
    )


def usable_executor(args) -> None:
    """Ray not installed, or an address no cluster answers: refused before the store."""
    from ..runs.executors import ClusterUnreachable, probe_address

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
            raise unreachable(e) from None


def sweep_into(store, specs: list, args):
    """``specs`` swept into ``store``; a cluster that cannot run them: one line."""
    from ..runs.executors import ClusterUnreachable, InfeasibleRequest
    from ..runs.sweep import sweep

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
        raise unreachable(e) from None


def run(args) -> int:
    """Sweep; a summary per tying and chain, and where the runs are."""
    from ..runs.executors import WorkerLost
    from ..runs.store import ResultStore

    specs = specs_of(args)
    args.workers = check_environment(args, "sweep")
    usable_executor(args)
    store = ResultStore(results_dir(args))
    before = len(store)
    try:
        frame = sweep_into(store, specs, args)
    except (KeyboardInterrupt, WorkerLost) as e:  # one line, with what is kept
        kept = f"{len(store)} runs stored in {store.path} ({len(store) - before} new)"
        if isinstance(e, WorkerLost):  # a worker killed (out of memory?)
            raise CommandFailed(FAILED, f"{e}; {kept}") from None
        raise stopped(
            e, f"{kept}; re-run the same command to finish the rest"
        ) from None
    print(summary(frame).round(4).to_string())
    diverged = int(frame["excess"].isna().sum())
    if diverged:
        print(f"{diverged} of {len(frame)} runs diverged (excluded from the means)")
    print(f"{len(frame)} runs in {store.path} ({len(store) - before} new)")
    return 0


def summary(frame):
    """Per tying and chain: mean and largest loss − H_rate, finite and diverged runs."""
    grouped = frame.groupby(["config.tied", "chain.p", "chain.q"])["excess"]
    table = grouped.agg(["mean", "max", "count"]).rename(columns={"count": "finite"})
    table["diverged"] = grouped.size() - table["finite"]
    return table
