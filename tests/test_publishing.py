"""Publishing: CI workflows, Binder and Colab set-up, the install cell, the "Re-run this
page" box, build facts.

(The built site itself is checked in a real browser by tests/browser, run by
``make browser``.)
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from markovlib.companion import notebook

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
PINNED_ACTION = re.compile(r"^[\w.-]+/[\w./-]+@(v\d+\.\d+\.\d+|[0-9a-f]{40})$")
# what Colab has out of the box besides the standard library (markovlib comes from the
# install cell)
COLAB_HAS = {
    "numpy",
    "torch",
    "matplotlib",
    "seaborn",
    "pandas",
    "scipy",
    "tqdm",
    "IPython",
    "nbformat",
    "yaml",
    "markovlib",
}


def _workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _runs(workflow: dict) -> list[str]:
    return [
        step["run"]
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if "run" in step
    ]


def _uses(workflow: dict) -> list[str]:
    return [
        step["uses"]
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if "uses" in step
    ]


def _readme_commands() -> list[str]:
    head = (ROOT / "README.md").read_text().split("\n## ", 1)[0]
    return re.findall(r"^(make \w+)", head, flags=re.M)


def test_readme_starts_with_the_two_commands():
    assert _readme_commands()[:2] == ["make book", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_test_workflow_runs_the_readme_test_command():
    wf = _workflow("test.yml")
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on:` key as True
    assert {"push", "pull_request"} <= set(on)
    assert any(run.strip() == "make test" for run in _runs(wf)), _runs(wf)
    assert wf["permissions"] == {"contents": "read"}


def test_book_workflow_builds_with_cache_and_deploys_to_pages():
    wf = _workflow("book.yml")
    assert any(run.strip() == "make book" for run in _runs(wf))
    # the site is the paper edition, read from the shipped runs (issue: paper edition)
    assert wf["jobs"]["build"]["env"]["MARKOVLIB_SCALE"] == "paper"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^SCALE \?= paper$", makefile, re.M), "make book is not paper"
    uses = _uses(wf)
    cache = next(
        step
        for step in wf["jobs"]["build"]["steps"]
        if step.get("uses", "").startswith("actions/cache@")
    )
    assert set(cache["with"]["path"].split()) == {"_build/.jupyter_cache", "results"}
    assert "restore-keys" in cache["with"]
    upload = next(
        step
        for step in wf["jobs"]["build"]["steps"]
        if "upload-pages-artifact" in step.get("uses", "")
    )
    assert upload["with"]["path"] == "_build/html"
    assert any(u.startswith("actions/deploy-pages@") for u in uses)
    assert wf["jobs"]["deploy"]["needs"] == "build"
    assert wf["permissions"] == {
        "contents": "read",
        "pages": "write",
        "id-token": "write",
    }


@pytest.mark.parametrize("name", ["test.yml", "book.yml"])
def test_actions_are_pinned(name):
    uses = _uses(_workflow(name))
    assert uses and all(PINNED_ACTION.match(u) for u in uses), [
        u for u in uses if not PINNED_ACTION.match(u)
    ]


def test_binder_installs_cpu_torch_and_markovlib():
    lines = [
        ln.strip()
        for ln in (ROOT / "binder" / "requirements.txt").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    pins = dict(ln.split("==") for ln in lines if "==" in ln)
    root = dict(
        ln.split("==")
        for ln in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in ln
    )
    assert pins["torch"] == root["torch"] + "+cpu"
    assert all(ln.startswith("--") or "==" in ln for ln in lines), (
        "every Binder requirement is pinned"
    )
    for name, v in pins.items():
        if name != "torch":
            assert root.get(name) == v, (
                f"binder pins {name}=={v}, requirements.txt {root.get(name)}"
            )
    assert not any(n.startswith(("nvidia", "jupyter-book", "sphinx")) for n in pins), (
        "keep the image small"
    )
    post = (ROOT / "binder" / "postBuild").read_text()
    assert re.search(r"^pip install --no-deps .*-e \.$", post, flags=re.M)
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"
    assert not (ROOT / "postBuild").exists() and not (ROOT / "environment.yml").exists()


# imported by markovlib but not needed by a chapter on Binder: the book build's glue,
# Ray clusters
NOT_ON_BINDER = {"myst_nb", "ray"}


def test_binder_pins_what_the_chapters_import():
    """Every distribution the chapters and the library import (the CLI's book builds
    aside) is pinned in binder/requirements.txt at requirements.txt's version."""
    from importlib.metadata import packages_distributions

    def pins(path):
        lines = (ROOT / path).read_text().splitlines()
        pairs = (ln.split("==") for ln in lines if "==" in ln)
        return {n.lower().replace("_", "-"): v.split("+")[0] for n, v in pairs}

    sources = [
        (ROOT / "markovlib" / p).read_text()
        for p in map(str, (ROOT / "markovlib").rglob("*.py"))
        if "/markovlib/cli/" not in p and not p.endswith("companion/publish.py")
    ]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        sources += [c.source for c in nb.cells if c.cell_type == "code"]
    names = set().union(*map(_imports, sources)) - NOT_ON_BINDER - {"markovlib"}
    dists = packages_distributions()
    wanted = {
        d.lower().replace("_", "-")
        for n in names - set(sys.stdlib_module_names)
        for d in dists[n]
    }
    binder, root = pins("binder/requirements.txt"), pins("requirements.txt")
    assert {"torch", "numpy", "ipython", "matplotlib"} <= wanted
    assert {d: binder.get(d) for d in wanted} == {d: root[d] for d in wanted}


