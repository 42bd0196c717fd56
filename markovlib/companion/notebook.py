"""What the book's pages need beyond the maths: glue, the chapters' parameter rules,
the "Re-run this page" box, build facts. (A re-run notebook's Markdown:
:mod:`markovlib.companion.myst_markdown`; chapters run as notebooks:
:mod:`markovlib.companion.chapter_runner`.)

``glue`` is myst-nb's where myst-nb is installed (the book build, Binder) and a plain
display elsewhere (Colab, a bare Jupyter), so that every chapter imports and runs in all
of them.
"""

from __future__ import annotations

import ast
import html
import logging
import math
import numbers
import os
import platform
import subprocess
import sys
import traceback
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .._version import repository_url
from ..colab import clone_command
from ..presets import PRESETS, resolve
from ..train import cpu_model
from .chapter_rules import (
    CHAPTER_RULES,
    SEED_RULE,
    Range as _Range,
    check_range as _check_range,
)

__all__ = [
    "REPOSITORY",
    "BRANCH",
    "glue",
    "glue_scale",
    "glue_all",
    "check_chapter_parameters",
    "CHAPTER_RULES",
    "binder_url",
    "colab_url",
    "install_requirement",
    "colab_cell",
    "rerun_box",
    "chapter_parameters",
    "build_info",
    "shown_number",
    "page_table",
]

# owner/name of the public repository (pyproject.toml's [project.urls], the one place)
REPOSITORY = repository_url().removeprefix("https://github.com/")
BRANCH = "main"


def find_repository(start: str | Path | None = None) -> Path | None:
    """The clone of this book that holds ``start`` (default: the working directory): the
    first folder at or above it with ``_toc.yml`` and ``book/``; None outside a clone
    (an installed markovlib has no chapters)."""
    here = Path(start or Path.cwd()).resolve()
    return next(
        (
            d
            for d in (here, *here.parents)
            if (d / "_toc.yml").is_file() and (d / "book").is_dir()
        ),
        None,
    )


def glue(name: str, value, display: bool = True) -> None:
    """myst-nb's ``glue`` (values referenced from the prose); without myst-nb, show the
    value or nothing."""
    try:  # optional: the book's dependencies (myst-nb, IPython), not the library's
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show  # optional, as above

            show(value)
        return
    myst_glue(name, value, display=display)


def shown_number(value, digits: int = 4) -> str:
    """A table cell as the book prints it: floats to ``digits`` significant digits
    without a negative zero, integers with thousands separators, yes/no for truth
    values; anything else as ``str``."""
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            return str(float(value))
        text = f"{float(value):.{digits}g}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text
    return str(value)


def page_table(frame: pd.DataFrame, digits: int = 4, *, index: bool = False):
    """``frame`` as a page shows it (a pandas Styler): every number through
    :func:`shown_number`, no index column and no index- or column-name rows;
    ``index=True`` keeps the index's values as the first columns."""
    frame = frame.reset_index() if index else frame.copy()
    frame.columns.names = [None] * frame.columns.nlevels
    style = frame.style.format(lambda v: shown_number(v, digits)).hide(axis="index")
    return style.set_table_attributes('class="dataframe"')


def glue_scale(S, n_seeds: int) -> None:
    """Glue the edition a page was built at: ``scale_name``, ``seq_len``, ``steps``,
    ``n_seeds`` and ``n_runs`` ("1 run", "3 runs")."""
    from IPython.display import Markdown  # optional: the book's dependency (IPython)

    glue("scale_name", Markdown(f"`{S.name}`"), display=False)
    glue("scale_text", S.name, display=False)  # plain text, for pages that paste it
    glue("seq_len", int(S.seq_len), display=False)
    glue("steps", int(S.steps), display=False)
    glue("n_seeds", int(n_seeds), display=False)
    glue("n_runs", f"{n_seeds} run{'s' if n_seeds != 1 else ''}", display=False)


def glue_all(values: dict | None = None, /, **named) -> None:
    """Glue every value of ``values`` and every keyword argument, without displaying
    them (a chapter's numbers that its prose quotes)."""
    for name, value in {**(values or {}), **named}.items():
        glue(name, value, display=False)


