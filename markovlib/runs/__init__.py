"""The run layer: where a training run is found or made, between the maths
(:mod:`markovlib.train` and below) and the book (chapters, scorecard, CLI).

Imports go one way, each module using only those listed before it (and the maths):

- :mod:`~markovlib.runs.spec`: :class:`~markovlib.runs.spec.RunSpec` (chain,
  architecture, training settings, seed), its key, chains from spec dicts, grids of
  specs, and training one group of specs.
- :mod:`~markovlib.runs.store`: the local SQLite result store.
- :mod:`~markovlib.runs.experiments`: each chapter's groups of runs and
  :func:`~markovlib.runs.experiments.paper_edition`. It lives here, not beside the
  chapters, because the run layer needs it: :func:`~markovlib.runs.shipped.verify`
  checks the shipped data's completeness against the paper edition, and
  :mod:`~markovlib.runs.edition` produces it. It is a catalogue of specs, so it sits
  just above :mod:`~markovlib.runs.spec`.
- :mod:`~markovlib.runs.shipped`: the shipped data (``data/paper``): read, export,
  verify.
- :mod:`~markovlib.runs.executors`: where ensembles are trained (here, or on Ray);
  only the driver writes the store.
- :mod:`~markovlib.runs.sweep`: shipped data → local store → training.
- :mod:`~markovlib.runs.edition`: producing the paper edition (resumable, several
  processes), its status.

The old modules ``markovlib.sweep``, ``markovlib.shipped``, ``markovlib.executors``,
``markovlib.edition`` and ``markovlib.experiments`` keep their names working. The
layering is checked by import-linter (``[tool.importlinter]`` in ``pyproject.toml``).
"""
