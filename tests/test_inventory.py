"""markovlib.companion.inventory: every claim of the paper accounted for (issue 67),
each row of the paper's naming an entry, each entry a row or a reason; the page in
sync."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

from markovlib.companion import claims, computed, findings, inventory, pseudo_tex

ROOT = Path(__file__).resolve().parents[1]
# the text this book works from (the steering checkout's shared/, beside the clone)
PAPER_TEXT = ROOT.parent / "shared" / "PAPER.md"


def test_every_row_of_the_paper_names_an_entry_and_every_entry_a_row_or_reason():
    assert inventory.problems() == [], "mend markovlib/companion/inventory.py"
    n = inventory.counts()
    assert sum(n.values()) == len(inventory.ENTRIES)
    assert n["exactly"] and n["in part"] and n["not judged"]


PAPER_ROWS = [c for c in claims.CLAIMS if c.source in ("paper", "poster")]


@pytest.mark.parametrize("row", PAPER_ROWS, ids=lambda c: c.id)
def test_removing_a_rows_entry_fails_the_rule(row):
    """The tampered inventory, without the entries that judge ``row``, breaks it."""
    kept = [e for e in inventory.ENTRIES if row.id not in e.exact + e.part]
    assert len(kept) < len(inventory.ENTRIES)
    wanted = f"row {row.id} ({row.source}) names no inventory entry"
    assert wanted in inventory.problems(kept)


def _tampered(entry_id: str, **changes):
    """The inventory with entry ``entry_id`` changed."""
    return [
        dataclasses.replace(e, **changes) if e.id == entry_id else e
        for e in inventory.ENTRIES
    ]


def test_an_entry_with_no_row_and_no_reason_fails_the_rule():
    found = inventory.problems(_tampered("fig4", exact=(), controls=()))
    assert "row fig4 (paper) names no inventory entry" in found
    assert "entry fig4: judged not judged and no reason given" in found
    found = inventory.problems(_tampered("layer_norm", reason=""))
    assert found == ["entry layer_norm: judged in part and no reason given"]


def test_a_row_that_is_not_the_claims_cannot_judge_it_exactly():
    found = inventory.problems(_tampered("fig3a", exact=("fig3a", "precision")))
    assert any("row precision (this book" in f for f in found)  # a control
    found = inventory.problems(_tampered("fig4", exact=("fig4", "fig1")))
    assert any("row fig1 (paper, 'Fig 1') judges another's" in f for f in found)
    found = inventory.problems(_tampered("fig4", controls=("fig4_3runs", "fig1")))
    assert found == ["entry fig4: control fig1 is the paper's"]
    found = inventory.problems(_tampered("fig4", controls=("no_such_row",)))
    assert found == ["entry fig4: no row no_such_row"]


@pytest.mark.skipif(not PAPER_TEXT.is_file(), reason=f"no {PAPER_TEXT}")
def test_every_quote_is_in_the_text_the_book_works_from():
    assert inventory.missing_quotes(PAPER_TEXT.read_text(encoding="utf-8")) == []
    assert inventory.missing_quotes("an unrelated text") != []


def _prose(text: str) -> str:
    """``text`` without its maths and code spans."""
    return re.sub(r"`[^`]*`", "", re.sub(r"\$[^$]*\$", "", text))


def _not_typeset(text: str) -> list[str]:
    """Pseudo-TeX and figures not named as the paper's in ``text``'s prose."""
    prose = _prose(text)
    return pseudo_tex.PSEUDO_TEX.findall(prose) + pseudo_tex.bare_figures(prose)


def test_every_figure_in_the_books_sources_is_named_as_the_papers():
    """The pages' and chapters' own prose (markdown cells) names each figure as the
    paper's and has no count of one with a plural noun: the browser check of the
    built pages found a bare "its Fig 1" and "the paper's Fig 1 runs" only at the end
    of `make test` (2026-11-30); the sources read in a tenth of a second."""
    found = {}
    for path in sorted((ROOT / "book").glob("*.*")):
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            text = "\n".join(
                "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
            )
        elif path.suffix == ".md":
            text = path.read_text(encoding="utf-8")
        else:
            continue
        prose = re.sub(r"\s+", " ", _prose(text))  # a line's end reads as a space
        bad = pseudo_tex.bare_figures(prose) + pseudo_tex.wrong_plurals(prose)
        # "the authors' the paper's Fig 1": a possessive before a figure that the
        # generated pages name as the paper's (claims.paper_figures)
        bad += re.findall(r"\w['’] the paper['’]s Figs? ?\d", prose)
        if bad:
            found[path.name] = bad
    assert found == {}
    assert pseudo_tex.bare_figures(_prose("at its Fig 1's settings, as $Fig 2$")) != []
    assert pseudo_tex.wrong_plurals(_prose("the paper's Fig 1 runs; `1 runs`")) == [
        "1 runs"
    ]


def test_the_page_is_in_sync_in_the_toc_and_typeset():
    text = (ROOT / inventory.PAGE).read_text(encoding="utf-8")
    assert text == inventory.page(), "python -m markovlib.companion.inventory"
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert files[:2] == ["book/scorecard", "book/claims_inventory"]
    assert text.startswith("# What the paper claims, and where this book checks it\n")
    assert _not_typeset(text) == []
    for e in inventory.ENTRIES:  # every row it names is on the page, by id
        assert all(f"`{r}`" in text for r in e.rows)
    assert all(f"`{c.id}`" in text for c in claims.CLAIMS)


@pytest.fixture(scope="module")
def rows(tmp_path_factory, worker_id):
    """The paper edition's computed rows, once per test session (xdist: one file)."""
    if worker_id == "master":
        return computed.compute()
    path = tmp_path_factory.getbasetemp().parent / "scorecard-rows.pickle"
    with FileLock(f"{path}.lock"):
        if not path.is_file():
            path.write_bytes(pickle.dumps(computed.compute()))
        return pickle.loads(path.read_bytes())


def test_the_intro_opens_with_what_the_book_found_glued_from_the_rows(rows):
    text = (ROOT / findings.INTRO).read_text(encoding="utf-8")
    block = findings.block(rows)
    assert block in text, "stale: python -m markovlib.companion.findings"
    sections = re.findall(r"^## (.*)$", text, flags=re.M)
    assert sections[0] == "What this book found"
    assert text.index("## What this book found") < text.index(block)
    assert text.index(block) < text.index(f"## {sections[1]}")
    listed = findings.lines(rows)
    assert 5 <= len(listed) <= 7
    chapters = {
        Path(c["file"]).name
        for p in yaml.safe_load((ROOT / "_toc.yml").read_text())["parts"]
        for c in p["chapters"]
    }
    for line in listed:  # each links to its chapter and says a verdict
        chapter = re.match(r"- \{doc\}`[^<`]+<(\w+)>`: ", line)[1]
        assert chapter in chapters and (ROOT / "book" / f"{chapter}.ipynb").is_file()
        assert re.search(r"\*(reproduced|partly|differs|too few runs)\*", line)
    assert _not_typeset(block) == []


def test_a_findings_value_is_the_rows_and_a_missing_row_fails(rows):
    v = findings.Value("a (x; y); b (95 % interval 1–2 %)", "partly")
    assert f"{v}|{v:(}|{v:;}|{v.verdict}" == "a (x; y); b|a|a (x; y)|partly"
    with pytest.raises(ValueError):
        format(v, "x")
    for f in findings.FINDINGS:
        for row in re.findall(r"\{(\w+)", f.text):
            with pytest.raises(KeyError, match=row):
                findings.lines([r for r in rows if r.id != row])
