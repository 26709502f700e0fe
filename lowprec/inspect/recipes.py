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
ValueError: unknown scheme 'fp7'...
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import mx, nvfp4, scaling
from .._blocks import overflow_threshold
from ..formats import FloatFormat
from ..rounding import decode, round_to
from ..schemes import (
    BLOCK_VARIANT_KINDS,
    NVFP4_RECIPE_KINDS,
    SCHEMES,
    Scheme,
    get_scheme,
    list_schemes,
)

__all__ = ["RECIPES", "DEFAULT_RECIPES", "Outcome", "Recipe", "get_recipe", "list_recipes"]


#: An inspect recipe is a :class:`lowprec.schemes.Scheme` (the one vocabulary).
Recipe = Scheme


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


#: Every recipe, by name: :data:`lowprec.schemes.SCHEMES` (``NAME_sr`` too, through
#: :func:`get_recipe`).
RECIPES: dict[str, Scheme] = SCHEMES

#: What :func:`lowprec.inspect.report` runs when no recipes are given: every format once
#: (MX under the spec's floor rule and the GPUs' rceil rule).
DEFAULT_RECIPES: tuple[str, ...] = (
    "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp16_loss_scale", "fp8_e4m3_current",
    "fp8_e5m2_current", "fp8_e4m3_delayed", "fp8_e5m2_delayed", "mxfp8_e4m3",
    "mxfp8_e4m3_rceil", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxfp4_rceil", "nvfp4",
)


def list_recipes() -> dict[str, str]:
    """Recipe names and their one-line descriptions (:func:`lowprec.schemes.list_schemes`).

    >>> list_recipes()["nvfp4"]
    'NVFP4: E2M1, an E4M3 scale per 16 values, an FP32 tensor scale'
    """
    return list_schemes()


def get_recipe(recipe: Scheme | str) -> Scheme:
    """A recipe by name (:func:`lowprec.schemes.get_scheme`; a :class:`Scheme` is
    returned unchanged); unknown names raise a ValueError that lists the valid ones.

    >>> get_recipe("fp8_e4m3_delayed").kind
    'delayed'
    """
    return get_scheme(recipe)


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


def _cast(x: np.ndarray, fmt: FloatFormat, scale: float = 1.0, mode: str = "rne",
          rng: Any = None) -> Outcome:
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
    e = np.asarray(round_to(work, fmt, mode, rng=rng), dtype=np.float64)
    if has_nan and not fmt.has_nan:
        e[nan] = np.nan
    q = e if scale == 1.0 else e / scale
    clip = overflow_threshold(fmt) / scale if not (fmt.has_inf or fmt.has_nan) else np.inf
    return Outcome(q, e, clip, float(fmt.width), scale if scale != 1.0 else float("nan"))


