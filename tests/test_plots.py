"""markovlib.companion.figures: labelled axes, reference lines at H_rate and H(pi),
colours, opaque white figures (Agg)."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from markovlib.chains import binary, lag_switching, symmetric
from markovlib.companion.figures import (
    bad_local_minima as bad_local_minima_figures,
    ccmc as ccmc_figures,
    depth as depth_figures,
    framework as framework_figures,
    global_minimum as global_minimum_figures,
    initialisation as initialisation_figures,
    multi_state as multi_state_figures,
    saddles as saddles_figures,
    style,
    trapped as trapped_figures,
)
from markovlib.companion.measures.generation import generation_summary


@pytest.fixture(autouse=True)
def _clean_matplotlib():
    """rcParams restored after each test (set_style() changes them), and every figure
    the test drew has its legends off the data (issue 49: legends over the loss
    curves of bad_local_minima, trapped and saddles) and no TeX typed as plain text in
    any of its texts (issue 49: "θ_π" in a legend)."""
    with matplotlib.rc_context():
        yield
        figures = [plt.figure(n) for n in plt.get_fignums()]
        covered = [f"{where}" for f in figures for where in style.legends_over_data(f)]
        typed = [text for f in figures for text in style.pseudo_tex(f)]
    plt.close("all")
    assert not covered, covered
    assert not typed, f"pseudo-TeX in a figure (mathtext: $...$): {typed}"


def _history(seed: int, steps: int = 40, eval_every: int = 10) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    step = np.arange(steps + 1)
    test = np.where(
        step % eval_every == 0,
        0.7 - 0.002 * step + 0.01 * rng.standard_normal(steps + 1),
        np.nan,
    )
    return pd.DataFrame(
        {
            "step": step,
            "lr": np.nan,
            "train_loss": 0.7 - 0.002 * step,
            "test_loss": test,
        }
    )


def _horizontal_lines(ax) -> dict[float, object]:
    out = {}
    for line in ax.lines:
        y = np.asarray(line.get_ydata(), dtype=float)
        if y.size == 2 and y[0] == y[1]:
            out[round(float(y[0]), 12)] = line
    return out


def test_set_style_makes_figures_opaque_white():
    plt.rcParams["figure.facecolor"] = "none"
    plt.rcParams["axes.facecolor"] = (0, 0, 0, 0)
    style.set_style()
    fig, ax = plt.subplots()
    assert to_rgba(fig.get_facecolor()) == (1.0, 1.0, 1.0, 1.0)
    assert to_rgba(ax.get_facecolor()) == (1.0, 1.0, 1.0, 1.0)
    assert to_rgba(plt.rcParams["savefig.facecolor"]) == (1.0, 1.0, 1.0, 1.0)
    assert plt.rcParams["savefig.transparent"] is False


@pytest.mark.parametrize(
    "chain", [binary(0.5, 0.8), symmetric(5, 0.1)], ids=lambda c: c.name
)
def test_reference_lines(chain):
    _, ax = plt.subplots()
    style.reference_lines(ax, chain)
    lines = _horizontal_lines(ax)
    assert len(ax.lines) == 2
    rate = lines[round(chain.entropy_rate(), 12)]
    unigram = lines[round(chain.unigram_entropy(), 12)]
    assert f"{chain.entropy_rate():.4f}" in rate.get_label()
    assert f"{chain.unigram_entropy():.4f}" in unigram.get_label()
    assert rate.get_linestyle() == "--" and unigram.get_linestyle() == ":"
    assert to_rgba(rate.get_color()) == to_rgba(style.COLORS["H_rate"])
    assert to_rgba(unigram.get_color()) == to_rgba(style.COLORS["H_pi"])


def test_reference_lines_switches():
    chain = binary(0.2, 0.3)
    _, ax = plt.subplots()
    style.reference_lines(ax, chain, unigram=False)
    assert list(_horizontal_lines(ax)) == [round(chain.entropy_rate(), 12)]
    _, ax = plt.subplots()
    style.reference_lines(ax, chain, rate=False)
    assert list(_horizontal_lines(ax)) == [round(chain.unigram_entropy(), 12)]


def test_reference_lines_bigram_for_higher_order_chains():
    from markovlib.chains import lag_switching

    chain = lag_switching(2, 0.5, 0.8)
    _, ax = plt.subplots()
    style.reference_lines(ax, chain, bigram=True, unigram=False)
    lines = _horizontal_lines(ax)
    assert set(lines) == {
        round(chain.entropy_rate(), 12),
        round(chain.bigram_entropy(), 12),
    }
    assert (
        f"{chain.bigram_entropy():.4f}"
        in lines[round(chain.bigram_entropy(), 12)].get_label()
    )


def test_loss_curves():
    chain = binary(0.5, 0.8)
    single = _history(0)
    group = [_history(1), _history(2), _history(3)]
    run = SimpleNamespace(
        history=_history(4)
    )  # anything with a .history (a TrainResult) works
    ax = style.loss_curves(
        {"tied": single, "untied": group, "theory run": run}, chain, ylim=(0.5, 0.8)
    )
    assert ax.get_xlabel() == "iteration"
    assert "test loss" in ax.get_ylabel() and "nats" in ax.get_ylabel()
    assert ax.get_title() == chain.name
    assert ax.get_ylim() == (0.5, 0.8)
    # three data curves, evaluated steps only, plus the two reference lines
    assert len(ax.lines) == 5
    curve_tied, curve_untied, curve_run = ax.lines[:3]
    evaluated = single.dropna(subset=["test_loss"])
    np.testing.assert_array_equal(curve_tied.get_xdata(), evaluated["step"].to_numpy())
    np.testing.assert_allclose(
        curve_tied.get_ydata(), evaluated["test_loss"].to_numpy()
    )
    mean = np.mean(
        [g.dropna(subset=["test_loss"])["test_loss"].to_numpy() for g in group], axis=0
    )
    np.testing.assert_allclose(curve_untied.get_ydata(), mean)
    assert "mean of 3" in curve_untied.get_label()
    assert len(ax.collections) == 1  # the std band of the group only
    lines = _horizontal_lines(ax)
    assert (
        round(chain.entropy_rate(), 12) in lines
        and round(chain.unigram_entropy(), 12) in lines
    )
    assert to_rgba(curve_tied.get_color()) == to_rgba(style.COLORS["tied"])
    assert to_rgba(curve_run.get_color()) == to_rgba(style.COLORS["theory"])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "tied" in legend and any("H_{" in t for t in legend)


def test_loss_curves_other_column_and_given_axes():
    chain = binary(0.2, 0.3)
    fig, ax = plt.subplots()
    out = style.loss_curves(
        {"tied": _history(0)}, chain, ax=ax, column="train_loss", title="custom"
    )
    assert out is ax
    assert ax.get_ylabel().startswith("train loss")
    assert ax.get_title() == "custom"
    assert len(ax.lines[0].get_xdata()) == 41  # train loss exists at every step


def test_untied_curve_is_orange():
    _, ax = plt.subplots()
    style.loss_curves(
        {"tied": _history(0), "untied": _history(1)}, binary(0.5, 0.8), ax=ax
    )
    assert to_rgba(ax.lines[1].get_color()) == to_rgba(style.COLORS["untied"])
    assert to_rgba(ax.lines[0].get_color()) != to_rgba(ax.lines[1].get_color())


def test_probability_along_plot():
    positions = np.array([0, 3, 4, 9])
    probs = np.array([0.5, 0.52, 0.48, 0.51])
    ax = style.probability_along(
        positions, probs, {"p": 0.5, "pi_1": 0.385}, label="tied"
    )
    assert ax.get_xlabel().startswith("position")
    assert "x_{n+1}" in ax.get_ylabel()
    assert ax.get_ylim() == (0.0, 1.0)
    dots = ax.lines[0]
    np.testing.assert_array_equal(dots.get_xdata(), positions)
    np.testing.assert_array_equal(dots.get_ydata(), probs)
    lines = _horizontal_lines(ax)
    assert set(lines) == {0.5, 0.385}
    assert "0.385" in lines[0.385].get_label()


def test_heatmap_layout():
    ps = [0.2, 0.4, 0.6]
    qs = [0.1, 0.3]
    values = np.arange(6, dtype=float).reshape(2, 3)  # values[i, j] at (qs[i], ps[j])
    ax = style.heatmap(values, ps, qs, title="grid", fmt=".1f")
    assert "p" in ax.get_xlabel() and "q" in ax.get_ylabel()
    assert ax.get_title() == "grid"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.2", "0.4", "0.6"]
    # rows are drawn with q increasing upwards: the first (top) row is the largest q
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0.3", "0.1"]
    mesh = ax.collections[0]
    np.testing.assert_array_equal(
        np.asarray(mesh.get_array()).reshape(2, 3), values[::-1]
    )
    annotations = [t.get_text() for t in ax.texts]
    assert annotations == ["3.0", "4.0", "5.0", "0.0", "1.0", "2.0"]


def test_heatmap_switching_line_passes_through_the_cells_with_p_plus_q_one():
    grid = [0.2, 0.4, 0.5, 0.6, 0.8]
    ax = style.heatmap(np.zeros((5, 5)), grid, grid, switching_line=True)
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "p + q = 1")
    x, y = line.get_xdata(), line.get_ydata()
    # cell (p_j, q_i) has its centre at (j + 0.5, 4 - i + 0.5); p + q = 1 holds at
    # (j, i) = (0, 4), (2, 2), (4, 0)
    for j, i in ((0, 4), (2, 2), (4, 0)):
        assert np.min(np.hypot(x - (j + 0.5), y - (4 - i + 0.5))) < 0.05
    plt.figure()
    assert not [
        ln
        for ln in style.heatmap(np.zeros((5, 5)), grid, grid).get_lines()
        if ln.get_label() == "p + q = 1"
    ]


def test_heatmap_frames_the_marked_cells():
    ps, qs = [0.2, 0.4, 0.6], [0.1, 0.3]
    ax = style.heatmap(np.zeros((2, 3)), ps, qs, marked=[(0.6, 0.3), (0.2, 0.1)])
    frames = [p for p in ax.patches if isinstance(p, plt.Rectangle) and not p.fill]
    # cell (p_j, q_i) spans x in [j, j + 1], y in [n - 1 - i, n - i] (q upwards)
    centres = sorted(
        (
            round(f.get_x() + f.get_width() / 2, 2),
            round(f.get_y() + f.get_height() / 2, 2),
        )
        for f in frames
    )
    assert centres == [(0.5, 1.5), (2.5, 0.5)]
    plt.close("all")


def test_palette_is_okabe_ito_and_distinct():
    # Okabe & Ito's eight colours, as published (sRGB 0-255)
    published = [
        (0, 114, 178),
        (230, 159, 0),
        (0, 158, 115),
        (213, 94, 0),
        (204, 121, 167),
        (86, 180, 233),
        (240, 228, 66),
        (0, 0, 0),
    ]
    got = [tuple(round(255 * c) for c in to_rgba(h)[:3]) for h in style.OKABE_ITO]
    assert got == published
    roles = ["tied", "untied", "theory", "H_rate", "H_pi"]
    assert len({to_rgba(style.COLORS[r]) for r in roles}) == len(roles)
    style.set_style()
    cycle = [to_rgba(c) for c in plt.rcParams["axes.prop_cycle"].by_key()["color"]]
    assert cycle[:3] == [to_rgba(style.COLORS[r]) for r in ("tied", "untied", "theory")]


def _texts(fig):
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip()]


def test_every_text_of_the_helpers_is_at_least_min_font():
    style.set_style()
    chain = binary(0.5, 0.8)
    fig, axes = plt.subplots(1, 2)
    style.loss_curves(
        {"tied": [_history(0), _history(1)], "untied": _history(2)}, chain, axes[0]
    )
    style.probability_along(
        np.arange(10), np.full(10, 0.4), {"p": 0.5, r"$\pi_1$": 0.38}, axes[1]
    )
    fig2, ax2 = plt.subplots()
    grid = [0.2, 0.5, 0.8]
    style.heatmap(np.arange(9.0).reshape(3, 3), grid, grid, ax2, fmt=".1f")
    for f in (fig, fig2):
        f.canvas.draw()
        sizes = [t.get_fontsize() for t in _texts(f)]
        assert sizes and min(sizes) >= style.MIN_FONT_PT, sorted(set(sizes))
    # and the rule has teeth: an x-small legend breaks it
    axes[0].legend(fontsize="x-small")
    assert min(t.get_fontsize() for t in _texts(fig)) < style.MIN_FONT_PT
    axes[0].get_legend().remove()  # that legend is the check's, over the curves


def test_a_legend_over_the_curves_is_found():
    """The check every test of this file ends with (issue 49) has teeth: a legend in
    the middle of the axes covers points of the curves; one below the axes does not."""
    chain = binary(0.5, 0.8)
    ax = style.loss_curves({"tied": _history(0), "untied": _history(2)}, chain)
    assert style.legends_over_data(ax.figure) == []
    ax.legend(loc="center")
    assert any("legend over" in w for w in style.legends_over_data(ax.figure))
    ax.get_legend().remove()


def test_text_column_figures_read_at_nine_points():
    """A text-column figure of TEXT_WIDTH_IN shown in the theme's column (~590 CSS px at
    a 1280 px window) keeps MIN_FONT_PT text at >= 9 pt (pt * column
    px / (96 * width in))."""
    column_px = 590
    assert style.MIN_FONT_PT * column_px / (96 * style.TEXT_WIDTH_IN) >= 9
    assert style.MIN_FONT_PT * column_px / (96 * 12) < 9  # a 12-inch figure would not


# --- the saddles chapter (helper H7) ---
def test_saddle_slice_draws_both_directions_and_the_quadratic():
    chain = binary(0.5, 0.8)
    ts = np.linspace(-2, 2, 9)
    ax = saddles_figures.saddle_slice(
        ts, 0.6 - 0.01 * ts**2, 0.6 + 0.01 * ts**2, chain, -0.02
    )
    labels = [ln.get_label() for ln in ax.lines]
    assert labels[:3] == [
        "untied, most negative",
        "tied, softest",
        r"$H(\pi) - c\,t^2/2$",
    ]
    quad = ax.lines[2].get_ydata()
    assert quad[4] == pytest.approx(chain.unigram_entropy())  # t = 0
    assert quad[0] == pytest.approx(chain.unigram_entropy() - 0.04)  # t = -2
    assert ax.get_ylim()[0] == pytest.approx(chain.entropy_rate() - 0.02)


def test_perturbed_descent_one_line_per_noise_seed_and_a_label_per_model():
    chain = binary(0.5, 0.8)
    runs = {
        m: SimpleNamespace(losses=np.full((3, 5), 0.6 - i / 10))
        for i, m in enumerate(("theory", "gpt2"))
    }
    ax = saddles_figures.perturbed_descent(runs, chain)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert (
        "theory, untied (3 noise seeds)" in texts
        and "gpt2, untied (3 noise seeds)" in texts
    )
    drawn = [ln for ln in ax.lines if len(ln.get_xdata()) == 5]
    assert len(drawn) == 6  # 3 seeds x 2 models
    assert {to_rgba(ln.get_color()) for ln in drawn} == {
        to_rgba(style.COLORS["theory"]),
        to_rgba(style.COLORS["untied"]),
    }


def test_tied_untied_runs_one_panel_per_model():
    chain = binary(0.5, 0.8)
    side = {
        (m, tie): [_history(0), _history(1)]
        for m in ("gpt2", "theory")
        for tie in ("tied", "untied")
    }
    fig = saddles_figures.tied_untied_runs(side, chain)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["gpt2 model", "theory model"]
    runs = [ln for ln in axes[0].lines if len(ln.get_xdata()) == 5]  # 5 evaluations
    assert len(runs) == 4
    assert all(
        ax.get_legend() is None for ax in axes
    )  # the legend is below, off the data
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[:2] == ["tied", "untied"]


def test_fig4_maps_draws_two_rows_of_heatmaps_per_tying():
    grid = [0.2, 0.5, 0.8]
    q = np.meshgrid(grid, grid)[1]
    maps = {"tied": q + 0.05, "untied": q - 1e-5}
    fig = saddles_figures.fig4_maps(maps, {t: np.full((3, 3), 0.5) for t in maps}, grid)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == [  # row 1: learnt - true, row 2: share; a column per tying
        "tied: learnt P(0|1) - q",
        "untied: learnt P(0|1) - q",
        "tied: share of the gap learnt",
        "untied: share of the gap learnt",
    ]
    first = fig.axes[0]
    assert {t.get_text() for t in first.texts} == {"0.050"}  # learnt minus true
    untied = next(ax for ax in fig.axes if ax.get_title().startswith("untied: learnt"))
    assert {t.get_text() for t in untied.texts} == {"0.000"}  # never "-0.000"
    labels = {ax.get_ylabel() for ax in fig.axes}
    assert r"0: at $\theta_\pi$, 1: global minimum" in labels  # mathtext, not "θ_π"


# ------------------------------------- the bad_local_minima and global_minimum figures
def _overlapping(labels) -> bool:
    boxes = [t.get_window_extent() for t in labels if t.get_text()]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_hessian_spectrum_and_threshold_show_thm2s_numbers():
    from markovlib.analysis import CurvatureGrid, hessian_blocks

    style.set_style()
    H = np.diag([0.5, 0.0, 0.2, 0.0])
    blocks = hessian_blocks(H, ["wte.a", "x", "head.bias", "y"], ("wte", "head"))
    fig = bad_local_minima_figures.hessian_spectrum(blocks, H)
    left, right = fig.axes[:2]
    assert left.get_title() == "all 4 parameters" and left.get_yscale() == "symlog"
    assert right.images[0].get_array().shape == (2, 2)  # the (E, b) block only
    g = np.array([0.2, 0.5, 0.8])
    grid = CurvatureGrid(g, np.add.outer(g, g) - 1, np.add.outer(g, g) - 1)
    fig = bad_local_minima_figures.curvature_threshold(grid, (1.3, 0.14))
    star = [line for line in fig.axes[0].lines if line.get_marker() == "*"]
    assert [tuple(s.get_xydata()[0]) for s in star] == [(1.3, 0.14)]
    assert fig.axes[0].get_legend() is not None


def test_perturbation_curves_scale_losses_between_the_two_entropies():
    from markovlib.analysis import Perturbation

    chain, mirror = binary(0.5, 0.8), binary(0.5, 0.2)
    at_pi = np.full((2, 5), chain.unigram_entropy())
    down = np.linspace(mirror.unigram_entropy(), mirror.entropy_rate(), 5)[None]
    perturb = {
        ("theory", "this chain"): Perturbation(chain, "theory", True, 0.1, at_pi),
        ("theory", "mirror"): Perturbation(mirror, "theory", True, 0.1, down),
    }
    fig = bad_local_minima_figures.perturbation_curves(perturb)
    ax = fig.axes[0]
    ys = [line.get_ydata() for line in ax.lines if len(line.get_ydata()) == 5]
    assert np.allclose(ys[0], 1) and np.allclose(ys[-1], [1, 0.75, 0.5, 0.25, 0])
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["p + q = 1.30", "p + q = 0.70", r"$H(\pi)$"]


def test_trap_training_counts_runs_as_k_of_n():
    chain = binary(0.5, 0.8)
    h = pd.DataFrame({"step": [0, 10], "test_loss": [0.66, 0.62]})
    run = SimpleNamespace(test_history=h)
    curve = pd.DataFrame({"step": [0, 10], "plateau": [1.0, 0.5]})

    def stats(n_escaped):
        escaped = np.full(n_escaped, 10)
        return SimpleNamespace(
            curve=curve, tol=0.004726386, n=4, escaped=escaped, n_escaped=n_escaped
        )

    names = ("gpt2", "theory", "theory + LN", "gpt2, init 0.2")
    trained = {n: [run] * 4 for n in names}
    fig = bad_local_minima_figures.trap_training(
        trained, {n: stats(i) for i, n in enumerate(names)}, chain, at_step=10, steps=20
    )
    first, plateau, hist = fig.axes
    assert first.get_legend_handles_labels()[1][:2] == [
        "gpt2 (4 runs)",
        "theory (4 runs)",
    ]
    assert plateau.get_title().endswith("within\n0.0047 nats of $H_{\\rm rate}$")
    assert hist.get_legend_handles_labels()[1] == [
        "theory: 1 of 4",
        "theory + LN: 2 of 4",
        "gpt2, init 0.2: 3 of 4",
    ]


def test_probability_panels_and_loss_slices():
    style.set_style()
    pos, probs = np.arange(5), np.full(5, 0.4)
    fig = style.probability_panels(
        {
            r"at $\theta_\pi$": (pos, probs, "gpt2, seed 3"),
            "escaped": (pos, probs, "gpt2"),
        },
        {"p": 0.5},
    )
    assert [ax.get_title() for ax in fig.axes] == [r"at $\theta_\pi$", "escaped"]
    assert fig.axes[1].get_ylabel() == "" and fig.axes[0].get_ylabel()
    ts = np.linspace(-1, 1, 5)
    fig = global_minimum_figures.loss_slices(
        ts, {"tied, direct": 0.5 + ts**2}, rate=0.5
    )
    assert np.allclose(fig.axes[0].lines[0].get_ydata(), ts**2)


def test_appendix_d_panels_label_every_matrix_without_overlap():
    style.set_style()
    names = ["wte.weight", "blocks.0.attn.W_Q.weight", "blocks.0.ff.W_1.weight"]
    tied = {"ratio": np.full(16, 0.4), "rank_ratio": dict(zip(names, (0.2, 0.1, 0.3)))}
    untied = {**tied, "rank_ratio": {**tied["rank_ratio"], "head.weight": 0.5}}
    fig = global_minimum_figures.appendix_d_panels(
        {"tied": tied, "untied": untied},
        np.zeros((16, 8)),
        near_zero=0.1,
        near_rank_one=0.1,
        named=("ff.W_1.weight",),
    )
    fig.canvas.draw()
    bars = fig.axes[2]
    ticks = [t.get_text() for t in bars.get_yticklabels()]
    assert ticks == ["wte", "attn.W_Q", "ff.W_1 *", "head"]
    assert [t.get_text() for t in bars.texts] == ["tied: wte"]  # no head of its own
    assert not _overlapping(bars.get_yticklabels())
    assert all(t.get_rotation() == 0 for t in bars.get_xticklabels())
    assert (
        global_minimum_figures.short_weight_name("blocks.0.ff.W_2.weight") == "ff.W_2"
    )


# ------------------------------------------------ the framework and CCMC chapters (H5)
def _legend_clear_of_axes(fig) -> bool:
    """Every figure legend lies below every panel (no legend over data)."""
    fig.canvas.draw()
    panels = [
        ax.get_window_extent() for ax in fig.axes if ax.get_label() != "<colorbar>"
    ]
    return bool(fig.legends) and all(
        leg.get_window_extent().y1 <= min(b.y0 for b in panels) for leg in fig.legends
    )


def test_framework_figures_place_the_chain_and_keep_legends_off_the_data():
    from markovlib import chains
    from markovlib.companion.figures import style

    style.set_style()
    chain = binary(0.5, 0.8)
    paths, iid = chain.sample(3, 20, seed=0).numpy(), chains.binary(0.4, 0.6)
    fig = framework_figures.sample_paths(
        paths, iid.sample(3, 20, seed=1).numpy(), chain
    )
    assert [ax.images[0].get_array().shape for ax in fig.axes] == [(3, 20)] * 2
    assert "p + q = 1.30" in fig.axes[0].get_title()
    grid = np.round(np.linspace(0.02, 0.98, 49), 10)
    rate, unigram = chains.entropy_grid(grid)
    fig = framework_figures.entropy_maps(grid, rate, unigram, 0.5, 0.8)
    star = fig.axes[0].lines[-1]  # p = 0.5: column 24; q = 0.8: row 48 - 39 from top
    assert star.get_xdata()[0] == pytest.approx(24.5)
    assert star.get_ydata()[0] == pytest.approx(48 - 39 + 0.5)
    assert _legend_clear_of_axes(fig)
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["$p + q = 1$ (gap = 0)", "chosen (p, q) = (0.5, 0.8)"]
    freq = np.full(60, 0.4)
    ax = framework_figures.marginal_law(freq, freq, np.linspace(0.5, 0.4, 60), 0.4, 100)
    assert ax.get_ylim() == (0, 1) and len(ax.lines[-1].get_xdata()) == 50
    assert "100 paths, first 50 positions" in ax.get_title()


def test_ccmc_figures_draw_the_theorem_and_the_generation():
    import torch

    from markovlib import ccmc
    from markovlib.companion.figures import style

    style.set_style()
    W = ccmc.random_W(4, sigma=1.0, seed=0)
    x = ccmc.sample_prompts(1, 8, 4, seed=1)
    pos = torch.linspace(0, 1, 8, dtype=torch.float64)
    fig = ccmc_figures.ccmc_reweighting(W, x, pos)
    right = fig.axes[1]
    heights = [b.get_height() for b in right.patches]
    assert len(heights) == 12 and sum(heights[4:8]) == pytest.approx(1.0)
    assert heights[4:8] == pytest.approx(ccmc.ccmc_probs(W, x)[0].tolist())
    assert _legend_clear_of_axes(fig)
    assert not _overlapping(fig.axes[0].get_xticklabels())
    errors = {
        100: np.array([1.0, 1.2]),
        400: np.array([0.5, 0.6]),
        1600: np.array([0.3]),
    }
    ax = ccmc_figures.ccmc_estimation(errors, W)
    reference = next(ln for ln in ax.lines if ln.get_linestyle() == "--").get_ydata()
    assert reference[-1] == pytest.approx(0.3) and reference[0] == pytest.approx(1.2)
    w_norm = float(ccmc.row_centred(W).norm())
    assert _horizontal_lines(ax).keys() == {round(w_norm, 12)}
    prompt = ccmc.balanced_prompt(4, 8, seed=2)
    runs = {
        name: generation_summary(V, prompt, 40, n_traj=6, window=10, seed=3)
        for name, V in (("W+", W + 2 * torch.eye(4)), ("W-", W - 2 * torch.eye(4)))
    }
    fig = ccmc_figures.ccmc_collapse(runs, 10, 2.0)
    assert len(fig.axes) == 4 and _legend_clear_of_axes(fig)
    assert fig.axes[0].get_title().startswith("$W_+ = W + 2 I$")
    band = runs["W+"]["stats"]["top_share"]  # W+'s CCMC: its mean line and its band
    mean = next(ln for ln in fig.axes[1].lines if ln.get_label().endswith(": mean"))
    assert np.allclose(mean.get_ydata(), band["mean"])
    edges = fig.axes[1].collections[0].get_paths()[0].vertices  # low, then high back
    n = len(band["low"])
    assert np.allclose(edges[1 : n + 1, 1], band["low"])
    assert np.allclose(edges[n + 2 : 2 * n + 2, 1], band["high"][::-1])
    ends = runs["W+"]["end"]
    shares = np.full((3, 4), 0.25)
    fig = ccmc_figures.ccmc_mean_field(
        np.array([9, 18, 48]), shares, shares, ends["winners"], 10
    )
    left, right = fig.axes
    assert len(left.lines) == 2 * 4 + 1 and "6 trajectories" in left.get_title()
    assert sum(b.get_height() for b in right.patches) == pytest.approx(1.0)
    assert _legend_clear_of_axes(fig)


# --- the depth chapter (helper H7) ---
def _records_on(chain_seed: int, history_seed: int):
    h = _history(history_seed)
    return SimpleNamespace(history=h, spec=SimpleNamespace(chain={"seed": chain_seed}))


def test_layers_counts_in_words():
    assert (
        depth_figures.layers(1) == "1 layer" and depth_figures.layers(4) == "4 layers"
    )


def test_depth_curves_keeps_the_legend_off_the_axes():
    chain = binary(0.5, 0.8)
    runs = {1: [_history(0), _history(1)], 2: [_history(2), _history(3)], 4: []}
    fig = depth_figures.depth_curves(runs, chain, title="Fig 1")
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[:2] == [
        "1 layer (mean of 2)",
        "2 layers (mean of 2)",
    ]  # no empty depth
    fig.canvas.draw()
    legend_box = ax.get_legend().get_window_extent()
    assert legend_box.y1 <= ax.get_window_extent().y0  # below the axes, off the curves


def test_higher_order_curves_one_panel_per_chain_and_a_note_when_missing():
    chains = {0: lag_switching(2, 0.3, 0.6), 1: lag_switching(2, 0.6, 0.7)}
    by_depth = {1: [_records_on(0, 1)], 2: [_records_on(0, 2)]}
    fig = depth_figures.higher_order_curves(by_depth, chains, steps=40)
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == [
        "order-2 chain, seed 0",
        "order-2 chain, seed 1",
    ]
    assert [t.get_text() for t in axes[1].texts] == ["not shipped yet"]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:2] == ["1 layer", "2 layers"] and len(labels) == 5


def test_lag_curves_and_window_shares_put_their_legends_below():
    chain = lag_switching(2, 0.5, 0.8)
    fig, axes = plt.subplots(1, 2)
    depth_figures.lag_curves(
        {1: [_history(0)], 2: [_history(1)]}, [_history(2)], chain, 1, axes[0]
    )
    rec = lambda s: SimpleNamespace(share=s)  # noqa: E731
    by_window = {0: [rec(0.0), rec(0.1)], 1: [rec(0.9), rec(1.0)], 2: [rec(0.5)]}
    depth_figures.window_shares(by_window, [rec(0.2)], 1, axes[1])
    mean = next(ln for ln in axes[1].lines if ln.get_label() == "window w")
    assert list(mean.get_ydata()) == pytest.approx([0.05, 0.95, 0.5])
    fig.canvas.draw()
    for ax in axes:
        assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert "window w = 1" in labels and any("best first-order" in t for t in labels)


def test_attention_maps_title_each_model_with_its_loss():
    w = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    fig = depth_figures.attention_maps(
        {"full": w, "window": np.eye(4)}, {"full": 0.6, "window": 0.62}
    )
    titles = [ax.get_title() for ax in fig.axes[:2]]
    assert titles == ["full\nfinal loss 0.6000", "window\nfinal loss 0.6200"]
    assert fig.axes[-1].get_ylabel() == "attention weight"  # the colour bar


# --- the trapped chapter (helper H7) ---
def test_fig4_share_panels_frames_and_hides_unused_axes():
    grid = [0.2, 0.5, 0.8]
    maps = {
        ("fp16, 400", "tied"): np.full((3, 3), 0.5),
        ("fp16, 400", "untied"): np.ones((3, 3)),
    }
    fig = trapped_figures.fig4_share_panels(
        maps, {("fp16, 400", "tied"): [(0.8, 0.8)]}, grid
    )
    shown = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in shown] == [
        "tied, fp16, 400 iterations",
        "untied, fp16, 400 iterations",
    ]
    assert len(shown[0].patches) == 1 and len(shown[1].patches) == 0  # one framed cell
    assert sum(not ax.get_visible() for ax in fig.axes) == 2


def test_plateau_lengths_marks_runs_that_never_escaped():
    ends = {
        "fp16, 400": pd.DataFrame(
            {"above_line": [0.1, 0.3], "escape": [np.nan, 50.0], "steps": [400, 400]}
        ),
        "empty": pd.DataFrame(columns=["above_line", "escape", "steps"]),
    }
    ax = trapped_figures.plateau_lengths(ends)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["fp16, 400", "fp16, 400: never"]
    never = ax.collections[1].get_offsets()
    assert never.tolist() == [[0.1, 400.0]]  # at its last step


def test_thesis_curvature_draws_each_run_and_the_rules_lines():
    """Issue 66: a dot per trapped run on its group's row, vertical lines at 0, at the
    rule's -1 % of Thm 3's saddle and at the saddle; the depth panel's two lines."""
    smallest = {"GPT-2, fp16": [-0.006, -0.01, -0.02], "theory, float32": [-0.014]}
    depth = {L: {"smallest": 0.0, "block": 0.142} for L in (1, 2, 4)}
    fig = trapped_figures.thesis_curvature(smallest, 0.142, depth, 0.01)
    left, right = fig.axes
    rows = [c.get_offsets()[:, 1].round() for c in left.collections]
    assert [r.tolist() for r in rows] == [[0.0, 0.0, 0.0], [1.0]]
    assert [c.get_offsets()[:, 0].tolist() for c in left.collections][0] == [
        -0.006,
        -0.01,
        -0.02,
    ]
    verticals = sorted(round(ln.get_xdata()[0], 6) for ln in left.lines)
    assert verticals == [-0.142, -0.00142, 0.0]
    assert [ln.get_ydata().tolist() for ln in right.lines[:2]] == [
        [0.142] * 3,
        [0.0] * 3,
    ]
    assert [t.get_text() for t in left.get_yticklabels()] == [
        "GPT-2, fp16 (3)",
        "theory, float32 (1)",
    ]


