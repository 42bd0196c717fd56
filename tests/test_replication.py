"""An edition re-trained elsewhere (``markovlib edition retrain``): training in several
processes of one store, the longest ensembles first, and the comparison of two
judgements run by run and verdict by verdict."""

from __future__ import annotations

from pathlib import Path

import inprocess
import pytest

from markovlib.companion.replication import compare, report_markdown
from markovlib.companion.scorecard import NOT_TESTED
from markovlib.runs.edition import _ordered, produce, produce_parallel
from markovlib.runs.spec import grid
from markovlib.runs.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(batch_size=2, seq_len=16, eval_every=5, eval_batches=1)
QUIET = dict(log=lambda *a, **k: None)


def _groups(steps=(10, 10)):
    a = grid([0.3], [0.4], tied=[True], seeds=[0, 1], steps=steps[0], **TINY)
    b = grid([0.3], [0.4], tied=[False], seeds=[0, 1], steps=steps[1], **TINY)
    return [("short", a), ("long", b)]


def test_longest_first_puts_the_ensembles_of_most_steps_first():
    groups = _groups(steps=(5, 20))
    assert [name for name, _ in _ordered(groups, 8, longest_first=True)] == [
        "long",
        "short",
    ]
    assert [name for name, _ in _ordered(groups, 8, longest_first=False)] == [
        "short",
        "long",
    ]
    assert [len(c) for _, c in _ordered(groups, 1, longest_first=True)] == [1] * 4


def test_two_processes_train_each_run_once_and_as_one_process_would(
    tmp_path, monkeypatch
):
    groups = _groups()
    one = ResultStore(tmp_path / "one")
    assert produce(groups, one, ensemble_size=2, **QUIET) == 4
    assert produce_parallel(groups, tmp_path / "two", workers=2, ensemble_size=2) == 4
    two = ResultStore(tmp_path / "two")
    assert sorted(two.keys()) == sorted(one.keys())
    for spec in (s for _, specs in groups for s in specs):
        # the same ensembles, one thread each: bit for bit
        assert one.load(spec).final_test_loss == two.load(spec).final_test_loss
    # resumed when done: nothing trained, and no process started
    monkeypatch.setattr(
        "multiprocessing.get_context", lambda *a: pytest.fail("spawned")
    )
    assert produce_parallel(groups, tmp_path / "two", workers=2, ensemble_size=2) == 0


def _judged(classes: dict, verdicts: dict) -> dict:
    return {
        "runs": {
            k: {"group": g, "class": c, "seconds": 1.0} for k, (g, c) in classes.items()
        },
        "verdicts": verdicts,
    }


def test_compare_counts_same_classes_moves_and_changed_verdicts():
    reference = _judged(
        {"a": ("g1", "at H(π)"), "b": ("g1", "escaped"), "c": ("g2", "escaped")},
        {"r1": "reproduced", "r2": "partly", "r3": "reproduced"},
    )
    fresh = _judged(
        {"a": ("g1", "at H(π)"), "b": ("g1", "at H(π)"), "x": ("g2", "escaped")},
        {"r1": "reproduced", "r2": "reproduced", "r3": NOT_TESTED},
    )
    result = compare(fresh, reference)
    assert (result["same"], result["runs"]) == (1, 2)  # "x" is not in the reference
    assert result["groups"]["g1"]["moves"] == {"escaped → at H(π)": 1}
    assert result["verdicts_changed"] == {"r2": ["partly", "reproduced"]}
    assert result["rows_not_judged"] == ["r3"]
    page = report_markdown(result, device="a GPU", seconds=12.3)
    assert "1 of 2 runs" in page and "- r2: partly → reproduced" in page


@pytest.mark.parametrize(
    "args, message",
    [
        (["--against", "README.md"], "needs --results DIR"),
        (["--results", "{tmp}/r", "--device", "cuda"], "CUDA is not available"),
    ],
)
def test_retrain_refuses_in_one_line_before_work(tmp_path, args, message):
    if "cuda" in args:
        pytest.importorskip("torch")
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is here")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    done = inprocess.run("edition", "retrain", *args)  # issue 51: no new interpreter
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
