"""One edition judged against another: every run's class (at H(π), in between,
escaped: :func:`~markovlib.analysis.classify` of its share of the gap H(π) − H_rate)
and every scorecard verdict, e.g. the paper edition re-trained on a GPU against the
shipped CPU runs (``markovlib edition retrain``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..runs.experiments import paper_edition
from ..runs.export import export
from ..runs.shipped import ShippedData
from .computed import compute
from .records import shipped_records
from .verdicts import NOT_TESTED

__all__ = ["judge", "compare", "report_markdown", "write_report", "judge_retrained"]


def judge(data: ShippedData, groups=None) -> dict:
    """Per run of ``groups`` (default: the paper edition) that ``data`` holds: its
    group, class, final test loss and training seconds; per computed scorecard row: its
    verdict; the device the runs were trained on."""
    groups = paper_edition() if groups is None else groups
    runs, devices = {}, Counter()
    for name, specs in groups:
        for record in shipped_records(data, specs):
            provenance = json.loads(data.row(record.key)["provenance"])
            devices[provenance.get("device_name", provenance.get("device", "?"))] += 1
            runs[record.key] = {
                "group": name,
                "class": record.cls,
                "final": round(float(record.history["test_loss"].iloc[-1]), 5),
                # its share of its ensemble's wall-clock seconds
                "seconds": round(
                    float(provenance.get("seconds", 0.0))
                    / int(provenance.get("ensemble_size", 1)),
                    3,
                ),
            }
    verdicts = {row.id: row.verdict for row in compute(data)}
    return {"devices": dict(devices), "runs": runs, "verdicts": verdicts}


def compare(fresh: dict, reference: dict) -> dict:
    """Per group: runs in both, runs of the same class, and the class pairs that differ;
    the verdicts that changed (reference → fresh)."""
    per_group: dict[str, dict] = {}
    for key, run in fresh["runs"].items():
        before = reference["runs"].get(key)
        if before is None:
            continue
        g = per_group.setdefault(
            run["group"], {"runs": 0, "same": 0, "moves": {}, "seconds": 0.0}
        )
        g["runs"] += 1
        g["seconds"] = round(g["seconds"] + run["seconds"], 2)
        if before["class"] == run["class"]:
            g["same"] += 1
        else:
            move = f"{before['class']} → {run['class']}"
            g["moves"][move] = g["moves"].get(move, 0) + 1
    changed, unjudged = {}, []
    for row, verdict in fresh["verdicts"].items():
        before = reference["verdicts"].get(row)
        if verdict == NOT_TESTED and before != verdict:
            unjudged.append(row)  # its runs not all re-trained
        elif before != verdict:
            changed[row] = [before, verdict]
    same = sum(g["same"] for g in per_group.values())
    total = sum(g["runs"] for g in per_group.values())
    return {
        "groups": per_group,
        "same": same,
        "runs": total,
        "verdicts_changed": changed,
        "rows_not_judged": unjudged,
    }


def report_markdown(
    result: dict, *, device: str, seconds: float, trained: str = ""
) -> str:
    """The comparison as a Markdown page: totals, one row per group (seconds: the
    group's share of its ensembles' wall-clock time), changed verdicts."""
    lines = [
        f"Re-trained {trained + ' ' if trained else ''}on {device} in {seconds:.0f} s: "
        f"{result['same']} of "
        f"{result['runs']} runs in the same class as the shipped run of the same spec.",
        "",
        "| group | runs | same class | moves (shipped → re-trained) | seconds |",
        "| --- | ---: | ---: | --- | ---: |",
    ]
    for name, g in result["groups"].items():
        moves = ", ".join(f"{m}: {n}" for m, n in sorted(g["moves"].items())) or "—"
        lines.append(
            f"| {name} | {g['runs']} | {g['same']} | {moves} | {g['seconds']:.0f} |"
        )
    lines += ["", "Verdicts that changed (shipped → re-trained):", ""]
    lines += [
        f"- {row}: {a} → {b}" for row, (a, b) in result["verdicts_changed"].items()
    ]
    if not result["verdicts_changed"]:
        lines.append("- none")
    if result["rows_not_judged"]:
        lines += [
            "",
            "Rows not judged (not all their runs re-trained): "
            + ", ".join(result["rows_not_judged"]),
        ]
    return "\n".join(lines) + "\n"


def write_report(path: str | Path, result: dict, **meta) -> Path:
    """``result`` with ``meta`` (device, seconds, …) as JSON at ``path`` and as Markdown
    beside it (same name, ``.md``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**meta, **result}, indent=1, ensure_ascii=False))
    page = report_markdown(
        result,
        device=meta["device"],
        seconds=meta["seconds"],
        trained=meta.get("trained", ""),
    )
    path.with_suffix(".md").write_text(page)
    return path


def judge_retrained(
    groups, store, results: Path, reference: dict, *, report: Path, **meta
) -> tuple[Path, str]:
    """``store``'s runs exported, judged, compared with ``reference``; report, page."""
    export(groups, store, results / "data", log=lambda *a, **k: None)
    fresh = judge(ShippedData(results / "data"), groups)
    result = compare(fresh, reference)
    trained = f"{len(store)} of {sum(len(specs) for _, specs in groups)} runs"
    device, seconds = meta.pop("device"), meta.pop("seconds")
    path = write_report(
        report,
        result,
        device=device,
        seconds=round(seconds, 1),
        trained=trained,
        **meta,
        fresh=fresh,
    )
    page = report_markdown(result, device=device, seconds=seconds, trained=trained)
    return path, page
