"""Rounding float32 to the unsigned powers of two: OCP's E8M0 scale format and its kin.

An E8M0 code is an exponent alone: code c is 2**(c + emin), code all-ones is
NaN, and there is no zero, no sign and no infinity. Rounding |x| to a power
of two is rounding its float32 bits at bit 23 (the exponent field is what is
kept), or at bit 22 for float32's subnormals from 2**-127, the only ones E8M0
has: the smallest of them is E8M0's smallest value.

    a = [ exponent | f f f f ... f ]   ->   [ exponent + decision | 0 ... 0 ]

Every value is its own exponent's only value, so the implicit bit is the last
kept one and it is always 1: the nearest modes take a tie up (away from the
odd value below), round-to-odd and the downward modes truncate, upward modes
go up when anything was dropped, and stochastic rounding adds its word's bits
below the dropped ones as :mod:`.bits32_direct` does. Inputs below the smallest
value round to it (there is no zero to round to); zero, negative inputs and
NaN are NaN; overflow and infinity follow the mode and ``saturate``. Every
special result is asked of the reference engine (``special_codes`` and
``convert_one``), and the tests hold the kernels bit-equal to ``round_pack``
on every boundary (``tests/test_bits32.py``).

The loop is :mod:`.direct_loop`'s, with :mod:`.pow2_round`'s element function.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import bits32
from .bits32 import _code_bits, special_codes
from .direct_loop import POW2, make_kernel
from .direct_params import DIRECT_MODES, _f32_bits
from .params import format_params
from .pow2_round import Pow2Params
from .vec import convert_one

__all__ = ["KERNELS", "POW2_MODES", "kernel", "params_array", "supports"]

def supports(fmt: Any) -> bool:
    """Whether the kernel handles ``fmt``: unsigned, no mantissa bits, no
    subnormals, no infinity, NaN at the all-ones code, and values that are
    float32 normals or 2**-127.

    >>> from lowprec import get_format
    >>> supports(get_format("e8m0")), supports(get_format("fp8_e4m3"))
    (True, False)
    """
    return (not fmt.signed and fmt.mantissa_bits == 0 and not fmt.has_subnormals
            and not fmt.has_inf and fmt.nan == "max" and fmt.emin >= -127
            and fmt.emax <= 127)


def kernel_params(fmt: Any, mode: int, saturate: bool, ftz: bool) -> Pow2Params:
    """The kernel's parameters for ``fmt`` in ``mode``, the special results
    asked of the reference engine (and checked against the module's rules:
    zero and negative inputs are NaN, tiny ones the smallest value)."""
    P = format_params(fmt)
    specials = special_codes(fmt, mode, saturate, ftz)
    nan = specials["nan", 1]
    for bits, want in ((0, nan), (0x80000000, nan), (0xBF800000, nan), (1, 0)):
        code, _, status = convert_one(P, bits, False, mode, saturate, ftz)
        if (code, status) != (want, 0):
            raise AssertionError(f"{fmt.name}: the reference rounds float32 bits {bits:#x} to "
                                 f"{code:#x} (status {status}), not {want:#x} as pow2 assumes")
    return Pow2Params(
        min_bits=_f32_bits(2.0 ** fmt.emin),
        max_bits=_f32_bits(fmt.max),
        emin_biased=fmt.emin + 127,
        ovf_code=specials["ovf", 1],
        inf_code=specials["inf", 1],
        nan_code=nan,
        ovf_bits=_code_bits(P, specials["ovf", 1]),
        inf_bits=_code_bits(P, specials["inf", 1]),
    )


def params_array(fmt: Any, mode: int, saturate: bool, ftz: bool) -> np.ndarray:
    """:func:`kernel_params` as the (cached, read-only) uint32 array the kernels take."""
    return bits32.params_array(fmt, mode, saturate, ftz, kernel_params)


#: The modes the kernel has: all seven.
POW2_MODES = DIRECT_MODES


def _make(mode: int, codes: bool):
    """The kernel for one rounding ``mode``, writing codes (``codes``) or float32
    values: kernel(q, x, seeds, out) -> 0 (every input has a code); the loop
    is :func:`.direct_loop.make_kernel`'s, with :mod:`.pow2_round`'s element."""
    return make_kernel(POW2, mode, codes)


#: Kernels by (mode int, codes?).
KERNELS = {(mode, codes): _make(mode, codes) for mode in POW2_MODES for codes in (True, False)}


def kernel(fmt: Any, mode: int, codes: bool) -> Any:
    """The kernel of ``fmt`` (one :func:`supports`) in ``mode``, to codes or values."""
    return KERNELS[mode, codes]
