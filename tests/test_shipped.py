"""Shipped run data: export from a store, read back exactly, found first by
sweep_results, verified by re-training, and refused when a byte is changed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import inprocess
import numpy as np
import pandas as pd
import pytest
import torch

from markovlib.runs.edition import produce
from markovlib.runs.export import export
from markovlib.runs.shipped import ShippedData, ShippedDataError, thin_history
from markovlib.runs.spec import grid
from markovlib.runs.store import ResultStore
from markovlib.runs.sweep import sweep_results
from markovlib.runs.verify import VerificationError, verify

ROOT = Path(__file__).resolve().parents[1]
# 16 test paths per evaluation: enough for verify to estimate the sampling noise
SMALL = dict(steps=60, batch_size=4, seq_len=32, eval_every=10, eval_batches=4)


def _groups():
    specs = grid(
        [0.3],
        [0.4],
        tied=[True, False],
        seeds=[0, 1],
        config_kwargs=dict(max_len=32),
        **SMALL,
    )
    return [
        ("tied", specs[:2]),
        ("untied", specs[2:]),
        ("again", specs[:1]),
    ]  # "again" is shipped already


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    root = tmp_path_factory.mktemp("edition")
    store = ResultStore(root / "store")
    assert produce(_groups(), store, threads=1, log=lambda *a, **k: None) == 4
    assert (
        produce(_groups(), store, threads=1, log=lambda *a, **k: None) == 0
    )  # resumable: nothing left
    groups = _groups()
    partial = [(name, specs) for name, specs in groups]
    first = ResultStore(root / "first")  # a session that ended with 1 run done
    first.put([(groups[0][1][0], store.load(groups[0][1][0]))])
    assert export(partial, first, root / "data", log=lambda *a: None) == [
        "tied-001.parquet"
    ]
    written = export(groups, store, root / "data", log=lambda *a: None)
    assert written == [
        "tied-002.parquet",
        "untied-001.parquet",
    ]  # only the runs not shipped yet
    assert (
        export(groups, store, root / "data", log=lambda *a: None) == []
    )  # files are never rewritten
    shipped = ShippedData(root / "data")
    assert (
        produce(
            groups,
            ResultStore(root / "fresh"),
            shipped=shipped,
            log=lambda *a, **k: None,
        )
        == 0
    )
    return root, store


def test_manifest_lists_every_file_with_hash_runs_and_size(edition):
    root, _ = edition
    manifest = json.loads((root / "data" / "manifest.json").read_text())
    assert [f["name"] for f in manifest["files"]] == [
        "tied-001.parquet",
        "tied-002.parquet",
        "untied-001.parquet",
    ]
    assert [f["runs"] for f in manifest["files"]] == [1, 1, 2] and manifest["runs"] == 4
    for f in manifest["files"]:
        assert (root / "data" / f["name"]).stat().st_size == f["bytes"] and len(
            f["sha256"]
        ) == 64


def test_shipped_runs_read_back_exactly(edition):
    root, store = edition
    data = ShippedData(root / "data")
    spec = _groups()[1][1][1]
    stored, shipped = store.record(spec.key), data.record(spec.key)
    for name, tensor in stored["weights"].items():
        assert torch.equal(tensor, shipped["weights"][name]), name
    for name, tensor in stored["checkpoint"].items():
        assert torch.equal(tensor, shipped["checkpoint"][name]), name
    assert shipped["checkpoint_step"] == 50 and shipped["provenance"]["threads"] == 1
    kept = thin_history(stored["history"], 10)
    assert list(kept["step"]) == list(range(51)) + [
        60
    ]  # every step to the checkpoint, then evaluations
    pd.testing.assert_frame_equal(
        shipped["history"].loc[kept.index], kept, check_exact=True
    )
    assert (
        shipped["history"]["test_loss"].notna().sum()
        == stored["history"]["test_loss"].notna().sum()
    )


def test_a_column_read_alone_is_each_runs_own(edition):
    """ShippedData.column (the provenance without the weights: the Reproducibility
    page's edition.progress, verify's draw) gives each run its row's value, from a fresh
    reader and from one that has read whole files already."""
    root, _ = edition
    fresh, warm = ShippedData(root / "data"), ShippedData(root / "data")
    keys = sorted(fresh.index())
    whole = {key: warm.row(key)["provenance"] for key in keys}
    for data in (fresh, warm):
        column = data.column("provenance")
        assert sorted(column) == keys and column == whole
    assert len({json.loads(p)["seconds"] for p in whole.values()}) > 1


def test_sweep_results_reads_shipped_data_before_training(
    edition, tmp_path, monkeypatch
):
    root, store = edition
    monkeypatch.setattr(
        "markovlib.runs.sweep.sweep",
        lambda *a, **k: pytest.fail("trained a shipped run"),
    )
    specs = [s for _, group in _groups()[:2] for s in group]
    results = sweep_results(specs, tmp_path / "empty", device="cpu", data=root / "data")
    assert not (tmp_path / "empty").exists()  # no store was even opened
    for spec, result in zip(specs, results):
        assert result.final_test_loss == store.load(spec).final_test_loss
        assert result.provenance["shipped"].endswith(".parquet")


def test_verify_reproduces_runs_bit_for_bit(edition):
    """A drawn run is re-trained with its whole ensemble, and every member is compared
    bit for bit (history, weights, metrics)."""
    root, _ = edition
    lines = []
    assert verify(root / "data", sample=1, seed=0, edition=_groups(), log=lines.append)
    assert (
        verify(
            root / "data",
            sample=4,
            seed=1,
            quick=True,
            edition=_groups(),
            log=lines.append,
        )
        == 4
    )
    judged = [line for line in lines if "reproduced" in line]
    assert len(judged) == 6 and all(
        "bit for bit" in line and "(ensemble of 2)" in line for line in judged
    )
    assert any("sample seed 0" in line for line in lines)


def _copy(source, target):
    shutil.copytree(source, target)
    return target


def test_verify_fails_on_one_changed_byte(edition, tmp_path):
    root, _ = edition
    data = _copy(root / "data", tmp_path / "data")
    path = data / "untied-001.parquet"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(ShippedDataError, match="untied-001.parquet is damaged"):
        verify(data, sample=0, edition=_groups(), log=lambda *a: None)


def test_verify_names_a_run_that_does_not_reproduce(edition, tmp_path):
    """A run whose shipped history was changed (and the manifest re-hashed to match)
    fails re-training."""
    root, _ = edition
    data = _copy(root / "data", tmp_path / "data")
    frame = pd.read_parquet(data / "untied-001.parquet")
    losses = list(frame.at[0, "train_loss"])
    losses[7] = np.nextafter(losses[7], 1.0)  # one ulp at step 7
    frame.at[0, "train_loss"] = losses
    frame.to_parquet(data / "untied-001.parquet", compression="zstd", index=False)
    manifest = json.loads((data / "manifest.json").read_text())
    import hashlib

    for f in manifest["files"]:
        raw = (data / f["name"]).read_bytes()
        f["sha256"], f["bytes"] = hashlib.sha256(raw).hexdigest(), len(raw)
    (data / "manifest.json").write_text(json.dumps(manifest))
    key = frame.at[0, "key"]
    with pytest.raises(
        VerificationError, match=f"run {key}: train_loss differs first at step 7"
    ):
        verify(data, sample=4, seed=0, quick=True, edition=_groups(), log=print)


def test_foreign_files_are_named(tmp_path):
    (tmp_path / "manifest.json").write_text("not json")
    with pytest.raises(
        ShippedDataError, match="manifest.json is not a markovlib manifest"
    ):
        ShippedData(tmp_path)
    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "format": 1,
                "files": [
                    {"name": "x.parquet", "sha256": "0" * 64, "runs": 1, "bytes": 3}
                ],
            }
        )
    )
    with pytest.raises(
        ShippedDataError, match="x.parquet is listed in the manifest but missing"
    ):
        ShippedData(tmp_path).index()


def _verify_cli(monkeypatch, *args):
    """``markovlib verify ARGS`` in this process (issue 51: a new interpreter cost 2-4 s
    per call), its paper edition :func:`_groups`."""
    inprocess.use_edition(monkeypatch, _groups())
    return inprocess.run("verify", *args)


def test_verify_cli_exit_codes(edition, tmp_path, monkeypatch):
    root, _ = edition
    data = ("--data", str(root / "data"))
    ok = _verify_cli(monkeypatch, *data, "--sample", "1", "--quick")
    assert ok.returncode == 0, ok.stderr
    assert "2 of 2 re-trained runs reproduced" in ok.stdout  # the drawn run's ensemble
    assert "sample seed" in ok.stdout
    every = _verify_cli(monkeypatch, *data, "--sample", "all", "--quick")
    assert every.returncode == 0, every.stderr
    assert (
        "re-training 4 of 4 runs to their checkpoint in 2 training(s)" in every.stdout
    )
    assert "4 of 4 re-trained runs reproduced" in every.stdout
    assert _verify_cli(monkeypatch, "--sample", "some").returncode == 2
    bad = _verify_cli(monkeypatch, "--data", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and "--data" in bad.stderr
    assert _verify_cli(monkeypatch, "--sample", "-1").returncode == 2


def _rehash(data):
    """Update every file's SHA-256 and size in the manifest (a careful tamperer)."""
    import hashlib

    manifest = json.loads((data / "manifest.json").read_text())
    for f in manifest["files"]:
        raw = (data / f["name"]).read_bytes()
        f["sha256"], f["bytes"] = hashlib.sha256(raw).hexdigest(), len(raw)
    (data / "manifest.json").write_text(json.dumps(manifest))


