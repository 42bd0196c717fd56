"""The book published: chapters executed with a reader's parameters (one at a time or
in a pool), the Jupyter Book build of an edition, and one executed chapter built as a
page of the book (``markovlib book`` and ``markovlib rerun``)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .chapter_runner import quiet_kernel_manager, run_chapters
from .myst_markdown import chapter_labels, other_chapters_named

__all__ = [
    "book_sources",
    "jupyter_book",
    "execute_notebook",
    "execute_chapters",
    "built_as_executed",
    "build_page",
    "one_parameters_cell",
    "shown",
    "failure",
]

DOC_ROLE = re.compile(r"\{doc\}`([\w-]+)`")


def book_sources(root: Path, out: Path, edition: str, toc: dict | None = None) -> None:
    """All the build reads but the chapters, copied to ``out``; title + ``edition``."""
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
    config["execute"]["execute_notebooks"] = "off"  # papermill executes the chapters
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    if toc is not None:
        (out / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))


def jupyter_book(
    folder: Path, options: list[str], **run
) -> subprocess.CompletedProcess:
    """``jupyter-book build`` of ``folder`` into ``folder/_build`` (this Python's)."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    command = [str(jupyter_book), "build", str(folder), "--path-output", str(folder)]
    return subprocess.run([*command, *options], **run)


def execute_notebook(
    source: Path, target: Path, params: dict, warm: bool = False, **options
) -> None:
    """Chapter ``source`` executed into ``target`` with ``params``, its kernel quiet
    (``warm``: forked from this process's warm template, for a pool's worker)."""
    import papermill as pm  # optional: the book's dependencies

    pm.execute_notebook(
        str(source),
        str(target),
        cwd=str(source.parent),
        parameters=params,
        kernel_manager_class=quiet_kernel_manager(warm),
        **options,
    )


def shown(params: dict) -> str:
    """A chapter's parameters as the progress line shows them: "p=0.3, q=0.9"."""
    return ", ".join(f"{k}={v}" for k, v in params.items())


def failure(error) -> str:
    """A papermill execution error in one line: "Name: message"."""
    return f"{error.ename}: {' '.join(str(error.evalue).split())}"


def execute_one(source: Path, target: Path, given: dict, threads: str | None):
    """One chapter executed (in a pool's worker): its seconds, or why it failed."""
    import papermill as pm

    if threads is not None:  # the kernel inherits it: one torch thread per worker
        os.environ["OMP_NUM_THREADS"] = threads
    start = time.perf_counter()
    try:
        execute_notebook(source, target, given, warm=True, progress_bar=False)
    except pm.PapermillExecutionError as e:
        return None, failure(e)
    return time.perf_counter() - start, None


def built_as_executed(notebook: Path) -> None:
    """The build shows ``notebook`` as executed (its own ``execution_mode`` dropped)."""
    import nbformat

    executed = nbformat.read(str(notebook), as_version=4)
    if executed.metadata.get("mystnb", {}).pop("execution_mode", None) is not None:
        nbformat.write(executed, str(notebook))


def execute_chapters(out: Path, params: dict[Path, dict], jobs: int):
    """Every chapter executed into ``out/book``, ``jobs`` at once; the first failure."""
    threads = "1" if jobs > 1 else None
    tasks = {}
    for source, given in params.items():
        print(f"executing {source.name} with {shown(given)}", flush=True)
        target = out / "book" / source.name
        tasks[source.name] = (execute_one, (source, target, given, threads))
    return run_chapters(tasks, jobs, tag="executed")


def build_page(
    root: Path, stem: str, nb, out: Path, edition: str, titles: dict[str, str]
) -> Path:
    """Executed chapter ``nb`` as a page of the book, in ``out/html``; its path."""
    import nbformat

    site, html = out / ".page", out / "html"
    shutil.rmtree(site, ignore_errors=True)
    toc = {"format": "jb-book", "root": f"book/{stem}"}
    toc["chapters"] = [{"file": "book/bibliography"}]
    book_sources(root, site, edition, toc)
    nb.cells = one_parameters_cell(nb.cells)
    labels = chapter_labels(root / "book")
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = DOC_ROLE.sub(
                lambda m: (
                    m[0] if m[1] == "bibliography" else f"*{titles.get(m[1], m[1])}*"
                ),
                other_chapters_named(cell.source, stem, labels, titles),
            )
    nbformat.write(nb, str(site / "book" / f"{stem}.ipynb"))
    built = jupyter_book(site, ["--quiet"], capture_output=True, text=True)
    if built.returncode != 0:
        tail = (built.stderr or built.stdout).strip().splitlines()[-1:]
        raise RuntimeError(f"the page of {stem} did not build: {' '.join(tail)}")
    shutil.rmtree(html, ignore_errors=True)
    shutil.move(str(site / "_build" / "html"), str(html))
    shutil.rmtree(site, ignore_errors=True)
    return html / "book" / f"{stem}.html"


def _assigned(injected: str) -> dict[str, str]:
    """The values papermill's injected cell assigns, as source text, by name."""
    return {
        node.targets[0].id: ast.get_source_segment(injected, node.value)
        for node in ast.parse(injected).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }


def one_parameters_cell(cells: list) -> list:
    """The parameters cell with the injected values in place, the injected cell gone."""
    tagged = {tag: i for i, c in enumerate(cells) for tag in c.metadata.get("tags", [])}
    if "parameters" not in tagged or "injected-parameters" not in tagged:
        return cells
    given = _assigned(cells[tagged["injected-parameters"]].source)
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