# --- the multi_state and initialisation chapters (helper H7) ---
def test_fig5_curves_puts_each_run_on_its_chain():
    k = 5
    run = lambda p, seed: SimpleNamespace(chain=symmetric(k, p), history=_history(seed))  # noqa: E731
    runs = {"tied": [run(p, i) for i, p in enumerate((0.1, 0.3, 0.6, 0.9))]}
    runs["untied"] = [run(p, 9) for p in (0.1, 0.3, 0.6, 0.9)]
    fig = multi_state_figures.fig5_curves(runs, k, (0.1, 0.3, 0.6, 0.9), "Fig. 5")
    titles = [ax.get_title().split(":")[0] for ax in fig.axes]
    assert titles == [
        "k = 5, p = 0.1",
        "k = 5, p = 0.3",
        "k = 5, p = 0.6",
        "k = 5, p = 0.9",
    ]
    assert f"{symmetric(5, 0.6).entropy_rate():.4f}" in fig.axes[2].get_title()
    assert all(
        ax.get_legend() is None for ax in fig.axes
    )  # one legend, under the panels
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[0] == "tied (mean of 1)" or labels[0] == "tied"
    tied = fig.axes[2].lines[0]  # p = 0.6: the tied run of seed 2 only
    expected = _history(2).dropna(subset=["test_loss"])["test_loss"].to_numpy()
    assert np.allclose(tied.get_ydata(), expected)


