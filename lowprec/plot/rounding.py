"""Family 3, rounding: relative error across binades, stochastic rounding, running sums."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..formats import FloatFormat, get_format
from ..rounding import check_mode, round_to
from ._style import (
    OKABE_ITO,
    REGION_COLORS,
    SERIES_COLORS,
    _formats,
    _new_ax,
    region_edges,
)

__all__ = ["relative_error", "running_sum", "stochastic_rounding"]

# ----------------------------------------------------------------- 3. rounding
def relative_error(
    formats: Any,
    *,
    mode: str = "rne",
    binades: tuple[float, float] | None = None,
    points_per_binade: int | None = None,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Relative error |round(x) - x| / |x| of rounding x to each format, across binades.

    x runs over a fine grid, log-uniform from two binades below the smallest subnormal
    to ``max`` (or over ``binades = (lo, hi)``: from 2**lo to 2**hi, to zoom in on a
    wide format such as bf16). In the normal range the error is a sawtooth under the dashed bound (unit
    roundoff 2^-p for round-to-nearest, 2^(1-p) for directed modes); in the subnormal
    range the absolute error stays bounded so the relative error grows, up to 100%
    where x is lost to zero. Points rounded exactly (error 0) are left out of the log axis.
    The curve of each format has gid ``"<format>"``.
    """
    fmts = _formats(formats)
    mode = check_mode(mode)
    ax = _new_ax(ax, (9.0, 4.5))
    nearest = mode in ("rne", "rna", "stochastic")
    bottom = 1.0
    for i, f in enumerate(fmts):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        b_sub, b_norm, b_max = region_edges(f)
        lo, hi = (b_sub - 2, b_max) if binades is None else (float(binades[0]),
                                                             min(float(binades[1]), b_max))
        if not hi > lo:
            raise ValueError(f"binades={binades!r} leaves nothing of {f.name}'s range to draw")
        ppb = points_per_binade or min(4096, max(32, 8 << f.mantissa_bits))
        ppb = max(8, min(ppb, int(300_000 / (hi - lo))))
        t = np.linspace(lo, hi, int((hi - lo) * ppb) + 1)
        x = np.exp2(t)
        r = round_to(x, f, mode) if mode != "stochastic" else round_to(x, f, mode, rng=0)
        with np.errstate(invalid="ignore"):
            rel = np.abs(r - x) / x
        rel[(rel == 0) | ~np.isfinite(rel)] = np.nan
        ax.plot(x, rel, color=color, linewidth=0.5, gid=f.name,
                label=f"{f.name} (E{f.exponent_bits}M{f.mantissa_bits}), mode {mode}")
        u = 2.0 ** -f.precision if nearest else 2.0 ** -f.mantissa_bits
        ax.hlines(u, f.smallest_normal, f.max, color=color, linestyle="--", linewidth=1.2)
        ax.text(f.max, u, f"  u = $2^{{{round(math.log2(u))}}}$", color=color, fontsize=8,
                va="center", ha="left")
        if b_norm > b_sub:
            ax.axvspan(f.smallest_subnormal, f.smallest_normal, linewidth=0, alpha=0.12,
                       color=REGION_COLORS["subnormal"] if len(fmts) == 1 else color)
        if len(fmts) == 1:
            ax.axvspan(x[0], f.smallest_subnormal / 2, color=REGION_COLORS["zero"],
                       alpha=0.12, linewidth=0)
        bottom = min(bottom, u * 2.0**-8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_ylim(bottom, 2.0)
    ax.set_xlabel("value x  (log scale, base 2)")
    ax.set_ylabel("relative error |round(x) − x| / |x|\n(log scale, base 2)")
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", linestyle="--"),
                Patch(facecolor=REGION_COLORS["subnormal"] if len(fmts) == 1 else "0.3",
                      alpha=0.2)]
    labels += ["bound in the normal range (unit roundoff u)", "subnormal range"]
    if len(fmts) == 1:
        handles.append(Patch(facecolor=REGION_COLORS["zero"], alpha=0.2))
        labels.append("lost to zero (error 100%)")
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)
    ax.margins(x=0.02)
    ax.set_title(title or "Relative rounding error of " + ", ".join(f.name for f in fmts)
                 + " across binades")
    return ax


