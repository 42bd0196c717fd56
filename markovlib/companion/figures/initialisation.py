"""The figures of the initialisation chapter (``book/initialisation.ipynb``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgba

from ... import dynamics
from .style import COLORS, OKABE_ITO

__all__ = ["phase_portrait", "to_rgba_safe", "portrait_pair"]


def phase_portrait(
    p: float,
    q: float,
    ax=None,
    *,
    e_max: float = 2.5,
    w_range: tuple[float, float] = (-2.0, 2.0),
    points: Mapping[str, np.ndarray] | None = None,
    full_model_boundary: bool = True,
    title: str | None = None,
):
    """The gradient flow of the reduced model (Makkuva et al. 2024) on the (w, e)
    half-plane, e >= 0.

    Shaded: the basin predicted by the energy level through the saddle
    (``dynamics.predicted_basin``); grey lines: levels of the energy E; solid black: the
    level through the saddle (the basin boundary); dashed black: the same boundary for
    the full model's metric (``dynamics.FULL_MODEL_METRIC``); arrows: the direction of
    -∇L; green: the global-minimum curve; vermillion on e = 0: the local minima; star:
    the saddle. ``points`` maps a legend label to an (n, 2) array of (e, w) to mark
    (e.g. initialisations). Returns the axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(3.5, 3.2))
    w_lo, w_hi = w_range
    ww, ee = np.meshgrid(np.linspace(w_lo, w_hi, 161), np.linspace(0.0, e_max, 121))
    _predicted_basins(ax, ww, ee, p, q)
    _energy_levels(ax, ww, ee)
    _basin_boundary(ax, ww, ee, dynamics.PAPER_METRIC, lw=1.6, ls="solid")
    if full_model_boundary:
        _basin_boundary(ax, ww, ee, dynamics.FULL_MODEL_METRIC, lw=1.2, ls="--")
    _flow_arrows(ax, p, q, w_range, e_max)
    _critical_points(ax, p, q, np.linspace(w_lo, w_hi, 400))
    _marked_points(ax, points or {})
    ax.set_xlim(w_lo, w_hi)
    ax.set_ylim(0, e_max)
    ax.set_xlabel("$w$ (feed-forward scale)")
    ax.set_ylabel("$e$ (embedding scale)")
    ax.set_title(
        title if title is not None else f"p = {p:g}, q = {q:g} (p + q = {p + q:.2g})"
    )
    ax.grid(False)
    return ax


def _predicted_basins(ax, ww, ee, p: float, q: float) -> None:
    """Shade each point (w, e) by the basin the energy level through the saddle
    predicts: green global, vermillion local (``dynamics.predicted_basin``)."""
    basin = np.vectorize(lambda e, w: dynamics.predicted_basin(e, w, p, q) == "global")(
        np.where(ee == 0, 1e-9, ee), ww
    )
    colors = [
        to_rgba_safe(COLORS["H_pi"], 0.14),
        to_rgba_safe(COLORS["theory"], 0.16),
    ]
    ax.contourf(ww, ee, basin.astype(float), levels=[-0.5, 0.5, 1.5], colors=colors)


def _energy_levels(ax, ww, ee) -> None:
    """Twelve grey levels of the energy E(e, w), conserved along the flow (paper
    Sec. 4), between its 5th and 95th percentiles."""
    E = dynamics.energy(ee, ww)
    finite = np.isfinite(E)
    levels = np.linspace(
        np.nanpercentile(E[finite], 5), np.nanpercentile(E[finite], 95), 12
    )
    ax.contour(
        ww,
        ee,
        np.where(finite, E, np.nan),
        levels=levels,
        colors="grey",
        linewidths=0.5,
        linestyles="solid",
    )


def _basin_boundary(ax, ww, ee, metric, *, lw: float, ls: str) -> None:
    """The basin boundary in ``metric``: the saddle's energy level on w < 0 (on w > 0
    that level separates nothing), in black."""
    E = dynamics.energy(ee, ww, metric)
    ax.contour(
        ww,
        ee,
        np.where(np.isfinite(E) & (ww < 0), E, np.nan),
        levels=[dynamics.saddle_energy(metric)],
        colors="black",
        linewidths=lw,
        linestyles=ls,
    )


