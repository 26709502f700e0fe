"""float64 into a small format in one rounding, through float32 rounded to odd.

Rounding to odd (truncate, then set the last bit if anything was dropped)
keeps the information every later rounding needs: a float64 rounded to odd at
float32's 24 bits, then rounded to a format of p <= 22 bits in any
deterministic mode, gives exactly the format's rounding of the float64
(Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
algorithms using rounding to odd", IEEE TC 2008: it needs p + 2 bits or more).
So float64 arrays take the branch-free float32 kernel (``bits32``) after one
vectorised pass, :func:`to_float32_odd`. The same holds below float32's normal
range where the format's quantum is at least 4x float32's (2**-147), and above
it: a float64 beyond float32's range becomes float32's largest value (odd),
which overflows every format the kernel takes, in the same direction.
Stochastic rounding needs every bit of the input and stays on the scalar path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from . import bits32


def supports(fmt: Any) -> bool:
    """Whether float64 input into ``fmt`` may take the round-to-odd route.

    >>> from lowprec import get_format
    >>> supports(get_format("bf16")), supports(get_format("tf32")), supports(get_format("fp32"))
    (True, True, False)
    """
    if not bits32.supports(fmt) or fmt.mantissa_bits > 21:
        return False
    return not fmt.has_subnormals or fmt.smallest_subnormal_exponent >= -147


@njit(cache=True, nogil=True)
def float32_odd(v):
    """The float32 bits (uint32) of float64 ``v`` rounded to odd.

    numpy's float32 conversion rounds to nearest; when that was inexact and
    landed on an even significand, one step of the bit pattern toward v gives
    the odd neighbour (patterns are ordered by magnitude: +1 is away from
    zero, -1 toward it; from infinity, -1 is float32's largest value). NaN and
    infinities pass unchanged. (A function of its own, compiled once for every
    caller; LLVM inlines it into their loops.)
    """
    f = np.float32(v)
    f_bits = np.int64(f.view(np.uint32))
    back = np.float64(f)
    fix = (back != v) & (v == v) & ((f_bits & 1) == 0)
    step = 1 if abs(back) < abs(v) else -1
    return np.uint32(f_bits + (step if fix else 0))


@njit(cache=True, nogil=True)
def to_float32_odd(x, out):
    """out[i] = :func:`float32_odd` of x[i] (float64), the bits of a float32."""
    for i in range(x.shape[0]):
        out[i] = float32_odd(x[i])
