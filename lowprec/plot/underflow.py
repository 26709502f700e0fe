"""Family 1, underflow: where a tensor's magnitudes fall among a format's regions."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import blended_transform_factory

from ..formats import FloatFormat, get_format
from ..rounding import check_mode, round_to
from ._style import (
    OKABE_ITO,
    REGION_COLORS,
    REGION_LABELS,
    REGIONS,
    _formats,
    _get_opt,
    _new_ax,
    _num,
    _pct,
    region_edges,
)

__all__ = ["gradient_samples", "rounding_edges", "underflow_histogram", "underflow_shares"]

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


def rounding_edges(fmt: FloatFormat | str, mode: str = "rne") -> tuple[float, float, float]:
    """log2 of where rounding a positive value to ``fmt`` in ``mode`` changes region:
    ``(zero, normal, overflow)``. Values up to the first edge round to zero, values
    between the first two to a subnormal, then to a normal value, and beyond the last one
    overflow -- so the bands of :func:`underflow_histogram` agree with its table.

    With round-to-nearest the first edge is *half* the smallest subnormal: for fp16 the
    values in (2^-25, 2^-24) round up to 2^-24, and 2^-25 itself is a tie that goes to the
    even neighbour, zero. Directed modes move the edges by half a step (``rtz`` flushes
    everything below 2^-24; ``rup`` and ``odd`` flush nothing: -inf). ``stochastic`` has no sharp
    edges; it gets the representable limits (:func:`region_edges`).

    >>> rounding_edges("fp16")
    (-25.0, -14.00070461297659, 15.99964773652837)
    >>> rounding_edges("fp16", "rtz")[0]
    -24.0
    """
    f = get_format(fmt)
    mode = check_mode(mode)
    sub, norm, top = f.smallest_subnormal, f.smallest_normal, f.max
    ulp_top = 2.0 ** (math.floor(math.log2(top)) - f.mantissa_bits)
    if not f.has_subnormals:
        sub = norm
    if mode in ("rne", "rna"):
        edges = (sub / 2, norm - sub / 2 if f.has_subnormals else norm / 2, top + ulp_top / 2)
    elif mode in ("rtz", "rdown", "odd"):  # positive values truncate, and never overflow
        edges = (0.0 if mode == "odd" else sub, norm, math.inf)  # odd: (0, sub) -> sub
    elif mode == "rup":
        edges = (0.0, norm - sub if f.has_subnormals else 0.0, top)
    else:
        return region_edges(f)
    return tuple(math.log2(e) if 0 < e < math.inf else (-math.inf if e == 0 else math.inf)
                 for e in edges)  # type: ignore[return-value]


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
    its regions *as rounding in* ``mode`` *makes them* (:func:`rounding_edges`): with
    round-to-nearest, lost to zero up to half the smallest subnormal, subnormal up to half a
    subnormal step below the smallest normal, normal up to ``max`` plus half an ulp,
    overflow above (the rectangles have ``gid``
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
                 if isinstance(fig, Figure) else 250.0)
    n_lines = n_rows + 1 + (1 if n_zero or n_nonfinite else 0)
    table_h = (n_lines * 7.5 * 1.25 + 10) / axes_h_pt
    bars_top = bands_bottom - table_h - 0.03
    if loss_scale is not None:  # room for the arrow and its label above the peak
        bars_top = (bars_top - 16 / axes_h_pt) / 1.06
    peak = counts.max()
    ax.set_ylim(0, peak / bars_top)

    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for j, f in enumerate(fmts):
        # Where rounding (not the representable values) changes region, so that the bands
        # agree with the table below, which counts what round_to really returns.
        b_zero, b_norm, b_over = rounding_edges(f, mode)
        left, right = xlim[0] - 1, xlim[1] + 1
        if b_zero == -math.inf:  # nothing rounds to zero (rup, odd): an empty band
            b_zero = min(left, b_norm - 1)
        if b_over == math.inf:  # nothing overflows (rtz, rdown, odd)
            b_over = max(right, b_norm + 1)
        spans = {"zero": (min(xlim[0], b_zero) - 1, b_zero), "subnormal": (b_zero, b_norm),
                 "normal": (b_norm, b_over), "overflow": (b_over, max(xlim[1], b_over) + 1)}
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
            _label_band(ax, f, mode, spans, xlim, y0 + band_h / 2, trans)
        ax.text(xlim[0] + 0.3, y0 + band_h / 2, f.name, transform=trans, ha="left",
                va="center", fontsize=8, fontweight="bold",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.5})

    bar_color = OKABE_ITO["blue"]
    ax.stairs(counts, edges, fill=True, color=bar_color, alpha=0.75, label=label, gid="hist")
    handles: list[Artist] = [Patch(facecolor=bar_color, alpha=0.75, label=label)]
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


def _label_band(ax: Axes, f: FloatFormat, mode: str, spans: dict,
                xlim: tuple[float, float], y: float, trans: Any) -> None:
    """Write each region's name and range into its band segment where it fits."""
    fig = ax.get_figure()
    width_in = ax.get_position().width * fig.get_figwidth() if isinstance(fig, Figure) else 6.0
    per_binade = width_in * 72 / (xlim[1] - xlim[0])  # points per binade
    b_sub, b_norm, _ = region_edges(f)
    b_zero = rounding_edges(f, mode)[0]
    if math.isfinite(b_zero) and b_zero == b_sub - 1:  # round to nearest
        tie = "tie to even" if mode == "rne" else "tie away"
        zero = [f"lost to zero (up to $2^{{{b_zero:.0f}}}$ = half the smallest subnormal, "
                f"{tie})", f"lost to zero (up to $2^{{{b_zero:.0f}}}$, {tie})",
                f"lost to zero ($\\leq 2^{{{b_zero:.0f}}}$)"]
    elif math.isfinite(b_zero):
        zero = [f"lost to zero (below $2^{{{b_zero:.0f}}}$)"]
    else:
        zero = []
    texts = {
        "zero": [*zero, "lost to zero"],
        "subnormal": [f"subnormal (smallest $2^{{{b_sub:.0f}}}$, normal from "
                      f"$2^{{{b_norm:.0f}}}$)", "subnormal"],
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
