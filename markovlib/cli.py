"""The ``markovlib`` command: train one model, run a sweep into a result store, or build
a reader's edition.

    markovlib train --p 0.5 --q 0.8 --tied --steps 400
    markovlib sweep --p 0.2,0.5,0.8 --q 0.2,0.5,0.8 --tied both --seeds 5
    markovlib book --p 0.6 --q 0.7 --scale cpu --out my-book
    markovlib verify --sample 2   # the shipped data is what this library produces
    markovlib edition status      # progress of the paper edition's runs

Bad arguments exit with status 2 and one line naming the argument.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import presets


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage block) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _probabilities(text: str) -> list[float]:
    """'0.2,0.4' → [0.2, 0.4], each in [0, 1]; no empty items, no two values equal to
    6 significant digits."""
    items = [v.strip() for v in text.split(",")]
    if any(not v for v in items):
        raise argparse.ArgumentTypeError(
            f"has an empty item; give comma-separated numbers in [0, 1]; got {text!r}"
        )
    try:
        values = [float(v) for v in items]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated numbers in [0, 1]; got {text!r}"
        ) from None
    if any(not 0 <= v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"must be numbers in [0, 1]; got {text!r}")
    shown = [f"{v:g}" for v in values]
    for i, a in enumerate(shown):
        if a in shown[:i] and values[shown.index(a)] != values[i]:
            raise argparse.ArgumentTypeError(
                f"values {items[shown.index(a)]} and {items[i]} differ "
                "below the printed "
                f"precision (both print as {a}); give distinct values"
            )
    return list(dict.fromkeys(values))


def _probability(text: str) -> float:
    values = _probabilities(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"must be one number in [0, 1]; got {text!r}")
    return values[0]


def _argument_type(convert, what: str, accept, *, show_value: bool = False):
    """An argparse type: ``convert(text)`` where ``accept`` holds it; else an error
    saying it must be ``what`` and quoting the text (with ``show_value``, the converted
    value when only ``accept`` failed)."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}; got {text!r}") from None
        if not accept(value):
            got = value if show_value else repr(text)
            raise argparse.ArgumentTypeError(f"must be {what}; got {got}")
        return value

    return parse


def _int_at_least(low: int):
    """An argparse type: an integer >= ``low``."""
    return _argument_type(
        int, f"an integer >= {low}", lambda v: v >= low, show_value=True
    )


_positive_int, _nonnegative_int = _int_at_least(1), _int_at_least(0)
_nonnegative_number = _argument_type(
    float, "a number >= 0", lambda v: 0 <= v < float("inf")
)
_positive_float = _argument_type(float, "a number > 0", lambda v: v > 0)  # inf allowed


def _add_chain(sub: argparse.ArgumentParser, values) -> None:
    """--p and --q of the binary chain (``values``: the argparse type, one number or a
    list)."""
    sub.add_argument("--p", type=values, required=True)
    sub.add_argument("--q", type=values, required=True)


def _add_training(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--scale",
        choices=["auto", *presets.PRESETS],
        default="auto",
        help="sizes for the options below that are not given (default: auto)",
    )
    sub.add_argument("--steps", type=_positive_int)
    sub.add_argument("--batch-size", type=_positive_int)
    sub.add_argument("--seq-len", type=_positive_int)
    sub.add_argument("--d-model", type=_positive_int)
    sub.add_argument("--layers", type=_positive_int, default=1)
    sub.add_argument("--lr", type=float)
    sub.add_argument("--preset", choices=["gpt2", "theory"], default="gpt2")
    sub.add_argument(
        "--device",
        default="auto",
        help="auto (CUDA when present), cpu, cuda, cuda:1, ...",
    )
    sub.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="bf16: bfloat16 autocast",
    )
    sub.add_argument(
        "--compile", action="store_true", help="train through torch.compile"
    )


def _settings(args) -> tuple[dict, dict]:
    scale = presets.resolve(args.scale)
    train = dict(
        steps=args.steps or scale.steps,
        batch_size=args.batch_size or scale.batch_size,
        seq_len=args.seq_len or scale.seq_len,
        lr=args.lr if args.lr is not None else scale.lr,
        eval_every=scale.eval_every,
        eval_batches=scale.eval_batches,
        precision=args.precision,
    )
    config = dict(
        d_model=args.d_model or scale.d_model,
        n_layers=args.layers,
        max_len=max(1024, train["seq_len"]),
    )
    return train, config


