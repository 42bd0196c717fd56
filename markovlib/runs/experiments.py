"""The training runs of each chapter, as named groups of
:class:`~markovlib.runs.spec.RunSpec`.

A chapter asks for its runs here and gets them through
:func:`~markovlib.runs.sweep.sweep_results`; the paper edition (:func:`paper_edition`)
is the same calls at the chapters' default parameters and the ``paper`` scale. One
definition for both, so the shipped runs are found by the chapters' spec hashes.
"""

from __future__ import annotations

from dataclasses import replace

from .. import incontext
from ..presets import AUTHORS, Scale, authors, higher_order_sizes, init_sizes, resolve
from ..train import TrainConfig
from .spec import RunSpec, chain_grid, continued, grid

__all__ = [
    "global_minimum",
    "trap_variants",
    "saddle_sides",
    "fig4_grid",
    "fig4_cells",
    "fig4_untied_authors",
    "fig1_authors",
    "mirror",
    "fig5",
    "appendix_d",
    "threshold_runs",
    "depth_fig1",
    "fig1_trapped_starts",
    "FIG1_TRAPPED_SEEDS",
    "lag_runs",
    "authors_traps",
    "higher_order",
    "init_manifold",
    "AUTHORS_TRAPS",
    "precision_variants",
    "PRECISION_VARIANTS",
    "FIG4_GRID",
    "FIG5_PS",
    "TRAP_VARIANTS",
    "threshold_ps",
    "lag_windows",
    "paper_edition",
    "incontext_runs",
]

FIG4_GRID = (0.2, 0.4, 0.5, 0.6, 0.8)  # Fig 4's p and q values
FIG5_PS = (0.1, 0.3, 0.6, 0.9)  # Fig 5's switching probabilities (k = 5)
# bad_local_minima: the tied models whose plateaus are counted, (preset, architecture
# changes)
TRAP_VARIANTS = {
    "gpt2": ("gpt2", {}),
    "theory": ("theory", {}),
    "theory + LN": ("theory", {"layer_norm": True}),
    "gpt2, init 0.2": ("gpt2", {"init_std": 0.2}),
}
MAIN_VARIANTS = (
    "gpt2",
    "theory",
)  # the paper's two models; the others are side variants


def _options(
    S: Scale,
    seed: int,
    *,
    tied: bool = True,
    n: int | None = None,
    preset: str = "gpt2",
    train: TrainConfig | None = None,
    **changes,
) -> dict:
    """The keywords of :func:`grid` and :func:`chain_grid` in every chapter: one tying,
    ``n`` seeds from ``seed`` (default ``S.seeds``), the architecture (d from the scale,
    a positional table of at least 1024, with ``changes``) and ``train`` (default
    ``S.train``)."""
    return dict(
        tied=[tied],
        seeds=range(seed, seed + (S.seeds if n is None else n)),
        preset=preset,
        config_kwargs=dict(d_model=S.d_model, max_len=max(1024, S.seq_len), **changes),
        train=S.train if train is None else train,
    )


def global_minimum(
    p: float, q: float, S: Scale, seed: int = 0
) -> dict[str, list[RunSpec]]:
    """Fig 3(b): the GPT-2 model, tied and untied, ``S.seeds`` runs each."""
    return {
        label: grid([p], [q], **_options(S, seed, tied=tied))
        for label, tied in (("tied", True), ("untied", False))
    }


def trap_variants(
    p: float, q: float, S: Scale, seed: int = 0
) -> dict[str, list[RunSpec]]:
    """Fig 3(a) and the trap statistics: tied runs of each of :data:`TRAP_VARIANTS`."""
    out = {}
    for name, (preset, changes) in TRAP_VARIANTS.items():
        n = S.trap_seeds if name in MAIN_VARIANTS else S.n_variant_seeds
        out[name] = grid(
            [p],
            [q],
            **_options(S, seed, n=n, preset=preset, train=S.trap_train, **changes),
        )
    return out


def saddle_sides(
    p: float, q: float, S: Scale, seed: int = 0
) -> dict[tuple[str, str], list[RunSpec]]:
    """Thm 3 in training: GPT-2 and theory models, tied and untied, ``S.trap_seeds``
    runs each."""
    return {
        (preset, "tied" if tied else "untied"): grid(
            [p],
            [q],
            **_options(
                S, seed, tied=tied, n=S.trap_seeds, preset=preset, train=S.trap_train
            ),
        )
        for preset in MAIN_VARIANTS
        for tied in (True, False)
    }


