"""Family 2, formats: number lines, ulp per binade, range and precision side by side."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from ..formats import FloatFormat, get_format
from ..rounding import decode
from ._style import (
    OKABE_ITO,
    REGION_COLORS,
    SERIES_COLORS,
    _formats,
    _new_ax,
    _num,
    _pow2_exponent,
    region_edges,
)

__all__ = ["format_comparison", "number_line", "spacing", "ulp_steps"]

_MAX_ENUMERATED = 1 << 16  # number_line draws every value of formats up to 16 bits

def _positive_values(fmt: FloatFormat) -> np.ndarray:
    """Every positive finite value of ``fmt``, increasing (formats of at most 16 bits)."""
    n = fmt.max_code_magnitude + 1
    if n > _MAX_ENUMERATED:
        raise ValueError(
            f"{fmt.name} has {n} non-negative codes; drawing every value is supported for "
            f"formats of at most 16 bits (fp16, bf16, fp8, fp6, fp4)"
        )
    v = decode(np.arange(n, dtype=fmt.code_dtype), fmt)
    return v[np.isfinite(v) & (v > 0)]


# ------------------------------------------------------------ 2. number lines
def number_line(
    fmt: FloatFormat | str,
    *,
    scale: str = "linear",
    xlim: tuple[float, float] | None = None,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Every positive finite value of ``fmt`` as a tick on a number line.

    ``scale`` is ``"linear"`` (the spacing visibly doubles with each binade) or ``"log2"``
    (every binade the same width, a log axis with base 2). The subnormal range is shaded,
    the smallest subnormal, smallest normal and max are labelled, and the spacing (ulp)
    of each binade is written above it where it fits. Negative values mirror these.
    The ticks are two lines (x, x, NaN per value) with gid ``"subnormal"`` and ``"normal"``.
    """
    f = get_format(fmt)
    if scale not in ("linear", "log2"):
        raise ValueError(f"scale must be 'linear' or 'log2', got {scale!r}")
    ax = _new_ax(ax, (9.0, 2.6))
    v = _positive_values(f)
    is_normal = v >= f.smallest_normal
    lw = 2.0 if v.size < 64 else (1.0 if v.size < 512 else 0.4)
    if scale == "log2":
        ax.set_xscale("log", base=2)
    if xlim is None:
        xlim = (v[0] / 2, v[-1] * 2) if scale == "log2" else (-0.03 * v[-1], 1.03 * v[-1])
    ax.set_xlim(*xlim)
    sub_lo = 0.0 if scale == "linear" else v[0]
    n_keys = 2 if f.has_subnormals and f.mantissa_bits else 1
    y_top = 1.55 + 0.4 * (n_keys + 1)
    band = {"ymin": 0, "ymax": 1.1 / y_top, "linewidth": 0}
    if f.has_subnormals and f.mantissa_bits:
        ax.axvspan(sub_lo, f.smallest_normal, color=REGION_COLORS["subnormal"], alpha=0.15,
                   label="subnormal range", **band)
    # Alternate binades lightly so each binade can be told apart.
    for e in range(f.emin, f.emax + 1):
        if (e - f.emin) % 2:
            ax.axvspan(2.0**e, min(2.0 ** (e + 1), f.max), color="0.5", alpha=0.14, **band)
    for kind, vals, color in (("subnormal", v[~is_normal], REGION_COLORS["subnormal"]),
                              ("normal", v[is_normal], OKABE_ITO["blue"])):
        # One line broken by NaNs draws 30,000 ticks far faster than vlines.
        xs = np.repeat(vals, 3)
        xs[2::3] = np.nan
        ys = np.tile([0.0, 1.0, np.nan], vals.size)
        ax.plot(xs, ys, color=color, linewidth=lw, gid=kind,
                label=f"{kind} values ({vals.size})" if vals.size else None)
    if scale == "linear" and f.has_zero:
        ax.plot([0], [0.5], marker="o", color="black", markersize=4, linestyle="none",
                label="zero", gid="zero")

    # Spacing per binade, written above the ticks where it fits.
    def frac(a: float, b: float) -> float:
        if scale == "log2":
            return (math.log2(b) - math.log2(a)) / (math.log2(xlim[1]) - math.log2(xlim[0]))
        return (b - a) / (xlim[1] - xlim[0])

    spans = []
    if f.has_subnormals and f.mantissa_bits:
        spans.append((sub_lo if scale == "linear" else f.smallest_subnormal,
                      f.smallest_normal, f.smallest_subnormal))
    spans += [(2.0**e, min(2.0 ** (e + 1), f.max), 2.0 ** (e - f.mantissa_bits))
              for e in range(f.emin, f.emax + 1)]
    for a, b, ulp in spans:
        w = frac(a, b)
        mid = math.sqrt(a * b) if scale == "log2" else (a + b) / 2
        k = _pow2_exponent(ulp)
        text = f"$2^{{{k}}}$" if k is not None else f"{ulp:g}"
        if w >= 0.06:
            ax.text(mid, 1.12, text, ha="center", va="bottom", fontsize=7)
        elif w >= 0.016:
            ax.text(mid, 1.12, text, ha="center", va="bottom", fontsize=6.5, rotation=90)
    trans = blended_transform_factory(ax.transAxes, ax.transData)
    ax.text(-0.005, 1.12, "ulp", transform=trans, ha="right", va="bottom", fontsize=7)

    # Key values, staggered so their labels do not collide.
    keys = [("max", f.max)]
    if f.has_subnormals and f.mantissa_bits:
        keys += [("smallest normal", f.smallest_normal),
                 ("smallest subnormal", f.smallest_subnormal)]
    else:
        keys += [("smallest positive", f.smallest_normal)]
    for i, (name, val) in enumerate(keys):
        fx = frac(xlim[0], val)
        ha = "right" if fx > 0.5 else "left"
        tx_frac = min(max(fx, 0.01), 0.99)
        if scale == "log2":
            tx = 2 ** (math.log2(xlim[0]) + tx_frac * (math.log2(xlim[1]) - math.log2(xlim[0])))
        else:
            tx = xlim[0] + tx_frac * (xlim[1] - xlim[0])
        ax.annotate(f"{name} = {_num(val)}", xy=(val, 1.0), xytext=(tx, 1.55 + 0.4 * i),
                    ha=ha, va="center", fontsize=8,
                    arrowprops={"arrowstyle": "-", "color": "0.3", "linewidth": 0.7})
    ax.set_ylim(0, y_top)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("value" + ("  (log scale, base 2)" if scale == "log2" else "  (linear scale)"))
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_title(title or f"Every positive value of {f.name} (E{f.exponent_bits}M"
                 f"{f.mantissa_bits}: {v.size} values)")
    return ax


