"""Every chapter declares its parameters and structure, and is stored clean.

(Each chapter is executed once per ``make test``, with a reader's chain at smoke scale,
by ``make book-strict``: ``tests/edition`` and ``tests/browser`` read that edition.)
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
CHAPTERS = [
    nb for nb in NOTEBOOKS if nb.stem != "reproducibility"
]  # the pages with a chain to change
# the parameters a reader changes, per chapter
READER_CHAINS = {
    "framework": dict(p=0.3, q=0.4),
    "global_minimum": dict(p=0.6, q=0.7),
    "bad_local_minima": dict(p=0.3, q=0.4),
    "saddles": dict(p=0.2, q=0.6),
    "trapped": dict(p=0.6, q=0.7),
    "multi_state": dict(k=4, p=0.9),
    "depth": dict(p=0.3, q=0.4),
    "initialisation": dict(p=0.3, q=0.4),
    "ccmc": dict(k=6, prompt_len=12),
    "incontext": dict(k=3, alpha=0.5),
}


def test_every_chapter_has_a_reader_chain():
    assert {c.stem for c in CHAPTERS} == set(READER_CHAINS)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_structure(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "colab-install" in code[0].metadata.get("tags", []), (
        "first code cell: the Colab install cell"
    )
    first = code[1]
    assert "parameters" in first.metadata.get("tags", []), (
        "second code cell must be tagged 'parameters'"
    )
    assert "rerun-box" in code[2].metadata.get("tags", []), (
        "third code cell: the 'Re-run this page' box"
    )
    values = {}
    for node in ast.parse(
        first.source
    ).body:  # plain or annotated assignments of literals only
        assert isinstance(node, (ast.Assign, ast.AnnAssign)), ast.dump(node)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        values.update({t.id: ast.literal_eval(node.value) for t in targets})
    assert {"seed", "scale"} <= set(values) and set(READER_CHAINS[path.stem]) <= set(
        values
    )
    assert values["scale"] == "auto"
    assert "assert " in code[-1].source, "the last cell asserts the chapter's claims"
    assert nb.metadata["kernelspec"]["name"] == "python3"
    # the reader sees prose, short code and figures: plotting code and the code that
    # only turns measured numbers into the prose's verdicts (glue("..._verdict",
    # Markdown(...)), nothing printed) are collapsed
    figures = [c for c in code if "figure" in c.metadata.get("mystnb", {})]
    verdicts = [
        c
        for c in code
        if re.search(r'glue\("\w+_verdict",\s*Markdown\(', c.source)
        and "print(" not in c.source
    ]
    assert figures, "a chapter shows at least one named figure"
    for cell in figures + verdicts:
        assert "hide-input" in cell.metadata.get("tags", []), (
            f"collapse this cell (hide-input):\n{cell.source[:200]}"
        )
    # the edition a page was built at: glued (scale_name, seq_len, steps, n_runs) and,
    # where it trains, shown on top
    assert any("glue_scale(S, " in c.source for c in code), (
        "glue the edition with markovlib.companion.notebook.glue_scale"
    )
    if any("sweep_results(" in c.source for c in code):
        assert any(
            f'resolve(scale, chapter="{path.stem}")' in c.source for c in code
        ), "take the chapter's settings"
        intro = nb.cells[0].source
        assert (
            all(
                f"{{glue:}}`{name}`" in intro
                for name in ("scale_name", "seq_len", "steps")
            )
            and "{glue:text}`n_runs`" in intro
        ), "show the edition under the title"


def test_stored_without_outputs(capsys):
    code = _notebooks_tool().main(["check", *map(str, NOTEBOOKS)])  # issue 51: here
    assert code == 0, capsys.readouterr().out


def _notebooks_tool():
    """tools/notebooks.py as a module (called in this process: one import of
    markovlib instead of one per call)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "notebooks_tool", ROOT / "tools" / "notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_check_rejects_outputs_and_glue_in_golden_cells(tmp_path, capsys):
    tool = _notebooks_tool()
    path = tmp_path / "chapter.ipynb"

    def furnished(*cells) -> nbformat.NotebookNode:
        nb = nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_markdown_cell("# A chapter"),
                nbformat.v4.new_code_cell(
                    "seed = 0\nscale = 'auto'", metadata={"tags": ["parameters"]}
                ),
                *cells,
            ]
        )
        nbformat.write(nb, path)
        assert tool.main(["furnish", str(path)]) == 0
        return nbformat.read(path, as_version=4)

    def check(nb) -> subprocess.CompletedProcess:
        nbformat.write(nb, path)
        capsys.readouterr()
        code = tool.main(["check", str(path)])
        return subprocess.CompletedProcess([], code, capsys.readouterr().out, "")

    clean = furnished(
        nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["nbval-check-output"]})
    )
    assert check(clean).returncode == 0
    tags = [c.metadata.get("tags", []) for c in clean.cells if c.cell_type == "code"]
    assert (
        "colab-install" in tags[0]
        and "parameters" in tags[1]
        and "rerun-box" in tags[2]
    )
    with_output = furnished(nbformat.v4.new_code_cell("x = 1"))
    with_output.cells[-1].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="1\n")
    ]
    assert check(with_output).returncode == 1
    glued = furnished(
        nbformat.v4.new_code_cell(
            "glue('a', 1, display=False)", metadata={"tags": ["nbval-check-output"]}
        )
    )
    result = check(glued)
    assert result.returncode == 1 and "glue" in result.stdout
    unfurnished = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("seed = 0", metadata={"tags": ["parameters"]})]
    )
    result = check(unfurnished)
    assert result.returncode == 1 and "install cell" in result.stdout
    myst = furnished(nbformat.v4.new_code_cell("from myst_nb import glue"))
    result = check(myst)
    assert result.returncode == 1 and "myst_nb" in result.stdout


