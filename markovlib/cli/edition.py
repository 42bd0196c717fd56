"""``markovlib edition ACTION``: the paper edition's runs — status, produce (train
them), export (as shipped data), retrain (all anew, judged against the shipped
ones), judge."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from .errors import UsageError, stopped
from .options import add_data, add_results, data_dir, results_dir
from .retrain import judge, produce, retrain
from .values import folder, group_prefixes, positive_int

# the options each action of `markovlib edition` reads; any other is refused
OPTIONS = {
    "status": ("results", "data", "only"),
    "produce": ("results", "data", "only", "threads", "ensemble", "device", "workers"),
    "export": ("results", "data", "only"),
    "retrain": (
        *("results", "data", "only", "threads", "ensemble", "device", "workers"),
        *("against", "report"),
    ),
    "judge": ("data", "only", "report"),
}
DEFAULTS = dict(threads=1, ensemble=8, device="cpu", workers=1)


def add(subs, help: str):
    """``edition``'s action and options."""
    edition = subs.add_parser("edition", help=help)
    edition.add_argument(
        "action",
        choices=list(OPTIONS),
        help="retrain: every run into a new --results store (fresh, shipped or not), "
        "then judged against the shipped runs; judge: write the classes and verdicts "
        "of --data to --report",
    )
    add_results(edition, "results/paper-edition beside the data/ folder")
    add_data(edition, "shipped data folder to export to (default: data/paper here or "
             "above)")  # fmt: skip
    edition.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="torch threads per process (default 1)",
    )
    edition.add_argument(
        "--only",
        type=group_prefixes,
        default=None,
        help="comma-separated group name prefixes (e.g. fig5-k5-theory)",
    )
    edition.add_argument(
        "--ensemble",
        type=positive_int,
        default=None,
        help="runs trained together in one batched step (default 8)",
    )
    add_training_elsewhere(edition)
    return edition


def add_training_elsewhere(edition) -> None:
    """``edition``'s options of produce and retrain on other machines."""
    edition.add_argument(
        "--device",
        choices=["cpu", "cuda", "auto"],
        default=None,
        help="where produce and retrain train (default cpu; auto: cuda if any)",
    )
    edition.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="processes that train at once, each claiming its ensembles (default 1)",
    )
    edition.add_argument(
        "--against",
        type=folder,
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


def check_options(args) -> None:
    """An option the action does not read is refused; the others get their defaults."""
    from ..runs.executors import capped_processes

    takes = OPTIONS[args.action]
    for name in dict.fromkeys(n for names in OPTIONS.values() for n in names):
        if getattr(args, name) is not None and name not in takes:
            raise UsageError(
                f"argument --{name}: edition {args.action} does not use it (it takes "
                f"{', '.join('--' + n for n in takes)})"
            )
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if "workers" in takes:
        args.workers = capped_processes(args.workers, "--workers", "markovlib edition")


def only_groups(groups: list, only: list[str] | None) -> list:
    """The groups a prefix of ``only`` names (all without it); unknown ones refused."""
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


def paths(args) -> tuple[Path | None, Path | None]:
    """(data folder, result store folder): the options, else beside data/paper."""
    from ..companion.notebook import find_repository

    data = data_dir(args)
    if args.results is not None or os.environ.get("MARKOVLIB_RESULTS"):
        return data, results_dir(args)
    if data is not None and data.parent.name == "data":
        root = data.resolve().parent.parent
    else:
        root = find_repository()
    return data, None if root is None else root / "results" / "paper-edition"


def store_of(args, results: Path | None):
    """The edition's store: read-only (or empty) for status and export, else created."""
    from ..runs.store import ResultStore, read_store

    if results is not None and results.exists() and not results.is_dir():
        raise UsageError(
            f"argument --results: {results} is a file, not a folder; give the "
            "edition's result store folder"
        )
    if args.action != "produce":  # status and export only read it
        return read_store(results)
    if results is None:
        raise UsageError(
            "argument --results: no data/paper folder or clone of the book here or "
            "above to put results/paper-edition in; give --results DIR"
        )
    return ResultStore(results)


def run(args) -> int:
    """The action; then (status, produce, export) each group's progress."""
    from ..runs.experiments import paper_edition
    from ..runs.export import export
    from ..runs.shipped import ShippedData

    check_options(args)
    groups = only_groups(paper_edition(), args.only)
    directory, results = paths(args)
    if args.action == "judge":  # the classes and verdicts of --data
        return judge(args, groups, directory)
    if args.action == "retrain":
        return retrain(args, groups, directory)
    if args.action == "export" and directory is None:
        raise UsageError(
            "argument --data: no data/paper folder with a manifest.json here or "
            "above; give --data DIR"
        )
    store = store_of(args, results)
    has_manifest = directory is not None and (directory / "manifest.json").exists()
    shipped = ShippedData(directory) if has_manifest else None
    if args.action == "produce":
        try:
            produce(args, groups, store, directory if has_manifest else None)
        except KeyboardInterrupt as e:
            kept = f"{len(store)} runs stored in {store.path}; re-run to go on"
            raise stopped(e, kept) from None
    elif args.action == "export":
        written = export(groups, store, directory)
        print(f"{len(written)} new file(s) in {directory}")
        shipped = ShippedData(directory)
    show_status(groups, store, shipped)
    return 0


def show_status(groups, store, shipped) -> None:
    """Per group: runs stored or shipped of all, training seconds; the totals."""
    from ..runs.edition import status

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
