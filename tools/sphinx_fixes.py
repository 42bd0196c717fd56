"""A local Sphinx extension (``_config.yml``: ``sphinx.local_extensions``) with fixes
the browser check needs.

sphinx-thebe adds its inline configuration script once per reading pass, and Jupyter
Book reads twice, so every page declared ``const THEBE_JS_URL`` twice: a JavaScript
error in every reader's console. This drops repeated scripts (same file or same inline
body, same attributes; an inline script's file name is None or "" depending on who added
it) from each page.

It also reads the repository's URL and licence from ``pyproject.toml`` (the one place
that names them) into the theme's repository, issues and launch buttons and the footer,
and registers ``authoryear``, a bibliography style whose labels are the text's
author-year citations ("Makkuva et al., 2025").
"""

from __future__ import annotations

import html
import tomllib
from pathlib import Path

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _key(js) -> tuple:
    attributes = getattr(js, "attributes", {}) or {}
    return getattr(js, "filename", str(js)) or "", tuple(
        sorted((k, str(v)) for k, v in attributes.items())
    )


def drop_repeated_scripts(app, pagename, templatename, context, doctree) -> None:
    seen, unique = set(), []
    for js in context.get("script_files", []):
        if _key(js) not in seen:
            seen.add(_key(js))
            unique.append(js)
    # in place: this list is the builder's own, to which sphinx.ext.mathjax adds MathJax
    # later in this event
    context["script_files"][:] = unique


def authors_year(entry) -> str:
    """An entry's author-year label as the text cites it: "Cover and Thomas, 2006",
    "Makkuva et al., 2025"."""
    last = [
        "".join(p.last_names).replace("{", "").replace("}", "")
        for p in (entry.persons.get("author") or entry.persons.get("editor") or [])
    ]
    names = " and ".join(last) if len(last) <= 2 else f"{last[0]} et al."
    return f"{names or entry.key}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    """Labels "Makkuva et al., 2024a", "…, 2024b" where two entries share one."""

    def format_labels(self, sorted_entries):
        labels = [authors_year(e) for e in sorted_entries]
        seen: dict[str, int] = {}
        for label in labels:
            if labels.count(label) > 1:
                seen[label] = seen.get(label, 0) + 1
                yield label + "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            else:
                yield label


class AuthorYearStyle(PlainStyle):
    """pybtex's ``plain`` (sorted by author, year, title) with author-year labels."""

    default_label_style = "authoryear"


def repository_buttons(app, config) -> None:
    """The repository's URL and licence from ``pyproject.toml`` into the theme's
    buttons and the footer of every page."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    url = project["urls"]["Repository"]
    options = config.html_theme_options
    options.update(
        repository_url=url,
        repository_branch="main",
        use_repository_button=True,
        use_issues_button=True,
    )
    licence = html.escape(project["license"])
    options["extra_footer"] = (
        f'<p>Text and code: {licence} licence (<a href="{html.escape(url)}/blob/main/'
        f'LICENSE">LICENSE</a>); cite as in <a href="{html.escape(url)}/blob/main/'
        'CITATION.cff">CITATION.cff</a>.</p>'
    )


def setup(app):
    register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    app.connect("config-inited", repository_buttons)
    # early: Sphinx emits this event with emit_firstresult, so a theme handler that
    # returns a template ends the chain
    app.connect("html-page-context", drop_repeated_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
