"""``markovlib train``: one model on one binary chain; its final loss against H_rate and
H(π), its learnt kernel and escape step."""

from __future__ import annotations

import argparse
import sys

from .environment import settings
from .errors import FAILED, CommandFailed
from .options import add_chain, add_training
from .values import probability, seed


def add(subs, help: str):
    """``train``'s options."""
    train = subs.add_parser("train", help=help)
    add_chain(train, probability)
    train.add_argument("--tied", action=argparse.BooleanOptionalAction, default=True)
    train.add_argument("--seed", type=seed, default=0)
    add_training(train)
    return train


def run(args) -> int:
    """Train the model; three lines of what it learnt."""
    from ..chains import binary
    from ..model import TransformerConfig
    from ..train import Execution, train

    chain = binary(args.p, args.q)
    train_kwargs, config_kwargs = settings(args)
    config = getattr(TransformerConfig, args.preset)(tied=args.tied, **config_kwargs)
    result = train(
        chain,
        config,
        seed=args.seed,
        execution=Execution(  # no bar in logs: an error stays one line
            device=args.device, compile=args.compile, progress=sys.stderr.isatty()
        ),
        **train_kwargs,
    )
    if result.diverged_step is not None:
        raise CommandFailed(
            FAILED,
            f"the run diverged: its loss is not finite from step "
            f"{result.diverged_step} of {train_kwargs['steps']} (lr "
            f"{train_kwargs['lr']:g}); no final loss to report",
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
