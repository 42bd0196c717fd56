"""Derived values (markovlib.runs.derived): stored without pickle and read back equal,
computed once per store, shipped with a hash that is checked, keyed on the maths code,
and the shipped ones are what this library computes today."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from markovlib import analysis, dynamics
from markovlib.chains import binary
from markovlib.runs import derived as D
from markovlib.runs.shipped import ShippedData, ShippedDataError
from markovlib.runs.verify import VerificationError, verify

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "data" / "paper"


def _equal(a, b) -> bool:
    """Deep equality of decoded values (arrays exactly, chains by kernel)."""
    if isinstance(a, np.ndarray | torch.Tensor):
        return type(a) is type(b) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_equal, a, b))
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(
            _equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__
        )
    if hasattr(a, "P"):
        return np.array_equal(a.P, b.P) and a.name == b.name
    return a == b and type(a) is type(b)


def test_values_come_back_equal_through_json():
    chain = binary(0.3, 0.9)
    grid = dynamics.flow_grid(
        0.3, 0.9, np.array([0.5, 1.0]), np.array([-1.0, 0.5]), 50.0
    )
    value = {
        "grid": grid,  # a dataclass with float arrays and label arrays
        (1, "a"): [2.5, torch.arange(6, dtype=torch.int64).view(2, 3)],
        "labels": np.array(["global", "local"]),
        3: (chain, None, True, "text", np.array([[1.0, -0.0]], dtype=np.float64)),
    }
    text = json.dumps(D.encode(value))
    assert "pickle" not in text
    back = D.decode(json.loads(text))
    assert _equal(back, value)
    assert D.decode(D.encode(np.float32(2.5))) == 2.5  # NumPy scalars as numbers
    with pytest.raises(TypeError, match="cannot store a set"):
        D.encode({1, 2})
    with pytest.raises(ValueError, match="not a markovlib class"):
        D.decode({"__dataclass__": "os:PathLike", "fields": {}})


def test_computed_once_then_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("MARKOVLIB_RESULTS", str(tmp_path))
    monkeypatch.setenv("MARKOVLIB_DERIVED_SHIPPED", "0")  # none shipped
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return analysis.perturb_theta_pi(*args, **kwargs)

    counted.__module__, counted.__qualname__ = "tests", "counted"
    kw = dict(tied=False, noise=0.05, n=2, steps=5, seed=3, length=4)
    first = D.derived(counted, binary(0.3, 0.9), "theory", **kw)
    second = D.derived(counted, binary(0.3, 0.9), "theory", **kw)
    assert len(calls) == 1 and _equal(first, second)
    (stored,) = (tmp_path / "derived").glob("*.json.gz")
    record = D.read_record(stored)
    assert record["maths"] == D.maths_version() and record["kwargs"] == kw
    stored.write_bytes(b"damaged")  # read fails: computed again and rewritten
    assert _equal(D.derived(counted, binary(0.3, 0.9), "theory", **kw), first)
    assert len(calls) == 2 and D.read_record(stored)["key"] == record["key"]
    D.derived(counted, binary(0.3, 0.9), "theory", **{**kw, "seed": 4})
    assert len(calls) == 3  # other arguments, another key


def test_the_key_follows_the_maths_code_not_its_docstrings(monkeypatch, tmp_path):
    call = (analysis.perturb_theta_pi, (binary(0.3, 0.9), "theory"), {"n": 2})
    before = D.derived_key(*call)
    package = tmp_path / "markovlib"
    shutil.copytree(ROOT / "markovlib", package)
    monkeypatch.setattr(D, "__file__", str(package / "runs" / "derived.py"))
    theory = package / "theory.py"
    text = theory.read_text()
    theory.write_text(text.replace('"""', '"""Reworded. ', 1) + "\n# a comment\n")
    D.maths_version.cache_clear()
    assert D.derived_key(*call) == before
    theory.write_text(text + "\nCHANGED = 1\n")
    D.maths_version.cache_clear()
    assert D.derived_key(*call) != before
    keys = set()
    for written in ("a", "b"):  # outside presets.py, a source= string is code
        theory.write_text(text + f'\nX = dict(source="{written}")\n')
        D.maths_version.cache_clear()
        keys.add(D.derived_key(*call))
    assert len(keys) == 2
    theory.write_text(text)
    # a preset's source is prose (literal or f-string): reworded, the same key; a
    # size beside it, or a source computed by code, changes it
    presets = package / "presets.py"
    old = presets.read_text()
    assert old.count("source=A.source") == 1 and old.count("steps=1000,") >= 1
    added = old + '\nX = Scale("x", steps=3, source="a")\nY = dict(source=f"{X} a")\n'
    presets.write_text(added)
    D.maths_version.cache_clear()
    with_sources = D.derived_key(*call)
    assert with_sources != before  # new code
    for new, same in (
        (added.replace('source="a"', 'source="reworded"'), True),
        (added.replace('f"{X} a"', 'f"{_GPT2} reworded"'), True),
        (added.replace("source=A.source", "source=A.figure"), False),
        (added.replace("steps=3,", "steps=4,"), False),
    ):
        assert new != added
        presets.write_text(new)
        D.maths_version.cache_clear()
        assert (D.derived_key(*call) == with_sources) is same
    D.maths_version.cache_clear()


def test_a_value_outside_the_maths_layer_follows_its_own_module(monkeypatch, tmp_path):
    """The curvature at a trained run lives outside MATHS (issue 66: its values were
    computed while the shipped ones stayed current): its key follows its own module,
    and the maths layer's keys do not."""
    from markovlib import curvature

    weights = {"w": torch.zeros(2)}
    call = (curvature.trap_curvature, (binary(0.3, 0.9), weights), {"batch": 2})
    maths_call = (analysis.perturb_theta_pi, (binary(0.3, 0.9), "theory"), {"n": 2})
    before, maths_before = D.derived_key(*call), D.derived_key(*maths_call)
    package = tmp_path / "markovlib"
    shutil.copytree(ROOT / "markovlib", package)
    monkeypatch.setattr(D, "__file__", str(package / "runs" / "derived.py"))
    module = package / "curvature.py"
    text = module.read_text()
    module.write_text(text.replace('"""', '"""Reworded. ', 1))
    D.maths_version.cache_clear()
    assert D.derived_key(*call) == before
    module.write_text(text + "\nCHANGED = 1\n")
    assert D.derived_key(*call) != before
    assert D.derived_key(*maths_call) == maths_before
    D.maths_version.cache_clear()


