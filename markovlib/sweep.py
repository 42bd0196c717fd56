"""The run layer's names under their old module (:mod:`markovlib.runs` holds them now):
``from markovlib.sweep import sweep_results, RunSpec, ResultStore, ...`` keeps working.

New code imports from :mod:`markovlib.runs.spec` (RunSpec, keys, chains, grids),
:mod:`markovlib.runs.store` (the SQLite store) and :mod:`markovlib.runs.sweep`.
"""

from .runs.shipped import shipped_data as _shipped_data
from .runs.spec import (
    CHECKPOINT_STEP,
    RunSpec,
    chain_grid,
    grid,
    make_chain,
    spec_key,
    train_specs,
)
from .runs.store import (
    SEED_LIMIT,
    ResultStore,
    StoreError,
    StoreFull,
    _metrics,
    default_results_dir,
    history_frame,
    history_json,
    result_from_record,
)
from .runs.sweep import sweep, sweep_results

__all__ = [
    "RunSpec",
    "ResultStore",
    "StoreError",
    "StoreFull",
    "grid",
    "chain_grid",
    "sweep",
    "sweep_results",
    "make_chain",
    "default_results_dir",
    "train_specs",
    "spec_key",
    "result_from_record",
    "history_json",
    "history_frame",
    "CHECKPOINT_STEP",
    "SEED_LIMIT",
    "_metrics",
    "_shipped_data",
]
