"""The installed markovlib's version (stored with every run) and its repository, in a
module that imports nothing of the library, so that any module can read them."""

import tomllib
from importlib.metadata import PackageNotFoundError, metadata, version
from pathlib import Path

try:
    __version__ = version("markovlib")
except PackageNotFoundError:  # pragma: no cover - a source tree without install
    __version__ = "0.0.0+local"


def repository_url() -> str:
    """The public repository: ``[project.urls] Repository`` of the clone's
    ``pyproject.toml`` (the one place that names it), else of the installed package."""
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        if project.get("name") == "markovlib":
            return project["urls"]["Repository"]
    for entry in metadata("markovlib").get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip() == "Repository":
            return url.strip()
    raise LookupError("markovlib's metadata names no Repository URL (pyproject.toml)")
