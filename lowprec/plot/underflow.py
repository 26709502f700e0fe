"""Figures for low-precision arithmetic, matplotlib only.

Every function takes the data and an optional ``ax``, draws on it and returns the
Axes; when ``ax`` is None it creates a new figure (the only pyplot state it touches).
Nothing here changes ``rcParams`` or any other global setting.

Families of figures:

1. Underflow: :func:`underflow_histogram` (log2 |x| of any array with the format's
   regions and the share of values in each), :func:`underflow_shares`,
   :func:`gradient_samples` (read a saved training run's gradient samples).
2. Formats: :func:`number_line`, :func:`spacing` (ulp per binade),
   :func:`format_comparison` (range and precision side by side).
3. Rounding: :func:`relative_error` (across binades), :func:`stochastic_rounding`,
   :func:`running_sum` (stagnation of round-to-nearest against stochastic rounding).
4. Training runs (the ``run.json`` schema of ``lowprec.train``; any object or dict with
   ``policy`` and ``history`` works): :func:`training_curves`, :func:`underflow_per_layer`,
   :func:`loss_scale_trace`, :func:`lost_updates`.
5. Scaling and accumulation (plain numbers in, so any source works):
   :func:`scheme_errors`, :func:`outlier_scaling`, :func:`accumulation_error`.

Colours are the Okabe-Ito palette, safe for the common forms of colour blindness.

>>> import numpy as np, lowprec.plot as lpp
>>> x = np.random.default_rng(0).lognormal(-18, 4, 10_000)
>>> ax = lpp.underflow_histogram(x, ["fp16", "bf16"], loss_scale=2.0**10)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import blended_transform_factory

from ..formats import FloatFormat, get_format
from ..rounding import check_mode, decode, round_to

__all__ = [
    "OKABE_ITO",
    "REGION_COLORS",
    "REGION_LABELS",
    "accumulation_error",
    "format_comparison",
    "gradient_samples",
    "loss_scale_trace",
    "lost_updates",
    "number_line",
    "outlier_scaling",
    "region_edges",
    "relative_error",
    "running_sum",
    "scheme_errors",
    "spacing",
    "stochastic_rounding",
    "training_curves",
    "ulp_steps",
    "underflow_histogram",
    "underflow_per_layer",
    "underflow_shares",
]

#: The Okabe-Ito colour-blind-safe palette (Okabe & Ito 2008).
OKABE_ITO: dict[str, str] = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "bluish_green": "#009E73",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "sky_blue": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
}
_SERIES = ("blue", "orange", "bluish_green", "vermillion", "reddish_purple", "sky_blue",
           "black", "yellow")
#: Colours for series (lines, bars) in order.
SERIES_COLORS: tuple[str, ...] = tuple(OKABE_ITO[c] for c in _SERIES)

#: Regions of a format's magnitude axis, in order, with colour and label.
REGIONS = ("zero", "subnormal", "normal", "overflow")
REGION_COLORS: dict[str, str] = {
    "zero": OKABE_ITO["vermillion"],
    "subnormal": OKABE_ITO["orange"],
    "normal": OKABE_ITO["bluish_green"],
    "overflow": OKABE_ITO["reddish_purple"],
}
REGION_LABELS: dict[str, str] = {
    "zero": "lost to zero",
    "subnormal": "subnormal",
    "normal": "normal",
    "overflow": "overflow",
}

_FIGSIZE = (9.0, 4.5)
# 13 markers and 6 dash patterns against 8 colours: the first 24 series all differ
# in colour+dash and the first 104 in colour+marker.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "d", "p")
_DASHES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
_MAX_ENUMERATED = 1 << 16  # number_line draws every value of formats up to 16 bits


# ------------------------------------------------------------------ helpers
def _new_ax(ax: Axes | None, figsize: tuple[float, float] = _FIGSIZE) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=figsize, layout="constrained")
    return new


def _formats(formats: Any) -> list[FloatFormat]:
    if isinstance(formats, (str, FloatFormat)):
        formats = [formats]
    fmts = [get_format(f) for f in formats]
    if not fmts:
        raise ValueError("give at least one format")
    return fmts


def _pow2_exponent(v: float) -> int | None:
    """k when v == 2**k exactly, else None."""
    if v <= 0 or not math.isfinite(v):
        return None
    m, e = math.frexp(v)
    return e - 1 if m == 0.5 else None


def _num(v: float) -> str:
    """A value for a label: 2^k (and its decimal when short), else %g."""
    k = _pow2_exponent(abs(v))
    if k is None:
        return f"{v:g}"
    if -4 <= k <= 16:
        return f"$2^{{{k}}}$ = {v:g}"
    return f"$2^{{{k}}}$ ≈ {v:.3g}"


def _pct(share: float) -> str:
    """A share as a percentage that never shows a non-zero share as 0."""
    if share == 0:
        return "0%"
    p = 100 * share
    if p < 0.01:
        return "<0.01%"
    if p > 99.99 and share < 1:
        return ">99.99%"
    return f"{p:.2f}%" if p < 10 else f"{p:.1f}%"


def _get(obj: Any, name: str) -> Any:
    """Field ``name`` of a dataclass-like object or a mapping."""
    if isinstance(obj, Mapping):
        return obj[name]
    return getattr(obj, name)


def _get_opt(obj: Any, name: str) -> Any:
    try:
        return _get(obj, name)
    except (KeyError, AttributeError):
        return None


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


def region_edges(fmt: FloatFormat | str) -> tuple[float, float, float]:
    """log2 of the smallest subnormal, the smallest normal and the largest finite value."""
    f = get_format(fmt)
    return (float(f.smallest_subnormal_exponent), float(f.emin), math.log2(f.max))


# ------------------------------------------------------- 1. underflow histogram
def underflow_shares(
    x: Any, fmt: FloatFormat | str, *, loss_scale: float = 1.0, mode: str = "rne"
) -> dict[str, float]:
    """Where the non-zero finite values of ``x * loss_scale`` land when rounded to ``fmt``.

    Returns the fraction of those values that round to zero (``"zero"``), to a subnormal,
    to a normal value, or overflow (to infinity, NaN or beyond ``max``); the four add up
    to 1. The rounding is real (``round_to(|x| * S, fmt, mode)``), so a value just below
    the smallest subnormal that rounds up to it counts as subnormal.
    """
    f = get_format(fmt)
    a = np.abs(np.asarray(x, dtype=np.float64)).ravel()
    a = a[np.isfinite(a) & (a > 0)]
    if a.size == 0:
        raise ValueError("x has no non-zero finite values to classify")
    if not (loss_scale > 0 and math.isfinite(loss_scale)):
        raise ValueError(f"loss_scale must be a positive finite number, got {loss_scale!r}")
    with np.errstate(over="ignore"):
        r = round_to(a * loss_scale, f, check_mode(mode))
    finite = np.isfinite(r)
    n = a.size
    zero = int(np.count_nonzero(r == 0))
    sub = int(np.count_nonzero(finite & (r > 0) & (r < f.smallest_normal)))
    over = int(np.count_nonzero(~finite))
    return {"zero": zero / n, "subnormal": sub / n, "normal": (n - zero - sub - over) / n,
            "overflow": over / n}


def gradient_samples(
    run: str | Path | Any, kind: str = "act_grad", layer: str | None = None,
    step: int | None = None,
) -> np.ndarray:
    """Gradient samples saved by a training run, concatenated into one float64 array.

    ``run`` is a run's folder (holding ``grads.npz``) or a loaded run with a ``grads``
    mapping (``lowprec.train.load_run``). Samples are named ``<kind>/<layer>/step<N>``;
    ``layer`` and ``step`` select among them (None = all). Raises ValueError listing
    what is there when nothing matches.
    """
    grads = _get_opt(run, "grads") if not isinstance(run, (str, Path)) else None
    if grads is not None:
        where = f"run {_get_opt(run, 'policy')!r}"
        return _pick_samples(grads, list(grads), kind, layer, step, where)
    path = Path(run) / "grads.npz"
    if not path.exists():
        raise ValueError(f"{path} does not exist; a training run saves its gradient samples "
                         "there (lowprec.train)")
    with np.load(path) as data:
        return _pick_samples(data, list(data.files), kind, layer, step, str(path))


def _pick_samples(data: Any, names: list[str], kind: str, layer: str | None,
                  step: int | None, where: str) -> np.ndarray:
    picked = []
    for name in sorted(names):
        parts = name.split("/")
        if len(parts) != 3 or parts[0] != kind:
            continue
        if layer is not None and parts[1] != layer:
            continue
        if step is not None and parts[2] != f"step{step}":
            continue
        picked.append(np.asarray(data[name], dtype=np.float64).ravel())
    if not picked:
        raise ValueError(f"no samples {kind}/{layer or '*'}/step{step if step is not None else '*'}"
                         f" in {where}; it holds: {', '.join(sorted(names)) or 'nothing'}")
    return np.concatenate(picked)


def underflow_histogram(
    x: Any,
    formats: Any = "fp16",
    *,
    loss_scale: float | None = None,
    bins_per_binade: int = 4,
    mode: str = "rne",
    xlim: tuple[float, float] | None = None,
    label: str = "x",
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Histogram of log2 |x| with each format's regions and the share of values in each.

    In the style of the activation-gradient histogram of Micikevicius et al., "Mixed
    Precision Training" (ICLR 2018, Fig. 3). Bars count the non-zero finite values of ``x``
    per 1/``bins_per_binade`` binade (they add up to that count; exact zeros cannot sit on
    a log axis and are reported in the table). For every format a band at the top shows
    its regions: lost to zero below the smallest subnormal, subnormal up to the smallest
    normal, normal up to ``max``, overflow above (the rectangles have ``gid``
    ``"<format>:<region>"``). With one format the regions are also shaded behind the bars.
    The table gives the share of values that really round into each region (see
    :func:`underflow_shares`); with ``loss_scale`` S the histogram of ``x * S`` is drawn
    as an outline and the table gets a row for it too.
    """
    fmts = _formats(formats)
    ax = _new_ax(ax, (9.5, 3.2 + 0.45 * len(fmts) * (2 if loss_scale else 1)))
    a = np.abs(np.asarray(x, dtype=np.float64)).ravel()
    n_nonfinite = int(np.count_nonzero(~np.isfinite(a)))
    a = a[np.isfinite(a)]
    n_zero = int(np.count_nonzero(a == 0))
    a = a[a > 0]
    if a.size == 0:
        raise ValueError("x has no non-zero finite values to draw")
    if bins_per_binade < 1:
        raise ValueError(f"bins_per_binade must be >= 1, got {bins_per_binade}")
    k = int(bins_per_binade)
    lg = np.log2(a)
    i0, i1 = math.floor(lg.min() * k), math.floor(lg.max() * k) + 1
    edges = np.arange(i0, i1 + 1) / k
    counts, _ = np.histogram(lg, edges)

    shift = 0.0
    if loss_scale is not None:
        if not (loss_scale > 0 and math.isfinite(loss_scale)):
            raise ValueError(f"loss_scale must be a positive finite number, got {loss_scale!r}")
        shift = math.log2(loss_scale)

    # What to show: the data (shifted too) plus format edges that are near it.
    lo, hi = edges[0], edges[-1]
    lo, hi = min(lo, lo + shift), max(hi, hi + shift)
    if xlim is None:
        near = [e for f in fmts for e in region_edges(f) if lo - 24 <= e <= hi + 24]
        xlim = (math.floor(min([lo, *near])) - 2, math.ceil(max([hi, *near])) + 2)
    ax.set_xlim(*xlim)

    # Vertical layout in axes fraction: bands on top, then the table, then the bars.
    n_rows = len(fmts) * (2 if loss_scale is not None else 1)
    band_h = 0.06 if len(fmts) > 1 else 0.07
    bands_bottom = 1 - band_h * len(fmts) - 0.01
    fig = ax.get_figure()
    axes_h_pt = (ax.get_position().height * fig.get_figheight() * 72
                 if fig is not None else 250.0)
    n_lines = n_rows + 1 + (1 if n_zero or n_nonfinite else 0)
    table_h = (n_lines * 7.5 * 1.25 + 10) / axes_h_pt
    bars_top = bands_bottom - table_h - 0.03
    if loss_scale is not None:  # room for the arrow and its label above the peak
        bars_top = (bars_top - 16 / axes_h_pt) / 1.06
    peak = counts.max()
    ax.set_ylim(0, peak / bars_top)

    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for j, f in enumerate(fmts):
        b_sub, b_norm, b_max = region_edges(f)
        spans = {"zero": (min(xlim[0], b_sub) - 1, b_sub), "subnormal": (b_sub, b_norm),
                 "normal": (b_norm, b_max), "overflow": (b_max, max(xlim[1], b_max) + 1)}
        y0 = 1 - band_h * (j + 1)
        for region, (s, e) in spans.items():
            ax.add_patch(Rectangle((s, y0), e - s, band_h, transform=trans,
                                   facecolor=REGION_COLORS[region], alpha=0.6,
                                   edgecolor="white", linewidth=0.8,
                                   gid=f"{f.name}:{region}"))
            if len(fmts) == 1:
                ax.add_patch(Rectangle((s, 0), e - s, bands_bottom, transform=trans,
                                       facecolor=REGION_COLORS[region], alpha=0.12,
                                       linewidth=0, gid=f"shade:{f.name}:{region}"))
        if len(fmts) == 1:
            _label_band(ax, f, spans, xlim, y0 + band_h / 2, trans)
        ax.text(xlim[0] + 0.3, y0 + band_h / 2, f.name, transform=trans, ha="left",
                va="center", fontsize=8, fontweight="bold",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.5})

    bar_color = OKABE_ITO["blue"]
    ax.stairs(counts, edges, fill=True, color=bar_color, alpha=0.75, label=label, gid="hist")
    handles = [Patch(facecolor=bar_color, alpha=0.75, label=label)]
    if loss_scale is not None:
        ax.stairs(counts, edges + shift, fill=False, color="black", linewidth=1.4,
                  gid="hist_scaled")
        s_label = f"{label}·S, S = {_num(loss_scale)}"
        handles.append(Line2D([], [], color="black", linewidth=1.4, label=s_label))
        # An arrow from the peak to where the loss scale moves it.
        ip = int(np.argmax(counts))
        xp = (edges[ip] + edges[ip + 1]) / 2
        ax.annotate("", xy=(xp + shift, peak * 1.04), xytext=(xp, peak * 1.04),
                    arrowprops={"arrowstyle": "->", "color": "black", "linewidth": 1})
        ax.text(xp + shift / 2, peak * 1.06, f"×S: {shift:+g} binades", ha="center",
                va="bottom", fontsize=8)
    handles += [Patch(facecolor=REGION_COLORS[r], alpha=0.6, label=REGION_LABELS[r])
                for r in REGIONS]

    # The table of shares.
    wname = max(18, *(len(f.name) + len(label) + 5 for f in fmts))
    head = f"{'':<{wname}}{'lost to zero':>13}{'subnormal':>11}{'normal':>9}{'overflow':>10}"
    lines = [head]
    for f in fmts:
        rows = [(f.name, 1.0)]
        if loss_scale is not None:
            rows.append((f"{f.name}, {label}·S", loss_scale))
        for name, s in rows:
            sh = underflow_shares(a, f, loss_scale=s, mode=mode)
            lines.append(f"{name:<{wname}}" + "".join(
                f"{_pct(sh[r]):>{w}}" for r, w in zip(REGIONS, (13, 11, 9, 10))))
    notes = []
    if n_zero:
        notes.append(f"{n_zero} exact zeros")
    if n_nonfinite:
        notes.append(f"{n_nonfinite} inf/NaN")
    if notes:
        lines.append(f"share of {a.size} non-zero values; not shown: " + ", ".join(notes))
    ax.text(0.01, bands_bottom - 0.015, "\n".join(lines), transform=ax.transAxes, ha="left",
            va="top", fontsize=7.5, family="monospace", gid="shares",
            bbox={"facecolor": "white", "edgecolor": "0.7", "alpha": 0.9, "pad": 3})

    ax.set_xlabel(f"log2 |value|  (binades; the histogram bins are 1/{k} binade)")
    ax.set_ylabel("number of values per bin")
    ax.set_yticks([t for t in MaxNLocator(nbins=5, integer=True).tick_values(0, peak)
                   if 0 <= t <= peak * 1.05])
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
              frameon=False)
    ax.set_title(title or "Where the values land in " + ", ".join(f.name for f in fmts))
    return ax


