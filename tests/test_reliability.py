"""Reliability: result stores that are damaged, foreign, shared or read-only, and bad
input where a user types.

Each case asserts the exact outcome: the message names the file or the parameter, the
exit status, and the store's rows and integrity afterwards."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from markovlib.sweep import ResultStore, StoreError, grid, sweep

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--steps", "3", "--batch-size", "2", "--seq-len", "8", "--scale", "smoke"]
SPECS = dict(steps=3, batch_size=2, seq_len=8, eval_every=1, eval_batches=1)


def cli(*args, cwd=None, **kw):
    return subprocess.run(
        [sys.executable, "-m", "markovlib", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        **kw,
    )


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def _integrity(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.DatabaseError as e:
        return str(e)
    finally:
        con.close()


def _filled_store(directory: Path, n_seeds: int = 6) -> ResultStore:
    specs = grid(
        [0.3],
        [0.4],
        tied=[True],
        seeds=range(n_seeds),
        config_kwargs=dict(max_len=512),
        **SPECS,
    )
    sweep(specs, directory, ensemble_size=2, device="cpu", progress=False)
    return ResultStore(directory)


# ----------------------------------------------------------- damaged and foreign stores
@pytest.mark.parametrize("damage", ["not sqlite", "truncated", "zeroed page"])
def test_a_damaged_store_is_refused_before_training(tmp_path, damage):
    store = _filled_store(tmp_path)
    path = store.path
    raw = bytearray(path.read_bytes())
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    if damage == "not sqlite":
        raw = bytearray(b"this is not a database" * 300)
    elif damage == "truncated":
        raw = raw[: len(raw) // 2]
    else:  # the first page from the middle on whose loss SQLite itself detects
        page = 4096
        for number in range(len(raw) // page // 2, len(raw) // page):
            damaged = bytearray(raw)
            damaged[number * page : (number + 1) * page] = bytes(page)
            path.write_bytes(bytes(damaged))
            if _integrity(path) != "ok":
                break
        raw = damaged
    path.write_bytes(bytes(raw))
    out = cli(
        "sweep",
        "--p",
        "0.3",
        "--q",
        "0.4",
        "--seeds",
        "1",
        "--results",
        str(tmp_path),
        *TINY,
    )
    line = _one_line(out.stderr)
    assert out.returncode == 1 and str(path) in line and "move it aside" in line, line
    assert ("damaged" in line) and out.stdout == ""  # nothing trained, nothing printed


def test_a_zeroed_blob_page_is_caught_by_the_row_digest(tmp_path):
    """Zeroing the last page of a blob leaves SQLite's structure intact (integrity_check
    says ok): the run's digest catches it when the run is read, naming the run."""
    store = _filled_store(tmp_path)
    raw, page = bytearray(store.path.read_bytes()), 4096
    for number in range(1, len(raw) // page):
        damaged = bytearray(raw)
        damaged[number * page : (number + 1) * page] = bytes(page)
        store.path.write_bytes(bytes(damaged))
        if _integrity(store.path) == "ok" and bytes(
            raw[number * page : (number + 1) * page]
        ) != bytes(page):
            break
    else:
        pytest.skip("no page whose loss SQLite misses in this layout")
    bad = []
    for key in ResultStore(tmp_path).keys():
        try:
            ResultStore(tmp_path).record(key)
        except StoreError as e:
            assert f"run {key} is damaged" in str(e) and str(store.path) in str(e)
            bad.append(key)
    assert len(bad) == 1


def test_a_foreign_schema_is_refused_before_training(tmp_path):
    con = sqlite3.connect(tmp_path / "runs.sqlite")
    con.execute("CREATE TABLE runs (key TEXT, value TEXT)")
    con.commit()
    con.close()
    out = cli("sweep", "--p", "0.3", "--q", "0.4", "--results", str(tmp_path), *TINY)
    line = _one_line(out.stderr)
    assert (
        out.returncode == 1
        and "is not a result store of this markovlib" in line
        and "runs.sqlite" in line
    )
    con = sqlite3.connect(tmp_path / "runs.sqlite")
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0  # untouched


def test_a_store_from_a_newer_markovlib_is_refused(tmp_path):
    store = _filled_store(tmp_path, 1)
    con = sqlite3.connect(store.path)
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="schema version 99"):
        ResultStore(tmp_path)


