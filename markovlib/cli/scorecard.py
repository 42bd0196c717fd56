"""``markovlib scorecard``: the paper edition's scorecard computed from the shipped runs
(trains nothing), as a table or JSON."""

from __future__ import annotations

import json
import shutil
import textwrap
import time

from .options import add_data, data_dir


def add(subs, help: str):
    """``scorecard``'s options."""
    card = subs.add_parser("scorecard", help=help)
    add_data(card, "shipped data folder (default: data/paper)")
    card.add_argument("--json", action="store_true", help="print the rows as JSON")
    return card


def run(args) -> int:
    """Every row computed; printed by source, each value wrapped under its column."""
    from ..companion.computed import compute
    from ..companion.scorecard import by_source, source_counts

    t0 = time.perf_counter()
    rows = compute(data_dir(args))
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=1, ensure_ascii=False))
        return 0
    id_width = max(len(r.id) for r in rows)
    verdict_width = max(len(r.verdict) for r in rows)
    indent = 2 + id_width + 1 + verdict_width + 1
    width = max(shutil.get_terminal_size().columns, indent + 40)
    for source, group in by_source(rows):
        print(f"{source}:")
        for r in group:  # the value wrapped under its own column (issue 49)
            lines = textwrap.wrap(r.value, width - indent) or [""]
            print(f"  {r.id:{id_width}s} {r.verdict:{verdict_width}s} {lines[0]}")
            for line in lines[1:]:
                print(" " * indent + line)
    print(f"{source_counts(rows)} ({time.perf_counter() - t0:.0f} s)")
    return 0
