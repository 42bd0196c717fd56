"""markovlib rerun: one chapter executed with the reader's chain, written as a notebook
and an HTML page whose Markdown reads like the book's page (no raw MyST roles)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import inprocess
import nbformat
import pytest

from markovlib.chains import binary
from markovlib.companion.myst_markdown import glued_values, render_roles
from markovlib.runs.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]
RAW_ROLE = re.compile(r"\{[a-z:]+\}`")
PREFIX = "application/papermill.record/"


def _glued(name: str, **data) -> nbformat.NotebookNode:
    """A display_data output as myst-nb's glue(name, value, display=False) writes it."""
    return nbformat.v4.new_output(
        "display_data",
        data={PREFIX + mime.replace("_", "/"): v for mime, v in data.items()},
        metadata={"scrapbook": {"name": name, "mime_prefix": PREFIX}},
    )


CELLS = {
    "text": "Rate {glue:text}`h:.4f` nats over {glue:text}`n_runs`, {glue:}`scale` "
    "edition ({glue:md}`scale:myst`), pi_1 = {glue:text}`pi1:.2f`, d = {glue}`d`; "
    "missing {glue:text}`nope:.2f` and {glue:}`nope`.",
    "refs": "{numref}`fig-paths` shows paths; see {doc}`framework`, "
    "{cite}`makkuva2025attention`, {cite:p}`a,b`, {math}`p + q` and "
    "{numref}`fig-elsewhere`.",
    "admonition": ":::{admonition} What this page checks\n:class: important\n\n"
    "The rate is {glue:text}`h:.2f`.\n:::",
    "theorem": "```{prf:theorem} Saddle; Thm 3 of Makkuva et al.\n:label: thm-saddle\n"
    "\nA saddle.\n```\n\n```{prf:proof} (sketch)\nCurvature.\n```\n\n"
    "By {prf:ref}`thm-saddle`.",
    "nested": "::::{note}\n```{prf:definition}\nInner.\n```\n::::\n(sec-x)=\n## Code",
    "code": "```bash\npapermill a.ipynb b.ipynb\n```",
}
EXPECTED = {
    "text": "Rate 0.5394 nats over 2 runs, `smoke` edition (`smoke`), pi_1 = 0.25, "
    "d = 8; missing (not computed) and (not computed).",
    "refs": "Figure 1 shows paths; see *Transformers meet Markov chains*, "
    "[makkuva2025attention], [a, b], $p + q$ and the figure “elsewhere”.",
    "admonition": "**What this page checks**\n\nThe rate is 0.54.",
    "theorem": "**Theorem (Saddle; Thm 3 of Makkuva et al.).**\n\nA saddle.\n\n"
    "**Proof (sketch).**\n\nCurvature.\n\nBy the theorem “Saddle”.",
    "nested": "**Note**\n\n**Definition.**\n\nInner.\n\n## Code",
    "code": "```bash\npapermill a.ipynb b.ipynb\n```",
}


@pytest.fixture
def notebook():
    glue = nbformat.v4.new_code_cell("glue(...)")
    glue.outputs = [
        _glued("h", text_plain="0.539418969889032"),
        _glued("n_runs", text_plain="'2 runs'"),
        _glued(
            "scale",
            text_markdown="`smoke`",
            text_plain="<IPython.core.display.Markdown object>",
        ),
        _glued("pi1", text_plain="np.float64(0.25)"),
        _glued("d", text_plain="8"),
    ]
    figure = nbformat.v4.new_code_cell("plot()")
    figure.metadata["mystnb"] = {
        "figure": {"name": "fig-paths", "caption": "Paths of {glue:text}`n_runs`."}
    }
    prose = [nbformat.v4.new_markdown_cell(text) for text in CELLS.values()]
    return nbformat.v4.new_notebook(cells=[glue, figure, *prose])


def test_glued_values_are_the_bundles_without_the_prefix(notebook):
    values = glued_values(notebook)
    assert list(values) == ["h", "n_runs", "scale", "pi1", "d"]
    assert values["h"] == {"text/plain": "0.539418969889032"}
    assert values["scale"]["text/markdown"] == "`smoke`"