def test_k_threshold_changes_sign_at_the_threshold():
    fig = multi_state_figures.k_threshold({2: 0.5, 3: 2 / 3, 5: 0.8}, n_dots=4)
    left, right = fig.axes
    k2 = next(ln for ln in left.lines if ln.get_label() == "k = 2")
    x, y = k2.get_xdata(), k2.get_ydata()
    assert np.all(y[x < 0.49] < 0) and np.all(y[x > 0.51] > 0)  # (k - 1)/k = 0.5
    dots = right.lines[0]
    assert list(dots.get_xdata()) == [2, 3, 5]


def test_threshold_shares_one_colour_per_model_legend_below():
    rec = lambda p, s: SimpleNamespace(spec=SimpleNamespace(chain={"p": p}), share=s)  # noqa: E731
    records = {"theory": [rec(0.7, 1.0), rec(0.9, 0.0)], "gpt2": [rec(0.7, 0.95)]}
    fig = multi_state_figures.threshold_shares(records, 0.8, 5, 1000)
    ax = fig.axes[0]
    assert ax.get_title() == "k = 5: tied runs after 1000 steps"
    theory = next(ln for ln in ax.lines if ln.get_label() == "theory, tied")
    assert list(theory.get_xdata()) == [0.7, 0.9] and list(theory.get_ydata()) == [
        1.0,
        0.0,
    ]
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0


