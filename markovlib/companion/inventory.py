"""Every claim of the paper (and of the poster) that a reader could test, and the
scorecard row that judges it or why none can (issue 67): one :class:`Entry` per
sentence, in the paper's order, kept beside :data:`~markovlib.companion.claims.CLAIMS`.

An entry names the rows that judge it *exactly* (the row's title is the entry's claim),
those that judge it *in part* (a narrower, wider or pooled claim, or this book's test
at its own settings) and this book's controls of it. :func:`problems` is the rule the
test holds the two tables to: every row of the paper's or the poster's names an entry,
every entry has a row or a reason. :func:`page` renders the book's page
(``python -m markovlib.companion.inventory`` writes ``book/claims_inventory.md``).

The words quoted are those of the text this book works from (the repository's summary
of the paper); ``quoted`` marks the paper's own words, which that text puts in quotation
marks, and ``summary`` the summary's words for a claim it does not quote."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .claims import CLAIMS, Claim, paper_figures
from .claims.entries import ENTRIES, QUOTED, ROW, SUMMARY, Entry

__all__ = ["Entry", "ENTRIES", "problems", "counts", "page", "write_page", "PAGE"]
__all__ += ["QUOTED", "SUMMARY", "ROW"]

PAGE = Path("book") / "claims_inventory.md"


def _named(entries: Iterable[Entry], field: str) -> set[str]:
    """The row ids the entries name in ``field`` ('exact', 'part', 'controls')."""
    return {r for e in entries for r in getattr(e, field)}


def problems(entries=ENTRIES, claims: Iterable[Claim] = CLAIMS) -> list[str]:
    """What breaks the rule between the inventory and the rows (empty: none)."""
    rows = {c.id: c for c in claims}
    judged = _named(entries, "exact") | _named(entries, "part")
    out = [
        f"row {c.id} ({c.source}) names no inventory entry"
        for c in rows.values()
        if c.source in ("paper", "poster") and c.id not in judged
    ]
    ids = [e.id for e in entries]
    out += [f"entry id {i} twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for e in entries:
        out += [f"entry {e.id}: no row {r}" for r in e.rows if r not in rows]
        if not e.exact and not e.reason:
            out.append(f"entry {e.id}: judged {e.judged} and no reason given")
        if e.words not in (QUOTED, SUMMARY, ROW):
            out.append(f"entry {e.id}: words {e.words!r}")
        for r in (r for r in e.exact if r in rows):
            c = rows[r]
            if c.source != "paper" or (c.label and c.label not in e.section):
                out.append(
                    f"entry {e.id}: row {r} ({c.source}, {c.label!r}) judges "
                    "another's claim"
                )
        out += [
            f"entry {e.id}: control {r} is the paper's"
            for r in e.controls
            if r in rows and rows[r].source == "paper"
        ]
    return out


def counts(entries=ENTRIES) -> dict[str, int]:
    """How many entries are judged exactly, in part and not at all."""
    n = {"exactly": 0, "in part": 0, "not judged": 0}
    for e in entries:
        n[e.judged] += 1
    return n


def missing_quotes(text: str, entries=ENTRIES) -> list[str]:
    """The entries whose quote is not in ``text`` (white space collapsed)."""
    flat = " ".join(text.split())
    return [
        e.id
        for e in entries
        if e.words != ROW and " ".join(e.quote.split()) not in flat
    ]


# The summary's plain-text maths, typeset on the page (the data keep its words)
_TYPESET = (
    ("theta*", r"$\theta^*$"),
    ("pi_0", r"$\pi_0$"),
    ("theta_pi", r"$\theta_\pi$"),
    ("θ_π", r"$\theta_\pi$"),
    ("H_rate", r"$H_{\rm rate}$"),
    ("H(pi)", "H(π)"),
    ("pi_1", r"$\pi_1$"),
    ("sigma(b)", "σ(b)"),
    ("sigmoid(b)", "σ(b)"),
    ("||e||^2", "‖e‖²"),
    (">= 0", "≥ 0"),
    ("<= 1", "≤ 1"),
    ("I(x_n; x_{n+1})", r"$I(x_n; x_{n+1})$"),
    ("p_n", "$p_n$"),
    ("W_1", "$W_1$"),
    ("W_2", "$W_2$"),
    ("pi = ", "π = "),
)


def typeset(text: str) -> str:
    """``text`` with its plain-text maths typeset and the paper's figures named."""
    for plain, maths in _TYPESET:
        text = text.replace(plain, maths)
    return paper_figures(text)


def _row_link(row: str) -> str:
    """A row as the page names it: its id and the chapter that measures it."""
    chapter = {c.id: c.chapter for c in CLAIMS}[row]
    return f"`{row}` in {{doc}}`{chapter}`"


def _words(e: Entry) -> str:
    """The entry's words as the page shows them, marked by whose they are."""
    text = typeset(e.quote)
    if e.words == QUOTED:
        return f"“{text}”"
    if e.words == ROW:
        return (
            f"“{text}” (the paper's {e.section.lower()} as published: its record at "
            "EPFL Infoscience, infoscience.epfl.ch/items/"
            "b7c6cbb8-3455-4070-ac90-5c17f9a818c6; not in the summary)"
        )
    return f"*(summary)* {text}"