def _flow_arrows(ax, p, q, w_range: tuple[float, float], e_max: float) -> None:
    """Unit arrows along -∇L of the reduced model on an 11 x 9 grid inside the
    frame."""
    aw, ae = np.meshgrid(
        np.linspace(*w_range, 15)[1:-1], np.linspace(0, e_max, 11)[1:-1]
    )
    ge, gw = dynamics.reduced_gradient(ae, aw, p, q)
    norm = np.hypot(ge, gw)
    norm = np.where(norm > 0, norm, 1.0)
    ax.quiver(
        aw,
        ae,
        -gw / norm,
        -ge / norm,
        color="#555555",
        scale=28,
        width=0.004,
        headwidth=4,
        alpha=0.8,
    )


def _critical_points(ax, p: float, q: float, wl: np.ndarray) -> None:
    """The global-minimum curve (green), the local minima on e = 0 (vermillion: w
    beyond the saddle on the side p + q - 1 picks) and the saddle (0, -1/√2)."""
    ax.plot(
        wl,
        dynamics.global_minimum_curve(p, q, wl),
        color=COLORS["theory"],
        lw=2.4,
        label="global minima",
    )
    s = -1 / math.sqrt(2)
    side = (wl > s) if p + q > 1 else (wl < s)
    ax.plot(
        np.where(side, wl, np.nan),
        np.zeros_like(wl),
        color=COLORS["H_pi"],
        lw=4,
        solid_capstyle="butt",
        label="local minima",
        clip_on=False,
    )
    ax.plot(
        [s], [0], "*", color="black", ms=12, clip_on=False, label="saddle", zorder=5
    )


def _marked_points(ax, points: Mapping[str, np.ndarray]) -> None:
    """Each labelled set of (e, w) points as hollow markers, one marker and colour per
    label."""
    for i, (label, pts) in enumerate(points.items()):
        pts = np.asarray(pts, dtype=float).reshape(-1, 2)
        ax.plot(
            pts[:, 1],
            pts[:, 0],
            ("o", "s", "^", "D")[i % 4],
            ms=4,
            mfc="none",
            color=(COLORS["tied"], COLORS["untied"], "black", OKABE_ITO[4])[i % 4],
            label=label,
            zorder=4,
        )


def to_rgba_safe(color, alpha: float):
    """``color`` with transparency ``alpha`` (an RGBA tuple)."""

    return to_rgba(color, alpha)


def _descent_paths(ax, descent, starts: np.ndarray, predicted: np.ndarray) -> None:
    """Gradient-descent paths on (w, e), coloured by where they end, and their starts:
    a dot where the end is the predicted basin, a cross where it is not."""
    ok = descent.found == predicted
    for path, kind in zip(descent.path, descent.found):
        color = COLORS["theory" if kind == "global" else "H_pi"]
        ax.plot(path[:, 1], path[:, 0], color=color, lw=1.3)
    ax.plot(
        *starts[ok][:, ::-1].T, "o", color="black", ms=5, label="start: as predicted"
    )
    ax.plot(
        *starts[~ok][:, ::-1].T,
        "X",
        color=COLORS["untied"],
        mec="black",
        ms=8,
        label="start: not as predicted",
    )


def portrait_pair(
    chains: Mapping[str, tuple],
    *,
    points=None,
    descent=None,
    starts=None,
    predicted=None,
):
    """:func:`phase_portrait` of each chain (name -> (p, q)) side by side with one
    legend below; with ``descent`` (name -> a manifold descent), its paths from
    ``starts`` against the ``predicted`` basins (name -> kinds); returns the figure."""
    fig, axes = plt.subplots(1, len(chains), figsize=(7, 3.9), sharey=True)
    for ax, (name, (p, q)) in zip(axes, chains.items()):
        phase_portrait(p, q, ax, points=points, title=f"{name}: p + q = {p + q:.2f}")
        if descent is not None:
            _descent_paths(ax, descent[name], starts, predicted[name])
    for ax in axes[1:]:
        ax.set_ylabel("")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="lower center", ncol=3, fontsize="small", frameon=False
    )
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    return fig
