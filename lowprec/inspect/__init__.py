"""Your own tensors through every format and recipe, measured exactly: ``lowprec.inspect``.

:func:`report` takes named arrays (numpy, torch, CuPy, JAX...) and, for every tensor and
every recipe (:data:`RECIPES`: plain formats, fp16 under a loss scale, FP8 with current
and delayed per-tensor scaling, MXFP8/MXFP6/MXFP4 under each scale rule, NVFP4), counts
what lowprec's quantizers do to it: underflow (finite non-zero values that became ±0;
values that were zero already are not underflow), subnormals, overflow, clipping, NaN,
SQNR and relative error; for block recipes also per-block forensics. The definitions are
in :mod:`lowprec.inspect.stats`. :meth:`Report.recommend` picks per layer the narrowest
recipe that meets your thresholds, with the measured reason, and the fp16 loss scale.

Framework-free: :mod:`lowprec.torch` captures a PyTorch model's tensors and hands them
here; figures are in :mod:`lowprec.plot`.

>>> import numpy as np
>>> from lowprec import inspect
>>> g = np.array([1e-9, 1e-6, -0.0, 1.0], dtype=np.float32)
>>> row = inspect.report({"grad": g}, ["fp16"]).rows[0]
>>> row["zeros"], row["underflow"], row["subnormal"]
(1, 1, 1)
"""

from .recipes import DEFAULT_RECIPES, RECIPES, Recipe, get_recipe, list_recipes
from .recommend import Choice, Recommendation, recommend, settled_loss_scale
from .report import COLUMNS, Report, parse_name, report
from .stats import BlockStats, exponent_histogram

__all__ = [
    "COLUMNS",
    "DEFAULT_RECIPES",
    "RECIPES",
    "BlockStats",
    "Choice",
    "Recipe",
    "Recommendation",
    "Report",
    "exponent_histogram",
    "get_recipe",
    "list_recipes",
    "parse_name",
    "recommend",
    "report",
    "settled_loss_scale",
]
