"""markovlib.model: shapes, presets, weight tying, causality and the attention window,
trace(), init, validation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from markovlib.model import Transformer, TransformerConfig

PRESETS = ("theory", "gpt2")


def _config(preset: str, **kw) -> TransformerConfig:
    return getattr(TransformerConfig, preset)(**kw)


def _model(preset: str, seed: int = 0, double: bool = True, **kw) -> Transformer:
    """A model with large random weights (init_std 0.5) so that every dependency is
    visible in the logits."""
    kw.setdefault("init_std", 0.5)
    kw.setdefault("max_len", 64)
    model = Transformer(
        _config(preset, **kw), generator=torch.Generator().manual_seed(seed)
    ).eval()
    return model.double() if double else model


def _tokens(k: int, batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(
        0, k, (batch, length), generator=torch.Generator().manual_seed(seed)
    )


# ---------------------------------------------------------------- shapes
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("n_layers", [1, 2])
@pytest.mark.parametrize("n_heads", [1, 2])
@pytest.mark.parametrize("k", [2, 5])
def test_output_shape(preset, n_layers, n_heads, k):
    model = Transformer(
        _config(
            preset,
            vocab_size=k,
            d_model=8,
            n_layers=n_layers,
            n_heads=n_heads,
            max_len=32,
        )
    )
    x = _tokens(k, 3, 11)
    logits = model(x)
    assert logits.shape == (3, 11, k)
    assert torch.isfinite(logits).all()
    probs = model.probabilities(x)
    assert probs.shape == (3, 11, k)
    torch.testing.assert_close(probs.sum(-1), torch.ones(3, 11))
    assert len(model.blocks) == n_layers


def test_length_one_and_max_len_inputs_work():
    model = Transformer(TransformerConfig.theory(max_len=16))
    assert model(torch.zeros(2, 1, dtype=torch.long)).shape == (2, 1, 2)
    assert model(torch.zeros(2, 16, dtype=torch.long)).shape == (2, 16, 2)


def test_sequence_longer_than_max_len_raises():
    model = Transformer(TransformerConfig.theory(max_len=16))
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len"):
        model.trace(torch.zeros(1, 17, dtype=torch.long))


# ---------------------------------------------------------------- presets
def test_gpt2_preset_has_biasless_layer_norms_and_gelu():
    model = Transformer(TransformerConfig.gpt2(n_layers=2))
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == 2 * 2 + 1  # ln_1, ln_2 per block and ln_f
    for block in model.blocks:
        assert isinstance(block.ln_1, nn.LayerNorm) and isinstance(
            block.ln_2, nn.LayerNorm
        )
        assert isinstance(block.ff.act, nn.GELU)
    assert isinstance(model.ln_f, nn.LayerNorm)
    for norm in norms:
        assert norm.bias is None
        assert torch.equal(norm.weight, torch.ones_like(norm.weight))
    assert model.head.bias is not None


def test_theory_preset_has_no_layer_norm_and_relu():
    model = Transformer(TransformerConfig.theory(n_layers=2))
    assert not any(isinstance(m, nn.LayerNorm) for m in model.modules())
    assert isinstance(model.ln_f, nn.Identity)
    for block in model.blocks:
        assert isinstance(block.ln_1, nn.Identity) and isinstance(
            block.ln_2, nn.Identity
        )
        assert isinstance(block.ff.act, nn.ReLU)
    assert model.config.layer_norm is False and model.config.activation == "relu"
    assert model.head.bias is not None


def test_config_to_dict_round_trips():
    cfg = TransformerConfig.gpt2(
        vocab_size=5, d_model=16, n_heads=2, window=3, tied=False
    )
    assert TransformerConfig(**cfg.to_dict()) == cfg
    assert cfg.to_dict()["layer_norm"] is True and cfg.to_dict()["activation"] == "gelu"


def test_feed_forward_width():
    model = Transformer(TransformerConfig.theory(d_model=8, ff_mult=3))
    assert model.blocks[0].ff.W_1.weight.shape == (24, 8)
    assert model.blocks[0].ff.W_2.weight.shape == (8, 24)


# ---------------------------------------------------------------- weight tying
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("k,d", [(2, 8), (5, 16)])
def test_tied_head_shares_storage(preset, k, d):
    model = Transformer(_config(preset, vocab_size=k, d_model=d, tied=True))
    assert model.head.weight is model.wte.weight
    assert model.head.weight.data_ptr() == model.wte.weight.data_ptr()
    with torch.no_grad():
        model.wte.weight[1, 0] = 3.25
    assert model.head.weight[1, 0].item() == 3.25
    with torch.no_grad():
        model.head.weight[0, 1] = -1.5
    assert model.wte.weight[0, 1].item() == -1.5
    assert "head.weight" not in dict(model.named_parameters())


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("k,d,L", [(2, 8, 1), (5, 16, 2)])
def test_untied_head_does_not_share_and_parameter_counts(preset, k, d, L):
    tied = Transformer(
        _config(preset, vocab_size=k, d_model=d, n_layers=L, tied=True, max_len=32)
    )
    untied = Transformer(
        _config(preset, vocab_size=k, d_model=d, n_layers=L, tied=False, max_len=32)
    )
    assert untied.head.weight is not untied.wte.weight
    assert untied.head.weight.data_ptr() != untied.wte.weight.data_ptr()
    before = untied.head.weight.detach().clone()
    with torch.no_grad():
        untied.wte.weight.add_(1.0)
    assert torch.equal(untied.head.weight, before)
    assert untied.n_params() - tied.n_params() == k * d
    # the count itself, from the architecture (wte, wpe, per block: Q K V O, W_1 W_2, LN
    # gains; ln_f; head bias)
    ln = preset == "gpt2"
    expected = (
        k * d
        + 32 * d
        + L * (4 * d * d + 2 * 4 * d * d + (2 * d if ln else 0))
        + (d if ln else 0)
        + k
    )
    assert tied.n_params() == expected
    assert untied.n_params() == expected + k * d


def test_tied_gradient_accumulates_from_embedding_and_head():
    model = Transformer(TransformerConfig.theory(max_len=16))
    x = _tokens(2, 2, 8)
    model(x).sum().backward()
    grad = model.wte.weight.grad.clone()
    # untied copy with the same weights: the tied gradient is the sum of the two
    # gradients
    untied = Transformer(TransformerConfig.theory(max_len=16, tied=False))
    untied.load_state_dict({k: v for k, v in model.state_dict().items()}, strict=False)
    with torch.no_grad():
        untied.head.weight.copy_(model.wte.weight)
    untied(x).sum().backward()
    torch.testing.assert_close(grad, untied.wte.weight.grad + untied.head.weight.grad)


# ---------------------------------------------------------------- causality and windows
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("n_layers,n_heads,k", [(1, 1, 2), (2, 2, 5)])
def test_causality(preset, n_layers, n_heads, k):
    model = _model(preset, vocab_size=k, d_model=8, n_layers=n_layers, n_heads=n_heads)
    x = _tokens(k, 4, 12, seed=1)
    m = 6
    x2 = x.clone()
    x2[:, m] = (x[:, m] + 1) % k
    a, b = model(x), model(x2)
    torch.testing.assert_close(a[:, :m], b[:, :m], rtol=0, atol=1e-12)
    diff = (a - b).abs().amax(-1)  # (batch, length)
    assert (diff[:, m] > 1e-4).all()  # the changed token itself matters
    assert (diff[:, m + 1 :] > 1e-6).all()  # and every later position sees it


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("window", [0, 1, 3])
def test_window_mask_one_layer(preset, window):
    model = _model(preset, vocab_size=3, d_model=8, window=window)
    x = _tokens(3, 4, 14, seed=2)
    m = 5
    x2 = x.clone()
    x2[:, m] = (x[:, m] + 1) % 3
    diff = (model(x) - model(x2)).abs().amax(-1)
    assert (diff[:, :m] < 1e-12).all()
    assert (diff[:, m + window + 1 :] < 1e-12).all()  # beyond the window: not seen
    assert (diff[:, m : m + window + 1] > 1e-6).all()  # inside the window: seen


def test_window_mask_two_layers_reaches_two_windows():
    window = 2
    model = _model("theory", vocab_size=3, d_model=8, n_layers=2, window=window)
    x = _tokens(3, 4, 16, seed=3)
    m = 4
    x2 = x.clone()
    x2[:, m] = (x[:, m] + 1) % 3
    diff = (model(x) - model(x2)).abs().amax(-1)
    assert (diff[:, m + 2 * window + 1 :] < 1e-12).all()
    assert (diff[:, m : m + 2 * window + 1] > 1e-8).all()


def test_no_window_sees_the_whole_past():
    model = _model("theory", vocab_size=2, d_model=8)
    x = _tokens(2, 4, 30, seed=4)
    x2 = x.clone()
    x2[:, 0] = 1 - x[:, 0]
    diff = (model(x) - model(x2)).abs().amax(-1)
    assert (diff[:, -1] > 1e-8).all()


def test_mask_matrix():
    attn = Transformer(TransformerConfig.theory(window=2)).blocks[0].attn
    mask = attn.mask(5, "cpu")
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [0, 1, 1, 1, 0],
            [0, 0, 1, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(mask, expected)
    full = Transformer(TransformerConfig.theory()).blocks[0].attn.mask(4, "cpu")
    assert torch.equal(full, torch.ones(4, 4, dtype=torch.bool).tril())


# ---------------------------------------------------------------- trace
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("window", [None, 3])
@pytest.mark.parametrize("n_heads", [1, 2])
def test_trace_matches_forward(preset, window, n_heads):
    model = Transformer(
        _config(
            preset,
            vocab_size=3,
            d_model=8,
            n_layers=2,
            n_heads=n_heads,
            window=window,
            init_std=0.3,
            max_len=32,
        ),
        generator=torch.Generator().manual_seed(5),
    )
    x = _tokens(3, 3, 20, seed=6)
    t = model.trace(x)
    torch.testing.assert_close(t["logits"], model(x), rtol=0, atol=1e-5)
    assert len(t["layers"]) == 2
    L = x.shape[1]
    mask = model.blocks[0].attn.mask(L, "cpu")
    for layer in t["layers"]:
        att = layer["attention_weights"]
        assert att.shape == (3, n_heads, L, L)
        torch.testing.assert_close(
            att.sum(-1), torch.ones(3, n_heads, L), rtol=0, atol=1e-6
        )
        assert torch.all(att[..., ~mask] == 0)
        assert torch.all(att[..., mask] > 0)
    torch.testing.assert_close(t["layers"][0]["input"], t["embedding"])
    # each block maps its input to input + attention + ff, and the next block starts
    # there
    first, second = t["layers"]
    torch.testing.assert_close(
        second["input"],
        first["input"] + first["attention"] + first["ff"],
        atol=1e-6,
        rtol=0,
    )
    torch.testing.assert_close(
        t["output"],
        second["input"] + second["attention"] + second["ff"],
        atol=1e-6,
        rtol=0,
    )


def test_forward_matches_paper_equations():
    """An independent implementation of one theory layer (paper eqs. for attention, FF,
    linear head)."""
    model = _model("theory", vocab_size=3, d_model=8, n_heads=1, init_std=0.3)
    x = _tokens(3, 2, 9, seed=7)
    blk = model.blocks[0]
    E, Pos = model.wte.weight, model.wpe.weight
    WQ, WK, WV, WO = (
        m.weight for m in (blk.attn.W_Q, blk.attn.W_K, blk.attn.W_V, blk.attn.W_O)
    )
    W1, W2 = blk.ff.W_1.weight, blk.ff.W_2.weight
    A, b = model.head.weight, model.head.bias
    d = 8
    out = torch.empty(2, 9, 3, dtype=torch.float64)
    with torch.no_grad():
        for bi in range(2):
            emb = [E[x[bi, n]] + Pos[n] for n in range(9)]
            for n in range(9):
                scores = torch.stack(
                    [(WQ @ emb[n]) @ (WK @ emb[i]) / math.sqrt(d) for i in range(n + 1)]
                )
                att = torch.softmax(scores, 0)
                y = emb[n] + WO @ sum(att[i] * (WV @ emb[i]) for i in range(n + 1))
                z = y + W2 @ torch.relu(W1 @ y)
                out[bi, n] = A @ z + b
    torch.testing.assert_close(model(x), out, rtol=0, atol=1e-10)


# ---------------------------------------------------------------- initialisation
def test_initialisation_statistics():
    L, d, std = 2, 256, 0.02
    model = Transformer(
        TransformerConfig.gpt2(d_model=d, n_layers=L, init_std=std, tied=False),
        generator=torch.Generator().manual_seed(0),
    )
    residual = std / math.sqrt(2 * L)
    for block in model.blocks:
        for w in (block.attn.W_O.weight, block.ff.W_2.weight):
            assert w.std().item() == pytest.approx(residual, rel=0.2)
            assert abs(w.mean().item()) < 0.1 * residual
        for w in (
            block.attn.W_Q.weight,
            block.attn.W_K.weight,
            block.attn.W_V.weight,
            block.ff.W_1.weight,
        ):
            assert w.std().item() == pytest.approx(std, rel=0.2)
        assert torch.equal(block.ln_1.weight, torch.ones(d)) and torch.equal(
            block.ln_2.weight, torch.ones(d)
        )
    for w in (model.wte.weight, model.wpe.weight, model.head.weight):
        assert w.std().item() == pytest.approx(std, rel=0.2)
    assert torch.equal(model.head.bias, torch.zeros(2))


def test_init_is_reproducible_with_a_generator():
    cfg = TransformerConfig.theory(max_len=32)
    a = Transformer(cfg, generator=torch.Generator().manual_seed(3)).state_dict()
    b = Transformer(cfg, generator=torch.Generator().manual_seed(3)).state_dict()
    c = Transformer(cfg, generator=torch.Generator().manual_seed(4)).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "field,value",
    [
        ("vocab_size", 1),
        ("vocab_size", 0),
        ("vocab_size", 2.0),
        ("vocab_size", True),
        ("d_model", 0),
        ("d_model", -8),
        ("n_layers", 0),
        ("n_heads", 0),
        ("max_len", 0),
        ("ff_mult", 0),
        ("activation", "tanh"),
        ("window", -1),
        ("window", 1.5),
        ("init_std", 0.0),
        ("init_std", float("nan")),
    ],
)
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=rf"^{field}\b"):
        TransformerConfig(**{field: value})


def test_config_rejects_heads_not_dividing_d_model():
    with pytest.raises(ValueError, match=r"n_heads") as info:
        TransformerConfig(d_model=8, n_heads=3)
    assert "d_model" in str(info.value)
    TransformerConfig(d_model=8, n_heads=4)  # divides: fine


def test_presets_reject_bad_values_too():
    with pytest.raises(ValueError, match="vocab_size"):
        TransformerConfig.gpt2(vocab_size=1)
    with pytest.raises(ValueError, match="window"):
        TransformerConfig.theory(window=-2)


# ------------------------------------- the uni-embedding (the authors' App. D model)
def _uni(tied=True, **kw):
    cfg = TransformerConfig.theory(d_model=4, tied=tied, embedding="uni", max_len=16)
    return Transformer(cfg, generator=torch.Generator().manual_seed(3), **kw)


@pytest.mark.parametrize("tied", [True, False])
def test_uni_embedding_is_x_e_plus_p_and_one_logit(tied):
    """Paper Sec. 2: x_n -> x_n e + p_n; logit_n = <a, z_n> + b (a = e when tied),
    computed here by hand from the model's own parameters."""
    model = _uni(tied)
    x = torch.tensor([[0, 1, 1, 0, 1]])
    e, pos = model.wte.weight[1], model.wpe.weight[:5]
    assert torch.equal(model.wte.weight[0], torch.zeros(4))
    assert torch.allclose(model.embed(x)[0], x[0, :, None] * e + pos)
    trace = model.trace(x)
    a, b = model.head.weight[1], model.head.bias[1]
    if tied:
        assert model.head.weight is model.wte.weight
    logits = trace["logits"][0]
    assert torch.equal(logits[:, 0], torch.zeros(5))  # state 0's logit: exactly 0
    assert torch.allclose(logits[:, 1], trace["output"][0] @ a + b, atol=1e-6)