def test_render_roles_writes_plain_markdown(notebook):
    titles = {"framework": "Transformers meet Markov chains"}
    rendered = render_roles(notebook, titles)
    cells = rendered.cells
    assert cells[2].cell_type == "markdown"  # the caption under the figure
    assert cells[2].source == "**Figure 1.** Paths of 2 runs."
    for (name, want), cell in zip(EXPECTED.items(), cells[3:], strict=True):
        assert cell.source == want, name
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert not RAW_ROLE.search(text)
    assert "{glue" not in text and "{numref" not in text and "```{" not in text
    assert notebook.cells[2].source == CELLS["text"]  # the input is left as it was
    nbformat.validate(rendered)


@pytest.mark.parametrize(
    "args, says",
    [
        (["nope", "--p", "0.3", "--q", "0.9"], "argument CHAPTER: must be one of"),
        (["multi_state", "--p", "0.3", "--q", "0.9"], "has no parameter q (it takes k"),
        (["multi_state", "--set", "kk=4"], "'kk=4' is not NAME=VALUE with NAME one"),
        (["multi_state", "--set", "k=4x"], "argument --set: k must be an integer"),
        (["multi_state", "--set", "k=40"], "k must be an integer in [2, 12]; got 40"),
        (["ccmc", "--set", "seed=2"], "is not NAME=VALUE"),
        (["framework", "--p", "1.5", "--q", "0.9"], "argument --p"),
        (["global_minimum", "--p", "1", "--q", "0.9"], "argument --p"),
        (["framework", "--p", "0.3", "--q", "0.9", "--out", "data/x"], "inside"),
        (["framework", "--out", ".github/x"], "inside"),
        (["framework", "--out", ".ci/x"], "inside"),
        (["framework", "--out", "benchmarks/results/x"], "inside"),
        (  # issue 71: it ran with 0.3 without a word
            ["framework", "--p", "0.4", "--set", "p=0.3"],
            "argument --set: 'p=0.3' conflicts with --p 0.4; give p once",
        ),
        (
            ["multi_state", "--set", "k=4", "--set", "k=5"],
            "argument --set: 'k=5' conflicts with another --set; give k once",
        ),
    ],
)
def test_rerun_refuses_bad_input_in_one_line(args, says, capsys, monkeypatch):
    from markovlib.cli import main

    monkeypatch.chdir(ROOT)
    try:
        code = main(["rerun", *args])
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err, err
    assert not (ROOT / "data" / "x").exists()


def test_rerun_takes_each_chapters_own_parameters(monkeypatch):
    """--set NAME=VALUE typed as the chapter's default; --p/--q only where the chapter
    has them (each chapter's parameters, before any work)."""
    from types import SimpleNamespace

    from markovlib.cli.rerun import parameters

    source = ROOT / "book" / "multi_state.ipynb"
    args = SimpleNamespace(p=0.7, q=None, params=["k=4"])
    assert parameters(args, source) == {"p": 0.7, "k": 4}
    ccmc = SimpleNamespace(p=None, q=None, params=["sigma=0.5", "gen_len=200"])
    assert parameters(ccmc, ROOT / "book" / "ccmc.ipynb") == {
        "sigma": 0.5,
        "gen_len": 200,
    }


def test_every_listed_parameter_can_be_set():
    """Issue 71: the CCMC chapter's listed n_traj and gen_len could not be set
    (`--set n_traj=100`: "must be an integer >= 10; got 100.0", their default None
    typed as float). Every chapter's every listed parameter set with --set comes out
    of its own type, and the chapter's check takes it; 'none' sets an optional one
    back to None."""
    from types import SimpleNamespace

    from markovlib.cli.rerun import parameters
    from markovlib.companion.notebook import (
        CHAPTER_RULES,
        chapter_parameters,
        check_chapter_parameters,
    )

    for chapter, rules in CHAPTER_RULES.items():
        source = ROOT / "book" / f"{chapter}.ipynb"
        defaults = chapter_parameters(source)
        for name, rule in rules.items():
            value = rule.low if defaults[name] is None else defaults[name]
            text = str(value).lower() if isinstance(value, bool) else str(value)
            args = SimpleNamespace(p=None, q=None, params=[f"{name}={text}"])
            given = parameters(args, source)
            assert given == {name: value} and type(given[name]) is type(value), name
            check_chapter_parameters(chapter, **{**defaults, **given})
    ccmc = SimpleNamespace(p=None, q=None, params=["n_traj=100", "gen_len=none"])
    given = parameters(ccmc, ROOT / "book" / "ccmc.ipynb")
    assert given == {"n_traj": 100, "gen_len": None}


