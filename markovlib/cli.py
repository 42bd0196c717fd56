"""The ``markovlib`` command: train one model, run a sweep into a result store, or build a reader's edition.

    markovlib train --p 0.5 --q 0.8 --tied --steps 400
    markovlib sweep --p 0.2,0.4,0.5,0.6,0.8 --q 0.2,0.4,0.5,0.6,0.8 --tied both --seeds 5 --results results
    markovlib book --p 0.6 --q 0.7 --scale cpu --out my-book

Bad arguments exit with status 2 and one line naming the argument.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from . import presets

ROOT = Path(__file__).resolve().parents[1]   # the repository (markovlib is installed in editable mode)


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage block) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _probabilities(text: str) -> list[float]:
    """'0.2,0.4' → [0.2, 0.4], each in [0, 1]."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers in [0, 1]; got {text!r}") from None
    if not values or any(not 0 <= v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"must be numbers in [0, 1]; got {text!r}")
    return values


def _probability(text: str) -> float:
    values = _probabilities(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"must be one number in [0, 1]; got {text!r}")
    return values[0]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {value}")
    return value


def _add_training(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--scale", choices=["auto", *presets.PRESETS], default="auto",
                     help="sizes for the options below that are not given (default: auto)")
    sub.add_argument("--steps", type=_positive_int)
    sub.add_argument("--batch-size", type=_positive_int)
    sub.add_argument("--seq-len", type=_positive_int)
    sub.add_argument("--d-model", type=_positive_int)
    sub.add_argument("--layers", type=_positive_int, default=1)
    sub.add_argument("--lr", type=float)
    sub.add_argument("--preset", choices=["gpt2", "theory"], default="gpt2")
    sub.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:1, ...")
    sub.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="bf16: bfloat16 autocast")
    sub.add_argument("--compile", action="store_true", help="train through torch.compile")


def _settings(args) -> tuple[dict, dict]:
    scale = presets.resolve(args.scale)
    train = dict(steps=args.steps or scale.steps, batch_size=args.batch_size or scale.batch_size,
                 seq_len=args.seq_len or scale.seq_len, lr=args.lr if args.lr is not None else scale.lr,
                 eval_every=scale.eval_every, eval_batches=scale.eval_batches, precision=args.precision)
    config = dict(d_model=args.d_model or scale.d_model, n_layers=args.layers, max_len=max(1024, train["seq_len"]))
    return train, config


def cmd_train(args) -> int:
    from .chains import binary
    from .model import TransformerConfig
    from .train import train

    chain = binary(args.p, args.q)
    train_kwargs, config_kwargs = _settings(args)
    config = getattr(TransformerConfig, args.preset)(tied=args.tied, **config_kwargs)
    result = train(chain, config, seed=args.seed, device=args.device, compile=args.compile, **train_kwargs)
    final, h_rate, h_pi = result.final_test_loss, chain.entropy_rate(), chain.unigram_entropy()
    kernel = result.learnt_kernel()
    print(f"{chain.name}, {'tied' if args.tied else 'untied'} {args.preset}, {train_kwargs['steps']} steps, seed {args.seed}")
    print(f"final test loss {final:.4f}   H_rate {h_rate:.4f} (gap {final - h_rate:+.4f})   "
          f"H(pi) {h_pi:.4f} (gap {final - h_pi:+.4f})")
    print(f"learnt P(1|0) {kernel[0, 1]:.4f} (p = {args.p:g})   P(0|1) {kernel[1, 0]:.4f} (q = {args.q:g})   "
          f"escape step {result.escape_step()}")
    return 0


def cmd_sweep(args) -> int:
    from .sweep import ResultStore, grid, sweep

    train_kwargs, config_kwargs = _settings(args)
    tied = {"both": (True, False), "tied": (True,), "untied": (False,)}[args.tied]
    specs = grid(args.p, args.q, tied=tied, seeds=range(args.seed, args.seed + args.seeds), preset=args.preset,
                 config_kwargs=config_kwargs, **train_kwargs)
    store = ResultStore(args.results)
    before = len(store)
    try:
        frame = sweep(specs, store, ensemble_size=args.ensemble_size, device=args.device, compile=args.compile)
    except KeyboardInterrupt:
        print(f"interrupted: {len(store)} runs stored in {store.path} ({len(store) - before} new); "
              "re-run the same command to finish the rest", file=sys.stderr)
        return 130
    summary = frame.groupby(["config.tied", "chain.p", "chain.q"])["excess"].agg(["mean", "max", "count"])
    print(summary.round(4).to_string())
    print(f"{len(frame)} runs in {store.path} ({len(store) - before} new)")
    return 0


