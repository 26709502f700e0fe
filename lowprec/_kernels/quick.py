"""The cold path's short cut: rounding by float64 arithmetic, a dozen numpy calls.

While a conversion's kernel is not compiled yet, :mod:`.vec` answers it by
following the scalar engine step by step over the array (about forty numpy
calls, a few hundred microseconds on a small array). A program that rounds
many small arrays (a training step does dozens) spends most of its first
minute there. This module gets the same values and codes from the value
instead of the bits, for the deterministic modes of every signed format with
subnormals:

1. ``a = |x|`` in float64 (exact for float32 and float64 input); ``E``, the
   exponent of its leading bit (``frexp``), and the quantum exponent
   ``q = max(E, emin) - m``;
2. ``t = a * 2**-q`` (exact: a power-of-two scaling that neither underflows
   nor overflows for these formats), rounded to an integer by the mode
   (``rint`` is ties-to-even; ``trunc``; ``ceil``/``floor`` by sign; ties away
   by comparing ``t - floor(t)``, exact, with 1/2), and scaled back (exact);
3. a rounded magnitude above the format's largest finite value overflows (the
   engine's two overflow tests say exactly this), a subnormal one is flushed
   under ``ftz``, and zeros, infinities and NaNs take the values the engine
   gives them, asked of :mod:`.vec` once per (format, mode, options).

Codes, where asked, are found by ``searchsorted`` in the table of the
format's finite magnitudes (formats of at most 16 bits). Stochastic rounding,
round-to-odd, exception flags, unsigned formats and formats without
subnormals are left to :mod:`.vec`. ``tests/test_quick.py`` holds both equal,
bit for bit, on every code's neighbourhood and its midpoints in every format,
mode and option.

>>> import numpy as np
>>> from lowprec.formats import get_format
>>> from lowprec._kernels.params import RNE, format_params
>>> out = np.empty(3, np.float32)
>>> values(format_params(get_format("fp8_e4m3")), np.array([0.1, 500.0, -1e-3], np.float32),
...        RNE, False, False, out)
True
>>> out.tolist()
[0.1015625, nan, -0.001953125]
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from . import vec
from .params import NAN_NEGZERO, RDOWN, RNA, RNE, RTZ, RUP

__all__ = ["MODES", "applies", "codes", "values"]

#: The modes served here.
MODES = (RNE, RTZ, RUP, RDOWN, RNA)


class _Rule(NamedTuple):
    """What a (format, mode, saturate, ftz) conversion does besides rounding."""

    emin: int
    m: int
    max_value: float  # the largest finite value
    min_normal: float  # 2**emin
    over: tuple[float, float]  # the value of an overflow: positive, negative
    inf: tuple[float, float]  # of +inf and -inf
    nan: float  # of a NaN
    nan_ok: bool  # False where a NaN has no code (vec raises)
    codes_over: tuple[int, int]
    codes_inf: tuple[int, int]
    code_nan: tuple[int, int]  # of a positive and a negative NaN
    mags: np.ndarray  # the finite magnitudes, increasing (their codes are their indices)


def applies(P: Any, mode: int) -> bool:
    """Whether :func:`values` and :func:`codes` serve ``P`` in ``mode``."""
    return mode in MODES and bool(P.subnormals) and P.sign_bit != 0 and P.m <= 51


@lru_cache(maxsize=256)
def _rule(P: Any, mode: int, saturate: bool, ftz: bool) -> _Rule:
    mags = vec.decode(P, np.arange(P.max_mag + 1)) if P.max_mag < (1 << 16) else np.empty(0)
    special = np.array([np.inf, -np.inf, np.nan, -np.nan], np.float64).view(np.uint64)
    sc, _, status = vec.convert(P, special, mode, saturate, ftz)
    sv = vec.decode(P, np.maximum(sc, 0))
    over = [vec.overflow_code(P, neg, mode, saturate) for neg in (False, True)]
    ov = vec.decode(P, np.array(over))
    return _Rule(P.emin, P.m, float(vec.decode(P, np.array([P.max_mag]))[0]),
                 float(np.ldexp(1.0, P.emin)), (float(ov[0]), float(ov[1])),
                 (float(sv[0]), float(sv[1])), float(sv[2]), not status[2:].any(),
                 (int(over[0]), int(over[1])), (int(sc[0]), int(sc[1])),
                 (int(sc[2]), int(sc[3])), mags)


def _round(P: Any, x: np.ndarray, mode: int, saturate: bool, ftz: bool
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, _Rule] | None:
    """(signed result before the special cases, its magnitude, overflow mask, sign
    mask, rule), or None where a NaN meets a format without NaN (vec raises)."""
    rule = _rule(P, mode, saturate, ftz)
    with np.errstate(invalid="ignore", over="ignore"):  # (signalling NaNs, huge values)
        xd = x.astype(np.float64, copy=False)
        neg = np.signbit(xd)
        a = np.abs(xd)
        e = np.frexp(a)[1]
        q = np.maximum(e - 1, rule.emin) - rule.m
        t = np.ldexp(a, -q)
        if mode == RNE:
            t = np.rint(t)
        elif mode == RTZ:
            t = np.trunc(t)
        elif mode == RNA:
            f = np.floor(t)
            t = f + (t - f >= 0.5)  # (floor(t + 0.5) is not exact: 0.5 - 2**-54 + 0.5 is 1)
        else:
            t = np.where(neg == (mode == RUP), np.floor(t), np.ceil(t))
        r = np.ldexp(t, q)
    if ftz:
        r[r < rule.min_normal] = 0.0
    over = r > rule.max_value
    if not rule.nan_ok and np.isnan(a).any():
        return None
    return r, a, over, neg, rule


def values(P: Any, x: np.ndarray, mode: int, saturate: bool, ftz: bool,
           out: np.ndarray) -> bool:
    """Write the values of ``x`` (float32 or float64, 1-D) rounded to ``P`` into
    ``out`` (the same length); False (nothing written) where this module does
    not serve the call or a NaN has no code (:mod:`.vec` then answers)."""
    if not applies(P, mode):
        return False
    found = _round(P, x, mode, saturate, ftz)
    if found is None:
        return False
    r, a, over, neg, rule = found
    res = np.copysign(r, np.where(neg, -1.0, 1.0))
    if P.nan_kind == NAN_NEGZERO:  # no negative zero: that code is the NaN
        res[r == 0.0] = 0.0
    if over.any():
        res[over] = np.where(neg[over], rule.over[1], rule.over[0])
    if not np.isfinite(a).all():
        inf = np.isinf(a)
        res[inf] = np.where(neg[inf], rule.inf[1], rule.inf[0])
        res[np.isnan(a)] = rule.nan
    out[:] = res
    return True


def codes(P: Any, x: np.ndarray, mode: int, saturate: bool, ftz: bool,
          out: np.ndarray) -> bool:
    """:func:`values`, writing codes (formats of at most 16 bits)."""
    if not applies(P, mode) or P.max_mag >= (1 << 16):
        return False
    found = _round(P, x, mode, saturate, ftz)
    if found is None:
        return False
    r, a, over, neg, rule = found
    c = np.searchsorted(rule.mags, r).astype(np.int64)
    if P.nan_kind == NAN_NEGZERO:
        c[neg & (c != 0)] |= P.sign_bit
    else:
        c[neg] |= P.sign_bit
    if over.any():
        c[over] = np.where(neg[over], rule.codes_over[1], rule.codes_over[0])
    if not np.isfinite(a).all():
        inf = np.isinf(a)
        c[inf] = np.where(neg[inf], rule.codes_inf[1], rule.codes_inf[0])
        nan = np.isnan(a)
        c[nan] = np.where(neg[nan], rule.code_nan[1], rule.code_nan[0])
    out[:] = c
    return True
