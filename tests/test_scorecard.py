"""markovlib.companion.scorecard: the verdict rule, the registry against the chapters,
the page in
sync."""

from __future__ import annotations

import functools
import json
import os
import pickle
import re
from pathlib import Path

import pytest
import torch
import yaml
from filelock import FileLock

from markovlib.companion import claims, computed, scorecard, verdicts
from markovlib.presets import authors, resolve

ROOT = Path(__file__).resolve().parents[1]
SMOKE, CPU, PAPER = (resolve(s) for s in ("smoke", "cpu", "paper"))


@pytest.mark.parametrize(
    ("ok", "scale", "exact", "applicable", "expected"),
    [
        (True, CPU, False, True, "reproduced"),
        (False, CPU, False, True, "differs"),
        (True, PAPER, False, True, "reproduced"),
        (False, PAPER, False, True, "differs"),
        (True, SMOKE, False, True, "not tested at this scale"),
        (False, SMOKE, False, True, "not tested at this scale"),
        (True, SMOKE, True, True, "reproduced"),  # exact claims hold at every scale
        (False, SMOKE, True, True, "differs"),
        (True, CPU, False, False, "not applicable to this chain"),
        (False, SMOKE, True, False, "not applicable to this chain"),
    ],
)
def test_the_verdict_rule(ok, scale, exact, applicable, expected):
    got = scorecard.verdict(ok, scale, exact=exact, applicable=applicable)
    assert got == expected and got in verdicts.VERDICTS


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ((("escaped", 16, 16),), "reproduced"),  # interval 79-100 %
        ((("escaped", 3, 3),), "too few runs"),  # 29-100 %: no count of 3 decides
        ((("escaped", 5, 6),), "partly"),  # 36-100 %: six runs could have decided
        ((("at H(π)", 11, 32),), "partly"),  # 19-53 %: Fig 1's depth 1
        ((("at H(π)", 2, 32),), "differs"),  # 1-21 %
        ((("escaped", 18, 18), ("at H(π)", 3, 6)), "partly"),  # the worst part
        ((("escaped", 18, 18), ("at H(π)", 0, 8)), "differs"),
        ((("escaped", 18, 18), ("at H(π)", 2, 2)), "too few runs"),
        ((("escaped", 2, 2), ("at H(π)", 3, 6)), "partly"),  # partly is worse
    ],
)
def test_a_claim_about_runs_is_judged_by_the_interval_of_its_share(counts, expected):
    """The four outcomes of analysis.claim_outcome, worst part first; ``ok`` (the
    row's own check) decides only where every counted part holds (issue 67: counts
    that hold never override a check that failed)."""
    assert scorecard.verdict(True, PAPER, counts=counts) == expected
    failed = "differs" if expected == "reproduced" else expected
    assert scorecard.verdict(False, PAPER, counts=counts) == failed
    assert scorecard.verdict(True, SMOKE, counts=counts) == "not tested at this scale"
    assert scorecard.verdict(False, SMOKE, exact=True, counts=counts) == "differs"


def test_an_exact_claim_not_computed_here_is_not_tested():
    """A row with no scale read nothing: thm2_descent at `smoke` (20 descent steps,
    not computed) is not tested, not a verdict either way."""
    for ok in (True, False):
        assert scorecard.verdict(ok, None, exact=True) == "not tested at this scale"
    assert scorecard.verdict(True, SMOKE, exact=True) == "reproduced"