def stochastic_rounding(
    x: float,
    fmt: FloatFormat | str,
    *,
    n: int = 10_000,
    rng: Any = 0,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Stochastic rounding of one value ``x``, ``n`` times, against its two neighbours.

    Bars (gid ``"sr_counts"``) show the fraction of results that are the lower and upper
    neighbour; dashed lines the expected fractions (x - lo)/(hi - lo) and (hi - x)/(hi - lo);
    the mean of the results (unbiased: close to x) and the round-to-nearest result are
    marked. ``rng`` is a seed or numpy Generator.
    """
    f = get_format(fmt)
    x = float(x)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    lo, hi = float(round_to(x, f, "rdown")), float(round_to(x, f, "rup"))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{x!r} is outside the finite range of {f.name}")
    if lo == hi:
        raise ValueError(f"{x!r} is exactly representable in {f.name}; stochastic rounding "
                         "always returns it. Pick a value between two neighbours.")
    ax = _new_ax(ax, (7.5, 4.5))
    samples = round_to(np.full(n, x), f, "stochastic", rng=rng)
    frac = np.array([np.mean(samples == lo), np.mean(samples == hi)])
    p_up = (x - lo) / (hi - lo)
    gap = hi - lo
    ax.bar([lo, hi], frac, width=0.12 * gap, color=[OKABE_ITO["sky_blue"], OKABE_ITO["blue"]],
           gid="sr_counts", label=f"share of {n} stochastic roundings")
    ax.hlines([1 - p_up, p_up], [lo - 0.09 * gap, hi - 0.09 * gap],
              [lo + 0.09 * gap, hi + 0.09 * gap], color="black", linestyle="--",
              linewidth=1.2, label="expected: distance to the other neighbour / gap")
    for xv, fr in zip((lo, hi), frac):
        ax.text(xv, fr + 0.02, f"{fr:.3f}", ha="center", va="bottom", fontsize=8)
    mean = float(np.mean(samples))
    rne = float(round_to(x, f, "rne"))
    ax.axvline(x, color=OKABE_ITO["vermillion"], linewidth=3, alpha=0.6, label=f"x = {x:g}")
    ax.axvline(mean, color="black", linewidth=1.4, linestyle=":", zorder=3,
               label=f"mean of the results = {mean:.6g} (unbiased)")
    ax.plot([rne], [0], marker="^", markersize=10, color=OKABE_ITO["orange"],
            linestyle="none", clip_on=False, label=f"round to nearest (always) = {rne:g}")
    ax.set_xlim(lo - 0.3 * gap, hi + 0.3 * gap)
    ax.set_ylim(0, 1.05)
    ax.set_xticks([lo, x, hi], [f"lower\n{lo:g}", f"x\n{x:g}", f"upper\n{hi:g}"])
    ax.set_xlabel(f"value (linear scale; neighbours in {f.name} are {gap:g} apart)")
    ax.set_ylabel("fraction of results")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2,
              frameon=False)
    ax.set_title(title or f"Stochastic rounding of x = {x:g} to {f.name}: "
                 f"P(up) = {p_up:.3f}")
    return ax


def running_sum(
    traces: Mapping[str, Any],
    *,
    exact: Any = None,
    ylabel: str = "running sum",
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Running sums against the step, one line per rounding (e.g. round-to-nearest
    stagnating while stochastic rounding follows the exact sum).

    ``traces`` maps a label to a 1-D array (one trace) or a 2-D array (steps x runs, e.g.
    several seeds: drawn thin, same colour). ``exact`` is drawn dashed black.
    gid of each line: its label (``"exact"`` for the exact sum).
    """
    ax = _new_ax(ax, (8.0, 4.5))
    for i, (label, tr) in enumerate(traces.items()):
        t = np.asarray(tr, dtype=np.float64)
        if t.ndim == 1:
            t = t[:, None]
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        lw = 1.8 if t.shape[1] == 1 else 0.9
        for j in range(t.shape[1]):
            ax.plot(np.arange(1, t.shape[0] + 1), t[:, j], color=color, linewidth=lw,
                    gid=label if j == 0 else f"{label}#{j}",
                    label=label + (f" ({t.shape[1]} runs)" if t.shape[1] > 1 else "")
                    if j == 0 else None)
    if exact is not None:
        e = np.asarray(exact, dtype=np.float64)
        ax.plot(np.arange(1, e.size + 1), e, color="black", linestyle="--", linewidth=1.4,
                label="exact", gid="exact")
    ax.set_xlabel("step (number of terms added)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, color="0.92", linewidth=0.6)
    ax.set_title(title or "Running sums under different roundings")
    return ax
