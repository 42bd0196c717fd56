"""The two sides of verify's re-training tolerances, measured on the shipped runs.

``drift GROUP|KEY ... [--half-lr] [--save FILE]``: re-train one whole ensemble of each
named group (its first run's, or the ensemble of run KEY) to its step-50 checkpoint on
this machine and print, per member, the largest |Δ| against the shipped run of the
train and test losses over steps 1-50, of the learnt kernel and of the predictions on
the run's fixed batch: the quantities verify compares (one JSON line each). Run on a
CPU unlike the producer's, this is the drift the tolerances must cover; with
``--half-lr``, its learning rate halved (a forgery): what they must not cover;
``--save``: the first named run's re-train in one .npz, as ``full`` saves it (with
and without --half-lr into one file: the second adds its variant).

``settings``: the same |Δ| between shipped runs of one chain and seed whose specs
differ in one setting (precision, length, tying, model), without training; the
smallest over the pairs: what the tolerances must stay below.

``full KEY ... [--save FILE] [--same-only]``: re-train each run's ensemble to its end,
as shipped and (unless ``--same-only``) with its learning rate halved (a forgery), and
print per member the largest |Δ| against the shipped run of every stored loss, of the
final learnt kernel and of the final predictions (verify's comparison without
--quick); ``--save``: the first run's re-trained results (history, final and
checkpoint weights) of each variant in one .npz, for a test.

``first``: every shipped run's first training step recomputed from its seed, as
``verify --sample 0`` does, one JSON line per run with |Δ| against its stored train loss
of step 1 (``loss``): what FIRST_TOLERANCE must cover on this CPU.

``summary FILE ...``: the JSON lines of ``drift`` and ``full`` reduced per kind of run
(what was compared, precision, tying, start, the producer's CPU and this one's): runs,
bit for bit, median, smallest and largest |Δ| of each quantity, one JSON line each.

usage: python benchmarks/drift.py drift fig4-400-untied-fp16 b22bbd858ca184cbcb72
       python benchmarks/drift.py settings
       python benchmarks/drift.py full 01611dbbf5da2a3b5b16 --save retrain.npz
       python benchmarks/drift.py first > first.jsonl
       python benchmarks/drift.py summary step50.jsonl full.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from markovlib.runs import verify as V
from markovlib.runs.executors import train_chunks
from markovlib.runs.shipped import ShippedData, source_weights
from markovlib.runs.spec import CHECKPOINT_STEP, RunSpec
from markovlib.runs.stacked import first_losses

DATA = "data/paper"
PAIRS = [  # (group, group of the same chains and seeds, the setting that differs)
    ("trap400-gpt2-tied-fp16", "trap400-gpt2-tied-fp32", "fp16 vs float32"),
    ("fig4-400-tied-fp16", "fig4-400-tied-fp32", "fp16 vs float32 (Fig 4 tied)"),
    ("fig4-400-untied-fp16", "fig4-400-untied-fp32", "fp16 vs float32 (untied)"),
    ("trap400-gpt2-tied-fp16", "trap400-gpt2-tied-fp16-scaled", "fp16 vs scaled"),
    ("trap400-gpt2-tied-fp16", "trap400-gpt2-tied-fp16-len512", "length 1024/512"),
    ("trap400-gpt2-tied-fp16-len512", "trap400-gpt2-tied-fp16-len256", "512/256"),
    ("fig4-400-tied-fp16", "fig4-400-untied-fp16", "tied vs untied (fp16)"),
    ("fig4-400-tied-fp32", "fig4-400-untied-fp32", "tied vs untied (float32)"),
    ("trap-gpt2-tied", "trap-gpt2-untied", "tied vs untied (float32, 1000 steps)"),
]


def loss_gap(a, b) -> float:
    """Largest |Δ| of the train and test losses of two histories over steps 1-50."""
    a, b = a.set_index("step"), b.set_index("step")
    steps = a.index[(a.index >= 1) & (a.index <= CHECKPOINT_STEP)]
    return max(
        float((a.loc[steps, c] - b.loc[steps, c]).abs().max())
        for c in ("train_loss", "test_loss")
    )


def output_gaps(spec: RunSpec, w1: dict, w2: dict) -> tuple[float, float]:
    """Largest |Δ| of the learnt kernels and of the fixed-batch predictions."""
    k1, p1 = V._outputs(spec, w1)
    k2, p2 = V._outputs(spec, {k: v.float() for k, v in w2.items()})
    return float(np.abs(k1 - k2).max()), float((p1 - p2).abs().max())


def _runs_of(data: ShippedData, group: str) -> dict[tuple[str, int], str]:
    """(chain, seed) -> key of every shipped run of ``group``."""
    out = {}
    for key, name in data.index().items():
        if name.startswith(group + "-0"):
            spec = json.loads(data.row(key)["spec"])
            out[json.dumps(spec["chain"], sort_keys=True), spec["seed"]] = key
    return out


def _scaled(spec: RunSpec, factor: float) -> RunSpec:
    """``spec`` with its learning rate times ``factor`` (its key changes with it)."""
    train = spec.train.replace(lr=spec.train.lr * factor)
    return RunSpec(spec.chain, spec.config, train, spec.seed, spec.init)


def drift(names: list[str], factor: float = 1.0, save: str | None = None) -> None:
    """One JSON line per re-trained member; one '#' line per ensemble with its time
    (``factor``: the learning rate's, 0.5 for the forgery of --half-lr; ``save``: the
    first named run's re-train, as ``full`` saves it, added to the file's other
    variant if it holds one)."""
    arrays, saved = {}, None
    data, here = ShippedData(DATA), torch.backends.cpu.get_cpu_capability()
    torch.set_num_threads(1)
    for name in names:
        first = (
            name if name in data.index() else sorted(_runs_of(data, name).values())[0]
        )
        saved = saved or first
        records = [data.record(k) for k in V._ensemble(data, first)]
        specs = [RunSpec.from_dict(r["spec"]) for r in records]
        t0 = time.perf_counter()
        sources = source_weights(specs, data)  # the runs continued runs start from
        chunks = train_chunks(
            [[_scaled(s, factor) for s in specs]],
            device="cpu",
            stop_after=CHECKPOINT_STEP,
            sources=sources,
        )
        for _, fresh in chunks:
            for record, spec, result in zip(records, specs, fresh):
                kernel, probs = output_gaps(
                    spec, record["checkpoint"], result.checkpoint
                )
                what = "drift" if factor == 1 else "drift half-lr"
                line = dict(what=what, group=data.index()[spec.key], key=spec.key)
                line |= dict(precision=spec.train.precision, here=here)
                line |= dict(produced=record["provenance"].get("cpu_capability"))
                line |= dict(loss=loss_gap(record["history"], result.history))
                print(json.dumps(line | dict(kernel=kernel, predictions=probs)))
                if spec.key == saved:
                    arrays |= _flat("same" if factor == 1 else "half-lr", result)
        print(f"# {name}: ensemble of {len(specs)} in {time.perf_counter() - t0:.0f} s")
    if save:
        _save(save, saved, arrays)


def _save(path: str, key: str, arrays: dict) -> None:
    """Write run ``key``'s re-trained arrays to ``path``, beside the variant the file
    already holds of the same run (another run's file is refused)."""
    kept = {}
    if Path(path).exists():
        with np.load(path) as old:
            kept = {name: old[name] for name in old.files}
    if kept and str(kept.get("key")) != key:
        raise SystemExit(f"{path} holds run {kept.get('key')}, not {key}")
    np.savez_compressed(path, **(kept | arrays), key=np.array(key))


def settings() -> None:
    """One JSON line per pair of groups: the smallest |Δ| of each quantity."""
    data = ShippedData(DATA)
    for a, b, what in PAIRS:
        ra, rb = _runs_of(data, a), _runs_of(data, b)
        worst = dict(loss=np.inf, kernel=np.inf, predictions=np.inf)
        for pair in sorted(set(ra) & set(rb)):
            x, y = data.record(ra[pair]), data.record(rb[pair])
            spec = RunSpec.from_dict(x["spec"])
            kernel, probs = output_gaps(spec, x["checkpoint"], y["checkpoint"])
            gaps = dict(loss=loss_gap(x["history"], y["history"]), kernel=kernel)
            for quantity, gap in (gaps | dict(predictions=probs)).items():
                worst[quantity] = min(worst[quantity], gap)
        n = len(set(ra) & set(rb))
        print(json.dumps(dict(what="settings", pair=what, n=n) | worst), flush=True)


def _gaps(record: dict, spec: RunSpec, result) -> dict:
    """|Δ| of every stored loss, of the final kernel and predictions (a re-train)."""
    a, b = record["history"].set_index("step"), result.history.set_index("step")
    loss = max(
        float(np.nanmax(np.abs(a[c].to_numpy() - b[c].reindex(a.index).to_numpy())))
        for c in ("train_loss", "test_loss")
    )
    final = {k: v.detach() for k, v in result.model.state_dict().items()}
    kernel, probs = output_gaps(spec, record["weights"], final)
    return dict(loss=loss, kernel=kernel, predictions=probs)


def _flat(prefix: str, result) -> dict:
    """A re-trained result as named arrays (history, final and checkpoint weights)."""
    out = {f"{prefix}/history/{c}": result.history[c].to_numpy() for c in HISTORY}
    for name, w in result.model.state_dict().items():
        out[f"{prefix}/weights/{name}"] = w.detach().numpy()
    for name, w in result.checkpoint.items():
        out[f"{prefix}/checkpoint/{name}"] = w.numpy()
    return out


HISTORY = ("step", "lr", "train_loss", "test_loss")


VARIANTS = (("same", 1.0), ("half-lr", 0.5))  # learning rate as shipped, halved


def full(keys: list[str], save: str | None = None, variants=VARIANTS) -> None:
    """One JSON line per re-trained member and variant (as shipped, lr halved)."""
    data, here = ShippedData(DATA), torch.backends.cpu.get_cpu_capability()
    torch.set_num_threads(1)
    arrays = {}
    for key in keys:
        records = [data.record(k) for k in V._ensemble(data, key)]
        specs = [RunSpec.from_dict(r["spec"]) for r in records]
        sources = source_weights(specs, data)  # the runs continued runs start from
        for variant, factor in variants:
            chunk = [_scaled(s, factor) for s in specs]
            t0 = time.perf_counter()
            for _, fresh in train_chunks([chunk], device="cpu", sources=sources):
                for record, spec, result in zip(records, specs, fresh):
                    line = dict(what="full", variant=variant, key=spec.key, here=here)
                    line |= dict(group=data.index()[spec.key])
                    line |= dict(produced=record["provenance"].get("cpu_capability"))
                    line |= _gaps(record, spec, result)
                    print(json.dumps(line | dict(s=time.perf_counter() - t0)))
                    if spec.key == keys[0]:
                        arrays |= _flat(variant, result)
    if save:
        _save(save, keys[0], arrays)


def first() -> None:
    """One JSON line per shipped run: |Δ| of its step-1 train loss recomputed."""
    data, here = ShippedData(DATA), torch.backends.cpu.get_cpu_capability()
    torch.set_num_threads(1)
    index, done = data.index(), set()
    for key in sorted(index):
        if key in done:
            continue
        keys = V._ensemble(data, key)
        done |= set(keys)
        records = [data.record(k) for k in keys]
        specs = [RunSpec.from_dict(r["spec"]) for r in records]
        fresh = first_losses(specs, source_weights(specs, data))
        for record, spec, loss in zip(records, specs, fresh):
            stored = float(record["history"]["train_loss"].iloc[1])
            line = dict(what="first", group=index[spec.key], key=spec.key, here=here)
            line |= dict(produced=record["provenance"].get("cpu_capability"))
            print(json.dumps(line | dict(loss=abs(stored - float(loss)))), flush=True)


QUANTITIES = ("loss", "kernel", "predictions")


def _kind(line: dict, specs: dict[str, str]) -> tuple:
    """What a line compared; its precision, tying and start; where made and re-made
    (``specs``: the shipped runs' spec column)."""
    spec = RunSpec.from_dict(json.loads(specs[line["key"]]))
    tying = "tied" if spec.config.tied else "untied"
    what = line["what"] + (f" {line['variant']}" if "variant" in line else "")
    start = (spec.init or {}).get("kind", "seed")  # seed, run (continued), manifold
    return what, spec.train.precision, tying, start, line["produced"], line["here"]


def summary(files: list[str]) -> None:
    """One JSON line per kind of run: count, bit for bit, median, least, largest |Δ|."""
    kinds: dict[tuple, list[dict]] = {}
    specs = ShippedData(DATA).column("spec")  # the specs alone, not the weights
    for file in files:
        for text in open(file):
            if text.startswith("{"):
                line = json.loads(text)
                kinds.setdefault(_kind(line, specs), []).append(line)
    for kind, lines in sorted(kinds.items()):
        gaps = {q: np.array([x[q] for x in lines]) for q in QUANTITIES if q in lines[0]}
        exact = int(sum(all(x[q] == 0 for q in gaps) for x in lines))
        out = dict(
            zip(("what", "precision", "tying", "start", "produced", "here"), kind)
        )
        out |= dict(runs=len(lines), exact=exact)
        out |= {f"{q}_median": float(np.median(g)) for q, g in gaps.items()}
        out |= {f"{q}_min": float(g.min()) for q, g in gaps.items()}
        print(json.dumps(out | {f"{q}_max": float(g.max()) for q, g in gaps.items()}))


FLAGS = {  # the options each command takes
    "drift": ("half_lr", "save"),
    "full": ("same_only", "save"),
    "settings": (),
    "first": (),
    "summary": (),
}


def main() -> None:
    """The command line: one of FLAGS' commands, its names, its options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=list(FLAGS))
    parser.add_argument("names", nargs="*", help="groups, run keys or JSON-lines files")
    parser.add_argument("--save", help="an .npz for the first named run's re-train")
    parser.add_argument("--half-lr", action="store_true", help="drift: lr halved")
    parser.add_argument("--same-only", action="store_true", help="full: as shipped")
    args = parser.parse_args()
    for option in ("save", "half_lr", "same_only"):
        if getattr(args, option) and option not in FLAGS[args.command]:
            parser.error(f"{args.command} takes no --{option.replace('_', '-')}")
    save = args.save
    if save and not save.endswith(".npz"):
        parser.error(f"--save {save}: the file must end in .npz")
    names, factor = args.names, 0.5 if args.half_lr else 1.0
    commands = {"drift": lambda: drift(names, factor, save), "settings": settings}
    commands["full"] = lambda: full(names, save, VARIANTS[: 1 if args.same_only else 2])
    commands["summary"] = lambda: summary(names)
    commands["first"] = first
    commands[args.command]()


if __name__ == "__main__":
    main()
