"""The book layer: what the chapters measure (:mod:`.measures`), the claims and
their verdicts (:mod:`.claims`, :mod:`.scorecard`), each chapter's computations
(:mod:`.chapters`) and figures (:mod:`.figures`), and the helpers a notebook calls
(:mod:`.notebook`). It imports the run layer and the maths, never the CLI."""