def fig4_grid(
    S: Scale, seed: int = 0, precision: str = "fp32"
) -> dict[str, list[RunSpec]]:
    """Fig 4: the GPT-2 model on every (p, q) of :data:`FIG4_GRID`, tied and untied,
    ``S.seeds`` runs per cell, trained in ``precision``."""
    train = S.train.replace(precision=precision)
    return {
        tie: grid(
            FIG4_GRID, FIG4_GRID, **_options(S, seed, tied=tie == "tied", train=train)
        )
        for tie in ("tied", "untied")
    }


def fig4_untied_authors(S: Scale, seed: int = 0) -> list[RunSpec]:
    """Fig 4's untied grid at the authors' untied iterations
    (:attr:`~markovlib.presets.AuthorsSetting.untied_steps`: their script ran 500)
    in fp16, the other sizes of ``S``."""
    untied = replace(S, steps=AUTHORS["fig4"].untied_steps)
    return fig4_grid(untied, seed, precision="fp16")["untied"]


def above_line_cells() -> list[tuple[float, float]]:
    """Fig 4's cells with p + q > 1, in :data:`FIG4_GRID` order (p, then q)."""
    return [(p, q) for p in FIG4_GRID for q in FIG4_GRID if p + q > 1 + 1e-9]


def fig4_cells(S: Scale, seed: int = 100) -> list[RunSpec]:
    """Fig 4's tied cells above p + q = 1, ``S.seeds`` runs each, trained with
    ``S.train``; no two runs share an initialisation: cell c (of
    :func:`above_line_cells`) has the seeds ``seed + c S.seeds``, ...,
    ``seed + (c + 1) S.seeds - 1``."""
    n = S.seeds
    return [
        spec
        for c, (p, q) in enumerate(above_line_cells())
        for spec in grid([p], [q], **_options(S, seed + c * n, n=n))
    ]


# trapped: the tied runs at the authors' budget, per (preset, precision)
AUTHORS_TRAPS = (("gpt2", "fp32"), ("gpt2", "fp16"), ("theory", "fp32"))


def authors_traps(
    p: float, q: float, S: Scale, seed: int = 0, *, fp16: bool = True
) -> dict[tuple[str, str], list[RunSpec]]:
    """Tied runs at the authors' budget (``S.steps``) in float32 and in fp16 without
    loss scaling, ``S.trap_seeds`` each (:data:`AUTHORS_TRAPS`; ``fp16=False``: the
    float32 ones only)."""
    return {
        (preset, precision): grid(
            [p],
            [q],
            **_options(
                S,
                seed,
                n=S.trap_seeds,
                preset=preset,
                train=S.train.replace(precision=precision),
            ),
        )
        for preset, precision in AUTHORS_TRAPS
        if fp16 or precision != "fp16"
    }


# trapped: what the loss scale and the tokens per batch change in fp16 (tied GPT-2)
PRECISION_VARIANTS = {
    "fp16-scaled": dict(precision="fp16-scaled"),
    "fp16-len256": dict(precision="fp16", seq_len=256),
    "fp16-len512": dict(precision="fp16", seq_len=512),
}


def precision_variants(
    p: float, q: float, S: Scale, seed: int = 0
) -> dict[str, list[RunSpec]]:
    """Tied GPT-2 runs at the authors' budget in fp16 with the 2^16 loss scale, and
    without it on shorter sequences (the per-token gradient is 1 / (batch x length)),
    ``S.trap_seeds`` each (:data:`PRECISION_VARIANTS`; lengths at most
    ``S.seq_len``)."""
    out = {}
    for name, change in PRECISION_VARIANTS.items():
        change = {**change, "seq_len": min(change.get("seq_len", S.seq_len), S.seq_len)}
        out[name] = grid(
            [p],
            [q],
            **_options(S, seed, n=S.trap_seeds, train=S.train.replace(**change)),
        )
    return out


