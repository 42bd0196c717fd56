"""The reproduction scorecard: one row per claim of the paper (and of this book), its
verdict by one rule.

A chapter checks each of its claims at the scale it ran and calls :func:`record` with
the number it measured (already formatted, as the chapter prints it) and whether the
claim's check held. ``record`` glues ``sc_<id>_value`` and ``sc_<id>_verdict``; the
scorecard page (``book/scorecard.md``, written by :func:`page` and kept in sync by a
test) pastes both from the chapter, so the page never types a number and building the
book at another scale changes numbers and verdicts by itself.

The rule (:func:`verdict`, stated on the page):

* **reproduced** — the chapter's check of the claim holds;
* **differs** — it fails, for an exact (untrained) claim at any scale, or for a
  trained claim at a scale whose runs are long enough to claim convergence
  (``cpu``, ``paper``);
* **not tested at this scale** — a trained claim at a scale that claims nothing about
  convergence (``smoke``), whatever its check says; at a reduced scale (``cpu``: fewer
  and shorter runs than the paper edition's), a trained claim its runs leave undecided
  (too few runs, partly), or one that counts runs at H(π) judged on runs whose
  length, batch or (shorter) iterations differ from the authors' (``unlike``: settings
  the trapped chapters measured to change how many runs stay; issue 70), or any
  claim a part of which has no run to judge;
* **not applicable to this chain** — the reader's chain is outside the claim's setting
  (e.g. a claim about p + q > 1 on a chain with p + q < 1).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..analysis import (
    AT_UNIGRAM_BELOW,
    CLAIM_SHARE,
    ESCAPED_ABOVE,
    FAILS,
    HOLDS,
    PARTLY as PARTLY_HOLDS,
    TOO_FEW as TOO_FEW_RUNS,
    claim_outcome,
    hessian_blocks,
    share_interval,
)
from ..chains import binary
from ..model import TransformerConfig
from ..presets import AUTHORS, resolve
from ..runs.experiments import paper_edition
from ..runs.shipped import ShippedData, default_data_dir, no_data_message
from ..theory import (
    construction_checks,
    gradient_norm,
    hessian,
    population_loss,
    unigram_curvature,
    unigram_hessian,
    unigram_point,
)
from . import thesis
from .claims import CLAIMS, Claim, chain_text, claim, evaluate, paper_figures
from .measures import Measure, k_threshold
from .notebook import glue
from .records import Groups, Incomplete

__all__ = [
    "by_source",
    "source_counts",
    "VERDICTS",
    "verdict",
    "record",
    "claims_report",
    "page",
    "write_page",
]

REPRODUCED, DIFFERS, PARTLY = "reproduced", "differs", "partly"
TOO_FEW = "too few runs"  # no k of the part's n could decide (n <= 5)
NOT_TESTED, NOT_APPLICABLE = "not tested at this scale", "not applicable to this chain"
VERDICTS = (REPRODUCED, TOO_FEW, PARTLY, DIFFERS, NOT_TESTED, NOT_APPLICABLE)
# analysis.claim_outcome of a part of a claim -> its verdict; the worst part decides
_OUTCOME = {
    HOLDS: REPRODUCED,
    TOO_FEW_RUNS: TOO_FEW,
    PARTLY_HOLDS: PARTLY,
    FAILS: DIFFERS,
}


def verdict(
    ok: bool,
    scale=None,
    *,
    exact: bool = False,
    applicable: bool = True,
    counts: tuple = (),
    unlike: bool = False,
) -> str:
    """The page's rule: see the module docstring. ``scale`` is a
    :class:`~markovlib.presets.Scale`; ``counts``: the runs that behave as a trained
    claim says, per part, (part, k, n), judged by
    :func:`~markovlib.analysis.claim_outcome` (the worst part decides; a part of no
    runs leaves the claim not tested); ``unlike``: the claim says runs stay at H(π)
    and its runs differ from the authors' (:func:`unlike_the_authors`)."""
    if not isinstance(ok, bool):
        ok = bool(ok)
    if not applicable:
        return NOT_APPLICABLE
    if not exact and (scale is None or not scale.converges):
        return NOT_TESTED
    if not exact and any(n == 0 for _, _, n in counts):
        return NOT_TESTED  # no verdict from zero runs
    v = REPRODUCED if ok else DIFFERS
    if counts and not exact:
        outcomes = [_OUTCOME[claim_outcome(k, n)] for _, k, n in counts]
        worst = (REPRODUCED, TOO_FEW, PARTLY, DIFFERS)
        v = max(outcomes, key=worst.index)
    cut = not exact and smaller_than_the_paper(scale)
    return NOT_TESTED if cut and (unlike or v in (TOO_FEW, PARTLY)) else v


