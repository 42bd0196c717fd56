"""Shipped run data: export from a store, read back exactly, found first by
sweep_results, verified by re-training, and refused when a byte is changed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from markovlib.edition import produce
from markovlib.shipped import (
    ShippedData,
    ShippedDataError,
    VerificationError,
    export,
    thin_history,
    verify,
)
from markovlib.sweep import ResultStore, grid, sweep_results

SMALL = dict(steps=60, batch_size=2, seq_len=32, eval_every=10, eval_batches=1)


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


def test_sweep_results_reads_shipped_data_before_training(
    edition, tmp_path, monkeypatch
):
    root, store = edition
    monkeypatch.setattr(
        "markovlib.sweep.sweep", lambda *a, **k: pytest.fail("trained a shipped run")
    )
    specs = [s for _, group in _groups()[:2] for s in group]
    results = sweep_results(specs, tmp_path / "empty", device="cpu", data=root / "data")
    assert not (tmp_path / "empty").exists()  # no store was even opened
    for spec, result in zip(specs, results):
        assert result.final_test_loss == store.load(spec).final_test_loss
        assert result.provenance["shipped"].endswith(".parquet")


def test_verify_reproduces_runs_bit_for_bit(edition):
    root, _ = edition
    lines = []
    assert verify(root / "data", sample=2, seed=0, log=lines.append) == 2
    assert verify(root / "data", sample=4, seed=1, quick=True, log=lines.append) == 4
    assert (
        sum("bit for bit" in line for line in lines) == 6
        and "sample seed 0" in lines[1]
    )


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
        verify(data, sample=0, log=lambda *a: None)


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
        verify(data, sample=4, seed=0, quick=True, log=lambda *a: None)  # all 4 runs


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


def test_verify_cli_exit_codes(edition, tmp_path):
    root, _ = edition

    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "markovlib", "verify", *a],
            capture_output=True,
            text=True,
        )

    ok = run("--data", str(root / "data"), "--sample", "1", "--quick")
    assert ok.returncode == 0 and "verified: 1 of 1 runs reproduced" in ok.stdout
    assert "sample seed" in ok.stdout
    bad = run("--data", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and "--data" in bad.stderr
    assert run("--sample", "-1").returncode == 2


def test_verify_exact_only_draws_runs_this_cpu_reproduces(edition, tmp_path):
    """Runs produced on another CPU kind are left out of an --exact-only draw; none
    left: nothing re-trained."""
    import hashlib

    root, _ = edition
    data = _copy(root / "data", tmp_path / "data")

    def move_to_other_cpu(name):
        frame = pd.read_parquet(data / name)
        frame["provenance"] = [
            json.dumps({**json.loads(p), "cpu_capability": "OTHER"})
            for p in frame["provenance"]
        ]
        frame.to_parquet(data / name, compression="zstd", index=False)
        manifest = json.loads((data / "manifest.json").read_text())
        for f in manifest["files"]:
            raw = (data / f["name"]).read_bytes()
            f["sha256"], f["bytes"] = hashlib.sha256(raw).hexdigest(), len(raw)
        (data / "manifest.json").write_text(json.dumps(manifest))
        return set(frame["key"])

    other = move_to_other_cpu("untied-001.parquet")
    lines = []
    assert (
        verify(data, sample=4, seed=0, quick=True, exact_only=True, log=lines.append)
        == 2
    )
    assert "re-training 2 of 2 runs" in lines[1] and not any(
        k in "".join(lines) for k in other
    )
    assert (
        verify(data, sample=4, seed=0, quick=True, log=lines.append) == 4
    )  # without: all four
    assert sum("CPU capability OTHER" in line for line in lines) == 2
    move_to_other_cpu("tied-001.parquet"), move_to_other_cpu("tied-002.parquet")
    lines = []
    assert verify(data, sample=1, exact_only=True, log=lines.append) == 0
    assert "no shipped run was produced on a CPU like this one" in lines[1]
