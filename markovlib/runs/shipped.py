"""Shipped run data (``data/paper/``): immutable Parquet files of finished runs and a
manifest, read with every file's hash checked.

One file per group of runs, written once and never rewritten
(:func:`~markovlib.runs.export.export`); ``manifest.json`` lists every file with its
SHA-256, number of runs and size. A row holds a run's full spec and its key, the
provenance (library and torch versions, device, CPU capability, thread count, wall
time), the metrics, the history (every test evaluation; the training loss at every step
up to the checkpoint, then at every evaluation) and the final and checkpoint weights as
raw little-endian float32 with a JSON index. Nothing is ever unpickled.
:func:`~markovlib.runs.verify.verify` proves the data.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .._version import repository_url
from ..train import TrainResult
from .spec import CHECKPOINT_STEP, RunSpec, sources_of
from .store import result_from_record

__all__ = [
    "ShippedData",
    "ShippedDataError",
    "default_data_dir",
    "no_data_message",
    "thin_history",
    "file_sha256",
    "history_of",
    "ENV_VAR",
    "shipped_data",
    "source_weights",
]

ENV_VAR = "MARKOVLIB_DATA"
MANIFEST = "manifest.json"
FORMAT = 1
COLUMNS = (
    "key",
    "spec",
    "seed",
    "provenance",
    "metrics",
    "steps",
    "history_step",
    "lr",
    "train_loss",
    "test_loss",
    "weights",
    "weights_index",
    "checkpoint_step",
    "checkpoint",
    "checkpoint_index",
)
# a shipped file: <group>-<n>.parquet; an export writes it as .<name>.partial first
FILE_NAME = re.compile(r"(?P<group>.+)-(?P<n>\d{3,})\.parquet")
PARTIAL = ".partial"


class ShippedDataError(RuntimeError):
    """A shipped data file is missing, damaged or foreign (the message names it)."""

    def _render_traceback_(self) -> list[str]:
        """IPython's hook (a chapter's cell): the message alone, not the stack."""
        return [f"{type(self).__name__}: {self}"]


def default_data_dir() -> Path | None:
    """``$MARKOVLIB_DATA``, else the first ``data/paper`` with a manifest in the working
    directory or above it."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "data" / "paper" / MANIFEST).is_file():
            return folder / "data" / "paper"
    return None


def no_data_message() -> str:
    """What to do when :func:`default_data_dir` finds nothing (an installed markovlib
    ships no runs), in one line."""
    return (
        f"no shipped data found (data/paper/{MANIFEST} here or above): clone "
        f"{repository_url()} and run from inside it, or set "
        f"{ENV_VAR}=<clone>/data/paper"
    )


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (read in blocks of 1 MiB)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _unpack(blob: bytes, index: str) -> dict:
    flat = np.frombuffer(blob, dtype="<f4")
    out = {}
    for name, shape, offset in json.loads(index):
        n = math.prod(shape)
        out[name] = torch.from_numpy(flat[offset : offset + n].copy().reshape(shape))
    return out


def thin_history(
    history: pd.DataFrame, eval_every: int, keep_until: int = CHECKPOINT_STEP
) -> pd.DataFrame:
    """Rows kept in shipped data: every step up to ``keep_until``, every evaluated step,
    and the last step."""
    steps = history["step"]
    keep = (
        (steps <= keep_until)
        | (steps % eval_every == 0)
        | (steps == steps.max())
        | history["test_loss"].notna()
    )
    return history[keep]


def history_of(row: dict) -> pd.DataFrame:
    """The full-length history (one row per step); steps that were thinned out have NaN
    lr and train loss."""
    steps = int(row["steps"])
    at = np.asarray(row["history_step"], dtype=np.int64)
    columns = {"step": np.arange(steps + 1)}
    for column in ("lr", "train_loss", "test_loss"):
        columns[column] = np.full(steps + 1, np.nan)
        columns[column][at] = np.asarray(row[column], dtype=np.float64)
    return pd.DataFrame(columns)  # built at once: .loc took 1.6 ms a run, this 0.2


@dataclass
class _File:
    name: str
    sha256: str
    runs: int
    bytes: int


def _plain_name(directory: Path, name) -> str:
    """``name`` if it is a plain ``.parquet`` file name inside ``directory``; else a
    ShippedDataError."""
    plain = (
        isinstance(name, str)
        and name == os.path.basename(name)
        and "\\" not in name
        and "\0" not in name
        and name not in ("", ".", "..")
        and name.endswith(".parquet")
    )
    if not plain:
        raise ShippedDataError(
            f"{directory / MANIFEST} lists {name!r}, which is not a plain .parquet "
            f"file name inside {directory}"
        )
    return name


