"""``markovlib verify`` on copies of the shipped data, tampered as a careful reviewer
would (each changed file re-hashed in the manifest so that it looks consistent): every
case fails with a message naming the problem, and the untouched copy passes."""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import inprocess
import numpy as np
import pandas as pd
import pytest
import torch

import markovlib.runs.verify as verify_module
from markovlib.model import Transformer
from markovlib.runs.edition import produce
from markovlib.runs.export import export
from markovlib.runs.shipped import ShippedData, ShippedDataError, history_of
from markovlib.runs.spec import CHECKPOINT_STEP, RunSpec, grid, make_chain, spec_key
from markovlib.runs.store import ResultStore
from markovlib.runs.verify import (
    FIELDS,
    RETRAIN,
    VerificationError,
    tolerance_of,
    verify,
)
from markovlib.train import TrainResult, final_loss

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
    manifest.pop("derived", None)  # runs copied, not the derived values
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


def test_checking_processes_yield_to_the_re_training_beside_them(data, monkeypatch):
    """Beside a re-training (one process that cannot be split) the checking processes
    run at a lower priority, so that it keeps a core: seed 67948663's verify --sample 1
    --jobs 2 took 89 s with them at its priority, 67 s below it (Intel Xeon)."""
    if os.nice(0) + 1 > 19:
        pytest.skip("this process runs at the lowest priority already")
    expected = min(19, os.nice(0) + verify_module.CHECKERS_NICENESS)
    with verify_module._checkers(2, behind=True) as pool:
        assert list(pool.map(os.nice, [0] * 4)) == [expected] * 4
    asked = []

    def recorded(jobs, behind=False):
        asked.append(behind)
        raise KeyboardInterrupt  # before any check or training

    monkeypatch.setattr(verify_module, "_checkers", recorded)
    for sample in (0, 1, "all"):
        with pytest.raises(KeyboardInterrupt):
            verify(data, sample=sample, jobs=2, log=lambda *a: None)
    assert asked == [False, True, True]


def test_a_checking_process_killed_mid_task_ends_the_wait_in_one_line():
    """A checking process killed while it holds a task (kill -9, or for want of
    memory) ends the wait for that task in a VerificationError at once (a
    multiprocessing pool, which replaces the process but not its task, waited for
    ever), and the way out ends the other process."""
    others = {p.pid for p in multiprocessing.active_children()}
    with verify_module._checkers(2) as pool:
        pids = {p.pid for p in multiprocessing.active_children()} - others
        assert len(pids) == 2
        task = pool.submit(time.sleep, 120)
        (sleeping,) = pids - {pool.submit(os.getpid).result(timeout=120)}
        os.kill(sleeping, signal.SIGKILL)
        t0 = time.perf_counter()
        with pytest.raises(VerificationError, match="a checking process ended"):
            verify_module._unbroken(task.result)
        assert time.perf_counter() - t0 < 10
    for pid in pids:  # none left running
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_one_seed_draws_the_runs_and_the_derived_values(data, monkeypatch):
    """Without --seed, the seed that "repeat with --seed S" names draws the derived
    values too (it drew them from fresh entropy: S repeated the runs only)."""
    seeds = {}

    def recorded(name, value):
        def record(data, sample, seed, *rest):
            seeds[name] = seed
            return value

        return record

    monkeypatch.setattr(verify_module, "_recompute_derived", recorded("derived", 0))
    monkeypatch.setattr(verify_module, "_draw", recorded("runs", []))
    monkeypatch.setattr(verify_module, "_check_runs", lambda *a: a[-1]())  # no checks
    verify(data, sample=1, log=lambda *a: None)
    assert isinstance(seeds["runs"], int) and seeds["derived"] == seeds["runs"]


def test_two_processes_check_what_one_checks(data):
    """--jobs 2 splits the checks without training over two spawned processes: the
    same summary numbers as one process, and a zeroed run still fails, named."""
    one, two = [], []
    verify(data, sample=0, log=one.append)
    verify(data, sample=0, jobs=2, log=two.append)
    one, two = (next(ln for ln in x if "without training in" in ln) for x in (one, two))
    numbers = re.compile(r"max \|Δ\| [^ ]+")
    assert numbers.findall(one) == numbers.findall(two) and numbers.findall(one)
    assert "2 processes" in two and "1 process)" in one
    key = _rewrite(data, SECOND, _zero_weights).at[0, "key"]
    _fails(data, VerificationError, f"run {key} in {SECOND}: metrics", jobs=2)
    # the processes check the runs while this one checks the files: the files' error
    # is the one raised, as with one process, not the zeroed run's
    (data / "stray.parquet").write_bytes(b"")
    _fails(data, ShippedDataError, "stray.parquet is not listed", jobs=2)

    # ... and before an error of the ensembles' check, which runs first
    def another_runs(frame):  # its results listed as another run's
        _provenance(frame, "ensemble_members", lambda members: ["0" * 20])
        return frame

    _rewrite(data, FIRST, another_runs)
    for jobs in (1, 2):
        _fails(data, ShippedDataError, "stray.parquet is not listed", jobs=jobs)
    (data / "stray.parquet").unlink()
    _fails(data, VerificationError, "provenance.ensemble_members", jobs=2)
    lines = []  # the run-by-run checks skipped: the zeroed run is not looked at
    verify(data, sample=0, checks=False, log=lines.append)
    assert not any("checked without training" in line for line in lines)


def _zero_weights(frame: pd.DataFrame) -> pd.DataFrame:
    frame.at[0, "weights"] = bytes(len(frame.at[0, "weights"]))
    return frame


def test_zeroed_final_weights_fail(data):
    key = _rewrite(data, FIRST, _zero_weights).at[0, "key"]
    _fails(
        data,
        VerificationError,
        f"run {key} in {FIRST}: metrics.learnt_kernel differs from the learnt kernel "
        "of its stored weights",
    )


@pytest.mark.parametrize("quick", [False, True])
def test_zeroed_checkpoint_weights_fail_without_training(data, quick):
    """The step-50 checkpoint set to zeros, the manifest re-hashed: its loss on fresh
    paths (log 2) is not the history's test loss at step 50 (issue 40; today's main
    passes it with --sample 0 and --quick --sample 0)."""

    def zero(frame):
        frame.at[0, "checkpoint"] = bytes(len(frame.at[0, "checkpoint"]))
        return frame

    key = _rewrite(data, FIRST, zero).at[0, "key"]
    _fails(
        data,
        VerificationError,
        f"run {key} in {FIRST}: test_loss at step 50 is 0\\.6[0-9]{{3}}, its stored "
        r"checkpoint weights give 0\.6931 on fresh paths \(\|Δ\| 0\.0[0-9]{3} > "
        r"0\.0[0-9]{3} nats, 6 standard errors\)",
        quick=quick,
    )


