"""markovlib.presets: scale resolution, the environment override, and the ordering of
the scales."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import numpy as np
import pytest
import torch

import markovlib
import markovlib.train
from markovlib.presets import (
    ENV_VAR,
    PRESETS,
    Scale,
    init_sizes,
    resolve,
    resolve_device,
    with_overrides,
)
from markovlib.train import Execution, TrainConfig


def test_auto_is_cpu_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve("auto").name == "cpu"
    assert resolve().name == "cpu"
    assert resolve_device("auto") == torch.device("cpu")


def test_auto_is_paper_with_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve("auto").name == "paper"
    assert resolve_device("auto") == torch.device("cuda")


@pytest.mark.parametrize("name", ["smoke", "cpu", "paper"])
def test_explicit_names(name):
    scale = resolve(name)
    assert scale is PRESETS[name] and scale.name == name


@pytest.mark.parametrize("forced", ["smoke", "cpu", "paper", "  smoke \n"])
def test_environment_variable_overrides(monkeypatch, forced):
    monkeypatch.setenv(ENV_VAR, forced)
    assert ENV_VAR == "MARKOVLIB_SCALE"
    for asked in ("auto", "paper", "cpu", "smoke", PRESETS["paper"]):
        assert resolve(asked).name == forced.strip()


def test_empty_environment_variable_is_ignored(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "")
    assert resolve("smoke").name == "smoke"


@pytest.mark.parametrize("bad", ["huge", "", "Paper", None])
def test_unknown_scale_raises(bad):
    with pytest.raises(ValueError, match="scale"):
        resolve(bad)


def test_unknown_scale_from_environment_raises(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "gigantic")
    with pytest.raises(ValueError, match="scale") as info:
        resolve("smoke")
    assert "gigantic" in str(info.value)


def test_scale_object_passes_through():
    custom = Scale(
        "custom",
        steps=7,
        batch_size=2,
        seq_len=8,
        seeds=1,
        trap_seeds=2,
        d_model=4,
        eval_every=1,
        eval_batches=1,
    )
    assert resolve(custom) is custom


def test_scales_are_ordered():
    smoke, cpu, paper = PRESETS["smoke"], PRESETS["cpu"], PRESETS["paper"]
    assert smoke.steps < cpu.steps <= paper.steps
    assert smoke.batch_size <= cpu.batch_size <= paper.batch_size
    assert smoke.seq_len <= cpu.seq_len <= paper.seq_len
    assert smoke.eval_batches <= cpu.eval_batches <= paper.eval_batches
    assert smoke.converges is False and cpu.converges and paper.converges
    # the authors' settings (their configs), 1000 iterations: this book's control
    assert (paper.batch_size, paper.seq_len, paper.steps, paper.d_model, paper.lr) == (
        16,
        1024,
        1000,
        8,
        2e-3,
    )


def test_scale_train_config_is_accepted_by_train():
    scale = with_overrides(
        resolve("smoke"), steps=3, batch_size=2, seq_len=8, eval_every=1
    )
    assert scale.train == TrainConfig(
        steps=3, batch_size=2, seq_len=8, lr=2e-3, eval_every=1, eval_batches=1
    )
    assert scale.train_kwargs() == scale.train.to_dict()
    result = markovlib.train.train(
        markovlib.binary(0.2, 0.3),
        markovlib.TransformerConfig.theory(max_len=16),
        scale.train,
        execution=Execution(device="cpu", progress=False),
    )
    assert (
        result.history["step"].tolist() == [0, 1, 2, 3]
        and result.train_config == scale.train
    )


def test_chapter_settings_at_the_paper_scale():
    """Per chapter at paper scale the authors' figure settings; below it the scale's own
    sizes."""
    depth = resolve("paper", chapter="depth")
    assert (depth.steps, depth.seq_len, depth.seeds) == (500, 512, 3)  # Fig 1
    ms = resolve("paper", chapter="multi_state")
    assert (ms.steps, ms.seq_len, ms.trap_train.steps) == (5000, 1024, 1000)  # Fig 5
    for chapter in ("global_minimum", "bad_local_minima", "saddles"):
        s = resolve("paper", chapter=chapter)
        assert (s.seq_len, s.steps, s.trap_seeds) == (1024, 1000, 32) and s.source, (
            chapter
        )
    assert resolve("paper", chapter="bad_local_minima").n_variant_seeds == 8
    # a reader's re-run (cpu): each chapter's own "cpu" entry, with its reason
    depth = resolve("cpu", chapter="depth")
    assert (depth.seq_len, depth.steps, depth.trap_seeds) == (128, 400, 8)
    assert "a reader's re-run" in depth.source
    blm = resolve("cpu", chapter="bad_local_minima")
    assert (blm.trap_seeds, blm.n_variant_seeds, blm.seq_len) == (12, 4, 256)
    assert resolve("cpu", chapter="global_minimum") == replace(
        resolve("cpu"), chapter="global_minimum"
    )  # no "cpu" entry: the cpu scale itself
    assert resolve("smoke", chapter="depth").seq_len == resolve("smoke").seq_len
    assert "cpu" not in repr(resolve("paper", chapter="depth"))  # paper never sees it
    with pytest.raises(ValueError, match="chapter"):
        resolve("paper", chapter="nope")


def test_with_overrides_copies():
    smoke = PRESETS["smoke"]
    longer = with_overrides(smoke, steps=2000)
    assert longer.steps == 2000 and smoke.steps == 30
    assert longer.batch_size == smoke.batch_size and longer.name == smoke.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        smoke.steps = 1


def test_resolve_device_explicit():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


def test_initialisation_starts_are_the_grid_of_the_sizes():
    """The full-model starts: full_e values of e0 in [0.25, 1.25] times full_w values
    of w0 in [-1.4, 1.1]; at paper 4 x 7 = 28 per chain (56 runs)."""
    for name in ("smoke", "cpu", "paper"):
        Z = init_sizes(name)
        starts = Z.starts()
        assert starts.shape == (Z.full_e * Z.full_w, 2)
        assert sorted(set(starts[:, 0])) == list(
            np.linspace(0.25, 1.25, Z.full_e).round(6)
        )
        assert starts[:, 1].min() == -1.4 and starts[:, 1].max() == 1.1
    assert len(init_sizes("paper").starts()) == 28


@pytest.mark.parametrize("page", ["book/intro.md", "README.md"])
def test_the_scale_tables_quote_the_presets(page):
    """Every row of a page's table of scales says the steps, batch × length, seeds and
    trap seeds of markovlib.presets."""
    import re
    from pathlib import Path

    from markovlib.presets import PRESETS

    text = (Path(__file__).resolve().parents[1] / page).read_text()
    for name, S in PRESETS.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}`"))
        numbers = re.findall(r"\| (\d+) \| (\d+) × (\d+) \| (\d+) \| (\d+) \|", row)
        assert numbers == [
            tuple(
                str(v)
                for v in (S.steps, S.batch_size, S.seq_len, S.seeds, S.trap_seeds)
            )
        ], (page, row)
