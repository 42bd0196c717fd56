"""markovlib: the library behind the executable companion to "Attention with Markov"
(Makkuva et al., ICLR 2025)."""

from importlib import import_module

# (train() lives in markovlib.train; re-exporting it here would shadow the module of the
# same name)
__all__ = [
    "MarkovChain",
    "HigherOrderChain",
    "binary",
    "symmetric",
    "lag_switching",
    "random_kth_order",
    "Transformer",
    "TransformerConfig",
    "resolve",
    "__version__",
]

# each public name's module, imported on first use (PEP 562): `import markovlib` (and
# `markovlib --help`) loads no torch
_HOMES = {
    **dict.fromkeys(
        ["MarkovChain", "HigherOrderChain", "binary", "symmetric", "lag_switching"],
        "chains",
    ),
    **dict.fromkeys(["random_kth_order"], "chains"),
    **dict.fromkeys(["Transformer", "TransformerConfig"], "model"),
    "resolve": "presets",
    "__version__": "_version",  # importlib.metadata: 0.1 s
}


def __getattr__(name: str):
    """A public name, imported from its module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module 'markovlib' has no attribute {name!r}")
    value = getattr(import_module(f".{_HOMES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazily loaded ones included."""
    return sorted({*globals(), *__all__})
