"""``markovlib rerun CHAPTER``: one chapter executed with a reader's parameters into a
notebook and an HTML page that read like the book's."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import time
from pathlib import Path

from .environment import check_environment, workers_for_kernels
from .errors import FAILED, CommandFailed, UsageError, stopped
from .options import add_chain, add_chapter_seed, add_out, add_scale
from .output import chapter_parameters, claimed, out_folder
from .values import probability

VERBOSE = {"log_output": True, "progress_bar": True}  # papermill's own log


def add(subs, help: str):
    """``rerun``'s options (its description lists the chapters and their parameters)."""
    from ..companion.chapter_rules import CHAPTER_RULES

    chapters = ", ".join(f"{c} ({' '.join(CHAPTER_RULES[c])})" for c in CHAPTER_RULES)
    rerun = subs.add_parser(
        "rerun",
        help=help,
        description="Re-run one chapter with your parameters. Chapters (and the "
        f"parameters each takes): {chapters}.",
    )
    rerun.add_argument(
        "chapter", metavar="CHAPTER", help="one of: " + ", ".join(CHAPTER_RULES)
    )
    helps = ("P(1|0) (binary chapters)", "P(0|1) (binary chapters)")
    add_chain(rerun, probability, required=False, helps=helps)
    rerun.add_argument(
        "--set",
        dest="params",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="any other parameter of the chapter, e.g. --set k=4 (multi_state)",
    )
    add_chapter_seed(rerun)
    add_scale(rerun, "the chapter's scale")
    add_out(rerun, "reruns/<chapter>-<parameters>")
    rerun.add_argument(
        "--verbose",
        action="store_true",
        help="papermill's own log: each cell as it runs, with its output",
    )
    return rerun


def source_of(chapter: str) -> tuple[Path, Path]:
    """The clone here and its ``book/<chapter>.ipynb``."""
    from ..companion.notebook import CHAPTER_RULES, find_repository

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


def parameters(args, source: Path) -> dict:
    """--p, --q and each --set NAME=VALUE (typed as the chapter's default), checked."""
    from ..companion.notebook import CHAPTER_RULES, chapter_parameters

    defaults, rules = chapter_parameters(source), CHAPTER_RULES[source.stem]
    given = {}
    for name in ("p", "q"):
        if getattr(args, name) is not None:
            if name not in defaults:
                raise UsageError(
                    f"argument --{name}: {source.stem} has no parameter {name} (it "
                    f"takes {', '.join(rules)})"
                )
            given[name] = getattr(args, name)
    for item in args.params:
        name, eq, text = item.partition("=")
        name = name.strip()
        if not eq or name not in rules:
            raise UsageError(
                f"argument --set: {item!r} is not NAME=VALUE with NAME one of "
                f"{', '.join(rules)} (chapter {source.stem})"
            )
        if name in ("seed", "scale"):
            raise UsageError(f"argument --set: give {name} as --{name}")
        if name in given:
            option = name in ("p", "q") and getattr(args, name) is not None
            before = f"--{name} {given[name]:g}" if option else "another --set"
            raise UsageError(
                f"argument --set: {item!r} conflicts with {before}; give {name} once"
            )
        given[name] = typed(name, text.strip(), defaults.get(name), rules[name])
    return given


def typed(name: str, text: str, default, rule):
    """``text`` as the type of ``name``'s default value (None: as its ``rule`` says)."""
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


def check(chapter: str, params: dict) -> None:
    """The chapter's own check of ``params`` (with its defaults), in one line."""
    from ..companion.notebook import check_chapter_parameters

    try:
        check_chapter_parameters(chapter, **params)
    except ValueError as e:
        name = str(e).split()[0]
        where = name if name in ("p", "q", "seed") else "set"
        raise UsageError(f"argument --{where}: {e} (chapter {chapter})") from None


