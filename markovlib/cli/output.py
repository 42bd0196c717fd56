"""The folder ``book`` and ``rerun`` write: checked (new, empty or an earlier edition,
outside the sources, writable, with room), claimed (a lock and a marker), and the
chapters' parameters checked, all before any chapter runs."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from pathlib import Path

from .errors import UsageError

# folders of a clone that `book --out` never writes into: sources and shipped data
PROTECTED = (  # the repository's tracked folders
    *("book", "_static", "tools", "data", "markovlib", "tests", "binder", ".git"),
    *(".github", ".ci", "benchmarks", ".venv"),
)
EDITION_MARKER = ".markovlib-edition"  # in every folder `markovlib book` writes
MIN_FREE_BYTES = 200 * 2**20  # a chapter's notebook, page and runs: well under this


def out_folder(args, root: Path, default: str) -> Path:
    """``--out``, refused unless new, empty or an edition, and outside the sources."""
    from ..runs.store import permitted

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


def chapter_parameters(args, sources: list[Path]) -> dict[Path, dict]:
    """Per notebook, the parameters it is given, refused where the chapter would."""
    from ..companion.notebook import (
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


def check_room(out: Path) -> None:
    """The result store takes a run now, and ``out``'s and its disks have room."""
    from ..runs.store import ResultStore, default_results_dir

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


def claim(out: Path) -> int:
    """``out`` created, marked and locked (until this process ends); the marker's fd."""
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


@contextlib.contextmanager
def claimed(out: Path, args):
    """``out`` checked for room, claimed, marked; ``--scale`` wins over the variable."""
    from ..presets import ENV_VAR as scale_var

    check_room(out)
    fd = claim(out)
    saved = os.environ.pop(scale_var, None) if args.scale else None
    try:
        text = json.dumps(dict(p=args.p, q=args.q, seed=args.seed, scale=args.scale))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"markovlib edition {text}\n".encode(), 0)
        yield
    except OSError as e:  # a full disk: say where (os.pwrite names no file)
        raise OSError(e.errno, e.strerror, e.filename or str(out)) from None
    finally:
        if saved is not None:
            os.environ[scale_var] = saved
        os.close(fd)
