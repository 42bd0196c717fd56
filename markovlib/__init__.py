"""markovlib: the library behind the executable companion to "Attention with Markov"
(Makkuva et al., ICLR 2025)."""

from ._version import __version__
from .chains import (
    HigherOrderChain,
    MarkovChain,
    binary,
    lag_switching,
    random_kth_order,
    symmetric,
)
from .model import Transformer, TransformerConfig
from .presets import resolve

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
