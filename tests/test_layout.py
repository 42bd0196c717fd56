"""The house rules of the library that a reviewer would otherwise count by hand."""

import ast
import subprocess
import sys
from pathlib import Path

import markovlib

LIBRARY = Path(markovlib.__file__).parent
MAX_LINES = 60  # a function holds one idea (nanoGPT's model.py is the bar)


def _functions(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node.end_lineno - node.lineno + 1


def test_no_function_of_the_library_is_longer_than_sixty_lines():
    long = [
        f"{path.relative_to(LIBRARY)}:{name} ({n} lines)"
        for path in sorted(LIBRARY.rglob("*.py"))
        for name, n in _functions(path)
        if n > MAX_LINES
    ]
    assert not long, long


def test_no_module_only_re_exports_another():
    """Issue 32: one name per thing; a module whose body is imports and ``__all__``
    is a second name for another module."""
    shims = []
    for path in sorted(LIBRARY.rglob("*.py")):
        if path.name == "__init__.py":  # a package's public names
            continue
        body = ast.parse(path.read_text()).body
        code = [
            n
            for n in body
            if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        ]
        if code and all(
            isinstance(n, ast.Import | ast.ImportFrom)
            or (
                isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "__all__"
            )
            for n in code
        ):
            shims.append(str(path.relative_to(LIBRARY)))
    assert not shims, shims


def test_the_chapters_hide_at_most_860_lines_of_code():
    """Issue 32: figure and table code lives in tested library functions; the code
    cells a page hides (hide-input, remove-input, remove-cell) hold at most 860 lines
    over all chapters (1 725 before)."""
    import nbformat

    hiding = {"hide-input", "remove-input", "remove-cell", "hide-cell"}
    hidden = {
        path.stem: sum(
            len(cell.source.splitlines())
            for cell in nbformat.read(path, as_version=4).cells
            if cell.cell_type == "code" and hiding & set(cell.metadata.get("tags", []))
        )
        for path in sorted((LIBRARY.parent / "book").glob("*.ipynb"))
    }
    assert len(hidden) == 11 and sum(hidden.values()) <= 860, hidden


def test_import_markovlib_loads_its_public_names_on_first_use():
    """Issue 65: `import markovlib` imported torch (2-3 s); its public names are
    loaded from their modules on first use (PEP 562), the same objects as before."""
    code = (
        "import sys, markovlib\n"
        "assert 'torch' not in sys.modules, 'torch'\n"
        "assert set(markovlib.__all__) <= set(dir(markovlib))\n"
        "from markovlib import binary, chains, TransformerConfig, model\n"
        "assert binary is chains.binary\n"
        "assert TransformerConfig is model.TransformerConfig\n"
        "assert [n for n in markovlib.__all__ if not hasattr(markovlib, n)] == []\n"
        "try:\n    markovlib.nothing\nexcept AttributeError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "module 'markovlib' has no attribute 'nothing'\n"
