"""markovlib.scorecard: the verdict rule, the registry against the chapters, the page in
sync."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from markovlib import scorecard
from markovlib.presets import resolve

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
    assert got == expected and got in scorecard.VERDICTS


def test_numpy_booleans_are_verdicts_too():
    import numpy as np

    assert scorecard.verdict(np.bool_(True), CPU) == "reproduced"
    assert scorecard.verdict(np.bool_(False), CPU) == "differs"


def test_unknown_claim_and_untyped_value_are_refused():
    with pytest.raises(ValueError, match="claim must be one of"):
        scorecard.claim("thm9")
    with pytest.raises(TypeError, match="as the chapter prints it"):
        scorecard.record("thm1", 0.001, True, CPU)


def test_claims_cover_the_issue_list():
    ids = {c.id for c in scorecard.CLAIMS}
    assert len(ids) == len(scorecard.CLAIMS)  # unique glue keys
    wanted = {"thm1", "thm2", "thm3", "fig1", "fig3a", "fig3b", "fig3c", "fig4", "fig5"}
    wanted |= {"appd_attention", "appd_positions", "appd_rank", "appd_formula"}
    wanted |= {"poster_depth", "poster_masking", "trap_models", "k_threshold"}
    wanted |= {"ccmc_equivalence", "ccmc_rate", "ccmc_collapse"}
    assert wanted <= ids


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [c["file"] for part in toc["parts"] for c in part["chapters"]]


def test_the_page_is_in_sync_and_right_after_the_introduction():
    assert (ROOT / "book" / "scorecard.md").read_text() == scorecard.page()
    assert _toc_files()[0] == "book/scorecard"


@pytest.mark.parametrize("c", scorecard.CLAIMS, ids=lambda c: c.id)
def test_every_claim_is_recorded_by_its_chapter_and_links_to_a_target(c):
    path = ROOT / "book" / f"{c.chapter}.ipynb"
    assert f"book/{c.chapter}" in _toc_files()
    nb = json.loads(path.read_text())
    code = "\n".join(
        "".join(cell["source"]) for cell in nb["cells"] if cell["cell_type"] == "code"
    )
    # the chapter records this claim on the scorecard (its id as a literal); that the
    # values are glued is checked on the executed chapters (test_notebooks)
    assert "record(" in code and f'"{c.id}"' in code, c.id
    everything = json.dumps(nb)
    assert c.target in everything, f"{c.target} is not defined in {c.chapter}"
