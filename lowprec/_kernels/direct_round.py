"""One element of :mod:`.bits32_direct`'s kernels: the float32 bits of an input
rounded into the format, in every mode (the rounding of the magnitude bits, the
tiny inputs, the special results, the float32 addition of round-to-nearest-even
and the short route of ordinary inputs). Compiled inline into the kernels'
loop (:mod:`.direct_loop`); :mod:`.bits32_direct`'s docstring explains the method.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .direct_params import _INF, _QNAN, _unpack
from .params import ODD, RDOWN, RNA, RNE, RTZ, RUP, STOCHASTIC
from .u32 import U, shl, shr

__all__ = ["fpu_rounds_to_nearest", "ordinary_bounds", "ordinary_from"]


@njit(cache=True, nogil=True, inline="always")
def _round_bits(a, s, sh, mode, wh):
    """The magnitude bits ``a`` rounded at bit ``sh`` (1 <= sh <= 22; 23 too in
    the modes of :data:`_AT_BIT_23`) in ``mode``
    (a compile-time constant); ``s``: 1 for a negative input; ``wh``: the top
    half of the stochastic-rounding word (its other bits cannot matter here)."""
    if mode == STOCHASTIC:  # + R, R uniform below the quantum (:func:`_round_stochastic`)
        return shl(shr(U(a + shr(U(~wh), U(U(32) - sh))), sh), sh)
    if mode == RTZ:
        return shl(shr(a, sh), sh)
    if mode == RNA:  # + half a quantum
        return shl(shr(U(a + shl(U(1), U(sh - U(1)))), sh), sh)
    mask = U(shl(U(1), sh) - U(1))
    if mode == RNE:  # + half a quantum, less one unless the kept bits are odd
        return shl(shr(U(a + shr(mask, U(1)) + U(shr(a, sh) & U(1))), sh), sh)
    if mode == RUP:  # up unless negative
        return shl(shr(U(a + U(mask & U(s - U(1)))), sh), sh)
    if mode == RDOWN:  # up if negative
        return shl(shr(U(a + U(mask & U(U(0) - s))), sh), sh)
    # ODD: the sticky bit into the last kept bit
    kept = shl(shr(a, sh), sh)
    return U(kept | shl(min(U(a - kept), U(1)), sh))


@njit(cache=True, nogil=True, inline="always")
def _round_stochastic(a, F, wh, wl, exact):
    """(rounded magnitude bits, unsure) of the magnitude bits ``a`` rounded
    stochastically with the word ``w = wh * 2**32 + wl``, for every input of a
    format without float32's exponent range, tiny ones included: up iff
    ``w < V``, V the dropped part of |x| in units of its quantum, times 2**64.
    That is the rule of :mod:`.bits32` and ``round_pack``: below q, |x| goes up
    to q with probability |x| / q (as a multiple of 2**-64, rounded up).

    From q up, x drops s <= 23 bits of its 24-bit significand (s = 23 in
    [q, 2q)), whose value D decides: as D is an integer, ``w < V`` iff
    ``T < D``, T the word's top s bits, iff ``D + (2**s - 1 - T)`` carries
    into the kept bits. ``2**s - 1 - T`` is the top s bits of ``~wh``, so the
    rounding is |x| plus those bits, cut at bit s (:func:`_round_bits`): a
    carry steps the kept bits, or the exponent field, as in rup. ``wl``
    cannot matter.

    Below q, x goes up to q iff ``w < ceil(|x| / q * 2**64)``. ``f = |x| *
    2**32 / q`` is exact in float32 (a product by a power of two, below 2**32),
    so with ``T = floor(f)``: up if ``wh < T``, and not if ``wh > T``. If
    ``wh == T`` (``unsure``: once in 2**32 tiny inputs for a random word)
    ``wl`` decides; a zero input never goes up. The loops redo unsure
    elements with the whole word (``exact``, compile-time: the 64-bit
    comparison, with the bits of V beyond the word's 64 rounded up as
    :mod:`.bits32` does, in integers alone). Taking every ``wh == T`` as
    unsure, fractional f or not, keeps the rule exact whatever the processor
    does with float32 subnormal inputs (a denormals-are-zero mode reads them
    as 0: T = 0, and the redo decides).
    """
    if exact:
        x_exp = shr(a, U(23))
        s = U(F.sh_top - min(max(x_exp, U(1)), F.emin_biased))  # bits dropped of 24
        mask = U(shl(U(1), min(s, U(31))) - U(1))
        x_sig = U(U(a & U(0x7FFFFF)) | (U(0x800000) if x_exp != U(0) else U(0)))
        dropped = U(x_sig & mask)  # D
        # w < ceil(V) = ceil(D / 2**t) << k, t = s - 64 or k = 64 - s (> 0)
        w = (np.uint64(wh) << np.uint64(32)) | np.uint64(wl)
        t = min(U(max(s, U(64)) - U(64)), U(31))
        ceil = shr(U(dropped + U(shl(U(1), t) - U(1))), t)  # (the sum < 2**24 + 2**31)
        up = w < np.uint64(ceil) << np.uint64(U(U(64) - min(s, U(64))))
        kept = U(a & U(~mask))
        kept = U(kept + U(mask + U(1))) if up else kept  # (s <= 23) a carry steps the binade
        return ((F.q_bits if up else U(0)) if s > U(23) else kept), U(0)
    sh = U(F.sh_top - min(max(shr(a, U(23)), F.exp_lo), F.emin_biased))
    r = _round_bits(a, U(0), sh, STOCHASTIC, wh)
    f = np.float32(np.float32(U(a).view(np.float32) * U(F.scale_lo_bits).view(np.float32))
                   * U(F.scale_hi_bits).view(np.float32))
    t = U(f)  # (f < 2**32, truncated)
    tiny = a < F.q_bits
    r = (F.q_bits if wh < t else U(0)) if tiny else r
    return r, U(tiny & (wh == t) & (a != U(0)))


@njit(cache=True, nogil=True, inline="always")
def _round_tiny(a, s, F, mode):
    """The rounded magnitude of a tiny input in the deterministic modes: ``a``
    below 2q in rne and odd (0, q or 2q), below q in the modes of
    :data:`_AT_BIT_23` (0 or q)."""
    q = F.q_bits
    if mode == RNE:  # a tie below q goes to 0 (even); a tie above it to 2q (q is odd)
        t = q if a > F.half_q_bits else U(0)
        return F.two_q_bits if a >= F.one_half_q_bits else t
    if mode == ODD:  # q is odd: anything inexact below 2q lands there
        return q if a != U(0) else U(0)
    if mode == RNA:
        return q if a >= F.half_q_bits else U(0)
    if mode == RTZ:
        return U(0)
    away = (s == U(0)) if mode == RUP else (s != U(0))  # rounding away from zero
    return q if (a != U(0)) & away else U(0)


@njit(cache=True, nogil=True, inline="always")
def fpu_rounds_to_nearest(F):
    """Whether float32 additions round to nearest even and read subnormals as
    they are (no denormals-are-zero), asked of the processor on runtime values:
    1 + 3/4 ulp rounds up, 1 + 1/4 ulp down (no other rounding mode does both),
    and the smallest subnormal doubled is twice its bits."""
    one = U(F.one_bits).view(np.float32)
    up = np.float32(one + U(F.three_quarters_bits).view(np.float32)).view(np.uint32)
    down = np.float32(one + U(F.quarter_bits).view(np.float32)).view(np.uint32)
    tiny = U(F.tiny_bits).view(np.float32)
    twice = np.float32(tiny + tiny).view(np.uint32)
    return (up == F.one_up_bits) & (down == F.one_bits) & (twice == U(F.tiny_bits + F.tiny_bits))


@njit(cache=True, nogil=True, inline="always")
def _finish(F, r, b, a, s, codes):
    """(float32 bits, code) of the rounded magnitude ``r`` of float32 bits
    ``b`` (magnitude ``a``, sign bit ``s``) where ``r`` is a value of the
    format: the sign back on (fnuz: not on zero); the code, if ``codes``
    (compile-time; else 0), a shift in the normal range and value / q below.
    (Where ``r`` is special, :func:`_direct_one` selects its results instead.)"""
    bits = U(r | U(U(r + F.sign_keep) & U(b ^ a)))
    if not codes:
        return bits, U(0)
    mag = U(shr(r, U(U(23) - F.mantissa_bits)) - F.code_offset)
    sub = U(np.int32(U(r).view(np.float32) * U(F.inv_q_bits).view(np.float32)))
    mag = sub if r < F.sub_bits else mag
    code = U(mag | U(U(U(0) - s) & F.sign_bit))
    return bits, (U(0) if code == F.negzero_code else code)


@njit(cache=True, nogil=True, inline="always")
def _round_deterministic(F, a, s, mode):
    """The magnitude bits ``a`` (sign bit ``s``) rounded in a deterministic
    ``mode`` (compile-time) by the bit arithmetic: at the format's quantum,
    tiny inputs (below exp_lo's binade: 2q, or q in the modes of
    :data:`_AT_BIT_23`) by their comparisons (:func:`_round_tiny`)."""
    sh = U(F.sh_top - min(max(shr(a, U(23)), F.exp_lo), F.emin_biased))
    r = _round_bits(a, s, sh, mode, U(0))
    return _round_tiny(a, s, F, mode) if a < shl(F.exp_lo, U(23)) else r


@njit(cache=True, nogil=True, inline="always")
def _rne_by_addition(F, a):
    """The magnitude bits ``a`` rounded to nearest even by the processor's
    float32 addition: ``(|x| + C) - C``, C = 2**(clamped binade + 23 - m)
    (the module's docstring; the caller has checked :func:`fpu_rounds_to_nearest`)."""
    c = U(U(min(max(U(a & U(_INF)), F.rne_lo), F.rne_hi)) + F.rne_add).view(np.float32)
    return U(np.float32(np.float32(U(a).view(np.float32) + c) - c).view(np.uint32))


@njit(cache=True, nogil=True, inline="always")
def _direct_one(F, b, mode, wh, wl, full, fp, exact=False):
    """(full float32 bits of the rounded value, its code, unsure) of float32
    bits ``b``. ``wh``, ``wl``: the top and bottom halves of the
    stochastic-rounding word (``unsure``: 1 when ``wl`` decides, see
    :func:`_round_stochastic`; else 0; ``exact``, compile-time: ``wl`` is
    the word's bottom half, else 0).
    ``full`` (compile-time): the format has float32's exponent range (bf16,
    tf32), where every input, float32's subnormals included, rounds at the
    same bit and none is tiny. ``fp`` (compile-time, rne only): round by the
    processor's float32 addition (the caller has checked
    :func:`fpu_rounds_to_nearest` and ``F.rne_fp``).

    The kernels call one of its four routes directly (each kernel's constants
    pick it), so that numba, which copies a function's code into each caller
    before it prunes the branches a constant decides, copies one route and not
    four (a kernel compiles in about half the time)."""
    if full:
        return _direct_full(F, b, mode, wh, wl, full, fp, exact)
    if fp and mode == RNE:
        return _direct_fp(F, b, mode, wh, wl, full, fp, exact)
    if mode == STOCHASTIC:
        return _direct_sr(F, b, mode, wh, wl, full, fp, exact)
    return _direct_det(F, b, mode, wh, wl, full, fp, exact)


@njit(cache=True, nogil=True, inline="always")
def _direct_full(F, b, mode, wh, wl, full, fp, exact=False):
    """:func:`_direct_one` of a format with float32's exponent range."""
    a = U(b & U(0x7FFFFFFF))
    s = shr(b, U(31))
    return _special(F, _round_bits(a, s, U(U(23) - F.mantissa_bits), mode, wh), b, a, s, U(0))


@njit(cache=True, nogil=True, inline="always")
def _direct_fp(F, b, mode, wh, wl, full, fp, exact=False):
    """:func:`_direct_one` in rne by the float32 addition."""
    a = U(b & U(0x7FFFFFFF))
    return _special(F, _rne_by_addition(F, a), b, a, shr(b, U(31)), U(0))


@njit(cache=True, nogil=True, inline="always")
def _direct_sr(F, b, mode, wh, wl, full, fp, exact=False):
    """:func:`_direct_one` in stochastic rounding."""
    a = U(b & U(0x7FFFFFFF))
    r, unsure = _round_stochastic(a, F, wh, wl, exact)
    return _special(F, r, b, a, shr(b, U(31)), unsure)


@njit(cache=True, nogil=True, inline="always")
def _direct_det(F, b, mode, wh, wl, full, fp, exact=False):
    """:func:`_direct_one` in a deterministic mode, by the bit arithmetic."""
    a = U(b & U(0x7FFFFFFF))
    s = shr(b, U(31))
    return _special(F, _round_deterministic(F, a, s, mode), b, a, s, U(0))


@njit(cache=True, nogil=True, inline="always")
def _special(F, r, b, a, s, unsure):
    """The end of :func:`_direct_one`'s routes: the rounded magnitude ``r``
    flushed where it is below the flushing bound, then (bits, code, unsure)
    with the special results (overflow, infinity, NaN) selected."""
    neg = U(U(0) - s)  # all ones for a negative input
    r = U(0) if r < F.ftz_bits else r
    special = r > F.max_bits
    is_inf = a == U(_INF)
    is_nan = a > U(_INF)
    bits, code = _finish(F, r, b, a, s, True)  # then the specials
    sp = U(F.ovf_bits_pos ^ U(neg & F.ovf_bits_flip))
    sp = U(F.inf_bits_pos ^ U(neg & F.inf_bits_flip)) if is_inf else sp
    sp = U(_QNAN) if is_nan else sp
    bits = sp if special else bits
    cp = U(F.ovf_code_pos ^ U(neg & F.ovf_code_flip))
    cp = U(F.inf_code_pos ^ U(neg & F.inf_code_flip)) if is_inf else cp
    cp = U(F.nan_code_pos ^ U(neg & F.nan_code_flip)) if is_nan else cp
    code = cp if special else code
    return bits, code, unsure


@njit(cache=True, nogil=True, inline="always")
def ordinary_from(F, mode):
    """The float32 bits of the smallest ordinary input of ``mode``: from it up
    to the format's largest value ``F.max_bits`` (inclusive) an input is
    rounded by the short routes (:func:`_ordinary_fp` and its twins). Those inputs are not flushed (the
    flushing bound is on the grid, so no rounding of an input above it lands
    below it) and their results are not special (nor is the largest value,
    for the same reason). The deterministic modes take tiny inputs and zeros
    as well; stochastic rounding takes inputs from q up (below, its rule is
    the threshold's, :func:`_round_stochastic`)."""
    if mode == STOCHASTIC:
        return max(F.q_bits, F.ftz_bits)
    return F.ftz_bits


@njit(cache=True, nogil=True, inline="always")
def _ordinary_fp(F, b, mode, wh, fp, codes):
    """The short route of an ordinary input (:func:`ordinary_from`), in rne by the
    float32 addition: (float32 bits of the rounded value, its code) of float32 bits
    ``b``, exactly as :func:`_direct_one` gives them, in about half its instructions:
    no select of a special result, no flush, no NaN (``codes``, compile-time: whether
    the code is wanted; else it is 0). :func:`_ordinary_sr` and :func:`_ordinary_det`
    are the same in the other modes; a kernel's loop inlines the one of its mode."""
    a = U(b & U(0x7FFFFFFF))
    return _finish(F, _rne_by_addition(F, a), b, a, shr(b, U(31)), codes)


@njit(cache=True, nogil=True, inline="always")
def _ordinary_sr(F, b, mode, wh, fp, codes):
    """:func:`_ordinary_fp` in stochastic rounding (the inputs are not tiny:
    the shift needs no clamp from below)."""
    a = U(b & U(0x7FFFFFFF))
    s = shr(b, U(31))
    r = _round_bits(a, s, U(F.sh_top - min(shr(a, U(23)), F.emin_biased)), mode, wh)
    return _finish(F, r, b, a, s, codes)


@njit(cache=True, nogil=True, inline="always")
def _ordinary_det(F, b, mode, wh, fp, codes):
    """:func:`_ordinary_fp` in a deterministic mode."""
    a = U(b & U(0x7FFFFFFF))
    s = shr(b, U(31))
    return _finish(F, _round_deterministic(F, a, s, mode), b, a, s, codes)


@njit(cache=True, nogil=True)
def ordinary_bounds(q, mode):
    """(smallest, largest) ordinary float32 magnitude bits of the kernel of
    ``mode`` with the parameters ``q`` (:func:`params_array`): a piece of
    inputs all within them takes the kernel's short loop."""
    F = _unpack(q)
    return ordinary_from(F, mode), F.max_bits


@njit(cache=True, nogil=True, inline="always")
def _plain_one(F, b, mode, wh, wl, full, fp, exact=False):
    """:func:`_direct_one` for a :func:`plain` format (bf16, tf32 without
    saturation or flushing), where rounding the magnitude bits is all there
    is: a carry out of the largest value lands on infinity's bits, the
    overflow's result in each mode that can carry there (the others cannot);
    infinity rounds to itself; a NaN becomes numpy's NaN. No select but the
    NaN's, so the loop is about half as long."""
    a = U(b & U(0x7FFFFFFF))
    s = shr(b, U(31))
    sh = U(U(23) - F.mantissa_bits)
    r = _round_bits(a, s, sh, mode, wh)
    is_nan = a > U(_INF)
    bits = U(r | U(b ^ a))
    code = shr(bits, sh)
    code = U(F.nan_code_pos ^ U(U(U(0) - s) & F.nan_code_flip)) if is_nan else code
    return (U(_QNAN) if is_nan else bits), code, U(0)
