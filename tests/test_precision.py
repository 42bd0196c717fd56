"""fp16 autocast without loss scaling (the authors' train_base) and with a static
loss scale: bit-reproducible on the CPU, really half precision, part of the key."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from markovlib.chains import binary
from markovlib.model import TransformerConfig
from markovlib.runs.spec import grid
from markovlib.train import LOSS_SCALE, Execution, train, train_many

KW = dict(steps=12, batch_size=4, seq_len=64, eval_every=4, eval_batches=1)
CONFIG = TransformerConfig.gpt2(max_len=64)


def test_fp16_is_bit_reproducible_and_really_half_precision():
    torch.set_num_threads(1)
    a, b = (
        train(
            binary(0.5, 0.8),
            CONFIG,
            seed=3,
            precision="fp16",
            **KW,
            execution=Execution(device="cpu", progress=False),
        )
        for _ in range(2)
    )
    assert a.history.equals(b.history)
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(p, q) and p.dtype == torch.float32  # fp32 master weights
    fp32 = train(
        binary(0.5, 0.8),
        CONFIG,
        seed=3,
        **KW,
        execution=Execution(device="cpu", progress=False),
    )
    x, y = (r.history["train_loss"][1:].to_numpy() for r in (a, fp32))
    assert not np.array_equal(x, y)  # it ran in another precision ...
    np.testing.assert_allclose(x, y, atol=0.02)  # ... and computed the same loss


def test_static_loss_scale_is_undone_before_the_step():
    """With 2^16 the fp16 gradients are those of the loss, not 2^16 times them: the
    weights move as in float32 (AdamW is scale-free but its eps is not)."""
    scaled = train(
        binary(0.5, 0.8),
        CONFIG,
        seed=1,
        precision="fp16-scaled",
        **KW,
        execution=Execution(device="cpu", progress=False),
    )
    fp32 = train(
        binary(0.5, 0.8),
        CONFIG,
        seed=1,
        **KW,
        execution=Execution(device="cpu", progress=False),
    )
    assert LOSS_SCALE == 2.0**16
    for p, q in zip(scaled.model.parameters(), fp32.model.parameters()):
        torch.testing.assert_close(p, q, atol=5e-3, rtol=0)


def test_precision_is_part_of_the_key_and_ensembles_match_single_runs():
    a, b = (
        grid(
            [0.5],
            [0.8],
            tied=[True],
            precision=pr,
            **{k: KW[k] for k in KW if k != "progress"},
        )[0]
        for pr in ("fp32", "fp16")
    )
    assert a.key != b.key and b.train.precision == "fp16"
    many = train_many(
        binary(0.5, 0.8),
        CONFIG,
        seeds=[3, 4],
        precision="fp16",
        **KW,
        execution=Execution(device="cpu", progress=False),
    )
    one = train(
        binary(0.5, 0.8),
        CONFIG,
        seed=4,
        precision="fp16",
        **KW,
        execution=Execution(device="cpu", progress=False),
    )
    np.testing.assert_allclose(
        many[1].history["train_loss"][1:], one.history["train_loss"][1:], atol=2e-3
    )


def _trapped_run():
    from markovlib.runs.experiments import paper_edition
    from markovlib.runs.shipped import ShippedData, default_data_dir

    directory = default_data_dir()
    if directory is None:
        pytest.skip("no shipped data in this checkout")
    spec = dict(paper_edition())["trap400-gpt2-tied-fp32"][9]  # ended at H(π)
    return ShippedData(directory).load(spec)


def test_fp16_without_scaling_flushes_the_attention_gradient_to_zero():
    """At θ_π with batch 16 × length 1024, every entry of W_Q's and W_K's gradient is
    exactly zero in fp16 without scaling; the 2^16 scale restores the float32
    gradient; with 16x fewer tokens per batch the per-token gradient is 16x larger
    and W_Q's gradient no longer vanishes whole."""
    from markovlib.precision import gradient_comparison, gradients

    run = _trapped_run()
    torch.set_num_threads(1)
    x = binary(0.5, 0.8).sample(16, 1025, seed=99)
    table = gradient_comparison(run.model, x)
    for name in ("blocks.0.attn.W_Q.weight", "blocks.0.attn.W_K.weight"):
        assert table.loc[name, "fp16 zero share"] == 1.0
        assert table.loc[name, "fp16-scaled zero share"] == 0.0
        assert table.loc[name, "fp16-scaled cosine"] > 0.99
        assert table.loc[name, "fp32 norm"] > 0  # float32 sees a gradient there
    assert table.loc["head.bias", "fp16 cosine"] > 0.99  # the output survives
    # an independent float32 gradient: autograd on the same loss
    from markovlib.train import cross_entropy

    run.model.zero_grad()
    cross_entropy(run.model, x).backward()
    reference = {n: p.grad.clone() for n, p in run.model.named_parameters()}
    mine = gradients(run.model, x, "fp32")
    for name, grad in reference.items():
        torch.testing.assert_close(mine[name], grad)
    short = gradients(run.model, x[:4, :257], "fp16")["blocks.0.attn.W_Q.weight"]
    assert (short == 0).float().mean() < 1.0