def _golden(path: Path) -> list[int]:
    nb = nbformat.read(path, as_version=4)
    return [
        i
        for i, c in enumerate(nb.cells)
        if "nbval-check-output" in c.metadata.get("tags", [])
    ]


def _text(cell) -> str:
    """What nbval-lax compares: the cell's stream text and plain-text results."""
    parts = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            parts.append(o.text)
        elif "data" in o and "text/plain" in o.data:
            parts.append(o.data["text/plain"])
    return "".join(parts)


@pytest.fixture(scope="module")
def kernel():
    """One kernel for every chapter's golden cells, at smoke scale (issue 51: a kernel
    each cost 3-4 s of start and imports); each chapter from a reset namespace."""
    from jupyter_client.manager import start_new_kernel

    env = {**os.environ, "MARKOVLIB_SCALE": "smoke"}
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(ROOT / "book"), env=env)
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


@pytest.mark.parametrize(
    "path", [p for p in NOTEBOOKS if _golden(p)], ids=lambda p: p.stem
)
def test_golden_cells_print_their_stored_output(path, kernel):
    """The cells tagged nbval-check-output (deterministic theory numbers) print
    exactly their stored text when the chapter runs with its default parameters at
    smoke scale. Only the cells up to the last such cell run (none of them trains):
    ``make test`` executes every whole chapter once, with a reader's chain, in the
    smoke edition (tests/edition), where these outputs would differ."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    golden = _golden(path)
    stored = {i: _text(nb.cells[i]) for i in golden}
    assert all(stored.values()), "golden cells store their output"
    nb.cells = [nbformat.v4.new_code_cell("%reset -f")] + nb.cells[: max(golden) + 1]
    client = NotebookClient(nb, km=kernel[0], timeout=600, allow_errors=False)
    client.kc = kernel[1]
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            client.execute_cell(cell, index)
    for i in golden:
        assert _text(nb.cells[i + 1]) == stored[i], (path.stem, i)