class ChapterParameterError(ValueError):
    """A chapter's parameter that is out of range or unknown; in a notebook IPython
    shows this sentence alone (``_render_traceback_``), not the stack."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def papermill_parameters() -> list[str]:
    """The names papermill assigned in the running kernel: the ``# Parameters`` cell it
    injects after the ``parameters`` cell (IPython's ``In``); none outside papermill."""
    try:  # optional: the book's dependency (IPython)
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    cells = [] if shell is None else shell.user_ns.get("In", [])
    injected = [c for c in cells if str(c).startswith("# Parameters\n")]
    try:
        tree = ast.parse(injected[-1]) if injected else ast.Module(body=[])
    except SyntaxError:
        return []
    return [
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and not target.id.startswith("PAPERMILL_")
    ]


_IOSTREAM = ("ipykernel", "iostream.py")


class _KernelShutdownRace(logging.Filter):
    """Drop ipykernel 7.4.0's log of its own shutdown race: after ``shutdown_request``
    the control thread publishes "idle" through an IOPub event pipe that the exiting
    main thread has just closed (``IOPubThread.schedule``; ipykernel PR 1518 mended
    the ``_really_send`` side only): a ``ZMQError`` ENOTSOCK raised in ipykernel's
    ``iostream.py``, logged by pyzmq's ``ZMQStream`` through tornado's log with its
    stack under a chapter's one-line error (CI of 2026-11-29). Any other record
    passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        # ipykernel's zmq, not imported here; its ENOTSOCK, not the OS's (Windows)
        zmq = sys.modules.get("zmq")
        exc = record.exc_info[1] if record.exc_info else None
        if (
            zmq is None
            or not isinstance(exc, zmq.ZMQError)
            or exc.errno != zmq.ENOTSOCK
        ):
            return True
        files = (f.f_code.co_filename for f, _ in traceback.walk_tb(exc.__traceback__))
        return not any(Path(name).parts[-2:] == _IOSTREAM for name in files)


def quiet_kernel_shutdown_race() -> None:
    """Where ipykernel is imported (a kernel), install :class:`_KernelShutdownRace` on
    tornado's log, once (a chapter's re-run box and parameter check call it;
    ``markovlib book`` and ``rerun`` send their kernels' log to /dev/null anyway)."""
    if "ipykernel" not in sys.modules:
        return
    log = logging.getLogger("tornado.general")
    if not any(isinstance(f, _KernelShutdownRace) for f in log.filters):
        log.addFilter(_KernelShutdownRace())


def check_chapter_parameters(chapter: str, **params) -> None:
    """Refuse a chapter's bad parameters in its first code cell:
    :class:`ChapterParameterError` (a ``ValueError``) naming the parameter and its
    range, or a parameter papermill gave that the chapter does not have.

    Every chapter takes ``seed`` (an integer >= 0) and ``scale``; the others follow the
    chapter's rules (``CHAPTER_RULES``). Parameters are checked in the order given, so
    the first one out of range is named. In a kernel, ipykernel's shutdown race is kept
    off the page (:func:`quiet_kernel_shutdown_race`).
    """
    quiet_kernel_shutdown_race()
    try:
        known = [*CHAPTER_RULES.get(chapter, {}), "seed", "scale"]
        unknown = [n for n in papermill_parameters() if n not in known]
        if unknown:
            raise ValueError(
                f"{chapter} has no parameter {unknown[0]!r} (given to papermill); its "
                f"parameters are {', '.join(known)}"
            )
        _check_parameters(chapter, params)
    except ValueError as e:
        raise ChapterParameterError(str(e)) from None


def _check_parameters(chapter: str, params: dict) -> None:
    if chapter not in CHAPTER_RULES:
        raise ValueError(
            f"chapter must be one of {', '.join(map(repr, CHAPTER_RULES))}"
        )
    rules = {
        "seed": SEED_RULE,
        "scale": ("auto", *PRESETS),
        **CHAPTER_RULES[chapter],
    }
    for name, value in params.items():
        if name not in rules:
            raise ValueError(f"{chapter} has no parameter {name!r}")
        rule = rules[name]
        if isinstance(rule, _Range):
            _check_range(name, value, rule, params)
        elif value not in rule:
            raise ValueError(
                f"{name} must be one of {', '.join(map(repr, rule))}; got {value!r}"
            )
    if chapter == "framework" and params.get("p", 1) + params.get("q", 1) == 0:
        raise ValueError("p + q must be > 0 (p = q = 0 never switches)")
    if (
        chapter == "initialisation"
        and abs(params.get("p", 0) + params.get("q", 0) - 1) < 1e-9
    ):
        raise ValueError(
            "p + q must differ from 1 (at p + q = 1 the chain is i.i.d.: no "
            "saddle, no basins)"
        )


def binder_url(chapter: str) -> str:
    """A mybinder.org link that opens ``book/<chapter>.ipynb`` in the repository's
    Binder image."""
    return (
        f"https://mybinder.org/v2/gh/{REPOSITORY}/{BRANCH}"
        f"?urlpath=tree/book/{chapter}.ipynb"
    )


def colab_url(chapter: str) -> str:
    """A Colab link that opens ``book/<chapter>.ipynb`` straight from GitHub."""
    return (
        f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}"
        f"/book/{chapter}.ipynb"
    )