def test_a_bad_row_names_its_key(tmp_path):
    store = _filled_store(tmp_path, 2)
    key = sorted(store.keys())[0]
    con = sqlite3.connect(store.path)
    con.execute("UPDATE runs SET metrics = ? WHERE key = ?", ("{not json", key))
    con.commit()
    con.close()
    with pytest.raises(StoreError, match=f"run {key} is unreadable"):
        ResultStore(tmp_path).frame()


# ---------------------------------------------------------------- concurrency and kills
@pytest.mark.parametrize("overlap", ["same", "overlapping"])
def test_two_sweeps_share_one_store(tmp_path, overlap):
    seeds = ("4", "4") if overlap == "same" else ("4", "6")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "markovlib",
                "sweep",
                "--p",
                "0.3",
                "--q",
                "0.4",
                "--seeds",
                n,
                "--ensemble-size",
                "1",
                "--results",
                str(tmp_path),
                *TINY,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for n in seeds
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "locked" not in err
    store = ResultStore(tmp_path)
    con = sqlite3.connect(store.path)
    keys = [k for (k,) in con.execute("SELECT key FROM runs")]
    assert (
        len(keys) == len(set(keys)) == 2 * max(map(int, seeds))
    )  # tied and untied × seeds, each once
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_kill_9_mid_sweep_keeps_the_store_whole(tmp_path):
    args = [
        sys.executable,
        "-m",
        "markovlib",
        "sweep",
        "--p",
        "0.3",
        "--q",
        "0.4",
        "--seeds",
        "12",
        "--tied",
        "tied",
        "--ensemble-size",
        "1",
        "--results",
        str(tmp_path),
        "--steps",
        "40",
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "--scale",
        "smoke",
    ]
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    deadline = time.time() + 240
    while time.time() < deadline:
        if (tmp_path / "runs.sqlite").exists():
            try:
                if len(ResultStore(tmp_path)) >= 2:
                    break
            except StoreError:
                pass
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = ResultStore(tmp_path)  # passes the integrity check
    before = len(store)
    assert 2 <= before < 12
    con = sqlite3.connect(store.path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    again = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    assert again.returncode == 0, again.stderr
    assert f"12 runs in {store.path} ({12 - before} new)" in again.stdout


def test_a_read_only_results_folder_is_one_clear_line(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    os.chmod(results, 0o555)
    if os.access(
        results, os.W_OK
    ):  # root writes through permissions: use a read-only mount instead
        results = next(
            (
                Path(d)
                for d in ("/proc/sys/kernel", "/sys/kernel")
                if Path(d).is_dir() and not os.access(d, os.W_OK)
            ),
            None,
        )
        if results is None:
            pytest.skip("running as root with no read-only folder to point at")
    out = cli("sweep", "--p", "0.3", "--q", "0.4", "--results", str(results), *TINY)
    line = _one_line(out.stderr)
    assert (
        out.returncode == 1
        and f"the result store folder {results} is not writable" in line
    )
    assert not (results / "runs.sqlite").exists()


# ---------------------------------------------------------------- what a user types
@pytest.mark.parametrize(
    "args,needle",
    [
        (
            ["train", "--p", "0.3", "--q", "0.4", "--seed", "-1"],
            "argument --seed: must be an integer >= 0",
        ),
        (
            ["sweep", "--p", "0.3", "--q", "0.4", "--seed", "-1"],
            "argument --seed: must be an integer >= 0",
        ),
        (
            ["book", "--p", "0.3", "--q", "0.4", "--seed", "-1"],
            "argument --seed: must be an integer >= 0",
        ),
        (["sweep", "--p", "0.2,,0.3", "--q", "0.4"], "argument --p: has an empty item"),
        (
            ["sweep", "--p", "0.2,0.20000000001", "--q", "0.4"],
            "0.2 and 0.20000000001 differ below the printed precision",
        ),
    ],
)
def test_bad_arguments_exit_2_naming_them(args, needle):
    out = cli(*args)
    assert out.returncode == 2 and needle in _one_line(out.stderr)


def test_book_refuses_an_existing_file_and_the_repository_itself(tmp_path):
    target = tmp_path / "taken"
    target.write_text("mine")
    out = cli("book", "--p", "0.3", "--q", "0.4", "--out", str(target))
    assert (
        out.returncode == 2
        and "is an existing file" in _one_line(out.stderr)
        and target.read_text() == "mine"
    )
    before = sorted(p.name for p in (ROOT / "book").iterdir())
    for out_dir in (ROOT, ROOT / "book"):
        out = cli("book", "--p", "0.3", "--q", "0.4", "--out", str(out_dir))
        assert (
            out.returncode == 2
            and "would overwrite the book's own sources" in _one_line(out.stderr)
        )
    assert sorted(p.name for p in (ROOT / "book").iterdir()) == before


def test_shipped_data_errors_are_one_line(tmp_path):
    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "format": 1,
                "files": [
                    {"name": "a-001.parquet", "sha256": "0" * 64, "runs": 1, "bytes": 1}
                ],
            }
        )
    )
    out = cli("verify", "--data", str(tmp_path))
    assert (
        out.returncode == 1
        and "a-001.parquet is listed in the manifest but missing"
        in _one_line(out.stderr)
    )


