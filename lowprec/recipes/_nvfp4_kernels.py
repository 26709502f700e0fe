"""Compiled inner loops of :mod:`lowprec.recipes.nvfp4` (numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _kernels  # noqa: F401  (installs the kernel cache folder first)

__all__ = ["sr8_e2m1"]


@njit(cache=True, nogil=True)
def _sr8(v, rbits, out):  # pragma: no cover - compiled
    for i in range(v.shape[0]):
        x = np.float64(v[i])  # |x| <= 6 (clamped by the caller), never NaN
        a = abs(x)
        if a < 2.0:
            q = 0.5
        elif a < 4.0:
            q = 1.0
        else:
            q = 2.0
        k = np.floor(a / q)
        t = np.int64(np.floor((a - k * q) / q * 256.0))  # exact: 0..255
        if t + np.int64(rbits[i]) >= 256:
            k += 1.0
        m = k * q  # 0, .5, 1, 1.5, 2, 3, 4 or 6
        if m < 2.0:
            c = np.int64(m * 2.0)
        elif m < 4.0:
            c = np.int64(m) + 2
        elif m == 4.0:
            c = 6
        else:
            c = 7
        if np.signbit(v[i]):
            c += 8
        out[i] = c


def sr8_e2m1(v: np.ndarray, rbits: np.ndarray) -> np.ndarray:
    """E2M1 codes of ``v`` (float32, |v| <= 6) by stochastic rounding with one random byte
    per element: ``|v|`` between neighbours ``lo`` and ``lo + q`` rounds up iff
    ``rbits + floor(256 (|v| - lo) / q) >= 256``; the sign bit is ``v``'s (-0.0 and
    negatives that round to 0 give code 8)."""
    out = np.empty(v.shape[0], np.uint8)
    _sr8(np.ascontiguousarray(v, np.float32), np.ascontiguousarray(rbits, np.uint8), out)
    return out
