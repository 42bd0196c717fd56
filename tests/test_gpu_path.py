"""The GPU code paths, exercised on the CPU: device selection, bfloat16 autocast,
torch.compile."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from markovlib.chains import binary
from markovlib.model import TransformerConfig
from markovlib.presets import resolve_device
from markovlib.train import Execution, train, train_many

KW = dict(steps=10, batch_size=4, seq_len=32, eval_every=5, eval_batches=1)
CONFIG = TransformerConfig.gpt2(max_len=64)


def test_auto_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.undo()
    result = train(
        binary(0.2, 0.3),
        CONFIG,
        **KW,
        execution=Execution(device="auto", progress=False),
    )
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert result.device.type == expected and result.settings["device"].startswith(
        expected
    )


def test_bf16_autocast_runs_and_stays_close_to_fp32():
    fp32 = train(
        binary(0.2, 0.3),
        CONFIG,
        seed=0,
        **KW,
        execution=Execution(device="cpu", progress=False),
    )
    bf16 = train(
        binary(0.2, 0.3),
        CONFIG,
        seed=0,
        precision="bf16",
        **KW,
        execution=Execution(device="cpu", progress=False),
    )
    a, b = (
        fp32.history["train_loss"][1:].to_numpy(),
        bf16.history["train_loss"][1:].to_numpy(),
    )
    assert np.isfinite(b).all() and not np.array_equal(
        a, b
    )  # it really ran in another precision
    np.testing.assert_allclose(b, a, atol=0.02)  # ... and computed the same thing
    assert (
        next(bf16.model.parameters()).dtype == torch.float32
    )  # master weights stay fp32
    assert bf16.settings["precision"] == "bf16"
    with pytest.raises(ValueError, match="precision"):
        train(
            binary(0.2, 0.3),
            CONFIG,
            precision="fp8",
            **KW,
            execution=Execution(device="cpu", progress=False),
        )


def test_compile_matches_eager():
    """torch.compile (inductor on the CPU) trains the same ensemble as eager mode, to
    float rounding."""
    chains = [binary(0.2, 0.3), binary(0.6, 0.7)]
    eager = train_many(
        chains,
        CONFIG,
        seeds=[0, 1],
        **KW,
        execution=Execution(device="cpu", progress=False),
    )
    compiled = train_many(
        chains,
        CONFIG,
        seeds=[0, 1],
        **KW,
        execution=Execution(device="cpu", progress=False, compile=True),
    )
    for e, c in zip(eager, compiled):
        np.testing.assert_allclose(
            c.history["train_loss"][1:], e.history["train_loss"][1:], atol=1e-5
        )
        for p, q in zip(c.model.parameters(), e.model.parameters()):
            torch.testing.assert_close(p, q, atol=1e-5, rtol=0)