def install_requirement() -> str:
    """markovlib from the repository's main branch, as pip takes it (no runs)."""
    return f"markovlib @ git+https://github.com/{REPOSITORY}@{BRANCH}"


def colab_cell() -> str:
    """The source of every chapter's first cell (``tools/notebooks.py furnish``): in
    Colab, a shallow clone of the repository's main branch (what the Colab link
    opens) into the working folder, then :func:`markovlib.colab.install` run from it;
    elsewhere nothing."""
    clone, url = REPOSITORY.rsplit("/", 1)[-1], f"https://github.com/{REPOSITORY}"
    git = " ".join(clone_command(url, clone, BRANCH)[:-2])  # then the URL, the folder
    return (
        "# In Google Colab: a shallow clone of this book (its library and the paper\n"
        "# edition's runs, about 75 MB) and markovlib installed from it; anywhere\n"
        "# else this cell does nothing.\n"
        "import os\nimport runpy\nimport subprocess\nimport sys\n\n"
        'if "google.colab" in sys.modules:\n'
        f"    clone = {clone!r}\n"
        "    if not os.path.isdir(clone):\n"
        f"        url = {url!r}\n"
        f"        git = {git!r}\n"
        "        subprocess.run([*git.split(), url, clone], check=True)\n"
        '    print(runpy.run_path(f"{clone}/markovlib/colab.py")["install"](clone))'
    )


def _literal(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)


class RerunBox:
    """The box at the top of each chapter: the parameters it was built with and how to
    re-run it."""

    def __init__(self, chapter: str, params: dict, scale_used: str):
        self.chapter, self.params, self.scale_used = chapter, dict(params), scale_used

    def papermill_command(self) -> str:
        flags = " ".join(f"-p {k} {_literal(v)}" for k, v in self.params.items())
        return f"papermill book/{self.chapter}.ipynb {self.chapter}-mine.ipynb {flags}"

    def _repr_html_(self) -> str:
        e = html.escape
        rows = ", ".join(
            f"<code>{e(k)} = {e(_literal(v))}</code>" for k, v in self.params.items()
        )
        return (
            '<div class="admonition tip rerun-box">\n'
            '<p class="admonition-title">Re-run this page</p>\n'
            f"<p>Built with {rows} (scale used: <code>{e(self.scale_used)}</code>). "
            "Run it with your own parameters from a clone of the repository:</p>\n"
            '<pre class="rerun-command"><code>'
            f"{e(self.papermill_command())}</code></pre>\n"
            '<p>or open it on <a class="reference external" '
            f'href="{e(binder_url(self.chapter))}">Binder</a> '
            '(CPU image with markovlib) or <a class="reference external" '
            f'href="{e(colab_url(self.chapter))}">Colab</a> '
            "(the first cell installs markovlib there), edit the parameters cell and "
            "run all cells.</p>\n"
            "</div>"
        )

    def _repr_markdown_(self) -> str:
        """MyST for the book (the rerun cell renders its Markdown as MyST): a tip
        admonition in the page."""
        rows = ", ".join(f"`{k} = {_literal(v)}`" for k, v in self.params.items())
        return (
            ":::{admonition} Re-run this page\n:class: tip rerun-box\n\n"
            f"Built with {rows} (scale used: `{self.scale_used}`). Run it with your "
            "own parameters from a clone "
            "of the repository:\n\n"
            f"```bash\n{self.papermill_command()}\n```\n\n"
            f"or open it on [Binder]({binder_url(self.chapter)}) (CPU image "
            "with markovlib) or "
            f"[Colab]({colab_url(self.chapter)}) (the first cell installs markovlib "
            "there), edit the parameters "
            "cell and run all cells.\n:::\n"
        )


def rerun_box(chapter: str, **params) -> RerunBox:
    """The "Re-run this page" box for ``book/<chapter>.ipynb`` built with ``params``
    (display it); the chapter's first cell of code, so it checks the parameters
    first (:func:`check_chapter_parameters`: a bad one is one sentence)."""
    check_chapter_parameters(chapter, **params)
    root = find_repository()
    if root is not None and not (root / "book" / f"{chapter}.ipynb").exists():
        raise ValueError(f"no chapter book/{chapter}.ipynb")
    return RerunBox(chapter, params, resolve(params.get("scale", "auto")).name)


