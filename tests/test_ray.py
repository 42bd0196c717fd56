"""Sweeps through Ray, on a real single-machine cluster started (and stopped) here: the
same rows as the local executor, bit for bit; a worker or the driver killed mid-sweep
loses nothing and stores nothing twice."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import inprocess
import numpy as np
import pandas as pd
import psutil
import pytest
import torch

from markovlib.cli import main
from markovlib.runs.edition import produce
from markovlib.runs.executors import ClusterUnreachable, probe_address
from markovlib.runs.export import export
from markovlib.runs.spec import grid
from markovlib.runs.store import ResultStore
from markovlib.runs.sweep import sweep
from markovlib.runs.verify import VerificationError, verify

ray = pytest.importorskip("ray")

TINY = dict(steps=5, batch_size=2, seq_len=8, eval_every=5, eval_batches=1)
SPECS = grid(
    [0.2, 0.6],
    [0.3, 0.7],
    tied=[True, False],
    seeds=[0],
    config_kwargs=dict(max_len=16),
    **TINY,
)  # 8 runs
ENSEMBLE = 3  # per group of 4: an ensemble of 3 (train_many) and a single run (train)
COLUMNS = "key, seed, spec, metrics, history, weights, checkpoint_step, checkpoint"
# the driver of the CLI tests: runs long enough to be stopped after its first stored run
CLI = [
    "sweep",
    "--p",
    "0.2,0.5,0.8",
    "--q",
    "0.3,0.7",
    "--tied",
    "tied",
    "--seeds",
    "1",
    "--steps",
    "30",
    "--batch-size",
    "4",
    "--seq-len",
    "32",
    "--scale",
    "smoke",
    "--device",
    "cpu",
    "--ensemble-size",
    "1",
]


@pytest.fixture(scope="module")
def cluster():
    """A head node with 2 CPUs, its files in a fresh temporary folder; its address.
    Stopped by ray.shutdown()."""
    temp = tempfile.mkdtemp(
        prefix="ray-", dir="/tmp"
    )  # short: Ray's socket paths must fit in 107 bytes
    # token authentication (ray.init sets RAY_AUTH_MODE=token for a new cluster), with a
    # token of its own, which this driver and the drivers and workers it starts inherit:
    # ~/.ray/auth_token is neither read nor written
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    os.environ.pop("RAY_AUTH_MODE", None)
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    try:
        info = ray.init(
            num_cpus=2,
            _temp_dir=temp,
            include_dashboard=False,
            logging_level=logging.WARNING,
        )
        yield info.address_info["gcs_address"]
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    left = [
        p
        for p in psutil.Process().children(recursive=True)
        if temp in " ".join(_cmdline(p)) or "ray::" in " ".join(_cmdline(p)[:1])
    ]
    assert not left, f"Ray processes outlived ray.shutdown(): {left}"


@pytest.fixture(scope="module")
def local_rows(tmp_path_factory):
    """SPECS swept by the local executor with 1 torch thread (the threads of a task with
    cpus_per_task=1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        directory = tmp_path_factory.mktemp("local")
        sweep(SPECS, directory, ensemble_size=ENSEMBLE, device="cpu", progress=False)
    finally:
        torch.set_num_threads(threads)
    return _rows(ResultStore(directory))


def _env() -> dict:
    """This process's environment (with the cluster's token settings, once started), one
    torch thread."""
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:  # gone meanwhile
        return []


def _rows(store: ResultStore) -> dict[str, tuple]:
    """Every stored column but the creation time and the provenance, the metrics without
    the seconds."""
    con = sqlite3.connect(store.path)
    try:
        rows = con.execute(f"SELECT {COLUMNS} FROM runs").fetchall()
    finally:
        con.close()
    out = {}
    for row in rows:
        metrics = {k: v for k, v in json.loads(row[3]).items() if k != "seconds"}
        out[row[0]] = (*row[:3], metrics, *row[4:])
    return out


def _counting_puts(store: ResultStore) -> list[str]:
    """The keys of every row ``store.put`` writes from now on
    (the real put, counted)."""
    keys, put = [], store.put
    store.put = lambda pairs: (keys.extend(spec.key for spec, _ in pairs), put(pairs))[
        1
    ]
    return keys


def test_ray_sweep_equals_local_bit_for_bit(cluster, local_rows, tmp_path):
    store = ResultStore(tmp_path)
    puts = _counting_puts(store)
    frame = sweep(
        SPECS,
        store,
        ensemble_size=ENSEMBLE,
        progress=False,
        executor="ray",
        cpus_per_task=1,
    )  # auto: CPU
    assert (
        sorted(puts) == sorted(s.key for s in SPECS) and len(frame) == len(SPECS) == 8
    )  # every run once
    assert (
        _rows(store) == local_rows
    )  # history, weights, checkpoint, spec, metrics: the same bytes
    provenance = store.record(SPECS[0].key)["provenance"]
    assert provenance["threads"] == 1 and provenance["device"] == "cpu"


def test_worker_killed_mid_sweep_loses_nothing(cluster, local_rows, tmp_path):
    killed = []

    def kill_first_task():
        deadline = time.time() + 240
        while not killed and time.time() < deadline:
            for process in psutil.Process().children(
                recursive=True
            ):  # this cluster's processes only
                cmdline = _cmdline(process)
                if cmdline and cmdline[0].startswith("ray::_train_chunk"):
                    process.send_signal(signal.SIGKILL)
                    killed.append(process.pid)
                    break
            time.sleep(0.01)

    killer = threading.Thread(target=kill_first_task, daemon=True)
    store = ResultStore(tmp_path)
    puts = _counting_puts(store)
    killer.start()
    frame = sweep(
        SPECS,
        store,
        ensemble_size=ENSEMBLE,
        device="cpu",
        progress=False,
        executor="ray",
        cpus_per_task=1,
    )
    killer.join()
    assert len(killed) == 1, "no worker was seen running a task"
    assert (
        not psutil.pid_exists(killed[0])
        or psutil.Process(killed[0]).status() == psutil.STATUS_ZOMBIE
    )
    assert (
        sorted(puts) == sorted(s.key for s in SPECS) and len(frame) == 8
    )  # each run stored exactly once
    assert _rows(store) == local_rows  # the retried task's runs too


def _running_tasks() -> list[int]:
    return [
        p.pid
        for p in psutil.process_iter()
        if _cmdline(p)[:1] and _cmdline(p)[0].startswith("ray::_train_chunk")
    ]


def _stored(results) -> int:
    return len(ResultStore(results)) if (results / "runs.sqlite").exists() else 0


def _stopped(cmd: list[str], results: Path, sig: int) -> tuple[str, int]:
    """Start the driver ``cmd``, send it ``sig`` once it has stored a run more than the
    store held; its stderr and exit status."""
    before = _stored(results)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and _stored(results) <= before:
        time.sleep(0.05)
    assert proc.poll() is None, (
        f"the sweep ended before it could be stopped: {proc.communicate()[1][-2000:]}"
    )
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return err, proc.returncode


def test_driver_killed_mid_sweep_resumes(cluster, tmp_path):
    """A driver killed (SIGKILL), then one stopped (SIGTERM: exit 130, "interrupted",
    its tasks ended by the cluster), each after a stored run: the third call trains
    only the rest (issue 51: one sweep of 8 runs for both signals, was two of 6)."""
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "markovlib", *CLI, "--results", str(results)]
    cmd[cmd.index("0.2,0.5,0.8")] = "0.2,0.4,0.6,0.8"  # 8 runs
    cmd += ["--executor", "ray", "--address", cluster]
    _stopped(cmd, results, signal.SIGKILL)
    killed = _stored(results)
    assert 1 <= killed < 8, "nothing kept, or the sweep finished before the signal"
    err, code = _stopped(cmd, results, signal.SIGTERM)
    assert code == 130 and "interrupted" in err, err[-2000:]
    kept = _stored(results)
    assert killed < kept < 8, "nothing kept, or the sweep finished before the signal"
    deadline = time.time() + 60  # the cluster ends the stopped driver's tasks
    while time.time() < deadline and _running_tasks():
        time.sleep(0.2)
    assert not _running_tasks(), "tasks of the stopped sweep still run on the cluster"
    # issue 51: the third driver is this process, connected to the cluster already (its
    # job's workers are warm): a new interpreter and a new job's workers took 10-15 s
    again = inprocess.run(*cmd[3:], env=_env())
    assert again.returncode == 0, again.stderr[-2000:]
    assert re.search(rf"^8 runs in .* \({8 - kept} new\)$", again.stdout, re.M), (
        again.stdout
    )  # only the rest
    assert _stored(results) == 8