def higher_order(S: Scale, seed: int = 0) -> dict[int, list[RunSpec]]:
    """ICLR Sec. 4.4: tied GPT-2 models of each depth on random order-2 binary chains
    (rows Dirichlet(1)); run ``seed + i`` learns the chain of seed ``seed + i``."""
    H = higher_order_sizes(S)
    chains = [
        {"kind": "random", "order": 2, "k": 2, "alpha": 1.0, "seed": s}
        for s in range(seed, seed + H.seeds)
    ]
    out = {}
    for L in H.depths:
        specs = chain_grid(
            chains,
            tied=[True],
            seeds=[0],
            config_kwargs=dict(
                d_model=H.d_model,
                n_heads=H.n_heads,
                n_layers=L,
                max_len=H.seq_len,
            ),
            train=H.train(S),
        )
        out[L] = [replace(s, seed=c["seed"]) for s, c in zip(specs, chains)]
    return out


def appendix_d(p: float, q: float, S: Scale, seed: int = 0) -> list[RunSpec]:
    """App. D at the authors' model (their Markov-Simple2 folder): the tied theory
    model (no LayerNorm, ReLU) with the uni-embedding x_n e and one logit, ``S.seeds``
    runs."""
    return grid([p], [q], **_options(S, seed, preset="theory", embedding="uni"))


def fig5(
    k: int, S: Scale, seed: int = 0, ps=FIG5_PS, preset: str = "gpt2"
) -> dict[str, list[RunSpec]]:
    """Fig 5: symmetric k-state chains at each p, the ``preset`` model (GPT-2, or
    "theory": the authors' no-LayerNorm, ReLU model of their Fig 5 runs) tied and
    untied, ``S.seeds`` runs each, in the order of ``ps``."""
    chains = [{"kind": "symmetric", "k": k, "p": float(p)} for p in ps]
    return {
        tie: chain_grid(chains, **_options(S, seed, tied=tie == "tied", preset=preset))
        for tie in ("tied", "untied")
    }


def threshold_ps(star: float) -> list[float]:
    """Switching probabilities around a k-state threshold ``star``: three below it, two
    above."""
    return sorted(
        {
            round(x, 3)
            for x in (
                star - 0.2,
                star - 0.1,
                star - 0.05,
                min(star + 0.05, 0.99),
                min(star + 0.1, 1.0),
            )
            if 0 < x <= 1
        }
    )


def threshold_runs(
    k: int, star: float, S: Scale, seed: int = 0
) -> dict[str, list[RunSpec]]:
    """Tied theory and GPT-2 models on symmetric chains around the threshold ``star``,
    ``S.seeds`` runs each."""
    chains = [{"kind": "symmetric", "k": k, "p": p} for p in threshold_ps(star)]
    return {
        preset: chain_grid(
            chains, **_options(S, seed, preset=preset, train=S.trap_train)
        )
        for preset in ("theory", "gpt2")
    }


def init_manifold(
    p: float, q: float, S: Scale, seed: int = 0
) -> dict[str, list[RunSpec]]:
    """The initialisation chapter's AdamW runs: the tied theory model started at each
    manifold point of ``init_sizes(S).starts()`` (b optimal), on the chain ("chain")
    and on its mirror (1 - p, 1 - q) ("mirror"), trained with ``S.train``. Every run
    has the seed ``seed``: one stream of batches for every start."""
    out = {}
    for label, (a, b) in (("chain", (p, q)), ("mirror", mirror(p, q))):
        base = grid([a], [b], **_options(S, seed, n=1, preset="theory"))[0]
        out[label] = [
            replace(base, init={"kind": "manifold", "e": float(e), "w": float(w)})
            for e, w in init_sizes(S).starts()
        ]
    return out


def depths(S: Scale) -> list[int]:
    """Fig 1's depths at the paper scale; 1 and 2 in a reader's ``cpu`` re-run (the
    claim's two sides; depth 4 costs four times depth 1); 1, 2, 4 at ``smoke``."""
    return {"paper": [1, 2, 4, 8], "cpu": [1, 2]}.get(S.name, [1, 2, 4])


def depth_fig1(p: float, q: float, S: Scale, seed: int = 0) -> dict[int, list[RunSpec]]:
    """Fig 1: tied GPT-2 models of each depth on the binary chain, ``S.seeds`` runs
    each."""
    base = {"kind": "binary", "p": float(p), "q": float(q)}
    return {L: chain_grid([base], **_options(S, seed, n_layers=L)) for L in depths(S)}


