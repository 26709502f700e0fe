"""Figures for low-precision arithmetic, matplotlib only.

Every function takes the data and an optional ``ax``, draws on it and returns the
Axes; when ``ax`` is None it creates a new figure (the only pyplot state it touches).
Nothing here changes ``rcParams`` or any other global setting.

Families of figures, one module each:

1. Underflow (``underflow``): :func:`underflow_histogram` (log2 |x| of any array with
   the format's regions and the share of values in each), :func:`underflow_shares`,
   :func:`gradient_samples` (read a saved training run's gradient samples).
2. Formats (``formats``): :func:`number_line`, :func:`spacing` (ulp per binade),
   :func:`format_comparison` (range and precision side by side).
3. Rounding (``rounding``): :func:`relative_error` (across binades),
   :func:`stochastic_rounding`, :func:`running_sum` (stagnation of round-to-nearest
   against stochastic rounding).
4. Training runs (``training``; the ``run.json`` schema of ``lowprec.train``; any object
   or dict with ``policy`` and ``history`` works): :func:`training_curves`,
   :func:`underflow_per_layer`, :func:`loss_scale_trace`, :func:`lost_updates`.
5. Scaling and accumulation (``scaling``; plain numbers in, so any source works):
   :func:`scheme_errors`, :func:`outlier_scaling`, :func:`accumulation_error`,
   :func:`quantizer_lab` (bias and variance of gradient quantizers),
   :func:`noise_threshold` (FP4-All-the-Way's sqrt(3) test per layer).

Colours are the Okabe-Ito palette, safe for the common forms of colour blindness
(``._style``). Every name is re-exported here: import from ``lowprec.plot``.

>>> import numpy as np, lowprec.plot as lpp
>>> x = np.random.default_rng(0).lognormal(-18, 4, 10_000)
>>> ax = lpp.underflow_histogram(x, ["fp16", "bf16"], loss_scale=2.0**10)
"""

from ._style import (
    OKABE_ITO,
    REGION_COLORS,
    REGION_LABELS,
    REGIONS,  # noqa: F401 (public, outside __all__ as before the split)
    SERIES_COLORS,  # noqa: F401
    region_edges,
)
from .formats import format_comparison, number_line, spacing, ulp_steps
from .inspect import inspect_heatmap, inspect_histograms
from .rounding import relative_error, running_sum, stochastic_rounding
from .scaling import (
    accumulation_error,
    noise_threshold,
    outlier_scaling,
    quantizer_lab,
    scheme_errors,
)
from .training import (
    final_ranking,
    loss_scale_trace,
    lost_updates,
    memory_stack,
    training_curves,
    underflow_per_layer,
)
from .underflow import gradient_samples, rounding_edges, underflow_histogram, underflow_shares

__all__ = [
    "inspect_heatmap",
    "inspect_histograms",
    "OKABE_ITO",
    "REGION_COLORS",
    "REGION_LABELS",
    "accumulation_error",
    "quantizer_lab",
    "noise_threshold",
    "final_ranking",
    "format_comparison",
    "gradient_samples",
    "loss_scale_trace",
    "lost_updates",
    "memory_stack",
    "number_line",
    "outlier_scaling",
    "region_edges",
    "relative_error",
    "rounding_edges",
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