def smaller_than_the_paper(scale) -> bool:
    """Whether ``scale`` trains fewer or shorter runs than the paper edition's and
    claims convergence (``cpu``, a reader's re-run; issue 46)."""
    return scale is not None and scale.converges and scale.name != "paper"


def unlike_the_authors(c: Claim, scale) -> list[str]:
    """Where ``c`` counts runs at H(π) (:attr:`Claim.traps`): how the runs of
    ``scale`` differ from the authors' of its figure
    (:data:`~markovlib.presets.AUTHORS`) in what the book measured to change how many
    runs stay (fewer iterations: a run at H(π) may still leave; the length and batch:
    the trapped chapter's tokens per batch), e.g. ['length 256 (the authors' 1024)'];
    empty otherwise."""
    A = AUTHORS.get(c.authors) if c.authors else None
    if not (c.traps and A and scale is not None):
        return []
    out = [f"{scale.steps} iterations (the authors' {A.steps})"]
    out = out if scale.steps < A.steps else []
    for name, mine, theirs in (
        ("length", scale.seq_len, A.seq_len),
        ("batch", scale.batch_size, A.batch_size),
    ):
        out += [f"{name} {mine} (the authors' {theirs})"] if mine != theirs else []
    return out


def _interval(k: int, n: int) -> str:
    """The 95 % interval of a share of k of n runs: '60–91 %' ('—': no runs)."""
    if n == 0:
        return "—"
    low, high = share_interval(k, n)
    return f"{100 * low:.0f}–{100 * high:.0f} %"


def counts_text(counts: tuple) -> str:
    """The 95 % interval of each part's share of runs, for the row beside its counts:
    '95 % interval 60–91 %', or per part where the claim has several."""
    if len(counts) == 1:
        return f"95 % interval {_interval(*counts[0][1:])}"
    return "95 % intervals: " + "; ".join(
        f"{part} {k} of {n}, {_interval(k, n)}" for part, k, n in counts
    )


def with_intervals(c: Claim, value: str, counts: tuple) -> str:
    """A trained row's measured value with each part's interval (:func:`counts_text`)
    beside it, as the chapters glue it and the scorecard prints it."""
    return f"{value} ({counts_text(counts)})" if counts and not c.exact else value