@pytest.mark.parametrize(
    ("counts", "unlike", "expected"),
    [
        ((("escaped", 12, 12),), False, "reproduced"),  # 74-100 %: decided
        ((("at H(π)", 0, 12),), False, "differs"),  # 0-26 %: decided
        ((("at H(π)", 3, 6),), False, "not tested at this scale"),  # partly
        ((("escaped", 3, 3),), False, "not tested at this scale"),  # too few runs
        ((("escaped", 12, 12), ("at H(π)", 4, 6)), False, "not tested at this scale"),
        ((("at H(π)", 12, 12),), True, "not tested at this scale"),  # may still leave
        ((("at H(π)", 0, 12),), True, "not tested at this scale"),
    ],
)
def test_a_reduced_scale_leaves_what_its_runs_cannot_decide_untested(
    counts, unlike, expected
):
    """Issue 46: at ``cpu`` (fewer and shorter runs than the paper edition's) an
    undecided share, and a claim that runs stay at H(π) on runs unlike the authors',
    are not tested; the paper scale keeps every verdict."""
    assert scorecard.smaller_than_the_paper(
        CPU
    ) and not scorecard.smaller_than_the_paper(PAPER)
    assert not scorecard.smaller_than_the_paper(SMOKE)  # not tested at all
    assert scorecard.verdict(True, CPU, counts=counts, unlike=unlike) == expected
    at_paper = scorecard.verdict(True, PAPER, counts=counts, unlike=unlike)
    assert at_paper == scorecard.verdict(True, PAPER, counts=counts)
    assert scorecard.verdict(False, CPU, exact=True, unlike=True) == "differs"


def test_no_verdict_from_zero_runs():
    """Issue 70: a part of no runs (Sec. 4.1's f = π₁ with no run at H(π)) leaves the
    claim not tested at every scale; an exact claim is unaffected."""
    none = (("f = π₁ whatever the input", 0, 0),)
    for scale in (CPU, PAPER):
        assert (
            scorecard.verdict(False, scale, counts=none) == "not tested at this scale"
        )
        both = (("escaped", 12, 12), *none)
        assert scorecard.verdict(True, scale, counts=both) == "not tested at this scale"
    assert verdicts.counts_text(none) == (
        "95 % interval: f = π₁ whatever the input 0 of 0, —"
    )


def test_unlike_the_authors_reads_the_claim_and_the_scale():
    """Fig 5's tied runs stay at H(π) for the authors' 5 000 iterations: a cpu re-run
    of 400 cannot show it; Fig 3(a)'s cpu runs have the authors' 400 iterations but
    length 256 (theirs 1024: the trapped chapter counts fewer traps on shorter
    sequences); the paper edition's Fig 3(a) is theirs; a claim that runs escape is
    never cut."""
    fig5, fig3a, fig3b = (claims.claim(c) for c in ("fig5", "fig3a", "fig3b"))
    multi = resolve("cpu", "multi_state", environ=False)
    assert multi.steps == 400
    assert "400 iterations (the authors' 5000)" in scorecard.unlike_the_authors(
        fig5, multi
    )
    assert not scorecard.unlike_the_authors(
        fig5, resolve("paper", "multi_state", environ=False)
    )
    trapped = resolve("cpu", "trapped", environ=False)
    assert scorecard.unlike_the_authors(fig3a, trapped) == [
        "length 256 (the authors' 1024)"
    ]
    paper = authors("fig3", resolve("paper", "trapped", environ=False))
    assert not scorecard.unlike_the_authors(fig3a, paper)
    assert not scorecard.unlike_the_authors(fig3b, multi)
    # a claim that runs leave H(π) counts them too (a 400-iteration re-run of
    # (0.6, 0.5) read 'differs' for "the trap is a plateau that training leaves")
    blm = resolve("cpu", "bad_local_minima", environ=False)
    for cid in ("fig3a_fp32", "trap_models"):
        assert claims.claim(cid).traps and not claims.claim(cid).stays
        assert "length 256 (the authors' 1024)" in scorecard.unlike_the_authors(
            claims.claim(cid), blm
        )
    assert all(c.traps for c in claims.CLAIMS if c.stays)


def test_counts_text_gives_each_parts_interval():
    # the interval beside the count it belongs to, one part or several (issue 67)
    assert verdicts.counts_text((("at H(π)", 25, 32),)) == (
        "95 % interval: at H(π) 25 of 32, 60–91 %"
    )
    assert verdicts.counts_text((("a", 3, 3), ("b", 0, 8))) == (
        "95 % intervals: a 3 of 3, 29–100 %; b 0 of 8, 0–37 %"
    )


def test_numpy_booleans_are_verdicts_too():
    import numpy as np

    assert scorecard.verdict(np.bool_(True), CPU) == "reproduced"
    assert scorecard.verdict(np.bool_(False), CPU) == "differs"


