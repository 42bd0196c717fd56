"""``markovlib verify`` on copies of the shipped data, tampered as a careful reviewer
would (each changed file re-hashed in the manifest so that it looks consistent): every
case fails with a message naming the problem, and the untouched copy passes."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from markovlib.shipped import (
    ShippedData,
    ShippedDataError,
    VerificationError,
    verify,
)
from markovlib.sweep import RunSpec, spec_key

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "data" / "paper"
# the complete group depth-fig1-L1 (3 runs of 500 steps, length 512) in two files
FIRST, SECOND = "depth-fig1-L1-001.parquet", "depth-fig1-L1-002.parquet"


@pytest.fixture
def data(tmp_path) -> Path:
    """A copy of two shipped files of ``data/paper`` with their manifest entries."""
    target = tmp_path / "data"
    target.mkdir()
    manifest = json.loads((PAPER / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if f["name"] in (FIRST, SECOND)]
    for name in (FIRST, SECOND):
        shutil.copy(PAPER / name, target / name)
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


def _rehash(data: Path) -> None:
    """Every file's SHA-256, size and run count updated in the manifest."""
    manifest = json.loads((data / "manifest.json").read_text())
    for f in manifest["files"]:
        path = data / f["name"]
        if path.is_file():
            raw = path.read_bytes()
            f["sha256"], f["bytes"] = hashlib.sha256(raw).hexdigest(), len(raw)
            f["runs"] = len(pd.read_parquet(path, columns=["key"]))
    (data / "manifest.json").write_text(json.dumps(manifest))


def _rewrite(data: Path, name: str, change) -> pd.DataFrame:
    """Apply ``change`` to the rows of file ``name``, write them back and re-hash."""
    frame = change(pd.read_parquet(data / name))
    frame.to_parquet(data / name, compression="zstd", index=False)
    _rehash(data)
    return frame


def _fails(data: Path, error, match: str, **kw) -> None:
    with pytest.raises(error, match=match):
        verify(data, **{"sample": 0, "log": lambda *a: None, **kw})


def test_the_untouched_copy_passes_without_training(data):
    lines = []
    assert verify(data, sample=0, log=lines.append) == 0
    text = "\n".join(lines)
    assert "manifest: 2 files, 3 runs" in text
    assert "edition: 3 of the" in text and "runs of paper_edition() shipped" in text
    assert "incomplete: depth-fig1-L1:" not in text  # its group is complete
    assert "incomplete: depth-fig1-L2: 3 of 3 runs missing" in text
    assert "every run checked without training" in text
    with pytest.raises(VerificationError, match="the edition is incomplete: "):
        verify(data, sample=0, complete=True, log=lambda *a: None)


def _zero_weights(frame: pd.DataFrame) -> pd.DataFrame:
    frame.at[0, "weights"] = bytes(len(frame.at[0, "weights"]))
    return frame


def test_zeroed_final_weights_fail(data):
    key = _rewrite(data, FIRST, _zero_weights).at[0, "key"]
    _fails(
        data,
        VerificationError,
        f"run {key} in {FIRST}: the learnt kernel of its stored weights differs",
    )


def _lower(frame: pd.DataFrame, metrics: bool = True) -> pd.DataFrame:
    """The test-loss history of row 0 lowered by 0.1 nats after step 50; with
    ``metrics`` its metrics made to agree."""
    steps = np.asarray(frame.at[0, "history_step"])
    test = np.asarray(frame.at[0, "test_loss"], dtype=float)
    test = np.where(steps > 50, test - 0.1, test)
    frame.at[0, "test_loss"] = test
    if metrics:
        m = json.loads(frame.at[0, "metrics"])
        tested = ~np.isnan(test)
        close = steps[tested][test[tested] <= m["entropy_rate"] + 0.005]
        m["final_test_loss"] = float(test[tested][-1])
        m["excess"] = m["final_test_loss"] - m["entropy_rate"]
        m["escape_step"] = int(close[0]) if len(close) else None
        frame.at[0, "metrics"] = json.dumps(m, sort_keys=True)
    return frame