def test_binder_postbuild_installs_markovlib_in_a_fresh_venv(tmp_path):
    """binder/postBuild, run in a copy of the repository with a fresh venv's pip
    (offline; setuptools at the version Binder pins, from this venv), installs
    markovlib from the copy."""
    venv, deps, bin_ = tmp_path / "venv", tmp_path / "deps", tmp_path / "bin"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    import setuptools

    here = Path(setuptools.__file__).parents[1]
    deps.mkdir()
    for name in ("setuptools", "pkg_resources", "_distutils_hack"):
        (deps / name).symlink_to(here / name)
    dist = f"setuptools-{setuptools.__version__}.dist-info"
    (deps / dist).symlink_to(here / dist)
    [packages] = venv.glob("lib/python3*/site-packages")
    (packages / "deps.pth").write_text(f"{deps}\n")
    bin_.mkdir()
    pip = f'#!/bin/sh\nexec {sys.executable} -m pip --python {venv}/bin/python "$@"\n'
    (bin_ / "pip").write_text(pip)
    (bin_ / "pip").chmod(0o755)
    source = tmp_path / "source"
    for name in ("markovlib", "binder"):
        shutil.copytree(ROOT / name, source / name, ignore=_PYCACHE)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "PIP_NO_INDEX": "1"}
    build = subprocess.run(
        ["bash", "binder/postBuild"], cwd=source, env=env, capture_output=True
    )
    assert build.returncode == 0, build.stderr.decode()[-2000:]
    assert (
        "setuptools==" + setuptools.__version__
        in (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    )
    where = "import importlib.util as u; print(u.find_spec('markovlib').origin)"
    found = subprocess.run(
        [venv / "bin" / "python", "-c", where], capture_output=True, cwd=tmp_path
    )
    assert found.stdout.decode().strip() == str(source / "markovlib" / "__init__.py")


_PYCACHE = shutil.ignore_patterns("__pycache__")


def _sphinx_fixes():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import sphinx_fixes
    finally:
        sys.path.pop(0)
    return sphinx_fixes


def test_the_repository_url_is_named_in_one_place():
    url = f"https://github.com/{notebook.REPOSITORY}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'Repository = "{url}"' in pyproject
    assert notebook.install_requirement() == f"markovlib @ git+{url}@{notebook.BRANCH}"
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True
    ).stdout.split()
    naming = [
        name
        for name in tracked
        if not name.endswith(".ipynb")  # their install cell: tools/notebooks.py furnish
        and (ROOT / name).is_file()
        and notebook.REPOSITORY in (ROOT / name).read_text(errors="replace")
    ]
    assert naming == ["pyproject.toml"], naming
    # the book's buttons and footer read it from there
    config = types.SimpleNamespace(html_theme_options={})
    _sphinx_fixes().repository_buttons(None, config)
    options = config.html_theme_options
    assert options["repository_url"] == url and options["use_repository_button"]
    assert f"{url}/blob/main/LICENSE" in options["extra_footer"]
    assert "MIT licence" in options["extra_footer"]