def test_unknown_claim_and_untyped_value_are_refused():
    with pytest.raises(ValueError, match="claim must be one of"):
        claims.claim("thm9")
    with pytest.raises(TypeError, match="as the chapter prints it"):
        scorecard.glue_claim("thm1", 0.001, True, CPU)


def test_claims_cover_the_issue_list():
    ids = {c.id for c in claims.CLAIMS}
    assert len(ids) == len(claims.CLAIMS)  # unique glue keys
    wanted = {"thm1", "thm2", "thm3", "fig1", "fig3a", "fig3b", "fig3c", "fig4", "fig5"}
    wanted |= {"appd_attention", "appd_positions", "appd_rank", "appd_formula"}
    wanted |= {"appd_direction"}  # issue 47: e ∝ v, p_n ∝ v, W₁ = w vᵀ, W₂ = v wᵀ
    wanted |= {"higher_order", "poster_masking", "trap_models", "k_threshold"}
    wanted |= {"fig3a_fp32", "fig4_fp32", "precision"}
    # issue 30: every claim of the paper a row, controls beside the authors' settings
    wanted |= {"fig3b_fp32", "appd_untied", "fig3c_untied", "bad_minimum"}
    wanted |= {"untied_escape_fp32", "fig4_3runs", "below_line", "fig5_fp32"}
    wanted |= {"fig1_fp32", "depth_factors"}
    wanted |= {"ccmc_equivalence", "ccmc_rate", "ccmc_collapse"}
    assert wanted <= ids


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [c["file"] for part in toc["parts"] for c in part["chapters"]]


@pytest.fixture(scope="module")
def rows(tmp_path_factory, worker_id):
    """The paper edition's scorecard, computed from the shipped runs once per test
    session (issue 51: 27 s; both pytest-xdist workers read the one computation)."""
    if worker_id == "master":
        return scorecard.compute()
    path = tmp_path_factory.getbasetemp().parent / "scorecard-rows.pickle"
    with FileLock(f"{path}.lock"):
        if not path.is_file():
            path.write_bytes(pickle.dumps(scorecard.compute()))
        return pickle.loads(path.read_bytes())


def test_the_page_is_in_sync_and_right_after_the_introduction(rows):
    text = (ROOT / "book" / "scorecard.md").read_text()
    assert text == scorecard.page(rows)
    # issue 49: the claims' plain names are maths on the page (H_rate, θ_π, ...)
    prose = re.sub(r"\$[^$]*\$", "", text)  # what is not maths
    assert [plain for plain in scorecard.MATHS if plain in prose] == []
    assert "$H_{\\rm rate}$" in text and "$\\theta_\\pi$" in text
    assert _toc_files()[0] == "book/scorecard"
    # issue 49: the paper's figures are "the paper's Fig 3(b)", the book's "Fig. N"
    assert re.findall(r"(?<!paper's )\bFig \d", text) == []
    assert "The paper's Fig 3(b): tied and untied" in text


def test_paper_figures_are_named_as_the_papers():
    f = scorecard.paper_figures
    assert f("Fig 3(b): tied") == "The paper's Fig 3(b): tied"
    assert f("the GPT-2 model of Fig 3(b)") == "the GPT-2 model of the paper's Fig 3(b)"
    assert f("settings (Fig 3)") == "settings (the paper's Fig 3)"
    for same in ("Fig. 5", "the paper's Fig 5", "SubFig 2"):  # the book's; said; a word
        assert f(same) == same


def test_the_readme_table_is_the_computed_scorecard(rows):
    text = (ROOT / "README.md").read_text()
    assert scorecard.readme_block(rows) in text, (
        "README's scorecard table is stale: "
        "python -m markovlib.companion.scorecard --pin"
    )


PINNED = ROOT / "tests" / "scorecard_paper.json"