def _label_band(ax: Axes, f: FloatFormat, spans: dict, xlim: tuple[float, float],
                y: float, trans: Any) -> None:
    """Write each region's name and range into its band segment where it fits."""
    fig = ax.get_figure()
    width_in = ax.get_position().width * fig.get_figwidth() if fig is not None else 6.0
    per_binade = width_in * 72 / (xlim[1] - xlim[0])  # points per binade
    b_sub, b_norm, _ = region_edges(f)
    texts = {
        "zero": [f"lost to zero (below $2^{{{b_sub:.0f}}}$)", "lost to zero"],
        "subnormal": [f"subnormal ($2^{{{b_sub:.0f}}}$ to $2^{{{b_norm:.0f}}}$)", "subnormal"],
        "normal": [f"normal ($2^{{{b_norm:.0f}}}$ to max = {f.max:g})", "normal"],
        "overflow": ["overflow", "over"],
    }
    for region, (s, e) in spans.items():
        s, e = max(s, xlim[0]), min(e, xlim[1])
        if region == "zero":
            s += 5.0 * 72 * 0.08 / per_binade * 1.2  # leave room for the format name
        room = (e - s) * per_binade
        for text in texts[region]:
            if room >= 0.62 * 7.5 * (len(text) - 3 * text.count("$")):
                ax.text((s + e) / 2, y, text, transform=trans, ha="center", va="center",
                        fontsize=7.5)
                break


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