@pytest.mark.parametrize("tied", [True, False])
def test_uni_embedding_keeps_state_zero_at_zero_through_adamw(tied):
    """An ensemble of 3 trained 20 AdamW steps with weight decay: state 0's embedding,
    head row and bias stay exactly 0 in every member; e moves and is decayed."""
    from markovlib.chains import binary
    from markovlib.train import train_many

    cfg = TransformerConfig.theory(d_model=4, tied=tied, embedding="uni", max_len=16)
    runs = train_many(
        binary(0.3, 0.6), cfg, steps=20, batch_size=4, seq_len=16, seeds=[0, 1, 2],
        eval_every=10, eval_batches=1, weight_decay=0.1,
    )  # fmt: skip
    for run in runs:
        m = run.model
        assert torch.equal(m.wte.weight[0], torch.zeros(4))
        assert torch.equal(m.head.weight[0], torch.zeros(4))
        assert m.head.bias[0].item() == 0.0 and m.head.bias[1].item() != 0.0
        assert float(m.wte.weight[1].abs().sum()) > 0
        assert any(p is m.wte.weight for p in m.decayed_parameters())
    table = Transformer(TransformerConfig.theory(d_model=4))
    assert not any(p is table.wte.weight for p in table.decayed_parameters())


def test_uni_embedding_is_binary_only_and_keeps_the_other_keys():
    from markovlib.runs.spec import grid

    with pytest.raises(ValueError, match="vocab_size 2; got 5"):
        TransformerConfig.theory(vocab_size=5, embedding="uni")
    with pytest.raises(ValueError, match="embedding must be 'table' or 'uni'"):
        TransformerConfig(embedding="one-hot")
    table, uni = (
        grid([0.2], [0.3], tied=[True], seeds=[0], preset="theory",
             config_kwargs=kw, train=dict(steps=5, batch_size=2, seq_len=8))[0]
        for kw in ({}, {"embedding": "uni"})
    )  # fmt: skip
    assert "embedding" not in table.as_dict()["config"]  # keys made before it exist
    assert uni.as_dict()["config"]["embedding"] == "uni" and table.key != uni.key