def test_bibliography_labels_are_the_texts_author_year():
    from pybtex.database import parse_file

    fixes = _sphinx_fixes()
    entries = parse_file(str(ROOT / "book" / "references.bib")).entries
    labels = dict(
        zip(entries, fixes.AuthorYearLabels().format_labels(entries.values()))
    )
    assert labels["makkuva2025attention"] == "Makkuva et al., 2025"
    assert labels["cover2006elements"] == "Cover and Thomas, 2006"
    twice = [entries["levin2017markov"], entries["levin2017markov"]]
    assert list(fixes.AuthorYearLabels().format_labels(twice)) == [
        "Levin and Peres, 2017a",
        "Levin and Peres, 2017b",
    ]
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    assert config["bibtex_reference_style"] == "author_year"
    assert config["bibtex_default_style"] == "authoryear"


def test_config_names_the_launch_services():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "repository" not in config  # tools/sphinx_fixes.py reads pyproject.toml
    assert config["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert "sphinx-mathjax-offline" in config["sphinx"]["extra_extensions"]


def _install_cell(path: Path):
    nb = nbformat.read(path, as_version=4)
    return next(c for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_install_cell_installs_only_in_colab(path, monkeypatch, tmp_path):
    """Outside Colab the cell does nothing; in Colab it shallow-clones the
    repository's main branch into the working folder and installs from it
    (tests/test_installed.py runs it for real against this clone)."""
    from markovlib.colab import clone_command

    cell = _install_cell(path)
    assert {"hide-output", "colab-install"} <= set(cell.metadata["tags"])
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a[0]))
    monkeypatch.chdir(tmp_path)
    exec(compile(cell.source, str(path), "exec"), {})
    assert calls == [], "the install cell must do nothing outside Colab"
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    with pytest.raises(FileNotFoundError, match="markovlib/colab.py"):
        exec(compile(cell.source, str(path), "exec"), {})
    url, clone = f"https://github.com/{notebook.REPOSITORY}", "attention-with-markov"
    assert calls == [clone_command(url, clone, notebook.BRANCH)]
    assert calls[0][2:6] == ["--quiet", "--depth", "1", "--branch"]


def _imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_import_only_what_colab_has(path):
    nb = nbformat.read(path, as_version=4)
    names = set().union(
        *(_imports(c.source) for c in nb.cells if c.cell_type == "code")
    )
    missing = {
        n for n in names if n not in sys.stdlib_module_names and n not in COLAB_HAS
    }
    assert not missing, f"{path.name} imports {missing}, which Colab lacks"


def test_markovlib_module_level_imports_are_in_colab():
    for module in sorted((ROOT / "markovlib").glob("*.py")):
        tree = ast.parse(module.read_text())
        top = set()
        for (
            node
        ) in tree.body:  # module level only: lazy imports inside functions are fine
            if isinstance(node, ast.Import):
                top |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                top.add(node.module.split(".")[0])
        missing = {
            n
            for n in top
            if n not in sys.stdlib_module_names and n not in COLAB_HAS | {"__future__"}
        }
        assert not missing, f"{module.name} imports {missing} at module level"


def test_glue_without_myst_nb_still_runs(monkeypatch, capsys):
    from markovlib.companion.notebook import glue

    monkeypatch.setitem(sys.modules, "myst_nb", None)  # import myst_nb fails
    glue("hidden", 1.5, display=False)
    glue("shown", "value-42")
    out = capsys.readouterr().out
    assert "value-42" in out and "1.5" not in out


def test_glue_uses_myst_nb_when_present(monkeypatch):
    recorded = []
    fake = types.ModuleType("myst_nb")
    fake.glue = lambda name, value, display=True: recorded.append(
        (name, value, display)
    )
    monkeypatch.setitem(sys.modules, "myst_nb", fake)
    notebook.glue("x", 3, display=False)
    assert recorded == [("x", 3, False)]