def run(args) -> int:
    """Check everything, then re-run one chapter into ``--out``."""
    from ..companion.chapter_runner import stopping
    from ..companion.notebook import chapter_parameters as defaults_of

    root, source = source_of(args.chapter)
    given = parameters(args, source)
    shown = "-".join(
        f"{k}{v:g}" if isinstance(v, float) else f"{k}{v}" for k, v in given.items()
    )
    args.out = args.out or str(
        root / "reruns" / "-".join(filter(None, (args.chapter, shown)))
    )
    out = out_folder(args, root, "reruns/<chapter>-<parameters>")
    params = {**chapter_parameters(args, [source])[source], **given}
    check(source.stem, {**defaults_of(source), **params})
    # the chapter's sweeps share their ensembles among the machine's cores
    workers = check_environment(args, "rerun")
    workers_for_kernels(workers, min(4, os.cpu_count() or 1))
    with claimed(out, args):
        try:
            with stopping():  # its kernel and the kernel's workers end with it
                return execute(root, source, out, params, args.verbose)
        except KeyboardInterrupt as e:  # Stopped, or Ctrl-C before the kernel started
            kept = cut_off(out / source.name)
            kept = f"the runs that finished are kept in the result store{kept}"
            raise stopped(e, kept) from None


def execute(root: Path, source: Path, out: Path, params: dict, verbose=False) -> int:
    """``source`` executed with ``params`` into ``out``, its progress shown; page."""
    import nbformat  # optional: the book's dependencies (nbformat, papermill)
    import papermill as pm

    from ..companion import publish
    from ..companion.chapter_runner import ChapterProgress, failure_lines

    target, shown = out / source.name, publish.shown(params)
    print(f"executing {source.name} with {shown}", flush=True)
    cells = len(nbformat.read(str(source), as_version=4).cells) + 1  # + injected
    progress = ChapterProgress(source.stem, cells)
    options = progress.options() if not verbose else VERBOSE
    start = time.perf_counter()
    try:
        with papermill_log(verbose):
            publish.execute_notebook(source, target, params, **options)
    except pm.PapermillExecutionError as e:
        if e.ename == "KeyboardInterrupt":  # Ctrl-C reached the kernel first
            raise KeyboardInterrupt from None
        progress.close()
        print("\n".join(failure_lines(e)), file=sys.stderr)
        raise CommandFailed(
            FAILED,
            f"{source.name} failed ({publish.failure(e)}); the partial notebook: "
            f"{target}",
        ) from None
    finally:
        progress.close()
    partial(target).unlink(missing_ok=True)  # completed: no stale partial beside it
    return page_after(root, source, out, shown, time.perf_counter() - start)


@contextlib.contextmanager
def papermill_log(verbose: bool):
    """papermill's own log on stderr when ``verbose``; else papermill says nothing."""
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


def page_after(root: Path, source: Path, out: Path, shown: str, seconds: float) -> int:
    """After the chapter ran: its verdicts, then its page built; the paths."""
    import nbformat

    from ..companion.chapter_runner import chapter_report
    from ..companion.myst_markdown import chapter_titles, render_roles
    from ..companion.publish import build_page

    target = out / source.name
    executed = nbformat.read(str(target), as_version=4)
    tty = sys.stdout.isatty()
    width = max(60, shutil.get_terminal_size().columns - 1) if tty else 200
    report = chapter_report(executed, width)
    print(f"{source.stem}: ran in {seconds:.0f} s", *report, sep="\n", flush=True)
    titles = chapter_titles(source.parent)
    nbformat.write(render_roles(executed, titles), str(target))  # for Jupyter
    try:
        page = build_page(
            root, source.stem, executed, out, f"re-run with {shown}", titles
        )
    except RuntimeError as e:  # the notebook stands; say why its page does not
        raise CommandFailed(FAILED, f"{e}; the notebook: {target}") from None
    print(f"notebook: {target}\nHTML page: {page}")
    return 0


def cut_off(target: Path) -> str:
    """A cut-off re-run's notebook set aside (never a partial page); where, in words."""
    if not target.exists():
        return ""
    aside = partial(target)
    target.replace(aside)
    return f", the half-executed notebook in {aside}"


def partial(target: Path) -> Path:
    """Where a cut-off re-run sets its half-executed notebook ``target`` aside."""
    return target.with_suffix(".interrupted.ipynb")