def ulp_steps(fmt: FloatFormat | str) -> tuple[np.ndarray, np.ndarray]:
    """(x, ulp): the spacing of ``fmt`` as a step function, ulp[i] on [x[i], x[i+1]).

    Derived from the format's fields (so it works for fp32 too): subnormals are spaced
    by the smallest subnormal, the binade [2^e, 2^(e+1)) by 2^(e - mantissa_bits); the last
    point is ``max`` (repeating the last ulp), for ``ax.step(..., where="post")``.
    """
    f = get_format(fmt)
    xs: list[float] = []
    us: list[float] = []
    if f.has_subnormals and f.mantissa_bits:
        xs.append(f.smallest_subnormal)
        us.append(f.smallest_subnormal)
    for e in range(f.emin, f.emax + 1):
        xs.append(2.0**e)
        us.append(2.0 ** (e - f.mantissa_bits))
    xs.append(f.max)
    us.append(us[-1])
    return np.array(xs), np.array(us)


def spacing(formats: Any, *, title: str | None = None, ax: Axes | None = None) -> Axes:
    """The gap to the next value (ulp) against the value, on log2-log2 axes.

    Each format is a staircase: flat through the subnormals (they are evenly spaced,
    "gradual underflow"), then doubling with every binade up to ``max``. The dotted
    line through each staircase is the relative spacing ``eps * x``.
    """
    fmts = _formats(formats)
    ax = _new_ax(ax, (8.0, 5.0))
    for i, f in enumerate(fmts):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        xs, us = ulp_steps(f)
        ax.step(xs, us, where="post", color=color, linewidth=1.6,
                label=f"{f.name} (E{f.exponent_bits}M{f.mantissa_bits})", gid=f.name)
        ax.plot(xs[:1], us[:1], marker="o", color=color, markersize=4, linestyle="none")
        ax.plot([xs[0], xs[-1]], [xs[0] * f.eps, xs[-1] * f.eps], linestyle=":",
                color=color, linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("value x  (log scale, base 2)")
    ax.set_ylabel("gap to the next value, ulp(x)\n(log scale, base 2)")
    ax.grid(True, which="major", color="0.9", linewidth=0.6)
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.3", linestyle=":", linewidth=0.8))
    labels.append("eps·x (relative spacing)")
    handles.append(Line2D([], [], color="0.3", marker="o", linestyle="none", markersize=4))
    labels.append("smallest subnormal")
    ax.legend(handles, labels, fontsize=8, loc="upper left")
    ax.set_title(title or "Spacing between neighbouring values grows with each binade")
    return ax


def format_comparison(formats: Any, *, title: str | None = None,
                      ax: Axes | None = None) -> Axes:
    """Range and precision of several formats side by side.

    One bar per format from log2 of its smallest subnormal (hatched part: subnormals) to
    log2 of its max (gid ``"<format>:subnormal"`` and ``"<format>:normal"``), with its
    precision written beside it.
    """
    fmts = _formats(formats)
    ax = _new_ax(ax, (9.0, 1.0 + 0.5 * len(fmts)))
    ys = np.arange(len(fmts))[::-1]
    hi_all = max(region_edges(f)[2] for f in fmts)
    lo_all = min(region_edges(f)[0] for f in fmts)
    for y, f in zip(ys, fmts):
        b_sub, b_norm, b_max = region_edges(f)
        if b_norm > b_sub:
            ax.barh(y, b_norm - b_sub, left=b_sub, height=0.6,
                    facecolor=REGION_COLORS["subnormal"], alpha=0.5, hatch="///",
                    edgecolor=REGION_COLORS["subnormal"], linewidth=0, gid=f"{f.name}:subnormal")
        ax.barh(y, b_max - b_norm, left=b_norm, height=0.6, color=OKABE_ITO["blue"],
                gid=f"{f.name}:normal")
        ax.text(b_max + 0.01 * (hi_all - lo_all), y,
                f"{f.precision}-bit precision (eps = $2^{{{-f.mantissa_bits}}}$), "
                f"{f.dynamic_range_binades:.0f} binades", va="center", fontsize=8)
    ax.set_yticks(ys, [f"{f.name}  E{f.exponent_bits}M{f.mantissa_bits}" for f in fmts])
    ax.set_xlim(lo_all - 0.03 * (hi_all - lo_all), hi_all + 0.36 * (hi_all - lo_all))
    ax.axvline(0, color="0.5", linewidth=0.6)
    ax.set_xlabel("log2 |value|  (binades)")
    ax.legend(handles=[Patch(facecolor=REGION_COLORS["subnormal"], alpha=0.5, hatch="///",
                             edgecolor=REGION_COLORS["subnormal"], label="subnormal range"),
                       Patch(facecolor=OKABE_ITO["blue"], label="normal range")],
              loc="lower right", fontsize=8)
    ax.set_title(title or "Range (bar length) and precision of each format")
    return ax
