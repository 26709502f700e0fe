"""Figures of a :class:`lowprec.inspect.Report`: a heatmap and a histogram grid.

(To be re-exported from :mod:`lowprec.plot`.) Both functions aggregate the steps of a
series ``LAYER/KIND`` (underflow summed over steps, SQNR the worst step), take an optional
``fig`` and return the matplotlib Figure (a new pyplot figure when ``fig`` is None; nothing
else global is touched).

>>> import numpy as np
>>> from lowprec import inspect
>>> g = np.random.default_rng(0).lognormal(-14, 3, (8, 64)).astype(np.float32)
>>> r = inspect.report({"fc/output_grad": g, "fc/weight": g * 1e4}, ["fp16", "mxfp4"])
>>> fig = inspect_heatmap(r)
>>> fig = inspect_histograms(r, ["fp16", "fp8_e4m3"])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..formats import get_format
from ..inspect import Report

__all__ = ["inspect_heatmap", "inspect_histograms"]

_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]
_METRICS = {"underflow_frac": "underflow (share of non-zero values)",
            "sqnr_db": "SQNR (dB, worst step)"}


def _new_figure(size: tuple[float, float]) -> Figure:
    """A new pyplot figure (so notebooks display it), the only pyplot state touched."""
    import matplotlib.pyplot as plt

    return plt.figure(figsize=size, layout="constrained")


def _series(report: Report) -> list[str]:
    return list(dict.fromkeys(f"{r['layer']}/{r['kind']}" for r in report.rows))


def _grid(report: Report, metric: str) -> np.ndarray:
    series = _series(report)
    out = np.full((len(series), len(report.recipes)), np.nan)
    for i, s in enumerate(series):
        layer, _, kind = s.rpartition("/")
        for j, rec in enumerate(report.recipes):
            rows = report.where(layer=layer, kind=kind, recipe=rec)
            if metric == "underflow_frac":
                nz = sum(r["nonzero"] for r in rows)
                out[i, j] = sum(r["underflow"] for r in rows) / nz if nz else 0.0
            else:
                vals = [r[metric] for r in rows if not math.isnan(r[metric])]
                out[i, j] = min(vals) if vals else np.nan
    return out


def inspect_heatmap(report: Report, metrics: tuple[str, ...] = ("underflow_frac", "sqnr_db"),
                    *, fig: Figure | None = None) -> Figure:
    """Tensors (rows) x recipes (columns), one panel per metric, each cell annotated."""
    for m in metrics:
        if m not in _METRICS:
            raise ValueError(f"metric {m!r} is not drawn; valid: {', '.join(_METRICS)}")
    series = _series(report)
    if fig is None:
        label = max((len(s) for s in series), default=4)
        fig = _new_figure((3.0 + 0.07 * label + 0.6 * len(report.recipes),
                           (1.8 + 0.3 * len(series)) * len(metrics)))
    axes = fig.subplots(len(metrics), 1, squeeze=False)[:, 0]
    for ax, m in zip(axes, metrics):
        grid = _grid(report, m)
        shown = np.clip(np.where(np.isinf(grid), np.sign(grid) * 99.0, grid), -99, 99) \
            if m == "sqnr_db" else grid
        cmap = "viridis" if m == "sqnr_db" else "magma_r"
        im = ax.imshow(shown, aspect="auto", cmap=cmap,
                       vmin=0 if m != "sqnr_db" else None,
                       vmax=1 if m != "sqnr_db" else None)
        for (i, j), v in np.ndenumerate(grid):
            text = ("-" if math.isnan(v) else f"{v:.0%}" if m != "sqnr_db" else
                    ("exact" if v == math.inf else f"{v:.0f}"))
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="white" if (m == "sqnr_db") == (shown[i, j] < np.nanmean(shown))
                    else "black")
        ax.set_xticks(range(len(report.recipes)), report.recipes, rotation=60, ha="right",
                      fontsize=8)
        ax.set_yticks(range(len(series)), series, fontsize=8)
        ax.set_title(_METRICS[m], fontsize=10)
        fig.colorbar(im, ax=ax, fraction=0.03)
    return fig


def inspect_histograms(report: Report, formats: Any = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2"),
                       *, ncols: int = 3, fig: Figure | None = None) -> Figure:
    """One panel per tensor series: the histogram of log2 |x| (all steps), with each
    format's smallest subnormal (dotted), smallest normal (dashed) and maximum (solid)."""
    fmts = [get_format(f) for f in ([formats] if isinstance(formats, str) else formats)]
    series = _series(report)
    counts: dict[str, dict[int, int]] = {s: {} for s in series}
    for r in report.rows:
        s = f"{r['layer']}/{r['kind']}"
        if r["recipe"] == report.recipes[0]:
            for k, v in report.histograms.get(r["tensor"], {}).items():
                counts[s][k] = counts[s].get(k, 0) + v
    ncols = max(1, min(ncols, len(series)))
    nrows = max(1, -(-len(series) // ncols))
    if fig is None:
        fig = _new_figure((4.2 * ncols, 2.8 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, s in zip(axes, series):
        h = counts[s]
        if h:
            ks = np.array(sorted(h))
            ax.bar(ks, [h[k] for k in ks], width=1.0, color="#999999", align="edge")
        for c, f in zip(_COLOURS, fmts):
            lines = [(f.smallest_subnormal, ":"), (f.smallest_normal, "--"), (f.max, "-")]
            for limit, style in lines:
                ax.axvline(math.log2(limit), color=c, linestyle=style, linewidth=1)
            ax.plot([], [], color=c, label=f.name)
        lo, hi = (min(h), max(h) + 1) if h else (0, 1)
        ax.set_xlim(min(lo, -26) - 2, max(hi, 17) + 2)  # fp16 and FP8 limits always in view
        ax.set_title(s, fontsize=9)
        ax.set_xlabel("log2 |x|", fontsize=8)
    for ax in axes[len(series):]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7, title="min sub : / min normal -- / max -", title_fontsize=6)
    return fig