_DERIVED_NAME = re.compile(r"derived/[0-9a-f]{32}\.json\.gz")


def _derived_of(directory: Path, manifest: dict) -> dict[str, _File]:
    """The manifest's derived values (``derived/<key>.json.gz``: see
    :mod:`markovlib.runs.derived`), by name."""
    out = {}
    for entry in manifest.get("derived", []):
        f = _File(**{"runs": 0, **entry})
        if not (isinstance(f.name, str) and _DERIVED_NAME.fullmatch(f.name)):
            raise ShippedDataError(
                f"{directory / MANIFEST} lists the derived value {f.name!r}, which is "
                "not derived/<32 hex digits>.json.gz"
            )
        out[f.name] = f
    return out


def _files_of(directory: Path, manifest: dict) -> list[_File]:
    """The manifest's file entries, each a plain file name, none twice."""
    files = [_File(**f) for f in manifest["files"]]
    seen = set()
    for f in files:
        if _plain_name(directory, f.name) in seen:
            raise ShippedDataError(f"{directory / MANIFEST} lists {f.name} twice")
        seen.add(f.name)
    return files


class ShippedData:
    """Read access to a shipped data folder: manifest checked, files hashed before they
    are read."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        path = self.directory / MANIFEST
        if self.directory.exists() and not self.directory.is_dir():
            raise ShippedDataError(
                f"the shipped data folder {self.directory} is a file, not a folder "
                "($MARKOVLIB_DATA or --data)"
            )
        try:
            manifest = json.loads(path.read_text())
            if manifest.get("format") != FORMAT:
                raise ValueError(
                    f"format {manifest.get('format')!r}, expected {FORMAT}"
                )
            self.files = _files_of(self.directory, manifest)
            self.derived = _derived_of(self.directory, manifest)
        except FileNotFoundError:
            raise ShippedDataError(f"{path} is missing") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ShippedDataError(
                f"{path} is not a markovlib manifest ({e})"
            ) from None
        self._checked: set[str] = set()
        self._index: dict[str, str] | None = None
        self._rows: dict[str, pd.DataFrame] = {}
        self._records: dict[str, dict[str, dict]] = {}

    def check(self, name: str) -> Path:
        """The path of file ``name`` after checking its size and SHA-256 against the
        manifest."""
        entry = next((f for f in self.files if f.name == name), None)
        entry = entry or self.derived.get(name)
        path = self.directory / name
        if entry is None:
            raise ShippedDataError(
                f"{path} is not listed in {self.directory / MANIFEST}"
            )
        if name not in self._checked:
            self._check_regular(path)
            if path.stat().st_size != entry.bytes or file_sha256(path) != entry.sha256:
                raise ShippedDataError(
                    f"{path} is damaged: its SHA-256 differs from the manifest's; "
                    "restore it with "
                    f"`git checkout -- {path}`"
                )
            self._checked.add(name)
        return path

    def _check_regular(self, path: Path) -> None:
        """``path`` is a regular file inside the data folder: not missing, not a
        symbolic link (to a file elsewhere, whose bytes the manifest's hash would
        then vouch for), not a pipe or device, not reached through a link outside."""
        restore = f"restore it with `git checkout -- {path}`"
        if path.is_symlink():
            raise ShippedDataError(
                f"{path} is a symbolic link to {os.readlink(path)}, not a regular file "
                f"inside {self.directory}; {restore}"
            )
        if not path.exists():
            raise ShippedDataError(f"{path} is listed in the manifest but missing")
        where = path.resolve()
        if not where.is_relative_to(self.directory.resolve()):
            raise ShippedDataError(
                f"{path} is {where}, outside the data folder {self.directory}; "
                f"{restore}"
            )
        if not stat.S_ISREG(path.stat().st_mode):
            raise ShippedDataError(f"{path} is not a regular file; {restore}")

    def _read(self, name: str, columns: list[str] | None = None) -> pd.DataFrame:
        path = self.check(name)
        try:
            # heavy: imported on the first read, so that import markovlib stays fast
            import pyarrow.parquet as pq

            missing = sorted(set(COLUMNS) - set(pq.read_schema(path).names))
            if missing:
                raise ValueError(f"no column {', '.join(missing)}")
            frame = pd.read_parquet(path, columns=columns)
        except Exception as e:  # noqa: BLE001
            # any reader error means the file is not ours
            raise ShippedDataError(
                f"{path} is not a readable markovlib data file "
                f"({type(e).__name__}: {e})"
            ) from None
        return frame

    def index(self) -> dict[str, str]:
        """key → file name, over every file of the manifest; a key in two files (or
        twice in one) is an error naming both."""
        if self._index is None:
            index: dict[str, str] = {}
            for f in self.files:
                keys = self._read(f.name, ["key"])["key"].tolist()
                if len(keys) != f.runs:
                    raise ShippedDataError(
                        f"{self.directory / f.name} holds {len(keys)} runs; the "
                        f"manifest says {f.runs}"
                    )
                for key in keys:
                    if key in index:
                        raise ShippedDataError(
                            f"run {key} is shipped twice: in "
                            f"{self.directory / index[key]} and in "
                            f"{self.directory / f.name}"
                        )
                    index[key] = f.name
            self._index = index
        return self._index

    def __contains__(self, key: str) -> bool:
        return key in self.index()

    def __len__(self) -> int:
        return len(self.index())

    def rows(self, name: str) -> pd.DataFrame:
        if name not in self._rows:
            self._rows[name] = self._read(name).set_index("key", drop=False)
        return self._rows[name]

    def column(self, column: str) -> dict:
        """key → ``column``'s stored value, over every file of the manifest, that column
        read alone (a run's provenance without its weights)."""
        out = {}
        for f in self.files:
            frame = self._rows.get(f.name)
            if frame is None:
                frame = self._read(f.name, list(dict.fromkeys(["key", column])))
            out.update(zip(frame["key"], frame[column]))
        return out

    def row(self, key: str) -> dict:
        """Run ``key``'s stored columns (a new dict each call; its values shared): its
        file's rows turned into dicts at once (``.loc`` took 0.67 ms a run, this
        0.07, Intel Xeon)."""
        name = self.index()[key]
        if name not in self._records:
            frame = self.rows(name)
            self._records[name] = dict(zip(frame["key"], frame.to_dict("records")))
        return dict(self._records[name][key])

    def record(self, key: str) -> dict:
        """A run in the form of :meth:`ResultStore.record` (history at full length,
        thinned steps NaN)."""
        row = self.row(key)
        try:  # e.g. empty arrays: one line naming the run and its file
            weights = _unpack(row["weights"], row["weights_index"])
            checkpoint = (
                _unpack(row["checkpoint"], row["checkpoint_index"])
                if row["checkpoint"]
                else None
            )
        except (ValueError, TypeError, KeyError) as e:
            raise ShippedDataError(
                f"run {key} in {self.directory / self.index()[key]} is damaged (its "
                f"weights do not unpack: {e}); markovlib verify --sample 0 checks "
                "every run"
            ) from None
        return {
            "key": key,
            "spec": json.loads(row["spec"]),
            "metrics": json.loads(row["metrics"]),
            "provenance": json.loads(row["provenance"]),
            "history": history_of(row),
            "weights": weights,
            "checkpoint_step": None
            if pd.isna(row["checkpoint_step"])
            else int(row["checkpoint_step"]),
            "checkpoint": checkpoint,
        }

    def load(self, spec: RunSpec, device: str | torch.device = "cpu") -> TrainResult:
        record = self.record(spec.key)
        result = result_from_record(spec, record, device)
        result.provenance = {
            **result.provenance,
            "shipped": str(self.directory / self.index()[spec.key]),
        }
        return result

    def unlisted(self) -> list[str]:
        """Every entry of the folder that the manifest does not list (manifest.json
        aside)."""
        listed = {f.name for f in self.files} | {MANIFEST} | set(self.derived)
        folder = self.directory / "derived"
        entries = [*self.directory.iterdir()]
        if folder.is_dir() and self.derived:
            entries = [p for p in entries if p != folder] + [*folder.iterdir()]
        names = (p.relative_to(self.directory).as_posix() for p in entries)
        return sorted(n for n in names if n not in listed)


_SHIPPED: dict = {}


def shipped_data(data):
    """The :class:`ShippedData` for ``data`` (a folder, a ShippedData, 'auto': the
    default folder, None: none), read once per folder and manifest."""
    if isinstance(data, ShippedData) or data is None:
        return data
    directory = default_data_dir() if data == "auto" else Path(data)
    if directory is None:
        return None
    manifest = directory / "manifest.json"
    stamp = (
        str(directory.resolve()),
        manifest.stat().st_mtime_ns if manifest.exists() else None,
    )
    if stamp not in _SHIPPED:
        _SHIPPED[stamp] = ShippedData(directory)
    return _SHIPPED[stamp]


def source_weights(specs, shipped=None, store=None) -> dict:
    """The final weights of the runs that ``specs`` continue (init kind 'run'), by
    key: from the ``shipped`` data (a ShippedData) where it holds the run, else from
    ``store`` (a ResultStore); a run in neither is left out (its continuation is
    refused when trained)."""
    out = {}
    for key in sources_of(specs):
        if shipped is not None and key in shipped:
            out[key] = shipped.record(key)["weights"]
        elif store is not None and key in store.keys():
            out[key] = store.record(key)["weights"]
    return out