@pytest.mark.parametrize(
    "change,match",
    [
        (_lower, "its stored weights give a test loss of .* its history ends at"),
        (
            lambda f: _zero_weights(_lower(f)),
            "the learnt kernel of its stored weights differs",
        ),
        (
            lambda f: _lower(f, metrics=False),
            "metrics final_test_loss .* is not the last test loss of its history",
        ),
    ],
    ids=["lowered", "lowered-zeroed", "lowered-metrics-stale"],
)
@pytest.mark.parametrize("quick", [False, True])
def test_a_history_lowered_after_the_checkpoint_fails(data, change, match, quick):
    """Also with --quick (re-training to step 50): the rest of the history is checked
    against the stored weights first."""
    key = _rewrite(data, FIRST, change).at[0, "key"]
    options = dict(sample=1, quick=True, seed=0) if quick else {}
    _fails(data, VerificationError, f"run {key} in {FIRST}: {match}", **options)


@pytest.mark.parametrize(
    "name,value,match",
    [
        ("entropy_rate", 0.01, "metrics entropy_rate"),
        ("unigram_entropy", -0.01, "metrics unigram_entropy"),
        ("excess", 0.001, "metrics excess"),
        ("escape_step", 10, "metrics escape_step"),
        ("learnt_kernel", 1e-3, "differs from its stored learnt_kernel by 0.001"),
    ],
)
def test_a_stored_metric_that_its_history_or_chain_contradicts_fails(
    data, name, value, match
):
    def change(frame):
        m = json.loads(frame.at[0, "metrics"])
        if name == "learnt_kernel":
            m[name] = (np.asarray(m[name]) + value).tolist()
        else:
            m[name] = (m[name] or 0) + value
        frame.at[0, "metrics"] = json.dumps(m)
        return frame

    _rewrite(data, FIRST, change)
    _fails(data, VerificationError, match)


def test_a_duplicate_key_in_a_second_file_names_both(data):
    first = pd.read_parquet(data / FIRST)
    _rewrite(data, SECOND, lambda f: pd.concat([f, first.iloc[:1]], ignore_index=True))
    key = first.at[0, "key"]
    _fails(
        data,
        ShippedDataError,
        f"run {key} is shipped twice: in {data / FIRST} and in {data / SECOND}",
    )


def test_a_run_swapped_for_another_self_consistent_spec_fails(data):
    """Its seed changed and its key recomputed: the spec hashes to its key, but the
    run is not one of paper_edition()."""

    def reseed(frame):
        spec = json.loads(frame.at[0, "spec"])
        spec["seed"] = 12345
        frame.at[0, "spec"] = json.dumps(spec, sort_keys=True)
        frame.at[0, "seed"] = 12345
        frame.at[0, "key"] = spec_key(spec)
        return frame

    key = _rewrite(data, FIRST, reseed).at[0, "key"]
    assert (
        RunSpec.from_dict(json.loads(pd.read_parquet(data / FIRST).spec[0])).key == key
    )
    _fails(
        data, VerificationError, f"run {key} in {FIRST} is not a run of paper_edition"
    )


def test_a_run_in_the_file_of_another_group_fails(data):
    moved = "depth-fig1-L2-001.parquet"
    (data / SECOND).rename(data / moved)
    manifest = json.loads((data / "manifest.json").read_text())
    for f in manifest["files"]:
        f["name"] = moved if f["name"] == SECOND else f["name"]
    (data / "manifest.json").write_text(json.dumps(manifest))
    _fails(
        data,
        VerificationError,
        f"is in {moved}, a file of group depth-fig1-L2; paper_edition\\(\\) has it in "
        "depth-fig1-L1",
    )


@pytest.mark.parametrize(
    "name", ["../x.parquet", "/tmp/x.parquet", "sub/x.parquet", "..", "x.txt"]
)
def test_a_manifest_name_outside_the_folder_is_refused(data, name):
    shutil.copy(data / FIRST, data.parent / "x.parquet")  # would be read otherwise
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["files"][0]["name"] = name
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShippedDataError, match="which is not a plain .parquet file"):
        ShippedData(data)
    _fails(data, ShippedDataError, f"lists '{name}', which is not a plain")


