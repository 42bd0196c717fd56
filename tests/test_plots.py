"""markovlib.plots: labelled axes, reference lines at H_rate and H(pi), colours, opaque
white figures (Agg)."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from markovlib import plots
from markovlib.chains import binary, symmetric


@pytest.fixture(autouse=True)
def _clean_matplotlib():
    with (
        matplotlib.rc_context()
    ):  # set_style() changes global rcParams: restore them afterwards
        yield
    plt.close("all")


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
    plots.set_style()
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
    plots.reference_lines(ax, chain)
    lines = _horizontal_lines(ax)
    assert len(ax.lines) == 2
    rate = lines[round(chain.entropy_rate(), 12)]
    unigram = lines[round(chain.unigram_entropy(), 12)]
    assert f"{chain.entropy_rate():.4f}" in rate.get_label()
    assert f"{chain.unigram_entropy():.4f}" in unigram.get_label()
    assert rate.get_linestyle() == "--" and unigram.get_linestyle() == ":"
    assert to_rgba(rate.get_color()) == to_rgba(plots.COLORS["H_rate"])
    assert to_rgba(unigram.get_color()) == to_rgba(plots.COLORS["H_pi"])


def test_reference_lines_switches():
    chain = binary(0.2, 0.3)
    _, ax = plt.subplots()
    plots.reference_lines(ax, chain, unigram=False)
    assert list(_horizontal_lines(ax)) == [round(chain.entropy_rate(), 12)]
    _, ax = plt.subplots()
    plots.reference_lines(ax, chain, rate=False)
    assert list(_horizontal_lines(ax)) == [round(chain.unigram_entropy(), 12)]


def test_reference_lines_bigram_for_higher_order_chains():
    from markovlib.chains import lag_switching

    chain = lag_switching(2, 0.5, 0.8)
    _, ax = plt.subplots()
    plots.reference_lines(ax, chain, bigram=True, unigram=False)
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
    ax = plots.loss_curves(
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
    assert to_rgba(curve_tied.get_color()) == to_rgba(plots.COLORS["tied"])
    assert to_rgba(curve_run.get_color()) == to_rgba(plots.COLORS["theory"])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "tied" in legend and any("H_{" in t for t in legend)


def test_loss_curves_other_column_and_given_axes():
    chain = binary(0.2, 0.3)
    fig, ax = plt.subplots()
    out = plots.loss_curves(
        {"tied": _history(0)}, chain, ax=ax, column="train_loss", title="custom"
    )
    assert out is ax
    assert ax.get_ylabel().startswith("train loss")
    assert ax.get_title() == "custom"
    assert len(ax.lines[0].get_xdata()) == 41  # train loss exists at every step


def test_untied_curve_is_orange():
    _, ax = plots.plt.subplots()
    plots.loss_curves(
        {"tied": _history(0), "untied": _history(1)}, binary(0.5, 0.8), ax=ax
    )
    assert to_rgba(ax.lines[1].get_color()) == to_rgba(plots.COLORS["untied"])
    assert to_rgba(ax.lines[0].get_color()) != to_rgba(ax.lines[1].get_color())


def test_probability_along_plot():
    positions = np.array([0, 3, 4, 9])
    probs = np.array([0.5, 0.52, 0.48, 0.51])
    ax = plots.probability_along(
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
    ax = plots.heatmap(values, ps, qs, title="grid", fmt=".1f")
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
    ax = plots.heatmap(np.zeros((5, 5)), grid, grid, switching_line=True)
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "p + q = 1")
    x, y = line.get_xdata(), line.get_ydata()
    # cell (p_j, q_i) has its centre at (j + 0.5, 4 - i + 0.5); p + q = 1 holds at
    # (j, i) = (0, 4), (2, 2), (4, 0)
    for j, i in ((0, 4), (2, 2), (4, 0)):
        assert np.min(np.hypot(x - (j + 0.5), y - (4 - i + 0.5))) < 0.05
    plt.figure()
    assert not [
        ln
        for ln in plots.heatmap(np.zeros((5, 5)), grid, grid).get_lines()
        if ln.get_label() == "p + q = 1"
    ]


def test_heatmap_frames_the_marked_cells():
    ps, qs = [0.2, 0.4, 0.6], [0.1, 0.3]
    ax = plots.heatmap(np.zeros((2, 3)), ps, qs, marked=[(0.6, 0.3), (0.2, 0.1)])
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
    got = [tuple(round(255 * c) for c in to_rgba(h)[:3]) for h in plots.OKABE_ITO]
    assert got == published
    roles = ["tied", "untied", "theory", "H_rate", "H_pi"]
    assert len({to_rgba(plots.COLORS[r]) for r in roles}) == len(roles)
    plots.set_style()
    cycle = [to_rgba(c) for c in plt.rcParams["axes.prop_cycle"].by_key()["color"]]
    assert cycle[:3] == [to_rgba(plots.COLORS[r]) for r in ("tied", "untied", "theory")]


def _texts(fig):
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip()]


def test_every_text_of_the_helpers_is_at_least_min_font():
    plots.set_style()
    chain = binary(0.5, 0.8)
    fig, axes = plt.subplots(1, 2)
    plots.loss_curves(
        {"tied": [_history(0), _history(1)], "untied": _history(2)}, chain, axes[0]
    )
    plots.probability_along(
        np.arange(10), np.full(10, 0.4), {"p": 0.5, "π_1": 0.38}, axes[1]
    )
    fig2, ax2 = plt.subplots()
    grid = [0.2, 0.5, 0.8]
    plots.heatmap(np.arange(9.0).reshape(3, 3), grid, grid, ax2, fmt=".1f")
    for f in (fig, fig2):
        f.canvas.draw()
        sizes = [t.get_fontsize() for t in _texts(f)]
        assert sizes and min(sizes) >= plots.MIN_FONT_PT, sorted(set(sizes))
    # and the rule has teeth: an x-small legend breaks it
    axes[0].legend(fontsize="x-small")
    assert min(t.get_fontsize() for t in _texts(fig)) < plots.MIN_FONT_PT


def test_text_column_figures_read_at_nine_points():
    """A text-column figure of TEXT_WIDTH_IN shown in the theme's column (~590 CSS px at
    a 1280 px window) keeps MIN_FONT_PT text at >= 9 pt (pt * column
    px / (96 * width in))."""
    column_px = 590
    assert plots.MIN_FONT_PT * column_px / (96 * plots.TEXT_WIDTH_IN) >= 9
    assert plots.MIN_FONT_PT * column_px / (96 * 12) < 9  # a 12-inch figure would not