def record(
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
    _RECORDED[c.id] = Recorded(v, value, tuple(counts), scale, tuple(unlike))
    return v


@dataclass(frozen=True)
class Recorded:
    """What :func:`record` judged, for the chapter's table: the verdict, the value,
    the counts, the scale of the runs it read (None: none) and how they differ from
    the authors' where that left the claim untested."""

    verdict: str
    value: str
    counts: tuple
    scale: object = None
    unlike: tuple = ()


_RECORDED: dict[str, Recorded] = {}  # claim id: what record judged


def _claim_line(c: Claim, r: Recorded, chain=None) -> list[str]:
    """One claim of a chapter's table: its badge, the claim (asked of the page's
    ``chain`` (p, q) where the paper's is another; :func:`runs_read` beneath it; its
    setting and the whole measurement in a closed dropdown), runs k of n (or the
    value), the interval."""
    counts, value = r.counts, r.value
    parts = len(counts) > 1
    if counts and not c.exact:
        runs = "; ".join(f"{p + ' ' if parts else ''}{k} of {n}" for p, k, n in counts)
        interval = "; ".join(_interval(k, n) for _, k, n in counts)
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
        f"  - {paper_figures(as_maths(claim_text))} ({source})",
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
    whose = f"{owner or c.source + chr(39) + 's'} {c.label or 'claim'}"
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


def runs_read(c: Claim, r: Recorded, chain=None) -> str:
    """Which runs a row judged (issue 70): this page's (chain, scale, count), the
    paper edition's shipped ones, or none; and how they differ from the authors' where
    that leaves the claim an observation."""
    on = f" on {chain_text(*chain)}" if chain else ""
    if r.scale is None:
        read = "No runs read: not tested"
    elif c.exact:
        read = f"Computed exactly{on}"
    elif r.scale.name == "paper":
        read = "Read from the paper edition's shipped runs"
    else:
        n = max((n for _, _, n in r.counts), default=0)
        runs = f"{n} runs" if n else "runs"
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
    the setting and the whole measurement one click away, as :func:`record` had them."""
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
        r = _RECORDED.get(cid) or Recorded(v, "", ())
        lines += _claim_line(claim(cid), r, chain)
    return "\n".join([*lines, "```"])


def claims_report(
    S, verdicts: dict[str, str], values: dict | None = None, chain=None
) -> str:
    """The last lines of every chapter, in one format: its exact claims hold at the
    scale ``S`` (the assertions above them passed), then each of its scorecard claims
    with the verdict :func:`record` gave, whose runs it read and the measurement
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
            read = _whose(claim(cid), _RECORDED.get(cid))
            asked = (
                "asked of this chain: " if asked_elsewhere(claim(cid), chain) else ""
            )
            line = f"  {cid:<{width}}  {v:<26}  {read:<7}  {asked}{value}"
            lines.append(line.rstrip())
    return "\n".join(lines)


def _whose(c: Claim, r: Recorded | None) -> str:
    """The runs a row read, in a word: yours, shipped, exact or none."""
    if r is None or r.scale is None:
        return "none"
    if c.exact:
        return "exact"
    return "shipped" if r.scale.name == "paper" else "yours"


def record_measures(
    measured: dict, scale, *, applicable: bool = True, missing: str = "not shipped yet"
) -> dict[str, str]:
    """:func:`record` each claim id's :class:`~markovlib.companion.measures.Measure`
    (None: its
    runs are not shipped yet, so ``missing`` and not tested); return the verdicts."""
    verdicts = {}
    for cid, m in measured.items():
        value, ok, at = (missing, False, None) if m is None else (m.value, m.ok, scale)
        counts = () if m is None else m.counts
        verdicts[cid] = record(cid, value, ok, at, applicable=applicable, counts=counts)
    return verdicts


PAGE_INTRO = """\
# Scorecard

Which of the paper's claims does this book reproduce? One row per claim: the paper's \
theorems and
figures, the claims its text makes without a figure, the poster's second-order claim, \
the follow-up
paper's initialisation story, and this book's own findings.

**Whose settings.** Each trained row's setting is read from the specs of the runs it \
judged. A row
is the paper's only when every one of those runs is at the authors' settings of its \
figure
(`markovlib.presets.AUTHORS`: iterations, batch, length, d, heads and precision, each \
from their
config or script); otherwise it is this book's control and says how it differs. The \
authors ran
fp16 autocast on CUDA; here fp16 is PyTorch's CPU autocast to float16 (the same \
autocast rules,
CPU kernels), which has not been checked against a GPU run.

**The paper edition.** The rows down to the poster's are computed from the runs \
shipped with
this book and the exact theory; the last rows are computed by their chapters when the \
book is built.

**The rule for trained claims.** A run's *share of the gap* is \
$(H(\\pi) - L) / (H(\\pi) -
H_{{\\rm rate}})$, with $L$ the loss of its learnt kernel (higher-order chains: its \
final test
loss): 0 at the bad point $\\theta_\\pi$, 1 at the global minimum. A run is *at \
$H(\\pi)$* below
{low:g}, *escaped* above {high:g}, *in between* otherwise; a claim about "the runs" \
holds when at
least {share:.0%} of them do it. No trained verdict uses a tolerance in nats: near \
$p + q = 1$ the
gap itself is smaller than any such tolerance. A claim about how runs behave is \
judged by how
many do: $k$ of $n$ runs, and the 95 % (Clopper–Pearson) interval of the share \
$k/n$. The paper's
figures show one run per curve and cannot show that share; this rule, written before \
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
        counted = "" if said else f" ({r.runs} runs)"
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
    intro = PAGE_INTRO.format(
        low=AT_UNIGRAM_BELOW, high=ESCAPED_ABOVE, share=CLAIM_SHARE
    )
    title, rest = intro.split("\n\n", 1)
    table = [*header, *_computed_rows(rows), *_chapter_rows(), "```"]
    rest = paper_figures(rest)
    return f"{title}\n\n{summary(rows)}\n\n{rest}" + "\n".join(table) + "\n"


# Whose claim a row tests, as the summaries name them: the paper's rows first, then
# this book's controls and the related papers' rows
SOURCES = {
    "paper": "the paper",
    "poster": "the poster",
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
    runs judged, runs at H(π))."""

    def cell(x) -> str:
        return "–" if x is None else str(x).replace("|", "\\|")

    lines = [
        "| id | claim | measured | verdict | runs | at H(π) |",
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


# ------------------------------------------------ the scorecard computed from the data
# Rows of the paper edition that `markovlib scorecard` computes from the shipped runs
# and the exact theory; the others (the related papers' chapters) are computed by
# their chapters when the book is built.
EXACT = ("thm1", "thm2", "thm3", "k_threshold", "thm2_grid", "thm3_point")
EXACT += ("depth_curvature",)
COMPUTED = tuple(c.id for c in CLAIMS if c.groups or c.id in EXACT)


@dataclass(frozen=True)
class Row:
    """One computed row of the scorecard."""

    id: str
    claim: str
    source: str
    setting: str
    measure: str
    value: str
    verdict: str
    runs: int | None = None
    trapped: int | None = None
    groups: tuple = ()

    def as_dict(self) -> dict:

        d = asdict(self)
        d["groups"] = list(self.groups)
        if d["runs"] is None:  # exact rows: no runs
            del d["runs"], d["trapped"]
        return d


def _exact() -> dict:
    """The exact rows: Thm 1's constructions at (0.2, 0.3) and at (0.5, 0.8), where
    p + q > 1, Thm 2's and Thm 3's Hessians at the paper's chains, the k-state threshold
    (bisection on the exact Hessian)."""

    trap = binary(0.5, 0.8)
    built = {  # Thm 1 holds for every (p, q): below the line and above it
        (chain, name): c
        for chain in (binary(0.2, 0.3), trap)
        for name, c in construction_checks(chain)[0].items()
    }
    dev = max(abs(c["loss"] - ch.entropy_rate()) for (ch, _), c in built.items())
    thm1 = dev < 1e-9 and all(
        c["kernel_error"] < 1e-6 and c["grad"] < 1e-6 for c in built.values()
    )
    out = {"thm1": Measure(f"{dev:.1e} over {len(built)} constructions", thm1)}
    for cid, tied in (("thm2", True), ("thm3", False)):
        H = unigram_hessian(trap, TransformerConfig.theory(tied=tied))
        closed = unigram_curvature(trap, tied=tied)
        sign = H.min_eigenvalue > 0 if tied else H.min_eigenvalue < 0
        out[cid] = Measure(
            f"{H.min_eigenvalue:.4f} (closed form {closed:.4f})",
            bool(sign and abs(H.min_eigenvalue - closed) < 1e-6),
        )
    point = thm2_point(trap)
    out["thm2"] = Measure(
        f"{out['thm2'].value}; {point.value}", out["thm2"].ok and point.ok
    )
    out["k_threshold"] = k_threshold()
    out["thm2_grid"], out["thm3_point"] = thesis.thm2_grid(), thesis.thm3_point()
    out["depth_curvature"] = thesis.depth_rule(thesis.depth_curvature(trap), trap)
    return out


THM2_LENGTH = 3  # the Hessian at θ_π does not depend on the length (stationary start)


def thm2_point(chain, length: int = THM2_LENGTH) -> Measure:
    """The rest of Thm 2 at θ_π (tied, exact over every path of ``length``): f = π₁
    whatever the input, L = H(π), ∇L = 0, and the Hessian of every parameter zero
    outside the rows and columns of (e, b); each below 1e-9."""
    model = unigram_point(chain, TransformerConfig.theory(max_len=length)).double()
    with torch.no_grad():  # b = log π in float64, not float32
        model.head.bias.copy_(torch.as_tensor(np.log(chain.stationary())))
    x = chain.sample(64, length, seed=0)
    f = float((model.probabilities(x)[..., 1] - chain.stationary()[1]).abs().max())
    loss = population_loss(model, chain, length=length, exact=True).mean
    gap = abs(loss - chain.unigram_entropy())
    grad = gradient_norm(model, chain, length)
    H, labels = hessian(model, chain, length)
    outside = hessian_blocks(H, labels, ("wte.weight", "head.bias")).outside
    worst = max(f, gap, grad, outside)
    return Measure(
        f"at θ_π, f = π₁, L = H(π), ∇L = 0 and the Hessian outside (e, b) zero "
        f"over {len(labels)} parameters: largest deviation "
        f"{thesis.rounding_text(worst)}",
        worst < 1e-9,
    )


PRECISION_TEXT = {
    "fp32": "float32",
    "bf16": "bf16 autocast",
    "fp16": "fp16 autocast without loss scaling",
    "fp16-scaled": "fp16 autocast with a loss scale of 65536",
}


def _values(xs) -> str:
    """The distinct values of ``xs``, sorted, as 'a' or 'a, b, c'."""
    return ", ".join(map(str, sorted(set(xs))))


def run_settings(specs) -> str:
    """The training settings of ``specs`` as the page prints them (read from the
    specs, so the text cannot disagree with the runs): iterations, batch × length, d,
    depth where it is not 1, precision and the number of runs."""
    t, c = [s.train for s in specs], [s.config for s in specs]
    parts = [
        f"{_values(x.steps for x in t)} iterations",
        f"batch {_values(x.batch_size for x in t)} × length "
        f"{_values(x.seq_len for x in t)}",
        f"d {_values(x.d_model for x in c)}",
    ]
    if {x.n_layers for x in c} != {1}:
        parts.append(f"depth {_values(x.n_layers for x in c)}")
    parts.append(_values(PRECISION_TEXT[x.precision] for x in t))
    return ", ".join(parts) + f"; {len(specs)} runs"


def authors_mismatches(c: Claim, specs) -> list[str]:
    """How the runs of ``c`` differ from the authors' settings of its figure
    (:data:`~markovlib.presets.AUTHORS`), e.g. 'steps: 1000 (400)'; empty when they are
    theirs (and for a row compared with no figure: ``['no published settings']``)."""
    if c.authors is None:
        return ["no published settings"]
    A = AUTHORS[c.authors]
    started = {"continued from a run's final weights" for s in specs if s.init}
    return sorted({m for s in specs for m in A.mismatches(s)} | started)


def setting_text(c: Claim, specs) -> str:
    """The Setting column of a trained row: what is compared, the runs' settings, and
    whether they are the authors' (:func:`authors_mismatches`) or this book's
    control."""
    differ = authors_mismatches(c, specs)
    if c.design:
        whose = f"this book's control at the authors' settings: {c.design}"
    elif not differ:
        whose = f"the authors' settings ({AUTHORS[c.authors].figure})"
    elif c.authors is None:
        whose = "this book's settings (no published ones to match)"
    else:
        whose = f"this book's control, not the authors' settings ({'; '.join(differ)})"
    return f"{c.setting}; {run_settings(specs)}; {whose}"


def _trained(data, edition: dict) -> dict:
    """Every trained row's :class:`~markovlib.companion.measures.Measure` from the
    shipped data (:class:`~markovlib.companion.records.Incomplete` for a row whose runs
    are not all shipped yet)."""
    trained = [c for c in CLAIMS if c.groups]
    runs = Groups.shipped(data, {g: edition[g] for c in trained for g in c.groups})
    return {c.id: evaluate(c, runs) for c in trained}


def compute(data=None) -> list[Row]:
    """The rows of :data:`COMPUTED` from the shipped data (``data``: a folder or a
    :class:`~markovlib.runs.shipped.ShippedData`; default :func:`default_data_dir`) and
    the exact theory, in the page's order. Trains nothing; a row whose runs are not all
    shipped yet is *not tested*, with how many are there. A trained row's setting is
    read from the specs of its runs (:func:`setting_text`)."""

    if not isinstance(data, ShippedData):
        directory = default_data_dir() if data is None else data
        if directory is None:
            raise FileNotFoundError(no_data_message())
        data = ShippedData(directory)
    paper = resolve("paper", environ=False)
    edition = dict(paper_edition())
    measured = {**_exact(), **_trained(data, edition)}
    rows = []
    for c in CLAIMS:
        if c.id not in COMPUTED:
            continue
        m = measured[c.id]
        specs = [s for g in c.groups for s in edition[g]]
        common = dict(
            id=c.id,
            claim=c.claim,
            source=c.source,
            setting=setting_text(c, specs) if specs else c.setting,
            measure=c.measure,
            groups=c.groups,
        )
        if isinstance(m, Incomplete):  # not all shipped yet
            value, verdict_, runs, trapped = (
                f"{m.done} of {m.wanted} {m.what} so far",
                NOT_TESTED,
                m.done,
                None,
            )
        else:
            value, runs, trapped = (
                with_intervals(c, m.value, m.counts),
                m.runs,
                m.trapped,
            )
            verdict_ = verdict(
                m.ok, paper, exact=c.exact, applicable=m.applicable, counts=m.counts
            )
        rows.append(
            Row(**common, value=value, verdict=verdict_, runs=runs, trapped=trapped)
        )
    return rows


if __name__ == "__main__":  # python -m markovlib.companion.scorecard [--pin]
    import sys

    computed = compute()
    write_page(rows=computed)
    if "--pin" in sys.argv[1:]:
        pin(rows=computed)
        write_readme(rows=computed)