# ------------------------------------------------------- chapter parameters (papermill)
@pytest.mark.parametrize(
    "chapter,good",
    [
        ("framework", dict(p=0.5, q=0.8, k=5, p_multi=0.1)),
        ("global_minimum", dict(p=0.2, q=0.3)),
        ("bad_local_minima", dict(p=0.5, q=0.8, preset="gpt2", noise=0.05)),
        ("saddles", dict(p=0.5, q=0.8, noise=0.05)),
        ("multi_state", dict(k=5, p=0.6)),
        ("depth", dict(p=0.5, q=0.8, order=2)),
    ],
)
def test_every_chapter_checks_its_parameters_through_one_helper(chapter, good):
    from markovlib.book import check_chapter_parameters

    check_chapter_parameters(chapter, seed=0, scale="auto", **good)
    for seed in (-1, 1.5, True, "0"):
        with pytest.raises(ValueError, match=r"^seed must be an integer >= 0"):
            check_chapter_parameters(chapter, seed=seed, scale="auto", **good)
    with pytest.raises(ValueError, match="^scale must be one of"):
        check_chapter_parameters(chapter, seed=0, scale="huge", **good)
    for name, value in good.items():
        bad = {"preset": "bert", "k": 1, "order": 9}.get(name, -0.5)
        with pytest.raises(ValueError, match=f"^{name} must be"):
            check_chapter_parameters(
                chapter, seed=0, scale="auto", **{**good, name: bad}
            )


@pytest.mark.parametrize("seed", [-1, 1.5])
def test_papermill_rejects_a_bad_seed_before_any_work(tmp_path, seed):
    import papermill as pm

    with pytest.raises(pm.PapermillExecutionError) as err:
        pm.execute_notebook(
            str(ROOT / "book" / "global_minimum.ipynb"),
            str(tmp_path / "out.ipynb"),
            parameters=dict(seed=seed, scale="smoke"),
            cwd=str(ROOT / "book"),
            progress_bar=False,
            kernel_name="python3",
        )
    assert err.value.ename == "ValueError" and err.value.evalue.startswith(
        "seed must be an integer >= 0"
    )
    assert (
        "check_chapter_parameters(" in err.value.source
    )  # the chapter's first cell of its own code