def _rewrite(data, name, change):
    """Apply ``change`` to the frame of file ``name``, write it back and re-hash."""
    frame = pd.read_parquet(data / name)
    change(frame)
    frame.to_parquet(data / name, compression="zstd", index=False)
    _rehash(data)
    return frame


# a CPU capability other than this machine's
OTHER = "AVX2" if torch.backends.cpu.get_cpu_capability() != "AVX2" else "AVX512"


def _move_to_other_cpu(data, name):
    def change(frame):
        frame["provenance"] = [
            json.dumps({**json.loads(p), "cpu_capability": OTHER})
            for p in frame["provenance"]
        ]

    return set(_rewrite(data, name, change)["key"])


def test_verify_exact_only_draws_runs_this_cpu_reproduces(edition, tmp_path):
    """Runs produced on another CPU kind are left out of an --exact-only draw and judged
    by their kind's tolerances otherwise (tied runs re-trained to step 50 only); a draw
    that leaves nothing is an error."""
    root, _ = edition
    data = _copy(root / "data", tmp_path / "data")
    other = _move_to_other_cpu(data, "untied-001.parquet")
    lines = []
    run = dict(edition=_groups(), log=lines.append)
    assert verify(data, sample=4, seed=0, quick=True, exact_only=True, **run) == 2
    assert any("re-training 2 of 2 runs" in line for line in lines)
    assert not any(k in "".join(lines) for k in other)
    lines.clear()
    assert verify(data, sample=4, seed=0, quick=True, **run) == 4  # without: all four
    close = [line for line in lines if f"CPU capability {OTHER}" in line]
    assert len(close) == 2 and all("within 2e-06 (losses)" in line for line in close)
    lines.clear()
    assert verify(data, sample=4, seed=0, **run) == 4  # untied: to the end
    close = [line for line in lines if f"CPU capability {OTHER}" in line]
    assert len(close) == 2 and all("within 1e-05 (losses)" in line for line in close)
    _move_to_other_cpu(data, "tied-001.parquet")
    _move_to_other_cpu(data, "tied-002.parquet")
    lines.clear()  # tied: trained and judged to step 50 only, each line says so
    assert verify(data, sample=4, seed=0, **run) == 4
    tied = [
        line for line in lines if "reproduced" in line and "to its checkpoint" in line
    ]
    assert len(tied) == 2 and all("within 2e-06 (losses)" in line for line in tied)
    with pytest.raises(
        VerificationError,
        match="nothing to re-train: no shipped run was produced on a CPU like this",
    ):
        verify(data, sample=1, exact_only=True, **run)