def _where_checked(e: Entry) -> str:
    """The last cell: the rows judging the entry, or why none can; controls."""
    parts = []
    if e.exact:
        parts.append("**exactly:** " + "; ".join(map(_row_link, e.exact)))
    if e.part:
        parts.append("**in part:** " + "; ".join(map(_row_link, e.part)))
    if e.reason:
        judged = e.exact or e.part
        parts.append(("" if judged else "**not judged:** ") + typeset(e.reason))
    if e.controls:
        controls = "; ".join(map(_row_link, e.controls))
        parts.append(f"this book's control{'s' * (len(e.controls) > 1)}: {controls}")
    return "\n\n    ".join(parts)


def _table(entries) -> list[str]:
    """The inventory as a MyST list-table, one row per entry."""
    lines = [
        "```{list-table}",
        ":header-rows: 1",
        ":widths: 36 30 34",
        ":name: tab-claims-inventory",
        "",
        "* - The claim",
        "  - Its words",
        "  - Where this book checks it",
    ]
    for e in entries:
        lines += [
            f"* - **{typeset(e.section)}:** {typeset(e.claim)}",
            f"  - {_words(e)}",
            f"  - {_where_checked(e)}",
        ]
    return [*lines, "```"]


def _other_rows(entries) -> list[str]:
    """The rows that are not the paper's own: its claims as this book reads them,
    controls, this book's findings, related papers."""
    from .scorecard import as_maths  # the scorecard's maths for a row's title

    beside, part = {}, {}
    for e in entries:
        section = e.section.replace("Poster", "the poster")
        for r in e.controls:
            beside.setdefault(r, []).append(section)
        for r in (r for r in e.part if _source(r) != "paper"):
            part.setdefault(r, []).append(section)
    lines = []
    for c in CLAIMS:
        if c.source in ("paper", "poster"):
            continue
        said = [
            f"{what} {', '.join(dict.fromkeys(where[c.id]))}{after}"
            for what, where, after in (
                ("judges", part, " in part"),
                ("a control beside", beside, ""),
            )
            if c.id in where
        ]
        if c.source == "paper, as this book reads it":
            said.insert(0, "the paper, as this book reads it")
        elif not said:
            said = ["this book's own finding" if c.source == "this book" else c.source]
        whose = paper_figures("; ".join(said))
        lines.append(
            f"- `{c.id}` ({whose}): {paper_figures(as_maths(c.claim))}; "
            f"{{doc}}`{c.chapter}`"
        )
    return lines


def _source(row: str) -> str:
    """Whose claim row ``row`` is."""
    return {c.id: c.source for c in CLAIMS}[row]


PAGE_INTRO = """\
# What the paper claims, and where this book checks it

Every claim of the paper (and of its poster) that a reader could test, as the summary \
of the paper
this book works from gives them: the abstract's, each part of a theorem, what the text \
says without
a figure, what each figure draws, the appendix's, the poster's, and the textbook facts \
of the
setting. Each names the {{doc}}`scorecard` row that judges it, or says why no row can. \
A row judges
a claim **exactly** when the row's title is that claim; **in part** when the row \
judges a narrower,
a wider or a pooled claim, or tests the claim at this book's own settings where the \
paper publishes
none. The verdicts are on the {{doc}}`scorecard`.

**In short:** {n} claims: {exactly} judged exactly by a row, {part} in part, \
{none} not judged (each
with its reason).

The words are the summary's: in quotation marks where it quotes the paper, marked \
*(summary)* where
it states the claim in its own words (plain-text maths typeset). It quotes no \
sentence of the
paper's conclusion, so none is listed on its own. The inventory is data \
(`markovlib/companion/claims/entries.py`, beside the scorecard's rows in \
`markovlib/companion/claims/`); a
test fails when a row of the paper's names no entry, or an entry has neither a row \
nor a reason.

"""

OTHERS = """
## The scorecard's other rows

The rows that are not the paper's own: the paper's claims as this book reads them, \
this book's
controls (the paper's claims at other settings: float32, more iterations, another \
model) and its
own findings, and the rows of the related papers' claims:

"""


def page(entries=ENTRIES) -> str:
    """The inventory page (MyST): the counts, the table, the other rows."""
    n = counts(entries)
    intro = PAGE_INTRO.format(
        n=len(entries),
        exactly=n["exactly"],
        part=n["in part"],
        none=n["not judged"],
    )
    body = [*_table(entries), OTHERS.rstrip("\n"), "", *_other_rows(entries)]
    return intro + "\n".join(body) + "\n"


def write_page(path=PAGE, entries=ENTRIES) -> None:
    """Write :func:`page` to ``path`` (from the repository root)."""
    Path(path).write_text(page(entries), encoding="utf-8")


if __name__ == "__main__":  # python -m markovlib.companion.inventory
    write_page()