def test_portrait_pair_marks_starts_as_predicted_or_not():
    starts = np.array([[0.5, -1.5], [1.0, 1.0]])  # (e0, w0)
    path = np.stack([starts, starts * 0.9], axis=1)  # (N, K, 2)
    gd = SimpleNamespace(path=path, found=np.array(["local", "global"]))
    descent = {"this chain": gd, "mirror": gd}
    predicted = {
        "this chain": np.array(["local", "local"]),
        "mirror": np.array(["local", "global"]),
    }
    chains = {"this chain": (0.5, 0.8), "mirror": (0.5, 0.2)}
    fig = initialisation_figures.portrait_pair(
        chains, descent=descent, starts=starts, predicted=predicted
    )
    first, second = fig.axes[:2]
    bad = next(ln for ln in first.lines if ln.get_label() == "start: not as predicted")
    assert bad.get_xydata().tolist() == [[1.0, 1.0]]  # (w, e) of the second start
    bad2 = next(
        ln for ln in second.lines if ln.get_label() == "start: not as predicted"
    )
    assert len(bad2.get_xydata()) == 0
    assert fig.legends and first.get_title() == "this chain: p + q = 1.30"


def test_trapped_figures_label_their_series_in_mathtext_off_the_data():
    """The trapped chapter's survival, gradient and per-cell figures (their texts
    swept by the fixture: "loss × 2^16" was plain text, issue 49), each series labelled
    and the references drawn: the authors' budget, half of the runs."""
    from markovlib.analysis import Survival

    style.set_style()
    steps = np.array([0, 100, 200, 400])
    curves = {
        "GPT-2, fp16": Survival(steps, np.array([1.0, 1.0, 0.5, 0.5]), (None, 300)),
        "GPT-2, float32": Survival(steps, np.array([1.0, 0.5, 0.0, 0.0]), (50, 150)),
    }
    ax = trapped_figures.survival_curves(curves, mark=400)
    labels = ax.get_legend_handles_labels()[1]
    assert labels == [
        "GPT-2, fp16 (2 runs)",
        "GPT-2, float32 (2 runs)",
        "the authors' 400 iterations",
    ]
    table = pd.DataFrame(
        {"fp16 zero share": [0.9, 0.1], "fp16-scaled zero share": [0.0, 0.0]},
        index=["blocks.0.attn.W_Q.weight", "wte.weight"],
    )
    ax = trapped_figures.gradient_bars(table, title="fp16 gradients")
    assert ax.get_legend_handles_labels()[1][1] == r"fp16, loss × $2^{16}$"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["attn.W_Q", "wte"]
    cells = pd.DataFrame(
        dict(p=[0.6, 0.8], q=[0.5, 0.4], runs=3, trapped=[2, 0], share=[2 / 3, 0.0])
    ).assign(low=[0.21, 0.0], high=[0.94, 0.56])
    ax = trapped_figures.cell_trap_shares(cells)
    assert 0.5 in [line.get_ydata()[0] for line in ax.lines]