def test_rerun_box_round_trips_the_parameters():
    params = dict(p=0.3, q=0.4, seed=2, scale="cpu", noise=0.01)
    box = notebook.rerun_box("saddles", **params)
    argv = shlex.split(box.papermill_command())
    assert argv[:3] == ["papermill", "book/saddles.ipynb", "saddles-mine.ipynb"]
    flags = argv[3:]
    parsed = {flags[i + 1]: flags[i + 2] for i in range(0, len(flags), 3)}
    assert all(flags[i] == "-p" for i in range(0, len(flags), 3))
    assert {
        k: yaml.safe_load(v) for k, v in parsed.items()
    } == params  # papermill reads -p values as YAML
    md = box._repr_markdown_()
    assert md.startswith(":::{admonition} Re-run this page\n:class: tip rerun-box")
    assert (
        notebook.binder_url("saddles") in md
        and notebook.colab_url("saddles") in md
        and "scale used: `cpu`" in md
    )
    assert (
        f"https://mybinder.org/v2/gh/{notebook.REPOSITORY}/main"
        "?urlpath=tree/book/saddles.ipynb" == notebook.binder_url("saddles")
    )
    html = box._repr_html_()
    assert (
        "rerun-box" in html
        and "&#x27;cpu&#x27;" in html
        and notebook.colab_url("saddles").replace("&", "&amp;") in html
    )
    with pytest.raises(ValueError, match="^chapter must be one of"):
        notebook.rerun_box("no_such_chapter", p=0.1)
    with pytest.raises(notebook.ChapterParameterError, match="^scale must be one of"):
        notebook.rerun_box("saddles", **{**params, "scale": "bogus"})


@pytest.mark.parametrize(
    "path", [p for p in NOTEBOOKS if p.stem != "reproducibility"], ids=lambda p: p.stem
)
def test_rerun_cell_passes_every_parameter(path):
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "rerun-box" in c.metadata.get("tags", []))
    call = ast.parse(cell.source).body[-1].value
    assert ast.literal_eval(call.args[0]) == path.stem
    assert {kw.arg for kw in call.keywords} == set(notebook.chapter_parameters(path))
    assert (
        cell.metadata["mystnb"]["markdown_format"] == "myst"
        and "remove-input" in cell.metadata["tags"]
    )


def test_chapter_parameters_reads_the_parameters_cell(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# t"),
            nbformat.v4.new_code_cell(
                "p: float = 0.25\nseed = 3\nscale: str = 'auto'",
                metadata={"tags": ["parameters"]},
            ),
        ]
    )
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert notebook.chapter_parameters(tmp_path / "x.ipynb") == {
        "p": 0.25,
        "seed": 3,
        "scale": "auto",
    }
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("p = 1")]),
        tmp_path / "y.ipynb",
    )
    with pytest.raises(ValueError, match="parameters"):
        notebook.chapter_parameters(tmp_path / "y.ipynb")


