"""The reproduction scorecard: one row per claim of the paper (and of this book), its
verdict by one rule.

A chapter checks each of its claims at the scale it ran and calls :func:`glue_claim`
with the number it measured (already formatted, as the chapter prints it) and whether
the claim's check held. ``glue_claim`` glues ``sc_<id>_value`` and
``sc_<id>_verdict``; the scorecard page (``book/scorecard.md``, written by
:func:`page` and kept in sync by a test) pastes both from the chapter, so the page
never types a number and building the book at another scale changes numbers and
verdicts by itself.

The rule: :mod:`markovlib.companion.verdicts` (stated on the page); the rows of the
paper edition computed from the shipped data: :mod:`markovlib.companion.computed`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..analysis import (
    AT_UNIGRAM_BELOW,
    CLAIM_SHARE,
    ESCAPED_ABOVE,
)
from .claims import CLAIMS, Claim, chain_text, claim, paper_figures
from .computed import COMPUTED, compute
from .notebook import glue
from .verdicts import (
    DIFFERS,
    NOT_APPLICABLE,
    NOT_TESTED,
    PARTLY,
    REPRODUCED,
    TOO_FEW,
    interval_text,
    smaller_than_the_paper,
    unlike_the_authors,
    verdict,
    with_intervals,
)

__all__ = [
    "by_source",
    "source_counts",
    "verdict",
    "glue_claim",
    "claims_report",
    "page",
    "write_page",
]


def glue_claim(
    claim_id: str,
    value: str,
    ok: bool,
    scale,
    *,
    applicable: bool = True,
    counts: tuple = (),
) -> str:
    """Glue ``sc_<id>_value`` (the measured number, as text, with the interval of each
    part's share where ``counts`` gives them) and ``sc_<id>_verdict``; return the
    verdict."""

    c = claim(claim_id)
    if not isinstance(value, str):
        raise TypeError(
            f"value must be the number as the chapter prints it (a str); got {value!r}"
        )
    unlike = unlike_the_authors(c, scale) if smaller_than_the_paper(scale) else []
    v = verdict(
        ok,
        scale,
        exact=c.exact,
        applicable=applicable,
        counts=counts,
        unlike=bool(unlike),
    )
    glue(f"sc_{c.id}_value", with_intervals(c, value, counts), display=False)
    glue(f"sc_{c.id}_verdict", v, display=False)
    _GLUED[c.id] = Glued(v, value, tuple(counts), scale, tuple(unlike))
    return v


@dataclass(frozen=True)
class Glued:
    """What :func:`glue_claim` judged, for the chapter's table: the verdict, the value,
    the counts, the scale of the runs it read (None: none) and how they differ from
    the authors' where that left the claim untested."""

    verdict: str
    value: str
    counts: tuple
    scale: object = None
    unlike: tuple = ()


_GLUED: dict[str, Glued] = {}  # claim id: what glue_claim judged


def _claim_line(c: Claim, r: Glued, chain=None) -> list[str]:
    """One claim of a chapter's table: its badge, the claim (asked of the page's
    ``chain`` (p, q) where the paper's is another; :func:`runs_read` beneath it; its
    setting and the whole measurement in a closed dropdown), runs k of n (or the
    value), the interval."""
    counts, value = r.counts, r.value
    parts = len(counts) > 1
    if counts and not c.exact:
        runs = "; ".join(f"{p + ' ' if parts else ''}{k} of {n}" for p, k, n in counts)
        interval = "; ".join(interval_text(k, n) for _, k, n in counts)
    else:
        runs, interval = as_maths(value), "—"
    whole = f"{as_maths(c.measure)}: {as_maths(with_intervals(c, value, counts))}"
    title, source = claim_title(c, chain)
    return [
        f"* - {badge(r.verdict)}",
        *_claim_cell(
            title, source, "Details", c.setting, whole, read=runs_read(c, r, chain)
        ),
        f"  - {runs}",
        f"  - {interval}",
    ]


def _claim_cell(
    claim_text: str, source: str, title: str, setting: str, *more: str, read: str = ""
) -> list[str]:
    """A list-table cell: the claim and its source (and ``read``: which runs it
    judged), then ``setting`` (and ``more`` paragraphs) in a closed dropdown named
    ``title``."""
    paragraphs = [paper_figures(as_maths(setting)), *more]
    body = "\n\n".join(f"    {text}" for text in paragraphs).split("\n")
    under = ["", f"    *{as_maths(read)}*"] if read else []
    return [
        f"  - {paper_figures(as_maths(claim_text))} ({as_maths(source)})",
        *under,
        "",
        f"    :::{{dropdown}} {title}",
        *body,
        "    :::",
    ]


def asked_elsewhere(c: Claim, chain) -> bool:
    """Whether claim ``c`` is about one chain of the paper and ``chain`` (p, q), the
    chain its runs were on, is another."""
    return bool(chain and c.chain) and tuple(map(float, chain)) != c.chain


def claim_title(c: Claim, chain=None) -> tuple[str, str]:
    """A row's claim and source as the chapter's table shows them: the claim itself, or
    where ``chain`` is not the paper's, the claim asked of it (issue 70) with what the
    paper's theorems predict there."""
    if not asked_elsewhere(c, chain):
        return c.claim, c.source
    owner = {"paper": "the paper's", "this book": "this book's"}.get(c.source)
    # a label (Fig 3(a), Sec. 2) is the paper's, also in a control of this book's
    whose = f"the paper's {c.label}" if c.label else f"{owner or c.source} claim"
    return c.asked_of(*chain), (
        f"{whose} on {chain_text(*c.chain)}, asked of this page's chain; "
        f"{prediction(*chain)}"
    )


def prediction(p: float, q: float) -> str:
    """What the paper's theorems say of the binary chain (p, q) (Thm 2, Thm 3,
    Sec. 4.2)."""
    s = p + q
    if abs(s - 1) < 1e-9:
        return "p + q = 1: no gap to learn"
    if s > 1:
        return (
            f"there Thm 2 makes θ_π a local minimum of the tied model and Thm 3 a "
            f"saddle of the untied one (p + q = {s:g} > 1)"
        )
    return (
        f"there (p + q = {s:g} < 1) the paper's Sec. 4.2 expects every run to reach "
        "H_rate irrespective of the weight tying"
    )


def runs_read(c: Claim, r: Glued, chain=None) -> str:
    """Which runs a row judged (issue 70): this page's (chain, scale, count), the
    paper edition's shipped ones, or none; and how they differ from the authors' where
    that leaves the claim an observation."""
    on, whose = f" on {chain_text(*chain)}" if chain else "", _whose(c, r)
    if whose == "none":
        read = "No runs read: not tested"
    elif whose == "exact":  # on the page's chain, or on the chains its setting names
        read = "Computed exactly, no training"
    elif whose == "shipped":
        read = "Read from the paper edition's shipped runs"
    else:
        n = max((n for _, _, n in r.counts), default=0)
        runs = f"{n} run{'s' * (n != 1)}" if n else "runs"
        read = f"Your {runs}{on}, trained at the {r.scale.name} scale"
    if r.unlike and r.verdict == NOT_TESTED:
        read += (
            "; an observation, not a verdict on the paper: they differ from the "
            f"authors' in {', '.join(r.unlike)}"
        )
    return read + "."


def claims_table(verdicts: dict[str, str], chain=None) -> str:
    """A chapter's claims as a MyST table, one line each (issue 49): the verdict as a
    badge, the claim (asked of ``chain``, (p, q), where the paper's is another) and
    the runs it read, runs k of n (or the value), the 95 % interval of their share;
    the setting and the whole measurement one click away, as :func:`glue_claim` had
    them."""
    lines = [
        "```{list-table}",
        ":header-rows: 1",
        ":widths: 16 56 14 14",
        ":class: claims-table",
        "",
        "* - Verdict",
        "  - Claim",
        "  - Runs or value",
        "  - 95 % interval",
    ]
    for cid, v in verdicts.items():
        r = _GLUED.get(cid) or Glued(v, "", ())
        lines += _claim_line(claim(cid), r, chain)
    return "\n".join([*lines, "```"])


def claims_report(
    S, verdicts: dict[str, str], values: dict | None = None, chain=None
) -> str:
    """The last lines of every chapter, in one format: its exact claims hold at the
    scale ``S`` (the assertions above them passed), then each of its scorecard claims
    with the verdict :func:`glue_claim` gave, whose runs it read and the measurement
    (``values``); glues ``sc_claims``, the :func:`claims_table` of its claims box
    (``chain``: the page's (p, q), for claims about one chain of the paper)."""
    lines = [
        f"The exact claims of this chapter hold at the {S.name} scale (asserted above)."
    ]
    if verdicts:  # the table at the top of the page: {glue:md} sc_claims
        from IPython.display import Markdown  # the book's dependency, as myst-nb

        glue("sc_claims", Markdown(claims_table(verdicts, chain)), display=False)
        lines.append("Its claims on the scorecard, by the rule (runs read: yours, ")
        lines[-1] += "the paper edition's shipped ones, exact, or none):"
        width = max(map(len, verdicts))
        for cid, v in verdicts.items():
            value = (values or {}).get(cid) or ""
            read = _whose(claim(cid), _GLUED.get(cid))
            asked = (
                "asked of this chain: " if asked_elsewhere(claim(cid), chain) else ""
            )
            line = f"  {cid:<{width}}  {v:<26}  {read:<7}  {asked}{value}"
            lines.append(line.rstrip())
    return "\n".join(lines)


def _whose(c: Claim, r: Glued | None) -> str:
    """The runs a row read, in a word: yours, shipped, exact or none. At ``paper`` a
    chapter reads the shipped runs of a claim that has shipped groups; every other
    trained row ran here (a reader's scale, or a chapter that computes its own)."""
    if r is None or r.scale is None:
        return "none"
    if c.exact:
        return "exact"
    return "shipped" if r.scale.name == "paper" and c.groups else "yours"


def glue_claims(
    measured: dict, scale, *, applicable: bool = True, missing: str = "not shipped yet"
) -> dict[str, str]:
    """:func:`glue_claim` each claim id's
    :class:`~markovlib.companion.measures.Measure` (None: its runs are not shipped yet,
    so ``missing`` and not tested); return the verdicts."""
    verdicts = {}
    for cid, m in measured.items():
        value, ok, at = (missing, False, None) if m is None else (m.value, m.ok, scale)
        counts = () if m is None else m.counts
        verdicts[cid] = glue_claim(
            cid, value, ok, at, applicable=applicable, counts=counts
        )
    return verdicts


PAGE_INTRO = """\
# Scorecard

Which of the paper's claims does this book reproduce? One row per claim: the paper's \
theorems and
figures, the claims its text makes without a figure, the poster's second-order claim, \
the follow-up
paper's initialisation story, Ildiz et al.'s CCMC, and this book's own findings.

**Whose settings.** Each trained row's setting is read from the specs of the runs it \
judged. A row
is the paper's only when every one of those runs is at the authors' settings of its \
figure
(`markovlib.presets.AUTHORS`: every field of a run's spec, from layer norm, \
activation, tying and
depth to iterations, batch, length, d, heads and precision, each from their config, \
script or model
file); otherwise it is this book's control and says how it differs. The \
authors ran
fp16 autocast on CUDA; here fp16 is PyTorch's CPU autocast to float16 (the same \
autocast rules,
CPU kernels), which has not been checked against a GPU run.

**The paper edition.** Every row but the last {chapters} is computed from the \
runs shipped with
this book and the exact theory; the last {chapters} are computed by their chapters \
when the book is built.

**The rule for trained claims.** A run's *share of the gap* is \
$(H(\\pi) - L) / (H(\\pi) -
H_{{\\rm rate}})$, with $L$ the loss of its learnt kernel (higher-order chains: its \
final test
loss): 0 at $H(\\pi)$ (the loss of the bad point $\\theta_\\pi$), 1 at the global \
minimum. A run is *at \
$H(\\pi)$* below
{low:g} (a loss above $H(\\pi)$ included), *escaped* above {high:g}, *in between* \
otherwise; a claim about "the runs" holds when most
of them do it beyond sampling noise (the rule below). No trained verdict uses a \
tolerance in
nats: near $p + q = 1$ the
gap itself is smaller than any such tolerance. A claim about how runs behave is \
judged by how
many do: $k$ of $n$ runs, and the 95 % (Clopper–Pearson) interval of the share \
$k/n$. The paper's
figures show single runs or the means of a few (Fig 1: 3 runs; App. D: five) and \
cannot show
that share; this rule, written before \
the runs of
Fig 5 and App. D at the authors' model were trained, says what the runs here show of it.

**Verdicts.**

- *reproduced*: the claim's check holds; for a claim about how runs behave, the whole \
interval lies
  above 1/2 (most runs behave as the paper says, beyond sampling noise);
- *too few runs*: no count of this many runs could decide either way (at most 5: \
even 5 of 5
  leaves 1/2 in the interval); the rule's change of 2026-11-27, before it such a part \
read *partly*;
- *partly*: the interval contains 1/2: the runs split (a claim of several
  parts takes the verdict of its worst part: too few runs, then partly, then differs);
- *differs*: it fails (for a claim about how runs behave, the whole interval lies \
below 1/2), for an exact claim (a construction, a Hessian, an identity: no \
training) at any
  scale, or for a trained claim at a scale whose runs are long enough to claim \
convergence. The
  book reports what it measures: a *differs* row does not fail the build;
- *not tested at this scale*: a trained claim at the `smoke` scale, or whose runs are \
not all
  shipped yet, or a part of which has no run to judge; at a reader's `cpu` re-run \
(fewer and
  shorter runs than the paper edition's), a trained claim whose runs leave it \
undecided (too few
  runs, partly), or that says runs stay at $H(\\pi)$ judged on runs shorter than the \
authors' (the
  rule's change of 2026-11-28, issue 46), or that counts runs at $H(\\pi)$ judged on \
runs of another
  length or batch (issue 70, the same day: the trapped chapter measures fewer traps \
with fewer
  tokens per batch); the row keeps its k of n and interval as an observation;
- *not applicable to this chain*: the chain is outside the claim's setting.

"""


def _measured(measure: str, value: str) -> str:
    """A row's measurement, said once: a bare number after what it measures, a
    sentence (it names what it counts) alone."""
    bare = re.fullmatch(r"[-−+]?\d[\d.]*(e[-−+]?\d+)?( \(.*\))?", value)
    return f"{measure}: {value}" if bare else value


# The names the claims spell in plain text (the CLI, the README) and the maths the
# book's page shows for them (issue 49: no "H_rate" or "θ_π" on a page)
MATHS = {
    "H_rate": r"$H_{\rm rate}$",
    "θ_π": r"$\theta_\pi$",
    "s_2 / s_1": r"$s_2/s_1$",
    "W_1": "$W_1$",
    "W_2": "$W_2$",
    "p_n": "$p_n$",
    "π_1": r"$\pi_1$",
    "n^(−1/2)": "$n^{-1/2}$",
}


def as_maths(text: str) -> str:
    """``text`` with the plain names of :data:`MATHS` as MyST maths."""
    for plain, maths in MATHS.items():
        text = text.replace(plain, maths)
    return text


# A verdict as the page shows it: a sphinx-design badge, coloured by what it says
BADGES = {
    REPRODUCED: "success",
    PARTLY: "warning",
    TOO_FEW: "secondary",
    DIFFERS: "danger",
    NOT_TESTED: "light",
    NOT_APPLICABLE: "light",
}


def badge(v: str) -> str:
    """``v`` as a MyST badge role: {bdg-success}`reproduced`."""
    return f"{{bdg-{BADGES[v]}}}`{v}`"


def _row(verdict: str, c: Claim, measured: str, setting: str) -> list[str]:
    """One list-table row: the verdict, the claim with its setting one click away
    (a dropdown), what was measured, and where the book shows it."""
    role = {"fig": "numref", "sec": "ref"}.get(c.target.split("-")[0], "prf:ref")
    where = f"{{{role}}}`{c.target}`"
    return [
        f"* - {verdict}",
        *_claim_cell(c.claim, c.source, "Setting", setting),
        f"  - {measured}",
        f"  - {where}",
    ]


def _computed_rows(rows) -> list[str]:
    out = []
    for r in rows:
        c = claim(r.id)
        said = r.runs is None or f"of {r.runs} runs" in r.value  # counted already
        counted = "" if said else f" ({r.runs} runs read)"
        measured = as_maths(_measured(c.measure, r.value)) + counted
        out += _row(badge(r.verdict), c, measured, r.setting)
    return out


def _chapter_rows() -> list[str]:
    out = []
    for c in CLAIMS:
        if c.id in COMPUTED:
            continue
        paste = f"{c.chapter}.ipynb::sc_{c.id}"
        verdict = f"{{glue:text}}`{paste}_verdict:s`"
        measured = f"{as_maths(c.measure)}: {{glue:text}}`{paste}_value:s`"
        out += _row(verdict, c, measured, c.setting)
    return out


def page(rows=None) -> str:
    """The scorecard page (MyST): the rule, the paper edition's computed rows
    (:func:`compute`, default: from the shipped data) and the chapters' rows pasted."""

    rows = compute() if rows is None else rows
    header = [
        "```{list-table}",
        ":header-rows: 1",
        ":widths: 14 38 38 10",
        ":name: tab-scorecard",
        "",
        "* - Verdict",
        "  - Claim",
        "  - Measured in the paper edition",
        "  - Where",
    ]
    chapters = sum(c.id not in COMPUTED for c in CLAIMS)
    intro = PAGE_INTRO.format(
        low=AT_UNIGRAM_BELOW, high=ESCAPED_ABOVE, share=CLAIM_SHARE, chapters=chapters
    )
    title, rest = intro.split("\n\n", 1)
    table = [*header, *_computed_rows(rows), *_chapter_rows(), "```"]
    rest = paper_figures(rest)
    return f"{title}\n\n{summary(rows)}\n\n{rest}" + "\n".join(table) + "\n"


# Whose claim a row tests, as the summaries name them: the paper's rows first, then
# this book's readings of the paper's claims (issue 67: not counted as the paper's),
# this book's controls and the related papers' rows
SOURCES = {
    "paper": "the paper",
    "poster": "the poster",
    "paper, as this book reads it": "the paper as this book reads it",
    "this book": "this book's controls",
}


def _counted(rows) -> str:
    """ "r reproduced, k partly, d differ, t not tested" over ``rows``."""
    n = Counter(r.verdict for r in rows)
    parts = [
        f"{n[REPRODUCED]} reproduced",
        f"{n[PARTLY]} partly",
        *([f"{n[TOO_FEW]} with too few runs"] if n[TOO_FEW] else []),
        f"{n[DIFFERS]} differ{'s' if n[DIFFERS] == 1 else ''}",
        f"{n[NOT_TESTED]} not tested",
        *([f"{n[NOT_APPLICABLE]} not applicable"] if n[NOT_APPLICABLE] else []),
    ]
    return ", ".join(parts)


def by_source(rows) -> list[tuple[str, list]]:
    """The rows grouped by whose claim they test (:data:`SOURCES`; a related
    paper by its name), the paper's first."""
    names = [SOURCES.get(r.source, r.source) for r in rows]
    order = [*SOURCES.values(), *sorted(set(names) - set(SOURCES.values()))]
    groups = [(o, [r for r, n in zip(rows, names) if n == o]) for o in order]
    return [(o, g) for o, g in groups if g]


def source_counts(rows) -> str:
    """One clause per source: "the paper: 18 rows: 14 reproduced, …; this book's
    controls: 15 rows: …" (a control's verdict says whether this book's check held,
    not whether the paper did)."""
    return "; ".join(f"{o}: {len(g)} rows: {_counted(g)}" for o, g in by_source(rows))


def summary(rows) -> str:
    """The page's first line: per source, "n rows: r reproduced, k partly, d differ, t
    not tested" over the computed rows, and how many more rows the chapters
    compute."""
    return (
        f"**In short:** {source_counts(rows)} (from the shipped runs and the exact "
        f"theory); {len(CLAIMS) - len(rows)} more rows at the end are computed by "
        "their chapters when the book is built."
    )


def write_page(path="book/scorecard.md", rows=None) -> None:
    """Write :func:`page` to ``path`` (``python -m markovlib.companion.scorecard`` from
    the
    repository root)."""

    Path(path).write_text(page(rows), encoding="utf-8")


README_START = (
    "<!-- scorecard: python -m markovlib.companion.scorecard --pin writes it -->"
)
README_END = "<!-- /scorecard -->"


def readme_table(rows) -> str:
    """The computed rows as the README's Markdown table (id, claim, value, verdict,
    runs judged, runs at H(π)), the paper's figures named as the paper's."""

    def cell(x) -> str:
        return "–" if x is None else paper_figures(str(x)).replace("|", "\\|")

    lines = [
        "| id | claim | measured | verdict | runs read | at H(π) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r.id}` | {cell(r.claim)} | {cell(r.value)} | {r.verdict} "
            f"| {cell(r.runs)} | {cell(r.trapped)} |"
        )
    return "\n".join([*lines, "", f"{source_counts(rows)}."])


def readme_block(rows) -> str:
    """:func:`readme_table` between the README's markers."""
    return f"{README_START}\n{readme_table(rows)}\n{README_END}"


def write_readme(path="README.md", rows=None) -> None:
    """Replace the scorecard block of the README (between :data:`README_START` and
    :data:`README_END`) with the computed rows."""
    rows = compute() if rows is None else rows
    text = Path(path).read_text(encoding="utf-8")
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(
            f"{path} has no scorecard block ({README_START!r} … {README_END!r})"
        )
    new = text[:start] + readme_block(rows) + text[end + len(README_END) :]
    Path(path).write_text(new, encoding="utf-8")


def pin(path="tests/scorecard_paper.json", rows=None) -> None:
    """Write the verdicts and counts of :func:`compute` to the test's pinned table."""

    rows = compute() if rows is None else rows
    table = [
        {k: r.as_dict().get(k) for k in ("id", "verdict", "runs", "trapped")}
        for r in rows
    ]
    Path(path).write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":  # python -m markovlib.companion.scorecard [--pin]
    import sys

    computed = compute()
    write_page(rows=computed)
    if "--pin" in sys.argv[1:]:
        pin(rows=computed)
        write_readme(rows=computed)