def cmd_train(args) -> int:
    from .chains import binary
    from .model import TransformerConfig
    from .train import train

    chain = binary(args.p, args.q)
    train_kwargs, config_kwargs = _settings(args)
    config = getattr(TransformerConfig, args.preset)(tied=args.tied, **config_kwargs)
    result = train(
        chain,
        config,
        seed=args.seed,
        device=args.device,
        compile=args.compile,
        **train_kwargs,
    )
    final, h_rate, h_pi = (
        result.final_test_loss,
        chain.entropy_rate(),
        chain.unigram_entropy(),
    )
    kernel = result.learnt_kernel()
    print(
        f"{chain.name}, {'tied' if args.tied else 'untied'} {args.preset}, "
        f"{train_kwargs['steps']} steps, seed {args.seed}"
    )
    print(
        f"final test loss {final:.4f}   H_rate {h_rate:.4f} (gap "
        f"{final - h_rate:+.4f})   "
        f"H(pi) {h_pi:.4f} (gap {final - h_pi:+.4f})"
    )
    print(
        f"learnt P(1|0) {kernel[0, 1]:.4f} (p = {args.p:g})   P(0|1) "
        f"{kernel[1, 0]:.4f} (q = {args.q:g})   "
        f"escape step {result.escape_step()}"
    )
    return 0


def cmd_sweep(args) -> int:
    from .executors import ClusterUnreachable
    from .sweep import ResultStore, grid, sweep

    train_kwargs, config_kwargs = _settings(args)
    tied = {"both": (True, False), "tied": (True,), "untied": (False,)}[args.tied]
    specs = grid(
        args.p,
        args.q,
        tied=tied,
        seeds=range(args.seed, args.seed + args.seeds),
        preset=args.preset,
        config_kwargs=config_kwargs,
        **train_kwargs,
    )
    ray_only = {
        "--address": args.address,
        "--cpus-per-task": args.cpus_per_task,
        "--gpus-per-task": args.gpus_per_task,
    }
    for option, value in ray_only.items():
        if value is not None and args.executor != "ray":
            print(
                f"markovlib sweep: error: argument {option}: needs --executor ray",
                file=sys.stderr,
            )
            return 2
    store = ResultStore(args.results)
    before = len(store)
    try:
        frame = sweep(
            specs,
            store,
            ensemble_size=args.ensemble_size,
            device=args.device,
            compile=args.compile,
            executor=args.executor,
            address=args.address,
            cpus_per_task=args.cpus_per_task or 1,
            gpus_per_task=args.gpus_per_task or 0.0,
        )
    except ClusterUnreachable as e:
        print(
            "markovlib sweep: error: argument --address: cannot reach a Ray "
            f"cluster at {e.address}" + (f"; {e.hint}" if e.hint else ""),
            file=sys.stderr,
        )
        return 2
    except ModuleNotFoundError as e:
        if e.name != "ray":
            raise
        print(
            "markovlib sweep: error: argument --executor: ray is not installed (pip "
            "install 'markovlib[ray]')",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print(
            f"interrupted: {len(store)} runs stored in {store.path} "
            f"({len(store) - before} new); "
            "re-run the same command to finish the rest",
            file=sys.stderr,
        )
        return 130
    summary = frame.groupby(["config.tied", "chain.p", "chain.q"])["excess"].agg(
        ["mean", "max", "count"]
    )
    print(summary.round(4).to_string())
    print(f"{len(frame)} runs in {store.path} ({len(store) - before} new)")
    return 0


def cmd_book(args) -> int:
    import papermill as pm
    import yaml

    from .book import find_repository

    out = Path(args.out).resolve()
    root = find_repository(args.source)
    if root is None:
        print(
            "markovlib book: error: argument --source: no clone of the book at or "
            f"above {args.source} "
            "(a folder with _toc.yml and book/)",
            file=sys.stderr,
        )
        return 2
    if out.exists() and not out.is_dir():
        print(
            f"markovlib book: error: argument --out: {out} is an existing file; "
            "give a new folder",
            file=sys.stderr,
        )
        return 2
    if (
        out == root
        or root.is_relative_to(out)
        or any(out.is_relative_to(root / d) for d in ("book", "_static", "tools"))
    ):
        print(
            f"markovlib book: error: argument --out: {out} would overwrite the book's "
            f"own sources in {root}; "
            "give a folder outside them (default: editions/p<p>-q<q>)",
            file=sys.stderr,
        )
        return 2
    sources = sorted((root / "book").glob("*.ipynb"))
    # everything the build reads besides the notebooks: toc, pages, bibliography,
    # favicon, CSS, local extension
    support = [
        root / "_toc.yml",
        root / "tools" / "sphinx_fixes.py",
        *(f for f in (root / "book").iterdir() if f.is_file() and f.suffix != ".ipynb"),
        *(f for f in (root / "_static").rglob("*") if f.is_file()),
    ]
    for path in support:
        (out / path.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, out / path.relative_to(root))
    config = yaml.safe_load((root / "_config.yml").read_text())
    config["title"] = f"{config['title']} — edition p = {args.p:g}, q = {args.q:g}"
    config["execute"]["execute_notebooks"] = (
        "off"  # executed below, with the reader's parameters
    )
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    for source in sources:
        declared = set(
            pm.inspect_notebook(str(source))
        )  # Reproducibility declares none
        params = {
            k: v
            for k, v in dict(seed=args.seed, scale=args.scale).items()
            if k in declared
        }
        if (
            {"p", "q"} <= declared
        ):  # binary chapters; the k-state and CCMC ones keep their own parameters
            params.update(p=args.p, q=args.q)
        print(
            f"executing {source.name} with "
            f"{', '.join(f'{k}={v}' for k, v in params.items())}",
            flush=True,
        )
        pm.execute_notebook(
            str(source),
            str(out / "book" / source.name),
            cwd=str(source.parent),
            parameters=params,
            progress_bar=False,
        )
    jupyter_book = Path(sys.executable).with_name(
        "jupyter-book"
    )  # installed beside this Python
    subprocess.run(
        [str(jupyter_book), "build", str(out), "--path-output", str(out)], check=True
    )
    print(f"Your edition: file://{out / '_build' / 'html' / 'index.html'}")
    return 0


def _data_dir(args) -> Path | None:
    from .shipped import default_data_dir

    return Path(args.data) if args.data else default_data_dir()


def cmd_verify(args) -> int:
    from .shipped import ShippedDataError, VerificationError, verify

    directory = _data_dir(args)
    if directory is None or not directory.is_dir():
        print(
            f"markovlib verify: error: argument --data: no shipped data folder "
            f"{'found (give --data DIR)' if directory is None else str(directory)}",
            file=sys.stderr,
        )
        return 2
    try:
        n = verify(
            directory,
            sample=args.sample,
            seed=args.seed,
            quick=args.quick,
            max_seconds=args.max_seconds,
            exact_only=args.exact_only,
        )
    except (ShippedDataError, VerificationError) as e:
        print(f"markovlib verify: FAILED: {e}", file=sys.stderr)
        return 1
    print(f"verified: {n} of {n} runs reproduced")
    return 0


def cmd_scorecard(args) -> int:
    import json

    from .scorecard import compute

    t0 = time.perf_counter()
    rows = compute(args.data)
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=1, ensure_ascii=False))
        return 0
    for r in rows:
        print(f"{r.id:15s} {r.verdict:26s} {r.value}")
    counts = {
        v: sum(r.verdict == v for r in rows)
        for v in dict.fromkeys(r.verdict for r in rows)
    }
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    print(f"{len(rows)} rows: {summary} ({time.perf_counter() - t0:.0f} s)")
    return 0