def test_build_info_reads_the_machine(monkeypatch):
    monkeypatch.setenv("MARKOVLIB_SCALE", "smoke")
    info = notebook.build_info()
    import torch

    assert info["versions"]["torch"] == torch.__version__
    assert info["python"] == sys.version.split()[0] and info["forced_scale"] == "smoke"
    assert info["torch_threads"] == torch.get_num_threads() and info["cuda"] in (
        "none",
        torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", info["built"])
    assert notebook.build_info(packages=("no-such-package-xyz",))["versions"] == {
        "no-such-package-xyz": "not installed"
    }


def test_sphinx_fixes_drops_repeated_scripts_in_place():
    from sphinx.builders.html._assets import _JavaScript

    sphinx_fixes = _sphinx_fixes()
    files = [
        _JavaScript("a.js"),
        _JavaScript(None, body="const X = 1"),
        _JavaScript("b.js", **{"async": "async"}),
        _JavaScript("", body="const X = 1"),
        _JavaScript("a.js"),
        _JavaScript("b.js"),
    ]
    context = {"script_files": files}
    sphinx_fixes.drop_repeated_scripts(None, "page", "page.html", context, None)
    assert context["script_files"] is files  # the builder's own list, edited in place
    assert [(js.filename, js.attributes) for js in files] == [
        ("a.js", {}),
        (None, {"body": "const X = 1"}),
        ("b.js", {"async": "async"}),
        ("b.js", {}),
    ]


def test_make_test_runs_the_browser_check():
    makefile = (ROOT / "Makefile").read_text()
    stages = re.search(r"^TEST_STAGES := (.*)$", makefile, re.M)[1].split()
    assert stages[-1] == "browser" and "book-strict" in stages and "unit" in stages
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "tools/test_stages.py $(TEST_STAGES) --beside $(BESIDE)" in recipe
    assert re.search(r"^BESIDE := verify$", makefile, re.M)
    assert (
        "tests/browser" in makefile
        and (ROOT / "tests" / "browser" / "test_site.py").exists()
    )


def _fake_make(tmp_path: Path, fail: str = "") -> dict:
    """An environment whose $MAKE runs stage ``x`` as: sleep for ``x``'s number of
    tenths of a second (``beside`` 300), note its thread count and process group,
    fail if ``fail``."""
    make = tmp_path / "make"
    make.write_text(
        "#!/bin/sh\n"
        'stage=$2; echo "$stage $OMP_NUM_THREADS $(ps -o pgid= $$)" >> "$TRACE"\n'
        f'[ "$stage" = "{fail}" ] && exit 3\n'
        "case $stage in beside) sleep 30;; *) sleep 0.2;; esac\n"
        'echo "$stage done"\n'
    )
    make.chmod(0o755)
    return {**os.environ, "MAKE": str(make), "TRACE": str(tmp_path / "trace")}


def test_make_tests_stage_beside_the_others_is_stopped_with_them(tmp_path):
    """tools/test_stages.py: the stages in turn, each's time printed; the stage beside
    them starts with --from, one thread a process, in a process group of its own; a
    failing stage stops it (exit 2, nothing left running), and a failing beside stage
    fails the run."""
    tool = [sys.executable, str(ROOT / "tools" / "test_stages.py")]
    env = {**_fake_make(tmp_path, fail="b"), "OMP_NUM_THREADS": "2"}
    t0 = time.monotonic()
    out = subprocess.run(
        [*tool, "a", "b", "--beside", "beside", "--from", "a"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "make test: b failed" in out.stderr
    assert time.monotonic() - t0 < 10, "the stage beside was waited for, not stopped"
    assert re.search(r"^make test: a passed in \d+ s$", out.stdout, re.M)
    trace = (tmp_path / "trace").read_text().split("\n")
    lines = {ln.split()[0]: ln.split()[1:] for ln in trace if ln}
    assert lines["beside"][0] == "1" and lines["b"][0] == "2", trace
    assert lines["beside"][1] != lines["b"][1], "the stage beside is in their group"
    order = [ln.split()[0] for ln in trace if ln]
    assert order.index("beside") < order.index("b"), trace
    assert not _group_runs(int(lines["beside"][1])), "the stage beside still runs"
    make = (tmp_path / "make").read_text().replace("sleep 30", "sleep 0.5")
    (tmp_path / "make").write_text(
        make.replace('= "b" ] && exit 3', '= "beside" ] && exit 3')
    )
    out = subprocess.run(
        [*tool, "a", "b", "--beside", "beside", "--from", "b"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "make test: beside failed" in out.stderr
    assert "make test: b passed in" in out.stdout


def _group_runs(pgid: int) -> bool:
    """Whether a process of group ``pgid`` runs (a zombie does not). (A pattern,
    ``pgrep -f "sleep 30"``, also found a developer's own ``sleep 300`` and failed a
    fresh clone's run.)"""
    import psutil

    for proc in psutil.process_iter(["status"]):
        try:
            mine = os.getpgid(proc.pid) == pgid
        except ProcessLookupError:
            continue
        if mine and proc.info["status"] != psutil.STATUS_ZOMBIE:
            return True
    return False


# --- the code a reader sees (issue 14) ------------------------------------------------
HIDDEN = {"hide-input", "remove-input", "remove-cell"}
FURNITURE = {"parameters", "colab-install", "rerun-box"}
CHAPTERS = [p for p in NOTEBOOKS if p.stem != "reproducibility"]
MAX_VISIBLE_LINES = 15


def _code_cells(path: Path):
    nb = nbformat.read(path, as_version=4)
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_visible_code_cells_are_short_and_define_nothing(path):
    """Statistics and verdict plumbing live in tested markovlib functions: a visible
    cell calls them in a few lines, and no cell of a chapter defines a function or a
    class."""
    long = []
    for cell in _code_cells(path):
        tags = set(cell.metadata.get("tags", []))
        n = len(cell.source.strip().splitlines())
        if not tags & (HIDDEN | FURNITURE) and n > MAX_VISIBLE_LINES:
            long.append(f"{n} lines:\n{cell.source[:120]}")
        defs = [
            node.name
            for node in ast.walk(ast.parse(cell.source))
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        ]
        assert not defs, f"{path.name} defines {defs}: move them into markovlib"
    assert not long, (
        f"{path.name}: visible code cells over {MAX_VISIBLE_LINES} lines: {long}"
    )


def _prose_names(cells) -> set[str]:
    """Names that hold a chapter's prose: passed to Markdown(...) or assigned an
    f-string."""
    names = set()
    for cell in cells:
        for node in ast.walk(ast.parse(cell.source)):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "Markdown"
                and node.args
                and isinstance(node.args[0], ast.Name)
            ):
                names.add(node.args[0].id)
            elif isinstance(node, (ast.Assign, ast.AugAssign)) and isinstance(
                node.value, ast.JoinedStr
            ):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _tests_prose(test: ast.AST, prose: set[str]) -> bool:
    """Whether a condition looks for words in the prose ("long plateau" in text)."""
    return any(
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str)
        and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        and any(isinstance(c, ast.Name) and c.id in prose for c in node.comparators)
        for node in ast.walk(test)
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_claims_cell_checks_values_not_wording(path):
    """The last cell asserts numbers and booleans; a check that looks for words in the
    prose (assert "long plateau" in text; if "Every untied run" in text: ...) stops
    checking anything when the prose is reworded. It is collapsed, its verdict shown."""
    cells = _code_cells(path)
    last, prose = cells[-1], _prose_names(cells)
    wording = [
        ast.get_source_segment(last.source, node.test)
        for node in ast.walk(ast.parse(last.source))
        if isinstance(node, (ast.Assert, ast.If, ast.IfExp, ast.While))
        and _tests_prose(node.test, prose)
    ]
    assert not wording, f"{path.name}: the claims cell checks wording: {wording}"
    assert "hide-input" in last.metadata.get("tags", []), (
        f"{path.name}: collapse the claims cell (hide-input)"
    )
    assert not {"hide-output", "remove-output"} & set(last.metadata.get("tags", []))


def test_the_wording_check_has_teeth():
    chapter = [
        nbformat.v4.new_code_cell('text = f"{x} runs: a long plateau"'),
        nbformat.v4.new_code_cell('glue("v", Markdown(dv), display=False)'),
    ]
    prose = _prose_names(chapter)
    assert prose == {"text", "dv"}
    for bad in ('assert "long plateau" in text', 'if "Every run" in dv:\n    pass'):
        assert _tests_prose(ast.parse(bad).body[0].test, prose)
    for fine in ('assert "tied" in runs', "assert x in text"):
        assert not _tests_prose(ast.parse(fine).body[0].test, prose)


def test_reproducibility_page_helpers():
    from markovlib.presets import PRESETS

    table = notebook.scales_table()
    assert list(table["scale"]) == list(PRESETS)
    for _, row in table.iterrows():
        scale = PRESETS[row["scale"]]
        assert all(row[f] == getattr(scale, f) for f in notebook.SCALE_FIELDS)
    info = {
        "built": "2026-01-01 00:00 UTC",
        "commit": "abc1234",
        "cpu": "a CPU",
        "cpu_count": 2,
        "torch_threads": 2,
        "cuda": "none",
        "python": "3.11.0",
        "platform": "Linux",
        "forced_scale": "smoke",
    }
    text = notebook.build_summary(info, "smoke")
    assert text.startswith("Built **2026-01-01 00:00 UTC** from commit `abc1234`")
    assert f"https://github.com/{notebook.REPOSITORY}" in text
    assert text.endswith('so `scale = "auto"` ran as **`smoke`**.')
    assert "(2 logical cores, 2 torch threads)" in text
    one = notebook.build_summary({**info, "torch_threads": 1}, "smoke")
    assert "(2 logical cores, 1 torch thread)" in one  # as make book executes it


def test_build_checks_fail_on_a_broken_build():
    import pandas as pd

    from markovlib.runs import edition
    from markovlib.runs.shipped import ShippedData

    info = {"versions": {"markovlib": "1.0", "torch": "2.0"}}
    defaults = {f"ch{i}": {"seed": 0, "scale": "auto"} for i in range(6)}
    progress = pd.DataFrame({"runs": [3] * 21, "shipped": [3] * 21})
    assert all(notebook.build_checks(info, defaults, progress, (63, 63, 63)).values())
    broken = {
        "markovlib and torch installed": (
            {"versions": {"markovlib": "not installed", "torch": "2.0"}},
            defaults,
            progress,
            (63, 63, 63),
        ),
        "every chapter takes seed, scale auto": (
            info,
            {**defaults, "ch0": {"seed": 0, "scale": "cpu"}},
            progress,
            (63, 63, 63),
        ),
        "edition progress": (info, defaults, progress.assign(runs=2), (63, 63, 63)),
        # the page's "k of n runs shipped" is the manifest's k (issue 49: the groups'
        # sum counted a run of two groups twice: 1 046 for the manifest's 1 038)
        "runs shipped as the manifest lists": (info, defaults, progress, (63, 63, 64)),
    }
    for name, args in broken.items():
        checks = notebook.build_checks(*args)
        assert [k for k, ok in checks.items() if not ok] == [name]
    # the shipped data: what the page counts is what the manifest lists
    shipped, wanted, listed = edition.shipped_runs()
    assert shipped == listed == len(ShippedData(ROOT / "data" / "paper")) <= wanted
    checks = notebook.build_checks(info, defaults, edition.progress())
    assert checks["runs shipped as the manifest lists"]


def _lowest_python(specifiers) -> str:
    """The lowest Python 3.x.y that satisfies every specifier (a Requires-Python)."""
    from packaging.specifiers import SpecifierSet

    sets = [SpecifierSet(s) for s in specifiers if s]
    versions = (f"3.{m}.{p}" for m in range(6, 20) for p in range(20))
    return next(v for v in versions if all(v in s for s in sets))


def test_the_python_version_is_the_one_the_pins_need():
    """requires-python and the README's "Python ≥ 3.x" are the lowest Python that every
    pin of requirements.txt installs on (their Requires-Python)."""
    import tomllib
    from importlib.metadata import metadata

    pins = [
        line.split("==")[0]
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line
    ]
    needed = _lowest_python(metadata(name).get("Requires-Python") for name in pins)
    # numpy 2.4, pandas 3.1, scipy 1.17, matplotlib 3.11 need 3.11; soupsieve 3.11.5
    assert needed == "3.11.5"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # the library's own ranges need the minor version; the book's pins the patch
    assert project["requires-python"] == ">=3.11"
    readme = (ROOT / "README.md").read_text()
    assert f"Python ≥ {needed}" in readme and "Python ≥ 3.10" not in readme
    assert "make install" in readme.split("\n## ", 1)[0]  # documented with the two


def test_the_readme_is_short_and_the_history_is_on_a_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "book/making_of.md" in readme
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert "book/making_of" in files and (ROOT / "book" / "making_of.md").is_file()


def test_citation_file_cites_the_book_and_the_paper():
    import tomllib

    from pybtex.database import parse_file

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert {"message", "title", "authors"} <= set(cff)
    assert cff["version"] == project["version"] and cff["license"] == project["license"]
    paper = parse_file(str(ROOT / "book" / "references.bib")).entries[
        "makkuva2025attention"
    ]
    [reference] = cff["references"]
    assert reference["title"] == paper.fields["title"].replace("{", "").replace("}", "")
    assert [a["family-names"] for a in reference["authors"]] == [
        "".join(p.last_names) for p in paper.persons["author"]
    ]
    assert reference["year"] == int(paper.fields["year"])
    for page in ("README.md", "book/intro.md"):
        text = (ROOT / page).read_text()
        assert "## Cite this book" in text and "CITATION.cff" in text, page


def test_page_table_prints_what_a_reader_should_see():
    """Issue 41: tables printed 5 significant digits (1.0725 at a reader's chain),
    "-0.00", a 0-n index and the index's name as a header row."""
    from markovlib.companion.notebook import page_table, shown_number

    assert [shown_number(v) for v in (1.0725, 0.38512, -1e-9 * 0, 644000, True)] == [
        "1.073", "0.3851", "0", "644,000", "yes",
    ]  # fmt: skip
    assert shown_number(-0.00001, 2) == "-1e-05" and shown_number(-0.0, 3) == "0"
    frame = pd.DataFrame({"share": [-0.0001, 1.23456], "runs": [3, 1200]})
    frame.index.name, frame.columns.name = "group", "parameter"
    html = page_table(frame).to_html()
    cells = re.findall(r"<t[dh][^>]*>([^<]*)</t[dh]>", html)
    assert cells == ["share", "runs", "-0.0001", "3", "1.235", "1,200"], cells
    kept = re.findall(
        r"<t[dh][^>]*>([^<]*)</t[dh]>", page_table(frame, index=True).to_html()
    )
    assert kept[:3] == ["group", "share", "runs"] and kept[3] == "0"


def _prebuild():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import prebuild
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return prebuild


def test_prebuild_orders_every_chapter_longest_first_without_a_cache(tmp_path):
    """A fresh clone's build has no earlier times: every chapter the prebuild runs has
    an expected time, so that it starts the longest first (a new chapter is not left
    to its file size: the in-context chapter ran last, alone, for 56 s)."""
    prebuild = _prebuild()
    chapters = {
        nb.name for nb in (ROOT / "book").glob("*.ipynb") if not prebuild._forced(nb)
    }
    assert set(prebuild.EXPECTED_SECONDS) == chapters
    assert prebuild.last_seconds(tmp_path / "no-cache") == {}


def test_prebuild_executes_the_build_facts_whenever_the_build_reads_them(
    tmp_path, monkeypatch
):
    """The Reproducibility page is the one page of the build's facts, none is left to
    the build, and the prebuild executes it whenever Sphinx will read it (no
    environment or no doctree of the page, the page changed since, or what makes
    Sphinx read every page), even with its code cached: its date and commit are this
    build's; a build that does not read it executes nothing."""
    prebuild = _prebuild()
    pages = sorted((ROOT / "book").glob("*.ipynb"))
    assert [p.stem for p in pages if prebuild.build_facts(p)] == ["reproducibility"]
    assert not any(prebuild._forced(p) for p in pages)
    root = tmp_path / "clone"  # its _config.yml and the others, a page of its book
    for name in prebuild.EVERY_PAGE:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    monkeypatch.setattr(prebuild, "ROOT", root)
    page = root / "book" / "reproducibility.ipynb"
    page.parent.mkdir()
    shutil.copy(ROOT / "book" / "reproducibility.ipynb", page)
    build, cache = root / "_build", root / "_build" / ".jupyter_cache"
    executed = []
    monkeypatch.setattr(
        prebuild, "run_chapters", lambda tasks, *a, **k: executed.append([*tasks])
    )
    assert prebuild.read_by_the_build(page, build)  # no environment yet
    tree = build / ".doctrees" / "book" / "reproducibility.doctree"
    env = build / ".doctrees" / "environment.pickle"
    tree.parent.mkdir(parents=True)
    for path in (tree, env):
        path.write_bytes(b"")
    later = time.time() + 60
    os.utime(env, (later, later))
    assert not prebuild.read_by_the_build(page, build)
    assert prebuild.due(cache, page)  # not cached
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    nb = nbformat.read(page, as_version=4)
    get_cache(str(cache)).cache_notebook_bundle(
        CacheBundleIn(nb, str(page)), check_validity=False
    )
    assert prebuild.cached(cache, page) and not prebuild.due(cache, page)
    assert prebuild.prebuild([page], cache, 1, 60) == 0 and executed == [[]]
    for changed in (page, root / "_toc.yml", root / "requirements.txt"):
        os.utime(changed, (later + 1, later + 1))
        assert prebuild.read_by_the_build(page, build) and prebuild.due(cache, page)
        os.utime(changed, (later - 1, later - 1))
    tree.unlink()
    assert prebuild.prebuild([page], cache, 1, 60) == 0
    assert executed[-1] == ["reproducibility.ipynb"]