def test_the_paper_editions_verdicts_are_pinned(rows):
    """Every computed row's verdict and counts, against the table checked in: a change
    that flips a verdict (code or data) must update tests/scorecard_paper.json on
    purpose (python -m markovlib.companion.scorecard --pin)."""
    got = [
        {k: r.as_dict().get(k) for k in ("id", "verdict", "runs", "trapped")}
        for r in rows
    ]
    assert got == json.loads(PINNED.read_text())
    assert [r.id for r in rows] == list(scorecard.COMPUTED)


@functools.cache
def _shipped_rows() -> dict:
    """key -> (chain, learnt kernel) of every shipped run, read straight from the
    Parquet files (a run shared by two groups is stored once, in one of them)."""
    import pandas as pd

    out = {}
    for path in sorted((ROOT / "data" / "paper").glob("*.parquet")):
        frame = pd.read_parquet(path, columns=["key", "spec", "metrics"])
        for key, spec, metrics in zip(frame["key"], frame["spec"], frame["metrics"]):
            out[key] = json.loads(spec)["chain"], json.loads(metrics)["learnt_kernel"]
    return out


def _independent_trapped(group: str) -> tuple[int, int]:
    """(runs, runs at θ_π) of a shipped group counted straight from the stored learnt
    kernels: r = (P̂(1|0) − P̂(1|1)) / (p + q − 1) below 0.1, over cells off the line."""
    from markovlib.runs.experiments import paper_edition

    rows = _shipped_rows()
    n = t = 0
    for spec in dict(paper_edition())[group]:
        chain, K = rows[spec.key]
        effect = chain["p"] + chain["q"] - 1
        if abs(effect) < 1e-9:
            continue
        n += 1
        t += (K[0][1] - K[1][1]) / effect < 0.1
    return n, t


def test_trapped_counts_equal_an_independent_count_from_the_kernels(rows):
    by_id = {r.id: r for r in rows}
    for cid in ("fig3a", "fig4_3runs", "fig4_fp32", "fig3a_fp32", "precision"):
        row = by_id[cid]
        if row.verdict == scorecard.NOT_TESTED:
            continue  # its runs are not all shipped yet
        counts = [_independent_trapped(g) for g in row.groups]
        assert row.trapped == sum(t for _, t in counts), cid


@pytest.mark.parametrize("c", claims.CLAIMS, ids=lambda c: c.id)
def test_every_claim_is_recorded_by_its_chapter_and_links_to_a_target(c):
    path = ROOT / "book" / f"{c.chapter}.ipynb"
    assert f"book/{c.chapter}" in _toc_files()
    nb = json.loads(path.read_text())
    code = "\n".join(
        "".join(cell["source"]) for cell in nb["cells"] if cell["cell_type"] == "code"
    )
    # the chapter records this claim on the scorecard (its id as a literal); that the
    # values are glued is checked on the executed chapters (test_notebooks)
    assert "glue_claim" in code and f'"{c.id}"' in code, c.id
    everything = json.dumps(nb)
    assert c.target in everything, f"{c.target} is not defined in {c.chapter}"


def test_glue_claims_marks_missing_runs_not_tested():
    from markovlib.companion.measures import Measure

    S = resolve("paper")
    verdicts = scorecard.glue_claims(
        {
            "fig3c": Measure("x", True),
            "trap_models": None,
            "fig3a_fp32": Measure("y", False),
        },
        S,
    )
    assert verdicts == {
        "fig3c": scorecard.REPRODUCED,
        "trap_models": scorecard.NOT_TESTED,
        "fig3a_fp32": scorecard.DIFFERS,
    }
    off = scorecard.glue_claims({"fig3c": None}, S, applicable=False)
    assert off == {"fig3c": scorecard.NOT_APPLICABLE}


