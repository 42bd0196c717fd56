"""The local result store: one SQLite file (standard library) with one row per run: the
run's key (:attr:`~markovlib.runs.spec.RunSpec.key`), its specification, the library
version, the metrics, the per-step history and the weights. Each ensemble's rows are
committed in one transaction as soon as it finishes, so an interrupted sweep (Ctrl-C,
SIGTERM) loses at most the ensemble in flight, and re-running the same sweep trains only
what the store does not hold.

Nothing here is unpickled but tensors (``torch.load(weights_only=True)``); specs,
metrics, histories and provenance are JSON, so moving classes between modules never
changes how a stored row reads.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import numbers
import os
import pickle
import shutil
import sqlite3
import sys
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import torch

from .._version import __version__
from ..model import Transformer
from ..train import TrainResult
from .spec import RunSpec, make_chain

__all__ = [
    "ResultStore",
    "EmptyStore",
    "read_store",
    "StoreError",
    "StoreFull",
    "default_results_dir",
    "result_from_record",
    "history_json",
    "history_frame",
    "SEED_LIMIT",
    "permitted",
]


def default_results_dir() -> Path:
    """``$MARKOVLIB_RESULTS`` if set, else the user's cache
    (``$XDG_CACHE_HOME/markovlib/results``, by default ``~/.cache/markovlib/results``):
    never inside the installed package. ``make`` sets it to ``results/``."""
    if os.environ.get("MARKOVLIB_RESULTS"):
        return Path(os.environ["MARKOVLIB_RESULTS"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "markovlib" / "results"


def metrics_of(result: TrainResult) -> dict:
    """A run's stored metrics: final test loss, its chain's exact entropies, the
    excess, the escape step, the learnt kernel and the training time."""
    chain = result.chain
    return {
        "final_test_loss": result.final_test_loss,
        "entropy_rate": chain.entropy_rate(),
        "unigram_entropy": chain.unigram_entropy(),
        "excess": result.final_test_loss - chain.entropy_rate(),
        "escape_step": result.escape_step(0.005),
        "learnt_kernel": result.learnt_kernel().tolist(),
        "seconds": result.seconds,
    }


def history_json(history: pd.DataFrame) -> str:
    """A history as JSON that reads back bit for bit (Python's float repr; pandas'
    to_json rounds to 10 digits)."""
    return json.dumps(
        {"format": 2, "columns": {c: history[c].tolist() for c in history.columns}}
    )


def history_frame(text: str) -> pd.DataFrame:
    """Inverse of :func:`history_json`; also reads the rounded pandas 'split' JSON of
    markovlib 0.1 stores."""
    data = json.loads(text)
    if data.get("format") == 2:
        return pd.DataFrame(data["columns"])
    return pd.read_json(io.StringIO(text), orient="split")


def _digest(*parts: str | bytes | None) -> str:
    """SHA-256 over a run's stored fields (SQLite checks its pages, not the bytes of a
    blob)."""
    h = hashlib.sha256()
    for part in parts:
        data = (
            b""
            if part is None
            else part.encode()
            if isinstance(part, str)
            else bytes(part)
        )
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def _weights_blob(state: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in state.items()}, buffer)
    return buffer.getvalue()


def _weights_of(blob: bytes) -> dict:
    return torch.load(
        io.BytesIO(blob), weights_only=True
    )  # tensors only: never unpickles objects


SEED_LIMIT = 2**63  # a run's seed is stored as an SQLite INTEGER (signed 64-bit)


# seconds a store waits for another process's lock ($MARKOVLIB_LOCK_WAIT overrides it)
LOCK_WAIT = float(os.environ.get("MARKOVLIB_LOCK_WAIT") or 60.0)
UNSAVED = "unsaved-"  # side files of runs a store could not take: unsaved-<time>.sqlite


def _locked(e: Exception) -> bool:
    """Whether an SQLite error means another connection holds the lock."""
    text = str(e).lower()
    return "locked" in text or "busy" in text


def _while_locked(call):
    """``call()``, tried again while SQLite reports another connection's lock, for up
    to :data:`LOCK_WAIT` seconds (some locks, e.g. around the switch to WAL or a
    concurrent schema change, are not waited on by SQLite's busy timeout)."""
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            return call()
        except sqlite3.OperationalError as e:
            if not _locked(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def permitted(path: Path, access: int) -> bool:
    """Whether this process may read (``os.R_OK``) or write (``os.W_OK``) ``path`` and
    its mode grants someone that right (root passes ``os.access`` whatever the mode; a
    file chmod-ed to deny everyone is meant to be out of reach)."""
    bits = 0o444 if access == os.R_OK else 0o222
    try:
        return os.access(path, access) and bool(path.stat().st_mode & bits)
    except OSError:
        return False


class StoreError(RuntimeError):
    """A result store that cannot be used as it is (damaged, foreign, not writable); the
    message names the file."""

    def _render_traceback_(self) -> list[str]:
        """IPython's hook (a chapter's cell): the message alone, not the stack."""
        return [f"{type(self).__name__}: {self}"]


class StoreFull(StoreError):
    """The disk of a result store is full: nothing was written (the store is as it was,
    not damaged)."""


def _free_bytes(directory: Path) -> int | None:
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def _disk_full(error: Exception, directory: Path) -> bool:
    """Whether ``error`` (sqlite3 or OS) means that the disk of ``directory`` is full:
    ENOSPC, SQLITE_FULL, or an SQLite I/O error on a disk with less than 1 MiB free
    (creating a WAL index on a full disk fails as 'disk I/O error')."""
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    name = getattr(error, "sqlite_errorname", "") or ""
    if name == "SQLITE_FULL" or "disk is full" in str(error):
        return True
    free = _free_bytes(directory)
    io_error = name.startswith("SQLITE_IOERR") or "disk I/O error" in str(error)
    return io_error and free is not None and free < 2**20


def _disk_full_message(path: Path, doing: str) -> str:
    free = _free_bytes(path.parent)
    left = "" if free is None else f" ({free / 2**20:.1f} MiB free on its disk)"
    return f"disk full: {doing} {path}{left}"


def _write_failure(error: Exception, store) -> str:
    """Why a write failed, in a few words."""
    if _disk_full(error, store.directory):
        free = _free_bytes(store.directory)
        return "disk full" + ("" if free is None else f", {free / 2**20:.1f} MiB free")
    if isinstance(error, sqlite3.OperationalError) and _locked(error):
        return f"another process held its write lock for {LOCK_WAIT:g} s"
    return f"{type(error).__name__}: {error}"


@contextmanager
def _side_connection(path: Path, read_only: bool = False):
    """A plain SQLite connection to a side file, in one transaction."""
    uri = f"{path.absolute().as_uri()}?mode={'ro' if read_only else 'rwc'}"
    con = sqlite3.connect(uri, uri=True)
    try:
        with con:
            yield con
    finally:
        con.close()


def check_seeds(specs: Iterable[RunSpec]) -> None:
    """Every seed fits a store's INTEGER column: refused before training, not after."""
    for spec in specs:
        seed = spec.seed
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0 and < 2**63; got {seed!r}")
        if seed >= SEED_LIMIT:
            raise ValueError(
                f"seed must be an integer >= 0 and < 2**63 (a result store keeps it "
                f"as a signed 64-bit integer); got {seed}"
            )


class ResultStore:
    """One SQLite file of finished runs, keyed by :attr:`RunSpec.key`; checked when
    opened (integrity, schema)."""

    # PRAGMA user_version; 0/1: the 8 columns of markovlib 0.1 (no provenance, no
    # checkpoint)
    VERSION = 2
    COLUMNS = (
        "key",
        "created",
        "version",
        "seed",
        "spec",
        "metrics",
        "history",
        "weights",
        "provenance",
        "checkpoint_step",
        "checkpoint",
    )
    SCHEMA = """CREATE TABLE IF NOT EXISTS runs (
        key TEXT PRIMARY KEY, created REAL NOT NULL, version TEXT NOT NULL, \
seed INTEGER NOT NULL,
        spec TEXT NOT NULL, metrics TEXT NOT NULL, history TEXT NOT NULL, \
weights BLOB NOT NULL,
        provenance TEXT NOT NULL DEFAULT '{}', checkpoint_step INTEGER, \
checkpoint BLOB)"""

    def __init__(self, directory: str | Path, *, read_only: bool = False):
        """The store in ``directory``, created there unless ``read_only`` (a command
        that only reads: nothing is created or written, no ``-wal``/``-shm`` left)."""
        self.directory, self.read_only = Path(directory), read_only
        self.path = self.directory / "runs.sqlite"
        if self.directory.exists() and not self.directory.is_dir():
            raise StoreError(
                f"the result store folder {self.directory} is a file, not a folder; "
                "give a folder (--results DIR or $MARKOVLIB_RESULTS)"
            )
        if read_only and not self.path.is_file():
            raise StoreError(f"no result store {self.path}")
        if not read_only:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(
                    f"cannot create the result store folder {self.directory}: "
                    f"{e.strerror}"
                ) from None
        self._check_access()
        try:  # another process may be creating or migrating the store
            empty = _while_locked(self._check_ours)
            _while_locked(self._open)
        except (sqlite3.DatabaseError, OSError) as e:
            self._refuse(e)
        if empty and not read_only:
            print(
                f"markovlib: {self.path} was empty; initialised it as a result store",
                file=sys.stderr,
            )

    def _check_access(self) -> None:
        """The store's files can be read and (unless read-only) written, checked before
        any training: a read-only ``runs.sqlite``, ``-wal``, ``-shm`` or folder is
        refused naming it (root passes ``os.access`` whatever the mode: a mode that
        grants no one the right counts too)."""
        where = "(--results DIR or $MARKOVLIB_RESULTS)"
        if self.path.exists() and not permitted(self.path, os.R_OK):
            raise StoreError(
                f"{self.path} cannot be read (permission denied: mode "
                f"{self.path.stat().st_mode & 0o777:03o}); the store is not damaged: "
                f"give read and write permission (chmod u+rw {self.path}) or another "
                f"folder {where}"
            )
        if self.read_only:
            return
        if not permitted(self.directory, os.W_OK):
            raise StoreError(
                f"the result store folder {self.directory} is not writable; give "
                f"another one {where}"
            )
        for path in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
            try:  # a -wal or -shm that another process's last close deleted: no file
                mode = path.stat().st_mode
            except FileNotFoundError:
                continue
            if not permitted(path, os.W_OK) and path.exists():
                raise StoreError(
                    f"the result store file {path} is read-only (mode "
                    f"{mode & 0o777:03o}); nothing was trained: make it "
                    f"writable (chmod u+w {path}) or give another folder {where}"
                )

    def _writable(self) -> bool:
        """Whether this process can write the store (its folder, file and WAL)."""
        files = (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
        return permitted(self.directory, os.W_OK) and all(
            permitted(f, os.W_OK) for f in files if f.exists()
        )

    def _check_ours(self) -> bool:
        """Refuse, before anything is written, a ``runs.sqlite`` that holds something
        but not a markovlib store (one line naming what it holds; read without locks or
        a journal-mode switch, so it is left byte for byte); whether it is an empty
        file (0 bytes and no WAL, so no other process is creating it, or an SQLite
        file without tables)."""
        if not self.path.is_file():
            return False
        if self.path.stat().st_size == 0:
            return not Path(f"{self.path}-wal").exists()
        uri = self._read_uri()
        try:
            tables, columns, version = self._schema(uri)
        except sqlite3.DatabaseError:
            again = self._read_uri()
            if again == uri:
                raise
            # read as immutable, no WAL then; another process opened it meanwhile (the
            # tasks of a stopped Ray driver) and moved pages under that read
            tables, columns, version = self._schema(again)
        ours = tables == ["runs"] and columns in (
            list(self.COLUMNS),
            list(self.COLUMNS[:8]),
        )
        if ours and version <= self.VERSION:
            return False
        if not tables and version == 0:  # an SQLite file that holds nothing
            return True
        held = f"tables {', '.join(tables)}" if tables else "no table"
        raise StoreError(
            f"{self.path} is not a result store of this markovlib (it holds {held}, "
            f"schema version {version}); it was left as it was: move it aside or "
            "give another folder (--results DIR or $MARKOVLIB_RESULTS)"
        )

    def _schema(self, uri: str) -> tuple[list[str], list[str], int]:
        """The tables, the runs table's columns and the schema version at ``uri``."""
        con = sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT)
        try:
            tables = [
                row[0]
                for row in con.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
            columns = [row[1] for row in con.execute("PRAGMA table_info(runs)")]
            version = con.execute("PRAGMA user_version").fetchone()[0]
        finally:
            con.close()
        return tables, columns, version

    def _read_uri(self) -> str:
        """The URI that reads the store without writing a byte: ``mode=ro`` beside
        an existing WAL, else ``immutable=1`` (no ``-wal``/``-shm`` created)."""
        wal = Path(f"{self.path}-wal").exists()
        return f"{self.path.absolute().as_uri()}?{'mode=ro' if wal else 'immutable=1'}"

    def _open(self) -> None:
        """Check the store and create or migrate its table (one transaction)."""
        with self._connect() as con:
            check = con.execute("PRAGMA integrity_check(1)").fetchall()
            if check != [("ok",)]:
                what = " ".join(
                    check[0][0].replace("*** in database main ***", "").split()
                )
                raise StoreError(
                    f"{self.path} is damaged (SQLite integrity_check: {what}); "
                    f"{self._readable(con)}move it aside (mv {self.path} "
                    f"{self.path}.damaged) and "
                    "re-run to train its runs again"
                )
            version = con.execute("PRAGMA user_version").fetchone()[0]
            columns = [row[1] for row in con.execute("PRAGMA table_info(runs)")]
            writes = not self.read_only  # read-only: nothing created or migrated
            if writes and not columns:
                con.execute(self.SCHEMA)
            elif (
                writes and version < self.VERSION and columns == list(self.COLUMNS[:8])
            ):  # markovlib 0.1: migrate
                con.execute(
                    "ALTER TABLE runs ADD COLUMN provenance TEXT NOT NULL DEFAULT '{}'"
                )
                con.execute("ALTER TABLE runs ADD COLUMN checkpoint_step INTEGER")
                con.execute("ALTER TABLE runs ADD COLUMN checkpoint BLOB")
            elif columns != list(self.COLUMNS) or version > self.VERSION:
                raise StoreError(
                    f"{self.path} is not a result store of this markovlib (schema "
                    f"version {version}, "
                    f"table runs with columns {columns}); move it aside or "
                    "give another folder"
                )
            if writes and version != self.VERSION:  # written only when it changes
                con.execute(f"PRAGMA user_version = {self.VERSION}")

    def _refuse(self, e: Exception):
        """Raise the error of an open that failed: a full disk, a store still locked by
        another process after :data:`LOCK_WAIT` seconds, or a damaged file."""
        if _disk_full(e, self.directory):
            raise StoreFull(
                _disk_full_message(self.path, "cannot open the result store")
                + "; the store is not damaged: free some space and re-run"
            ) from None
        if isinstance(e, OSError):
            raise e
        if _locked(e):
            raise StoreError(
                f"{self.path} is in use: another process has held its lock for "
                f"{LOCK_WAIT:g} s; the store is not damaged: re-run when it is done"
            ) from None
        raise StoreError(
            f"{self.path} is damaged or not an SQLite file ({e}); move it aside "
            f"(mv {self.path} {self.path}.damaged) and re-run to "
            "train its runs again"
        ) from None

    def _readable(self, con) -> str:
        try:
            n = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            return f"{n} runs can still be listed; "
        except sqlite3.DatabaseError:
            return ""

    @contextmanager
    def _connect(self):
        """A connection in one transaction. Read-only where this process cannot write
        the store: ``mode=ro`` beside an existing WAL, else ``immutable=1`` (SQLite
        creates no ``-wal``/``-shm`` files that a read-only reader would leave)."""
        if self.read_only and not self._writable():
            con = sqlite3.connect(self._read_uri(), uri=True, timeout=LOCK_WAIT)
        else:
            con = sqlite3.connect(self.path, timeout=LOCK_WAIT)
        try:
            if not self.read_only:
                _while_locked(lambda: con.execute("PRAGMA journal_mode=WAL"))
            with con:  # one transaction: committed on success, rolled back on error
                yield con
        finally:
            con.close()

    def keys(self) -> set[str]:
        with self._connect() as con:
            return {row[0] for row in con.execute("SELECT key FROM runs")}

    def __len__(self) -> int:
        with self._connect() as con:
            return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def put(self, pairs: Sequence[tuple[RunSpec, TrainResult]]) -> None:
        """Write finished runs, all in one transaction."""
        if self.read_only:
            raise StoreError(f"{self.path} was opened read-only: nothing written")
        rows = []
        for spec, result in pairs:
            ckpt = (
                None if result.checkpoint is None else _weights_blob(result.checkpoint)
            )
            payload = (
                json.dumps(spec.as_dict(), sort_keys=True),
                json.dumps(metrics_of(result)),
                history_json(result.history),
                _weights_blob(result.model.state_dict()),
            )
            prov = {
                **result.provenance,
                "seconds": result.seconds,
                "digest": _digest(*payload, ckpt),
            }
            rows.append(
                (
                    spec.key,
                    time.time(),
                    __version__,
                    spec.seed,
                    *payload,
                    json.dumps(prov, sort_keys=True),
                    result.checkpoint_step,
                    ckpt,
                )
            )
        try:
            with self._connect() as con:
                self._insert(con, rows)
        except (sqlite3.Error, OSError) as e:
            self._keep_aside(rows, e)

    def _insert(self, con, rows: list[tuple]) -> None:
        marks = ", ".join("?" * len(self.COLUMNS))
        con.executemany(f"INSERT OR REPLACE INTO runs VALUES ({marks})", rows)

    def _keep_aside(self, rows: list[tuple], error: Exception) -> None:
        """A write that failed after training: the rows go to a side file beside the
        store (:meth:`import_file` takes them in) and the error says how to import
        them; a full disk that takes no side file either says so."""
        n, why = len(rows), _write_failure(error, self)
        stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        side = self.directory / f"{UNSAVED}{stamp}.sqlite"
        try:
            with _side_connection(side) as con:
                con.execute(self.SCHEMA)
                self._insert(con, rows)
        except (sqlite3.Error, OSError):
            side.unlink(missing_ok=True)
            if _disk_full(error, self.directory):
                raise StoreFull(
                    _disk_full_message(self.path, f"{n} new run(s) not written to")
                    + "; no side file fits beside it either; the runs stored before "
                    "are kept: free some space and re-run the same command to train "
                    "the rest"
                ) from None
            raise StoreError(
                f"{n} trained run(s) not written to {self.path} ({why}) and no "
                "side file could be written beside it; the runs stored before are "
                "kept: re-run the same command to train them again"
            ) from None
        raise StoreError(
            f"{n} trained run(s) not written to {self.path} ({why}); they are saved "
            f"in {side}: import them with `markovlib import {side} --results "
            f"{self.directory}` once the store is free"
        ) from None

    def check_writable(self) -> None:
        """Refuse, before any training, a store this process cannot write now: opened
        read-only, or its write lock held by another process for :data:`LOCK_WAIT`
        seconds (one line naming the file; nothing trained)."""
        if self.read_only:
            raise StoreError(f"{self.path} was opened read-only: nothing trained")
        try:
            with self._connect() as con:
                con.execute("BEGIN IMMEDIATE")  # the write lock, released at once
        except sqlite3.OperationalError as e:
            if not _locked(e):
                self._refuse(e)
            raise StoreError(
                f"{self.path} is in use: another process has held its write lock "
                f"for {LOCK_WAIT:g} s; nothing was trained: re-run when it is done, "
                "or give another folder (--results DIR or $MARKOVLIB_RESULTS)"
            ) from None

    def import_file(self, side: str | Path) -> int:
        """Take in the runs of a side file (:meth:`put` wrote it when the store was
        busy or failed), each checked against its digest, in one transaction; returns
        how many. The side file is removed once its runs are in."""
        side = Path(side)
        if not side.is_file():
            raise StoreError(f"no side file {side}")
        try:
            with _side_connection(side, read_only=True) as con:
                rows = con.execute(
                    f"SELECT {', '.join(self.COLUMNS)} FROM runs"
                ).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"{side} is not a side file of markovlib ({e})") from None
        for row in rows:
            self._checked(row[0], dict(zip(self.COLUMNS, row)))
        with self._connect() as con:
            self._insert(con, rows)
        side.unlink()
        return len(rows)

    def _checked(self, key: str, r: dict) -> dict:
        """The provenance of a stored row (``r``: column -> value), after checking the
        row against its digest (rows written before digests existed have none)."""
        prov = json.loads(r["provenance"])
        digest = prov.pop("digest", None)
        if digest is not None and digest != _digest(
            r["spec"], r["metrics"], r["history"], r["weights"], r["checkpoint"]
        ):
            raise StoreError(
                f"{self.path}: run {key} is damaged (its contents differ from their "
                "digest); delete that "
                f'row (sqlite3 {self.path} "DELETE FROM runs WHERE key = '
                f"'{key}'\") to re-train it"
            )
        return prov

    def frame(self) -> pd.DataFrame:
        """One row per run: key, created, version, seed, flattened
        chain / config / train fields, metrics; every row checked against its digest
        first."""
        with self._connect() as con:
            rows = con.execute(
                f"SELECT {', '.join(self.COLUMNS)} FROM runs ORDER BY created"
            ).fetchall()
        records = []
        for row in rows:
            r = dict(zip(self.COLUMNS, row))
            key, created, version, seed = (
                r[c] for c in ("key", "created", "version", "seed")
            )
            self._checked(key, r)
            try:
                spec, metrics = json.loads(r["spec"]), json.loads(r["metrics"])
                records.append(
                    {
                        "key": key,
                        "created": created,
                        "version": version,
                        "seed": seed,
                        **{f"chain.{k}": v for k, v in spec["chain"].items()},
                        **{f"config.{k}": v for k, v in spec["config"].items()},
                        **{f"train.{k}": v for k, v in spec["train"].items()},
                        **metrics,
                    }
                )
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise StoreError(
                    f"{self.path}: run {key} is unreadable ({type(e).__name__}: {e}); "
                    "delete that row "
                    f'(sqlite3 {self.path} "DELETE FROM runs WHERE key = '
                    f"'{key}'\") to re-train it"
                ) from None
        return pd.DataFrame.from_records(records)

    def history(self, key: str) -> pd.DataFrame:
        with self._connect() as con:
            row = con.execute(
                "SELECT history FROM runs WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            raise KeyError(key)
        return history_frame(row[0])

    def record(self, key: str) -> dict:
        """Everything stored of one run: spec (dict), metrics, provenance, history,
        weights, checkpoint."""
        with self._connect() as con:
            row = con.execute(
                f"SELECT {', '.join(self.COLUMNS)} FROM runs WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            raise KeyError(f"run {key} is not in {self.path}")
        r = dict(zip(self.COLUMNS, row))
        prov = self._checked(key, r)
        return {
            "key": key,
            "created": r["created"],
            "version": r["version"],
            "spec": json.loads(r["spec"]),
            "metrics": json.loads(r["metrics"]),
            "provenance": prov,
            "history": history_frame(r["history"]),
            "weights": self._weights(key, r["weights"], "weights"),
            "checkpoint_step": r["checkpoint_step"],
            "checkpoint": None
            if r["checkpoint"] is None
            else self._weights(key, r["checkpoint"], "checkpoint"),
        }

    def _weights(self, key: str, blob: bytes, column: str) -> dict:
        """The tensors of a stored blob; a blob that is not a state dict of tensors is
        a damaged run (:class:`StoreError` naming it), never unpickled further."""
        try:
            state = _weights_of(blob)
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as e:
            why = type(e).__name__
        else:
            if isinstance(state, dict) and all(
                isinstance(v, torch.Tensor) for v in state.values()
            ):
                return state
            why = f"a {type(state).__name__}, not a dict of tensors"
        raise StoreError(
            f"{self.path}: run {key} is damaged (its {column} are not tensors "
            f"markovlib wrote: {why}); delete that row (sqlite3 {self.path} "
            f"\"DELETE FROM runs WHERE key = '{key}'\") to re-train it"
        )

    def load(self, spec: RunSpec, device: str | torch.device = "cpu") -> TrainResult:
        """The stored run of ``spec`` as a :class:`TrainResult` (trained model
        included)."""
        return result_from_record(spec, self.record(spec.key), device)


class EmptyStore:
    """The result store that is not there: no runs (a command that only reads it)."""

    def __init__(self, path: Path | None):
        self.path = path

    def keys(self) -> set[str]:
        """No run's key."""
        return set()

    def __len__(self) -> int:
        return 0

    def frame(self) -> pd.DataFrame:
        """No run's row."""
        return pd.DataFrame()


def read_store(directory: Path | None) -> ResultStore | EmptyStore:
    """The store in ``directory`` opened read-only, or an empty one where none is."""
    if directory is None or not (directory / "runs.sqlite").is_file():
        return EmptyStore(directory)
    return ResultStore(directory, read_only=True)


def result_from_record(
    spec: RunSpec, record: dict, device: str | torch.device = "cpu"
) -> TrainResult:
    """A :class:`TrainResult` from a stored run (result store or shipped data)."""
    model = Transformer(spec.config)
    model.load_state_dict(record["weights"])
    prov = dict(record["provenance"])
    return TrainResult(
        chain=make_chain(spec.chain),
        config=spec.config,
        model=model.to(device).eval(),
        history=record["history"],
        seed=spec.seed,
        train_config=spec.train,
        seconds=prov.pop("seconds", record["metrics"].get("seconds", float("nan"))),
        provenance=prov,
        checkpoint_step=record["checkpoint_step"],
        checkpoint=record["checkpoint"],
        metrics=record["metrics"],
    )