def cmd_edition(args) -> int:
    from .edition import produce, status
    from .experiments import paper_edition
    from .shipped import ShippedData, export
    from .sweep import ResultStore

    groups = paper_edition()
    store = ResultStore(args.results)
    directory = Path(args.data or "data/paper")
    shipped = ShippedData(directory) if (directory / "manifest.json").exists() else None
    if args.action == "produce":
        try:
            produce(
                groups,
                store,
                threads=args.threads,
                only=args.only,
                shipped=shipped,
                ensemble_size=args.ensemble,
            )
        except KeyboardInterrupt:
            print(
                f"interrupted: {len(store)} runs stored in "
                f"{store.path}; re-run to go on",
                file=sys.stderr,
            )
            return 130
    elif args.action == "export":
        written = export(groups, store, directory)
        print(f"{len(written)} new file(s) in {directory}")
        shipped = ShippedData(directory)
    rows = status(groups, store, shipped)
    for row in rows:
        print(
            f"{row['group']:28s} {row['stored']:3d} / {row['runs']:3d} runs  "
            f"{row['seconds']:9.0f} s"
        )
    done, total = sum(r["stored"] for r in rows), sum(r["runs"] for r in rows)
    print(
        f"{done} of {total} group entries done (stored or shipped); "
        f"{sum(r['seconds'] for r in rows) / 3600:.2f} h of training in the local store"
    )
    return 0