def test_claims_report_is_one_format_for_every_chapter(monkeypatch):
    """Issue 41: the chapters' last cells printed three formats, and depth printed "all
    claims of this chapter hold" above "fig1: differs". Issue 70: each line says whose
    runs it read."""
    from types import SimpleNamespace

    from markovlib.companion.scorecard import claims_report, glue_claim

    monkeypatch.setattr(scorecard, "_GLUED", {})
    S = SimpleNamespace(name="smoke")
    glue_claim("thm2", "0.1420", True, CPU)
    text = claims_report(
        S,
        {"fig1": "differs", "thm2": "reproduced"},
        {"fig1": "depth 1: 0 of 3 runs at H(π)", "thm2": None},
    )
    assert text.splitlines() == [
        "The exact claims of this chapter hold at the smoke scale (asserted above).",
        "Its claims on the scorecard, by the rule (runs read: yours, the paper "
        "edition's shipped ones, exact, or none):",
        "  fig1  differs                     none     depth 1: 0 of 3 runs at H(π)",
        "  thm2  reproduced                  exact",
    ]
    assert "all claims" not in claims_report(S, {}) and "\n" not in claims_report(S, {})


def test_a_chapters_claims_table_has_one_line_per_claim():
    """Issue 49: a chapter's claims box was a paragraph of bold text with five
    intervals in one sentence; now one list-table row per recorded claim: badge, claim,
    k of n per part (or the value), the 95 % interval of each, and the setting and the
    whole measurement in a closed dropdown."""
    from markovlib.analysis import share_interval
    from markovlib.companion.scorecard import claims_table, glue_claim
    from markovlib.companion.verdicts import counts_text

    parts = (("attention", 7, 8), ("rank", 2, 8))
    verdicts = {
        "thm1": glue_claim("thm1", "2.2e-16", True, CPU),
        "fig3b": glue_claim(
            "fig3b", "3 of 4 runs escaped", True, CPU, counts=(("", 3, 4),)
        ),
        "appd_untied": glue_claim(
            "appd_untied", "untied: ...", False, CPU, counts=parts
        ),
    }
    table = claims_table(verdicts)
    assert table.startswith("```{list-table}") and table.endswith("```")
    rows = table.split("\n* - ")[2:]  # after the header row
    assert len(rows) == 3
    for row, (cid, v) in zip(rows, verdicts.items()):
        c = claims.claim(cid)
        assert row.startswith(scorecard.badge(v)), row
        assert ":::{dropdown} Details" in row and ":open:" not in row
        assert scorecard.as_maths(c.setting).split(",")[0] in row
    assert rows[0].rstrip().endswith("  - 2.2e-16\n  - —")
    low, high = share_interval(3, 4)
    assert (
        rows[1].rstrip().endswith(f"  - 3 of 4\n  - {100 * low:.0f}–{100 * high:.0f} %")
    )
    assert "  - attention 7 of 8; rank 2 of 8\n" in rows[2]
    assert counts_text(parts) in rows[2]  # the whole measurement, in the dropdown


