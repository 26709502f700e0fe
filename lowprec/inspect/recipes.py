"""The recipes ``lowprec.inspect.report`` replays a tensor through, as named objects.

A :class:`Recipe` says how a tensor would be stored: a plain rounding to a format, fp16
under a loss scale, FP8 with one per-tensor scale (current or delayed), an OCP MX format
under one of its scale rules, or NVFP4. Every recipe calls lowprec's own quantizers
(:func:`lowprec.round_to`, :mod:`lowprec.scaling`, :mod:`lowprec.mx`,
:mod:`lowprec.nvfp4`); none rounds by itself.

>>> get_recipe("mxfp4_rceil").kind, get_recipe("mxfp4_rceil").scale_rule
('mx', 'rceil')
>>> get_recipe("fp7")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown recipe 'fp7'; valid recipes: fp16, bf16, ...
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import mx, nvfp4, scaling
from .._blocks import overflow_threshold
from ..formats import FloatFormat, get_format
from ..rounding import decode, round_to

__all__ = ["RECIPES", "DEFAULT_RECIPES", "Outcome", "Recipe", "get_recipe", "list_recipes"]


@dataclass(frozen=True)
class Recipe:
    """One way of storing a tensor.

    name:
        The recipe's name in reports (``"fp16"``, ``"fp8_e4m3_delayed"``, ``"mxfp4_rceil"``).
    kind:
        ``"cast"`` (plain rounding), ``"loss_scale"`` (fp16 after multiplying by a loss
        scale), ``"current"`` / ``"delayed"`` (one per-tensor FP8 scale, Transformer
        Engine's recipes), ``"mx"`` (OCP MX, a power-of-two scale per 32 values) or
        ``"nvfp4"`` (an E4M3 scale per 16 values and an FP32 tensor scale).
    fmt:
        The element format (``"fp16"``, ``"fp8_e4m3"``), or the MX format name for ``mx``.
    scale_rule:
        For ``mx``: ``floor`` (the spec's), ``ceil``, ``rceil`` or ``even``.
    description:
        One sentence for tables and ``lowprec inspect --list-recipes``.
    """

    name: str
    kind: str
    fmt: str
    description: str
    scale_rule: str = "floor"

    @property
    def element(self) -> FloatFormat:
        """The format the stored elements are in."""
        if self.kind == "mx":
            return mx.get_mx_format(self.fmt).element
        if self.kind == "nvfp4":
            return nvfp4.ELEMENT
        return get_format(self.fmt)

    @property
    def block_size(self) -> int | None:
        """Values per block scale (block recipes), else None."""
        return {"mx": 32, "nvfp4": 16}.get(self.kind)


class Outcome:
    """What a recipe did to one tensor.

    Either the values themselves (``q``, float64, after quantize + dequantize, and
    ``elements``, the stored element values before any scale, where subnormals are
    counted), or, for scaled recipes, the stored ``codes`` with the ``table`` of their
    values and the ``factor`` each is multiplied by (one number, or one per block of
    ``block_size`` along the last axis): then ``elements = table[codes]`` and
    ``q = elements * factor``, the very products the quantizers' ``dequantize`` forms.
    ``clip``: the smallest input magnitude that saturates, one number or one per block;
    ``bits``: storage bits per value; ``scale``: the per-tensor scale used (loss scale,
    FP8 scale, NVFP4 tensor scale), NaN when none; ``block_scales``: one per block.
    """

    def __init__(self, q: np.ndarray | None, elements: np.ndarray | None,
                 clip: np.ndarray | float, bits: float, scale: float = float("nan"),
                 block_scales: np.ndarray | None = None, *, codes: np.ndarray | None = None,
                 table: np.ndarray | None = None, factor: np.ndarray | float = 1.0,
                 block_size: int | None = None) -> None:
        self._q, self._e = q, elements
        self.clip, self.bits, self.scale, self.block_scales = clip, bits, scale, block_scales
        self.codes, self.table, self.block_size = codes, table, block_size
        self.factor = np.asarray(factor, dtype=np.float64).reshape(-1)

    @property
    def elements(self) -> np.ndarray:
        if self._e is None:
            assert self.codes is not None and self.table is not None
            self._e = self.table[self.codes]
        return self._e

    @property
    def q(self) -> np.ndarray:
        if self._q is None:
            e = self.elements
            if self.factor.size == 1:
                self._q = e * self.factor[0]
            else:  # one factor per block along the last axis
                bs = int(self.block_size or 1)
                e2 = e.reshape(-1, e.shape[-1]) if e.ndim else e.reshape(1, 1)
                per = self.factor.reshape(e2.shape[0], -1)
                cols = np.arange(e2.shape[1]) // bs
                with np.errstate(invalid="ignore"):
                    self._q = (e2 * per[:, cols]).reshape(e.shape)
        return self._q


_TABLES: dict[str, np.ndarray] = {}


def value_table(fmt: FloatFormat) -> np.ndarray:
    """The value of every code of a format of at most 8 bits, float64 (cached)."""
    t = _TABLES.get(fmt.name)
    if t is None:
        t = np.asarray(decode(np.arange(1 << fmt.width, dtype=np.uint32), fmt), np.float64)
        _TABLES[fmt.name] = t
    return t


def _plain(name: str, desc: str) -> Recipe:
    return Recipe(name, "cast", name, desc)


_LIST: list[Recipe] = [
    _plain("fp16", "IEEE half, rounded to nearest; overflow gives inf"),
    _plain("bf16", "bfloat16, rounded to nearest; fp32's range"),
    _plain("fp8_e4m3", "FP8 E4M3 without a scale; overflow gives NaN"),
    _plain("fp8_e5m2", "FP8 E5M2 without a scale; overflow gives inf"),
    _plain("fp6_e3m2", "FP6 E3M2 without a scale; saturates at 28"),
    _plain("fp6_e2m3", "FP6 E2M3 without a scale; saturates at 7.5"),
    _plain("fp4_e2m1", "FP4 E2M1 without a scale; saturates at 6"),
    Recipe("fp16_loss_scale", "loss_scale", "fp16",
           "fp16 after multiplying by the loss scale (given, or the one GradScaler settles on);"
           " only gradients are scaled"),
    Recipe("fp8_e4m3_current", "current", "fp8_e4m3",
           "E4M3 with one scale from this tensor's amax (current scaling), saturating"),
    Recipe("fp8_e5m2_current", "current", "fp8_e5m2",
           "E5M2 with one scale from this tensor's amax (current scaling), saturating"),
    Recipe("fp8_e4m3_delayed", "delayed", "fp8_e4m3",
           "E4M3 with the scale from earlier steps' amax (Transformer Engine delayed scaling)"),
    Recipe("fp8_e5m2_delayed", "delayed", "fp8_e5m2",
           "E5M2 with the scale from earlier steps' amax (Transformer Engine delayed scaling)"),
]
for _mxf in mx.MX_FORMATS:
    if _mxf == "mxint8":
        continue
    for _rule in mx.SCALE_RULES:
        _LIST.append(Recipe(_mxf if _rule == "floor" else f"{_mxf}_{_rule}", "mx", _mxf,
                            f"OCP {_mxf.upper()}, blocks of 32, scale rule {_rule!r}", _rule))
_LIST.append(Recipe("nvfp4", "nvfp4", "nvfp4",
                    "NVFP4: E2M1, an E4M3 scale per 16 values, an FP32 tensor scale"))

#: Every recipe, by name.
RECIPES: dict[str, Recipe] = {r.name: r for r in _LIST}

#: What :func:`lowprec.inspect.report` runs when no recipes are given: every format once
#: (MX under the spec's floor rule and the GPUs' rceil rule).
DEFAULT_RECIPES: tuple[str, ...] = (
    "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp16_loss_scale", "fp8_e4m3_current",
    "fp8_e5m2_current", "fp8_e4m3_delayed", "fp8_e5m2_delayed", "mxfp8_e4m3",
    "mxfp8_e4m3_rceil", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxfp4_rceil", "nvfp4",
)


def list_recipes() -> dict[str, str]:
    """Recipe names and their one-line descriptions.

    >>> list_recipes()["nvfp4"]
    'NVFP4: E2M1, an E4M3 scale per 16 values, an FP32 tensor scale'
    """
    return {r.name: r.description for r in _LIST}


def get_recipe(recipe: Recipe | str) -> Recipe:
    """A recipe by name (or a :class:`Recipe`, returned unchanged); unknown names raise a
    ValueError that lists the valid ones.

    >>> get_recipe("fp8_e4m3_delayed").kind
    'delayed'
    """
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str) and recipe.strip().lower() in RECIPES:
        return RECIPES[recipe.strip().lower()]
    raise ValueError(f"unknown recipe {recipe!r}; valid recipes: {', '.join(RECIPES)}")


# ------------------------------------------------------------------ applying a recipe
def _scale_in_float32(x: np.ndarray, fmt: FloatFormat, scale: float) -> bool:
    """Whether ``x * scale`` may be formed in float32 and round to ``fmt`` as the exact
    float64 product does: float32 ``x``, ``scale`` a float32 power of two (the product is
    then exact unless it overflows, where both give inf, the format having one, or falls
    below 2**-126, far below half the format's smallest subnormal, where both round to a
    signed zero)."""
    mant, exp = math.frexp(scale)
    return (x.dtype == np.float32 and mant == 0.5 and -125 <= exp <= 128 and fmt.has_inf
            and fmt.smallest_subnormal >= 2.0 ** -120)


def _cast(x: np.ndarray, fmt: FloatFormat, scale: float = 1.0) -> Outcome:
    """Plain rounding of ``x * scale`` (scale a power of two: exact in float64)."""
    if scale == 1.0:
        work = x
    elif _scale_in_float32(x, fmt, scale):  # the same codes, a pass and 8 bytes less
        with np.errstate(over="ignore", invalid="ignore"):  # inf; signalling NaNs
            work = x * np.float32(scale)
    else:
        work = x.astype(np.float64) * scale
    nan = np.isnan(work)
    has_nan = bool(nan.any())
    if has_nan and not fmt.has_nan:  # fp6/fp4 have no NaN code: NaN stays NaN here
        work = np.where(nan, 0.0, work)
    e = np.asarray(round_to(work, fmt), dtype=np.float64)
    if has_nan and not fmt.has_nan:
        e[nan] = np.nan
    q = e if scale == 1.0 else e / scale
    clip = overflow_threshold(fmt) / scale if not (fmt.has_inf or fmt.has_nan) else np.inf
    return Outcome(q, e, clip, float(fmt.width), scale if scale != 1.0 else float("nan"))


def apply(recipe: Recipe, x: np.ndarray, *, loss_scale: float = 1.0,
          delayed: scaling.DelayedScaling | None = None, amax: float | None = None) -> Outcome:
    """Quantize and dequantize ``x`` (float32 or float64) as ``recipe`` says.

    ``loss_scale``: the scale of ``fp16_loss_scale``. ``delayed``: the
    :class:`~lowprec.scaling.DelayedScaling` state of this tensor's series (its scale is
    used, then this tensor's amax recorded and the scale updated). ``amax``: the amax of
    the *whole* tensor when ``x`` is a sample of it (capture): per-tensor and NVFP4 scales
    are computed from it, so each sampled value is quantized exactly as in the full tensor.
    """
    fmt = recipe.element
    if recipe.kind == "cast":
        return _cast(x, fmt)
    if recipe.kind == "loss_scale":
        return _cast(x, fmt, float(loss_scale))
    if recipe.kind in ("current", "delayed"):
        if recipe.kind == "delayed":
            ds = delayed if delayed is not None else scaling.DelayedScaling(fmt)
            s = ds.scale
            t = scaling.quantize_per_tensor(x, fmt, scale=s)
            a = float(np.max(np.abs(x))) if amax is None and x.size else (amax or 0.0)
            _record_amax(ds, a)
            ds.update()
        else:
            a = amax if amax is not None else (float(np.max(np.abs(x))) if x.size else 0.0)
            s = scaling.current_scale(a, fmt)
            t = scaling.quantize_per_tensor(x, fmt, scale=s)
        clip = overflow_threshold(fmt) / float(t.scale)
        return Outcome(None, None, clip, float(fmt.width), float(s), codes=t.codes,
                       table=value_table(fmt), factor=float(t.scale_inv))
    flat = x.reshape(1, -1) if x.ndim == 0 else x
    if recipe.kind == "mx":
        m = mx.quantize(flat, recipe.fmt, axis=-1, block_size=32, scale_rule=recipe.scale_rule)
        scales = m.scales
        return Outcome(None, None, scales.reshape(-1) * overflow_threshold(fmt),
                       m.bits_per_value, block_scales=scales, codes=m.codes.reshape(x.shape),
                       table=value_table(fmt), factor=scales, block_size=32)
    x2 = flat.reshape(-1, flat.shape[-1])
    rows = x2.shape[0]
    if amax is not None and np.isfinite(amax) and x2.size:
        # The tensor scale of the full tensor: add one row holding its amax, so that
        # nvfp4.quantize computes S_enc from exactly that amax (passing global_scale
        # would go through 1/(1/S_enc), not always S_enc in float32), then drop the row.
        # Blocks are per row, so no other block changes.
        extra = np.zeros((1, x2.shape[1]), dtype=np.float32)
        extra[0, 0] = abs(amax)
        x2 = np.concatenate([x2.astype(np.float32, copy=False), extra])
    n = nvfp4.quantize(x2, axis=-1)
    scales = n.scales[:rows]
    codes = n.codes[:rows]
    n_blocks = scales.size
    bits = 8.0 * (4 + n_blocks + n_blocks * 16 * 4 // 8) / x.size if x.size else float("nan")
    per_block = scales * np.float64(n.global_scale)  # as NVFP4Tensor.dequantize forms it
    return Outcome(None, None, per_block.reshape(-1) * overflow_threshold(fmt), bits,
                   float(n.global_scale), block_scales=scales, codes=codes.reshape(x.shape),
                   table=value_table(fmt), factor=per_block, block_size=16)


def _record_amax(ds: scaling.DelayedScaling, amax: float) -> None:
    """Record a (full-tensor) amax in the history as :meth:`DelayedScaling.quantize` does."""
    a = np.float32(amax)
    h = ds.amax_history
    h[0] = np.nan if (np.isnan(a) or np.isnan(h[0])) else max(h[0], a)


def uses(recipe: Recipe, what: str) -> bool:
    """Whether ``recipe`` needs ``what`` (``"loss_scale"`` or ``"history"``)."""
    return (what == "loss_scale" and recipe.kind == "loss_scale") or (
        what == "history" and recipe.kind == "delayed")


def describe_scale(recipe: Recipe, value: Any) -> str:
    """A short text for a per-tensor scale in tables (empty when there is none)."""
    v = float(value)
    if not np.isfinite(v):
        return ""
    exp = np.log2(v)
    return f"2^{int(exp)}" if exp == int(exp) else f"{v:.4g}"
