"""Values a chapter computes from its chain alone — exact gradient descents, flow grids,
CCMC sampling curves — or from a trained run's weights (the Hessian at a trapped run,
the in-context scores): computed once per edition and read back.

``derived(f, *args, **kwargs)`` is ``f(*args, **kwargs)``, looked up first among the
shipped values of the paper edition (``data/paper/derived/``, each file listed in the
manifest with its SHA-256 and checked before it is read), then in the local result
store's ``derived/`` folder, and computed (and kept there) only where neither holds it.
A value's key hashes the function's name, its arguments and the maths layer's code (its
syntax tree without docstrings and without the prose of a literal ``source=`` argument:
where a preset's sizes come from), and for a function outside the maths layer (the
Hessian at a trained run, :mod:`markovlib.curvature`;
:func:`markovlib.incontext.scores`) its own module's code too: a change to the code
gives new keys, so a stale value is never read. ``tools/derive.py`` computes the paper
edition's values from its chapters and ships them; a test recomputes one and fails
when the shipped ones are stale.

Values are stored as JSON (gzip): numbers, strings, lists, dicts, tuples, NumPy arrays
and tensors (raw little-endian bytes), Markov chains and the maths layer's dataclasses.
Nothing is ever unpickled.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import functools
import gzip
import hashlib
import importlib
import json
import os
from pathlib import Path

import numpy as np
import torch

from ..chains import MarkovChain
from .shipped import shipped_data
from .store import default_results_dir

__all__ = [
    "derived",
    "held",
    "is_current",
    "derived_key",
    "encode",
    "decode",
    "maths_version",
    "read_value",
    "read_record",
    "check_record",
    "same_value",
    "same_as_recorded",
    "DerivedValueError",
    "recompute",
    "ship",
    "FOLDER",
]

FOLDER = "derived"  # in the shipped data and in the local result store
# the maths layer: a change to any of these gives every derived value a new key
MATHS = (
    "_checks",
    "analysis",
    "ccmc",
    "chains",
    "device",
    "dynamics",
    "model",
    "precision",
    "presets",
    "theory",
    "train",
)
# a recomputed value matches its record within these: the same code on another CPU or
# thread count sums in another order (a flow grid's energy drift, about 1e-8, moved by
# 4e-9 when recomputed on another machine; its end points agreed to 1e-12 there, and
# moved by 7e-9 on an Intel Xeon, whose vector units sum in another order again)
RTOL, ATOL = 1e-6, 1e-7
# fields of a function's values that another CPU kind computes further apart than that,
# each with the absolute tolerance it is recomputed within (same_as_recorded): the
# manifold descents' paths (28 starts, 6000 steps) came 3.2e-3 apart on an AMD EPYC and
# an Intel Xeon at the 4 starts that end at theta_pi (e -> 0), their losses 4.4e-16
# apart, every other start and field within RTOL, ATOL; one CPU recomputes them bit for
# bit
LOOSE = {"markovlib.dynamics:manifold_descent": {"path": 0.02}}
# the keyword whose written-out text presets.py's maths version leaves out (_syntax)
SOURCE = "source"
SHIPPED_VAR = "MARKOVLIB_DERIVED_SHIPPED"  # "0": never read shipped values (derive.py)


@functools.cache
def maths_version() -> str:
    """SHA-256 (16 hex digits) of the maths modules' syntax trees, docstrings left out:
    comments, formatting and docstrings do not change it."""
    digest = hashlib.sha256()
    for name in MATHS:
        digest.update(f"{name}\n{_syntax(name)}\n".encode())
    return digest.hexdigest()[:16]


def _syntax(name: str) -> str:
    """The syntax tree of markovlib's module ``name`` without its docstrings and, in
    :mod:`markovlib.presets`, without the text of a ``source=`` argument written as a
    string (prose: where a preset's sizes come from, which no value reads)."""
    package = Path(__file__).resolve().parents[1]
    tree = ast.parse((package / f"{name.replace('.', '/')}.py").read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
        if name == "presets" and isinstance(node, ast.keyword) and _prose(node):
            node.value = ast.Constant("")
    return ast.dump(tree)


def _prose(keyword: ast.keyword) -> bool:
    """Whether ``keyword`` is ``source=`` given a string written out (a literal or an
    f-string): where a preset's sizes come from."""
    value = keyword.value
    return keyword.arg == SOURCE and (
        isinstance(value, ast.JoinedStr)
        or (isinstance(value, ast.Constant) and isinstance(value.value, str))
    )


def is_current(path: Path) -> bool:
    """Whether the record at ``path`` was computed by today's code: its key is its
    call's at this maths version (and, outside the maths layer, its module's code)."""
    try:
        record = read_record(path)
        function = _markovlib_attribute(record["function"], "function")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False  # damaged, or of a function or class this code no longer has
    if record.get("maths") != maths_version():
        return False
    return (
        derived_key(function, tuple(record["args"]), record["kwargs"]) == record["key"]
    )


def _own_code(function) -> str | None:
    """For a function of a markovlib module outside :data:`MATHS` (the curvature at a
    trained run), the SHA-256 of its module's syntax tree: its values get new keys
    when its own code changes; None for the maths layer's (:func:`maths_version`)."""
    package, _, module = function.__module__.partition(".")
    if package != "markovlib" or module in MATHS:
        return None
    return hashlib.sha256(_syntax(module).encode()).hexdigest()[:16]


def _array(a: np.ndarray) -> dict:
    if a.dtype.kind in "OU":  # labels ('global', 'local', ...)
        return {
            "__strings__": a.astype(str).tolist(),
            "shape": list(a.shape),
            "object": a.dtype.kind == "O",
        }
    raw = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    return {
        "__array__": raw.dtype.str,
        "shape": list(a.shape),
        "data": base64.b64encode(raw.tobytes()).decode(),
    }


def encode(value):
    """``value`` as JSON-able data that :func:`decode` turns back into an equal
    value."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float | np.integer | np.floating | np.bool_):
        return value.item() if hasattr(value, "item") else value
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, torch.Tensor):
        return {"__tensor__": _array(value.detach().cpu().numpy())}
    if isinstance(value, MarkovChain):
        return {"__chain__": value.P.tolist(), "name": value.name}
    if isinstance(value, tuple | list):
        items = [encode(v) for v in value]
        return {"__tuple__": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {"__dict__": [[encode(k), encode(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and type(value).__module__.startswith(
        "markovlib."
    ):
        fields = {
            f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)
        }
        return {"__dataclass__": _qualified(type(value)), "fields": fields}
    raise TypeError(f"derived: cannot store a {type(value).__name__}")


def _unarray(d: dict) -> np.ndarray:
    if "__strings__" in d:
        kind = object if d["object"] else str
        return np.array(d["__strings__"], dtype=kind).reshape(d["shape"])
    raw = base64.b64decode(d["data"])
    return np.frombuffer(raw, dtype=np.dtype(d["__array__"])).reshape(d["shape"]).copy()


def _qualified(obj) -> str:
    """ "module:qualname" of a function or class: how records name them."""
    return f"{obj.__module__}:{obj.__qualname__}"


def _markovlib_attribute(name: str, what: str):
    """The object a "module:qualname" names, found only among markovlib's own
    (``what``: "class", "function", for the error)."""
    module, attribute = name.split(":")
    if module.split(".")[0] != "markovlib":
        raise ValueError(f"derived: {name} is not a markovlib {what}")
    return getattr(importlib.import_module(module), attribute)


def _dataclass(kind: str):
    cls = _markovlib_attribute(kind, "class")
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"derived: {kind} is not a dataclass")
    return cls


def decode(data):
    """The value :func:`encode` stored as ``data``."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "__array__" in data or "__strings__" in data:
        return _unarray(data)
    if "__tensor__" in data:
        return torch.from_numpy(_unarray(data["__tensor__"]))
    if "__chain__" in data:
        return MarkovChain(data["__chain__"], name=data["name"])
    if "__tuple__" in data:
        return tuple(decode(v) for v in data["__tuple__"])
    if "__dict__" in data:
        return {_hashable(decode(k)): decode(v) for k, v in data["__dict__"]}
    if "__dataclass__" in data:
        cls = _dataclass(data["__dataclass__"])
        return cls(**{k: decode(v) for k, v in data["fields"].items()})
    raise ValueError(f"derived: unknown stored value {sorted(data)}")


def _hashable(key):
    return tuple(_hashable(k) for k in key) if isinstance(key, list) else key


def derived_key(function, args: tuple, kwargs: dict) -> str:
    """The key of ``function(*args, **kwargs)`` at this maths version: 32 hex
    digits."""
    call = {
        "function": _qualified(function),
        "args": encode(args),
        "kwargs": encode(dict(sorted(kwargs.items()))),
        "maths": maths_version(),
    }
    own = _own_code(function)
    if own is not None:
        call["code"] = own
    text = json.dumps(call, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def read_record(path: Path) -> dict:
    """The record stored at ``path`` (a gzip JSON file written by :func:`derived`):
    key, function, args, kwargs, maths version and value, decoded."""
    record = json.loads(gzip.decompress(path.read_bytes()))
    for name in ("args", "kwargs", "value"):
        record[name] = decode(record[name])
    return record


def read_value(path: Path, key: str):
    """The value stored at ``path`` for the call whose key is ``key``: refused
    (:class:`DerivedValueError`) unless both the file's name and its record's key are
    ``key``."""
    record = read_record(path)
    stem = Path(path).name.removesuffix(".json.gz")
    if not stem == record.get("key") == key:
        raise DerivedValueError(
            f"derived value {stem}: its record says key {record.get('key')}, the call "
            f"has {key}"
        )
    return record["value"]


class DerivedValueError(ValueError):
    """A derived value's record does not match its file name or its call."""


RECORD_FIELDS = ("key", "function", "args", "kwargs", "maths", "value")  # _write's


def check_record(record: dict, path: Path) -> None:
    """Raise :class:`DerivedValueError` unless the record holds the fields
    :func:`derived` writes and no other, its key is its file's name and the key of its
    own call (function, arguments, this maths version), and its maths version is this
    library's: a record moved to another name, or any field edited with its key kept,
    is refused (its value is recomputed by ``verify``)."""
    stem = Path(path).name.removesuffix(".json.gz")
    if sorted(record) != sorted(RECORD_FIELDS):
        raise DerivedValueError(
            f"derived value {stem}: its record holds the fields "
            f"{', '.join(sorted(record))}, not {', '.join(sorted(RECORD_FIELDS))}"
        )
    if record.get("key") != stem:
        raise DerivedValueError(
            f"derived value {stem}: its record says key {record.get('key')}"
        )
    if record["maths"] != maths_version():
        raise DerivedValueError(
            f"derived value {stem}: its record says maths version "
            f"{record['maths']!r}; this library's, which its key hashes, is "
            f"{maths_version()!r}"
        )
    function = _markovlib_attribute(record["function"], "function")
    key = derived_key(function, tuple(record["args"]), dict(record["kwargs"]))
    if key != stem:
        raise DerivedValueError(
            f"derived value {stem}: its call ({record['function']}) has the key {key}"
        )


def same_as_recorded(value, record: dict) -> bool:
    """Whether ``value``, recomputed, agrees with ``record``'s (:func:`same_value`),
    the fields of :data:`LOOSE` of its function within their own tolerance."""
    loose, stored = LOOSE.get(record["function"], {}), record["value"]
    if not loose:
        return same_value(value, stored)
    return type(value) is type(stored) and all(
        same_value(
            getattr(value, f.name),
            getattr(stored, f.name),
            RTOL,
            loose.get(f.name, ATOL),
        )
        for f in dataclasses.fields(stored)
    )


def same_value(a, b, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """Whether two decoded values agree: numbers and arrays within ``rtol`` and
    ``atol``, everything else equal, recursively."""
    if isinstance(a, torch.Tensor | np.ndarray) or isinstance(
        b, torch.Tensor | np.ndarray
    ):
        a, b = (
            np.asarray(x.numpy() if isinstance(x, torch.Tensor) else x) for x in (a, b)
        )
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return False
        if a.dtype.kind in "OUSb":
            return bool((a == b).all())
        return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    if isinstance(a, float | int | np.floating | np.integer) and not isinstance(
        a, bool
    ):
        return bool(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, MarkovChain):
        return isinstance(b, MarkovChain) and same_value(a.P, b.P)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(
            same_value(getattr(a, f.name), getattr(b, f.name))
            for f in dataclasses.fields(a)
        )
    return a == b


def recompute(record: dict):
    """The value of a record's call computed again by this library (its function
    resolved among markovlib's own)."""
    function = _markovlib_attribute(record["function"], "function")
    return function(*record["args"], **record["kwargs"])


def _write(path: Path, call: tuple, key: str, value) -> None:
    """Store ``value`` of ``call`` (function, args, kwargs) at ``path`` atomically;
    nothing if the folder is not writable."""
    function, args, kwargs = call
    record = {
        "key": key,
        "function": _qualified(function),
        "args": encode(args),
        "kwargs": encode(kwargs),
        "maths": maths_version(),
        "value": encode(value),
    }
    blob = gzip.compress(json.dumps(record).encode(), mtime=0)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(blob)
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only store: the value is computed again next time


def derived(function, /, *args, **kwargs):
    """``function(*args, **kwargs)``: the shipped value if the paper edition ships it
    (its hash checked), else the local store's, else computed and kept there."""
    key = derived_key(function, args, kwargs)
    found = _lookup(key)
    if found is not _MISSING:
        return found
    value = function(*args, **kwargs)
    _write(
        default_results_dir() / f"{FOLDER}/{key}.json.gz",
        (function, args, kwargs),
        key,
        value,
    )
    return value


def held(function, /, *args, **kwargs):
    """The value :func:`derived` would return where it is shipped or stored, else
    None: nothing is computed (a page of the paper edition reads what it ships)."""
    found = _lookup(derived_key(function, args, kwargs))
    return None if found is _MISSING else found


_MISSING = object()


def _lookup(key: str):
    """The value of ``key``: shipped (hash checked), else in the local store, else
    :data:`_MISSING`."""
    name = f"{FOLDER}/{key}.json.gz"
    shipped = shipped_data("auto") if os.environ.get(SHIPPED_VAR) != "0" else None
    if shipped is not None and name in shipped.derived:
        return read_value(shipped.check(name), key)
    local = default_results_dir() / name
    if local.is_file():
        try:
            return read_value(local, key)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # damaged or not its call's: computed again and rewritten
    return _MISSING


def ship(store: str | Path, data: str | Path) -> int:
    """Make the derived values in ``store``'s ``derived/`` folder the shipped ones of
    ``data``: copied to ``data/derived/``, listed in its manifest with their SHA-256
    (replacing the previous list; files no longer listed are removed). Returns how many
    are shipped."""
    from .export import write_manifest
    from .shipped import MANIFEST, file_sha256

    source, data = Path(store) / FOLDER, Path(data)
    target = data / FOLDER
    target.mkdir(exist_ok=True)
    entries = []
    for path in sorted(source.glob("*.json.gz")):
        if not is_current(path):
            continue  # computed by older code: never shipped
        (target / path.name).write_bytes(path.read_bytes())
        name = f"{FOLDER}/{path.name}"
        entries.append(
            {
                "name": name,
                "sha256": file_sha256(target / path.name),
                "bytes": (target / path.name).stat().st_size,
            }
        )
    for old in target.iterdir():
        if f"{FOLDER}/{old.name}" not in {e["name"] for e in entries}:
            old.unlink()
    manifest = json.loads((data / MANIFEST).read_text())
    manifest["derived"] = entries
    write_manifest(data, manifest)
    return len(entries)
