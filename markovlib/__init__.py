"""markovlib: the library behind the executable companion to "Attention with Markov" (Makkuva et al., ICLR 2025)."""
from importlib.metadata import PackageNotFoundError, version

from .chains import MarkovChain, binary, symmetric
from .model import Transformer, TransformerConfig
from .presets import resolve
from .train import TrainResult, train

try:
    __version__ = version("markovlib")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+local"

__all__ = ["MarkovChain", "binary", "symmetric", "Transformer", "TransformerConfig", "train", "TrainResult",
           "resolve", "__version__"]
