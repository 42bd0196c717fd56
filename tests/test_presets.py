"""markovlib.presets: scale resolution, the environment override, and the ordering of the scales."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import markovlib
import markovlib.train
from markovlib.presets import ENV_VAR, PRESETS, Scale, resolve, resolve_device, with_overrides


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
    custom = Scale("custom", steps=7, batch_size=2, seq_len=8, seeds=1, trap_seeds=2, d_model=4, eval_every=1,
                   eval_batches=1)
    assert resolve(custom) is custom


def test_scales_are_ordered():
    smoke, cpu, paper = PRESETS["smoke"], PRESETS["cpu"], PRESETS["paper"]
    assert smoke.steps < cpu.steps <= paper.steps
    assert smoke.batch_size <= cpu.batch_size <= paper.batch_size
    assert smoke.seq_len <= cpu.seq_len <= paper.seq_len
    assert smoke.eval_batches <= cpu.eval_batches <= paper.eval_batches
    assert smoke.converges is False and cpu.converges and paper.converges
    # PAPER.md: the authors' settings
    assert (paper.batch_size, paper.seq_len, paper.steps, paper.d_model, paper.lr) == (16, 1024, 1000, 8, 2e-3)


def test_train_kwargs_are_accepted_by_train():
    scale = with_overrides(resolve("smoke"), steps=3, batch_size=2, seq_len=8, eval_every=1)
    kwargs = scale.train_kwargs()
    assert set(kwargs) == {"steps", "batch_size", "seq_len", "lr", "eval_every", "eval_batches"}
    result = markovlib.train.train(markovlib.binary(0.2, 0.3), markovlib.TransformerConfig.theory(max_len=16),
                             device="cpu", progress=False, **kwargs)
    assert result.history["step"].tolist() == [0, 1, 2, 3]


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