def build_parser() -> Parser:
    parser = Parser(
        prog="markovlib",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subs = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    train = subs.add_parser(
        "train", help="train one model and compare its loss with H_rate and H(pi)"
    )
    _add_chain(train, _probability)
    train.add_argument("--tied", action=argparse.BooleanOptionalAction, default=True)
    train.add_argument("--seed", type=_nonnegative_int, default=0)
    _add_training(train)
    train.set_defaults(run=cmd_train)

    sweep = subs.add_parser(
        "sweep", help="train a (p, q) grid × tying × seeds into a result store"
    )
    _add_chain(sweep, _probabilities)
    sweep.add_argument("--tied", choices=["both", "tied", "untied"], default="both")
    sweep.add_argument(
        "--seeds", type=_positive_int, default=1, help="number of seeds per cell"
    )
    sweep.add_argument("--seed", type=_nonnegative_int, default=0, help="first seed")
    sweep.add_argument(
        "--results", default="results", help="directory of the result store"
    )
    sweep.add_argument(
        "--ensemble-size",
        type=_positive_int,
        default=8,
        help="models trained per batched step",
    )
    sweep.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local: here, one ensemble after the other; ray: one Ray "
        "task per ensemble",
    )
    sweep.add_argument(
        "--address",
        default=None,
        help="Ray cluster address host:port (default: $RAY_ADDRESS, "
        "else a new Ray instance on this machine)",
    )
    sweep.add_argument(
        "--cpus-per-task",
        type=_positive_int,
        default=None,
        help="CPUs (and torch threads) per Ray task (default 1)",
    )
    sweep.add_argument(
        "--gpus-per-task",
        type=_nonnegative_number,
        default=None,
        help="GPUs per Ray task, fractions allowed: 0.125 puts 8 ensembles on "
        "one GPU (default 0)",
    )
    _add_training(sweep)
    sweep.set_defaults(run=cmd_sweep)

    book = subs.add_parser(
        "book",
        help="execute every chapter with your (p, q) and build your own HTML edition",
    )
    _add_chain(book, _probability)
    book.add_argument("--seed", type=_nonnegative_int, default=0)
    book.add_argument("--scale", choices=["auto", *presets.PRESETS], default="auto")
    book.add_argument(
        "--out", default=None, help="output directory (default: editions/p<p>-q<q>)"
    )
    book.add_argument(
        "--source",
        default=".",
        help="the clone of the book to build from (default: here or above)",
    )
    book.set_defaults(run=cmd_book)

    verify = subs.add_parser(
        "verify",
        help="check the shipped run data and re-train a random sample bit for bit",
    )
    verify.add_argument(
        "--data",
        default=None,
        help="shipped data folder (default: data/paper here or above)",
    )
    verify.add_argument(
        "--sample",
        type=_nonnegative_int,
        default=2,
        help="runs to re-train (default 2)",
    )
    verify.add_argument(
        "--seed",
        type=_nonnegative_int,
        default=None,
        help="seed of the sample (default: random)",
    )
    verify.add_argument(
        "--quick",
        action="store_true",
        help="re-train each run only to its checkpoint (step 50) and "
        "compare up to there",
    )
    verify.add_argument(
        "--max-seconds",
        type=_positive_float,
        default=None,
        help="draw only among runs that took at most this long to train",
    )
    verify.add_argument(
        "--exact-only",
        action="store_true",
        help="draw only among runs this CPU can reproduce bit for bit",
    )
    verify.set_defaults(run=cmd_verify)

    card = subs.add_parser(
        "scorecard",
        help="the paper edition's scorecard, computed from the shipped runs (trains "
        "nothing)",
    )
    card.add_argument(
        "--data", default=None, help="shipped data folder (default: data/paper)"
    )
    card.add_argument("--json", action="store_true", help="print the rows as JSON")
    card.set_defaults(run=cmd_scorecard)

    edition = subs.add_parser(
        "edition", help="produce the paper edition: train its runs, export them as data"
    )
    edition.add_argument("action", choices=["status", "produce", "export"])
    edition.add_argument(
        "--results",
        default="results/paper-edition",
        help="result store of the edition's runs",
    )
    edition.add_argument(
        "--data",
        default=None,
        help="shipped data folder to export to (default data/paper)",
    )
    edition.add_argument(
        "--threads",
        type=_positive_int,
        default=1,
        help="torch threads per process (default 1)",
    )
    edition.add_argument(
        "--only", type=lambda s: s.split(","), default=None, help="group name prefixes"
    )
    edition.add_argument(
        "--ensemble",
        type=_positive_int,
        default=8,
        help="runs trained together in one batched step (default 8)",
    )
    edition.set_defaults(run=cmd_edition)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .shipped import ShippedDataError
    from .sweep import StoreError

    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "p", None) is not None and getattr(args, "q", None) is not None:
        ps = args.p if isinstance(args.p, list) else [args.p]
        qs = args.q if isinstance(args.q, list) else [args.q]
        if any(p + q == 0 for p in ps for q in qs):
            parser.error("argument --q: p + q must be > 0 (p = q = 0 never switches)")
    if args.command == "book" and args.out is None:
        args.out = f"editions/p{args.p:g}-q{args.q:g}"
    try:
        return args.run(args)
    except (
        StoreError,
        ShippedDataError,
    ) as e:  # a damaged or foreign file: one line naming it
        print(f"markovlib {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