def cmd_book(args) -> int:
    import papermill as pm
    import yaml

    out = Path(args.out).resolve()
    sources = sorted((ROOT / "book").glob("*.ipynb"))
    if not sources:
        print(f"markovlib book: error: no chapters under {ROOT / 'book'} (needs a clone of the repository)", file=sys.stderr)
        return 2
    # everything the build reads besides the notebooks: toc, pages, bibliography, favicon, CSS, local extension
    support = [ROOT / "_toc.yml", ROOT / "tools" / "sphinx_fixes.py",
               *(f for f in (ROOT / "book").iterdir() if f.is_file() and f.suffix != ".ipynb"),
               *(f for f in (ROOT / "_static").rglob("*") if f.is_file())]
    for path in support:
        (out / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, out / path.relative_to(ROOT))
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["title"] = f"{config['title']} — edition p = {args.p:g}, q = {args.q:g}"
    config["execute"]["execute_notebooks"] = "off"          # executed below, with the reader's parameters
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    for source in sources:
        declared = set(pm.inspect_notebook(str(source)))        # Reproducibility declares none
        params = {k: v for k, v in dict(seed=args.seed, scale=args.scale).items() if k in declared}
        if {"p", "q"} <= declared:           # binary chapters; the k-state and CCMC ones keep their own parameters
            params.update(p=args.p, q=args.q)
        print(f"executing {source.name} with {', '.join(f'{k}={v}' for k, v in params.items())}", flush=True)
        pm.execute_notebook(str(source), str(out / "book" / source.name), cwd=str(source.parent), parameters=params,
                            progress_bar=False)
    jupyter_book = Path(sys.executable).with_name("jupyter-book")   # installed beside this Python
    subprocess.run([str(jupyter_book), "build", str(out), "--path-output", str(out)], check=True)
    print(f"Your edition: file://{out / '_build' / 'html' / 'index.html'}")
    return 0


def build_parser() -> Parser:
    parser = Parser(prog="markovlib", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    subs = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    train = subs.add_parser("train", help="train one model and compare its loss with H_rate and H(pi)")
    train.add_argument("--p", type=_probability, required=True)
    train.add_argument("--q", type=_probability, required=True)
    train.add_argument("--tied", action=argparse.BooleanOptionalAction, default=True)
    train.add_argument("--seed", type=int, default=0)
    _add_training(train)
    train.set_defaults(run=cmd_train)

    sweep = subs.add_parser("sweep", help="train a (p, q) grid × tying × seeds into a result store")
    sweep.add_argument("--p", type=_probabilities, required=True)
    sweep.add_argument("--q", type=_probabilities, required=True)
    sweep.add_argument("--tied", choices=["both", "tied", "untied"], default="both")
    sweep.add_argument("--seeds", type=_positive_int, default=1, help="number of seeds per cell")
    sweep.add_argument("--seed", type=int, default=0, help="first seed")
    sweep.add_argument("--results", default="results", help="directory of the result store")
    sweep.add_argument("--ensemble-size", type=_positive_int, default=8, help="models trained per batched step")
    _add_training(sweep)
    sweep.set_defaults(run=cmd_sweep)

    book = subs.add_parser("book", help="execute every chapter with your (p, q) and build your own HTML edition")
    book.add_argument("--p", type=_probability, required=True)
    book.add_argument("--q", type=_probability, required=True)
    book.add_argument("--seed", type=int, default=0)
    book.add_argument("--scale", choices=["auto", *presets.PRESETS], default="auto")
    book.add_argument("--out", default=None, help="output directory (default: editions/p<p>-q<q>)")
    book.set_defaults(run=cmd_book)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "p", None) is not None and getattr(args, "q", None) is not None:
        ps = args.p if isinstance(args.p, list) else [args.p]
        qs = args.q if isinstance(args.q, list) else [args.q]
        if any(p + q == 0 for p in ps for q in qs):
            parser.error("argument --q: p + q must be > 0 (p = q = 0 never switches)")
    if args.command == "book" and args.out is None:
        args.out = f"editions/p{args.p:g}-q{args.q:g}"
    return args.run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
