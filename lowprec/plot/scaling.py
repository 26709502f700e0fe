"""Family 5, scaling and accumulation (plain numbers in, so any source works)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import ScalarFormatter

from ._style import (
    OKABE_ITO,
    SERIES_COLORS,
    _new_ax,
)

__all__ = ["accumulation_error", "noise_threshold", "outlier_scaling", "quantizer_lab",
           "scheme_errors"]

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


def quantizer_lab(
    stats: Mapping[str, Any],
    *,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Where each gradient quantizer's error comes from: per quantizer a bar of its mean
    squared error split into squared bias (solid) and variance (hatched), over all blocks.

    ``stats`` maps a quantizer name to anything with per-block ``bias`` (RMS) and
    ``variance`` arrays (:func:`lowprec.recipes.lab.block_stats` gives them). Each bar is
    labelled with its mse; gid of each bar: ``"<name>:bias"`` / ``"<name>:variance"``.
    An unbiased quantizer's bias part is only the noise of its finite draws.
    """
    ax = _new_ax(ax, (7.5, 4.5))
    names = list(stats)
    for i, name in enumerate(names):
        st = stats[name]
        b2 = float(np.mean(np.asarray(st.bias, dtype=np.float64) ** 2))
        var = float(np.mean(np.asarray(st.variance, dtype=np.float64)))
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        ax.bar(i, b2, color=color, gid=f"{name}:bias",
               label="squared bias" if i == 0 else None)
        ax.bar(i, var, bottom=b2, color=color, alpha=0.45, hatch="//", edgecolor=color,
               gid=f"{name}:variance", label="variance" if i == 0 else None)
        ax.annotate(f"{b2 + var:.3g}", (i, b2 + var), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("mean squared error per element (squared bias + variance)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", color="0.92", linewidth=0.6)
    ax.set_title(title or "Gradient quantizers: bias and variance")
    return ax


def noise_threshold(
    rows: Any,
    *,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """FP4-All-the-Way's test per layer: a horizontal bar of each layer's ratio of
    expected-gradient norm to quantization noise (log scale), a line at sqrt(3), the
    bars below it in the warning colour.

    ``rows``: :func:`lowprec.recipes.lab.noise_threshold`'s rows (anything with
    ``name``, ``ratio``, ``steps`` and ``quantizer``); gid of each bar: its layer's name.
    """
    rows = list(rows)
    if not rows:
        raise ValueError("noise_threshold needs at least one row to draw")
    ax = _new_ax(ax, (7.5, 1.2 + 0.35 * len(rows)))
    limit = float(np.sqrt(3.0))
    for i, r in enumerate(rows):
        below = r.ratio < limit
        ax.barh(i, r.ratio, color=OKABE_ITO["vermillion" if below else "blue"], gid=r.name)
        ax.annotate(f" {r.ratio:.3g}", (r.ratio, i), va="center", fontsize=8)
    ax.axvline(limit, color="0.2", linestyle="--", linewidth=1)
    ax.text(limit, 1.01, "sqrt(3)", transform=ax.get_xaxis_transform(), ha="center",
            va="bottom", fontsize=8)
    ax.set_yticks(range(len(rows)), [r.name for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top
    ratios = [r.ratio for r in rows if np.isfinite(r.ratio) and r.ratio > 0]
    if ratios and max(ratios) / min(ratios) > 50:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
    else:
        ax.set_xlim(0, 1.15 * max([limit, *ratios]))
    ax.set_xlabel("||expected gradient|| / quantization noise "
                  f"({rows[0].quantizer}, mean over {rows[0].steps} steps)")
    ax.grid(True, axis="x", color="0.92", linewidth=0.6)
    ax.set_title(title or "Is the gradient above the quantization noise? "
                 "(FP4 All the Way: train in FP4 while >= sqrt(3))", pad=14)
    return ax