def apply(recipe: Recipe, x: np.ndarray, *, loss_scale: float = 1.0,
          delayed: scaling.DelayedScaling | None = None, amax: float | None = None,
          rng: Any = None) -> Outcome:
    """Quantize and dequantize ``x`` (float32 or float64) as ``recipe`` says.

    ``loss_scale``: the scale of ``fp16_loss_scale``. ``delayed``: the
    :class:`~lowprec.scaling.DelayedScaling` state of this tensor's series (its scale is
    used, then this tensor's amax recorded and the scale updated). ``amax``: the amax of
    the *whole* tensor when ``x`` is a sample of it (capture): per-tensor and NVFP4 scales
    are computed from it, so each sampled value is quantized exactly as in the full tensor.
    ``rng``: the generator of stochastic-rounding recipes (``NAME_sr``).
    """
    mode = recipe.mode
    if mode != "stochastic":
        rng = None  # the quantizers take a generator only for stochastic rounding
    elif rng is None:
        rng = np.random.default_rng(0)
    fmt = recipe.element
    if recipe.kind == "cast":
        return _cast(x, fmt, 1.0, mode, rng)
    if recipe.kind == "loss_scale":
        return _cast(x, fmt, float(loss_scale), mode, rng)
    if recipe.kind in ("current", "delayed"):
        if recipe.kind == "delayed":
            ds = delayed if delayed is not None else scaling.DelayedScaling(fmt)
            s = ds.scale
            t = scaling.quantize_per_tensor(x, fmt, scale=s, mode=mode, rng=rng)
            a = float(np.max(np.abs(x))) if amax is None and x.size else (amax or 0.0)
            _record_amax(ds, a)
            ds.update()
        else:
            a = amax if amax is not None else (float(np.max(np.abs(x))) if x.size else 0.0)
            s = scaling.current_scale(a, fmt)
            t = scaling.quantize_per_tensor(x, fmt, scale=s, mode=mode, rng=rng)
        clip = overflow_threshold(fmt) / float(t.scale)
        return Outcome(None, None, clip, float(fmt.width), float(s), codes=t.codes,
                       table=value_table(fmt), factor=float(t.scale_inv))
    flat = x.reshape(1, -1) if x.ndim == 0 else x
    if recipe.kind in NVFP4_RECIPE_KINDS:
        return _nvfp4_recipe(recipe, flat, amax, rng)
    if recipe.kind == "mx":
        m = mx.quantize(flat, recipe.fmt, axis=-1, block_size=32, scale_rule=recipe.scale_rule,
                        mode=mode, rng=rng)
        scales = m.scales
        return Outcome(None, None, scales.reshape(-1) * overflow_threshold(fmt),
                       m.bits_per_value, block_scales=scales, codes=m.codes.reshape(x.shape),
                       table=value_table(fmt), factor=scales, block_size=32)
    # NVFP4 and its E2M1 block variants (block size, scale format, tensor scale or not)
    block, scale_format, tensor_scale = BLOCK_VARIANT_KINDS.get(recipe.kind, (16, "ue4m3", True))
    x2 = flat.reshape(-1, flat.shape[-1])
    rows = x2.shape[0]
    if tensor_scale and amax is not None and np.isfinite(amax) and x2.size:
        # The tensor scale of the full tensor: add one row holding its amax, so that
        # nvfp4.quantize computes S_enc from exactly that amax (passing global_scale
        # would go through 1/(1/S_enc), not always S_enc in float32), then drop the row.
        # Blocks are per row, so no other block changes.
        extra = np.zeros((1, x2.shape[1]), dtype=np.float32)
        extra[0, 0] = abs(amax)
        x2 = np.concatenate([x2.astype(np.float32, copy=False), extra])
    n = nvfp4.quantize(x2, axis=-1, block_size=block, mode=mode, rng=rng,
                       global_scale=None if tensor_scale else 1.0, scale_format=scale_format)
    scales = n.scales[:rows]
    codes = n.codes[:rows]
    n_blocks = scales.size
    head = 4 if tensor_scale else 0  # the FP32 tensor scale
    bits = (8.0 * (head + n_blocks + n_blocks * block * 4 // 8) / x.size if x.size
            else float("nan"))
    per_block = scales * np.float64(n.global_scale)  # as NVFP4Tensor.dequantize forms it
    return Outcome(None, None, per_block.reshape(-1) * overflow_threshold(fmt), bits,
                   float(n.global_scale) if tensor_scale else float("nan"), block_scales=scales,
                   codes=codes.reshape(x.shape), table=value_table(fmt), factor=per_block,
                   block_size=block)


def _nvfp4_recipe(recipe: Recipe, x: np.ndarray, amax: float | None, rng: Any) -> Outcome:
    """The NVFP4 training recipe's quantizers (:mod:`lowprec.recipes.nvfp4`), along the
    last axis. ``nvfp4_rht`` is measured in the tensor's own domain (the dequantized
    values rotated back, float64); its clipping happens in the rotated domain and is not
    counted, and its tensor scale comes from the rotated sample (``amax`` unused)."""
    from ..recipes.nvfp4 import quantize_along

    shape, rht, four = NVFP4_RECIPE_KINDS[recipe.kind]
    use = None if rht or amax is None or not np.isfinite(amax) else abs(float(amax))
    t, q = quantize_along(x, shape, recipe.mode, hadamard=rht, four_over_six=four,
                          rng=rng, rotate_back=True, global_amax=use)
    bits = 8.0 * t.nbytes / x.size if x.size else float("nan")
    per_block = t.scales * np.float64(t.global_scale)
    fmt = recipe.element
    if rht:
        return Outcome(q, value_table(fmt)[t.codes], np.inf, bits, float(t.global_scale),
                       block_scales=t.scales)
    return Outcome(None, None, per_block.reshape(-1) * overflow_threshold(fmt), bits,
                   float(t.global_scale), block_scales=t.scales, codes=t.codes,
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