@pytest.mark.parametrize("other_cpu", [False, True])
def test_verify_judges_the_checkpoint_weights(edition, tmp_path, other_cpu):
    """Checkpoint weights scaled by 0.9 fail --quick: bit for bit on this CPU, by the
    predictions on a fixed batch on another."""
    root, _ = edition
    data = _copy(root / "data", tmp_path / "data")

    def scale(frame):
        ckpt = np.frombuffer(frame.at[0, "checkpoint"], dtype="<f4") * 0.9
        frame.at[0, "checkpoint"] = ckpt.astype("<f4").tobytes()

    key = _rewrite(data, "tied-002.parquet", scale)["key"][0]
    if other_cpu:
        for name in ("tied-001.parquet", "tied-002.parquet"):
            _move_to_other_cpu(data, name)
    what = (
        "checkpoint: their (learnt kernel|predictions on a fixed batch) differ"
        if other_cpu
        else "checkpoint tensor .* differs"
    )
    with pytest.raises(VerificationError, match=f"run {key}: .*{what}"):
        verify(data, sample=4, seed=0, quick=True, edition=_groups(), log=print)


# a process that exports the edition of _groups() and kills itself (SIGKILL) when it
# renames a file to a name ending in argv[4]
KILLED_EXPORT = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import test_shipped
from markovlib.runs.export import export
from markovlib.runs.store import ResultStore