def test_a_claim_about_the_papers_chain_is_asked_of_the_readers(monkeypatch):
    """Issue 70: a re-run on (0.3, 0.9) titled its row "Fig 3(a): tied runs stay at
    H(π) on (0.5, 0.8)" and judged it on the reader's runs; now the row asks the claim
    of (0.3, 0.9), says what Thm 2 predicts there and whose runs it read, and runs of
    another length than the authors' leave it an observation."""
    from markovlib.companion.scorecard import claims_report, claims_table, glue_claim

    monkeypatch.setattr(scorecard, "_GLUED", {})
    S = resolve("cpu", "trapped", environ=False)
    stays = (("at H(π)", 6, 6),)
    verdicts = {
        "fig3a": glue_claim("fig3a", "6 of 6 at H(π)", True, S, counts=stays),
        "fig4": glue_claim("fig4", "9 of 10 cells", True, PAPER, counts=(("", 9, 10),)),
    }
    assert verdicts["fig3a"] == "not tested at this scale"  # length 256, not 1024
    yours = claims_table(verdicts, chain=(0.3, 0.9))
    mine, grid = yours.split("\n* - ")[2:]
    assert (
        "tied runs end at H(π) on (0.3, 0.9) (the paper's Fig 3(a) on (0.5, 0.8)"
        in mine
    )
    assert "(0.5, 0.8), GPT-2" in mine  # the paper's setting, in the dropdown
    assert r"Thm 2 makes $\theta_\pi$ a local minimum" in mine and "1.2 > 1" in mine
    assert "Your 6 runs on (0.3, 0.9), trained at the cpu scale" in mine
    assert "length 256 (the authors' 1024)" in mine
    assert "paper edition's shipped runs" in grid and "asked of" not in grid
    # the paper's label stays the paper's in a control of this book's; an exact row
    # names no chain (Thm 2 on Fig 4's grid is not computed on the page's chain)
    source = scorecard.claim_title(claims.claim("layer_norm"), (0.3, 0.9))[1]
    assert source.startswith("the paper's Sec. 2 on (0.5, 0.8), asked of")
    scorecard.glue_claim("thm2_grid", "10 chains", True, S)
    glued = scorecard._GLUED["thm2_grid"]
    assert scorecard.runs_read(claims.claim("thm2_grid"), glued, (0.3, 0.9)) == (
        "Computed exactly, no training."
    )
    scorecard.glue_claim("fig3a", "1 of 1", True, S, counts=(("at H(π)", 1, 1),))
    assert "Your 1 run on" in scorecard.runs_read(
        claims.claim("fig3a"), scorecard._GLUED["fig3a"], (0.3, 0.9)
    )
    theirs = claims_table(verdicts, chain=(0.5, 0.8))
    assert "Fig 3(a): tied runs end at H(π) on (0.5, 0.8) (paper)" in theirs
    values = {"fig3a": "6 of 6 at H(π)"}
    report = claims_report(S, verdicts, values, chain=(0.3, 0.9)).splitlines()
    assert report[2].split()[:2] == ["fig3a", "not"]
    assert report[2].endswith("yours    asked of this chain: 6 of 6 at H(π)")
    assert "shipped" in report[3] and "asked" not in report[3]


def test_a_rows_measurement_is_said_once():
    """Issue 41: "share of the gap learnt: share of the gap: window 1 0.999" and
    "runs with each property: untied: attention 8 of 8" said the measure twice."""
    from markovlib.companion.scorecard import _measured

    assert _measured("smallest eigenvalue", "0.1420") == "smallest eigenvalue: 0.1420"
    assert _measured("x", "-0.0710") == "x: -0.0710"
    assert _measured("x", "3.9e-05 (k = 2, 3, 5)") == "x: 3.9e-05 (k = 2, 3, 5)"
    shared = "share of the gap: window 1 0.999, full attention 0.004"
    assert _measured("share of the gap learnt", shared) == shared
    assert _measured("runs that escaped", "16 of 16 runs escaped").startswith("16 of")


def test_thm2_row_checks_every_part_of_the_theorem_at_theta_pi(monkeypatch):
    """Issue 47: Thm 2's row also states f = π₁, L = H(π), ∇L = 0 and a Hessian zero
    outside (e, b) at θ_π; a point off θ_π (e and the positional embeddings moved by
    0.05) fails it."""
    from markovlib import binary, theory

    chain = binary(0.5, 0.8)
    m = computed.thm2_point(chain)
    assert m.ok and "over 810 parameters" in m.value
    exact = theory.unigram_point

    def off(chain, config):
        model = exact(chain, config)
        with torch.no_grad():
            model.wte.weight[1] += 0.05
            model.wpe.weight[:] += 0.05
        return model

    monkeypatch.setattr(computed, "unigram_point", off)
    assert not computed.thm2_point(chain).ok


def test_the_cli_table_keeps_its_columns_at_the_terminal_width(rows, monkeypatch):
    """Issue 49: `markovlib scorecard` broke its columns on long ids and values ran
    past the terminal: ids and verdicts padded to the longest, values wrapped under
    their column."""
    import inprocess

    import markovlib.companion.computed as computed

    monkeypatch.setattr(computed, "compute", lambda data: rows)  # the CLI's, on call
    out = inprocess.run("scorecard", env={**os.environ, "COLUMNS": "90"}).stdout
    lines = out.splitlines()[:-1]  # the last: the counts
    assert lines and max(map(len, lines)) <= 90, max(lines, key=len)
    starts = {ln.index(r.verdict) for r in rows for ln in lines if f"  {r.id} " in ln}
    assert len(starts) == 1  # every verdict in one column
