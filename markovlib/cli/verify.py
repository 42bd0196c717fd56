"""``markovlib verify``: the shipped run data checked (manifest, hashes, keys, each
run's fields) and a random sample re-trained bit for bit."""

from __future__ import annotations

from .errors import FAILED, CommandFailed, UsageError, one_line
from .options import add_data, add_jobs, add_ray, data_dir, ray_only
from .values import nonnegative_int, positive_float, sample


def add(subs, help: str):
    """``verify``'s options."""
    verify = subs.add_parser("verify", help=help)
    add_data(verify, "shipped data folder (default: data/paper here or above)")
    verify.add_argument(
        "--sample",
        type=sample,
        default=2,
        help="runs to re-train (default 2; all: every shipped run)",
    )
    add_ray(verify, "where the re-training runs: here, or one Ray task per ensemble")
    add_sample(verify)
    verify.add_argument(
        "--complete",
        action="store_true",
        help="fail unless every run of the paper edition is shipped",
    )
    add_jobs(verify, "processes for the checks without training and a drawn derived "
             "value's recomputing, one torch thread each (default 1)")  # fmt: skip
    verify.add_argument(
        "--retrain-only",
        action="store_true",
        help="skip the run-by-run checks without training (a verify just ran them); "
        "the manifest and every hash are still checked",
    )
    return verify


def add_sample(verify) -> None:
    """``verify``'s options that choose the runs to re-train."""
    verify.add_argument(
        "--seed",
        type=nonnegative_int,
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
        type=positive_float,
        default=None,
        help="draw only among runs that took at most this long to train",
    )
    verify.add_argument(
        "--exact-only",
        action="store_true",
        help="draw only among runs this CPU can reproduce bit for bit",
    )


def check(args, directory) -> None:
    """The options ``verify`` refuses, in one line, before any work."""
    from ..runs.shipped import no_data_message

    if directory is None or not directory.is_dir():
        raise UsageError(
            "argument --data: "
            + (
                f"{no_data_message()}; or give --data DIR"
                if directory is None
                else f"no shipped data folder {directory}"
            )
        )
    ray_only(args, "--address")
    if args.retrain_only and args.sample == 0:
        raise UsageError(
            "argument --retrain-only: with --sample 0 it checks no run and re-trains "
            "none; drop one of them"
        )


def run(args) -> int:
    """Verify; the last line says what was checked and how."""
    from ..runs.executors import ClusterUnreachable, capped_processes
    from ..runs.shipped import ShippedDataError
    from ..runs.sweep import sigterm_as_interrupt
    from ..runs.verify import VerificationError, verify

    directory = data_dir(args)
    check(args, directory)
    args.jobs = capped_processes(args.jobs, "--jobs", "markovlib verify")
    recomputed, narrowed = [], []

    def log(line: str) -> None:  # counts derived values and runs judged to step 50
        recomputed.extend(["x"] if line.startswith("derived value ") else [])
        narrowed.extend(["x"] if " to its checkpoint (after it" in line else [])
        print(line, flush=True)

    try:
        with sigterm_as_interrupt():  # SIGTERM ends it as Ctrl-C does: one line
            n = verify(directory, **choices(args), log=log)
    except (ShippedDataError, VerificationError) as e:
        raise CommandFailed(FAILED, one_line(e), label="FAILED") from None
    except ClusterUnreachable as e:
        raise UsageError(f"argument --address: {e}") from None
    except ModuleNotFoundError as e:
        if e.name != "ray":
            raise
        raise UsageError(
            "argument --executor: ray is not installed (pip install 'markovlib[ray]')"
        ) from None
    print(f"verified: {verified(args, n, len(recomputed), len(narrowed))}")
    return 0


def choices(args) -> dict:
    """The options of ``verify`` as :func:`markovlib.runs.verify.verify` takes them."""
    return dict(
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
    )


def verified(args, n: int, derived: int = 0, narrowed: int = 0) -> str:
    """What a verify that passed checked, and how (its last line; ``narrowed``: runs
    of a full re-train judged to step 50 only)."""
    done = [
        "the manifest, every file's SHA-256 and spec key, every derived value's key"
    ]
    if not args.retrain_only:
        done.append(
            "every run's stored fields checked against each other without training"
        )
    if n:
        how = "to step 50" if args.quick else "to the end"
        if narrowed and not args.quick:
            how += f"; {narrowed} of them to step 50 only, as their lines say"
        done.append(f"{n} of {n} re-trained runs reproduced ({how})")
    if derived:
        done.append(f"{derived} derived value{'s' if derived > 1 else ''} recomputed")
    if not n:
        done.append("no run re-trained (--sample 0)")
    return "; ".join(done)
