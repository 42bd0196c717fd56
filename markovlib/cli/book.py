"""``markovlib book``: every chapter executed with a reader's (p, q), then the whole
book built as their own HTML edition."""

from __future__ import annotations

from pathlib import Path

from .environment import check_environment, workers_for_kernels
from .errors import FAILED, CommandFailed, UsageError
from .options import add_chain, add_chapter_seed, add_jobs, add_out, add_scale
from .output import chapter_parameters, claimed, out_folder
from .values import probability


def add(subs, help: str):
    """``book``'s options."""
    book = subs.add_parser("book", help=help)
    add_chain(book, probability)
    add_chapter_seed(book)
    add_scale(book, "the chapters' scale")
    add_out(book, "editions/p<p>-q<q>")
    book.add_argument(
        "--source",
        default=".",
        help="the clone of the book to build from (default: here or above)",
    )
    add_jobs(book, "chapters executed at once, each on one torch thread (default: 1)")
    book.add_argument(
        "--strict",
        action="store_true",
        help="fail on any Sphinx warning or broken reference (as make test does)",
    )
    return book


def run(args) -> int:
    """Check everything, then execute the chapters into ``--out`` and build them."""
    from ..companion.chapter_runner import stopping
    from ..companion.notebook import find_repository
    from ..runs.executors import capped_processes
    from ..runs.sweep import WORKERS_VAR

    root = find_repository(args.source)
    if root is None:
        raise UsageError(
            f"argument --source: no clone of the book at or above {args.source} "
            "(a folder with _toc.yml and book/)"
        )
    # by default in the clone, never in the working folder
    args.out = args.out or str(root / "editions" / f"p{args.p:g}-q{args.q:g}")
    out = out_folder(args, root, "editions/p<p>-q<q>")
    params = chapter_parameters(args, sorted((root / "book").glob("*.ipynb")))
    workers = check_environment(args, "book")
    args.jobs = capped_processes(args.jobs, "--jobs", "markovlib book")
    # every chapter's sweeps: --jobs × $MARKOVLIB_WORKERS training processes in all
    what, total = f"--jobs {args.jobs} × ${WORKERS_VAR}", args.jobs * workers
    total = capped_processes(total, what, "markovlib book")
    workers_for_kernels(max(1, total // args.jobs))  # the chapters read them
    with claimed(out, args), stopping():  # its chapters, kernels, workers end with it
        return build(args, root, out, params)


def build(args, root: Path, out: Path, params: dict[Path, dict]) -> int:
    """The sources copied to ``out``, each chapter executed with its ``params``."""
    from ..companion import publish

    publish.book_sources(root, out, f"edition p = {args.p:g}, q = {args.q:g}")
    failed = publish.execute_chapters(out, params, args.jobs)
    if failed:
        name, error = failed
        raise CommandFailed(
            FAILED, f"{name} failed ({error}); see {out / 'book' / name}"
        )
    for notebook in params:
        publish.built_as_executed(out / "book" / notebook.name)
    strict = ["-W", "-n", "--keep-going"] if args.strict else []
    built = publish.jupyter_book(out, strict)
    if built.returncode != 0:
        raise CommandFailed(
            FAILED,
            f"jupyter-book build of {out} failed (exit status {built.returncode}; "
            "its output is above)",
        )
    print(f"Your edition: file://{out / '_build' / 'html' / 'index.html'}")
    return 0
