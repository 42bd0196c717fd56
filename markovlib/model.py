"""The single-layer (or depth-L) transformer of the paper, Sec. 2 and App. A.

Per position n: x_n = e_{x_n} + p_n (embedding), y_n = x_n + W_O Σ_{i≤n} att_{n,i}
W_V x_i (attention), z_n = y_n + W_2 act(W_1 y_n) (feed-forward), logits_n = A
z_n + b (linear head, A = E when tied). Two presets: ``TransformerConfig.theory`` (no
layer norm, ReLU: the model of the theorems) and ``TransformerConfig.gpt2`` (pre-LN
blocks, final LN, GELU: the authors' experimental model).

For k = 2 the head returns two logits; softmax over them is
sigmoid(<a_1 - a_0, z> + b_1 - b_0), the paper's single-logit output with a = a_1 - a_0,
so every binary statement of the paper holds for this model too.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import check_int

__all__ = [
    "TransformerConfig",
    "Transformer",
    "attention_off",
    "attention_skipped",
    "EMBEDDINGS",
]


@dataclass
class TransformerConfig:
    """Architecture of :class:`Transformer`."""

    vocab_size: int = 2  # k, the number of states
    d_model: int = 8  # d, the embedding dimension (paper: 8)
    n_layers: int = 1  # L, attention + feed-forward blocks
    n_heads: int = 1
    tied: bool = True  # head weight A is the token embedding E (one shared Parameter)
    layer_norm: bool = False  # GPT-2 pre-LN blocks and a final LN (no LN bias)
    activation: str = "relu"  # "relu" (theory) or "gelu" (GPT-2)
    window: int | None = (
        None  # attend to positions n-window..n only (None: all of 1..n)
    )
    init_std: float = (
        0.02  # N(0, init_std) init; residual projections use init_std / sqrt(2L)
    )
    max_len: int = 1024  # longest sequence (size of the positional table)
    ff_mult: int = 4  # hidden width of the feed-forward layer is ff_mult * d
    # "table": one embedding e_i per state; "uni": the paper's uni-embedding of a
    # binary state, x_n e (Sec. 2), with one logit <a, z_n> + b (k = 2 only; the
    # model returns the logits (0, <a, z_n> + b))
    embedding: str = "table"

    def __post_init__(self):
        for name in (
            "vocab_size",
            "d_model",
            "n_layers",
            "n_heads",
            "max_len",
            "ff_mult",
        ):
            check_int(name, getattr(self, name), 2 if name == "vocab_size" else 1)
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads "
                f"({self.n_heads})"
            )
        if self.activation not in ("relu", "gelu"):
            raise ValueError(
                f"activation must be 'relu' or 'gelu'; got {self.activation!r}"
            )
        if self.embedding not in EMBEDDINGS:
            raise ValueError(
                f"embedding must be 'table' or 'uni'; got {self.embedding!r}"
            )
        if self.embedding == "uni" and self.vocab_size != 2:
            raise ValueError(
                f"the uni-embedding is for binary chains: vocab_size 2; got "
                f"{self.vocab_size}"
            )
        if self.window is not None:
            check_int("window", self.window, 0)
        if not self.init_std > 0:
            raise ValueError(f"init_std must be > 0; got {self.init_std!r}")

    @classmethod
    def theory(cls, vocab_size: int = 2, d_model: int = 8, **kw) -> TransformerConfig:
        """The model of the theorems: no layer norm, ReLU feed-forward."""
        return cls(
            vocab_size=vocab_size,
            d_model=d_model,
            **{"layer_norm": False, "activation": "relu", **kw},
        )

    @classmethod
    def gpt2(cls, vocab_size: int = 2, d_model: int = 8, **kw) -> TransformerConfig:
        """The authors' experimental model: pre-LN GPT-2 blocks, final LN, GELU, biased
        tied head."""
        return cls(
            vocab_size=vocab_size,
            d_model=d_model,
            **{"layer_norm": True, "activation": "gelu", **kw},
        )

    def to_dict(self) -> dict:
        """The fields, without ``embedding`` where it is the default "table" (so a
        spec's key is the key it had before the field existed)."""
        d = asdict(self)
        if d["embedding"] == "table":
            del d["embedding"]
        return d


EMBEDDINGS = ("table", "uni")


# Ensembles: an ensemble of N models is one Transformer whose parameters carry a leading
# model axis (shape (N, *shape)) and whose inputs are (N, batch, length). The three
# layers below fall back to the plain torch layers for a single model and broadcast over
# the model axis otherwise, so that the whole ensemble runs as batched matmuls and one
# merged attention call (torch.func.vmap has no batching rule for the fused CPU
# attention kernel).
def _per_member(param: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A stacked parameter (N, *shape) viewed with as many axes as the ensemble's inputs
    x (N, ...), (N, 1, ..., 1, *shape), so that it broadcasts over them."""
    ones = [1] * (x.dim() - param.dim())
    return param.reshape(param.shape[0], *ones, *param.shape[1:])


class Linear(nn.Linear):
    """nn.Linear that also takes stacked weights (N, out, in) and inputs
    (N, ..., in)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 2:
            return super().forward(x)
        out = x @ _per_member(self.weight.mT, x)
        return out if self.bias is None else out + _per_member(self.bias, x)


class Embedding(nn.Embedding):
    """nn.Embedding that also takes stacked tables (N, V, d) and indices (N, ...)."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 2:
            return super().forward(idx)
        members = torch.arange(self.weight.shape[0], device=idx.device).view(
            -1, *[1] * (idx.dim() - 1)
        )
        return self.weight[members, idx]


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm (gain only) that also takes stacked gains (N, d) and inputs
    (N, ..., d)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 1:
            return super().forward(x)
        gain = _per_member(self.weight, x)
        return F.layer_norm(x, self.normalized_shape, eps=self.eps) * gain


def _without_state_zero_row(grad: torch.Tensor) -> torch.Tensor:
    """The gradient of a (..., k, d) table or head with state 0's row set to 0."""
    grad = grad.clone()
    grad[..., 0, :] = 0
    return grad


def _without_state_zero_entry(grad: torch.Tensor) -> torch.Tensor:
    """The gradient of a (..., k) bias with state 0's entry set to 0."""
    grad = grad.clone()
    grad[..., 0] = 0
    return grad


def _norm(cfg: TransformerConfig) -> nn.Module:
    return LayerNorm(cfg.d_model, bias=False) if cfg.layer_norm else nn.Identity()


class CausalSelfAttention(nn.Module):
    """Σ_{i≤n} att_{n,i} W_V x_i with att = softmax(<W_Q x_n, W_K x_i>/sqrt(d_head)),
    then W_O (paper eq. 2)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        d = cfg.d_model
        self.n_heads, self.window = cfg.n_heads, cfg.window
        self.W_Q, self.W_K, self.W_V = (Linear(d, d, bias=False) for _ in range(3))
        self.W_O = Linear(d, d, bias=False)

    def mask(self, length: int, device) -> torch.Tensor:
        """Boolean (L, L) mask: True where position n may attend to position
        i (i ≤ n, n - i ≤ window)."""
        n = torch.arange(length, device=device)
        gap = n[:, None] - n[None, :]
        allowed = gap >= 0
        return allowed & (gap <= self.window) if self.window is not None else allowed

    def forward(self, x: torch.Tensor, trace: dict | None = None) -> torch.Tensor:
        *lead, L, d = (
            x.shape
        )  # lead: (batch,) or (models, batch); merged into one attention batch
        q, k, v = (
            W(x).reshape(-1, L, self.n_heads, d // self.n_heads).transpose(1, 2)
            for W in (self.W_Q, self.W_K, self.W_V)
        )
        if trace is None:
            mask = None if self.window is None else self.mask(L, x.device)
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None
            )
        else:  # explicit softmax, to expose the attention weights
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            att = scores.masked_fill(~self.mask(L, x.device), float("-inf")).softmax(-1)
            trace["attention_weights"] = att
            out = att @ v
        return self.W_O(out.transpose(1, 2).reshape(*lead, L, d))


class FeedForward(nn.Module):
    """W_2 act(W_1 y), hidden width ff_mult * d (paper eq. 3)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.W_1 = Linear(cfg.d_model, cfg.ff_mult * cfg.d_model, bias=False)
        self.W_2 = Linear(cfg.ff_mult * cfg.d_model, cfg.d_model, bias=False)
        self.act = nn.ReLU() if cfg.activation == "relu" else nn.GELU()

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.W_2(self.act(self.W_1(y)))


class Block(nn.Module):
    """y = x + attn(ln_1 x); z = y + ff(ln_2 y) (LN is the identity in the theory
    preset)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.ff = (
            _norm(cfg),
            CausalSelfAttention(cfg),
            _norm(cfg),
            FeedForward(cfg),
        )

    def forward(self, x: torch.Tensor, trace: dict | None = None) -> torch.Tensor:
        a = self.attn(self.ln_1(x), trace)
        y = x + a
        f = self.ff(self.ln_2(y))
        if trace is not None:
            trace.update(input=x, attention=a, ff=f)
        return y + f


class Transformer(nn.Module):
    """Next-state predictor: (batch, length) int64 states → (batch, length, k) logits.

    With ``n_models=N`` it is an ensemble of N independent models of one architecture:
    every parameter has a leading model axis, inputs are (N, batch, length) and logits
    (N, batch, length, k); member i is initialised exactly as a single model with
    ``generators[i]`` (see :meth:`member`).
    """

    def __init__(
        self,
        config: TransformerConfig,
        *,
        generator: torch.Generator | None = None,
        n_models: int | None = None,
        generators: list[torch.Generator] | None = None,
    ):
        super().__init__()
        self.config = cfg = config
        self.n_models = n_models
        self.wte = Embedding(cfg.vocab_size, cfg.d_model)  # token embeddings e_1..e_k
        self.wpe = Embedding(cfg.max_len, cfg.d_model)  # positional embeddings p_n
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = _norm(cfg)
        self.head = Linear(cfg.d_model, cfg.vocab_size, bias=True)  # logits = A z + b
        if n_models is not None:
            check_int("n_models", n_models, 1)
            for module in self.modules():
                for name, p in list(module.named_parameters(recurse=False)):
                    setattr(
                        module,
                        name,
                        nn.Parameter(p.detach().expand(n_models, *p.shape).clone()),
                    )
        if cfg.tied:
            self.head.weight = self.wte.weight  # one Parameter, not a copy
        if cfg.embedding == "uni":  # state 0's embedding and logit stay exactly 0
            matrices = {id(p): p for p in (self.wte.weight, self.head.weight)}
            for p in matrices.values():
                p.register_hook(_without_state_zero_row)
            self.head.bias.register_hook(_without_state_zero_entry)
        if n_models is None:
            self.reset_parameters(generator)
        else:
            generators = (
                generators if generators is not None else [generator] * n_models
            )
            if len(generators) != n_models:
                raise ValueError(
                    f"generators must have n_models={n_models} entries; got "
                    f"{len(generators)}"
                )
            for i, g in enumerate(generators):
                self.reset_parameters(g, member=i)

    @torch.no_grad()
    def reset_parameters(
        self, generator: torch.Generator | None = None, member: int | None = None
    ) -> None:
        """N(0, init_std) weights, N(0, init_std/sqrt(2L)) for W_O and W_2, zero biases,
        unit LN gains."""
        std = self.config.init_std
        for name, p in self.named_parameters():
            p = p if member is None else p[member]
            if p.dim() == 1:
                nn.init.ones_(p) if "ln" in name else nn.init.zeros_(p)
            else:
                scale = (
                    1 / math.sqrt(2 * self.config.n_layers)
                    if name.endswith(("W_O.weight", "W_2.weight"))
                    else 1.0
                )
                nn.init.normal_(p, 0.0, std * scale, generator=generator)
        if self.config.embedding == "uni":  # x_n e: state 0 embeds to 0; one logit
            for p in (self.wte.weight, self.head.weight, self.head.bias):
                (p if member is None else p[member])[0].zero_()

    @torch.no_grad()
    def member(self, i: int) -> Transformer:
        """Member i of an ensemble as a single model (a copy of its weights)."""
        if self.n_models is None:
            raise ValueError("member() needs an ensemble (n_models is None)")
        first = next(self.parameters())
        single = Transformer(self.config).to(first.device, first.dtype)
        for p, q in zip(single.parameters(), self.parameters()):
            p.copy_(q[i])
        return single

    @classmethod
    @torch.no_grad()
    def ensemble_of(cls, models: list[Transformer]) -> Transformer:
        """The ensemble whose member i holds ``models[i]``'s weights (one config,
        dtype and device), to step them all at once."""
        first = next(models[0].parameters())
        out = cls(models[0].config, n_models=len(models)).to(first.device, first.dtype)
        for i, model in enumerate(models):
            if model.n_models is not None or model.config != out.config:
                raise ValueError("ensemble_of needs single models of one config")
            for p, q in zip(out.parameters(), model.parameters()):
                p[i].copy_(q)
        return out

    def matrix_parameters(self) -> list[nn.Parameter]:
        """Parameters that are matrices for each model (embeddings included)."""
        lead = 0 if self.n_models is None else 1
        return [p for p in self.parameters() if p.dim() - lead >= 2]

    def decayed_parameters(self, embeddings: bool = False) -> list[nn.Parameter]:
        """Parameters under weight decay: the weights of the linear layers (W_Q, W_K,
        W_V, W_O, W_1, W_2 and an untied head), as in the authors' optimiser groups,
        and the uni-embedding's e (their nn.Linear(1, d)); ``embeddings=True``: every
        matrix (markovlib 0.1)."""
        if embeddings:
            return self.matrix_parameters()
        tables = {id(self.wte.weight), id(self.wpe.weight)}  # a tied head is wte
        linear = [m.weight for m in self.modules() if isinstance(m, nn.Linear)]
        decayed = [p for p in linear if id(p) not in tables]
        if self.config.embedding == "uni":
            decayed.append(self.wte.weight)
        return list({id(p): p for p in decayed}.values())

    def n_params(self) -> int:
        """Number of distinct scalar parameters (a tied head counts once)."""
        return sum(p.numel() for p in self.parameters())

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        L = idx.shape[-1]
        if L > self.config.max_len:
            raise ValueError(
                f"sequence length {L} exceeds max_len={self.config.max_len}"
            )
        if self.n_models is None:
            return self.wte(idx) + self.wpe(torch.arange(L, device=idx.device))
        return self.wte(idx) + self.wpe.weight[:, None, :L]

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    @torch.no_grad()
    def trace(self, idx: torch.Tensor) -> dict:
        """Intermediate tensors: per layer the block input, attention output, weights
        and FF output; logits."""
        x = embedding = self.embed(idx)
        layers = []
        for block in self.blocks:
            t: dict = {}
            x = block(x, t)
            layers.append(t)
        return {
            "embedding": embedding,
            "layers": layers,
            "output": x,
            "logits": self.head(self.ln_f(x)),
        }

    @torch.no_grad()
    def probabilities(self, idx: torch.Tensor) -> torch.Tensor:
        """P(x_{n+1} = j | x_1^n) for every position: (batch, length, k)."""
        return self(idx).softmax(-1)


# ------------------------------------------------------------- attention that is off
def attention_off(model: Transformer) -> bool:
    """Whether every attention layer is off: W_V = W_O = 0 (every member of an
    ensemble), so that its output and every gradient through it are exactly 0."""
    with torch.no_grad():
        return all(
            float(b.attn.W_V.weight.abs().max()) == 0.0
            and float(b.attn.W_O.weight.abs().max()) == 0.0
            for b in model.blocks
        )


def _no_attention(x: torch.Tensor, trace: dict | None = None) -> torch.Tensor:
    """The output of an attention layer whose W_V = W_O = 0: exactly 0."""
    return torch.zeros_like(x)


@contextmanager
def attention_skipped(model: Transformer):
    """Run ``model`` without computing its attention layers, which must be off
    (:func:`attention_off`). Bit for bit the same logits and gradients of every other
    parameter: an attention output V W_O with V = x W_V = 0 is exactly 0, and so is
    every gradient through it (each is a product with W_V, W_O or V). The attention
    weights get no gradient (``None``), so gradient descent and AdamW leave them as
    they are, exactly as a zero gradient would: they stay 0 and the layers stay off."""
    if not attention_off(model):
        raise ValueError("attention_skipped needs W_V = W_O = 0 in every layer")
    for block in model.blocks:  # the layers and their weights stay where they are
        block.attn.forward = _no_attention
    try:
        yield model
    finally:
        for block in model.blocks:
            del block.attn.forward