@pytest.fixture
def shipped(tmp_path, monkeypatch) -> Path:
    """A data folder with one shipped run file (its one run trained alone, 500 steps
    at length 512: re-trained to step 50 in seconds) and one shipped derived value."""
    data = tmp_path / "data"
    data.mkdir()
    manifest = json.loads((PAPER / "manifest.json").read_text())
    (first,) = [
        f for f in manifest["files"] if f["name"] == "depth-fig1-L1-002.parquet"
    ]
    shutil.copy(PAPER / first["name"], data / first["name"])
    manifest["files"], manifest["derived"] = [first], []
    (data / "manifest.json").write_text(json.dumps(manifest))
    store = tmp_path / "store"
    monkeypatch.setenv("MARKOVLIB_RESULTS", str(store))
    monkeypatch.setenv("MARKOVLIB_DERIVED_SHIPPED", "0")
    D.derived(dynamics.flow_grid, 0.3, 0.9, np.array([0.5]), np.array([0.5]), 20.0)
    assert D.ship(store, data) == 1
    monkeypatch.setenv("MARKOVLIB_DATA", str(data))
    monkeypatch.delenv("MARKOVLIB_DERIVED_SHIPPED")
    monkeypatch.setenv("MARKOVLIB_RESULTS", str(tmp_path / "empty"))
    return data