def mirror(p: float, q: float) -> tuple[float, float]:
    """The chain (1 - p, 1 - q): the same |p + q - 1| on the other side of the line."""
    return round(1 - p, 12), round(1 - q, 12)


def fig1_authors(
    p: float, q: float, S: Scale, seed: int = 0
) -> dict[str, list[RunSpec]]:
    """Fig 1 at ``S`` (the authors' settings: :func:`~markovlib.presets.authors`):
    tied GPT-2 models of each depth on (p, q), ``S.trap_seeds`` runs at depth 1 and
    ``S.seeds`` at the others; for Sec. 4.4's "regardless of these factors" (tying and
    switching), depth 2 untied on (p, q) ("L2-untied") and tied on the mirror chain
    ("L2-mirror"), ``S.seeds`` runs each."""
    out = {
        f"L{L}": grid(
            [p],
            [q],
            **_options(S, seed, n=S.trap_seeds if L == 1 else S.seeds, n_layers=L),
        )
        for L in depths(S)
    }
    out["L2-untied"] = grid([p], [q], **_options(S, seed, tied=False, n_layers=2))
    mp, mq = mirror(p, q)
    out["L2-mirror"] = grid([mp], [mq], **_options(S, seed, n_layers=2))
    return out


# The seeds of depth-fig1-fp16-L1 (32 runs, seeds 0-31) whose single layer stayed at
# H(π), the first 8 from seed 8 on (4 and 5 trapped too and are in depth-fig1-fp16-L2
# already; 26, the ninth, is left out to make one ensemble of 8); read
# from the shipped runs on 2026-11-27, before any depth-2 run at these seeds existed.
FIG1_TRAPPED_SEEDS = (8, 9, 12, 16, 18, 19, 24, 25)


def fig1_trapped_starts(p: float, q: float, S: Scale, seed: int = 0) -> list[RunSpec]:
    """The abstract's deeper models that "reliably converge to the ground-truth
    bigram", from the starts that trapped one layer: tied
    depth-2 GPT-2 runs at ``S`` whose seeds trapped the single layer
    (:data:`FIG1_TRAPPED_SEEDS`). A seed fixes the batches and the draws of the
    embeddings and the first block, so each run starts where a trapped depth-1 run
    started (its W_O and W_2 drawn at 1/sqrt(2) of depth 1's scale), plus a second
    block."""
    options = _options(S, seed, n_layers=2)
    options["seeds"] = [seed + s for s in FIG1_TRAPPED_SEEDS]
    return grid([p], [q], **options)


def lag_windows(order: int) -> list[int]:
    """Attention windows tried on a lag-``order`` chain: none, the matched one
    (order - 1) and wider ones."""
    return sorted({0, order - 1, order, 2 * order, 4 * order})


def lag_runs(
    order: int, p: float, q: float, S: Scale, seed: int = 0
) -> dict[str, dict[int, list[RunSpec]]]:
    """Poster: a lag-``order`` chain, full attention at each depth, and one layer with
    each window."""
    lag = {"kind": "lag", "order": order, "p": float(p), "q": float(q)}
    return {
        "depth": {
            L: chain_grid([lag], **_options(S, seed, n_layers=L)) for L in depths(S)
        },
        "window": {
            w: chain_grid([lag], **_options(S, seed, window=w))
            for w in lag_windows(order)
        },
    }


EDITION_CHAPTERS = (
    "global_minimum",
    "bad_local_minima",
    "saddles",
    "multi_state",
    "depth",
    "trapped",
    "initialisation",
)  # the chapters whose runs the paper edition ships


