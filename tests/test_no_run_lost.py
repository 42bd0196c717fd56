"""No trained run lost, nothing written where the user did not ask, no filter silently
ignored (issue 40): a store held by another process, a store taken during training,
the result store's folder of every writing command, and ``edition --only``."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import inprocess
import pytest

from markovlib.runs import store as store_module
from markovlib.runs.spec import grid
from markovlib.runs.store import ResultStore, StoreError
from markovlib.runs.sweep import sweep

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--steps", "3", "--batch-size", "2", "--seq-len", "8", "--scale", "smoke"]
SPECS = dict(steps=3, batch_size=2, seq_len=8, eval_every=1, eval_batches=1)
CHAIN = ["--p", "0.3", "--q", "0.4"]
HOLD = (  # a second process that takes the store's write lock and keeps it
    "import sqlite3, sys, time; con = sqlite3.connect(sys.argv[1], timeout=30); "
    "con.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(60)"
)


def _env(**changes) -> dict:
    names = ("MARKOVLIB_SCALE", "MARKOVLIB_DATA", "MARKOVLIB_RESULTS")
    env = {k: v for k, v in os.environ.items() if k not in names}
    return {**env, "OMP_NUM_THREADS": "1", **changes}


def cli(*args, env=None, **kw):
    """:func:`inprocess.cli` in this test's environment (one torch thread, no
    markovlib variables) unless ``env`` is given."""
    return inprocess.cli(*args, env=env or _env(), **kw)


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def _hold(path: Path) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def _specs(seeds: int = 2):
    return grid([0.3], [0.4], tied=[True], seeds=range(seeds), train=SPECS)


# ---------------------------------------------------------- a store another holds
def test_a_store_held_by_another_process_is_refused_before_training(tmp_path):
    """Today's main trains, waits 60 s, then dies with sqlite3's traceback (put())."""
    ResultStore(tmp_path)
    holder = _hold(tmp_path / "runs.sqlite")
    try:
        t0 = time.monotonic()
        out = cli(  # a process of its own: LOCK_WAIT is read when it starts
            "sweep", *CHAIN, *TINY, "--results", str(tmp_path),
            env=_env(MARKOVLIB_LOCK_WAIT="1"), process=True,
        )  # fmt: skip
        took = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    line = _one_line(out.stderr)
    assert out.returncode == 1, out.stderr
    assert line == (
        f"markovlib sweep: error: {tmp_path / 'runs.sqlite'} is in use: another "
        "process has held its write lock for 1 s; nothing was trained: re-run when it "
        "is done, or give another folder (--results DIR or $MARKOVLIB_RESULTS)"
    )
    assert took < 60 and len(ResultStore(tmp_path)) == 0
    assert not list(tmp_path.glob("unsaved-*"))


def test_a_store_taken_during_training_keeps_the_runs_in_a_side_file(
    tmp_path, monkeypatch
):
    """The lock is taken after the check and held past the wait: the trained runs go
    to a side file beside the store, and ``markovlib import`` takes them in."""
    store = ResultStore(tmp_path)
    check, holders = ResultStore.check_writable, []

    def check_then_taken(self):
        check(self)
        holders.append(_hold(self.path))

    monkeypatch.setattr(ResultStore, "check_writable", check_then_taken)
    monkeypatch.setattr(store_module, "LOCK_WAIT", 1.0)
    specs = _specs(2)
    try:
        with pytest.raises(StoreError) as caught:
            sweep(specs, store, device="cpu", progress=False)
    finally:
        for h in holders:
            h.kill()
            h.wait()
    (side,) = tmp_path.glob("unsaved-*.sqlite")
    assert str(caught.value) == (
        f"2 trained run(s) not written to {store.path} (another process held its "
        f"write lock for 1 s); they are saved in {side}: import them with "
        f"`markovlib import {side} --results {tmp_path}` once the store is free"
    )
    assert len(store) == 0
    out = cli("import", str(side), "--results", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        f"2 run(s) of {side} imported into {tmp_path / 'runs.sqlite'}"
    )
    assert store.keys() == {s.key for s in specs} and not side.exists()
    # the imported runs are the trained ones: the same training again, bit for bit
    monkeypatch.undo()
    again = sweep(specs, ResultStore(tmp_path / "again"), device="cpu", progress=False)
    frame = store.frame().set_index("key").loc[again["key"]]
    assert list(frame["final_test_loss"]) == list(again["final_test_loss"])


def test_import_refuses_a_tampered_side_file(tmp_path, monkeypatch):
    store = ResultStore(tmp_path / "store")
    side = tmp_path / "unsaved-x.sqlite"
    monkeypatch.setattr(ResultStore, "check_writable", lambda self: None)

    def fail(self, con, rows):
        if con.execute("PRAGMA database_list").fetchall()[0][2] == str(self.path):
            raise sqlite3.OperationalError("database is locked")
        con.executemany(f"INSERT INTO runs VALUES ({', '.join('?' * 11)})", rows)

    monkeypatch.setattr(ResultStore, "_insert", fail)
    with pytest.raises(StoreError, match="saved in"):
        sweep(_specs(1), store, device="cpu", progress=False)
    (made,) = (tmp_path / "store").glob("unsaved-*.sqlite")
    made.rename(side)
    con = sqlite3.connect(side)
    with con:
        con.execute("UPDATE runs SET metrics = '{}'")
    con.close()
    monkeypatch.undo()
    with pytest.raises(StoreError, match="is damaged"):
        store.import_file(side)
    assert len(store) == 0 and side.exists()


# ------------------------------------------------- where a writing command writes
def test_writing_commands_honour_markovlib_results_and_leave_the_folder_empty(
    tmp_path,
):
    """Today's main: ``sweep`` writes ./results/runs.sqlite wherever it is run."""
    here, results = tmp_path / "here", tmp_path / "store"
    here.mkdir()
    env = _env(MARKOVLIB_RESULTS=str(results))
    out = cli("sweep", *CHAIN, *TINY, "--tied", "tied", cwd=here, env=env)
    assert out.returncode == 0, out.stderr
    assert f"1 runs in {results / 'runs.sqlite'} (1 new)" in out.stdout
    out = cli("train", *CHAIN, *TINY, cwd=here, env=env)
    assert out.returncode == 0, out.stderr
    out = cli("sweep", *CHAIN, *TINY, "--tied", "untied", "--results",
              str(tmp_path / "named"), cwd=here, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(ResultStore(tmp_path / "named")) == 1
    assert len(ResultStore(results)) == 1
    assert not any(here.iterdir()), list(here.iterdir())


def test_edition_produce_writes_to_markovlib_results(tmp_path, monkeypatch):
    """``edition produce`` with a tiny edition: --results, else the variable (in this
    process, issue 51: 7.0 s in a new interpreter)."""
    here, results = tmp_path / "here", tmp_path / "store"
    here.mkdir()
    tiny = [("tiny-tied", grid([0.3], [0.4], tied=[True], seeds=[0], train=SPECS))]
    inprocess.use_edition(monkeypatch, tiny)
    out = inprocess.run(
        "edition",
        "produce",
        "--data",
        tmp_path,
        cwd=here,
        env=_env(MARKOVLIB_RESULTS=str(results)),
    )
    assert out.returncode == 0, out.stderr
    assert "tiny-tied                      1 /   1 runs" in out.stdout
    assert len(ResultStore(results)) == 1 and not any(here.iterdir())


# ------------------------------------------------------------------ edition --only
@pytest.mark.parametrize("action", ["status", "produce", "export"])
@pytest.mark.parametrize(
    "only, says",
    [
        ("", "argument --only: must be comma-separated group name prefixes, none "
         "empty; got ''"),
        ("fig5,", "argument --only: must be comma-separated group name prefixes, "
         "none empty; got 'fig5,'"),
        ("fig5-k5-theory-fp16-tide", "argument --only: no group of the paper edition "
         "starts with 'fig5-k5-theory-fp16-tide' (nearest: fig5-k5-theory-fp16-tied"),
        ("no-such-group", "argument --only: no group of the paper edition starts "
         "with 'no-such-group' (group names start with appd-, continue-, depth-, "
         "fig4-, fig5-"),
    ],
)  # fmt: skip
def test_edition_only_is_refused_before_work_when_it_matches_nothing(
    tmp_path, action, only, says
):
    """Today's main: '' produces the whole edition, an unknown name exits 0."""
    out = cli("edition", action, "--only", only, "--results", str(tmp_path / "s"))
    assert out.returncode == 2, out.stdout
    assert says in _one_line(out.stderr)
    assert not (tmp_path / "s").exists()


def test_edition_status_and_export_honour_only(tmp_path):
    """Today's main: status and export ignore --only."""
    out = cli("edition", "status", "--only", "fig5-k5-theory", "--results",
              str(tmp_path / "s"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    groups = [ln.split()[0] for ln in out.stdout.splitlines()[:-1]]
    assert groups == ["fig5-k5-theory-fp16-tied", "fig5-k5-theory-fp16-untied"]
    from markovlib.runs.experiments import paper_edition
    from markovlib.runs.shipped import ShippedData

    shipped = ShippedData(ROOT / "data" / "paper").index()
    edition = dict(paper_edition())
    done = sum(s.key in shipped for g in groups for s in edition[g])
    assert out.stdout.splitlines()[-1].startswith(f"{done} of 24 group entries done")
