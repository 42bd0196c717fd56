"""``markovlib import FILE``: the runs of a side file (``unsaved-*.sqlite``, written
where a busy or failing store could not take them) taken into the result store."""

from __future__ import annotations

from .options import add_results, results_dir
from .values import folder


def add(subs, help: str):
    """``import``'s options."""
    sub = subs.add_parser("import", help=help)
    sub.add_argument("file", metavar="FILE", type=folder, help="unsaved-*.sqlite")
    add_results(sub)
    return sub


def run(args) -> int:
    """Import; how many runs, into which store."""
    from ..runs.store import ResultStore

    store = ResultStore(results_dir(args))
    n = store.import_file(args.file)
    print(f"{n} run(s) of {args.file} imported into {store.path}")
    return 0