def test_a_shipped_value_is_read_with_its_hash_checked(shipped, monkeypatch):
    def never(*args):
        raise AssertionError("computed although shipped")

    never.__module__, never.__qualname__ = "markovlib.dynamics", "flow_grid"
    args = (0.3, 0.9, np.array([0.5]), np.array([0.5]), 20.0)
    value = D.derived(never, *args)
    assert value.found.shape == (1,) and not (shipped.parent / "empty").exists()
    assert "1 derived values" in "\n".join(_verify_lines(shipped))
    (path,) = (shipped / "derived").glob("*.json.gz")
    blob = gzip.decompress(path.read_bytes()).replace(b'"maths"', b'"maths" ')
    path.write_bytes(gzip.compress(blob))
    from markovlib.runs import shipped as S

    S._SHIPPED.clear()
    with pytest.raises(ShippedDataError, match="damaged"):
        D.derived(never, *args)
    with pytest.raises(ShippedDataError, match="damaged"):
        verify(shipped, sample=0, log=lambda *a: None)


def test_an_unlisted_derived_file_is_reported(shipped):
    (shipped / "derived" / "extra.json.gz").write_bytes(b"")
    with pytest.raises((ShippedDataError, VerificationError), match="extra.json.gz"):
        verify(shipped, sample=0, log=lambda *a: None)


def _verify_lines(data: Path) -> list[str]:
    lines = []
    verify(data, sample=0, log=lines.append)
    return lines


def test_shipped_values_are_current_and_what_this_library_computes():
    """The paper edition's derived values were computed by today's code (the maths
    layer's, and a function's own module outside it; else the build computes them
    again: run ``python tools/derive.py``), and a flow grid and an in-context run's
    scores, computed again here, are equal."""
    data = ShippedData(PAPER)
    assert data.derived, "no derived values shipped: run python tools/derive.py"
    records = {name: D.read_record(data.check(name)) for name in data.derived}
    stale = [n for n in data.derived if not D.is_current(data.check(n))]
    assert not stale, f"{len(stale)} stale derived values: run python tools/derive.py"
    scores = [r for r in records.values() if r["function"].endswith(":scores")]
    assert len(scores) == 48, "the in-context runs' scores are shipped (issue 69)"
    functions = [r["function"].rsplit(":", 1)[1] for r in records.values()]
    shipped = {f: functions.count(f) for f in set(functions)}
    # the CCMC chapter's generation (W+, W-), bad_local_minima's grid, multi_state's
    # thresholds for k = 2..8: each chapter's costliest cell at paper (issue 69)
    assert shipped["generation_summary"] == 2 and shipped["curvature_grid"] == 1
    assert shipped["unigram_threshold"] == 7, shipped
    assert D.same_value(D.recompute(scores[0]), scores[0]["value"])
    grids = [r for r in records.values() if r["function"].endswith(":flow_grid")]
    assert grids, "the initialisation chapter's flow grids are shipped"
    again = D.recompute(grids[0])
    for name in ("ends", "drift"):
        np.testing.assert_allclose(
            getattr(again, name),
            getattr(grids[0]["value"], name),
            rtol=D.RTOL,  # verify's tolerance: another CPU sums in another order
            atol=D.ATOL,
        )
    assert np.array_equal(again.found, grids[0]["value"].found)


