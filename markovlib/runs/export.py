"""Export finished runs from a result store as shipped data: one new Parquet file per
group of runs not shipped yet, written through a temporary name and a rename, and the
manifest replaced atomically after each file (:mod:`markovlib.runs.shipped` reads
them)."""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from .shipped import (
    FORMAT,
    MANIFEST,
    PARTIAL,
    ShippedData,
    ShippedDataError,
    file_sha256,
    thin_history,
)
from .spec import RunSpec
from .store import ResultStore

__all__ = ["export", "write_manifest"]


def _pack(state: dict) -> tuple[bytes, str]:
    """Tensors → (raw little-endian float32 bytes, JSON index of name, shape,
    offset)."""
    parts, index, offset = [], [], 0
    for name, tensor in state.items():
        a = np.ascontiguousarray(tensor.detach().cpu().numpy(), dtype="<f4")
        parts.append(a.tobytes())
        index.append([name, list(a.shape), offset])
        offset += a.size
    return b"".join(parts), json.dumps(index)


def _row(spec: RunSpec, record: dict) -> dict:
    """A stored run as one row of a shipped file (its history thinned)."""
    thin = thin_history(record["history"], spec.train.eval_every)
    weights, weights_index = _pack(record["weights"])
    ckpt, ckpt_index = (
        _pack(record["checkpoint"]) if record["checkpoint"] is not None else (b"", "[]")
    )
    return {
        "key": spec.key,
        "spec": json.dumps(spec.as_dict(), sort_keys=True),
        "seed": int(spec.seed),
        "provenance": json.dumps(
            {
                **record["provenance"],
                "created": record["created"],
                "version": record["version"],
            },
            sort_keys=True,
        ),
        "metrics": json.dumps(record["metrics"], sort_keys=True),
        "steps": int(spec.train.steps),
        "history_step": thin["step"].astype("int32").tolist(),
        "lr": thin["lr"].tolist(),
        "train_loss": thin["train_loss"].tolist(),
        "test_loss": thin["test_loss"].tolist(),
        "weights": weights,
        "weights_index": weights_index,
        "checkpoint_step": record["checkpoint_step"],
        "checkpoint": ckpt,
        "checkpoint_index": ckpt_index,
    }


def _fsync_replace(temporary: Path, path: Path) -> None:
    """Flush ``temporary`` to disk and rename it to ``path`` (atomic on POSIX)."""
    fd = os.open(temporary, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(directory: Path, manifest: dict) -> None:
    """Write ``manifest.json`` through a temporary file and a rename: never half
    written."""
    manifest["runs"] = sum(f["runs"] for f in manifest["files"])
    manifest["bytes"] = sum(f["bytes"] for f in manifest["files"])
    temporary = directory / f".{MANIFEST}{PARTIAL}"
    with _disk_full_named(directory / MANIFEST, temporary):
        temporary.write_text(json.dumps(manifest, indent=1) + "\n")
        _fsync_replace(temporary, directory / MANIFEST)


def _leftovers(directory: Path, log) -> None:
    """Remove the temporary files of an interrupted export (``.<name>.partial``)."""
    for path in sorted(directory.glob(f".*{PARTIAL}")):
        path.unlink()
        log(f"removed {path} (left by an interrupted export)")


def _same_runs(path: Path, frame: pd.DataFrame) -> bool:
    """Whether the Parquet file at ``path`` holds exactly the rows of ``frame``."""
    try:
        old = pd.read_parquet(path)
    except Exception:  # noqa: BLE001
        return False
    if list(old.columns) != list(frame.columns) or len(old) != len(frame):
        return False
    return all(
        list(map(_plain, old[c])) == list(map(_plain, frame[c])) for c in frame.columns
    )


def _plain(value):
    """A cell as comparable Python data (arrays as lists, NaN as None)."""
    if isinstance(value, (np.ndarray, list)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _write_file(path: Path, frame: pd.DataFrame, log) -> None:
    """Write ``frame`` to ``path`` through ``.<name>.partial``; adopt a file left under
    the final name by an interrupted export if it holds exactly these rows."""
    if path.exists():
        if not _same_runs(path, frame):
            raise ShippedDataError(
                f"{path} exists, is not in the manifest and does not hold exactly the "
                "runs to export; shipped files are never rewritten: move it aside"
            )
        log(f"adopted {path} (written by an interrupted export)")
        return
    temporary = path.parent / f".{path.name}{PARTIAL}"
    with _disk_full_named(path, temporary):
        frame.to_parquet(temporary, compression="zstd", index=False)
        _fsync_replace(temporary, path)


@contextmanager
def _disk_full_named(path: Path, temporary: Path):
    """A full disk while writing ``path`` (through ``temporary``): the temporary file
    removed and one line naming the file and its folder's free space."""
    try:
        yield
    except OSError as e:
        full = e.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(e)
        if not full:
            raise
        temporary.unlink(missing_ok=True)
        free = shutil.disk_usage(path.parent).free / 2**20
        raise ShippedDataError(
            f"disk full: cannot write {path} ({free:.1f} MiB free in {path.parent}); "
            "the shipped data is as it was: free some space and re-run the export"
        ) from None


def export(
    groups: Sequence[tuple[str, Sequence[RunSpec]]],
    store: ResultStore,
    directory: str | Path,
    *,
    log=print,
) -> list[str]:
    """Ship every finished run of ``groups`` that is not shipped yet: per group, one new
    file ``<group>-<n>.parquet`` with those runs; the manifest is updated. Files are
    never rewritten, so a group finished over several sessions is several files, and
    commits only add.

    Each file is written under a temporary name and renamed, and the manifest is
    replaced atomically after each file: a killed export leaves the shipped data as it
    was or with whole files, and the next export removes its temporary files and adopts
    a file it had renamed but not listed yet."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _leftovers(directory, log)
    manifest_path = directory / MANIFEST
    manifest = (
        json.loads(manifest_path.read_text())
        if manifest_path.exists()
        else {"format": FORMAT, "files": []}
    )
    shipped = ShippedData(directory).index() if manifest["files"] else {}
    done, written = store.keys(), []
    for name, specs in groups:
        fresh = list(
            {s.key: s for s in specs if s.key in done and s.key not in shipped}.values()
        )
        if not fresh:
            continue
        n = 1 + sum(f["name"].rsplit("-", 1)[0] == name for f in manifest["files"])
        path = directory / f"{name}-{n:03d}.parquet"
        frame = pd.DataFrame([_row(s, store.record(s.key)) for s in fresh])
        _write_file(path, frame, log)
        manifest["files"].append(
            {
                "name": path.name,
                "sha256": file_sha256(path),
                "runs": len(frame),
                "bytes": path.stat().st_size,
            }
        )
        write_manifest(directory, manifest)
        shipped.update(dict.fromkeys(frame["key"], path.name))
        written.append(path.name)
        log(
            f"wrote {path} ({len(frame)} of the group's {len(specs)} runs, "
            f"{path.stat().st_size / 1e6:.2f} MB)"
        )
    if not manifest_path.exists():
        write_manifest(directory, manifest)
    return written
