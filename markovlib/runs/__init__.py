"""The run layer: where a training run is found or made, between the maths
(:mod:`markovlib.train` and below) and the book (chapters, scorecard, CLI).

Imports go one way, each module using only those listed before it (and the maths):

- :mod:`~markovlib.runs.spec`: :class:`~markovlib.runs.spec.RunSpec` (chain,
  architecture, training settings, seed), its key, chains from spec dicts, grids of
  specs, and training one group of specs.
- :mod:`~markovlib.runs.store`: the local SQLite result store.
- :mod:`~markovlib.runs.experiments`: each chapter's groups of runs and
  :func:`~markovlib.runs.experiments.paper_edition`. It lives here, not beside the
  chapters, because the run layer needs it: :func:`~markovlib.runs.verify.verify`
  checks the shipped data's completeness against the paper edition, and
  :mod:`~markovlib.runs.edition` produces it. It is a catalogue of specs, so it sits
  just above :mod:`~markovlib.runs.spec`.
- :mod:`~markovlib.runs.shipped`: reading the shipped data (``data/paper``).
- :mod:`~markovlib.runs.executors`: where ensembles are trained (here, or on Ray);
  only the driver writes the store.
- :mod:`~markovlib.runs.export`: shipping finished runs from a store.
- :mod:`~markovlib.runs.verify`: proving the shipped data, field by field, and by
  re-training (through the executors).
- :mod:`~markovlib.runs.sweep`: shipped data → local store → training.
- :mod:`~markovlib.runs.derived`: what a chapter computes from its chain alone, computed
  once per edition: shipped values → local store → computed.
- :mod:`~markovlib.runs.edition`: producing the paper edition (resumable, several
  processes), its status.

The layering is checked by import-linter (``[tool.importlinter]`` in
``pyproject.toml``).
"""