# ------------------------------------------------------------ 4. training runs
def _runs(runs: Any) -> list[tuple[str, Any]]:
    """[(label, run)] from one run, a sequence of runs, or a mapping label -> run."""
    if isinstance(runs, Mapping) and "history" not in runs:
        return [(str(k), v) for k, v in runs.items()]
    if _get_opt(runs, "history") is not None:
        return [(str(_get(runs, "policy")), runs)]
    out = [(str(_get(r, "policy")), r) for r in runs]
    if not out:
        raise ValueError("no runs given")
    return out


def _hist(run: Any, key: str) -> Any:
    h = _get(run, "history")
    try:
        return _get(h, key)
    except (KeyError, AttributeError):
        raise ValueError(f"run {_get_opt(run, 'policy')!r} has no history field {key!r}") from None


def training_curves(
    runs: Any,
    metric: str = "loss",
    *,
    show_train: bool = True,
    logy: bool = False,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Loss (``metric="loss"``) or accuracy (``"acc"``) per step, one colour per run.

    Training values are a thin line (``show_train``), evaluation values (``eval_step``/
    ``eval_loss`` or ``eval_acc``) markers joined by a thick line; each run has its own
    colour, marker and dash pattern, so runs whose curves coincide stay visible. Runs are a mapping label -> run, a list
    of runs (labelled by ``policy``) or one run; a run is any object or dict with
    ``history`` holding the fields of ``run.json``.
    """
    if metric not in ("loss", "acc"):
        raise ValueError(f"metric must be 'loss' or 'acc', got {metric!r}")
    ax = _new_ax(ax, (7.0, 4.5))
    train_key = "loss" if metric == "loss" else "train_acc"
    curves: dict[str, np.ndarray] = {}
    for i, (label, run) in enumerate(_runs(runs)):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        marker, dash = _MARKERS[i % len(_MARKERS)], _DASHES[i % len(_DASHES)]
        h = _get(run, "history")
        steps = np.asarray(_hist(run, "step"))
        train = _get_opt(h, train_key)
        if show_train and train is not None and len(train):
            y = np.asarray(train, dtype=np.float64)
            ax.plot(steps, y, color=color, linewidth=0.7, alpha=0.5, gid=f"{label}:train")
        ev_steps, ev = _get_opt(h, "eval_step"), _get_opt(h, f"eval_{metric}")
        if ev is not None and len(ev):
            curves[label] = np.asarray(ev, dtype=np.float64)
            ax.plot(np.asarray(ev_steps), np.asarray(ev, dtype=np.float64), color=color,
                    marker=marker, markersize=5, linewidth=1.6, linestyle=dash,
                    markerfacecolor="none" if i % 2 else color, gid=f"{label}:eval",
                    label=label)
        else:
            ax.plot([], [], color=color, linewidth=1.6, linestyle=dash, label=label)
    _note_coinciding(ax, curves)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (log scale)" if ax.get_yscale() == "log" and metric == "loss" else
                  ("loss" if metric == "loss" else "accuracy (fraction correct)"))
    handles, labels = ax.get_legend_handles_labels()
    if show_train:
        handles += [Line2D([], [], color="0.4", linewidth=0.7, alpha=0.6),
                    Line2D([], [], color="0.4", marker="o", markersize=3.5, linewidth=1.6)]
        labels += ["training batch (per step)", "held-out evaluation"]
    ax.legend(handles, labels, fontsize=8)
    ax.grid(True, color="0.92", linewidth=0.6)
    ax.set_title(title or ("Loss" if metric == "loss" else "Accuracy") + " per precision policy")
    return ax


def _note_coinciding(ax: Axes, curves: dict[str, np.ndarray], tol: float = 0.02) -> None:
    """Say which runs' evaluation curves lie within ``tol`` (relative) of the first one,
    since they are drawn on top of each other."""
    if len(curves) < 2:
        return
    (ref_label, ref), *rest = curves.items()
    same = [label for label, c in rest if c.shape == ref.shape and np.all(
        np.abs(c - ref) <= tol * np.maximum(np.abs(ref), 1e-12))]
    if same:
        ax.text(0.5, -0.14, "on top of " + ref_label + " (within " + f"{tol:.0%}"
                + " at every evaluation): " + ", ".join(same), transform=ax.transAxes,
                ha="center", va="top", fontsize=8, gid="coinciding", wrap=True)


def _per_layer(run: Any, key: str, ylabel: str, title: str, ax: Axes | None) -> Axes:
    ax = _new_ax(ax, (7.0, 4.5))
    steps = np.asarray(_hist(run, "step"))
    data = _hist(run, key)
    layers = _get_opt(run, "layers") or list(data)
    for i, layer in enumerate(layers):
        if data.get(layer) is None:  # not measured for this policy (null in run.json)
            continue
        y = 100 * np.asarray(data[layer], dtype=np.float64)  # null steps become NaN
        ax.plot(steps[: y.size], y, color=SERIES_COLORS[i % len(SERIES_COLORS)],
                linewidth=1.3, label=str(layer), gid=str(layer))
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.legend(title="layer", fontsize=8, title_fontsize=8)
    ax.grid(True, color="0.92", linewidth=0.6)
    ax.set_title(title)
    return ax


def underflow_per_layer(run: Any, *, key: str = "grad_underflow", title: str | None = None,
                        ax: Axes | None = None) -> Axes:
    """Per layer, the % of gradient values that are non-zero in float64 but flushed to zero
    by rounding (``history[key]``, a mapping layer -> fraction per step)."""
    what = {"grad_underflow": "flushed to zero", "grad_subnormal": "subnormal"}.get(key, key)
    return _per_layer(run, key, f"% of gradient values {what}",
                      title or f"Gradient values {what} per layer "
                      f"({_get_opt(run, 'policy') or 'run'})", ax)


def lost_updates(run: Any, *, title: str | None = None, ax: Axes | None = None) -> Axes:
    """Per layer, the % of weights left unchanged although their update was non-zero
    (``history["lost_updates"]``): the update was below half an ulp of the weight."""
    return _per_layer(run, "lost_updates", "% of weights whose update was lost",
                      title or f"Lost weight updates per layer "
                      f"({_get_opt(run, 'policy') or 'run'})", ax)


def loss_scale_trace(runs: Any, *, title: str | None = None, ax: Axes | None = None) -> Axes:
    """Loss scale per step (log2 axis), with skipped steps (inf/NaN gradients) marked ×.

    The trace of each run has gid ``"<label>:scale"``, its skipped steps ``"<label>:skipped"``.
    """
    ax = _new_ax(ax, (7.0, 4.5))
    for i, (label, run) in enumerate(_runs(runs)):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        steps = np.asarray(_hist(run, "step"))
        scale = np.asarray(_hist(run, "loss_scale"), dtype=np.float64)
        skipped = np.asarray(_hist(run, "skipped"), dtype=bool)
        ax.step(steps, scale, where="post", color=color, linewidth=1.5, label=label,
                gid=f"{label}:scale")
        n_skip = int(skipped.sum())
        ax.plot(steps[skipped], scale[skipped], marker="x", markersize=7, color=color,
                markeredgewidth=1.6, linestyle="none", gid=f"{label}:skipped",
                label=f"{label}: {n_skip} skipped steps" if n_skip else None)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss scale S  (log scale, base 2)")
    ax.legend(fontsize=8)
    ax.grid(True, color="0.92", linewidth=0.6)
    ax.set_title(title or "Dynamic loss scale; × = step skipped (inf/NaN gradients)")
    return ax


# --------------------------------------------------- 5. scaling and accumulation
def scheme_errors(
    errors: Mapping[str, Any],
    *,
    metric: str = "relative RMS error",
    logy: bool = True,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Error of quantization schemes against block size.

    ``errors`` maps a scheme name to either a number (a scheme without blocks, e.g.
    per-tensor scaling: drawn as a horizontal dashed line) or a mapping block size ->
    error (a line with markers over log2 block size). ``metric`` names the y axis (e.g.
    ``"SQNR (dB)"`` with ``logy=False``). gid of each artist: the scheme name.
    """
    ax = _new_ax(ax, (7.5, 4.5))
    blocks_seen: set[int] = set()
    flat = []
    for i, (name, err) in enumerate(errors.items()):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        if isinstance(err, Mapping):
            bs = sorted(err)
            blocks_seen.update(bs)
            ax.plot(bs, [err[b] for b in bs], marker="o", color=color, linewidth=1.6,
                    label=name, gid=name)
        else:
            flat.append((name, float(err), color))
    for name, err, color in flat:
        ax.axhline(err, color=color, linestyle="--", linewidth=1.4, label=name, gid=name)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    if blocks_seen:
        ticks = sorted(blocks_seen)
        ax.set_xticks(ticks, [str(b) for b in ticks])
        ax.minorticks_off()
    ax.set_xlabel("block size (values sharing one scale; log scale, base 2)")
    ax.set_ylabel(metric + (" (log scale)" if logy else ""))
    ax.legend(fontsize=8)
    ax.grid(True, color="0.92", linewidth=0.6)
    ax.set_title(title or "Quantization error per scheme and block size")
    return ax


def outlier_scaling(
    x: Any,
    quantized: Mapping[str, Any],
    *,
    block_size: int | None = None,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Per-element relative error of a tensor under several scaling schemes.

    ``quantized`` maps a scheme name to the dequantized tensor (same shape as ``x``).
    Elements rounded to zero have error 1 (100%); exact elements are left off the log
    axis. Block boundaries are dotted lines when ``block_size`` is given, and the
    outliers (|x| > 10 × the median |x|) are marked at the top.
    """
    xv = np.asarray(x, dtype=np.float64).ravel()
    ax = _new_ax(ax, (9.0, 4.5))
    idx = np.arange(xv.size)
    markers = ("o", "s", "^", "D", "v")
    for i, (name, q) in enumerate(quantized.items()):
        qv = np.asarray(q, dtype=np.float64).ravel()
        if qv.shape != xv.shape:
            raise ValueError(f"{name}: {qv.size} values, but x has {xv.size}")
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.abs(qv - xv) / np.abs(xv)
        rel[(rel == 0) | ~np.isfinite(rel)] = np.nan
        lost = np.count_nonzero((qv == 0) & (xv != 0))
        ax.plot(idx, rel, marker=markers[i % len(markers)], markersize=3.5, linestyle="none",
                color=SERIES_COLORS[i % len(SERIES_COLORS)], gid=name,
                label=f"{name}: median {np.nanmedian(rel) if np.any(np.isfinite(rel)) else 0:.2g}"
                      f", {lost} values lost to zero")
    if block_size:
        for b in range(block_size, xv.size, block_size):
            ax.axvline(b - 0.5, color="0.6", linestyle=":", linewidth=0.8)
    med = np.median(np.abs(xv[xv != 0])) if np.any(xv != 0) else 0.0
    out = np.flatnonzero(np.abs(xv) > 10 * med)
    if out.size:
        ax.vlines(out, 0, 1, transform=ax.get_xaxis_transform(), color=OKABE_ITO["vermillion"],
                  alpha=0.35, linewidth=4, gid="outliers", zorder=0,
                  label=f"outlier (|x| > 10 × median |x|): {out.size}")
    ax.set_yscale("log")
    ax.set_xlabel("element index" + (f"  (dotted lines: blocks of {block_size})"
                                     if block_size else ""))
    ax.set_ylabel("relative error of the element (log scale)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or "One outlier, per-tensor against per-block scaling")
    return ax


def accumulation_error(
    k_values: Any,
    errors: Mapping[str, Any],
    *,
    ylabel: str = "relative error of the dot product",
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Error of a dot product against its length K, one line per accumulation model.

    ``errors`` maps a model name to errors, one per entry of ``k_values``; log-log axes.
    Errors of exactly 0 cannot sit on the log axis; the legend says how many were left out.
    """
    k = np.asarray(k_values, dtype=np.float64)
    ax = _new_ax(ax, (7.5, 4.5))
    markers = ("o", "s", "^", "D", "v")
    for i, (name, err) in enumerate(errors.items()):
        e = np.asarray(err, dtype=np.float64)
        if e.shape != k.shape:
            raise ValueError(f"{name}: {e.size} errors for {k.size} values of K")
        n_exact = int(np.count_nonzero(e == 0))
        e = np.where(e > 0, e, np.nan)
        label = name + (f" (exact for {n_exact} of the K, not drawn)" if n_exact else "")
        ax.plot(k, e, marker=markers[i % len(markers)], markersize=4, linewidth=1.6,
                color=SERIES_COLORS[i % len(SERIES_COLORS)], label=label, gid=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("dot-product length K  (log scale, base 2)")
    ax.set_ylabel(ylabel + " (log scale)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False)
    ax.grid(True, color="0.92", linewidth=0.6)
    ax.set_title(title or "Accumulation error grows with K")
    return ax
