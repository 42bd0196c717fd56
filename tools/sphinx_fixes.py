"""A local Sphinx extension (``_config.yml``: ``sphinx.local_extensions``) with fixes
the browser check needs.

sphinx-thebe adds its inline configuration script once per reading pass, and Jupyter
Book reads twice, so every page declared ``const THEBE_JS_URL`` twice: a JavaScript
error in every reader's console. This drops repeated scripts (same file or same inline
body, same attributes; an inline script's file name is None or "" depending on who added
it) from each page.
"""

from __future__ import annotations


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


def setup(app):
    # early: Sphinx emits this event with emit_firstresult, so a theme handler that
    # returns a template ends the chain
    app.connect("html-page-context", drop_repeated_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