def chapter_parameters(path: str | Path) -> dict:
    """The default parameters of a chapter: the literal assignments of its
    ``parameters`` cell."""
    import nbformat  # optional: the book's dependency (nbformat)

    nb = nbformat.read(str(path), as_version=4)
    cell = next(
        (c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None
    )
    if cell is None:
        raise ValueError(f"{path} has no cell tagged 'parameters'")
    values = {}
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.Assign):
            values.update({t.id: ast.literal_eval(node.value) for t in node.targets})
        elif isinstance(node, ast.AnnAssign):
            values[node.target.id] = ast.literal_eval(node.value)
    return values


def _git_commit() -> str:
    try:
        out = subprocess.run(
            [
                "git",
                "-C",
                str(find_repository() or Path.cwd()),
                "rev-parse",
                "--short",
                "HEAD",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def build_info(
    packages: tuple[str, ...] = (
        "markovlib",
        "torch",
        "numpy",
        "scipy",
        "pandas",
        "matplotlib",
        "seaborn",
        "tqdm",
        "jupyter-book",
        "myst-nb",
        "sphinx",
        "papermill",
        "nbval",
    ),
) -> dict:
    """Facts about the machine and software this book was built with, read now (for the
    Reproducibility page)."""
    versions = {}
    for name in packages:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "not installed"
    cuda = torch.cuda.is_available()
    return {
        "built": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if cuda else "none",
        "forced_scale": os.environ.get("MARKOVLIB_SCALE", "") or "none",
        "versions": versions,
    }


def build_summary(info: dict, auto_scale: str) -> str:
    """The Reproducibility page's first paragraph (Markdown): when, from what and on
    what the book was built (``info``: :func:`build_info`), and the scale
    ``scale = "auto"`` ran as."""
    return (
        f"Built **{info['built']}** from commit `{info['commit']}` of "
        f"[{REPOSITORY}](https://github.com/{REPOSITORY}), on {info['cpu']} "
        f"({info['cpu_count']} logical cores, {info['torch_threads']} torch "
        f"thread{'s' * (info['torch_threads'] != 1)}), "
        f"GPU: {info['cuda']}; Python {info['python']} on {info['platform']}. "
        "Scale forced by "
        f"`MARKOVLIB_SCALE`: `{info['forced_scale']}`, "
        f'so `scale = "auto"` ran as **`{auto_scale}`**.'
    )


SCALE_FIELDS = (
    "steps",
    "batch_size",
    "seq_len",
    "seeds",
    "trap_seeds",
    "d_model",
    "eval_every",
    "eval_batches",
    "lr",
    "converges",
)


def scales_table():
    """One row per scale of :data:`markovlib.presets.PRESETS`: its name and
    :data:`SCALE_FIELDS`."""
    return pd.DataFrame(
        [
            {"scale": s.name, **{f: getattr(s, f) for f in SCALE_FIELDS}}
            for s in PRESETS.values()
        ]
    )


def settings_table() -> pd.DataFrame:
    """:func:`markovlib.runs.edition.settings_table` as the book prints it: the paper's
    figures named as the paper's in each source ("The paper's Fig 3(b) as ...")."""
    from ..runs import edition
    from .claims import paper_figures

    table = edition.settings_table()
    return table.assign(source=table["source"].map(paper_figures))


def build_checks(
    info: dict, defaults: dict, progress: pd.DataFrame, counts=None
) -> dict:
    """The Reproducibility page's claims as values: three scales, ``auto`` one of them,
    every chapter's ``defaults`` with ``seed`` and ``scale = "auto"``, markovlib and
    torch in ``info``, the edition's ``progress`` shipping no more than it has, and
    the page's count of runs shipped the manifest's (``counts``: runs shipped, wanted,
    listed, :func:`~markovlib.runs.edition.shipped_runs` by default)."""
    from ..runs import edition

    shipped, wanted, listed = counts or edition.shipped_runs()
    return {
        "three scales": set(PRESETS) == {"smoke", "cpu", "paper"}
        and len(scales_table()) == 3,
        "auto is a scale": resolve("auto").name in PRESETS,
        "every chapter takes seed, scale auto": len(defaults) >= 6
        and all("seed" in ps and ps["scale"] == "auto" for ps in defaults.values()),
        "markovlib and torch installed": "not installed"
        not in (info["versions"]["markovlib"], info["versions"]["torch"]),
        "edition progress": len(progress) > 20
        and bool((progress["shipped"] <= progress["runs"]).all()),
        "runs shipped as the manifest lists": shipped == listed <= wanted,
    }


__all__ += ["build_checks"]
