"""One training config: validated once, hashed into the run's key, stable across
versions; stores of markovlib 0.1 still read; the paper edition's spec keys are
pinned."""

from __future__ import annotations

import json
import sqlite3

import pytest

from markovlib.chains import Chain, binary, lag_switching, symmetric
from markovlib.model import TransformerConfig
from markovlib.presets import resolve
from markovlib.runs import experiments
from markovlib.runs.shipped import ShippedData, default_data_dir
from markovlib.runs.spec import RunSpec, grid, spec_key
from markovlib.runs.store import ResultStore, StoreError
from markovlib.train import Execution, TrainConfig, train_many

BASE = dict(steps=10, batch_size=2, seq_len=8)


@pytest.mark.parametrize(
    "field,bad",
    [
        ("steps", 0),
        ("steps", 2.5),
        ("steps", True),
        ("batch_size", -1),
        ("seq_len", "8"),
        ("lr", 0.0),
        ("lr", float("nan")),
        ("lr", True),
        ("eval_every", 0),
        ("eval_batches", 0),
        ("schedule", "linear"),
        ("weight_decay", -1e-3),
        ("weight_decay", float("inf")),
        ("decay_embeddings", 1),
        ("start", "zero"),
        ("precision", "fp8"),
    ],
)
def test_train_config_names_the_bad_field(field, bad):
    with pytest.raises(ValueError, match=f"^{field} "):
        TrainConfig(**{**BASE, field: bad})


def test_build_rejects_unknown_and_missing_settings():
    with pytest.raises(ValueError, match=r"unknown training settings \['epochs'\]"):
        TrainConfig.build(epochs=3, **BASE)
    with pytest.raises(ValueError, match=r"training settings need \['seq_len'\]"):
        TrainConfig.build(steps=3, batch_size=2)
    c = TrainConfig.build(TrainConfig(**BASE), steps=20)
    assert c.steps == 20 and c.batch_size == 2 and c.replace(lr=1e-2).lr == 1e-2


def test_old_specs_read_with_their_old_meaning():
    """Specs stored before decay_embeddings existed were trained with the embeddings
    decayed."""
    old = {
        k: v
        for k, v in TrainConfig(**BASE).to_dict().items()
        if k != "decay_embeddings"
    }
    assert TrainConfig.from_dict(old).decay_embeddings is True
    assert (
        TrainConfig.from_dict(TrainConfig(**BASE).to_dict()).decay_embeddings is False
    )


def test_spec_round_trip_and_key():
    spec = grid([0.2], [0.3], tied=[False], seeds=[4], preset="theory", **BASE)[0]
    again = RunSpec.from_dict(json.loads(json.dumps(spec.as_dict())))
    assert again == spec and again.key == spec.key == spec_key(spec.as_dict())
    other = RunSpec(
        spec.chain, spec.config, spec.train.replace(decay_embeddings=True), spec.seed
    )
    assert other.key != spec.key  # the optimiser's groups are part of what a run is


def test_a_manifold_start_is_part_of_the_spec_and_of_its_key():
    """init: absent from the dict (and the key) when None, so every earlier key stays;
    a manifold start round-trips, changes the key, gives the manifold's weights, and a
    bad start is refused when the spec is made."""
    from dataclasses import replace

    from markovlib.dynamics import manifold_coordinates
    from markovlib.model import Transformer
    from markovlib.runs.spec import start_weights

    spec = grid([0.5], [0.8], tied=[True], seeds=[1], preset="theory", **BASE)[0]
    assert "init" not in spec.as_dict() and start_weights(spec) is None
    start = replace(spec, init={"kind": "manifold", "e": 0.9, "w": -1.2})
    again = RunSpec.from_dict(json.loads(json.dumps(start.as_dict())))
    assert again == start and start.key != spec.key and start.group == spec.group
    model = Transformer(spec.config)
    model.load_state_dict(start_weights(start), strict=False)
    c = manifold_coordinates(model)
    assert abs(c["e"][0] - 0.9) < 1e-6 and abs(c["w"][0] + 1.2) < 1e-6
    for bad in ({"kind": "manifold", "e": 1.0}, {"kind": "sphere", "e": 1, "w": 1}):
        with pytest.raises(ValueError, match="init must be"):
            replace(spec, init=bad)
    with pytest.raises(ValueError, match="binary chain"):
        RunSpec(
            {"kind": "symmetric", "k": 2, "p": 0.3},
            spec.config,
            spec.train,
            0,
            start.init,
        )
    gpt2 = grid([0.5], [0.8], tied=[True], **BASE)[0]
    with pytest.raises(ValueError, match="theory"):
        replace(gpt2, init=start.init)


def test_paper_edition_keys_are_pinned():
    """The shipped data is found by these keys: a change to TrainConfig,
    TransformerConfig or the chapters' specs that moves them must be deliberate (and
    re-ship or migrate the data)."""
    tied = experiments.global_minimum(
        0.2, 0.3, resolve("paper", chapter="global_minimum")
    )["tied"]
    assert [s.key for s in tied] == [
        "41b098294c7deba9f23f",
        "9a40fefd2e730907d7b1",
        "cd7a214b992b4cf30de6",
    ]
    assert tied[0].train == TrainConfig(
        steps=1000, batch_size=16, seq_len=1024, eval_every=10, eval_batches=4
    )