def paper_edition() -> list[tuple[str, list[RunSpec]]]:
    """Every run the chapters need at the paper scale with their default parameters, in
    groups, most wanted first.

    A group's name is the shipped file it goes to (``data/paper/<name>.parquet``).
    """
    S = {c: resolve("paper", c, environ=False) for c in EDITION_CHAPTERS}
    gm, blm, sad, ms, dp, tr, ini = (S[c] for c in EDITION_CHAPTERS)
    groups = _named("global_minimum-{}", global_minimum(0.2, 0.3, gm))
    groups += _depth_groups(dp)
    groups += _trap_groups(blm, sad)
    groups += _named("fig4-{}", fig4_grid(sad))
    groups += _named("fig5-k5-{}", fig5(5, ms))
    groups += _named("threshold-k5-{}", threshold_runs(5, 0.8, ms))
    groups += _budget_groups(tr, dp)
    groups += _named("init-manifold-{}", init_manifold(0.5, 0.8, ini))
    groups += _authors_groups(gm, tr, ms, dp)
    groups += _named(
        "incontext-{}", incontext_runs(2, 1.0, incontext.scale("paper", environ=False))
    )
    return groups + _thesis_groups(groups, tr)


def _named(pattern: str, specs: dict) -> list[tuple[str, list[RunSpec]]]:
    """Groups named ``pattern`` filled with each label of ``specs``, in its order."""
    return [(pattern.format(label), group) for label, group in specs.items()]


def _depth_groups(dp: Scale) -> list[tuple[str, list[RunSpec]]]:
    """Fig 1 at each depth, and the lag-2 chain at each depth and attention window."""
    lag = lag_runs(2, 0.5, 0.8, dp)
    groups = _named("depth-fig1-L{}", depth_fig1(0.5, 0.8, dp))
    groups += _named("depth-lag2-L{}", lag["depth"])
    return groups + _named("depth-lag2-window{}", lag["window"])


def _trap_groups(blm: Scale, sad: Scale) -> list[tuple[str, list[RunSpec]]]:
    """The plateau counts on p + q > 1: the paper's two models tied, then untied, then
    the side variants (theory + LN, GPT-2 at init 0.2)."""
    traps, sides = trap_variants(0.5, 0.8, blm), saddle_sides(0.5, 0.8, sad)
    groups = [(f"trap-{name}-tied", traps[name]) for name in MAIN_VARIANTS]
    groups += [(f"trap-{name}-untied", sides[name, "untied"]) for name in MAIN_VARIANTS]
    return groups + [
        ("trap-theory-ln-tied", traps["theory + LN"]),
        ("trap-gpt2-init0.2-tied", traps["gpt2, init 0.2"]),
    ]


def _budget_groups(tr: Scale, dp: Scale) -> list[tuple[str, list[RunSpec]]]:
    """The authors' budget (400 iterations) and precision (fp16 without loss scaling):
    the traps and Fig 4, with the higher-order runs in their place in the queue."""
    groups = [
        (f"trap400-{preset}-tied-{precision}", specs)
        for (preset, precision), specs in authors_traps(0.5, 0.8, tr).items()
    ]
    groups += _named("fig4-400-{}-fp16", fig4_grid(tr, precision="fp16"))
    groups += _named("higher-order-L{}", higher_order(dp))
    groups += _named("trap400-gpt2-tied-{}", precision_variants(0.5, 0.8, tr))
    return groups + _named("fig4-400-{}-fp32", fig4_grid(tr, precision="fp32"))


def _authors_groups(gm, tr, ms, dp) -> list[tuple[str, list[RunSpec]]]:
    """The figures at the authors' settings (:data:`~markovlib.presets.AUTHORS`) that
    the groups above ran in float32 or for 1000 iterations: Fig 5, Fig 3(b) and App. D,
    Fig 4's tied cells above the line with independent runs and its untied grid at
    their untied runs' 500 iterations, Fig 1."""
    groups = _named("fig5-k5-fp16-{}", fig5(5, authors("fig5", ms)))
    groups += _named(
        "global_minimum-400-fp16-{}", global_minimum(0.2, 0.3, authors("fig3", gm))
    )
    groups += [("fig4-cells-400-tied-fp16", fig4_cells(authors("fig4", tr)))]
    groups += [("fig4-500-untied-fp16", fig4_untied_authors(tr))]
    groups += _named("depth-fig1-fp16-{}", fig1_authors(0.5, 0.8, authors("fig1", dp)))
    trapped_starts = fig1_trapped_starts(0.5, 0.8, authors("fig1", dp))
    groups += [("depth-fig1-fp16-L2-trapstarts", trapped_starts)]
    # Fig 5 at the authors' model (their Markov-Simple folder: no LayerNorm, ReLU),
    # p = 0.9 first: an ensemble of 3 runs is one cell of the figure
    fig5_theory = fig5(5, authors("fig5", ms), ps=FIG5_PS[::-1], preset="theory")
    groups += _named("fig5-k5-theory-fp16-{}", fig5_theory)
    return groups + [("appd-uni-fp16-tied", appendix_d(0.2, 0.3, authors("appd", gm)))]