def test_show_stops_a_chapter_on_tex_typed_as_text_in_one_line():
    """Issue 49: a label that comes from a chapter's data ("GPT-2, fp16 × 2^16") was
    found by reading the built page. Every chapter now shows its figures through
    style.show(), which checks the texts of what it shows, in every build."""
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="GPT-2, fp16 × 2^16")
    ax.legend(loc="upper left")
    ax.set_title("$H_{\\rm rate}$ and H(π)")  # mathtext and plain text: both allowed
    with pytest.raises(style.FigureTextError) as caught:
        style.show()
    assert caught.value._render_traceback_() == [
        "FigureTextError: the figure text 'GPT-2, fp16 × 2^16' has TeX typed as plain "
        "text: write it in mathtext ($...$)"
    ]
    assert plt.get_fignums() == []  # closed: the page does not show it
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="GPT-2, fp16, loss × $2^{16}$")
    ax.legend(loc="upper left")
    style.show()  # passes; Agg shows nothing, the figure stays for the fixture's checks
    assert plt.get_fignums() == [fig.number]


def test_every_chapter_shows_its_figures_through_the_check():
    from pathlib import Path

    import nbformat

    book = Path(__file__).resolve().parents[1] / "book"
    for path in sorted(book.glob("*.ipynb")):
        code = "\n".join(
            c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code"
        )
        assert "plt.show()" not in code, f"{path.name}: plt.show() (use style.show())"
        if "figures import" in code:
            assert "style.show()" in code, path.name
