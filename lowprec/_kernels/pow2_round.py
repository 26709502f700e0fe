"""One element of :mod:`.pow2`'s kernels: float32 bits rounded to a power of
two, in every mode, with the parameters it reads (:class:`Pow2Params`).
Compiled inline into the loop of :mod:`.direct_loop`; :mod:`.pow2`'s docstring
explains the method and makes the parameters.
"""

from __future__ import annotations

from typing import NamedTuple

from numba import njit

from .direct_params import _INF, _QNAN
from .direct_round import _round_bits
from .params import RNA, RNE, RUP, STOCHASTIC
from .u32 import U, shl, shr

__all__ = ["Pow2Params"]


class Pow2Params(NamedTuple):
    """What the kernel needs to know of a format, in float32 bits where it can."""

    min_bits: int  # the smallest value: results below it are it
    max_bits: int  # the largest: rounded magnitudes above it are special
    emin_biased: int  # emin + 127: a value's code is its exponent field less this
    ovf_code: int  # code of a (positive) overflow in this mode
    inf_code: int  # code of +inf
    nan_code: int  # code of NaN, zero and the negative inputs
    ovf_bits: int  # the same results as float32 bits (NaN: numpy's quiet NaN)
    inf_bits: int


@njit(cache=True, nogil=True, inline="always")
def _unpack(q):
    """The parameters array as a Pow2Params of uint32 fields."""
    return Pow2Params(U(q[0]), U(q[1]), U(q[2]), U(q[3]), U(q[4]), U(q[5]), U(q[6]), U(q[7]))


@njit(cache=True, nogil=True, inline="always")
def _pow2_one(F, b, mode, wh, wl, full, fp, exact=False):
    """(float32 bits of the rounded value, its code, 0) of float32 bits ``b``
    (``wh``: the top half of the stochastic-rounding word, all it needs;
    ``wl``, ``full``, ``fp`` and ``exact`` unused: the signature of
    ``direct_round._direct_one``'s, as the loop calls them)."""
    a = U(b & U(0x7FFFFFFF))
    sh = U(22) if a < U(0x00800000) else U(23)  # float32's subnormals: from 2**-127
    if mode == STOCHASTIC:  # up iff the word's top sh bits are below the dropped ones, iff
        # adding the top sh bits of ~wh carries (bits32_direct._round_stochastic)
        rounded = _round_bits(a, U(0), sh, STOCHASTIC, wh)
    else:
        mask = U(shl(U(1), sh) - U(1))
        dropped = U(a & mask)
        if mode == RNE or mode == RNA:  # a tie goes up: the value below is odd
            up = dropped > shr(mask, U(1))
        elif mode == RUP:
            up = dropped != U(0)
        else:  # RTZ, RDOWN, ODD: the kept bits (odd already)
            up = False
        kept = U(a & U(~mask))
        rounded = U(kept + U(mask + U(1))) if up else kept
    r = max(rounded, F.min_bits)
    special = r > F.max_bits
    nan = (a > U(_INF)) | (a == U(0)) | (b != a)  # NaN, zero, negative
    bits = F.ovf_bits if special else r
    bits = F.inf_bits if a == U(_INF) else bits
    bits = U(_QNAN) if nan else bits
    code = F.ovf_code if special else U(shr(r, U(23)) - F.emin_biased)
    code = F.inf_code if a == U(_INF) else code
    code = F.nan_code if nan else code
    return bits, code, U(0)