# trapped: its groups of runs, by name
def trapped_groups(
    p: float, q: float, S: Scale, S_long: Scale, seed: int = 0
) -> dict[str, list[RunSpec]]:
    """The trapped chapter's tied runs on (p, q), by name: GPT-2 in fp16 without loss
    scaling (Fig 3(a) at the authors' settings), in float32 and in fp16 with the 2^16
    loss scale, the theory model in float32, all at the budget of ``S``; and GPT-2 in
    float32 at the longer budget of ``S_long`` (the bad_local_minima runs)."""
    traps = authors_traps(p, q, S, seed)
    long = trap_variants(p, q, S_long, seed)["gpt2"]
    if S_long.trap_train == traps["gpt2", "fp32"][0].train:  # one budget (a cpu re-run)
        long = long[: S.trap_seeds]  # the float32 group's runs: nothing more to train
    return {
        "GPT-2, fp16": traps["gpt2", "fp16"],
        "GPT-2, float32": traps["gpt2", "fp32"],
        "theory, float32": traps["theory", "fp32"],
        f"GPT-2, float32, {S_long.trap_train.steps} it.": long,
        "GPT-2, fp16, loss × 65536": precision_variants(p, q, S, seed)["fp16-scaled"],
    }


def fp16_lengths(p: float, q: float, S: Scale, seed: int = 0) -> dict[int, list]:
    """Tied GPT-2 runs in fp16 without loss scaling on sequences shorter than
    ``S.seq_len``, by length (:data:`PRECISION_VARIANTS`)."""
    out = {}
    for name, specs in precision_variants(p, q, S, seed).items():
        length = specs[0].train.seq_len
        if name.startswith("fp16-len") and length < S.seq_len:
            out[length] = specs
    return out


def trapped_grids(S: Scale, S_grid: Scale, seed: int = 0) -> dict[tuple, list]:
    """Fig 4's grids in the trapped chapter by (name, tying): at the budget of ``S`` in
    fp16 without loss scaling and in float32 ("fp16, 400"), the untied grid at the
    authors' untied iterations in fp16 ("fp16, 500", untied only), and this book's
    float32 grid at the budget of ``S_grid`` ("float32, 1000")."""
    grids = {
        f"fp16, {S.steps}": fig4_grid(S, seed, precision="fp16"),
        f"float32, {S.steps}": fig4_grid(S, seed, precision="fp32"),
        f"float32, {S_grid.steps}": fig4_grid(S_grid, seed),
    }
    out = {(g, tie): specs for g, ties in grids.items() for tie, specs in ties.items()}
    untied = fig4_untied_authors(S, seed)
    return {**out, (f"fp16, {untied[0].train.steps}", "untied"): untied}


__all__ += ["trapped_groups", "fp16_lengths", "trapped_grids"]


def layer_norm_control(p: float, q: float, S: Scale, seed: int = 0) -> list[RunSpec]:
    """Sec. 2's "we omit the layer norm since its influence is marginal": the tied
    theory model with layer norms added, at the budget of ``S`` in float32,
    ``S.trap_seeds`` runs (the seeds of the theory model's group without them)."""
    train = S.train.replace(precision="fp32")
    options = _options(
        S, seed, n=S.trap_seeds, preset="theory", train=train, layer_norm=True
    )
    return grid([p], [q], **options)