def _lower(frame: pd.DataFrame, metrics: bool = True) -> pd.DataFrame:
    """The loss history of row 0 lowered by 0.1 nats after step 50 (train and test
    alike, so that they agree); with ``metrics`` its metrics made to agree."""
    steps = np.asarray(frame.at[0, "history_step"])
    test = np.asarray(frame.at[0, "test_loss"], dtype=float)
    test = np.where(steps > 50, test - 0.1, test)
    frame.at[0, "test_loss"] = test
    train = np.asarray(frame.at[0, "train_loss"], dtype=float)
    frame.at[0, "train_loss"] = np.where(steps > 50, train - 0.1, train)
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
        (
            _lower,
            "test_loss ends at .*, its stored weights give .* on fresh paths",
        ),
        (
            lambda f: _zero_weights(_lower(f)),
            "metrics.learnt_kernel differs from the learnt kernel of its stored",
        ),
        (
            lambda f: _lower(f, metrics=False),
            "metrics.final_test_loss .*; its chain and history give",
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
        ("entropy_rate", 0.01, "metrics.entropy_rate"),
        ("unigram_entropy", -0.01, "metrics.unigram_entropy"),
        ("excess", 0.001, "metrics.excess"),
        ("escape_step", 10, "metrics.escape_step"),
        ("learnt_kernel", 1e-3, "metrics.learnt_kernel differs .* by 0.001"),
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
        data,
        VerificationError,
        f"run {key} in {FIRST}: spec is not a run of paper_edition",
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
        f"in {moved}: spec is a run of group depth-fig1-L1 of paper_edition\\(\\), not "
        "of group depth-fig1-L2",
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


def test_a_data_file_must_be_a_regular_file_inside_the_folder(data, tmp_path):
    """Issue 71: a listed Parquet file replaced by a symbolic link to the same bytes
    outside the data folder verified (its hash is the manifest's)."""
    outside = tmp_path / "elsewhere.parquet"
    shutil.move(data / FIRST, outside)
    (data / FIRST).symlink_to(outside)
    says = f"{data / FIRST} is a symbolic link to {outside}, not a regular file inside"
    _fails(data, ShippedDataError, re.escape(says))
    with pytest.raises(ShippedDataError, match=re.escape(says)):
        ShippedData(data).index()  # a chapter reading the data refuses it too


@pytest.mark.parametrize("name", ["notes.txt", "extra.parquet", "sub", ".hidden"])
def test_every_unlisted_file_is_reported(data, name):
    if name == "sub":
        (data / name).mkdir()
    else:
        (data / name).write_text("x")
    _fails(data, ShippedDataError, f"{data / name} is not listed in the manifest")


def cli(*args):
    """``markovlib verify ARGS`` in this process (tests/inprocess.py)."""
    return inprocess.run("verify", *args)


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
    assert "no run re-trained (--sample 0)" in out.stdout
    out = cli("--data", str(data), "--sample", "0", "--complete")
    assert out.returncode == 1 and "the edition is incomplete" in out.stderr


def test_paper_edition_ignores_MARKOVLIB_SCALE(monkeypatch):
    from markovlib.runs.experiments import paper_edition

    def keys():
        return [(name, [s.key for s in specs]) for name, specs in paper_edition()]

    monkeypatch.delenv("MARKOVLIB_SCALE", raising=False)
    paper = keys()
    monkeypatch.setenv("MARKOVLIB_SCALE", "smoke")
    assert keys() == paper


def test_a_run_from_the_manifold_is_re_trained_from_its_start(tmp_path):
    """Runs that start on the low-rank manifold (``init`` in their spec, as the
    initialisation chapter's AdamW runs): verify re-trains their ensemble from those
    starts bit for bit (an ensemble of 3 tiny runs, trained and exported by the
    library), and a start moved in the stored spec is caught (its key)."""
    from dataclasses import replace

    from markovlib.runs.verify import _ensemble, _retrain

    specs = grid([0.3], [0.4], tied=[True], seeds=[0, 1, 2], preset="theory", **TINY)
    starts = ((0.6, 0.4), (0.3, 0.8), (1.0, 0.2))
    group = [
        replace(s, init={"kind": "manifold", "e": e, "w": w})
        for s, (e, w) in zip(specs, starts)
    ]
    store = ResultStore(tmp_path / "store")
    produce([("manifold", group)], store, threads=1, log=lambda *a, **k: None)
    export([("manifold", group)], store, tmp_path / "data", log=lambda *a: None)
    shipped = ShippedData(tmp_path / "data")
    key = group[0].key
    assert shipped.record(key)["spec"]["init"]["kind"] == "manifold"
    lines: list[str] = []
    members = _ensemble(shipped, key)
    assert sorted(members) == sorted(s.key for s in group)
    assert _retrain(shipped, [members], False, "local", None, lines.append) == 3
    assert all("bit for bit" in line for line in lines), lines

    def move_start(frame):
        spec = json.loads(frame.loc[0, "spec"])
        spec["init"]["e"] += 0.5
        frame.loc[0, "spec"] = json.dumps(spec, sort_keys=True)
        return frame

    _rewrite(tmp_path / "data", "manifold-001.parquet", move_start)
    with pytest.raises((VerificationError, ShippedDataError), match="key"):
        verify(tmp_path / "data", sample=0)


@pytest.mark.parametrize(
    "names",
    [
        ("trap400-gpt2-tied-fp16-001.parquet", "trap400-gpt2-tied-fp32-001.parquet"),
        ("fig4-400-tied-fp16-001.parquet", "fig4-400-untied-fp16-001.parquet"),
    ],
)
def test_results_swapped_between_two_settings_of_one_seed_fail(tmp_path, names):
    """Issue 31's case and its tied/untied twin (two pairs of settings that re-training
    on another CPU cannot tell apart): the result columns of two runs of one chain and
    seed swapped, specs kept, manifest re-hashed: each history, metric and weight is
    still consistent with itself, but the results name the other run's ensemble."""
    target = tmp_path / "data"
    target.mkdir()
    manifest = json.loads((PAPER / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if f["name"] in names]
    manifest.pop("derived", None)  # runs copied, not the derived values
    (target / "manifest.json").write_text(json.dumps(manifest))
    a, b = (pd.read_parquet(PAPER / n) for n in names)
    mates = [
        (i, j)
        for i in range(len(a))
        for j in range(len(b))
        if a.at[i, "seed"] == b.at[j, "seed"]
        and json.loads(a.at[i, "spec"])["chain"] == json.loads(b.at[j, "spec"])["chain"]
    ]
    i, j = mates[0]
    results = [c for c in a.columns if c not in ("key", "spec", "seed")]
    a.loc[i, results], b.loc[j, results] = b.loc[j, results].copy(), a.loc[i, results]
    for frame, name in ((a, names[0]), (b, names[1])):
        frame.to_parquet(target / name, compression="zstd", index=False)
    _rehash(target)
    _fails(
        target,
        VerificationError,
        rf"run ({a.at[i, 'key']} in {names[0]}|{b.at[j, 'key']} in {names[1]}): "
        r"provenance.ensemble_members \(8 keys\) does not list the run: its results "
        "are another run's",
    )


@pytest.mark.parametrize(
    "name, key, size, within",
    [
        (
            "trap400-gpt2-tied-fp16-len256-001.parquet",
            "b22bbd858ca184cbcb72",
            8,
            "within 0.0005 (losses), 0.005 (kernel), 0.05 (predictions",
        ),
        (
            "trap-theory-untied-001.parquet",
            "3e1749471afa9adb03f5",
            1,
            "within 2e-06 (losses), 2e-06 (kernel), 0.0002 (predictions",
        ),
    ],
)
def test_a_run_re_trained_on_another_cpu_passes_within_its_tolerances(
    tmp_path, name, key, size, within
):
    """CI's failure of 2026-11-25: the fp16 ensemble of run b22bbd858ca184cbcb72
    (produced with AVX512 kernels) re-trained with AVX2 ones to step 50 drifts by up to
    1.9e-5 in the learnt kernel, past float32's tolerance of then (1e-5) but inside the
    fp16 tolerances. The float32 run 3e1749471afa9adb03f5 drifts by 1.9e-5 in its
    predictions (benchmarks/drift.py, 2026-11-26), past that 1e-5 too."""
    target = tmp_path / "data"
    target.mkdir()
    manifest = json.loads((PAPER / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if f["name"] == name]
    manifest.pop("derived", None)  # runs copied, not the derived values
    (target / "manifest.json").write_text(json.dumps(manifest))
    frame = pd.read_parquet(PAPER / name)
    members = json.loads(frame.set_index("key").at[key, "provenance"])
    ensemble = members.get("ensemble_members", [key])
    frame = frame[frame["key"].isin(ensemble)].reset_index(drop=True)
    if torch.backends.cpu.get_cpu_capability() == members["cpu_capability"]:
        frame["provenance"] = [  # judged by its tolerances on an AVX512 CPU too
            json.dumps({**json.loads(p), "cpu_capability": "AVX2"})
            for p in frame["provenance"]
        ]
    frame.to_parquet(target / name, compression="zstd", index=False)
    _rehash(target)
    lines = []
    assert verify(target, sample=1, seed=0, quick=True, log=lines.append) == size
    judged = [line for line in lines if "reproduced within" in line]
    assert len(judged) == size and all(within in line for line in judged), lines


def _histories(group: str) -> dict[tuple[str, int], tuple[RunSpec, pd.DataFrame]]:
    """(chain, seed) -> spec and history of every shipped run of ``group`` (read
    without the weights)."""
    columns = ["spec", "steps", "history_step", "lr", "train_loss", "test_loss"]
    out = {}
    for path in sorted(PAPER.glob(f"{group}-0*.parquet")):
        for row in pd.read_parquet(path, columns=columns).to_dict("records"):
            spec = RunSpec.from_dict(json.loads(row["spec"]))
            chain = json.dumps(spec.chain, sort_keys=True)
            out[chain, spec.seed] = spec, history_of(row).set_index("step")
    return out


@pytest.mark.parametrize(
    "first, second, margin",
    [
        ("trap400-gpt2-tied-fp16", "trap400-gpt2-tied-fp16-len512", 2),
        ("trap400-gpt2-tied-fp16-len512", "trap400-gpt2-tied-fp16-len256", 2),
        ("trap400-gpt2-tied-fp32", "trap400-gpt2-tied-fp16", 10),
        ("fig4-400-tied-fp32", "fig4-400-tied-fp16", 10),
        ("fig4-400-untied-fp32", "fig4-400-untied-fp16", 10),
        ("fig4-400-tied-fp32", "fig4-400-untied-fp32", 10),
        ("trap-gpt2-tied", "trap-gpt2-untied", 10),
    ],
)
def test_re_training_tells_two_settings_of_one_seed_apart(first, second, margin):
    """Every shipped run of ``first`` and the run of the same chain and seed in
    ``second`` differ over steps 1-50 by more than ``margin`` times the loss tolerance
    of re-training ``first`` on another CPU (set from the drift benchmarks/drift.py
    measures): float32 runs by 10 times (their tolerance was 1e-5, which the closest
    pair, 2.3e-5 apart, passes only 2.3 times over); fp16 runs of two lengths by
    twice. Settings closer than that for fp16 runs (fp16 against float32, tied against
    untied) are told apart by the provenance check, not by re-training on another
    CPU."""
    a, b = _histories(first), _histories(second)
    pairs = sorted(set(a) & set(b))
    assert len(pairs) == min(len(a), len(b)) >= 32  # every run has its twin
    for pair in pairs:
        (spec, x), (_, y) = a[pair], b[pair]
        steps = range(1, CHECKPOINT_STEP + 1)
        columns = ["train_loss", "test_loss"]
        gap = float((x.loc[steps, columns] - y.loc[steps, columns]).abs().max().max())
        assert gap > margin * tolerance_of(spec)["losses"], (pair, gap)


# ----------------------------------------------------- every field, tampered alone
# a tiny edition exported here: two tied runs trained as one ensemble, one untied run
# trained alone (16 test paths per evaluation: enough for the fresh-loss check)
TINY = dict(steps=60, batch_size=4, seq_len=32, eval_every=10, eval_batches=4)
TIED = "tied-001.parquet"


def tiny_groups():
    specs = grid(
        [0.3],
        [0.4],
        tied=[True, False],
        seeds=[0, 1],
        config_kwargs=dict(max_len=32),
        **TINY,
    )
    return [("tied", specs[:2]), ("untied", specs[2:3])]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """The tiny edition, trained and exported by the library's own code."""
    root = tmp_path_factory.mktemp("tiny")
    store = ResultStore(root / "store")
    produce(tiny_groups(), store, threads=1, log=lambda *a, **k: None)
    export(tiny_groups(), store, root / "data", log=lambda *a: None)
    return root / "data"


def stored_fields(data: Path) -> set[str]:
    """Every column of the shipped files and every key inside their metrics and
    provenance columns."""
    out = set()
    for path in data.glob("*.parquet"):
        frame = pd.read_parquet(path)
        out |= set(frame.columns) - {"metrics", "provenance"}
        for column in ("metrics", "provenance"):
            out |= {f"{column}.{k}" for text in frame[column] for k in json.loads(text)}
    return out


def test_every_stored_field_has_a_check(tiny):
    """A field added to the export without an entry in FIELDS (and a tamper case
    below) fails here."""
    stored = stored_fields(tiny)
    assert stored <= set(FIELDS), sorted(stored - set(FIELDS))
    assert set(FIELDS) - stored == {"diverged_step"}  # derived from the history
    assert set(TAMPER) == set(FIELDS)


def _metric(frame, name, value):
    m = json.loads(frame.at[0, "metrics"])
    m[name] = value(m[name])
    frame.at[0, "metrics"] = json.dumps(m, sort_keys=True)


def _provenance(frame, name, value):
    p = json.loads(frame.at[0, "provenance"])
    p[name] = value(p.get(name))
    frame.at[0, "provenance"] = json.dumps(p, sort_keys=True)


def _at(frame, column, step, value):
    """Row 0's history ``column`` at ``step`` set to value(old)."""
    steps = list(frame.at[0, "history_step"])
    values = np.asarray(frame.at[0, column], dtype=float).copy()
    values[steps.index(step)] = value(values[steps.index(step)])
    frame.at[0, column] = values


def _history_metrics(frame):
    """Row 0's metrics made to agree with its (changed) history by the library's rules:
    final test loss (NaN once diverged), excess, escape step."""
    spec = RunSpec.from_dict(json.loads(frame.at[0, "spec"]))
    history = pd.DataFrame(
        {
            c: np.asarray(frame.at[0, c], dtype=float)
            for c in ("train_loss", "test_loss")
        }
    ).assign(step=np.asarray(frame.at[0, "history_step"]))
    m = json.loads(frame.at[0, "metrics"])
    m["final_test_loss"] = final_loss(history, spec.train)
    m["excess"] = m["final_test_loss"] - m["entropy_rate"]
    tests = history.dropna(subset=["test_loss"])
    close = tests[tests["test_loss"] <= m["entropy_rate"] + 0.005]["step"]
    m["escape_step"] = int(close.iloc[0]) if len(close) else None
    frame.at[0, "metrics"] = json.dumps(m, sort_keys=True)


def _diverge(frame):
    """Losses NaN from step 40 on, metrics to match: a diverged history beside finite
    weights."""
    steps = np.asarray(frame.at[0, "history_step"])
    for column in ("train_loss", "test_loss"):
        values = np.asarray(frame.at[0, column], dtype=float).copy()
        values[steps >= 40] = np.nan
        frame.at[0, column] = values
    _history_metrics(frame)


def _nudge(frame, column, kernel=False):
    """One float of row 0's ``column`` (weights or checkpoint) moved by 1e-3; with
    ``kernel`` the stored learnt kernel recomputed from the moved weights."""
    blob = np.frombuffer(frame.at[0, column], dtype="<f4").copy()
    blob[20] += 1e-3  # a coordinate of position 0's embedding
    frame.at[0, column] = blob.tobytes()
    if kernel:
        spec = RunSpec.from_dict(json.loads(frame.at[0, "spec"]))
        flat, weights = torch.from_numpy(blob), {}
        for name, shape, offset in json.loads(frame.at[0, "weights_index"]):
            weights[name] = flat[offset : offset + math.prod(shape)].reshape(shape)
        model = Transformer(spec.config)
        model.load_state_dict(weights)
        result = TrainResult(
            make_chain(spec.chain), spec.config, model, None, spec.seed, spec.train
        )
        _metric(frame, "learnt_kernel", lambda _: result.learnt_kernel().tolist())


def _rename_first(frame, column):
    index = json.loads(frame.at[0, column])
    index[0][0] += "_renamed"
    frame.at[0, column] = json.dumps(index)


def _drop_step(frame, step):
    steps = list(frame.at[0, "history_step"])
    i = steps.index(step)
    for column in ("history_step", "lr", "train_loss", "test_loss"):
        values = list(frame.at[0, column])
        frame.at[0, column] = values[:i] + values[i + 1 :]


def _respec(frame):
    """Row 0's spec changed (lr), its key recomputed, its ensemble's lists updated."""
    spec = json.loads(frame.at[0, "spec"])
    spec["train"]["lr"] *= 1.01
    old, new = frame.at[0, "key"], spec_key(spec)
    frame.at[0, "spec"], frame.at[0, "key"] = json.dumps(spec, sort_keys=True), new
    frame["provenance"] = [p.replace(old, new) for p in frame["provenance"]]


# field -> (change of row 0 of TIED, re-train every run); the change keeps every other
# field as it is, or consistent with it where a relation binds them
TAMPER = {
    "key": (lambda f: f.__setitem__("key", ["0" * 64, f.at[1, "key"]]), False),
    "spec": (_respec, False),
    "seed": (lambda f: f.__setitem__("seed", [7, f.at[1, "seed"]]), False),
    "steps": (lambda f: f.__setitem__("steps", [61, f.at[1, "steps"]]), False),
    "history_step": (lambda f: _drop_step(f, 3), False),
    "lr": (lambda f: _at(f, "lr", 20, lambda v: v * 1.01), False),
    "train_loss": (lambda f: _at(f, "train_loss", 30, lambda v: v + 1e-3), True),
    "test_loss": (
        lambda f: (_at(f, "test_loss", 30, lambda v: v + 0.01), _history_metrics(f)),
        True,
    ),
    "diverged_step": (_diverge, False),
    "weights": (lambda f: _nudge(f, "weights", kernel=True), True),
    "weights_index": (lambda f: _rename_first(f, "weights_index"), False),
    "checkpoint_step": (
        lambda f: f.__setitem__("checkpoint_step", [49, f.at[1, "checkpoint_step"]]),
        False,
    ),
    "checkpoint": (lambda f: _nudge(f, "checkpoint"), True),
    "checkpoint_index": (lambda f: _rename_first(f, "checkpoint_index"), False),
    "metrics.final_test_loss": (
        lambda f: _metric(f, "final_test_loss", lambda v: v + 1e-3),
        False,
    ),
    "metrics.entropy_rate": (
        lambda f: _metric(f, "entropy_rate", lambda v: v + 0.01),
        False,
    ),
    "metrics.unigram_entropy": (
        lambda f: _metric(f, "unigram_entropy", lambda v: v - 0.01),
        False,
    ),
    "metrics.excess": (lambda f: _metric(f, "excess", lambda v: v + 1e-3), False),
    "metrics.escape_step": (
        lambda f: _metric(f, "escape_step", lambda v: (v or 0) + 10),
        False,
    ),
    "metrics.learnt_kernel": (
        lambda f: _metric(
            f, "learnt_kernel", lambda v: (np.asarray(v) + 1e-3).tolist()
        ),
        False,
    ),
    "metrics.seconds": (lambda f: _metric(f, "seconds", lambda v: v + 1), False),
    "provenance.seconds": (
        lambda f: (
            _metric(f, "seconds", lambda v: -1.0),
            _provenance(f, "seconds", lambda v: -1.0),
        ),
        False,
    ),
    "provenance.created": (lambda f: _provenance(f, "created", lambda v: 0.0), False),
    "provenance.markovlib": (
        lambda f: _provenance(f, "markovlib", lambda v: "x"),
        False,
    ),
    "provenance.version": (
        lambda f: _provenance(f, "version", lambda v: "9.9.9"),
        False,
    ),
    "provenance.torch": (lambda f: _provenance(f, "torch", lambda v: ""), False),
    "provenance.device": (lambda f: _provenance(f, "device", lambda v: "gpu"), False),
    "provenance.device_name": (
        lambda f: _provenance(f, "device_name", lambda v: " "),
        False,
    ),
    "provenance.cpu_model": (
        lambda f: _provenance(f, "cpu_model", lambda v: ""),
        False,
    ),
    "provenance.cpu_capability": (
        lambda f: _provenance(f, "cpu_capability", lambda v: "AVX9"),
        False,
    ),
    "provenance.threads": (lambda f: _provenance(f, "threads", lambda v: 0), False),
    "provenance.compile": (lambda f: _provenance(f, "compile", lambda v: "no"), False),
    "provenance.ensemble_size": (
        lambda f: _provenance(f, "ensemble_size", lambda v: 3),
        False,
    ),
    "provenance.ensemble_members": (
        lambda f: _provenance(f, "ensemble_members", lambda v: v[::-1]),
        False,
    ),
}


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_each_field_tampered_fails_in_one_line_naming_run_and_field(
    tiny, tmp_path, field
):
    """Row 0 of the tied ensemble's file changed in ``field`` only (or consistently
    with the fields a relation binds it to), the manifest re-hashed: the untouched copy
    passes; the tampered one fails, without training where FIELDS has a check that
    needs none, else on re-training every run (--sample all)."""
    change, retrain = TAMPER[field]
    assert retrain == (RETRAIN in FIELDS[field][0])
    data = shutil.copytree(tiny, tmp_path / "data")
    run = dict(edition=tiny_groups(), log=lambda *a: None)
    assert verify(data, sample=0, **run) == 0

    def apply(f):
        change(f)
        return f

    key = _rewrite(data, TIED, apply).at[0, "key"]
    with pytest.raises((VerificationError, ShippedDataError)) as caught:
        verify(data, sample="all" if retrain else 0, **run)
    message = str(caught.value)
    assert "\n" not in message and f"run {key}" in message, message
    assert field in message, message
    if retrain:  # what only re-training catches passes the checks without it
        assert verify(data, sample=0, **run) == 0


def _after_checkpoint(column, change, until=10**9):
    """Row 0's ``column`` changed by ``change`` at the steps after the checkpoint step
    (up to ``until``)."""

    def apply(frame):
        steps = np.asarray(frame.at[0, "history_step"])
        values = np.asarray(frame.at[0, column], dtype=float).copy()
        at = (steps > CHECKPOINT_STEP) & (steps <= until)
        values[at] = change(values[at])
        frame.at[0, column] = values
        return frame

    return apply


@pytest.mark.parametrize(
    "change",
    [
        _after_checkpoint("train_loss", lambda v: v / 2),  # issue 48's case
        _after_checkpoint("test_loss", lambda v: v - 0.05, until=150),
    ],
    ids=["train loss halved", "test losses of steps 60-150 lowered by 0.05"],
)
def test_a_forged_history_after_the_checkpoint_is_seen_without_training(data, change):
    """Issue 48: a history forged after step 50 (re-hashed) passed --sample 0; the
    train losses at the evaluated steps now have to agree with the test losses there,
    quarter by quarter. The untouched copy passes the same check."""
    assert verify(data, sample=0, log=lambda *a: None) == 0
    key = _rewrite(data, FIRST, change).at[0, "key"]
    _fails(data, VerificationError, f"run {key} in {FIRST}: train_loss over steps")


def test_fresh_losses_in_float32_are_those_of_an_fp16_run_in_its_precision():
    """verify evaluates every run's fresh loss in float32: on the batches it draws,
    shipped fp16 runs (GPT-2, the theory model at k = 5, the uni-embedding model) give
    the loss of fp16 autocast to a two-hundredth of the resolution the check works
    to (1e-4 nats)."""
    import torch.nn.functional as F

    from markovlib.runs.shipped import shipped_data
    from markovlib.runs.verify import FRESH_RESOLUTION, FRESH_STREAM, _generator

    data = shipped_data(ROOT / "data" / "paper")
    names = ("trap400-gpt2-tied-fp16", "fig5-k5-theory-fp16-tied", "appd-uni-fp16-tied")
    names = [f"{name}-001.parquet" for name in names]
    for name in names:
        key = data.rows(name)["key"].iloc[0]
        result = data.load(RunSpec.from_dict(json.loads(data.row(key)["spec"])))
        assert result.train_config.precision == "fp16"
        s, g = result.train_config, _generator(result, FRESH_STREAM)
        x = result.chain.sample(4, s.seq_len + 1, generator=g, start=s.start)
        with torch.no_grad():
            with torch.autocast("cpu", dtype=torch.float16):
                half = result.model(x[:, :-1]).float()
            full = result.model(x[:, :-1])
        losses = [
            F.cross_entropy(z.transpose(1, 2), x[:, 1:]).item() for z in (half, full)
        ]
        assert abs(losses[0] - losses[1]) <= FRESH_RESOLUTION / 200, name
        assert not torch.equal(half, full)  # autocast did run in fp16


FP16, FP32 = "trap400-gpt2-tied-fp16-001.parquet", "trap400-gpt2-tied-fp32-001.parquet"
# the columns of a run's results that a forger moves to another run: every one but its
# key, spec, seed and provenance (which names its own ensemble)
RESULTS = [
    "history_step",
    "lr",
    "train_loss",
    "test_loss",
    "metrics",
    "weights",
    "weights_index",
    "checkpoint_step",
    "checkpoint",
    "checkpoint_index",
]


def _swap_groups(target: Path) -> list[str]:
    """The trap400 fp16 and float32 groups' results swapped seed by seed (their
    provenance kept, metrics.seconds made its own), the manifest re-hashed: every
    run consistent with itself and its ensemble. Returns the fp16 runs' keys."""
    target.mkdir()
    manifest = json.loads((PAPER / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if f["name"] in (FP16, FP32)]
    manifest.pop("derived", None)
    (target / "manifest.json").write_text(json.dumps(manifest))
    a, b = (pd.read_parquet(PAPER / n) for n in (FP16, FP32))
    mate = {
        (s["chain"]["p"], s["chain"]["q"], s["seed"]): j
        for j, s in enumerate(json.loads(t) for t in b["spec"])
    }
    order = [
        mate[s["chain"]["p"], s["chain"]["q"], s["seed"]]
        for s in (json.loads(t) for t in a["spec"])
    ]
    theirs = b.loc[order, RESULTS].reset_index(drop=True)
    b.loc[order, RESULTS] = a[RESULTS].to_numpy()
    a[RESULTS] = theirs.to_numpy()
    for frame, name in ((a, FP16), (b, FP32)):
        frame["metrics"] = [
            json.dumps({**json.loads(m), "seconds": json.loads(p)["seconds"]})
            for m, p in zip(frame["metrics"], frame["provenance"])
        ]
        frame.to_parquet(target / name, compression="zstd", index=False)
    _rehash(target)
    return a["key"].tolist()


def test_the_fp16_and_float32_groups_swapped_seed_by_seed_fail_without_training(
    tmp_path,
):
    """Issue 69: trap400's fp16 runs given the float32 runs' results of the same chain
    and seed and back (fp16 7 of 32 escaped, float32 28 of 32: the chapter's finding
    inverted) passed --sample 0 and --quick: each run's first training step,
    recomputed from its seed at its precision, is not its stored one."""
    _swap_groups(tmp_path / "data")
    _fails(
        tmp_path / "data",
        VerificationError,
        r"run [0-9a-f]{20} in trap400-gpt2-tied-fp(16|32)-001\.parquet: train_loss at "
        r"step 1 ",
    )


def test_a_stack_computes_what_each_of_its_runs_computes_alone():
    """Issue 69: the runs of one group evaluated as one ensemble give each run's
    learnt kernel, the per-path losses of that pass (the kernel's paths continued by
    one state) and per-path fresh losses of the one-model path on the same paths,
    to a hundredth of the tolerances they are judged by (not bit for bit)."""
    import torch.nn.functional as F

    from markovlib.runs.shipped import shipped_data
    from markovlib.runs.stacked import kernels, path_losses, stack
    from markovlib.runs.verify import (
        FRESH_STREAM,
        KERNEL_TOLERANCE,
        LOSS_FLOOR,
        _generator,
        _kernel_paths,
    )

    data = shipped_data(PAPER)
    keys = data.rows(FP16)["key"].tolist()[:4]
    specs = [RunSpec.from_dict(json.loads(data.row(k)["spec"])) for k in keys]
    results = [data.load(spec) for spec in specs]
    model = stack(specs[0].config, [r.model.state_dict() for r in results])
    s = specs[0].train
    x = torch.stack([_kernel_paths(r) for r in results])
    learnt, losses = kernels(model, x, 2)
    for r, kernel, path, row in zip(results, learnt, x, losses):
        assert np.abs(kernel - r.learnt_kernel()).max() <= KERNEL_TOLERANCE / 100
        with torch.no_grad():  # the same pass's losses: its L transitions, continued
            logits = r.model(path[:, :-1]).transpose(1, 2)
        alone = F.cross_entropy(logits, path[:, 1:], reduction="none").double()
        assert (row - alone.mean(1)).abs().max() <= LOSS_FLOOR / 100
    y = torch.stack(
        [
            r.chain.sample(
                s.batch_size, s.seq_len + 1, generator=_generator(r, FRESH_STREAM)
            )
            for r in results
        ]
    )
    for r, path, row in zip(results, y, path_losses(model, y)):
        with torch.no_grad():
            logits = r.model(path[:, :-1]).transpose(1, 2)
        alone = F.cross_entropy(logits, path[:, 1:], reduction="none").double()
        assert (row - alone.mean(1)).abs().max() <= LOSS_FLOOR / 100


def test_the_learnt_kernels_paths_are_continued_by_the_chains_kernel():
    """The final weights' loss is read on the learnt kernel's paths (TrainResult's: 8
    from the stationary law on its test seed + 2) continued by one state x_{L+1} drawn
    from P[x_L] on a stream of its own: per row within 5 binomial standard errors over
    2 500 runs' paths, the same draw for the same seed, another for another; its
    streams are distinct; a chain of higher order (judged on fresh batches) repeats its
    last state."""
    from markovlib import binary, lag_switching
    from markovlib.runs import verify as V

    assert (
        len({0, 1, V.KERNEL_STREAM, V.FRESH_STREAM, V.FIXED_STREAM, V.NEXT_STREAM}) == 6
    )
    chain, L = binary(0.2, 0.7), 5

    def run(seed, chain=chain):
        return SimpleNamespace(
            chain=chain, test_seed=seed, train_config=SimpleNamespace(seq_len=L)
        )

    y = torch.cat([V._kernel_paths(run(seed)) for seed in range(2_500)])
    first = chain.sample(8, L, seed=0 + 2)  # TrainResult.learnt_kernel's, test seed 0
    assert y.shape == (2_500 * V.KERNEL_PATHS, L + 1) and torch.equal(y[:8, :L], first)
    assert torch.equal(V._kernel_paths(run(0)), y[:8])
    assert not torch.equal(y[:8, L], y[8:16, L])
    for i in range(2):
        rows = y[y[:, L - 1] == i, L]
        share, p = float((rows == 1).double().mean()), chain.P[i, 1]
        assert abs(share - p) <= 5 * math.sqrt(p * (1 - p) / len(rows)), (i, share, p)
    lag = V._kernel_paths(run(11, lag_switching(2, 0.2, 0.7)))
    assert torch.equal(lag[:, L], lag[:, L - 1])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_first_step_from_a_seed_is_the_training_loops(precision):
    """first_losses (verify's first-step check) is the training loss of step 1 that
    train_specs records, bit for bit on this CPU: an ensemble of two, a run trained
    alone, and an ensemble continued from other runs' weights."""
    from markovlib.runs.spec import continued, train_specs
    from markovlib.runs.stacked import first_losses

    specs = [
        RunSpec(s.chain, s.config, s.train.replace(precision=precision), s.seed)
        for s in grid([0.3], [0.4], tied=[True], seeds=[0, 1], **TINY)
    ]
    trained = train_specs(specs, device="cpu", stop_after=1)
    sources = {s.key: r.model.state_dict() for s, r in zip(specs, trained)}
    later = [continued(s, precision, 100) for s in specs]
    for unit, given in ((specs, trained), (specs[:1], None), (later, None)):
        given = given or train_specs(unit, device="cpu", stop_after=1, sources=sources)
        stored = [r.history["train_loss"].iloc[1] for r in given]
        assert first_losses(unit, sources).tolist() == stored


# the run that issue 71 re-trained on an AMD EPYC (verify --sample 1 --max-seconds 120
# --seed 14002) re-trained there to its end, as shipped and with its learning rate
# halved: `python benchmarks/drift.py full 01611dbbf5da2a3b5b16 --save ...`
RETRAINED = ROOT / "tests" / "retrained-01611dbbf5da2a3b5b16.npz"


def _retrained(spec: RunSpec, variant: str, path: Path = RETRAINED) -> TrainResult:
    """A re-train saved by benchmarks/drift.py (history, final and checkpoint weights)
    as a TrainResult."""
    from markovlib.runs.store import result_from_record

    saved = np.load(path, allow_pickle=False)
    part = {
        kind: {
            name.split("/", 2)[2]: saved[name]
            for name in saved.files
            if name.startswith(f"{variant}/{kind}/")
        }
        for kind in ("history", "weights", "checkpoint")
    }
    tensors = {
        kind: {k: torch.from_numpy(v) for k, v in part[kind].items()}
        for kind in ("weights", "checkpoint")
    }
    record = {
        **tensors,
        "history": pd.DataFrame(part["history"]),
        "provenance": {},
        "metrics": {},
        "checkpoint_step": min(CHECKPOINT_STEP, spec.train.steps),
    }
    return result_from_record(spec, record)


def test_a_float32_run_re_trained_to_its_end_on_another_cpu_kind_passes():
    """Issue 71: run 01611dbbf5da2a3b5b16 (trap-theory-untied, float32, made on an
    Intel Xeon with AVX512) re-trained to its end on an AMD EPYC (AVX2) is judged
    within the full re-training tolerances (its kernel drifted 5.4e-6, past the
    step-50 tolerance of 2e-6); the same run with its learning rate halved is not."""
    from markovlib.runs.verify import _compare_retrained

    key = "01611dbbf5da2a3b5b16"
    data = ShippedData(PAPER)
    record = data.record(key)
    spec = RunSpec.from_dict(record["spec"])
    how = _compare_retrained(
        key, record, _retrained(spec, "same"), quick=False, exact=False
    )
    assert how.startswith("within")
    with pytest.raises(VerificationError, match=f"run {key}: "):
        _compare_retrained(
            key, record, _retrained(spec, "half-lr"), quick=False, exact=False
        )


# issue 71 on an Intel Xeon (AVX512, 2026-11-29): two runs made on an AMD EPYC
# re-trained there, each as shipped and with its learning rate halved:
# 0df681455c62f0fd567f (fig4-tied, float32, seed, 1000 steps) to its end
# (`python benchmarks/drift.py full KEY --save F`), and 69b2252e0f2673a7f87e (float32,
# continued from an fp16 trap) to its checkpoint (`drift KEY --save F`, then
# `drift KEY --half-lr --save F`)
TIED_TO_END = ROOT / "tests" / "retrained-0df681455c62f0fd567f.npz"
CONTINUED_TO_50 = ROOT / "tests" / "retrained-69b2252e0f2673a7f87e.npz"


def test_a_tied_float32_run_re_trained_to_its_end_is_judged_to_its_checkpoint():
    """Run 0df681455c62f0fd567f re-trained on an Intel Xeon drifts by 7.5e-4 nats by
    its end (past 1e-5, the float32 tolerance to the end then; its learning rate
    halved, another of Fig 4's tied runs lies only 2.9e-3 away): it is judged to its
    checkpoint, where it passes and its halved learning rate fails."""
    from markovlib.runs.verify import _compare_retrained

    key = "0df681455c62f0fd567f"
    record = ShippedData(PAPER).record(key)
    spec = RunSpec.from_dict(record["spec"])
    fresh = _retrained(spec, "same", TIED_TO_END)
    assert (
        np.abs(fresh.history["test_loss"] - record["history"]["test_loss"]).max() > 1e-4
    )
    how = _compare_retrained(key, record, fresh, quick=False, exact=False)
    assert how.startswith("within 2e-06 (losses)") and "to its checkpoint (after" in how
    forged = _retrained(spec, "half-lr", TIED_TO_END)
    with pytest.raises(VerificationError, match=f"run {key}: "):
        _compare_retrained(key, record, forged, quick=False, exact=False)


def test_a_continued_float32_run_is_judged_by_its_kinds_tolerances():
    """Run 69b2252e0f2673a7f87e (float32, continued from an fp16 trap) re-trained on an
    Intel Xeon to its checkpoint drifts by 4.3e-6 in its learnt kernel (past 2e-6, the
    tolerance of a run from its seed): within its kind's; its learning rate halved is
    not."""
    from markovlib.runs.verify import _compare_retrained

    key = "69b2252e0f2673a7f87e"
    record = ShippedData(PAPER).record(key)
    spec = RunSpec.from_dict(record["spec"])
    fresh = _retrained(spec, "same", CONTINUED_TO_50)
    how = _compare_retrained(key, record, fresh, quick=True, exact=False)
    assert how.startswith("within 1e-05 (losses), 5e-05 (kernel)"), how
    forged = _retrained(spec, "half-lr", CONTINUED_TO_50)
    with pytest.raises(VerificationError, match=f"run {key}: "):
        _compare_retrained(key, record, forged, quick=True, exact=False)


def test_continued_half_precision_runs_are_not_drawn_on_another_cpu_kind(monkeypatch):
    """On an Intel Xeon, the 62 fp16-scaled runs continued from a trap (made on an AMD
    EPYC) drift by up to 2.7e-3 nats by step 50, where one with its learning rate
    halved lies 1.3e-4 away: with every run made on another CPU kind, they are left out
    of the draw in one line, and one re-trained anyway is refused by name."""
    from markovlib.runs import verify as V

    data = ShippedData(PAPER)
    monkeypatch.setattr(V, "_environment", lambda prov, here=None: (False, "elsewhere"))
    lines = []
    drawn = V._candidates(data, None, False, lines.append)
    left = set(data.index()) - set(drawn)
    specs = {
        k: RunSpec.from_dict(json.loads(v)) for k, v in data.column("spec").items()
    }
    continued = {
        k
        for k, s in specs.items()
        if s.init and s.init.get("kind") == "run" and s.train.precision == "fp16-scaled"
    }
    assert left == continued and len(left) == 62
    assert lines == [
        "not drawn: 62 runs produced on another CPU kind or device (a tied "
        "half-precision run continued from another run drifts on another CPU kind as "
        "far as a forgery by its checkpoint, or was not measured: judged bit for bit "
        "only)"
    ]
    key = sorted(continued)[0]
    record = data.record(key)
    with pytest.raises(
        VerificationError, match=f"run {key}: a tied half-precision run"
    ):
        V._compare_retrained(key, record, None, quick=True, exact=False)


# issue 71 on an Intel Xeon (AVX512, 2026-11-29): run 352db6d222c8bc21dc0e (continued at
# fp16-scaled from a trap, made on an AMD EPYC with AVX2) and its first training step
# recomputed there from its seed (`python benchmarks/drift.py first`), 4.17e-7 nats
# from the stored one: verify --sample 0 failed on that CPU at a tolerance of 3e-7
XEON_FIRST_STEP = ("352db6d222c8bc21dc0e", 0.6658035516738892)


def test_a_first_step_recomputed_on_another_cpu_kind_passes_at_its_precision():
    """The half-precision run's step 1 as an Intel Xeon recomputes it passes; the same
    gap fails a float32 run (its tolerance stays 3e-7), and so does the median gap
    between fp16 and float32 steps of one seed (1.1e-6) at half precision."""
    from markovlib.runs.verify import _alone, _check_first_step

    data = ShippedData(PAPER)
    key, fresh = XEON_FIRST_STEP
    run = _alone(data, key)
    stored = float(run.record["history"]["train_loss"].iloc[1])
    assert _check_first_step(key, run, fresh) == pytest.approx(4.17e-7, rel=0.01)
    with pytest.raises(VerificationError, match=f"{key}: train_loss at step 1"):
        _check_first_step(key, run, stored + 1.1e-6)
    twin = data.rows("continue-trap400-theory-tied-fp32-fp32-001.parquet")["key"].iloc[
        0
    ]
    other = _alone(data, twin)
    stored = float(other.record["history"]["train_loss"].iloc[1])
    with pytest.raises(VerificationError, match=r"\(fp32\)"):
        _check_first_step(twin, other, stored + 4.17e-7)


def test_test_loss_by_control_variates_is_the_plain_mean_of_many_more_paths():
    """The test loss of 8 fresh paths by the regression estimator (control variates:
    the true kernel's and the stationary law's per-path loss), as verify computes it,
    agrees with the plain mean over 256 fresh paths within 4 of their joint standard
    errors, its standard error is at least 5 times smaller than the plain mean's of the
    8 paths, and its sigma of a test path is the 256 paths' spread within 25 % (a
    shipped run of the paper's chain trained to the entropy rate; one of depth-fig1)."""
    from markovlib.runs.stacked import path_losses
    from markovlib.runs.verify import (
        FRESH_STREAM,
        _controls,
        _estimate,
        _generator,
        _plain,
    )

    data = ShippedData(PAPER)
    for name in ("trap400-gpt2-tied-fp32-001.parquet", FIRST):
        key = data.rows(name)["key"].iloc[0]
        result = data.load(RunSpec.from_dict(json.loads(data.row(key)["spec"])))
        s, g = result.train_config, _generator(result, FRESH_STREAM)
        x = result.chain.sample(264, s.seq_len + 1, generator=g)
        m = path_losses(result.model, x[None])[0].numpy()
        plain, plain_se, spread = _plain(m[8:])
        cv, cv_se, sigma = _estimate(m[:8], _controls(result, x[:8]))
        assert abs(cv - plain) <= 4 * math.hypot(cv_se, plain_se), name
        assert 5 * cv_se <= _plain(m[:8])[1], name
        assert abs(sigma / spread - 1) <= 0.25, name


@pytest.mark.parametrize(
    "chain",
    [
        {"kind": "binary", "p": 0.2, "q": 0.3},
        {"kind": "symmetric", "k": 5, "p": 0.6},  # uniform pi: one control constant
        {"kind": "binary", "p": 0.3, "q": 0.7},  # i.i.d.: the two controls equal
        {"kind": "binary", "p": 0.3, "q": 0.7 + 1e-12},  # nearly so
    ],
)
def test_the_estimate_and_its_errors_are_calibrated(chain):
    """Losses made up as 0.3 + 0.8 c1 + 0.3 c2 + noise of 0.002 per path (c the
    controls), whose expectation and spread are known exactly: over 400 draws of 8
    paths the estimate's z has a standard deviation between 0.8 and 1.5 (Student's t
    with 5 degrees of freedom: 1.29) and mean within 0.2 of 0, and sigma's median lies
    within 15 % of the exact spread, also where the controls coincide."""
    from markovlib.runs.verify import _controls, _estimate

    result = SimpleNamespace(
        chain=make_chain(chain),
        train_config=SimpleNamespace(start="stationary", seq_len=64),
    )
    b = np.array([0.8, 0.3])
    x = result.chain.sample(400 * 8, 65, seed=4)
    rng = np.random.default_rng(5)
    c, means, cov = _controls(result, x)
    m = 0.3 + c @ b + rng.normal(0, 0.002, len(c))
    truth, spread = 0.3 + means @ b, math.sqrt(b @ cov @ b + 0.002**2)
    z, sigmas = [], []
    for i in range(0, len(c), 8):
        loss, se, sigma = _estimate(m[i : i + 8], (c[i : i + 8], means, cov))
        z.append((loss - truth) / se)
        sigmas.append(sigma)
    assert 0.8 <= np.std(z) <= 1.5 and abs(np.mean(z)) <= 0.2
    assert abs(np.median(sigmas) / spread - 1) <= 0.15


def test_paths_alike_to_the_controls_fall_back_to_fresh_batches():
    """8 paths that never leave state 0 of a chain that rarely does: both controls are
    the same on every path, so the regression cannot separate the intercept; no
    estimate (not a tolerance shrunk to the floor), and verify's plain path decides."""
    from markovlib.runs.verify import _controlled, _controls, _estimate

    result = SimpleNamespace(
        chain=make_chain({"kind": "binary", "p": 0.002, "q": 0.5}),
        train_config=SimpleNamespace(
            start="stationary", seq_len=64, eval_batches=4, batch_size=16
        ),
    )
    x = torch.zeros(8, 65, dtype=torch.long)
    controls = _controls(result, x)
    m = np.full(8, 0.0127) + np.random.default_rng(0).normal(0, 1e-3, 8)
    assert _estimate(m, controls) is None and _controlled(result, m, controls) is None


def test_the_control_variates_have_the_expectations_and_covariance_assumed():
    """Over 8 192 paths of 65 states from the stationary law of a chain, the per-path
    means of the true kernel's loss and of the stationary law's lie within 4 standard
    errors of H_rate and H(pi), and their covariance is the exact one within 8 % (a
    sample covariance of 8 192 paths: 1.6 % relative error); a chain of higher order,
    or a run trained from another start, has none."""
    from markovlib.runs.verify import _controls

    for chain, start, has in [
        ({"kind": "binary", "p": 0.2, "q": 0.3}, "stationary", True),
        ({"kind": "symmetric", "k": 5, "p": 0.6}, "stationary", True),
        ({"kind": "binary", "p": 0.2, "q": 0.3}, "uniform", False),
        ({"kind": "lag", "order": 2, "p": 0.5, "q": 0.8}, "stationary", False),
    ]:
        result = SimpleNamespace(
            chain=make_chain(chain),
            train_config=SimpleNamespace(start=start, seq_len=64),
        )
        x = result.chain.sample(8192, 65, seed=3)
        found = _controls(result, x)
        assert (found is not None) == has
        if has:
            c, means, cov = found
            se = c.std(0, ddof=1) / math.sqrt(len(c))
            assert np.all(np.abs(c.mean(0) - means) <= 4 * se + 1e-9)  # uniform pi
            sample = np.cov(c.T)
            assert np.all(np.abs(sample - cov) <= 0.08 * np.abs(cov).max()), chain