rename = os.replace


def replace(source, target):
    if str(target).endswith(sys.argv[4]):
        os.kill(os.getpid(), signal.SIGKILL)
    rename(source, target)


os.replace = replace
export(test_shipped._groups(), ResultStore(sys.argv[2]), sys.argv[3])
"""


@pytest.mark.parametrize(
    "at,left",
    [
        ("untied-001.parquet", [".untied-001.parquet.partial", "tied-001.parquet"]),
        ("manifest.json", [".manifest.json.partial", "tied-001.parquet"]),
    ],
)
def test_a_killed_export_resumes(edition, tmp_path, at, left):
    """Killed before renaming its second file (the manifest lists the first) or its
    first manifest: the next export removes the temporary file, adopts a renamed file
    the manifest does not list yet, and the data verifies; nothing is created in the
    working directory."""
    import signal

    root, store = edition
    data, cwd = tmp_path / "data", tmp_path / "cwd"
    cwd.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", KILLED_EXPORT, str(Path(__file__).parent)]
        + [str(root / "store"), str(data), at],
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    assert out.returncode == -signal.SIGKILL, out.stderr
    assert sorted(p.name for p in data.iterdir() if p.name != "manifest.json") == left
    if at == "manifest.json":  # the manifest was never replaced: there is none
        with pytest.raises(ShippedDataError, match="manifest.json is missing"):
            verify(data, sample=0, edition=_groups(), log=lambda *a: None)
    else:
        with pytest.raises(
            ShippedDataError,
            match="untied-001.parquet.partial is not listed in the manifest "
            r"\(a temporary file of an interrupted export",
        ):
            verify(data, sample=0, edition=_groups(), log=lambda *a: None)
    lines = []
    written = export(_groups(), store, data, log=lines.append)
    assert any(f"removed {data / left[0]}" in line for line in lines)
    adopted = [line for line in lines if "adopted" in line]
    assert len(adopted) == (at == "manifest.json")
    adopted_too = ["tied-001.parquet"] if at == "manifest.json" else []
    assert written == adopted_too + ["untied-001.parquet"]
    assert set(ShippedData(data).index()) == {s.key for _, g in _groups() for s in g}
    assert verify(data, sample=0, edition=_groups(), log=lambda *a: None) == 0
    assert not any(cwd.iterdir())


def test_export_refuses_a_foreign_file_under_its_next_name(edition, tmp_path):
    root, store = edition
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(root / "data" / "untied-001.parquet", data / "tied-001.parquet")
    with pytest.raises(
        ShippedDataError,
        match="tied-001.parquet exists, is not in the manifest and does not hold "
        "exactly the runs to export",
    ):
        export(_groups(), store, data, log=lambda *a: None)
    assert sorted(p.name for p in data.iterdir()) == ["tied-001.parquet"]


def test_status_reads_the_shipped_data_without_a_store(edition):
    from markovlib.runs.edition import status

    root, _ = edition
    rows = status(_groups(), None, ShippedData(root / "data"))
    assert [(r["group"], r["stored"], r["runs"]) for r in rows] == [
        ("tied", 2, 2),
        ("untied", 2, 2),
        ("again", 1, 1),
    ]


def test_a_read_back_runs_record_takes_its_stored_kernel():
    """A chapter's record of a shipped or stored run takes the learnt kernel stored with
    it (issue 51: recomputing it was a third of reading shipped runs): the kernel its
    weights give, to verify's tolerance; a stored kernel changed is what the record
    reads; a run trained here computes its own."""
    from markovlib.companion.records import record_of
    from markovlib.runs.spec import RunSpec
    from markovlib.runs.verify import KERNEL_TOLERANCE

    data = ShippedData(ROOT / "data" / "paper")
    key = sorted(data.index())[0]
    run = data.load(RunSpec.from_dict(data.record(key)["spec"]))
    stored = np.asarray(run.metrics["learnt_kernel"])
    np.testing.assert_array_equal(record_of(run).kernel, stored)
    np.testing.assert_allclose(run.learnt_kernel(), stored, atol=KERNEL_TOLERANCE)
    run.metrics = {**run.metrics, "learnt_kernel": (stored + 0.25).tolist()}
    np.testing.assert_array_equal(record_of(run).kernel, stored + 0.25)
    run.metrics = {}  # as a run just trained
    np.testing.assert_array_equal(record_of(run).kernel, run.learnt_kernel())