# The thesis (Sec. 4.2): training continued from the final weights of every run the
# book counts at H(π) (share of the gap below 0.1) in the groups of Fig 3(a) and Fig 1
# at the authors' settings and of the theory model in float32; read from the shipped
# runs on 2026-11-28, before any continued run existed. The seeds of each source group.
TRAPPED_SEEDS = {
    "trap400-gpt2-tied-fp16": (0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17, 18)
    + (19, 20, 21, 22, 24, 25, 26, 27, 29, 31),
    "depth-fig1-fp16-L1": (4, 5, 8, 9, 12, 16, 18, 19, 24, 25, 26),
    "trap400-theory-tied-fp32": (1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 16, 17, 18)
    + (19, 21, 22, 24, 25, 26, 27, 29, 31),
    "trap400-gpt2-tied-fp32": (9, 19, 24),
}
# the trapped chapter's sources, whose trapped runs are trained on
CONTINUED = (
    "trap400-gpt2-tied-fp16",
    "trap400-theory-tied-fp32",
    "trap400-gpt2-tied-fp32",
)
# the depth chapter's: Fig 1's single layer, continued after every group above (its
# groups and rule, fig1_stays_*, written on 2026-11-28 before any of its runs)
CONTINUED_FIG1 = ("depth-fig1-fp16-L1",)
# each source's training continued in float32 and in fp16 with the 2^16 loss scale
CONTINUE_PRECISIONS = ("fp32", "fp16-scaled")
CONTINUE_SEED = 10_000  # a continued run's batches: seed source + 10 000 (fresh ones)


def continuations(sources: list[RunSpec], precision: str) -> list[RunSpec]:
    """Training of each of ``sources`` continued from its final weights for its budget
    again, in ``precision``, on fresh batches (:data:`CONTINUE_SEED`)."""
    return [continued(s, precision, CONTINUE_SEED) for s in sources]


def _thesis_groups(groups, tr: Scale) -> list[tuple[str, list[RunSpec]]]:
    """The trapped chapter's trapped runs (:data:`CONTINUED`) continued in float32, the
    layer-norm control, the continuations in fp16 with a loss scale, then Fig 1's
    (:data:`CONTINUED_FIG1`) in each: a group per precision and source
    ("continue-<source>-<precision>")."""
    out = []
    for precision in CONTINUE_PRECISIONS:
        out += _continued_groups(groups, CONTINUED, precision)
        if precision == "fp32":
            out.append(
                ("trap400-theory-ln-tied-fp32", layer_norm_control(0.5, 0.8, tr))
            )
    for precision in CONTINUE_PRECISIONS:
        out += _continued_groups(groups, CONTINUED_FIG1, precision)
    return out


def _continued_groups(groups, names, precision) -> list[tuple[str, list[RunSpec]]]:
    """The trapped runs (:data:`TRAPPED_SEEDS`) of each source group in ``names``
    continued in ``precision``: a group "continue-<source>-<precision>" each."""
    by_name, out = dict(groups), []
    for name in names:
        sources = [s for s in by_name[name] if s.seed in TRAPPED_SEEDS[name]]
        assert len(sources) == len(TRAPPED_SEEDS[name]), name
        out.append((f"continue-{name}-{precision}", continuations(sources, precision)))
    return out


__all__ += [
    "layer_norm_control",
    "CONTINUED",
    "CONTINUED_FIG1",
    "TRAPPED_SEEDS",
    "CONTINUE_PRECISIONS",
    "CONTINUE_SEED",
    "continuations",
]


def thesis_continuations(
    trapped: dict[str, list[RunSpec]], at_most: int | None = None
) -> dict[str, list[RunSpec]]:
    """The trapped chapter's continued runs by "<label>, <precision>": the first
    ``at_most`` (all: None) of each label's trapped runs ``trapped``, continued in each
    of :data:`CONTINUE_PRECISIONS` (the paper edition's continue-* groups at the
    paper's chain)."""
    return {
        f"{label}, {precision}": continuations(specs[:at_most], precision)
        for precision in CONTINUE_PRECISIONS
        for label, specs in trapped.items()
        if specs
    }


__all__ += ["thesis_continuations"]


def incontext_runs(
    k: int, alpha: float, S: Scale, seed: int = 0
) -> dict[str, list[RunSpec]]:
    """The in-context chapter (issue 68): GPT-2 models of two layers and of one, tied
    and untied, ``S.seeds`` runs each, on sequences whose kernel is drawn per sequence
    (rows Dirichlet(``alpha``) on ``k`` states); two layers first."""
    chain = {"kind": "incontext", "k": int(k), "alpha": float(alpha)}
    return {
        f"L{L}-{'tied' if tied else 'untied'}": chain_grid(
            [chain], **_options(S, seed, tied=tied, n_layers=L)
        )
        for L in sorted(incontext.LAYERS, reverse=True)
        for tied in (False, True)
    }
