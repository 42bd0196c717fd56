"""markovlib.companion.chapters.incontext and the in-context rules: the page's tables
and sentences, and the rules' counts, on small made-up runs of real models."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from markovlib import incontext
from markovlib.companion import chapters, measures
from markovlib.companion.records import RunRecord
from markovlib.incontext import Heads, InContextChain, bayes_nll
from markovlib.model import Transformer, TransformerConfig
from markovlib.train import TrainConfig


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    """Each test's scores computed in a store of its own (none read from an earlier
    run's, none shipped)."""
    monkeypatch.setenv("MARKOVLIB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("MARKOVLIB_DERIVED_SHIPPED", "0")


def _run(seed: int, layers: int = 2):
    """A record of an untrained model of ``layers`` layers on sequences of 16, and the
    model (a load of it)."""
    torch.manual_seed(seed)
    config = TransformerConfig.gpt2(d_model=8, n_layers=layers, max_len=16)
    train = TrainConfig(steps=10, batch_size=4, seq_len=16)
    spec = SimpleNamespace(seed=seed, train=train, key=f"k{seed}")
    history = pd.DataFrame({"step": [0, 10], "test_loss": [0.7, 0.69]})
    record = RunRecord(InContextChain(2, 1.0), None, history, spec, f"k{seed}")
    return record, Transformer(config)


def test_scored_reads_each_run_on_the_same_paths():
    """scored: each run's loss is its mean next-token loss on the rules' own paths,
    the floor the Bayes predictor's on them, the share the gap closed."""
    runs = [_run(0), _run(1)]
    models = {r.key: m for r, m in runs}
    s = measures.scored([r for r, _ in runs], lambda r: models[r.key])
    x = InContextChain(2, 1.0).sample(
        incontext.EVAL_PATHS, 16, seed=incontext.EVAL_SEED
    )
    floor = float(bayes_nll(x, 2, 1.0).mean())
    for (r, m), one in zip(runs, s):
        assert one.loss == pytest.approx(float(incontext.model_nll(m, x).mean()))
        assert one.heads == incontext.heads(m, x)
        assert one.floor == pytest.approx(floor) and one.ceiling == pytest.approx(
            np.log(2)
        )
        assert one.share == pytest.approx((np.log(2) - one.loss) / (np.log(2) - floor))
    assert s[0].loss != s[1].loss


def test_each_record_is_scored_once_and_a_new_record_afresh():
    """A chapter's table and its three rules read the same records: each is loaded
    and scored once; another record of the same key is scored afresh (issue 69)."""
    runs = [_run(5), _run(6)]
    models, loads = {r.key: m for r, m in runs}, []

    def load(r):
        loads.append(r.key)
        return models[r.key]

    first = measures.scored([r for r, _ in runs], load)
    again = measures.scored([r for r, _ in reversed(runs)], load)
    assert loads == ["k5", "k6"] and again == first[::-1]
    other, model = _run(5, layers=1)
    models["k5"] = model
    [fresh] = measures.scored([other], load)
    assert loads[-1] == "k5" and fresh.loss != first[0].loss


def test_untrained_models_have_no_head_and_the_counts_say_so():
    """At initialisation attention is near uniform: no run has an induction head
    (0 of n per tying), every one-layer run is 'without one', none is near the
    floor."""
    tied, untied = [_run(2), _run(3)], [_run(4)]
    models = {r.key: m for r, m in tied + untied}

    def load(r):
        return models[r.key]

    two = measures.induction_heads([r for r, _ in tied], [r for r, _ in untied], load)
    assert two.counts == (
        ("untied, with an induction head", 0, 1),
        ("tied, with an induction head", 0, 2),
    )
    one = measures.no_induction_head([r for r, _ in tied], [r for r, _ in untied], load)
    assert [c[1:] for c in one.counts] == [(1, 1), (2, 2)]
    near = measures.near_bayes([r for r, _ in tied], [r for r, _ in untied], load)
    assert [c[1] for c in near.counts] == [0, 0]


def test_the_head_table_applies_the_rule():
    """head_table: one row per run, its induction-head column the rule's."""
    a = measures.Scored(Heads((0.6, 0.9), (0.8, 0.1), 0.58), 0.53, 0.52, 0.69)
    b = measures.Scored(Heads((0.6, 0.6), (0.1, 0.1), 0.58), 0.55, 0.52, 0.69)
    table = chapters.incontext.head_table({"L2-untied": [a, b]}, {"L2-untied": [7, 8]})
    assert table["seed"].tolist() == [7, 8]
    assert table["induction head"].tolist() == [True, False]
    assert table["share of the gap"].iloc[0] == pytest.approx(0.941, abs=1e-3)


def test_ablation_table_zeroes_one_layer_at_a_time():
    """ablation_table: the intact loss above the floor, and each layer's attention
    off changes it (an untrained model's attention still carries something)."""
    record, model = _run(5)
    table = chapters.incontext.ablation_table([record], lambda r: model)
    assert list(table.columns) == [
        "seed",
        "intact",
        "layer 1 attention off",
        "layer 2 attention off",
    ]
    row = table.iloc[0]
    assert row["intact"] > 0  # no model beats the Bayes floor on 1024 paths
    assert row["layer 2 attention off"] != row["intact"]


def test_labels_name_every_group_its_trained_claims_read():
    from markovlib.companion.claims.incontext import CLAIMS

    read = {g for c in CLAIMS for g in c.groups}
    assert read == set(chapters.incontext.LABELS)


def test_the_paper_editions_in_context_keys_do_not_move():
    """The shipped runs are found by these keys: the sizes and groups are fixed."""
    from markovlib.runs import experiments

    groups = dict(experiments.paper_edition())
    assert [len(groups[f"incontext-{g}"]) for g in chapters.incontext.GROUPS] == [
        12
    ] * 4
    assert groups["incontext-L2-untied"][0].key == "3dffe46d78f2df688ee4"
    assert groups["incontext-L1-tied"][0].key == "c0c8161698bd984006ee"


def test_the_summary_names_each_claim_with_its_verdict():
    ids = ("incontext_induction", "incontext_bayes", "incontext_single")
    text = chapters.incontext.summary_text(
        {i: f"value {i}" for i in ids}, {i: "reproduced" for i in ids}
    )
    assert text.count("(reproduced)") == 3 and "value incontext_single" in text


def test_the_head_split_counts_each_side_of_the_rule():
    """head_split_text: the two-layer runs' shares with and without a head, apart;
    one-layer runs left out."""
    a = measures.Scored(Heads((0.6, 0.9), (0.8, 0.1), 0.58), 0.516, 0.515, 0.69)
    b = measures.Scored(Heads((0.6, 0.5), (0.1, 0.1), 0.58), 0.530, 0.515, 0.69)
    c = measures.Scored(Heads((0.9,), (0.9,), 0.58), 0.600, 0.515, 0.69)
    table = chapters.incontext.head_table(
        {"L2-tied": [a, b], "L1-tied": [c]}, {"L2-tied": [0, 1], "L1-tied": [0]}
    )
    text = chapters.incontext.head_split_text(table)
    assert text.startswith("1 two-layer run with an induction head closes 0.994")
    assert text.endswith("1 two-layer run without one closes 0.914 of the gap")


def test_the_stage_table_finds_each_level_in_turn():
    """stage_table: the first step below the unigram level and within the floor's band,
    from a made-up history crossing both; a run that never does says so."""
    from markovlib.incontext import Levels

    lv = Levels(0.52, 0.001, 0.60, 0.001, 0.69, 100)
    steps = np.arange(0, 1000, 50)
    falling = np.where(steps < 300, 0.69, np.where(steps < 600, 0.58, 0.525))
    record = SimpleNamespace(
        history=pd.DataFrame({"step": steps, "test_loss": falling}),
        spec=SimpleNamespace(seed=4),
    )
    flat = SimpleNamespace(
        history=pd.DataFrame({"step": steps, "test_loss": np.full(len(steps), 0.65)}),
        spec=SimpleNamespace(seed=5),
    )
    table = chapters.incontext.stage_table({"L2-tied": [record, flat]}, lv, window=1)
    assert table.loc[0, "unigram level"] == 300 and table.loc[0, "floor's band"] == 600
    assert pd.isna(table.loc[1, "unigram level"]) and pd.isna(
        table.loc[1, "floor's band"]
    )
