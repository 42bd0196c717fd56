"""Shipped run data (``data/paper/``): immutable Parquet files of finished runs, a
manifest, and verification.

One file per group of runs, written once and never rewritten; ``manifest.json`` lists
every file with its SHA-256, number of runs and size. A row holds a run's full spec and
its key, the provenance (library and torch versions, device, CPU capability, thread
count, wall time), the metrics, the history (every test evaluation; the training loss at
every step up to the checkpoint, then at every evaluation) and the final and checkpoint
weights as raw little-endian float32 with a JSON index. Nothing is ever unpickled.

:func:`verify` proves the data without training (every run's stored weights give its
stored learnt kernel and a test loss consistent with its history; its metrics are those
of its history and chain; keys are unique and are runs of
:func:`~markovlib.runs.experiments.paper_edition` in their group's file; the folder
holds the manifest's files and nothing else), then re-trains a random sample of runs (a
member of an ensemble with its whole ensemble): bit for bit where the run was produced
on the same kind of CPU, by losses, learnt kernels and predictions on a fixed batch
otherwise.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ..train import (
    TrainResult,
    cpu_model,
    one_cycle_factor,
)
from . import experiments
from .spec import CHECKPOINT_STEP, RunSpec, spec_key, train_specs
from .store import ResultStore, _metrics, result_from_record

__all__ = [
    "ShippedData",
    "ShippedDataError",
    "VerificationError",
    "default_data_dir",
    "export",
    "verify",
    "thin_history",
    "ENV_VAR",
    "shipped_data",
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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def _row(spec: RunSpec, record: dict) -> dict:
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


def _history_of(row: dict) -> pd.DataFrame:
    """The full-length history (one row per step); steps that were thinned out have NaN
    lr and train loss."""
    steps = int(row["steps"])
    out = pd.DataFrame(
        {
            "step": np.arange(steps + 1),
            "lr": np.nan,
            "train_loss": np.nan,
            "test_loss": np.nan,
        }
    )
    at = np.asarray(row["history_step"], dtype=np.int64)
    for column in ("lr", "train_loss", "test_loss"):
        out.loc[at, column] = np.asarray(row[column], dtype=np.float64)
    return out


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
        try:
            manifest = json.loads(path.read_text())
            if manifest.get("format") != FORMAT:
                raise ValueError(
                    f"format {manifest.get('format')!r}, expected {FORMAT}"
                )
            self.files = _files_of(self.directory, manifest)
        except FileNotFoundError:
            raise ShippedDataError(f"{path} is missing") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ShippedDataError(
                f"{path} is not a markovlib manifest ({e})"
            ) from None
        self._checked: set[str] = set()
        self._index: dict[str, str] | None = None
        self._rows: dict[str, pd.DataFrame] = {}

    def check(self, name: str) -> Path:
        """The path of file ``name`` after checking its size and SHA-256 against the
        manifest."""
        entry = next((f for f in self.files if f.name == name), None)
        path = self.directory / name
        if entry is None:
            raise ShippedDataError(
                f"{path} is not listed in {self.directory / MANIFEST}"
            )
        if name not in self._checked:
            if not path.is_file():
                raise ShippedDataError(f"{path} is listed in the manifest but missing")
            if path.stat().st_size != entry.bytes or _sha256(path) != entry.sha256:
                raise ShippedDataError(
                    f"{path} is damaged: its SHA-256 differs from the manifest's; "
                    "restore it with "
                    f"`git checkout -- {path}`"
                )
            self._checked.add(name)
        return path

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

    def row(self, key: str) -> dict:
        return self.rows(self.index()[key]).loc[key].to_dict()

    def record(self, key: str) -> dict:
        """A run in the form of :meth:`ResultStore.record` (history at full length,
        thinned steps NaN)."""
        row = self.row(key)
        return {
            "key": key,
            "spec": json.loads(row["spec"]),
            "metrics": json.loads(row["metrics"]),
            "provenance": json.loads(row["provenance"]),
            "history": _history_of(row),
            "weights": _unpack(row["weights"], row["weights_index"]),
            "checkpoint_step": None
            if pd.isna(row["checkpoint_step"])
            else int(row["checkpoint_step"]),
            "checkpoint": _unpack(row["checkpoint"], row["checkpoint_index"])
            if row["checkpoint"]
            else None,
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
        listed = {f.name for f in self.files} | {MANIFEST}
        return sorted(p.name for p in self.directory.iterdir() if p.name not in listed)


# ---------------------------------------------------------------------- export
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


def _write_manifest(directory: Path, manifest: dict) -> None:
    """Write ``manifest.json`` through a temporary file and a rename: never half
    written."""
    manifest["runs"] = sum(f["runs"] for f in manifest["files"])
    manifest["bytes"] = sum(f["bytes"] for f in manifest["files"])
    temporary = directory / f".{MANIFEST}{PARTIAL}"
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
    frame.to_parquet(temporary, compression="zstd", index=False)
    _fsync_replace(temporary, path)


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
                "sha256": _sha256(path),
                "runs": len(frame),
                "bytes": path.stat().st_size,
            }
        )
        _write_manifest(directory, manifest)
        shipped.update(dict.fromkeys(frame["key"], path.name))
        written.append(path.name)
        log(
            f"wrote {path} ({len(frame)} of the group's {len(specs)} runs, "
            f"{path.stat().st_size / 1e6:.2f} MB)"
        )
    if not manifest_path.exists():
        _write_manifest(directory, manifest)
    return written


# ---------------------------------------------------------------- verification
class VerificationError(AssertionError):
    """A shipped run that the current library does not reproduce (the message names run
    and step or file)."""


# Checks without training (every run, every time):
# |learnt kernel of the stored weights - stored learnt_kernel|: the same computation
# on the same weights and paths; measured 0 on the CPU kind that produced a run and at
# most 1.1e-8 on another (AMD EPYC AVX2/AVX512 runs checked on an Intel AVX512 CPU).
KERNEL_TOLERANCE = 1e-5
# |test loss of the stored weights on fresh batches - last test loss of the history|:
# both are means over eval_batches x batch_size independent paths, so their difference
# has standard deviation sqrt(2) x the standard error of one such mean (estimated from
# the fresh paths' per-path losses); allowed: LOSS_SIGMAS of those, at least LOSS_FLOOR
# (the shipped runs: |z| at most 2.9 over 255 runs, standard deviation of z 0.96).
LOSS_SIGMAS = 6.0
LOSS_FLOOR = 1e-4
# a stored test loss may lie below the entropy rate by sampling noise only: by at most
# max(LOSS_SIGMAS standard errors, HISTORY_MARGIN) nats (the shipped runs: 0.014)
HISTORY_MARGIN = 0.02
# stored entropies and excess against the chain's exact values (float rounding only)
METRIC_TOLERANCE = 1e-9
# Re-training where bit identity cannot be expected (other CPU kind, GPU): |Δ| of
# every stored train and test loss (nats) up to the checkpoint (--quick) or the end,
# and of the learnt kernel and the predictions on a fixed batch of the checkpoint
# (--quick) or final weights. Measured on another CPU capability (AMD EPYC AVX2 and
# AVX512 runs re-trained on Intel AVX512, Intel runs re-trained with AVX2 kernels),
# 50 steps and full 500- and 1000-step re-trains: at most 1.2e-7 (losses), 5e-8
# (kernels), 4.5e-7 (predictions). A converged run of another seed predicts 0.007 to
# 0.05 apart; two specs that share a seed differ more: their train losses over steps
# 1-50 by at least 5.7e-5 (fp16 against float32 or against fp16 with a 2^16 loss
# scale, 32 seeds each), 3.1e-3 (length 1024 against 512), 4.4e-2 (tied against
# untied). The tolerance sits between: 22 times the largest drift, a fifth of the
# smallest difference of settings. A run whose drift a saddle amplifies can exceed it
# over a full re-train: --exact-only.
TOLERANCE = 1e-5
# offsets from a run's test-data seed of the streams verify draws from (TrainResult
# uses +1 for test_sequence and +2 for learnt_kernel)
FRESH_STREAM, FIXED_STREAM = 3, 4
HALF = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp16-scaled": torch.float16}


def _generator(result: TrainResult, offset: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(result.test_seed + offset)
    return g


@torch.no_grad()
def _fresh_loss(result: TrainResult) -> tuple[float, float]:
    """Test loss of the run's weights on fresh batches of its evaluation's size (in its
    precision), and the standard error of that mean."""
    s, g = result.train_config, _generator(result, FRESH_STREAM)
    dtype = HALF.get(s.precision)
    per_path = []
    for _ in range(s.eval_batches):
        x = result.chain.sample(s.batch_size, s.seq_len + 1, generator=g, start=s.start)
        with torch.autocast(
            "cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None
        ):
            logits = result.model(x[:, :-1])
        nll = F.cross_entropy(
            logits.float().transpose(1, 2), x[:, 1:], reduction="none"
        )
        per_path.append(nll.double().mean(1))
    per = torch.cat(per_path)
    se = per.std().item() / math.sqrt(len(per)) if len(per) > 1 else math.inf
    return per.mean().item(), se


@torch.no_grad()
def _outputs(spec: RunSpec, weights: dict) -> tuple[np.ndarray, torch.Tensor]:
    """The learnt kernel of ``weights`` and their predictions on the run's fixed batch
    (paths of the run's own stream)."""
    record = {
        "weights": weights,
        "provenance": {},
        "metrics": {},
        "history": None,
        "checkpoint_step": None,
        "checkpoint": None,
    }
    result = result_from_record(spec, record)
    s = spec.train
    x = result.chain.sample(
        s.batch_size,
        s.seq_len,
        generator=_generator(result, FIXED_STREAM),
        start=s.start,
    )
    return result.learnt_kernel(), result.probabilities(x)


def _expected_steps(train_config) -> tuple[np.ndarray, np.ndarray]:
    """(the steps a shipped history holds, the steps with a test loss)."""
    steps = np.arange(train_config.steps + 1)
    tested = (steps % train_config.eval_every == 0) | (steps == train_config.steps)
    return steps[tested | (steps <= CHECKPOINT_STEP)], steps[tested]


def _lr_at(train_config, step: int) -> float:
    """The learning rate of ``step`` (>= 1) as the training loop records it."""
    s = train_config
    factor = one_cycle_factor(step - 1, s.steps) if s.schedule == "one-cycle" else 1.0
    return s.lr * factor


def _check_history(where: str, spec: RunSpec, row: dict) -> None:
    """The stored history has the steps, evaluations and learning rates of its
    spec."""
    steps = np.asarray(row["history_step"], dtype=np.int64)
    lr, train_loss, test_loss = (
        np.asarray(row[c], dtype=np.float64) for c in ("lr", "train_loss", "test_loss")
    )
    kept, tested = _expected_steps(spec.train)
    if not np.array_equal(steps, kept):
        raise VerificationError(
            f"{where}: its history holds steps {_span(steps)}; its spec gives "
            f"{_span(kept)}"
        )
    if not np.array_equal(steps[~np.isnan(test_loss)], tested):
        raise VerificationError(
            f"{where}: its history has test losses at other steps than every "
            f"{spec.train.eval_every} and the last"
        )
    if not (np.isnan(train_loss[0]) and np.isfinite(train_loss[1:]).all()):
        raise VerificationError(f"{where}: its history lacks training losses")
    for step, value in zip(steps[1:], lr[1:]):
        if value != _lr_at(spec.train, int(step)):
            raise VerificationError(
                f"{where}: learning rate {value!r} at step {step}; its spec's schedule "
                f"gives {_lr_at(spec.train, int(step))!r}"
            )


def _span(steps: np.ndarray) -> str:
    return f"{len(steps)} steps {steps[:1].tolist()}..{steps[-1:].tolist()}"


def _check_metrics(where: str, chain, record: dict) -> None:
    """The stored metrics are those of the stored history and of the chain."""
    m, history = record["metrics"], record["history"]
    tests = history.dropna(subset=["test_loss"])
    last = float(tests["test_loss"].iloc[-1])
    if m.get("final_test_loss") != last:
        raise VerificationError(
            f"{where}: metrics final_test_loss {m.get('final_test_loss')!r} is not the "
            f"last test loss of its history ({last!r})"
        )
    exact = {
        "entropy_rate": chain.entropy_rate(),
        "unigram_entropy": chain.unigram_entropy(),
        "excess": last - chain.entropy_rate(),
    }
    for name, value in exact.items():
        if not abs(m.get(name, math.nan) - value) <= METRIC_TOLERANCE:
            raise VerificationError(
                f"{where}: metrics {name} {m.get(name)!r}; its chain and history give "
                f"{value!r}"
            )
    close = tests[tests["test_loss"] <= m["entropy_rate"] + 0.005]
    escape = None if close.empty else int(close["step"].iloc[0])
    if m.get("escape_step", "missing") != escape:
        raise VerificationError(
            f"{where}: metrics escape_step {m.get('escape_step')!r}; its history gives "
            f"{escape!r}"
        )
    seconds = record["provenance"].get("seconds", m.get("seconds"))
    if m.get("seconds") != seconds or not seconds > 0:
        raise VerificationError(
            f"{where}: metrics seconds {m.get('seconds')!r}, provenance {seconds!r}"
        )


def _check_kernel(where: str, result: TrainResult, stored) -> float:
    """The learnt kernel of the stored weights is the stored one; returns |Δ|."""
    kernel = result.learnt_kernel()
    stored = np.asarray(stored, dtype=np.float64)
    gap = (
        float(np.abs(kernel - stored).max())
        if stored.shape == kernel.shape
        else math.inf
    )
    if not gap <= KERNEL_TOLERANCE:
        raise VerificationError(
            f"{where}: the learnt kernel of its stored weights differs from its stored "
            f"learnt_kernel by {gap:.3g} > {KERNEL_TOLERANCE:g}"
        )
    return gap


def _check_loss(where: str, result: TrainResult, record: dict, spec: RunSpec) -> float:
    """The stored weights give a test loss consistent with the stored history; returns
    |Δ| as a share of the tolerance."""
    loss, se = _fresh_loss(result)
    final = record["metrics"]["final_test_loss"]
    tolerance = max(LOSS_SIGMAS * math.sqrt(2) * se, LOSS_FLOOR)
    if not abs(loss - final) <= tolerance:
        raise VerificationError(
            f"{where}: its stored weights give a test loss of {loss:.4f} on fresh "
            f"batches, its history ends at {final:.4f} (|Δ| {abs(loss - final):.4f} > "
            f"{tolerance:.4f} nats, {LOSS_SIGMAS:g} standard errors)"
        )
    if spec.train.start == "stationary":
        floor = result.chain.entropy_rate() - max(LOSS_SIGMAS * se, HISTORY_MARGIN)
        tests = record["history"].dropna(subset=["test_loss"])
        low = tests[tests["test_loss"] < floor]
        if len(low):
            raise VerificationError(
                f"{where}: test loss {low['test_loss'].iloc[0]:.4f} at step "
                f"{int(low['step'].iloc[0])} is below the entropy rate "
                f"{result.chain.entropy_rate():.4f} by more than sampling noise"
            )
    return abs(loss - final) / tolerance


def _consistent(data: ShippedData, key: str) -> tuple[float, float]:
    """Check run ``key`` against itself without training: history, metrics, and what
    its stored weights compute; returns (kernel |Δ|, loss |Δ| / tolerance)."""
    where = f"run {key} in {data.index()[key]}"
    row = data.row(key)
    record = data.record(key)
    spec = RunSpec.from_dict(record["spec"])
    _check_history(where, spec, row)
    try:
        result = result_from_record(spec, record)
        if record["checkpoint"] is not None:
            result_from_record(spec, {**record, "weights": record["checkpoint"]})
    except (RuntimeError, ValueError) as e:
        raise VerificationError(
            f"{where}: its weights do not fit the model of its spec "
            f"({' '.join(str(e).split())[:200]})"
        ) from None
    if record["checkpoint_step"] != min(CHECKPOINT_STEP, spec.train.steps):
        raise VerificationError(
            f"{where}: checkpoint at step {record['checkpoint_step']}, expected "
            f"{min(CHECKPOINT_STEP, spec.train.steps)}"
        )
    _check_metrics(where, result.chain, record)
    gap = _check_kernel(where, result, record["metrics"]["learnt_kernel"])
    return gap, _check_loss(where, result, record, spec)


def _check_ensembles(data: ShippedData) -> int:
    """Every run's results are its own: a run trained in an ensemble lists its own key
    among ``ensemble_members`` (results moved to another run's row name the wrong
    ensemble), every member is shipped, has the same architecture and training
    settings, and lists the same members. Returns the number of ensembles."""
    prov, specs = {}, {}
    for f in data.files:
        frame = data._read(f.name, ["key", "spec", "provenance"])
        for key, spec, text in zip(frame["key"], frame["spec"], frame["provenance"]):
            prov[key], specs[key] = (
                json.loads(text),
                RunSpec.from_dict(json.loads(spec)),
            )
    groups = set()
    for key, p in prov.items():
        where = f"run {key} in {data.index()[key]}"
        members = list(p.get("ensemble_members") or [key])
        if key not in members or len(members) != int(p.get("ensemble_size", 1)):
            raise VerificationError(
                f"{where}: provenance ensemble_members ({len(members)} keys, ensemble "
                f"size {p.get('ensemble_size')}) does not list the run: its results "
                "are another run's"
            )
        for other in members:
            if other not in prov or specs[other].group != specs[key].group:
                raise VerificationError(
                    f"{where}: provenance ensemble_members names run {other}, which "
                    "is not shipped or has other settings"
                )
            if list(prov[other].get("ensemble_members") or [other]) != members:
                raise VerificationError(
                    f"{where}: provenance ensemble_members disagrees with that of its "
                    f"member {other}"
                )
        groups.add(tuple(members))
    return len(groups)


def _check_runs(data: ShippedData, log) -> None:
    """Every run consistent without training (:func:`_check_ensembles`,
    :func:`_consistent`); one line of summary."""
    t0, cpu0, kernel, loss = time.perf_counter(), time.process_time(), 0.0, 0.0
    trainings = _check_ensembles(data)
    for key in sorted(data.index()):
        k, share = _consistent(data, key)
        kernel, loss = max(kernel, k), max(loss, share)
    log(
        f"every run's results are its own ({trainings} trainings: each run listed by "
        "its ensemble, or trained alone)"
    )
    log(
        f"every run checked without training in {time.perf_counter() - t0:.0f} s "
        f"({time.process_time() - cpu0:.0f} s of CPU): its stored weights give its "
        f"learnt kernel (max |Δ| {kernel:.2g} <= {KERNEL_TOLERANCE:g}) and a test loss "
        f"consistent with its history (max |Δ| {loss:.2f} of the tolerance, "
        f"{LOSS_SIGMAS:g} standard errors); its metrics are those of its history and "
        "chain"
    )


def _check_files(data: ShippedData) -> dict[str, str]:
    """Every file hashed, keys unique, specs hashing to their keys, nothing unlisted;
    returns the index."""
    index = data.index()  # checks every file's hash and run count, keys unique
    for f in data.files:
        frame = data.rows(f.name)
        for key, text, seed, steps in zip(
            frame["key"], frame["spec"], frame["seed"], frame["steps"]
        ):
            try:
                d = json.loads(text)
                computed = RunSpec.from_dict(d).key
            except (ValueError, KeyError, TypeError) as e:
                raise VerificationError(
                    f"run {key} in {f.name}: its spec is not readable ({e})"
                ) from None
            if spec_key(d) != key or computed != key:
                raise VerificationError(
                    f"run {key} in {f.name}: the current library computes another key "
                    f"for its spec ({computed})"
                )
            if seed != d["seed"] or steps != d["train"]["steps"]:
                raise VerificationError(
                    f"run {key} in {f.name}: its seed or steps column differs from its "
                    "spec"
                )
    extra = data.unlisted()
    if extra:
        why = (
            " (a temporary file of an interrupted export: re-run `markovlib edition "
            "export`)"
            if extra[0].endswith(PARTIAL)
            else ""
        )
        more = f"; {len(extra) - 1} more unlisted" if len(extra) > 1 else ""
        raise ShippedDataError(
            f"{data.directory / extra[0]} is not listed in the manifest{why}{more}"
        )
    if not index:
        raise VerificationError(
            f"{data.directory / MANIFEST} lists no run: nothing to verify"
        )
    return index


def _check_edition(
    index: dict[str, str], groups, complete: bool, log, what: str
) -> None:
    """Every shipped run is a run of ``groups`` in a file of its group; incomplete
    groups are reported (an error with ``complete``)."""
    member: dict[str, set[str]] = {}
    for name, specs in groups:
        for spec in specs:
            member.setdefault(spec.key, set()).add(name)
    for key, file in sorted(index.items(), key=lambda kv: kv[1]):
        named = FILE_NAME.fullmatch(file)
        if named is None:
            raise VerificationError(f"{file} is not named <group>-<n>.parquet")
        if key not in member:
            raise VerificationError(f"run {key} in {file} is not a run of {what}")
        if named["group"] not in member[key]:
            raise VerificationError(
                f"run {key} is in {file}, a file of group {named['group']}; {what} "
                f"has it in {' and '.join(sorted(member[key]))}"
            )
    missing = [
        (name, sum(k not in index for k in keys), len(keys))
        for name, keys in ((n, {s.key for s in specs}) for n, specs in groups)
    ]
    incomplete = [m for m in missing if m[1]]
    log(
        f"edition: {len(index)} of the {len(member)} runs of {what} shipped, "
        f"{len(missing) - len(incomplete)} of {len(missing)} groups complete"
    )
    for name, n, total in incomplete:
        log(f"  incomplete: {name}: {n} of {total} runs missing")
    if complete and incomplete:
        raise VerificationError(
            f"the edition is incomplete: {len(member) - len(index)} of the "
            f"{len(member)} runs of {what} are not shipped ({len(incomplete)} groups, "
            f"first {incomplete[0][0]}: {incomplete[0][1]} of {incomplete[0][2]})"
        )


def _environment(prov: dict) -> tuple[bool, str]:
    """Whether bit identity is expected here for a run with provenance ``prov`` (its
    whole ensemble re-trained with its thread count), and why (not)."""
    if not str(prov.get("device", "cpu")).startswith("cpu"):
        return False, f"produced on {prov.get('device_name') or prov['device']}"
    here = torch.backends.cpu.get_cpu_capability()
    if prov.get("cpu_capability") != here:
        return (
            False,
            f"produced with CPU capability {prov.get('cpu_capability')}, "
            f"this CPU has {here}",
        )
    if (
        "cpu_model" in prov and prov["cpu_model"] != cpu_model()
    ):  # runs of the first session lack the field
        return False, f"produced on {prov['cpu_model']}, this is {cpu_model()}"
    if prov.get("compile"):
        return False, "produced through torch.compile"
    return True, f"same CPU capability ({here}), {prov.get('threads')} thread(s)"


def _compare(
    key: str, stored: pd.DataFrame, fresh: pd.DataFrame, exact: bool, upto: int | None
) -> None:
    """Every stored history value (up to ``upto``) against the re-trained one: equal,
    or losses within :data:`TOLERANCE`."""
    rows = stored.dropna(subset=["lr", "train_loss", "test_loss"], how="all")
    if upto is not None:
        rows = rows[rows["step"] <= upto]
    fresh = fresh.set_index("step")
    for _, row in rows.iterrows():
        step = int(row["step"])
        for column in ("lr", "train_loss", "test_loss"):
            a, b = row[column], fresh.at[step, column]
            if pd.isna(a):
                continue
            if exact and not (np.float64(a) == np.float64(b)):
                raise VerificationError(
                    f"run {key}: {column} differs first at step {step}: shipped {a!r}, "
                    f"re-trained {b!r}"
                )
            if not exact and column != "lr" and not abs(a - b) <= TOLERANCE:
                raise VerificationError(
                    f"run {key}: {column.replace('_', ' ')} at step {step} differs by "
                    f"{abs(a - b):.4g} > {TOLERANCE:g} nats"
                )


def _compare_weights(key: str, what: str, stored: dict, fresh: dict) -> None:
    """Bit identity of every stored tensor."""
    for name, tensor in stored.items():
        other = fresh[name].detach().cpu().float()
        if not torch.equal(tensor, other):
            raise VerificationError(
                f"run {key}: {what} weights {name} differ (max |Δ| "
                f"{(tensor - other).abs().max().item():.3g})"
            )


def _compare_outputs(
    key: str, spec: RunSpec, what: str, stored: dict, fresh: dict
) -> float:
    """Learnt kernels and predictions on the run's fixed batch of the stored and the
    re-trained weights within :data:`TOLERANCE`; returns the larger |Δ|."""
    kernel, probs = _outputs(spec, stored)
    fresh_kernel, fresh_probs = _outputs(spec, {k: v.float() for k, v in fresh.items()})
    gaps = {
        "learnt kernel": float(np.abs(kernel - fresh_kernel).max()),
        "predictions on a fixed batch": float((probs - fresh_probs).abs().max()),
    }
    for name, gap in gaps.items():
        if not gap <= TOLERANCE:
            raise VerificationError(
                f"run {key}: the {name} of its {what} weights differ from the "
                f"re-trained ones by {gap:.3g} > {TOLERANCE:g}"
            )
    return max(gaps.values())


def _compare_metrics(key: str, stored: dict, fresh: TrainResult) -> None:
    """Bit identity of every stored metric but the wall time."""
    again = json.loads(json.dumps(_metrics(fresh)))
    for name, value in stored.items():
        if name != "seconds" and again.get(name) != value:
            raise VerificationError(
                f"run {key}: metrics {name} differs: shipped {value!r}, re-trained "
                f"{again.get(name)!r}"
            )


def _judge(key: str, record: dict, fresh: TrainResult, quick: bool, exact: bool) -> str:
    """Compare one re-trained run with its stored record; how it was judged."""
    spec = RunSpec.from_dict(record["spec"])
    upto = record["checkpoint_step"] if quick else None
    _compare(key, record["history"], fresh.history, exact, upto)
    step = record["checkpoint_step"]
    final = {k: v.detach() for k, v in fresh.model.state_dict().items()}
    if exact:
        _compare_weights(key, f"step-{step}", record["checkpoint"], fresh.checkpoint)
        if not quick:
            _compare_weights(key, "final", record["weights"], final)
            _compare_metrics(key, record["metrics"], fresh)
        return "bit for bit"
    what, weights = (
        (f"step-{step}", (record["checkpoint"], fresh.checkpoint))
        if quick
        else ("final", (record["weights"], final))
    )
    gap = _compare_outputs(key, spec, what, *weights)
    return f"within {TOLERANCE:g} (losses, kernel, predictions; max |Δ| {gap:.2g})"


def _ensemble(data: ShippedData, key: str) -> list[str]:
    """The keys of the ensemble that trained run ``key`` (``[key]`` for a single run),
    in order, every one shipped."""
    prov = json.loads(data.row(key)["provenance"])
    members = list(prov.get("ensemble_members") or [key])
    if key not in members or len(members) != int(prov.get("ensemble_size", 1)):
        raise VerificationError(
            f"run {key}: its provenance names an ensemble of "
            f"{prov.get('ensemble_size')} that does not list it"
        )
    for other in members:
        if other not in data:
            raise VerificationError(
                f"run {key} was trained in an ensemble with run {other}, which is not "
                "shipped: the ensemble cannot be re-trained"
            )
        theirs = json.loads(data.row(other)["provenance"])
        if list(theirs.get("ensemble_members") or [other]) != members:
            raise VerificationError(
                f"runs {key} and {other} disagree on the members of their ensemble"
            )
    return members


def _retrain(specs: list[RunSpec], upto: int | None) -> list[TrainResult]:
    """Re-train ``specs`` as they were trained: one run, or one ensemble in order."""
    first = specs[0]
    if any(s.group != first.group for s in specs):
        raise VerificationError(
            f"the ensemble of run {first.key} mixes architectures or training settings"
        )
    return train_specs(specs, device="cpu", stop_after=upto)


def _reproduce(data: ShippedData, members: list[str], quick: bool, log) -> int:
    """Re-train one run or one whole ensemble and judge every member; returns how many
    runs were judged."""
    records = [data.record(k) for k in members]
    specs = [RunSpec.from_dict(r["spec"]) for r in records]
    prov = records[0]["provenance"]
    exact, why = _environment(prov)
    threads = torch.get_num_threads()
    torch.set_num_threads(int(prov.get("threads", threads)))
    upto = records[0]["checkpoint_step"] if quick else None
    t0 = time.perf_counter()
    try:
        fresh = _retrain(specs, upto)
    finally:
        torch.set_num_threads(threads)
    seconds = time.perf_counter() - t0
    together = f" (ensemble of {len(members)})" if len(members) > 1 else ""
    for key, record, spec, result in zip(members, records, specs, fresh):
        how = _judge(key, record, result, quick, exact)
        log(
            f"  {key} {spec.chain} seed {spec.seed}: reproduced {how}"
            f"{'' if exact else f'; {why}'}{together} in {seconds:.0f} s"
        )
    return len(members)


def _candidates(
    data: ShippedData, max_seconds: float | None, exact_only: bool
) -> list[str]:
    """The shipped runs a sample is drawn from."""
    out = []
    for key in sorted(data.index()):
        prov = json.loads(data.row(key)["provenance"])
        if max_seconds is not None and not prov.get("seconds", math.inf) <= max_seconds:
            continue
        if exact_only and not _environment(prov)[0]:
            continue
        out.append(key)
    return out


def verify(
    directory: str | Path,
    *,
    sample: int = 2,
    seed: int | None = None,
    quick: bool = False,
    max_seconds: float | None = None,
    exact_only: bool = False,
    complete: bool = False,
    edition: Sequence[tuple[str, Sequence[RunSpec]]] | None = None,
    log=print,
) -> int:
    """Prove the shipped data without training, then re-train ``sample`` random runs
    and compare.

    Without training: every file's hash, the spec key of every run, keys unique, no
    unlisted file, every run a run of ``edition`` (default:
    :func:`~markovlib.runs.experiments.paper_edition`) in its group's file (missing runs
    reported; an error with ``complete``), and every run consistent with itself (its
    stored weights give its learnt kernel and a test loss consistent with its history;
    its metrics are those of its history and chain).

    ``quick``: re-train only to the checkpoint step and compare the history up to
    there and the checkpoint weights. ``max_seconds``: draw only among runs whose
    recorded training time is below it. ``exact_only``: draw only among runs this
    machine can reproduce bit for bit (same CPU capability and model); a run that sits
    at a saddle can escape a few steps apart on another CPU, so a full re-train there
    may differ by more than the tolerance although nothing is wrong. A member of an
    ensemble is re-trained with its whole ensemble, and every member is compared.
    ``sample=0`` re-trains nothing; a filter that leaves no run to re-train is an
    error. Returns the number of runs re-trained; raises :class:`ShippedDataError` or
    :class:`VerificationError`.
    """
    data = ShippedData(directory)
    index = _check_files(data)
    log(
        f"manifest: {len(data.files)} files, {len(index)} runs, every SHA-256 and "
        "spec key checked, keys unique, no unlisted file"
    )
    if edition is None:
        edition, what = experiments.paper_edition(), "paper_edition()"
    else:
        what = "the edition"
    _check_edition(index, edition, complete, log, what)
    _check_runs(data, log)
    if sample == 0:
        log("no run re-trained (--sample 0)")
        return 0
    candidates = _candidates(data, max_seconds, exact_only)
    if not candidates:
        raise VerificationError(_nothing_left(max_seconds, exact_only))
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    chosen = random.Random(seed).sample(candidates, min(sample, len(candidates)))
    units: list[list[str]] = []
    for key in chosen:
        if not any(key in unit for unit in units):
            units.append(_ensemble(data, key))
    log(
        f"re-training {len(chosen)} of {len(candidates)} "
        f"runs{' to their checkpoint' if quick else ''} in {len(units)} training(s) "
        f"(sample seed {seed}; repeat with --seed {seed})"
    )
    return sum(_reproduce(data, unit, quick, log) for unit in units)


def _nothing_left(max_seconds: float | None, exact_only: bool) -> str:
    """The one line of a filter that leaves no run to re-train."""
    filters = []
    if max_seconds is not None:
        filters.append(f"trained in at most {max_seconds:g} s")
    if exact_only:
        filters.append(
            "produced on a CPU like this one "
            f"({torch.backends.cpu.get_cpu_capability()}, {cpu_model()})"
        )
    return (
        f"nothing to re-train: no shipped run was {' and '.join(filters)} "
        "(--sample 0 checks the data without re-training)"
    )