def test_unreachable_address_is_one_line_and_exit_2(tmp_path):
    """Refused before any work: in this process (issue 51: two interpreters' start-up
    took 6 of its 9 s)."""
    for address in ("127.0.0.1:1", "no-such-host.invalid:6379"):
        t0 = time.time()
        out = inprocess.run(
            *CLI, "--results", tmp_path, "--executor", "ray", "--address", address
        )
        assert out.returncode == 2 and time.time() - t0 < 60
        assert (
            out.stderr
            == "markovlib sweep: error: argument --address: cannot reach a Ray "
            f"cluster at {address}\n"
        )
        assert not (tmp_path / "runs.sqlite").exists()


def test_connected_elsewhere_is_an_error(cluster, tmp_path):
    with pytest.raises(ValueError, match="ray.shutdown"):
        sweep(
            SPECS[:1],
            tmp_path,
            device="cpu",
            progress=False,
            executor="ray",
            address="127.0.0.1:1",
        )
    with pytest.raises(ClusterUnreachable, match="host:port"):
        probe_address("nonsense")


@pytest.mark.parametrize(
    "args, argument",
    [
        (["--executor", "ray", "--cpus-per-task", "0"], "--cpus-per-task"),
        (["--executor", "ray", "--cpus-per-task", "1.5"], "--cpus-per-task"),
        (["--executor", "ray", "--gpus-per-task", "-0.5"], "--gpus-per-task"),
        (["--executor", "ray", "--gpus-per-task", "inf"], "--gpus-per-task"),
        (["--executor", "dask"], "--executor"),
        (["--address", "127.0.0.1:6379"], "--address"),
        (["--gpus-per-task", "0.125"], "--gpus-per-task"),
    ],
)
def test_bad_executor_arguments_exit_2(args, argument, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        raise SystemExit(main([*CLI, "--results", str(tmp_path), *args]))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"argument {argument}" in err, err
    assert not (tmp_path / "runs.sqlite").exists()


def test_verify_sample_all_retrains_every_run_through_ray(
    cluster, tmp_path, monkeypatch
):
    """`verify --sample all` on a small edition of three groups (two ensembles of two
    and a single run) exported here: every run re-trained in a Ray task of the local
    head (the driver cannot train: its train_specs raises) and judged bit for bit."""
    small = dict(steps=60, batch_size=4, seq_len=32, eval_every=10, eval_batches=4)
    specs = grid(
        [0.3],
        [0.4],
        tied=[True, False],
        seeds=[0, 1],
        config_kwargs=dict(max_len=32),
        **small,
    )
    single = grid([0.6], [0.3], seeds=[2], config_kwargs=dict(max_len=32), **small)
    groups = [("tied", specs[:2]), ("untied", specs[2:]), ("single", single[:1])]
    threads = torch.get_num_threads()
    try:
        produce(groups, tmp_path / "store", threads=1, log=lambda *a, **k: None)
    finally:
        torch.set_num_threads(threads)
    export(groups, ResultStore(tmp_path / "store"), tmp_path / "data", log=print)
    assert len(pd.read_parquet(tmp_path / "data" / "single-001.parquet")) == 1

    def no_training_here(*args, **kwargs):
        raise AssertionError("the driver trained")

    monkeypatch.setattr("markovlib.runs.executors.train_specs", no_training_here)
    lines = []
    run = dict(edition=groups, executor="ray", log=lines.append)
    assert verify(tmp_path / "data", sample="all", **run) == 5
    assert any("re-training 5 of 5 runs in 3 training(s)" in line for line in lines)
    judged = [line for line in lines if "reproduced" in line]
    assert len(judged) == 5 and all("bit for bit" in line for line in judged), lines
    frame = pd.read_parquet(tmp_path / "data" / "single-001.parquet")
    frame.at[0, "train_loss"] = np.asarray(frame.at[0, "train_loss"]) + 1e-7
    frame.to_parquet(tmp_path / "data" / "single-001.parquet", index=False)
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    for f in manifest["files"]:  # re-hashed: a careful tamperer
        raw = (tmp_path / "data" / f["name"]).read_bytes()
        f["sha256"], f["bytes"] = hashlib.sha256(raw).hexdigest(), len(raw)
    (tmp_path / "data" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(VerificationError, match="train_loss differs first at step 1"):
        verify(tmp_path / "data", sample="all", quick=True, **run)
