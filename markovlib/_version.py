"""The installed markovlib's version (stored with every run), in a module that imports
nothing of the library, so that any module can read it."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("markovlib")
except PackageNotFoundError:  # pragma: no cover - a source tree without install
    __version__ = "0.0.0+local"
