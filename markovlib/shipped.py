"""Shipped run data (``data/paper/``): immutable Parquet files of finished runs, a
manifest, and verification.

One file per group of runs, written once and never rewritten; ``manifest.json`` lists
every file with its SHA-256, number of runs and size. A row holds a run's full spec and
its key, the provenance (library and torch versions, device, CPU capability, thread
count, wall time), the metrics, the history (every test evaluation; the training loss at
every step up to the checkpoint, then at every evaluation) and the final and checkpoint
weights as raw little-endian float32 with a JSON index. Nothing is ever unpickled.

:func:`verify` checks the manifest, re-hashes every spec with the current library and
re-trains a random sample of runs: bit-identical histories and weights where the run was
produced on the same kind of CPU (capability and thread count), within a stated
tolerance otherwise.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .sweep import CHECKPOINT_STEP, ResultStore, RunSpec, result_from_record, spec_key
from .train import TrainResult, cpu_model, train

__all__ = [
    "ShippedData",
    "ShippedDataError",
    "default_data_dir",
    "export",
    "verify",
    "thin_history",
    "ENV_VAR",
]

ENV_VAR = "MARKOVLIB_DATA"
MANIFEST = "manifest.json"
FORMAT = 1
# nats: |Δ test loss| allowed where bit identity cannot be expected
# (other CPU kind, GPU)
TOLERANCE = 0.02


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
            self.files = [_File(**f) for f in manifest["files"]]
        except FileNotFoundError:
            raise ShippedDataError(f"{path} is missing") from None
        except (ValueError, KeyError, TypeError) as e:
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
            frame = pd.read_parquet(path, columns=columns)
        except Exception as e:  # noqa: BLE001
            # any reader error means the file is not ours
            raise ShippedDataError(
                f"{path} is not a readable markovlib data file "
                f"({type(e).__name__}: {e})"
            ) from None
        return frame

    def index(self) -> dict[str, str]:
        """key → file name, over every file of the manifest."""
        if self._index is None:
            index = {}
            for f in self.files:
                keys = self._read(f.name, ["key"])["key"].tolist()
                if len(keys) != f.runs:
                    raise ShippedDataError(
                        f"{self.directory / f.name} holds {len(keys)} runs; the "
                        f"manifest says {f.runs}"
                    )
                index.update(dict.fromkeys(keys, f.name))
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
    commits only add."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
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
        if path.exists():
            raise ShippedDataError(
                f"{path} exists already; shipped files are never rewritten"
            )
        frame = pd.DataFrame([_row(s, store.record(s.key)) for s in fresh])
        frame.to_parquet(path, compression="zstd", index=False)
        manifest["files"].append(
            {
                "name": path.name,
                "sha256": _sha256(path),
                "runs": len(frame),
                "bytes": path.stat().st_size,
            }
        )
        shipped.update(dict.fromkeys(frame["key"], path.name))
        written.append(path.name)
        log(
            f"wrote {path} ({len(frame)} of the group's {len(specs)} runs, "
            f"{path.stat().st_size / 1e6:.2f} MB)"
        )
    manifest["runs"] = sum(f["runs"] for f in manifest["files"])
    manifest["bytes"] = sum(f["bytes"] for f in manifest["files"])
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return written


# ---------------------------------------------------------------- verification
class VerificationError(AssertionError):
    """A shipped run that the current library does not reproduce (the message names run
    and step or file)."""


def _environment(prov: dict) -> tuple[bool, str]:
    """Whether bit identity is expected here for a run with provenance ``prov``, and why
    (not)."""
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
    if int(prov.get("ensemble_size", 1)) != 1:
        return False, "produced in an ensemble"
    return True, f"same CPU capability ({here}), {prov.get('threads')} thread(s)"


def _compare(
    key: str, stored: pd.DataFrame, fresh: pd.DataFrame, exact: bool, upto: int | None
) -> None:
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
            if not exact and column == "test_loss" and abs(a - b) > TOLERANCE:
                raise VerificationError(
                    f"run {key}: test loss at step {step} differs by "
                    f"{abs(a - b):.4f} > "
                    f"{TOLERANCE} nats"
                )


def _compare_weights(
    key: str, what: str, stored: dict, fresh: dict, exact: bool
) -> float:
    worst = 0.0
    for name, tensor in stored.items():
        other = fresh[name].detach().cpu().float()
        if exact and not torch.equal(tensor, other):
            raise VerificationError(
                f"run {key}: {what} weights {name} differ (max |Δ| "
                f"{(tensor - other).abs().max().item():.3g})"
            )
        worst = max(worst, (tensor - other).abs().max().item())
    return worst


def verify(
    directory: str | Path,
    *,
    sample: int = 2,
    seed: int | None = None,
    quick: bool = False,
    max_seconds: float | None = None,
    exact_only: bool = False,
    log=print,
) -> int:
    """Check the manifest and every spec hash, then re-train ``sample`` random runs and
    compare.

    ``quick``: re-train each run only to its checkpoint step and compare the history up
    to there and the checkpoint weights. ``max_seconds``: draw only among runs whose
    recorded training time is below it. ``exact_only``: draw only among runs this
    machine can reproduce bit for bit (same CPU capability and model, one run at a
    time); a run that sits at a saddle can escape a few steps apart on another CPU, so a
    full re-train there may differ by more than the tolerance although nothing is wrong.
    Returns the number of runs re-trained; raises :class:`ShippedDataError` or
    :class:`VerificationError`.
    """
    data = ShippedData(directory)
    index = data.index()  # checks every file's hash and run count
    for f in data.files:
        frame = data.rows(f.name)
        for key, spec in zip(frame["key"], frame["spec"]):
            d = json.loads(spec)
            if spec_key(d) != key or RunSpec.from_dict(d).key != key:
                raise VerificationError(
                    f"run {key} in {f.name}: the current library computes "
                    "another key for its "
                    f"spec ({RunSpec.from_dict(d).key})"
                )
    unlisted = sorted(
        {p.name for p in data.directory.glob("*.parquet")}
        - {f.name for f in data.files}
    )
    if unlisted:
        raise ShippedDataError(
            f"{data.directory / unlisted[0]} is not listed in the manifest"
        )
    log(
        f"manifest: {len(data.files)} files, {len(index)} runs, every SHA-256 and "
        "spec key checked"
    )
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    candidates = sorted(index)
    if max_seconds is not None:
        candidates = [
            k
            for k in candidates
            if json.loads(data.row(k)["provenance"]).get("seconds", math.inf)
            <= max_seconds
        ]
    if exact_only:
        candidates = [
            k
            for k in candidates
            if _environment(json.loads(data.row(k)["provenance"]))[0]
        ]
        if not candidates:
            log(
                "no shipped run was produced on a CPU like this one "
                f"({torch.backends.cpu.get_cpu_capability()}, "
                f"{cpu_model()})"
                f"{' within the time limit' if max_seconds is not None else ''}"
                ": none re-trained"
            )
    chosen = random.Random(seed).sample(candidates, min(sample, len(candidates)))
    log(
        f"re-training {len(chosen)} of {len(candidates)} "
        f"runs{' to their checkpoint' if quick else ''} "
        f"(sample seed {seed}; repeat with --seed {seed})"
    )
    threads = torch.get_num_threads()
    try:
        for key in chosen:
            record, spec = (
                data.record(key),
                RunSpec.from_dict(json.loads(data.row(key)["spec"])),
            )
            prov = record["provenance"]
            exact, why = _environment(prov)
            torch.set_num_threads(int(prov.get("threads", threads)))
            upto = record["checkpoint_step"] if quick else None
            t0 = time.perf_counter()
            from .sweep import make_chain

            fresh = train(
                make_chain(spec.chain),
                spec.config,
                spec.train,
                seed=spec.seed,
                device="cpu",
                progress=False,
                checkpoint=CHECKPOINT_STEP,
                stop_after=upto,
            )
            _compare(key, record["history"], fresh.history, exact, upto)
            if quick:
                worst = _compare_weights(
                    key, f"step-{upto}", record["checkpoint"], fresh.checkpoint, exact
                )
            else:
                worst = _compare_weights(
                    key, "final", record["weights"], fresh.model.state_dict(), exact
                )
            how = (
                "bit for bit"
                if exact
                else f"within {TOLERANCE} nats (max weight |Δ| {worst:.2g}; {why})"
            )
            log(
                f"  {key} {spec.chain} seed {spec.seed}: reproduced {how} in "
                f"{time.perf_counter() - t0:.0f} s"
            )
    finally:
        torch.set_num_threads(threads)
    return len(chosen)
