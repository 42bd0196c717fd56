"""The built book in a real browser: every page loaded in headless Chromium
(driven by Playwright).

``make browser`` (part of ``make test``) runs this against the strict smoke build;
``MARKOVLIB_SITE`` points it at another build (e.g. ``_build/html``). Each page must
load with no console error and no request leaving 127.0.0.1 (the site is self-contained:
MathJax, fonts and scripts are local), every image must load with a non-zero size, every
named figure of the chapter must be there with its caption, all math must be typeset by
MathJax with no raw TeX left, notebook pages must carry the Binder and Colab launch
buttons and the "Re-run this page" box, internal links must resolve (page and anchor),
and the text must stay readable in the theme's dark mode. Screenshots (light, full page,
or its first screen with ``MARKOVLIB_SHOTS=screen``; dark, first screen) go to
``_build/screenshots/`` with ``report.json``.

Chromium: ``$MARKOVLIB_CHROMIUM``, a system Chromium/Chrome, else Debian's ``chromium``
installed with apt-get (as root), else Playwright's own download; the tests skip, saying
so, only if all of these fail.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import nbformat
import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]


def _rule(path: Path):
    """The module at ``path`` alone: markovlib's package imports torch, 5 s in each
    browser process (2026-11-27)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# maths written as plain text (issue 49: "H_rate", "θ_π", "s_2/s_1", "2^16" on pages),
