"""Ensembles: N models trained in one batched step behave exactly like N separate
runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from markovlib.chains import binary
from markovlib.model import Transformer, TransformerConfig
from markovlib.train import Execution, make_optimizer, train, train_many

SMALL = dict(
    steps=12,
    batch_size=4,
    seq_len=32,
    eval_every=4,
    eval_batches=2,
)
CPU = Execution(device="cpu", progress=False)


@pytest.mark.parametrize(
    "config",
    [
        TransformerConfig.gpt2(tied=True, max_len=64),
        TransformerConfig.theory(
            tied=False, max_len=64, n_layers=2, n_heads=2, window=5
        ),
    ],
    ids=["gpt2-tied", "theory-untied-2layer-window"],
)
def test_member_equals_single_run(config):
    chains = [binary(0.2, 0.3), binary(0.6, 0.7), binary(0.5, 0.8)]
    seeds = [3, 11, 12]
    members = train_many(chains, config, seeds=seeds, **SMALL, execution=CPU)
    for chain, seed, member in zip(chains, seeds, members):
        single = train(chain, config, seed=seed, **SMALL, execution=CPU)
        pd.testing.assert_frame_equal(
            member.history, single.history, check_exact=False, rtol=0, atol=2e-5
        )
        for (name, p), q in zip(
            member.model.named_parameters(), single.model.parameters()
        ):
            torch.testing.assert_close(p, q, rtol=0, atol=2e-5, msg=name)
        assert (
            member.seed == seed
            and member.chain is chain
            and member.test_seed == single.test_seed
        )
        np.testing.assert_allclose(
            member.learnt_kernel(), single.learnt_kernel(), atol=1e-5
        )


def test_members_do_not_interact():
    """Member 0's history does not depend on who else is in the ensemble."""
    config = TransformerConfig.gpt2(tied=True, max_len=64)
    alone = train_many(binary(0.2, 0.3), config, seeds=[5], **SMALL, execution=CPU)[0]
    crowd = train_many(
        [binary(0.2, 0.3), binary(0.9, 0.9), binary(0.1, 0.1)],
        config,
        seeds=[5, 6, 7],
        **SMALL,
        execution=CPU,
    )
    pd.testing.assert_frame_equal(
        alone.history, crowd[0].history, check_exact=False, rtol=0, atol=2e-5
    )
    assert not np.allclose(
        crowd[0].history["train_loss"][1:], crowd[1].history["train_loss"][1:]
    )


def test_ensemble_init_matches_single_models():
    config = TransformerConfig.gpt2(tied=False, max_len=16)
    gens = [torch.Generator().manual_seed(s) for s in (1, 2)]
    ensemble = Transformer(config, n_models=2, generators=gens)
    for i, s in enumerate((1, 2)):
        single = Transformer(config, generator=torch.Generator().manual_seed(s))
        for p, q in zip(ensemble.member(i).parameters(), single.parameters()):
            assert torch.equal(p, q)
    x = torch.randint(0, 2, (2, 3, 10))
    out = ensemble(x)
    assert out.shape == (2, 3, 10, 2)
    torch.testing.assert_close(out[1], ensemble.member(1)(x[1]), rtol=0, atol=1e-6)


def test_ensemble_tying_and_weight_decay_groups():
    ensemble = Transformer(TransformerConfig.gpt2(tied=True, max_len=16), n_models=3)
    assert (
        ensemble.head.weight is ensemble.wte.weight
        and ensemble.wte.weight.shape == (3, 2, 8)
    )
    groups = make_optimizer(ensemble, 1e-3, 0.1).param_groups
    decayed = {id(p) for p in groups[0]["params"]}
    model = Transformer(TransformerConfig.gpt2(tied=True, max_len=16))
    single = {id(p) for p in make_optimizer(model, 1e-3).param_groups[0]["params"]}
    single_names = {n for n, p in model.named_parameters() if id(p) in single}
    assert single_names == {
        n for n, p in ensemble.named_parameters() if id(p) in decayed
    }  # same groups per member
    assert all(".W_" in n for n in single_names) and len(single_names) == 6
    assert groups[0]["weight_decay"] == 0.1 and groups[1]["weight_decay"] == 0.0


def test_escape_step():
    result = train_many(
        binary(0.1, 0.1),
        TransformerConfig.gpt2(max_len=64),
        seeds=[0],
        steps=60,
        batch_size=8,
        seq_len=64,
        eval_every=5,
        eval_batches=2,
        execution=Execution(device="cpu", progress=False),
    )[0]
    h_rate = result.chain.entropy_rate()
    step = result.escape_step(0.005)
    tests = result.test_history
    if step is None:
        assert (tests["test_loss"] > h_rate + 0.005).all()
    else:
        assert tests.loc[tests["step"] == step, "test_loss"].item() <= h_rate + 0.005
        assert (tests.loc[tests["step"] < step, "test_loss"] > h_rate + 0.005).all()
    assert result.escape_step(10.0) == 0  # within 10 nats from the start
    assert result.escape_step(-1.0) is None  # never below H_rate - 1


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(seeds=[]), "seeds"),
        (dict(seeds=[1, True]), "seeds"),
        (dict(seeds=[1, 2], chains=[binary(0.2, 0.3)] * 3), "chains"),
    ],
)
def test_train_many_bad_arguments(bad, match):
    kwargs = dict(chains=binary(0.2, 0.3), seeds=[0], **SMALL)
    kwargs.update(bad)
    with pytest.raises(ValueError, match=match):
        train_many(
            kwargs.pop("chains"),
            TransformerConfig.gpt2(max_len=64),
            execution=CPU,
            **kwargs,
        )


def test_n_models_must_be_positive():
    with pytest.raises(ValueError, match="n_models"):
        Transformer(TransformerConfig.theory(), n_models=0)
    with pytest.raises(ValueError, match="member"):
        Transformer(TransformerConfig.theory()).member(0)
