"""Keep the book's notebooks in their stored form: no outputs, except the golden text of
NBVAL cells.

    python tools/notebooks.py strip   [NB ...]  # drop outputs and run metadata
    python tools/notebooks.py golden  [NB ...]  # smoke run; keep the golden cells' text
    python tools/notebooks.py furnish [NB ...]  # Colab cell, "Re-run this page" box
    python tools/notebooks.py check   [NB ...]  # exit 1 unless stored and furnished

Cells tagged ``nbval-check-output`` (nbval's own tag, invisible on the page) print
deterministic theory numbers; their text output is stored so that ``pytest --nbval-lax``
compares a fresh run against it. Everything else is stored empty: the book build
executes the chapters.

Every chapter starts the same way (``furnish`` writes it, ``check`` insists on it): the
title cell, a Colab install cell (the first code cell, collapsed: ``hide-input``,
``hide-output``; it does nothing outside Colab), the ``parameters`` cell, and a cell
that shows the "Re-run this page" box with the parameters the page was built with.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat

GOLDEN_TAG = "nbval-check-output"  # nbval compares these cells' stored text output
BOOK = Path(__file__).resolve().parents[1] / "book"
INSTALL_TAG, RERUN_TAG = "colab-install", "rerun-box"


def ruff_formatted(source: str) -> str:
    """``source`` as ``ruff format`` writes a notebook cell (the project's settings, no
    final newline)."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", "cell.py", "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=BOOK.parent,
    )
    return out.stdout.rstrip("\n")


def install_cell_source() -> str:
    from markovlib.companion.notebook import colab_cell

    return ruff_formatted(colab_cell())


def rerun_cell_source(path: Path) -> str:
    from markovlib.companion.notebook import chapter_parameters

    names = list(chapter_parameters(path))
    args = ", ".join(f"{n}={n}" for n in names)
    return ruff_formatted(
        "from markovlib.companion.notebook import rerun_box\n\n"
        f'rerun_box("{path.stem}", {args})'
    )


def furnished(path: Path, nb):
    """``nb`` with the canonical install cell first among code cells and the rerun box
    after the parameters (pages without parameters, like Reproducibility, get no box).
    Fixed cell ids keep the stored file stable."""
    cells = [
        c
        for c in nb.cells
        if not {INSTALL_TAG, RERUN_TAG} & set(c.metadata.get("tags", []))
    ]
    params = next(
        (i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])),
        None,
    )
    if params is not None:
        rerun = nbformat.v4.new_code_cell(
            rerun_cell_source(path),
            metadata={
                "tags": ["remove-input", RERUN_TAG],
                "mystnb": {"markdown_format": "myst"},
            },
        )
        rerun["id"] = RERUN_TAG
        cells.insert(params + 1, rerun)
    install = nbformat.v4.new_code_cell(
        install_cell_source(),
        metadata={"tags": ["hide-input", "hide-output", INSTALL_TAG]},
    )
    install["id"] = INSTALL_TAG
    cells.insert(next(i for i, c in enumerate(cells) if c.cell_type == "code"), install)
    nb.cells = cells
    return nb


def is_golden(cell) -> bool:
    return cell.cell_type == "code" and GOLDEN_TAG in cell.metadata.get("tags", [])


def stored_form(nb, golden_outputs: dict[int, list] | None = None):
    """The notebook as it is stored: outputs only on golden cells (text streams), no run
    metadata."""
    nb.metadata.pop("papermill", None)
    nb.metadata.pop("widgets", None)
    for i, cell in enumerate(nb.cells):
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        keep = cell.outputs if golden_outputs is None else golden_outputs.get(i, [])
        cell.outputs = [
            o
            for o in keep
            if is_golden(cell) and o.output_type == "stream" and o.name == "stdout"
        ]
        cell.execution_count = (
            1 if cell.outputs else None
        )  # nbval skips reference cells that look unrun
    return nb


def golden(path: Path) -> None:
    import papermill as pm

    os.environ["MARKOVLIB_SCALE"] = "smoke"
    with tempfile.TemporaryDirectory() as tmp:
        out = pm.execute_notebook(
            str(path),
            str(Path(tmp) / path.name),
            cwd=str(path.parent),
            progress_bar=False,
        )
    executed = {i: c.get("outputs", []) for i, c in enumerate(out.cells)}
    nb = nbformat.read(path, as_version=4)
    nbformat.write(stored_form(nb, executed), path)


def main(argv: list[str]) -> int:
    command, *names = argv or ["check"]
    paths = [Path(n) for n in names] or sorted(BOOK.glob("*.ipynb"))
    bad = []
    for path in paths:
        if command == "golden":
            golden(path)
        elif command == "furnish":
            nb = nbformat.read(path, as_version=4)
            nbformat.write(stored_form(furnished(path, nb)), path)
        elif command == "strip":
            nbformat.write(stored_form(nbformat.read(path, as_version=4)), path)
        elif command == "check":
            nb = nbformat.read(path, as_version=4)
            before = nbformat.writes(nb)
            if nbformat.writes(stored_form(nb)) != before:
                bad.append(path)
            elif (
                nbformat.writes(
                    stored_form(furnished(path, nbformat.reads(before, as_version=4)))
                )
                != before
            ):
                print(
                    f"{path}: the install cell or the rerun box is missing or stale "
                    f"(run: python tools/notebooks.py furnish {path})"
                )
                bad.append(path)
            if any("myst_nb" in c.source for c in nb.cells if c.cell_type == "code"):
                print(
                    f"{path}: imports myst_nb, which Colab lacks; use "
                    "markovlib.companion.notebook.glue"
                )
                bad.append(path)
            # under papermill, glue() in a golden cell adds a record output that nbval
            # then reports as a difference
            for cell in nb.cells:
                if is_golden(cell) and "glue(" in cell.source:
                    print(
                        f"{path}: a {GOLDEN_TAG} cell calls glue(); glue in the "
                        "next cell instead"
                    )
                    bad.append(path)
        else:
            print(__doc__)
            return 2
    for path in bad:
        print(
            f"{path}: not in stored form (run: python tools/notebooks.py strip {path})"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
