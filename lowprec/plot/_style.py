"""The shared look of lowprec.plot: the Okabe-Ito palette, region colours, new-axes and
label helpers. No rcParams or other global state is changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from matplotlib.axes import Axes

from ..formats import FloatFormat, get_format

__all__ = ["OKABE_ITO", "REGION_COLORS", "REGION_LABELS", "REGIONS", "SERIES_COLORS", "region_edges"]

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
#: For more than eight series: Okabe-Ito without the pale yellow, then six of Paul Tol's
#: "muted" colours (indigo, wine, olive, teal, purple, rose), so up to thirteen stay
#: distinct.
_MANY_COLORS: tuple[str, ...] = (*(OKABE_ITO[c] for c in _SERIES if c != "yellow"),
                                 "#332288", "#882255", "#999933", "#44AA99", "#AA4499",
                                 "#CC6677")


def _series_color(i: int, n: int) -> str:
    """Colour of series ``i`` of ``n``: distinct for up to thirteen series."""
    colors = SERIES_COLORS if n <= len(SERIES_COLORS) else _MANY_COLORS
    return colors[i % len(colors)]

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


def region_edges(fmt: FloatFormat | str) -> tuple[float, float, float]:
    """log2 of the smallest subnormal, the smallest normal and the largest finite value."""
    f = get_format(fmt)
    return (float(f.smallest_subnormal_exponent), float(f.emin), math.log2(f.max))
