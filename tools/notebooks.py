"""Keep the book's notebooks in their stored form: no outputs, except the golden text of NBVAL cells.

    python tools/notebooks.py strip  [NB ...]   # drop outputs, execution counts and run metadata
    python tools/notebooks.py golden [NB ...]   # execute at smoke scale, keep only NBVAL_CHECK_OUTPUT text
    python tools/notebooks.py check  [NB ...]   # exit 1 if a notebook is not in stored form

Cells whose source starts with ``# NBVAL_CHECK_OUTPUT`` print deterministic theory numbers; their text
output is stored so that ``pytest --nbval-lax`` compares a fresh run against it. Everything else is
stored empty: the book build executes the chapters.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat

MARKER = "# NBVAL_CHECK_OUTPUT"
BOOK = Path(__file__).resolve().parents[1] / "book"


def is_golden(cell) -> bool:
    return cell.cell_type == "code" and cell.source.lstrip().startswith(MARKER)


def stored_form(nb, golden_outputs: dict[int, list] | None = None):
    """The notebook as it is stored: outputs only on golden cells (text streams), no run metadata."""
    nb.metadata.pop("papermill", None)
    nb.metadata.pop("widgets", None)
    for i, cell in enumerate(nb.cells):
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        keep = cell.outputs if golden_outputs is None else golden_outputs.get(i, [])
        cell.outputs = [o for o in keep if is_golden(cell) and o.output_type == "stream" and o.name == "stdout"]
        cell.execution_count = 1 if cell.outputs else None  # nbval skips reference cells that look unrun
    return nb


def golden(path: Path) -> None:
    import papermill as pm

    os.environ["MARKOVLIB_SCALE"] = "smoke"
    with tempfile.TemporaryDirectory() as tmp:
        out = pm.execute_notebook(str(path), str(Path(tmp) / path.name), cwd=str(path.parent), progress_bar=False)
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
        elif command == "strip":
            nbformat.write(stored_form(nbformat.read(path, as_version=4)), path)
        elif command == "check":
            nb = nbformat.read(path, as_version=4)
            before = nbformat.writes(nb)
            if nbformat.writes(stored_form(nb)) != before:
                bad.append(path)
            # under papermill, glue() in a golden cell adds a record output that nbval then reports as a difference
            for cell in nb.cells:
                if is_golden(cell) and "glue(" in cell.source:
                    print(f"{path}: an {MARKER} cell calls glue(); glue in the next cell instead")
                    bad.append(path)
        else:
            print(__doc__)
            return 2
    for path in bad:
        print(f"{path}: not in stored form (run: python tools/notebooks.py strip {path})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
