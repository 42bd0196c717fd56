"""A reader's re-run notebook (``markovlib rerun``): a chapter's MyST as plain Markdown,
which Jupyter, Colab and GitHub show as the book's page reads (glued values pasted,
roles and directives rendered, other chapters' references named)."""

from __future__ import annotations

import ast
import copy
import numbers
import re
from pathlib import Path

__all__ = [
    "glued_values",
    "render_roles",
    "chapter_titles",
    "chapter_labels",
    "other_chapters_named",
]

_ROLE = re.compile(r"\{([A-Za-z][\w:+-]*)\}`([^`]*)`")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*(?:\{([^}\s]+)\})?\s*(.*?)\s*$")
_OPTION = re.compile(r"^\s*:[\w-]+:")
_TARGET = re.compile(r"^\s*\(([\w.:-]+)\)=\s*$")  # a MyST label line: (sec-x)=
_MISSING = "(not computed)"
_KINDS = {  # a label's prefix -> what it names
    "thm": "theorem",
    "def": "definition",
    "prop": "proposition",
    "lem": "lemma",
    "cor": "corollary",
    "fig": "figure",
    "eq": "equation",
    "sec": "section",
}


def glued_values(nb) -> dict[str, dict]:
    """Name -> mime bundle of every value glued in the executed notebook ``nb``."""
    values = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            scrap = out.get("metadata", {}).get("scrapbook", {})
            if "name" not in scrap:
                continue
            prefix = scrap.get("mime_prefix", "")
            values[scrap["name"]] = {
                mime.removeprefix(prefix): "".join(v) if isinstance(v, list) else v
                for mime, v in out.get("data", {}).items()
            }
    return values


