"""The one rounding engine: compiled scalar kernels that everything calls.

Every path from a real number to a format goes through :func:`round_pack`, the
way every SoftFloat operation ends in ``roundPackToF16``. Its input is an exact
binary number

    (-1)**sign * sig * 2**lsb_exp   (+ a sticky "something smaller" bit)

with ``sig`` an unsigned integer, and its output is the format's code plus
TestFloat-style exception flags. Conversions feed it the significand of a
float32/float64; arithmetic (``lowprec.arith``) feeds it exact integer results.

The kernels are plain scalar Python compiled by numba, and this module is the
reference: the fast twins in ``fast.py`` (``fast_kernel``, ``vec32_kernel``)
are tested equal to it; stochastic rounding takes its random words from
``sr.py`` (a counter-based hash, one seed per block). A format travels as a
``FormatParams`` named tuple of ints (``params.py``), so one compiled kernel
serves every format; the rounding mode is an int (``params.MODE_TABLE``).

Rounding, in one picture. ``shift`` low bits of ``sig`` fall below the
format's quantum ``2**qe`` at this exponent::

        sig = [ kept bits ....... | R | S S S S ]
                                     ^ round bit (half a quantum)
                                         ^^^^^^^ sticky bits (OR-ed together)

    rne   up if R and (S or the last kept bit is 1)   (ties to even)
    rna   up if R                                      (ties away)
    rtz   never
    rup   up if (R or S) and positive
    rdown up if (R or S) and negative
    odd   set the last kept bit if (R or S)             (round to odd, "jamming")
    stoch up with probability (R S S S S) / 2**shift, from 64 random bits
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .params import (
    FLAG_INEXACT,
    FLAG_INVALID,
    FLAG_OVERFLOW,
    FLAG_UNDERFLOW,
    INVALID_NAN,
    INVALID_NEGATIVE,
    NAN_IEEE,
    NAN_MAX,
    NAN_NEGZERO,
    NAN_NONE,
    ODD,
    RDOWN,
    RNA,
    RNE,
    RUP,
    STOCHASTIC,
)

_jit = njit(cache=True, nogil=True)


# --------------------------------------------------------------------- codes
@_jit
def nan_code(P, negative):
    """The canonical NaN of the format (quiet, sign of the input where it has one)."""
    m = P.m
    kind = P.nan_kind
    if kind == NAN_IEEE:
        ones = ((1 << P.exp_bits) - 1) << m
        quiet = (1 << (m - 1)) if m > 0 else 1
        return (P.sign_bit if negative else 0) | ones | quiet
    if kind == NAN_MAX:
        return (P.sign_bit if negative else 0) | (P.max_mag + 1)
    if kind == NAN_NEGZERO:
        return P.sign_bit
    return -1  # no NaN


@_jit
def inf_code(P, negative):
    return (P.sign_bit if negative else 0) | (P.max_mag + 1)


@_jit
def zero_code(P, negative):
    """Signed zero; +0 in formats without negative zero (fnuz, unsigned)."""
    if negative and P.nan_kind != NAN_NEGZERO:
        return P.sign_bit
    return 0


@_jit
def is_nan_code(P, code):
    sign = code & P.sign_bit
    mag = code ^ sign
    kind = P.nan_kind
    if kind == NAN_IEEE:
        return mag > P.max_mag + 1
    if kind == NAN_MAX:
        return mag == P.max_mag + 1
    if kind == NAN_NEGZERO:
        return sign != 0 and mag == 0
    return False


# 2.0**e for every float64 exponent, -1074 <= e <= 1023 (a constant to the kernels).
_POW2 = np.ldexp(1.0, np.arange(-1074, 1024))


@_jit
def pow2(e):
    """2.0**e as a float64, for -1074 <= e <= 1023."""
    return _POW2[e + 1074]


@_jit
def decode_one(P, code):
    """Value of a code, as a float64 (exact: formats are checked to fit)."""
    m = P.m
    sign = code & P.sign_bit
    mag = code ^ sign
    if is_nan_code(P, code):
        return np.nan
    if P.has_inf and mag == P.max_mag + 1:
        return -np.inf if sign else np.inf
    e_field = mag >> m
    m_field = mag & ((1 << m) - 1)
    if e_field == 0 and P.subnormals:
        value = float(m_field) * pow2(P.emin - m)
    else:
        value = float(m_field + (1 << m)) * pow2(e_field - P.bias - m)
    return -value if sign else value


# ------------------------------------------------------------------- rounding
@_jit
def round_pack(P, negative, sig, lsb_exp, sticky, mode, saturate, ftz, rnd):
    """Round (-1)**negative * (sig + sticky*eps) * 2**lsb_exp into the format.

    ``sig`` is a non-zero unsigned int64 (< 2**62); ``sticky`` says the exact
    value is a little larger in magnitude than ``sig * 2**lsb_exp`` (by less
    than one unit in its last place, and, where the format is finer than that
    unit, by less than half the format's quantum: the sticky bit is treated as
    lying below every kept and round bit, so callers keep at least p + 2 bits
    in ``sig`` when it is set). ``rnd`` is a uniform 64-bit word, used only by
    stochastic rounding.

    Returns ``(code, flags, status)``; ``status`` is non-zero (and ``code``
    meaningless) when the value has no code in this format.
    """
    m = P.m
    emin = P.emin
    subn = P.subnormals
    # 0. Unsigned formats: a negative number is invalid (NaN if there is one).
    if negative and P.sign_bit == 0:
        c = nan_code(P, False)
        if c < 0:
            return 0, FLAG_INVALID, INVALID_NEGATIVE
        return c, FLAG_INVALID, 0

    # 1. Exponent of the leading bit, and the quantum 2**qe of the format there.
    nbits = 64 - _clz64(sig)
    e = lsb_exp + nbits - 1
    if e > P.emin + ((P.max_mag >> m) - (1 if subn else 0)):
        # e > emax: overflows in every mode (even truncation stays >= 2**e > max).
        return _overflow(P, negative, mode, saturate)
    if subn:
        qe = (e if e > emin else emin) - m
    else:
        if e < emin:  # below the smallest value of a format without zero (e8m0)
            return 0, FLAG_INEXACT | FLAG_UNDERFLOW, 0
        qe = e - m
    shift = qe - lsb_exp

    # 2-3. Round sig at the quantum, by mode: r quanta.
    r, inexact = round_at(sig, shift, sticky, negative, mode, rnd)

    flags = FLAG_INEXACT if inexact else 0
    # 4. Pack: the code magnitude is linear in r across binades, so a carry out
    #    of the significand (r == 2**(m+1)) steps the exponent field up by itself.
    if r == 0:
        if inexact:
            flags |= FLAG_UNDERFLOW
        return zero_code(P, negative), flags, 0
    if subn:
        mag = (((e if e > emin else emin) - emin) << m) + r
    else:
        mag = ((e - emin) << m) + r - (1 << m)
    if mag > P.max_mag:
        return _overflow(P, negative, mode, saturate)
    is_sub = subn and mag < (1 << m)
    if is_sub and ftz:
        # Flush-to-zero of subnormal results.
        return zero_code(P, negative), FLAG_INEXACT | FLAG_UNDERFLOW, 0
    if inexact and subn and e < emin:
        # Tininess after rounding: would the result, rounded to full precision
        # with an unbounded exponent, still be below 2**emin?
        if e < emin - 1 or not _carries_to_next_binade(sig, lsb_exp, e, m, sticky, negative,
                                                      mode, is_sub):
            flags |= FLAG_UNDERFLOW
    code = mag | (P.sign_bit if negative else 0)
    return code, flags, 0


@_jit
def round_at(sig, shift, sticky, negative, mode, rnd):
    """``(r, inexact)``: (sig + sticky*eps) * 2**-shift rounded to an integer r by ``mode``.

    The one "decide by mode" of the reference engine (the picture in the module
    docstring); ``rnd`` is the uniform 64-bit word of stochastic rounding.
    """
    # Split sig at the quantum: kept bits r, round bit, sticky bits.
    if shift <= 0:
        r = sig << (-shift)
        round_bit = 0
        below = 0
    elif shift <= 63:
        r = sig >> shift
        round_bit = (sig >> (shift - 1)) & 1
        below = sig & ((np.int64(1) << (shift - 1)) - 1)
    else:  # everything is below half a quantum
        r = 0
        round_bit = 0
        below = sig
    if sticky:
        below |= 1
    inexact = (round_bit | below) != 0
    if not inexact:
        return r, False
    if mode == RNE:
        r += round_bit & (1 if (below != 0 or (r & 1)) else 0)
    elif mode == RNA:
        r += round_bit
    elif mode == RUP:
        r += 0 if negative else 1
    elif mode == RDOWN:
        r += 1 if negative else 0
    elif mode == ODD:
        r |= 1
    elif mode == STOCHASTIC:
        # Up with probability frac = (sig mod 2**shift) / 2**shift: compare a
        # uniform 64-bit word with frac * 2**64. Exact for shift <= 64; beyond,
        # the threshold is rounded up to a whole 2**-64 (an error < 2**-64).
        rem = sig & ((np.int64(1) << shift) - 1) if shift <= 62 else sig
        if shift <= 64:
            thresh = np.uint64(rem) << np.uint64(64 - shift)
            if sticky and shift < 64:
                thresh += np.uint64(1)
        elif shift - 64 >= 63:
            thresh = np.uint64(1)
        else:
            lost = rem & ((np.int64(1) << (shift - 64)) - 1)
            thresh = np.uint64(rem >> (shift - 64)) + np.uint64(1 if (lost or sticky) else 0)
        if rnd < thresh:
            r += 1
    # RTZ: nothing
    return r, True


@_jit
def _carries_to_next_binade(sig, lsb_exp, e, m, sticky, negative, mode, is_sub):
    """For e == emin - 1: does rounding to p bits at binade e reach 2**emin?"""
    if mode == STOCHASTIC:
        return not is_sub  # judged on the actual result
    shift = (e - m) - lsb_exp
    if shift <= 0:
        return False
    r, inexact = round_at(sig, shift, sticky, negative, mode, np.uint64(0))
    return inexact and r == (1 << (m + 1))


@_jit
def _overflow(P, negative, mode, saturate):
    """Result of a value too large for the format, IEEE 754 style.

    Round-to-nearest (and stochastic) and the directed mode pointing away from
    zero go to infinity; truncation, round-to-odd and the directed mode pointing
    toward zero give the largest finite value. A format without infinity gives
    NaN instead (the ml_dtypes/CUDA non-saturating convention), and a format
    with neither saturates. ``saturate`` clamps to the largest finite value.
    """
    flags = FLAG_OVERFLOW | FLAG_INEXACT
    to_inf = (
        mode == RNE or mode == RNA or mode == STOCHASTIC
        or (mode == RUP and not negative) or (mode == RDOWN and negative)
    )
    sign = P.sign_bit if negative else 0
    if to_inf and not saturate:
        if P.has_inf:
            return inf_code(P, negative), flags, 0
        c = nan_code(P, negative)
        if c >= 0:
            return c, flags, 0
    return sign | P.max_mag, flags, 0


_CLZ_STEPS = (32, 16, 8, 4, 2, 1)


@_jit
def _clz64(x):
    """Leading zeros of a positive int64 (binary search; numba has no portable clz)."""
    n = 0
    for step in _CLZ_STEPS:  # are the top `step` bits zero? then count them, shift them out
        if x >> (64 - step) == 0:
            n += step
            x <<= step
    return n


# ------------------------------------------------------ from float32/float64
@_jit
def convert_one(P, bits, is64, mode, saturate, ftz, rnd):
    """Round one float32/float64 (given by its bit pattern) into the format.

    Returns ``(code, flags, status)`` like :func:`round_pack`.
    """
    if is64:
        negative = (bits >> 63) & 1
        exp_field = (bits >> 52) & 0x7FF
        frac = bits & 0xFFFFFFFFFFFFF
        exp_all_ones = 0x7FF
        frac_bits = 52
        bias = 1023
    else:
        negative = (bits >> 31) & 1
        exp_field = (bits >> 23) & 0xFF
        frac = bits & 0x7FFFFF
        exp_all_ones = 0xFF
        frac_bits = 23
        bias = 127
    # Infinity and NaN.
    if exp_field == exp_all_ones:
        if frac != 0:  # NaN
            c = nan_code(P, negative != 0)
            if c < 0:
                return 0, 0, INVALID_NAN
            if negative and P.sign_bit == 0:
                c = nan_code(P, False)
            # IEEE 754 (7.2): converting a signaling NaN (quiet bit, the
            # leading fraction bit, clear) is an invalid operation.
            signaling = (frac >> (frac_bits - 1)) == 0
            return c, FLAG_INVALID if signaling else 0, 0
        if negative and P.sign_bit == 0:
            return round_pack(P, True, 1, 0, False, mode, saturate, ftz, rnd)
        if P.has_inf and not saturate:
            return inf_code(P, negative != 0), 0, 0
        if P.nan_kind != NAN_NONE and not saturate:
            return nan_code(P, negative != 0), FLAG_INVALID, 0
        return (P.sign_bit if negative else 0) | P.max_mag, 0, 0
    # Zero.
    if exp_field == 0 and frac == 0:
        if P.subnormals:
            return zero_code(P, negative != 0), 0, 0
        return nan_code(P, False), FLAG_INVALID, 0  # a format without zero (e8m0)
    # Finite non-zero: x = sig * 2**lsb_exp exactly.
    if exp_field == 0:
        sig = frac
        lsb_exp = 1 - bias - frac_bits
    else:
        sig = frac | (np.int64(1) << frac_bits)
        lsb_exp = exp_field - bias - frac_bits
    return round_pack(P, negative != 0, np.int64(sig), lsb_exp, False, mode, saturate, ftz, rnd)


_kernel = njit(cache=True, nogil=True)


@_kernel
def encode_kernel(P, xbits, is64, mode, saturate, ftz, rnd, codes, flags, want_flags):
    """codes[i] = code of xbits[i] (float32 or float64 bits). Returns the index
    of the first invalid element and its status, or (-1, 0)."""
    use_rnd = rnd.shape[0] > 0
    for i in range(xbits.shape[0]):
        w = rnd[i] if use_rnd else np.uint64(0)
        c, f, st = convert_one(P, np.int64(xbits[i]), is64, mode, saturate, ftz, w)
        if st != 0:
            return i, st
        codes[i] = c
        if want_flags:
            flags[i] = f
    return -1, 0


@_kernel
def round_kernel(P, xbits, is64, mode, saturate, ftz, rnd, out):
    """out[i] = value of xbits[i] rounded to the format."""
    use_rnd = rnd.shape[0] > 0
    for i in range(xbits.shape[0]):
        w = rnd[i] if use_rnd else np.uint64(0)
        c, f, st = convert_one(P, np.int64(xbits[i]), is64, mode, saturate, ftz, w)
        if st != 0:
            return i, st
        out[i] = decode_one(P, c)
    return -1, 0


@_kernel
def decode_kernel(P, codes, out):
    for i in range(codes.shape[0]):
        out[i] = decode_one(P, np.int64(codes[i]))