def test_help_lists_rerun_and_its_chapters(capsys):
    from markovlib.cli import main

    with pytest.raises(SystemExit):
        main(["rerun", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "multi_state (k p)" in text and "ccmc (k prompt_len sigma" in text
    assert "--set NAME=VALUE" in text


def test_rerun_terminal_reads_like_a_progress_report(tmp_path):
    """Issue 63: no papermill cell log, no object reprs nor figure lines; what it
    trains, the training bar, the chapter's verdicts and its page, in a few lines
    (the bar's updates apart: its carriage returns); the notebook and page it writes
    read like the book's (:func:`_reads_like_the_book`)."""
    env = {**os.environ, "MARKOVLIB_RESULTS": str(tmp_path / "store")}
    args = "saddles --p 0.3 --q 0.9 --scale smoke --out".split()
    done = subprocess.run(
        [sys.executable, "-m", "markovlib", "rerun", *args, str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=300,
    )  # bytes: text=True would read the bar's carriage returns as newlines
    done.stdout, done.stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout + done.stderr
    for never in ("Executing", " at 0x", "<Figure size", "Ending Cell"):
        assert never not in text, never
    assert text.count("\n") <= 13, text
    assert done.stdout.split("\n")[:3] == [
        "executing saddles.ipynb with seed=0, scale=smoke, p=0.3, q=0.9",
        done.stdout.split("\n")[1],
        "The exact claims of this chapter hold at the smoke scale (asserted above).",
    ] and re.fullmatch(r"saddles: ran in \d+ s", done.stdout.split("\n")[1])
    assert re.search(r"^  thm3 +reproduced +exact +-0\.0375$", done.stdout, re.M)
    assert done.stdout.endswith(
        f"HTML page: {tmp_path / 'out' / 'html' / 'book' / 'saddles.html'}\n"
    )
    [note] = [ln for ln in done.stderr.split("\n") if ln.startswith("markovlib:")]
    assert note.startswith(
        "markovlib: training 16 runs (30 steps, batch 4 × length 64)"
    )
    assert "\rtraining: 100%" in done.stderr and done.stderr.count("\n") == 2
    _reads_like_the_book(tmp_path / "out", done.stdout)


def _reads_like_the_book(out: Path, stdout: str) -> None:
    """The re-run's notebook and page read like the book's (one re-run of saddles
    serves both tests: issue 69, a re-run of framework took 21 s): glued values in
    the text, no raw role; the page with the book's theme, its own MathJax (no CDN),
    the paper cited, figures numbered, and whose chain it ran."""
    notebook, page = out / "saddles.ipynb", out / "html" / "book" / "saddles.html"
    assert f"notebook: {notebook}" in stdout and f"HTML page: {page}" in stdout
    nb = nbformat.read(str(notebook), as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert not RAW_ROLE.search(text), RAW_ROLE.findall(text)
    rate = f"{binary(0.3, 0.9).entropy_rate():.4f}"  # the chapter's round(..., 4)
    for shown in ("($p + q =$ 1.2)", f"($H_{{\\rm rate}} =$ {rate},"):
        assert shown in text, shown
    html = page.read_text()
    assert 'src="../_static/mathjax/tex-chtml.js"' in html and "cdn" not in html
    assert "sphinx-book-theme.css" in html
    shown = r'\(p + q =\)</span> <span class="output text_plain">1.2</span>'
    assert shown in html and rate in html
    assert 'class="pasted-text"' in html  # {glue:text} with its format
    assert "Makkuva" in html and '<span class="std std-numref">Fig. 1</span>' in html
    assert "{doc}" not in html and "{glue" not in html
    assert "re-run with seed=0, scale=smoke, p=0.3, q=0.9" in html  # whose chain


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_chapter_progress_updates_one_line_and_shows_only_training():
    """On a terminal: "<chapter>: i of n cells" rewritten in place, cleared for a
    markovlib: line and the training bar (not redrawn over a running bar); figures'
    reprs, prints and warnings stay in the notebook."""
    from markovlib.companion.chapter_runner import ChapterProgress

    out = _Terminal()
    progress = ChapterProgress("saddles", 3, out)
    assert {
        ("log_output", False),
        ("progress_bar", False),
    } <= progress.options().items()
    progress.cell_start(cell_index=0)
    progress.stdout("<Figure size 700x400 with 1 Axes>\nH(pi) = 0.5623\n")
    progress.cell_start(cell_index=1)
    progress.stderr("markovlib: training 4 runs on cpu\n\rtraining:   0%|  | 0/4 runs")
    progress.cell_start(cell_index=2)
    progress.stderr("\rtraining: 100%|##| 4/4 runs")
    progress.stderr("\nUserWarning: x\n")
    progress.stdout("markovlib: a partial")
    progress.close()
    assert out.getvalue() == (
        "\r\x1b[Ksaddles: 0 of 3 cells\r\x1b[Ksaddles: 1 of 3 cells\r\x1b[K"
        "markovlib: training 4 runs on cpu\n\rtraining:   0%|  | 0/4 runs"
        "\rtraining: 100%|##| 4/4 runs\n"
    )


def test_rerun_failure_is_a_few_lines_and_names_the_partial_notebook(
    tmp_path, monkeypatch, capsys
):
    """A cell that raises: the cell, the end of its traceback and the notebook."""
    import papermill as pm

    from markovlib.cli import rerun
    from markovlib.cli.errors import CommandFailed, report
    from markovlib.companion import publish

    def fails(source, target, params, **options):
        target.write_text("{}")
        trace = ["\x1b[0;31m---------\x1b[0m", "Cell In[7], line 2", "ValueError: bad"]
        raise pm.PapermillExecutionError(7, 7, "x", "ValueError", "bad", trace)

    monkeypatch.setattr(publish, "execute_notebook", fails)
    source = ROOT / "book" / "framework.ipynb"
    with pytest.raises(CommandFailed) as failed:  # main prints it (report): exit 1
        rerun.execute(ROOT, source, tmp_path, {"p": 0.3})
    assert report("rerun", failed.value) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "cell 7 failed:",
        "  Cell In[7], line 2",
        "  ValueError: bad",
        "markovlib rerun: error: framework.ipynb failed (ValueError: bad); the "
        f"partial notebook: {tmp_path / 'framework.ipynb'}",
    ]


def test_a_completed_rerun_removes_the_stale_interrupted_notebook(
    tmp_path, monkeypatch
):
    """Issue 71: after a successful re-run, the <chapter>.interrupted.ipynb that an
    earlier, cut-off one set aside stayed beside the finished notebook."""
    from markovlib.cli import rerun
    from markovlib.companion import publish

    stale = tmp_path / "framework.interrupted.ipynb"
    stale.write_text("{}")

    def runs(source, target, params, **options):
        target.write_text("{}")

    monkeypatch.setattr(publish, "execute_notebook", runs)
    monkeypatch.setattr(rerun, "page_after", lambda *a: 0)
    source = ROOT / "book" / "framework.ipynb"
    assert rerun.execute(ROOT, source, tmp_path, {"p": 0.3}) == 0
    assert not stale.exists() and (tmp_path / "framework.ipynb").exists()


@pytest.mark.parametrize("verbose", [True, False])
def test_verbose_shows_papermills_log_of_each_cell_and_its_output(
    verbose, tmp_path, monkeypatch, capfd
):
    """`markovlib rerun --verbose` (the README names it): papermill's own log on stderr,
    each cell as it runs with its printed output, in a real kernel; without it, none of
    that (the progress line only). A chapter of two cells stands for the book's."""
    from markovlib.cli import rerun

    book = tmp_path / "book"
    book.mkdir()
    parameters = nbformat.v4.new_code_cell("p = 0.5")
    parameters.metadata["tags"] = ["parameters"]
    said = nbformat.v4.new_code_cell('print(f"cell output with p = {p}")')
    nb = nbformat.v4.new_notebook(cells=[parameters, said])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, book / "tiny.ipynb")
    monkeypatch.setattr(rerun, "page_after", lambda *a: 0)
    out = tmp_path / "out"
    out.mkdir()
    assert rerun.execute(tmp_path, book / "tiny.ipynb", out, {"p": 0.3}, verbose) == 0
    err = capfd.readouterr().err
    logged = re.findall(r"Executing Cell (\d+)-+", err)  # a progress bar before some
    assert logged == (["1", "2", "3"] if verbose else []), err  # + the injected cell
    assert ("cell output with p = 0.3" in err) is verbose, err
    done = nbformat.read(out / "tiny.ipynb", as_version=4)
    assert done.cells[-1].outputs[0]["text"] == "cell output with p = 0.3\n"


def test_rerun_refuses_a_read_only_store_before_any_work(tmp_path):
    store = tmp_path / "store"
    ResultStore(store)  # an existing store, then made read-only
    for path in (store, *store.iterdir()):
        path.chmod(0o555 if path.is_dir() else 0o444)
    env = {**os.environ, "MARKOVLIB_RESULTS": str(store)}
    done = inprocess.run(  # refused before any work: in this process (issue 51)
        "rerun", "framework", "--scale", "smoke", "--out", tmp_path / "out", env=env
    )
    assert done.returncode == 1 and "not writable" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # refused before the chapter ran


def test_a_page_that_does_not_build_is_one_line_and_keeps_the_notebook(
    tmp_path, monkeypatch
):
    """The page is built after the chapter ran: a failed build is one line (its last
    line), which `markovlib rerun` prints beside the executed notebook's path (exit
    1); no page is left half written, the build folder stays for a look."""
    from markovlib.companion import publish

    failed = subprocess.CompletedProcess([], 1, stdout="", stderr="x\nSphinx: boom\n")
    monkeypatch.setattr(publish, "jupyter_book", lambda *a, **k: failed)
    nb = nbformat.v4.new_notebook()
    with pytest.raises(
        RuntimeError, match="^the page of framework did not build: Sphinx: boom$"
    ):
        publish.build_page(ROOT, "framework", nb, tmp_path, "re-run with p=0.3", {})
    assert not (tmp_path / "html").exists() and (tmp_path / ".page").is_dir()


def test_a_one_chapter_page_resolves_every_cross_reference(tmp_path):
    """Issue 70: the trapped page, built alone as `markovlib rerun` builds it, showed
    '(`fig-blm-trap` shows ...)': a reference to another chapter's figure that a
    one-chapter build cannot resolve. Now it names that chapter (its own figures need
    its outputs: this notebook is not executed here)."""
    import re

    from markovlib.companion.myst_markdown import chapter_labels, chapter_titles
    from markovlib.companion.publish import build_page

    labels, titles = chapter_labels(ROOT / "book"), chapter_titles(ROOT / "book")
    foreign = {k for k, v in labels.items() if v != "trapped"}
    nb = nbformat.read(str(ROOT / "book" / "trapped.ipynb"), as_version=4)
    assert any(f"`{label}`" in c.source for c in nb.cells for label in foreign)
    page = build_page(ROOT, "trapped", nb, tmp_path, "re-run with p=0.3", titles)
    text = re.sub(r"<[^>]+>", " ", page.read_text())  # the words a reader sees
    raw = sorted(label for label in foreign if re.search(rf"\b{label}\b", text))
    assert raw == [], raw
    assert "a figure of Bad local minima" in re.sub(r"\s+", " ", text)