def _plain_value(text: str):
    """The value a ``text/plain`` repr stands for (number, string), else the text."""
    numpy_scalar = re.fullmatch(r"np\.\w+\((.*)\)", text.strip())  # np.float64(0.5)
    try:
        return ast.literal_eval(numpy_scalar[1] if numpy_scalar else text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text


def _glue_text(bundle: dict | None, spec: str = "") -> str:
    """``{glue:text}``: the plain value, ``spec`` applied to a number."""
    if bundle is None:
        return _MISSING
    plain = bundle.get("text/plain", "")
    if "text/markdown" in bundle and (not plain or plain.startswith("<")):
        return bundle["text/markdown"]  # an IPython Markdown object: its text
    value = _plain_value(plain)
    if spec and isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            return format(value, spec)
        except ValueError:
            pass
    return str(value)


def _glue_any(bundle: dict | None) -> str:
    """``{glue:}``: Markdown as Markdown, a figure as a mention, else the value."""
    if bundle is not None and "text/markdown" in bundle:
        return bundle["text/markdown"]
    if bundle is not None and any(m.startswith("image/") for m in bundle):
        return "(figure below)"
    return _glue_text(bundle)


def _glue_role(values: dict, kind: str, text: str) -> str:
    """A glue role (``kind``: '', 'any', 'text', 'md', 'figure') of ``name[:spec]``."""
    name, _, spec = text.partition(":")
    bundle = values.get(name.strip())
    if kind == "text":
        return _glue_text(bundle, spec.strip())
    return _glue_any(bundle)  # md (its :myst or :commonmark is the bundle's format)


def _humanized(label: str) -> str:
    """'thm-saddle' -> 'the theorem “saddle”'; 'global_minimum' -> 'Global minimum'."""
    head, sep, rest = label.partition("-")
    kind = _KINDS.get(head)
    if sep and kind:
        return f"the {kind} “{rest.replace('-', ' ')}”"
    words = re.sub(r"[-_]+", " ", label.rsplit("/", 1)[-1]).strip()
    return words[:1].upper() + words[1:]


def _reference(ctx: dict, name: str, text: str) -> str:
    """A cross-reference role (numref, ref, prf:ref, doc, eq) as the words it reads."""
    explicit = re.fullmatch(r"(.*?)\s*<([^<>]+)>", text, flags=re.S)
    shown, target = (explicit[1], explicit[2]) if explicit else ("", text.strip())
    if name == "doc":
        chapter = target.rsplit("/", 1)[-1].removesuffix(".ipynb").removesuffix(".md")
        return shown or f"*{ctx['titles'].get(chapter) or _humanized(chapter)}*"
    words, number = ctx["labels"].get(target, (_humanized(target), ""))
    if shown:
        return shown.replace("%s", number or "?").replace("{number}", number or "?")
    return words


def _role(ctx: dict, match: re.Match) -> str:
    """One MyST role as plain Markdown."""
    name, text = match[1], match[2]
    if name.startswith("glue"):
        return _glue_role(ctx["values"], name.removeprefix("glue").strip(":"), text)
    if name.startswith("cite"):
        return "[" + ", ".join(k.strip() for k in text.split(",")) + "]"
    if name == "math":
        return f"${text}$"
    if name in ("numref", "ref", "prf:ref", "doc", "eq"):
        return _reference(ctx, name, text)
    return re.sub(r"\s*<[^<>]+>$", "", text)  # {term}, {abbr}, ...: the text shown


def _roles(ctx: dict, text: str) -> str:
    """Every role of ``text`` replaced, glue first (glued Markdown may hold roles)."""
    glued = _ROLE.sub(
        lambda m: _role(ctx, m) if m[1].startswith("glue") else m[0], text
    )
    return _ROLE.sub(lambda m: _role(ctx, m), glued)


def _closing(lines: list[str], start: int, fence: str) -> int:
    """Index of the line closing the fence opened at ``start`` (len(lines): none)."""
    char, n = fence[0], len(fence)
    closer = re.compile(rf"^\s*{re.escape(char)}{{{n},}}\s*$")
    return next(
        (i for i in range(start + 1, len(lines)) if closer.match(lines[i])), len(lines)
    )


def _title(ctx: dict, name: str, args: str) -> str:
    """A directive's bold title line: '**Theorem (Saddle).**', '**Note**'."""
    args = _roles(ctx, args)
    kind = name.rpartition(":")[2].replace("-", " ").capitalize()
    if name.startswith("prf:"):
        args = f" {args}" if args.startswith("(") else f" ({args})" if args else ""
        return f"**{kind}{args}.**"
    return f"**{args or kind}**"


def _directive(ctx: dict, name: str, args: str, body: list[str]) -> list[str]:
    """A MyST directive as a bold title line and its body (options dropped)."""
    while body and _OPTION.match(body[0]):
        body = body[1:]
    inner = _markdown(ctx, "\n".join(body)).strip("\n")
    if name.startswith("glue"):  # ```{glue} name: the value itself
        return [_glue_role(ctx["values"], name.partition(":")[2], args)]
    if name == "math":
        return ["$$", inner, "$$"]
    return [_title(ctx, name, args), "", inner]


def _markdown(ctx: dict, text: str) -> str:
    """MyST ``text`` as plain Markdown: roles replaced, directives unfolded."""
    lines, out, prose, i = text.split("\n"), [], [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None or (fence[1][0] == ":" and not fence[2]):
            if not _TARGET.match(lines[i]):
                prose.append(lines[i])
            i += 1
            continue
        out += [_roles(ctx, "\n".join(prose))] if prose else []
        prose, end = [], _closing(lines, i, fence[1])
        if fence[2]:  # a block of its own: blank lines around it
            out += [""] if out and out[-1].rpartition("\n")[2].strip() else []
            out += _directive(ctx, fence[2], fence[3], lines[i + 1 : end])
            out += [""] if end + 1 < len(lines) and lines[end + 1].strip() else []
        else:
            out += lines[i : end + 1]  # a code block: verbatim
        i = end + 1
    out += [_roles(ctx, "\n".join(prose))] if prose else []
    return "\n".join(out)


_LABELLED = re.compile(  # a directive's opening line, options, then its :label:
    r"^[ \t]*(?:`{3,}|:{3,})[ \t]*\{([^}\s]+)\}[ \t]*(.*)\n"
    r"(?:[ \t]*:(?!label:)[\w-]+:.*\n)*[ \t]*:label:[ \t]*(\S+)",
    flags=re.M,
)


def _labels(nb) -> tuple[dict, dict]:
    """Label -> (words, number) of figures and directives; cell -> (number, caption)."""
    labels, captions = {}, {}
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("mystnb", cell.metadata.get("myst", {}))
        figure = meta.get("figure") if cell.cell_type == "code" else None
        if figure:
            n = str(len(captions) + 1)
            captions[i] = (n, figure.get("caption", ""))
            labels[figure.get("name", f"fig-{n}")] = (f"Figure {n}", n)
        if cell.cell_type != "markdown":
            continue
        for name, args, label in _LABELLED.findall(cell.source):
            kind = name.rpartition(":")[2].replace("-", " ")
            title = args.split(";")[0].strip(" ()")
            labels[label] = (
                f"the {kind} “{title}”" if title else _humanized(label),
                "",
            )
    return labels, captions


def render_roles(nb, titles: dict | None = None):
    """A copy of executed ``nb`` whose Markdown reads as plain Markdown, values in."""
    import nbformat  # optional: the book's dependency (nbformat)

    labels, captions = _labels(nb)
    ctx = dict(values=glued_values(nb), labels=labels, titles=titles or {})
    out, cells = copy.deepcopy(nb), []
    for i, cell in enumerate(out.cells):
        if cell.cell_type == "markdown":
            cell.source = _markdown(ctx, cell.source)
        for output in cell.get("outputs", []):  # displayed MyST (the rerun box)
            if "text/markdown" in output.get("data", {}):
                output.data["text/markdown"] = _markdown(
                    ctx, output.data["text/markdown"]
                )
        cells.append(cell)
        if i in captions:
            n, caption = captions[i]
            text = f"**Figure {n}.** {_markdown(ctx, caption)}"
            cells.append(
                nbformat.v4.new_markdown_cell(text, metadata={"tags": ["caption"]})
            )
            if out.get("nbformat_minor", 5) < 5:  # cell ids came with nbformat 4.5
                cells[-1].pop("id", None)
    out.cells = cells
    return out


def chapter_titles(book: str | Path) -> dict[str, str]:
    """Stem -> title (first '# ' heading) of every chapter and page in ``book``."""
    import nbformat  # optional: the book's dependency (nbformat)

    titles = {}
    for path in sorted(Path(book).glob("*.ipynb")) + sorted(Path(book).glob("*.md")):
        if path.suffix == ".ipynb":
            cells = nbformat.read(str(path), as_version=4).cells
            text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
        else:
            text = path.read_text()
        heading = re.search(r"^# +(.+?)\s*$", text, flags=re.M)
        if heading:
            titles[path.stem] = heading.group(1)
    return titles


def chapter_labels(book: str | Path) -> dict[str, str]:
    """Label -> chapter (stem) of every figure, labelled directive and section target
    of the chapters in ``book``."""
    import nbformat  # optional: the book's dependency (nbformat)

    out = {}
    for path in sorted(Path(book).glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        lines = [
            x
            for c in nb.cells
            if c.cell_type == "markdown"
            for x in c.source.split("\n")
        ]
        targets = [m[1] for m in map(_TARGET.match, lines) if m]
        out.update(dict.fromkeys([*_labels(nb)[0], *targets], path.stem))
    return out


def other_chapters_named(
    text: str, stem: str, labels: dict[str, str], titles: dict[str, str]
) -> str:
    """``text`` of chapter ``stem`` with each cross-reference (numref, ref, prf:ref) to
    another chapter's label (:func:`chapter_labels`) as words naming that chapter: 'a
    figure of *Bad local minima*'. A one-chapter build cannot resolve it (issue 70)."""

    def words(m: re.Match) -> str:
        explicit = re.fullmatch(r"(.*?)\s*<([^<>]+)>", m[2], flags=re.S)
        label = explicit[2] if explicit else m[2].strip()
        chapter = labels.get(label)
        if m[1] not in ("numref", "ref", "prf:ref") or chapter in (None, stem):
            return m[0]
        kind = _KINDS.get(label.partition("-")[0], "section")
        return f"a {kind} of *{titles.get(chapter) or _humanized(chapter)}*"

    return _ROLE.sub(words, text)
