"""Turning a :class:`~lowprec.train.policy.Quant` into a rounding function, and watching it.

:func:`make_rounder` gives an ``array -> array`` function (same shape and
dtype) that rounds with :func:`lowprec.round_to`, or quantizes and dequantizes
with a delayed per-tensor scale (:mod:`lowprec.scaling`) or MX block scales
(:mod:`lowprec.mx`) or NVFP4 scales (:mod:`lowprec.nvfp4`). Scaled quantizers keep
state (the amax history), so every tensor site in the network gets its own rounder.

:class:`SiteStats` counts what a gradient rounding did: values that were
non-zero before and zero after (underflow), that became subnormal, and that
overflowed to inf/NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import mx, nvfp4, scaling
from ..formats import get_format
from ..rounding import round_to
from ..schemes import BLOCK_VARIANT_KINDS, NVFP4_RECIPE_KINDS
from .policy import Quant

__all__ = ["Rounder", "SiteStats", "make_rounder"]

Rounder = Callable[[np.ndarray], np.ndarray]

def make_rounder(q: Quant, rng: np.random.Generator, axis: int = -1, *,
                 rotated: bool = False) -> Rounder:
    """A function rounding arrays as ``q`` says (``axis``: the block axis).

    ``rng`` feeds ``mode="stochastic"``; it is shared by all of a run's
    rounders, so a run is reproducible from its seed. The NVFP4 recipe's quantizers
    (:data:`lowprec.schemes.NVFP4_RECIPE_KINDS`) quantize along ``axis``; ``nvfp4_rht``
    gives the values rotated back (a tensor stored on its own), or with
    ``rotated=True`` the rotated ones (a GEMM operand whose partner is rotated alike:
    :mod:`lowprec.train.gemm`).
    """
    if q.scaling in NVFP4_RECIPE_KINDS:
        from ..recipes.nvfp4 import fake_quantize

        block_shape, rht, four = NVFP4_RECIPE_KINDS[q.scaling]
        rrng = rng if q.mode == "stochastic" else None

        def recipe_round(x: np.ndarray) -> np.ndarray:
            y = fake_quantize(x, block_shape, q.mode, axis=axis, hadamard=rht,
                              four_over_six=four, rng=rrng, rotate_back=not rotated)
            # float64 values of E2M1 x E4M3 x FP32 scales, rounded once to x's dtype
            return np.asarray(y, dtype=x.dtype)

        return recipe_round
    if q.scaling == "none":
        fmt = get_format(q.format)
        if q.mode == "stochastic":
            return lambda x: round_to(x, fmt, "stochastic", rng=rng)
        return lambda x: round_to(x, fmt, q.mode)
    # Only stochastic rounding draws from the generator (rng=None is the default).
    srng = rng if q.mode == "stochastic" else None
    if q.scaling == "current":
        def current(x: np.ndarray) -> np.ndarray:
            y = scaling.fake_quantize_per_tensor(x, q.format, mode=q.mode, rng=srng)
            return np.asarray(y, dtype=x.dtype)

        return current
    if q.scaling == "delayed":
        ds = scaling.DelayedScaling(q.format)

        def delayed(x: np.ndarray) -> np.ndarray:
            y = ds.fake_quantize(x, mode=q.mode, rng=srng)
            ds.update()
            return np.asarray(y, dtype=x.dtype)

        return delayed
    if q.scaling == "nvfp4":
        def nvfp4_round(x: np.ndarray) -> np.ndarray:
            t = nvfp4.quantize(x, axis=axis, block_size=16, mode=q.mode, rng=srng)
            return np.asarray(t.dequantize(), dtype=x.dtype)

        return nvfp4_round
    if q.scaling in BLOCK_VARIANT_KINDS:
        block, scale_format, tensor_scale = BLOCK_VARIANT_KINDS[q.scaling]

        def variant_round(x: np.ndarray) -> np.ndarray:
            t = nvfp4.quantize(x, axis=axis, block_size=block, mode=q.mode, rng=srng,
                               global_scale=None if tensor_scale else 1.0,
                               scale_format=scale_format)
            return np.asarray(t.dequantize(), dtype=x.dtype)

        return variant_round

    def mx_round(x: np.ndarray) -> np.ndarray:
        t = mx.quantize(x, q.format, axis=axis, block_size=32, scale_rule=q.scale_rule,
                        mode=q.mode, rng=srng)
        return np.asarray(t.dequantize(), dtype=x.dtype)

    return mx_round


def smallest_normal(q: Quant) -> float | None:
    """The subnormal threshold of an unscaled format (None for scaled ones)."""
    if q.scaling != "none":
        return None
    return float(get_format(q.format).smallest_normal)


@dataclass
class SiteStats:
    """Counts accumulated over one step at the gradient rounding sites of one layer."""

    nonzero: int = 0     # values non-zero before rounding
    underflow: int = 0   # ... of which zero after rounding
    subnormal: int = 0   # ... of which subnormal after rounding
    overflow: int = 0    # finite before, inf or NaN after
    has_subnormal: bool = True

    def record(self, before: np.ndarray, after: np.ndarray, tiny: float | None) -> None:
        # Rounding maps 0 to 0, so the values that underflowed are the zeros after
        # rounding minus the zeros before.
        zeros_before = before.size - int(np.count_nonzero(before))
        zeros_after = after.size - int(np.count_nonzero(after))
        self.nonzero += before.size - zeros_before
        self.underflow += zeros_after - zeros_before
        if not np.isfinite(after).all():
            self.overflow += int(np.count_nonzero(np.isfinite(before) & ~np.isfinite(after)))
        if tiny is None:
            self.has_subnormal = False
        else:  # |after| < tiny counts the zeros too
            self.subnormal += int(np.count_nonzero(np.abs(after) < tiny)) - zeros_after

    def fractions(self) -> tuple[float, float | None]:
        """(underflow fraction, subnormal fraction) of the non-zero values."""
        n = max(self.nonzero, 1)
        return self.underflow / n, (self.subnormal / n if self.has_subnormal else None)


def watched(rounder: Rounder, q: Quant, stats: Callable[[], SiteStats],
            sample: Callable[[np.ndarray], None] | None = None) -> Rounder:
    """``rounder`` that also records into ``stats()`` (the current step's counters)
    and hands the unrounded values to ``sample`` (for histograms)."""
    tiny = smallest_normal(q)

    def f(x: np.ndarray) -> np.ndarray:
        y = rounder(x)
        stats().record(x, y, tiny)
        if sample is not None:
            sample(x)
        return y

    return f