@pytest.mark.parametrize("name", ["notes.txt", "extra.parquet", "sub", ".hidden"])
def test_every_unlisted_file_is_reported(data, name):
    if name == "sub":
        (data / name).mkdir()
    else:
        (data / name).write_text("x")
    _fails(data, ShippedDataError, f"{data / name} is not listed in the manifest")


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "markovlib", "verify", *args],
        capture_output=True,
        text=True,
    )


def test_a_filter_that_leaves_nothing_to_retrain_fails_in_one_line(data):
    out = cli("--data", str(data), "--sample", "3", "--max-seconds", "0.001")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr
    assert (
        "nothing to re-train: no shipped run was trained in at most 0.001 s"
        in (lines[0])
    )
    out = cli("--data", str(data), "--sample", "0")  # explicitly: no re-training
    assert out.returncode == 0, out.stderr
    assert "none re-trained (--sample 0)" in out.stdout
    out = cli("--data", str(data), "--sample", "0", "--complete")
    assert out.returncode == 1 and "the edition is incomplete" in out.stderr


def test_paper_edition_ignores_MARKOVLIB_SCALE(monkeypatch):
    from markovlib.experiments import paper_edition

    def keys():
        return [(name, [s.key for s in specs]) for name, specs in paper_edition()]

    monkeypatch.delenv("MARKOVLIB_SCALE", raising=False)
    paper = keys()
    monkeypatch.setenv("MARKOVLIB_SCALE", "smoke")
    assert keys() == paper


def test_a_run_from_the_manifold_is_re_trained_from_its_start(tmp_path):
    """The initialisation chapter's AdamW runs start on the low-rank manifold
    (``init`` in their spec): verify re-trains their ensemble from those starts, to the
    step-50 checkpoint, and a start moved in the stored spec is caught (its key)."""
    from markovlib.runs.shipped import _ensemble, _reproduce

    name = "init-manifold-mirror-001.parquet"
    shipped = ShippedData(PAPER)
    key = shipped.rows(name)["key"].iloc[0]
    assert RunSpec.from_dict(shipped.record(key)["spec"]).init["kind"] == "manifold"
    lines: list[str] = []
    members = _ensemble(shipped, key)
    assert len(members) == 28
    assert _reproduce(shipped, members, True, lines.append) == 28
    assert all("reproduced" in line for line in lines)

    target = tmp_path / "data"
    target.mkdir()
    shutil.copy(PAPER / name, target / name)
    manifest = json.loads((PAPER / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if f["name"] == name]
    (target / "manifest.json").write_text(json.dumps(manifest))

    def move_start(frame):
        spec = json.loads(frame.loc[0, "spec"])
        spec["init"]["e"] += 0.5
        frame.loc[0, "spec"] = json.dumps(spec, sort_keys=True)
        return frame

    _rewrite(target, name, move_start)
    with pytest.raises((VerificationError, ShippedDataError), match="key"):
        verify(target, sample=0)


def test_results_swapped_between_two_settings_of_one_seed_fail(tmp_path):
    """Issue 31's case: the result columns of a fp16 run and of the float32 run with
    the same seed swapped, specs kept, manifest re-hashed: each history, metric and
    weight is still consistent with itself, but the results name the other run's
    ensemble."""
    names = ("trap400-gpt2-tied-fp16-001.parquet", "trap400-gpt2-tied-fp32-001.parquet")
    target = tmp_path / "data"
    target.mkdir()
    manifest = json.loads((PAPER / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if f["name"] in names]
    (target / "manifest.json").write_text(json.dumps(manifest))
    a, b = (pd.read_parquet(PAPER / n) for n in names)
    assert a.at[0, "seed"] == b.at[0, "seed"]
    results = [c for c in a.columns if c not in ("key", "spec", "seed")]
    a.loc[0, results], b.loc[0, results] = b.loc[0, results].copy(), a.loc[0, results]
    for frame, name in ((a, names[0]), (b, names[1])):
        frame.to_parquet(target / name, compression="zstd", index=False)
    _rehash(target)
    _fails(
        target,
        VerificationError,
        rf"run ({a.at[0, 'key']} in {names[0]}|{b.at[0, 'key']} in {names[1]}): "
        r"provenance ensemble_members \(8 keys, ensemble size 8\) does not list the "
        "run: its results are another run's",
    )
