"""Every chapter runs through papermill with a reader's own (p, q) at smoke scale, and is stored clean.

(The chapters with their default parameters are executed by ``pytest --nbval-lax book`` and by the strict
book build, both in ``make test``.)
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
# a (p, q) different from each chapter's default, on the other side of p + q = 1 where that matters
READER_CHAINS = {"framework": dict(p=0.3, q=0.4), "global_minimum": dict(p=0.6, q=0.7),
                 "bad_local_minima": dict(p=0.3, q=0.4), "saddles": dict(p=0.2, q=0.6),
                 "multi_state": dict(k=4, p=0.9), "depth": dict(p=0.3, q=0.4)}


def test_every_chapter_has_a_reader_chain():
    assert {c.stem for c in CHAPTERS} == set(READER_CHAINS)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_structure(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    first = code[0]
    assert "parameters" in first.metadata.get("tags", []), "first code cell must be tagged 'parameters'"
    values = {}
    for node in ast.parse(first.source).body:  # plain or annotated assignments of literals only
        assert isinstance(node, (ast.Assign, ast.AnnAssign)), ast.dump(node)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        values.update({t.id: ast.literal_eval(node.value) for t in targets})
    assert {"p", "seed", "scale"} <= set(values)      # and q for binary chapters, k for the k-state one
    assert values["scale"] == "auto"
    assert "assert " in code[-1].source, "the last cell asserts the chapter's claims"
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_stored_without_outputs():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"), "check", *map(str, CHAPTERS)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_runs_with_new_chain(path, tmp_path, monkeypatch):
    monkeypatch.setenv("MARKOVLIB_SCALE", "smoke")
    params = {**READER_CHAINS[path.stem], "seed": 1}
    out = pm.execute_notebook(str(path), str(tmp_path / path.name), parameters=params, cwd=str(path.parent),
                              progress_bar=False, kernel_name="python3")
    injected = [c for c in out.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and f"p = {params['p']}" in injected[0].source
    last = out.cells[-1]
    assert not any(o.output_type == "error" for o in last.outputs)


def test_check_rejects_outputs_and_glue_in_golden_cells(tmp_path):
    def check(nb) -> subprocess.CompletedProcess:
        path = tmp_path / "chapter.ipynb"
        nbformat.write(nb, path)
        return subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"), "check", str(path)],
                              capture_output=True, text=True)

    clean = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(1)")])
    assert check(clean).returncode == 0
    with_output = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    with_output.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    assert check(with_output).returncode == 1
    glued = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nglue('a', 1, display=False)")])
    result = check(glued)
    assert result.returncode == 1 and "glue" in result.stdout