def test_a_manifold_descents_path_is_recomputed_within_its_own_tolerance():
    """A shipped manifold descent recomputed on the other CPU kind moved its path by
    3.2e-3 (D.LOOSE), its losses by 4.4e-16: a path that far apart is the same value,
    one moved by more than its tolerance or a loss moved by 1e-5 is not; any other
    function's fields keep RTOL and ATOL."""
    data = ShippedData(PAPER)
    records = [D.read_record(data.check(n)) for n in data.derived]
    (record, *_) = [r for r in records if r["function"].endswith(":manifold_descent")]
    value, atol = record["value"], D.LOOSE[record["function"]]["path"]
    assert D.same_as_recorded(value, record)

    def moved(field: str, by: float):
        array = getattr(value, field).copy()
        array.flat[array.size // 2] += by
        return dataclasses.replace(value, **{field: array})

    assert D.same_as_recorded(moved("path", 3.2e-3), record)
    assert not D.same_as_recorded(moved("path", 2 * atol), record)
    assert not D.same_as_recorded(moved("loss", 1e-5), record)
    assert not D.same_value(moved("path", 3.2e-3), value)  # the tolerance elsewhere
    (grid, *_) = [r for r in records if r["function"].endswith(":flow_grid")]
    ends = grid["value"].ends.copy()
    ends.flat[0] += 1e-3
    assert not D.same_as_recorded(dataclasses.replace(grid["value"], ends=ends), grid)


def test_the_scorecard_finds_the_in_context_scores_shipped(monkeypatch):
    """measures.scored asks for a shipped run's scores by the key they are shipped
    under (else the scorecard and the chapter compute them again, silently): its
    call's key, for the first run of each in-context group, is in the manifest."""
    from markovlib.companion import measures
    from markovlib.companion.records import load_groups
    from markovlib.presets import resolve
    from markovlib.runs import experiments

    asked = []
    monkeypatch.setattr(
        measures.incontext,
        "derived",
        lambda f, *a, **k: (
            asked.append(D.derived_key(f, a, k)) or D.derived(f, *a, **k)
        ),
    )
    data = ShippedData(PAPER)
    edition = experiments.paper_edition()
    named = {n: specs for n, specs in edition if n.startswith("incontext-")}
    groups = load_groups(named, resolve("paper"))
    for records in groups.records.values():
        measures.scored(records[:1], groups.load)
    assert asked and all(f"derived/{key}.json.gz" in data.derived for key in asked)


def _rehash(data: Path) -> None:
    """The manifest's derived entries re-hashed, as a forger would."""
    from markovlib.runs import shipped as S
    from markovlib.runs.export import write_manifest

    manifest = json.loads((data / "manifest.json").read_text())
    for entry in manifest["derived"]:
        entry["sha256"] = S.file_sha256(data / entry["name"])
        entry["bytes"] = (data / entry["name"]).stat().st_size
    write_manifest(data, manifest)
    S._SHIPPED.clear()


def test_a_tampered_derived_value_rehashed_is_caught_by_recomputing_it(shipped):
    """Issue 48: a shipped value halved and its manifest entry re-hashed passed
    `verify --sample 0` and was printed; verify now recomputes derived values and
    compares them."""
    lines = []  # with two processes, recomputed in one of them beside the re-training
    verify(shipped, sample=1, quick=True, jobs=2, log=lines.append)
    (said,) = [i for i, ln in enumerate(lines) if ln.startswith("derived value ")]
    (drawn,) = [i for i, ln in enumerate(lines) if ln.startswith("re-training 1 of")]
    (judged,) = [i for i, ln in enumerate(lines) if ": reproduced " in ln]
    assert drawn < judged < said and "the same" in lines[said], lines
    (path,) = (shipped / "derived").glob("*.json.gz")
    record = json.loads(gzip.decompress(path.read_bytes()))
    value = D.decode(record["value"])
    value.ends[...] = value.ends / 2
    record["value"] = D.encode(value)
    path.write_bytes(gzip.compress(json.dumps(record).encode(), mtime=0))
    _rehash(shipped)
    verify(shipped, sample=0, log=lambda *a: None)  # its key still is its call's
    with pytest.raises(VerificationError, match="not what the library computes"):
        verify(shipped, sample="all", quick=True, max_seconds=60, log=lambda *a: None)
    # ... and its error raised here
    with pytest.raises(VerificationError, match="not what the library computes"):
        verify(shipped, sample=1, quick=True, jobs=2, log=lambda *a: None)


def test_a_derived_record_under_another_name_is_refused(shipped, monkeypatch):
    """Two derived files swapped (re-hashed) passed: a record's key is now compared
    with its file name and with its own call's key, by verify and by derived()."""
    (path,) = (shipped / "derived").glob("*.json.gz")
    other = path.with_name("0" * 32 + ".json.gz")
    path.rename(other)
    manifest = json.loads((shipped / "manifest.json").read_text())
    manifest["derived"][0]["name"] = f"derived/{other.name}"
    (shipped / "manifest.json").write_text(json.dumps(manifest))
    _rehash(shipped)
    with pytest.raises(VerificationError, match="its record says key"):
        verify(shipped, sample=0, log=lambda *a: None)
    record = json.loads(gzip.decompress(other.read_bytes()))
    record["key"] = other.name.removesuffix(".json.gz")
    other.write_bytes(gzip.compress(json.dumps(record).encode(), mtime=0))
    _rehash(shipped)
    with pytest.raises(VerificationError, match="its call .* has the key"):
        verify(shipped, sample=0, log=lambda *a: None)


@pytest.mark.parametrize(
    "change, says",
    [
        ({"maths": "0" * 16}, "its record says maths version '0000000000000000'"),
        ({"note": "x"}, "its record holds the fields args, function, key, kwargs"),
    ],
    ids=["maths", "added field"],
)
def test_every_field_of_a_derived_record_is_checked(shipped, change, says):
    """Issue 71: a derived record's maths field edited (and the manifest re-hashed)
    verified: its key hashes the call and today's maths version, not the field. Every
    field is now checked against its key and the library, and no other is allowed."""
    (path,) = (shipped / "derived").glob("*.json.gz")
    record = json.loads(gzip.decompress(path.read_bytes()))
    record.update(change)
    path.write_bytes(gzip.compress(json.dumps(record).encode(), mtime=0))
    _rehash(shipped)
    with pytest.raises(VerificationError, match=says):
        verify(shipped, sample=0, log=lambda *a: None)


def test_only_values_whose_key_is_their_calls_today_are_shipped(tmp_path, monkeypatch):
    """ship() and tools/derive.py's keep_current keep a value only while today's code
    gives its call the key it is filed under (a value of changed code is dropped)."""
    import gzip
    import sys

    monkeypatch.setenv("MARKOVLIB_RESULTS", str(tmp_path / "store"))
    monkeypatch.setenv("MARKOVLIB_DERIVED_SHIPPED", "0")
    D.derived(dynamics.flow_grid, 0.3, 0.9, np.array([0.5]), np.array([0.5]), 20.0)
    (path,) = (tmp_path / "store" / D.FOLDER).glob("*.json.gz")
    assert D.is_current(path)
    stale = json.loads(gzip.decompress(path.read_bytes()))
    stale["key"] = "0" * 32  # as if computed by other code: its key is not its call's
    other = path.with_name(f"{stale['key']}.json.gz")
    other.write_bytes(gzip.compress(json.dumps(stale).encode()))
    assert not D.is_current(other)
    gone = dict(stale, function="markovlib.theory:no_such_function")
    other.write_bytes(gzip.compress(json.dumps(gone).encode()))
    assert not D.is_current(other)  # of code this library no longer has
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text(json.dumps({"files": []}))
    assert D.ship(tmp_path / "store", data) == 1
    sys.path.insert(0, str(ROOT / "tools"))
    from derive import keep_current

    fresh = tmp_path / "fresh"
    assert keep_current(data, fresh) == 1 and keep_current(data, fresh) == 0


def test_derive_executes_every_chapter_whose_values_are_shipped():
    """tools/derive.py computes the shipped values by executing the chapters that derive
    them, each calling derived() itself (the CCMC chapter's generation summary too,
    issue 69); a chapter that derives nothing is left out."""
    import sys

    tools = str(ROOT / "tools")
    sys.path.insert(0, tools)
    try:
        import derive
    finally:
        sys.path.remove(tools)
    names = {p.stem for p in derive.chapters()}
    assert {"ccmc", "bad_local_minima", "multi_state", "initialisation"} <= names
    assert "framework" not in names and "reproducibility" not in names
    cells = json.loads((ROOT / "book" / "ccmc.ipynb").read_text())["cells"]
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert code.count("derived(generation_summary,") == 2  # W+ and W-
