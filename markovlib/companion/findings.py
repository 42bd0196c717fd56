"""What this book found, first (issue 67): the short list that opens the book's
introduction, each line a few of the scorecard's computed rows (their measured values
and verdicts, as :func:`~markovlib.companion.computed.compute` gives them) linking to
the chapter that measures them. Only the words between the values are typed here;
``python -m markovlib.companion.findings`` writes the list into ``book/intro.md``
between :data:`START` and :data:`END`, and a test keeps it in sync with the rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .claims import paper_figures
from .scorecard import as_maths

__all__ = ["Finding", "FINDINGS", "block", "write_intro", "START", "END"]

INTRO = Path("book") / "intro.md"
# MyST comments: nothing on the page
START = "% findings: python -m markovlib.companion.findings writes this list"
END = "% /findings"


@dataclass(frozen=True)
class Finding:
    """One line of the list: a link to ``chapter``, a sentence of rows' values."""

    # ``text`` formats the rows by id: ``{fig3a}`` the row's value without its
    # intervals, ``{fig3a:(}`` up to its first parenthesis, ``{thm2:;}`` up to its
    # first semicolon (both outside parentheses), ``{fig3a.verdict}`` its verdict

    chapter: str
    link: str
    text: str


FINDINGS: tuple[Finding, ...] = (
    Finding(
        "bad_local_minima",
        "Theorems 1 to 3, computed exactly",
        "Thm 1's constructions: largest |loss − H_rate| {thm1} (*{thm1.verdict}*); at "
        "θ_π on (0.5, 0.8), the smallest eigenvalue of the tied Hessian's (e, b) block "
        "is {thm2:(} (Thm 2, to second order, *{thm2.verdict}*), of the untied one's "
        "(e, a, b) block {thm3:(} (Thm 3's saddle, *{thm3.verdict}*).",
    ),
    Finding(
        "trapped",
        "Stuck at H(π), and the precision",
        "tied on (0.5, 0.8) at the authors' settings, {fig3a} (Fig 3(a), "
        "*{fig3a.verdict}*); the same seeds and batches, {precision:(} "
        "(*{precision.verdict}*); every run at H(π), of these and of the theory "
        "model, trained on in float32: {thesis_stays_fp32} "
        "(*{thesis_stays_fp32.verdict}*).",
    ),
    Finding(
        "trapped",
        "The paper's Fig 4 grid",
        "{fig4:(} (*{fig4.verdict}*); untied above the line, "
        "{untied_escape:(} (*{untied_escape.verdict}*); below the line, "
        "{below_line} (Sec. 4.2, *{below_line.verdict}*).",
    ),
    Finding(
        "trapped",
        "Sec. 4.2's explanation",
        "a local minimum at the runs of Fig 3(a) at H(π) (as this book reads Sec. "
        "4.2): {thesis_fig3a:(} "
        "(*{thesis_fig3a.verdict}*); Sec. 2's marginal layer norm, on the theory "
        "model: {layer_norm:(} (*{layer_norm.verdict}*).",
    ),
    Finding(
        "depth",
        "Depth",
        "{fig1} (Fig 1, *{fig1.verdict}*); a local minimum at Fig 1's trapped single "
        "layers (Sec. 4.2, which names Fig 1, as this book reads it): "
        "{thesis_fig1:(} (*{thesis_fig1.verdict}*); Sec. 4.4's curvature at θ_π "
        "with more layers (the smallest eigenvalue of the Hessian's (e, b) block), "
        "{depth_curvature:;} (*{depth_curvature.verdict}*).",
    ),
    Finding(
        "multi_state",
        "Five states",
        "{fig5_low} (Fig 5 below the threshold, *{fig5_low.verdict}*); {fig5} "
        "(Fig 5 at p = 0.9, where the tied runs are said to get stuck, "
        "*{fig5.verdict}*).",
    ),
    Finding(
        "incontext",
        "In context",
        "two layers on sequences with a kernel of their own: {incontext_induction} "
        "(the abstract's induction head, *{incontext_induction.verdict}*); their "
        "loss within 0.1 of the gap above the Bayes floor: {incontext_bayes} "
        "(*{incontext_bayes.verdict}*).",
    ),
)


def _cut(text: str, sep: str) -> str:
    """``text`` up to the first ``sep`` outside parentheses (all of it if none)."""
    depth = 0
    for i, ch in enumerate(text):
        if depth == 0 and text.startswith(sep, i):
            return text[:i]
        depth += (ch == "(") - (ch == ")")
    return text


class Value(str):
    """A row's measured value, formatted as :class:`Finding` says, with its verdict."""

    def __new__(cls, text: str, verdict: str):
        """The value ``text`` of a row whose verdict is ``verdict``."""
        value = super().__new__(cls, text)
        value.verdict = verdict
        return value

    def __format__(self, spec: str) -> str:
        """The value without its intervals, cut at ``spec`` ('(' or ';') if given."""
        text = str(self)
        i = text.rfind(" (95 %")  # the intervals, last (verdicts.with_intervals)
        text = text[:i] if i >= 0 and text.endswith(")") else text
        if spec in ("(", ";"):
            return _cut(text, " (" if spec == "(" else "; ")
        if spec:
            raise ValueError(f"format {spec!r}: '(' or ';' or none")
        return text


def lines(rows) -> list[str]:
    """The list's lines from the computed ``rows`` (KeyError: a row gone)."""
    values = {r.id: Value(r.value, r.verdict) for r in rows}
    out = []
    for f in FINDINGS:
        try:
            body = paper_figures(as_maths(f.text.format(**values)))
        except KeyError as gone:
            raise KeyError(
                f"markovlib/companion/findings.py reads row {gone}, which the "
                "scorecard does not have: name the row that replaced it"
            ) from None
        out.append(f"- {{doc}}`{f.link} <{f.chapter}>`: {body}")
    return out


LEAD = (
    "What the paper edition's runs and the exact theory found, each line glued from "
    "the {doc}`scorecard`'s rows (their values and verdicts); every claim of the "
    "paper, and the row that judges it: {doc}`claims_inventory`."
)


def block(rows) -> str:
    """The intro's generated block: the markers, the lead sentence and the list."""
    return "\n".join([START, LEAD, "", *lines(rows), END])


def write_intro(path=INTRO, rows=None) -> None:
    """Write :func:`block` of ``rows`` (default: computed) into ``path``."""
    if rows is None:
        from .computed import compute

        rows = compute()
    text = Path(path).read_text(encoding="utf-8")
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{path} has no findings block ({START!r} … {END!r})")
    new = text[:start] + block(rows) + text[end + len(END) :]
    Path(path).write_text(new, encoding="utf-8")


if __name__ == "__main__":  # python -m markovlib.companion.findings
    write_intro()