def test_every_shipped_run_is_a_run_of_the_edition():
    directory = default_data_dir()
    if directory is None:
        pytest.skip("no shipped data in this checkout")
    wanted = {s.key for _, specs in experiments.paper_edition() for s in specs}
    shipped = set(ShippedData(directory).index())
    assert shipped and shipped <= wanted


def test_paper_edition_groups():
    groups = dict(experiments.paper_edition())
    assert len(groups["trap-gpt2-tied"]) == len(groups["trap-theory-untied"]) == 32
    assert {s.train.seq_len for s in groups["depth-fig1-L8"]} == {512} and groups[
        "depth-fig1-L8"
    ][0].config.n_layers == 8
    assert {s.train.steps for s in groups["fig5-k5-tied"]} == {5000}
    assert {s.chain["p"] for s in groups["threshold-k5-theory"]} == {
        0.6,
        0.7,
        0.75,
        0.85,
        0.9,
    }
    # the authors' budget and precision (issue: 400 iterations, fp16 without scaling)
    names = ("trap400-gpt2-tied-fp16", "higher-order-L3")
    assert [groups[n][0].key for n in names] == [
        "c714d5a17a17fb27dbbe",
        "6fd270dc26960ed8495a",
    ]
    assert {s.train.precision for s in groups["fig4-400-tied-fp16"]} == {"fp16"}
    assert len(groups["fig4-400-untied-fp32"]) == 75
    assert {s.train.steps for s in groups["trap400-theory-tied-fp32"]} == {400}
    assert {s.config.n_layers for s in groups["higher-order-L3"]} == {3}
    # the initialisation chapter's AdamW runs from the manifold, 28 per chain
    manifold = groups["init-manifold-chain"] + groups["init-manifold-mirror"]
    assert len(manifold) == 56 and {s.init["kind"] for s in manifold} == {"manifold"}
    assert {s.train.seq_len for s in manifold} == {1024}
    assert groups["init-manifold-mirror"][0].chain == {
        "kind": "binary",
        "p": 0.5,
        "q": 0.2,
    }
    assert {s.train.steps for s in groups["higher-order-L1"]} == {10000}
    fig4 = {s.key for s in groups["fig4-tied"]}
    assert (
        len(fig4) == 25 and len(fig4 & {s.key for s in groups["trap-gpt2-tied"]}) == 1
    )  # (0.5, 0.8), seed 0


def test_a_store_of_markovlib_0_1_is_migrated(tmp_path):
    old = sqlite3.connect(tmp_path / "runs.sqlite")
    old.execute("""CREATE TABLE runs (key TEXT PRIMARY KEY, created REAL NOT NULL, \
version TEXT NOT NULL,
        seed INTEGER NOT NULL, spec TEXT NOT NULL, metrics TEXT NOT NULL, \
history TEXT NOT NULL,
        weights BLOB NOT NULL)""")
    spec = grid([0.2], [0.3], tied=[True], seeds=[0], **BASE)[0].as_dict()
    del spec["train"]["decay_embeddings"]
    history = json.dumps(
        {
            "columns": ["step", "lr", "train_loss", "test_loss"],
            "data": [[0, None, None, 0.7]],
        }
    )
    old.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "abc",
            1.0,
            "0.1.0",
            0,
            json.dumps(spec),
            json.dumps({"seconds": 1.0}),
            history,
            b"",
        ),
    )
    old.commit()
    old.close()
    store = ResultStore(tmp_path)
    assert len(store) == 1 and store.frame()["train.steps"].tolist() == [10]
    assert store.history("abc")["test_loss"].tolist() == [
        pytest.approx(0.7)
    ]  # 0.1 rounded to 10 digits
    assert (
        RunSpec.from_dict(json.loads(json.dumps(spec))).train.decay_embeddings is True
    )


def test_a_foreign_table_is_refused_before_anything_runs(tmp_path):
    con = sqlite3.connect(tmp_path / "runs.sqlite")
    con.execute("CREATE TABLE runs (a, b)")
    con.commit()
    con.close()
    with pytest.raises(
        StoreError, match="runs.sqlite is not a result store of this markovlib"
    ):
        ResultStore(tmp_path)


def test_chains_share_one_protocol_and_train_many_takes_any_chain():
    assert all(
        isinstance(c, Chain)
        for c in (binary(0.2, 0.3), symmetric(3, 0.4), lag_switching(2, 0.3, 0.4))
    )
    assert not isinstance([binary(0.2, 0.3)], Chain)
    runs = train_many(
        lag_switching(2, 0.3, 0.4),
        TransformerConfig.gpt2(max_len=16),
        TrainConfig(**BASE),
        seeds=[0, 1],
        execution=Execution(device="cpu", progress=False),
    )
    assert len(runs) == 2 and all(r.chain.order == 2 for r in runs)