# not a name's part (ff.W_1): the rule the figures' texts are held to too
_RULES = _rule(ROOT / "markovlib" / "companion" / "pseudo_tex.py")
PSEUDO_TEX = _RULES.PSEUDO_TEX
# "Fig N" neither the book's own nor named as the paper's (issue 49)
_bare_figures = _RULES.bare_figures
SITE = Path(
    os.environ.get("MARKOVLIB_SITE") or ROOT / "_build" / "strict" / "_build" / "html"
).resolve()
SHOTS = ROOT / "_build" / "screenshots"
# whole pages (the default), or the first screen only with MARKOVLIB_SHOTS=screen
# (`make test`: a whole tall page's capture is 40 % of the stage's time, 2026-11-27)
FULL_PAGE = os.environ.get("MARKOVLIB_SHOTS", "full") != "screen"
BOOK = ROOT / "book"
SKIP_DIRS = {
    "_static",
    "_sources",
    "_images",
    "jupyter_execute",
    "_sphinx_design_static",
}
PAGES = (
    sorted(
        str(p.relative_to(SITE))
        for p in SITE.rglob("*.html")
        if not SKIP_DIRS & set(p.relative_to(SITE).parts)
    )
    if SITE.is_dir()
    else []
)
CHROMIUM_FLAGS = [
    # offline: every host but 127.0.0.1 (bypassed as loopback) through a proxy at a
    # closed port of this machine, so nothing leaves it (_offline records any attempt)
    "--proxy-server=http://127.0.0.1:9",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPORT: dict[str, dict] = {}

playwright = pytest.importorskip(
    "playwright.sync_api",
    reason="playwright is pinned in requirements.txt; run make install",
)


def _system_chromium() -> str | None:
    candidates = [os.environ.get("MARKOVLIB_CHROMIUM", "")] + [
        shutil.which(n) or ""
        for n in (
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        )
    ]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def _install_chromium() -> tuple[str | None, str]:
    """Try Debian's package (as root), then Playwright's download; return (executable or
    None, what happened)."""
    log = []
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
        for cmd in (install, ["apt-get", "update"], install):
            r = subprocess.run(
                cmd, capture_output=True, text=True, env=env, timeout=900
            )
            log.append(f"{' '.join(cmd)}: exit {r.returncode}")
            if cmd is install and r.returncode == 0:
                break
        if _system_chromium():
            return _system_chromium(), "; ".join(log)
    r = subprocess.run(
        [sys.executable, "-m", "playwright", "install", "chromium"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    log.append(f"playwright install chromium: exit {r.returncode}")
    return ("playwright" if r.returncode == 0 else None), "; ".join(log)


@pytest.fixture(scope="session")
def browser():
    executable, how = _system_chromium(), "found"
    if executable is None:  # one installer at a time (two pytest-xdist workers)
        with FileLock(os.path.join(tempfile.gettempdir(), "markovlib-chromium.lock")):
            executable, how = _system_chromium(), "found"
            if executable is None:
                executable, how = _install_chromium()
    if executable is None:
        pytest.skip(
            f"SKIPPED: no Chromium could be installed ({how}); install Debian's "
            "chromium or set MARKOVLIB_CHROMIUM"
        )
    with playwright.sync_playwright() as pw:
        kwargs = {} if executable == "playwright" else {"executable_path": executable}
        b = pw.chromium.launch(args=CHROMIUM_FLAGS, **kwargs)
        REPORT["_browser"] = {
            "executable": executable,
            "version": b.version,
            "how": how,
        }
        yield b
        b.close()


@pytest.fixture(scope="session")
def server():
    if not (SITE / "index.html").exists():
        pytest.fail(
            f"no built site at {SITE}: build it first (make book-strict, or make book "
            "and MARKOVLIB_SITE=_build/html)"
        )
    with _served(SITE) as url:
        yield url
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = sum(p.stat().st_size for p in SITE.rglob("*") if p.is_file())
    REPORT["_site"] = {
        "path": str(SITE),
        "bytes": size,
        "files": sum(1 for p in SITE.rglob("*") if p.is_file()),
    }
    report = SHOTS / "report.json"  # pytest-xdist: each worker adds its pages
    with FileLock(f"{report}.lock"):
        if os.environ.get("PYTEST_XDIST_WORKER") and report.is_file():
            REPORT.update({**json.loads(report.read_text()), **REPORT})
        report.write_text(json.dumps(REPORT, indent=1, sort_keys=True))


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _served(directory: Path):
    """``directory`` served on 127.0.0.1 in a thread; its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def _figure_names(stem: str) -> list[str]:
    path = BOOK / f"{stem}.ipynb"
    if not path.exists():
        return []
    nb = nbformat.read(path, as_version=4)
    return [
        c.metadata["mystnb"]["figure"]["name"]
        for c in nb.cells
        if c.cell_type == "code" and "figure" in c.metadata.get("mystnb", {})
    ]


_FETCHED: dict[str, tuple[int, str]] = {}


def _fetch(context, url: str) -> tuple[int, str]:
    if url not in _FETCHED:
        response = context.request.get(url)
        _FETCHED[url] = (response.status, response.text() if response.ok else "")
    return _FETCHED[url]


# Contrast ratio (WCAG) between each sampled text element's colour and the first opaque
# background behind it.
CONTRAST_JS = """(selectors) => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => { const f = c => { c /= 255; \
return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
                               return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const bg = el => { for (; el; el = el.parentElement) { \
const c = rgb(getComputedStyle(el).backgroundColor);
                       if (c.length >= 3 && (c.length === 3 || c[3] > 0.5)) return c; \
} return [255, 255, 255]; };
  const out = [];
  for (const sel of selectors) for (const el of \
[...document.querySelectorAll(sel)].slice(0, 5)) {
    if (!el.offsetParent || !el.textContent.trim()) continue;
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg(el));
    out.push([sel, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)]);
  }
  return out;
}"""
TEXT_SELECTORS = [
    "article p",
    "article li",
    "figcaption",
    ".rerun-box p",
    ".cell_output pre",
    ".admonition-title",
    "table td",
    ".proof p",
    "h1",
    "h2",
]


# Every <pre> (code cell, printed output) of the article whose content is wider than its
# box.
WIDE_PRE_JS = """() => [...document.querySelectorAll('article pre')]
  .filter(p => p.offsetParent && p.scrollWidth > p.clientWidth + 1)
  .map(p => [p.textContent.trim().split('\\n')[0].slice(0, 60), \
p.scrollWidth - p.clientWidth])"""
# Every figure image of a cell output: [src, displayed width / natural width].
FIGURE_SCALE_JS = """() => [...document.querySelectorAll('article .cell_output img, \
article figure img')]
  .filter(i => i.offsetParent && i.naturalWidth > 0)
  .map(i => [i.getAttribute('src'), \
i.getBoundingClientRect().width / i.naturalWidth])"""
# The scorecard's table: per body row, the cells' text and whether its last cell has a
# link.
SCORECARD_JS = """() => { const t = document.querySelector('#tab-scorecard') ||
    document.querySelector('article table');
  if (!t) return null;
  return [...t.querySelectorAll('tbody tr')].map(r => ({
    cells: [...r.querySelectorAll('td')].map(td => td.textContent.trim()),
    setting: !!r.querySelector('td details.sd-dropdown:not([open])'),
    link: (r.querySelector('td:last-child a[href]') || {}).href || null })); }"""


# a chapter's claims box (issue 49): its table's rows, and the box's text outside it
CLAIMS_BOX_JS = """() => { const box = [...document.querySelectorAll('.admonition')]
    .find(a => a.querySelector('table.claims-table'));
  if (!box) return null;
  const rest = box.cloneNode(true); rest.querySelector('table').remove();
  return {rest: rest.textContent.trim().split(/\\s+/).length,
    rows: [...box.querySelectorAll('table.claims-table tbody tr')].map(r => ({
      badge: !!r.querySelector('td:first-child .sd-badge'),
      cells: [...r.querySelectorAll(':scope > td')].map(td => td.textContent.trim()),
      details: !!r.querySelector('td details.sd-dropdown:not([open])')}))}; }"""


# a page's text with ``drop`` (CSS selectors) removed, whitespace runs as one space
TEXT_WITHOUT_JS = r"""(drop) => {
  const c = document.querySelector('main, article, body').cloneNode(true);
  c.querySelectorAll(drop).forEach(e => e.remove());
  return c.textContent.replace(/\s+/g, ' '); }"""
NOT_PROSE = "pre, code, script, style, mjx-container"
# TeX left in the text once MathJax ran: display or inline delimiters, environments;
# on a re-run page also a lone $ or an unrendered {glue}/{doc} role
RAW_TEX = re.compile(r"\$\$|\\\(|\\\[|\\begin\{")
RERUN_RAW = re.compile(r"\$|\\\(|\\\[|\{glue|\{doc\}")


def _pseudo_tex(text: str) -> list[str]:
    return [
        text[max(0, m.start() - 30) : m.start() + 15] for m in PSEUDO_TEX.finditer(text)
    ]


def _check_claims_box(stem: str, box) -> None:
    """Each of the chapter's scorecard claims on one line of its claims box: a badge,
    the claim with its details one click away, runs or a value, an interval; the box's
    prose around it short (it was 14-20 lines of bold text with five intervals)."""
    from markovlib.companion.claims import CLAIMS
    from markovlib.companion.verdicts import VERDICTS

    mine = [c for c in CLAIMS if c.chapter == stem]
    if not mine:
        assert box is None, f"{stem}: a claims table without claims"
        return
    assert box is not None, f"{stem}: no claims table in the claims box"
    assert len(box["rows"]) == len(mine), (stem, len(box["rows"]), len(mine))
    for c, row in zip(mine, box["rows"]):
        verdict, claim_text, runs, interval = row["cells"]
        assert row["badge"] and verdict in VERDICTS, (c.id, verdict)
        assert row["details"], (c.id, "no closed Details dropdown")
        assert re.search(r"\d", runs) or "not shipped" in runs, (c.id, runs)
        assert interval == "—" or re.fullmatch(r"(\d+–\d+ %(; )?)+", interval), (
            c.id,
            interval,
        )
    assert box["rest"] <= 120, f"{stem}: {box['rest']} words around the claims table"


def displayed_pt(scale: float) -> float:
    """Size as displayed of the smallest figure text: MIN_FONT_PT points at DPI pixels
    per inch is MIN_FONT_PT * DPI / 72 image pixels, shown at ``scale`` CSS pixels each
    (96 per inch)."""
    from markovlib.companion.figures.style import DPI, MIN_FONT_PT

    return MIN_FONT_PT * DPI / 96 * scale


def _check_scorecard(rows) -> None:
    from markovlib.companion.claims import CLAIMS
    from markovlib.companion.scorecard import MATHS, paper_figures
    from markovlib.companion.verdicts import VERDICTS

    assert rows is not None, "scorecard: no table"
    assert len(rows) == len(CLAIMS), f"scorecard: {len(rows)} rows for {len(CLAIMS)}"
    for claim, row in zip(CLAIMS, rows):
        # verdict first (phones); the setting one click away under the claim (issue
        # 49: a column of it made each row 10-20 lines tall)
        verdict, claim_text, measured, _ = row["cells"]
        assert row["setting"], (claim.id, "no closed Setting dropdown")
        # Sphinx's smart quotes print the claim's ' as ’; the page typesets the plain
        # names of MATHS (H_rate, θ_π, ...): the text up to the first of them
        named = paper_figures(claim.claim)  # "The paper's Fig 3(b)" (issue 49)
        plain = re.split("|".join(map(re.escape, MATHS)), named)[0]
        text = claim_text.replace("’", "'").replace("“", '"').replace("”", '"')
        assert text.startswith(plain), claim.id
        assert re.search(r"\d", measured.split(":")[-1]), (claim.id, measured)
        assert verdict in VERDICTS, (claim.id, verdict)
        assert row["link"] and urlparse(row["link"]).hostname == "127.0.0.1", (
            claim.id,
            row["link"],
        )


def _offline(context, external: list) -> None:
    """Append to ``external`` the URL of every request of ``context`` that is not for
    127.0.0.1 (or a data: or blob: URL). The browser cannot reach any other host: its
    proxy is a closed local port (:data:`CHROMIUM_FLAGS`). A listener, not a route: a
    route sent every request through this process (a quarter of a page's time)."""

    def seen(request):
        url = urlparse(request.url)
        if url.scheme not in ("data", "blob") and url.hostname != "127.0.0.1":
            external.append(request.url)

    context.on("request", seen)


@pytest.mark.skipif(
    not PAGES, reason=f"no built site at {SITE} (make book-strict first)"
)
@pytest.mark.parametrize("page", PAGES)
def test_page(page, browser, server):
    stem = Path(page).stem
    context = browser.new_context(viewport=DESKTOP)
    external, errors = [], []

    _offline(context, external)
    pg = context.new_page()
    pg.on(
        "console",
        lambda m: (
            errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None
        ),
    )
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    missing = []  # (status, URL) of every failed response: the console names no URL
    pg.on(
        "response",
        lambda r: missing.append((r.status, r.url)) if r.status >= 400 else None,
    )
    response = pg.goto(f"{server}/{page}", wait_until="load")
    assert response is not None and response.ok, (
        f"{page}: HTTP {response and response.status}"
    )
    pg.wait_for_load_state("networkidle")
    # MathJax 3 typesets on startup; wait for it (pages without math load no MathJax)
    pg.evaluate(
        "() => window.MathJax && MathJax.startup ? "
        "MathJax.startup.promise.then(() => true) : true"
    )
    # images: make lazy ones load, then wait for every one
    pg.evaluate("""() => Promise.all([...document.images].map(i => { \
i.loading = 'eager';
        return i.complete ? null : new Promise(r => { i.onload = i.onerror = r; }); \
}))""")
    images = pg.evaluate(
        "() => [...document.images].map(i => [i.getAttribute('src'), i.naturalWidth, "
        "i.naturalHeight])"
    )
    math = pg.evaluate("""() => ({
        math: document.querySelectorAll('.math').length,
        untypeset: [...document.querySelectorAll('.math')].filter(e => \
!e.querySelector('mjx-container')).length,
        errors: document.querySelectorAll('mjx-merror').length,
    })""")
    prose = pg.evaluate(TEXT_WITHOUT_JS, NOT_PROSE + ", textarea")
    math["raw"] = len(RAW_TEX.findall(prose))
    figures = {
        name: pg.evaluate(
            """(id) => { const f = document.getElementById(id);
        if (!f) return null; const img = f.querySelector('img'); \
const cap = f.querySelector('figcaption');
        return {tag: f.tagName, img: img ? img.naturalWidth : 0, \
caption: cap ? cap.textContent.trim() : ''}; }""",
            name,
        )
        for name in _figure_names(stem)
    }
    links = pg.evaluate(
        "() => [...document.querySelectorAll('a[href]')].map(a => a.href)"
    )
    launch = pg.evaluate(
        """() => [...document.querySelectorAll('.dropdown-launch-buttons a')]"""
        """.map(a => a.href)"""
    )
    rerun = pg.evaluate(
        "() => { const b = document.querySelector('.rerun-box'); return b ? "
        "b.textContent : null; }"
    )

    # code and printed output fit their column at 1280 px: no sideways scrolling
    wide_pre = pg.evaluate(WIDE_PRE_JS)
    # figure text as displayed: MIN_FONT_PT at DPI, scaled by displayed / natural width
    shown = pg.evaluate(FIGURE_SCALE_JS)
    small_text = [
        (src, round(displayed_pt(scale), 1))
        for src, scale in shown
        if displayed_pt(scale) < 9
    ]
    scorecard = pg.evaluate(SCORECARD_JS) if stem == "scorecard" else None
    claims_box = pg.evaluate(CLAIMS_BOX_JS)
    figure_text = f"{NOT_PROSE}, .caption-number, a[href*='#fig-']"
    bare_figures = _bare_figures(pg.evaluate(TEXT_WITHOUT_JS, figure_text))
    pseudo_tex = _pseudo_tex(pg.evaluate(TEXT_WITHOUT_JS, f"{NOT_PROSE}, .math"))

    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / (page.replace("/", "__").removesuffix(".html") + ".png")
    pg.screenshot(path=str(shot), full_page=FULL_PAGE)
    light_contrast = pg.evaluate(CONTRAST_JS, TEXT_SELECTORS)
    phone = _phone_view(pg, page, stem)
    # dark mode as a reader gets it: the theme's own switch, remembered in localStorage,
    # then a reload
    pg.evaluate(
        "() => { localStorage.setItem('mode', 'dark'); "
        "localStorage.setItem('theme', 'dark'); }"
    )
    pg.reload(wait_until="load")
    pg.evaluate(
        "() => window.MathJax && MathJax.startup ? "
        "MathJax.startup.promise.then(() => true) : true"
    )
    theme = pg.evaluate("() => document.documentElement.dataset.theme")
    dark_contrast = pg.evaluate(CONTRAST_JS, TEXT_SELECTORS)
    pg.screenshot(path=str(shot.with_name(shot.stem + "-dark.png")))

    # internal links: the page exists and so does the anchor
    broken = []
    for href in sorted(set(links)):
        url, fragment = urldefrag(href)
        if urlparse(url).hostname != "127.0.0.1":
            continue
        status, body = _fetch(context, url)
        if status != 200:
            broken.append(f"{href} (HTTP {status})")
        elif fragment and not re.search(rf'(id|name)="{re.escape(fragment)}"', body):
            broken.append(f"{href} (no anchor)")
    context.close()

    REPORT.setdefault(page, {}).update(
        {
            "images": len(images),
            "math": math["math"],
            "figures": len(figures),
            "internal_links": len(
                {urldefrag(h)[0] for h in links if urlparse(h).hostname == "127.0.0.1"}
            ),
            "screenshot": shot.name,
            "min_contrast_light": round(
                min((c for _, c in light_contrast), default=21), 2
            ),
            "min_contrast_dark": round(
                min((c for _, c in dark_contrast), default=21), 2
            ),
        }
    )

    REPORT[page]["widest_pre_overflow_px"] = max((w for _, w in wide_pre), default=0)
    REPORT[page]["smallest_figure_text_pt"] = round(
        min((displayed_pt(sc) for _, sc in shown), default=99), 1
    )
    _check_phone(page, stem, phone)
    assert not wide_pre, f"{page}: code or output wider than its column: {wide_pre[:5]}"
    assert not small_text, f"{page}: figure text below 9 pt as displayed: {small_text}"
    if scorecard is not None:
        _check_scorecard(scorecard)
    if (BOOK / f"{stem}.ipynb").exists():
        _check_claims_box(stem, claims_box)
    assert not bare_figures, (
        f"{page}: a figure not named as the paper's: {bare_figures}"
    )
    assert not pseudo_tex, f"{page}: maths as plain text: {pseudo_tex[:5]}"
    assert not external, f"{page} requested resources outside the site: {external[:5]}"
    # (the root's redirect page names no icon: a browser asks /favicon.ico, which the
    # site serves, html_extra_path; its 404 failed 2 of 4 fresh-clone runs)
    assert not errors, f"{page}: {errors[:5]}; failed responses {missing[:5]}"
    assert all(w > 0 and h > 0 for _, w, h in images), (
        f"{page}: images not loaded: {[i for i in images if not i[1]]}"
    )
    assert math["untypeset"] == 0 and math["errors"] == 0, (
        f"{page}: MathJax left {math}"
    )
    assert math["raw"] == 0, f"{page}: raw TeX in the text ({math['raw']} places)"
    assert not broken, f"{page}: broken internal links {broken[:10]}"
    for name, fig in figures.items():
        assert fig is not None, f"{page}: figure {name} missing"
        assert fig["tag"] == "FIGURE" and fig["img"] > 0 and fig["caption"], (
            f"{page}: figure {name}: {fig}"
        )
    assert theme == "dark", f"{page}: the theme did not switch to dark mode ({theme!r})"
    low = [
        (mode, s, round(c, 2))
        for mode, pairs in (("light", light_contrast), ("dark", dark_contrast))
        for s, c in pairs
        if c < 4.5
    ]
    assert not low, f"{page}: text below contrast 4.5:1 (light or dark mode): {low[:6]}"
    if (BOOK / f"{stem}.ipynb").exists():  # notebook pages
        assert any(
            h.startswith("https://mybinder.org/v2/gh/")
            and h.endswith(f"book/{stem}.ipynb")
            for h in launch
        ), launch
        assert any(
            h.startswith("https://colab.research.google.com/github/")
            and h.endswith(f"book/{stem}.ipynb")
            for h in launch
        ), launch
        if stem != "reproducibility":
            assert (
                rerun
                and f"papermill book/{stem}.ipynb" in rerun
                and "Binder" in rerun
                and "Colab" in rerun
            ), rerun
    if stem in {
        "framework",
        "global_minimum",
        "bad_local_minima",
        "saddles",
        "multi_state",
        "depth",
        "incontext",
        "ccmc",
    }:
        assert math["math"] > 0 and figures, (
            f"{page}: a chapter without math or figures"
        )


PHONE = {"width": 390, "height": 844}  # CSS pixels of a common phone, portrait
DESKTOP = {"width": 1280, "height": 900}
# Numbers in running text, tables and pasted (glued) values: a decimal with an optional
# exponent, not part of a word, a version ("3.11.7"), an address ("127.0.0.1") or an
# arXiv identifier ("arXiv:2402.13512").
DECIMAL = re.compile(r"(?<![\w.:])(\d*\.\d+|\d+\.)(?:[eE][-+−]?\d+)?(?![\w.])")
# The scorecard's first line (markovlib.companion.scorecard.summary)
SUMMARY = re.compile(
    r"the paper: \d+ rows: \d+ reproduced, \d+ partly,(?: \d+ with too few runs,)? "
    r"\d+ differs?, \d+ not tested; "
    r"(?:the paper as this book reads it: \d+ rows: [^;]+; )?"
    r"this book['’]s controls: \d+ rows: \d+ reproduced"
)
# What a reader sees: visible text (innerText skips what CSS hides) and the prose,
# tables and glued values without code, printed output or typeset maths.
READER_HIDES = NOT_PROSE + ", .cell_input, .highlight"
# Per scorecard row: the verdict cell's box, and the table's right edge, in CSS pixels.
SCORECARD_PHONE_JS = """() => { const t = document.querySelector('#tab-scorecard');
  if (!t) return null;
  return {right: t.getBoundingClientRect().right, width: window.innerWidth,
    verdicts: [...t.querySelectorAll('tbody tr')].map(r => { \
const td = r.querySelector('td'), b = td.getBoundingClientRect();
      return [td.textContent.trim(), b.left, b.right, b.width]; })}; }"""


def significant_digits(number: str) -> int:
    """Significant digits of a decimal as printed: "0.004726" → 4, "0.230000" → 6,
    "1.0e-15" → 2 (the mantissa's digits after leading zeros)."""
    mantissa = re.split(r"[eE]", number)[0].replace(".", "")
    return len(mantissa.lstrip("0")) or 1


def long_numbers(text: str) -> list[str]:
    """Decimals in ``text`` printed with more than 4 significant digits."""
    return [m.group(0) for m in DECIMAL.finditer(text) if significant_digits(m[0]) > 4]


# "1 seeds", "1 positions": a count of one with a plural noun (issue 41)
wrong_plurals = _RULES.wrong_plurals


def test_wrong_plurals_finds_one_with_a_plural():
    text = "look back exactly 1 positions; 1 seeds; 11 runs; 0.1 runs; seed-1 models"
    assert wrong_plurals(text) == ["1 positions", "1 seeds"]


def test_long_numbers_finds_what_a_reader_should_not_see():
    text = (
        "P(1|0) 0.004726386070925269 in 0.230000 hours; π_1 = 0.385, 1.0e-15, "
        "seed 123456, torch 2.13.0, 127.0.0.1, 0.1420, 2026-11-25, -0.0710, "
        "arXiv:2402.13512"
    )
    assert long_numbers(text) == ["0.004726386070925269", "0.230000"]
    assert significant_digits("1.0e-15") == 2 and significant_digits("0.0197") == 3
    assert SUMMARY.search(
        "the paper: 19 rows: 14 reproduced, 3 partly, 0 differ, 2 not tested; this "
        "book's controls: 15 rows: 9 reproduced, 4 partly, 2 differ"
    )
    assert SUMMARY.search(
        "the paper: 19 rows: 14 reproduced, 3 partly, 1 with too few runs, 0 differ, 1 "
        "not tested; this book's controls: 15 rows: 9 reproduced"
    )
    assert not SUMMARY.search("31 rows: 20 reproduced, 7 differ, 4 not tested")


# A string glued with {glue:} shows its repr's quotes (smart quotes after Sphinx)
QUOTED_GLUE = re.compile(r'<span class="output text_plain">([‘\'"“][^<]*)</span>')


def test_quoted_glue_finds_a_string_glued_with_its_quotes():
    html = (
        '<span class="output text_plain">‘40’</span> '
        '<span class="output text_plain">0.1</span> '
        "<span class=\"output text_plain\">'0/4'</span>"
    )
    assert QUOTED_GLUE.findall(html) == ["‘40’", "'0/4'"]


@pytest.mark.skipif(
    not PAGES, reason=f"no built site at {SITE} (make book-strict first)"
)
@pytest.mark.parametrize("page", PAGES)
def test_no_glued_value_shows_quotes(page):
    """Glued strings are quoted with {glue:text}, never {glue:} (which shows '40')."""
    quoted = QUOTED_GLUE.findall((SITE / page).read_text(encoding="utf-8"))
    assert not quoted, (
        f"{page}: glued strings shown in quotes (use glue:text): {quoted}"
    )


def _phone_view(pg, page: str, stem: str) -> dict:
    """The loaded page at 390 px (the viewport resized, then two frames for the layout):
    what a reader sees, the scorecard's columns, a screenshot *-phone.png. Issue 51:
    a phone context of its own loaded every page a second time (31 s of the stage)."""
    pg.set_viewport_size(PHONE)
    pg.evaluate(
        "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
    )
    view = {
        "width": pg.evaluate("() => window.innerWidth"),
        "visible": pg.evaluate("() => document.body.innerText"),
        "prose": pg.evaluate(TEXT_WITHOUT_JS, READER_HIDES),
        "scorecard": pg.evaluate(SCORECARD_PHONE_JS) if stem == "scorecard" else None,
    }
    shot = SHOTS / (page.replace("/", "__").removesuffix(".html") + "-phone.png")
    pg.screenshot(path=str(shot), full_page=FULL_PAGE)
    REPORT.setdefault(page, {})["phone_screenshot"] = shot.name
    pg.set_viewport_size(DESKTOP)
    return view


def _check_phone(page: str, stem: str, view: dict) -> None:
    """At 390 px: no test marker, no decimal with more than 4 significant digits in
    the prose, tables and glued values, the scorecard's summary line and every verdict
    on screen."""
    assert view["width"] == PHONE["width"], f"{page}: viewport {view['width']} px"
    assert "NBVAL" not in view["visible"], f"{page}: a test marker shows"
    assert not wrong_plurals(view["prose"]), (
        f"{page}: a count of one with a plural noun: {wrong_plurals(view['prose'])}"
    )
    assert not long_numbers(view["prose"]), (
        f"{page}: numbers with more than 4 significant digits: "
        f"{long_numbers(view['prose'])[:8]}"
    )
    if stem == "scorecard":
        phone = view["scorecard"]
        assert SUMMARY.search(view["visible"]), "scorecard: no summary line"
        assert phone and phone["right"] <= phone["width"] + 1, phone
        for verdict, left, right, width in phone["verdicts"]:
            assert 0 <= left and right <= phone["width"] and width > 0, verdict


# --------------------------------------------- a reader's re-run page (issue 49)
MATH_STATE_JS = """() => ({
  math: document.querySelectorAll('.math').length,
  untypeset: [...document.querySelectorAll('.math')].filter(e => \
!e.querySelector('mjx-container')).length,
  theme: !!document.querySelector('.bd-header, .bd-sidebar-primary'),
  figures: [...document.querySelectorAll('figure img')].filter(i => \
i.naturalWidth > 0).length,
  captions: [...document.querySelectorAll('figcaption .caption-number')].map(c => \
c.textContent.trim()),
  cited: [...document.querySelectorAll('a[href*="bibliography"]')].length,
  code: [...document.querySelectorAll('.cell_input pre')].map(p => p.textContent) })"""


@pytest.fixture(scope="session")
def rerun_page(tmp_path_factory):
    """The page ``markovlib rerun`` builds (its own function), from the strict
    build's executed framework chapter (the command is tested in tests/test_rerun.py);
    served on 127.0.0.1."""
    import nbformat

    from markovlib.companion.myst_markdown import chapter_titles
    from markovlib.companion.publish import build_page

    executed = SITE.parents[1] / "book" / "framework.ipynb"
    if not executed.is_file():
        pytest.skip(f"no executed chapter at {executed} (make book-strict first)")
    out = tmp_path_factory.mktemp("rerun")
    nb = nbformat.read(str(executed), as_version=4)
    titles = chapter_titles(ROOT / "book")
    page = build_page(ROOT, "framework", nb, out, "re-run with p=0.3, q=0.9", titles)
    with _served(out / "html") as url:
        yield f"{url}/{page.relative_to(out / 'html')}"


def test_a_rerun_page_reads_in_the_books_look_offline(browser, rerun_page):
    """Issue 49: the re-run page loaded its maths from a CDN in nbconvert's look
    (offline every formula was raw TeX). Now: no request leaves 127.0.0.1, the book's
    theme, every formula typeset by the book's own MathJax, the figures numbered and
    shown, the paper cited, one parameters cell holding the reader's values."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    external = []
    _offline(context, external)
    pg = context.new_page()
    assert pg.goto(rerun_page, wait_until="load").ok
    pg.wait_for_load_state("networkidle")
    pg.evaluate(
        "() => window.MathJax && MathJax.startup ? "
        "MathJax.startup.promise.then(() => true) : false"
    )
    state = pg.evaluate(MATH_STATE_JS)
    state["raw"] = len(RERUN_RAW.findall(pg.evaluate(TEXT_WITHOUT_JS, NOT_PROSE)))
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / "rerun__framework.png"), full_page=FULL_PAGE)
    context.close()
    assert external == [], external
    assert state["theme"], state
    assert state["math"] > 10 and state["untypeset"] == 0 and state["raw"] == 0, state
    assert state["figures"] >= 3 and state["captions"][:2] == ["Fig. 1", "Fig. 2"]
    assert state["cited"] > 0, state
    # one parameters cell, with the reader's values (papermill's injected cell folded)
    assert sum("p: float = 0.3" in c for c in state["code"]) == 1
    assert not any("# Parameters" in c or "p: float = 0.5" in c for c in state["code"])
