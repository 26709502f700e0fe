"""The one rounding engine: compiled scalar kernels that everything calls.

Every path from a real number to a format goes through :func:`round_pack`, the
way every SoftFloat operation ends in ``roundPackToF16``. Its input is an exact
binary number

    (-1)**sign * sig * 2**lsb_exp   (+ a sticky "something smaller" bit)

with ``sig`` an unsigned integer, and its output is the format's code plus
TestFloat-style exception flags. Conversions feed it the significand of a
float32/float64; arithmetic (``lowprec.arith``) feeds it exact integer results.

The kernels are plain scalar Python compiled by numba. Two fast paths sit on
top of the reference kernels and are tested equal to them: ``fast_kernel``
(scalar, float32/float64 bits in) and ``vec32_kernel`` (float32 in, written
branch-free so that LLVM vectorises it); stochastic rounding makes its random
words in the kernels from one seed per block (``sr_word``, SplitMix64).
Format parameters travel as a tuple of ints (see :func:`format_params`), so one
compiled kernel serves every format; the rounding mode is an int (see
:data:`MODES`).

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

# Rounding modes, as ints for the kernels. The public names live in rounding.py.
RNE, RNA, RTZ, RUP, RDOWN, ODD, STOCHASTIC = range(7)

# TestFloat/SoftFloat exception flag bits.
FLAG_INEXACT = 0x01
FLAG_UNDERFLOW = 0x02
FLAG_OVERFLOW = 0x04
FLAG_INFINITE = 0x08  # divide by zero
FLAG_INVALID = 0x10

# Status of a conversion that cannot produce a code (Python raises ValueError).
INVALID_NAN = 1  # NaN into a format without NaN
INVALID_NEGATIVE = 2  # negative value into an unsigned format without NaN

# NaN encodings (FloatFormat.nan) as ints.
NAN_IEEE, NAN_MAX, NAN_NEGZERO, NAN_NONE = range(4)
_NAN_KIND = {"ieee": NAN_IEEE, "max": NAN_MAX, "negzero": NAN_NEGZERO, "none": NAN_NONE}

# Index of each field in the params tuple.
P_M, P_EMIN, P_BIAS, P_MAXMAG, P_SIGNBIT, P_HASINF, P_NAN, P_SUBN, P_EBITS = range(9)


def format_params(fmt) -> tuple:
    """Pack a FloatFormat into the int tuple the kernels take."""
    return (
        fmt.mantissa_bits,
        fmt.emin,
        fmt.bias,
        fmt.max_code_magnitude,
        fmt.sign_mask,
        int(fmt.has_inf),
        _NAN_KIND[fmt.nan],
        int(fmt.has_subnormals),
        fmt.exponent_bits,
    )


_jit = njit(cache=True, nogil=True)


# --------------------------------------------------------------------- codes
@_jit
def nan_code(P, negative):
    """The canonical NaN of the format (quiet, sign of the input where it has one)."""
    m = P[P_M]
    kind = P[P_NAN]
    if kind == NAN_IEEE:
        ones = ((1 << P[P_EBITS]) - 1) << m
        quiet = (1 << (m - 1)) if m > 0 else 1
        return (P[P_SIGNBIT] if negative else 0) | ones | quiet
    if kind == NAN_MAX:
        return (P[P_SIGNBIT] if negative else 0) | (P[P_MAXMAG] + 1)
    if kind == NAN_NEGZERO:
        return P[P_SIGNBIT]
    return -1  # no NaN


@_jit
def inf_code(P, negative):
    return (P[P_SIGNBIT] if negative else 0) | (P[P_MAXMAG] + 1)


@_jit
def zero_code(P, negative):
    """Signed zero; +0 in formats without negative zero (fnuz, unsigned)."""
    if negative and P[P_NAN] != NAN_NEGZERO:
        return P[P_SIGNBIT]
    return 0


@_jit
def is_nan_code(P, code):
    sign = code & P[P_SIGNBIT]
    mag = code ^ sign
    kind = P[P_NAN]
    if kind == NAN_IEEE:
        return mag > P[P_MAXMAG] + 1
    if kind == NAN_MAX:
        return mag == P[P_MAXMAG] + 1
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
    m = P[P_M]
    sign = code & P[P_SIGNBIT]
    mag = code ^ sign
    if is_nan_code(P, code):
        return np.nan
    if P[P_HASINF] and mag == P[P_MAXMAG] + 1:
        return -np.inf if sign else np.inf
    e_field = mag >> m
    m_field = mag & ((1 << m) - 1)
    if e_field == 0 and P[P_SUBN]:
        value = float(m_field) * pow2(P[P_EMIN] - m)
    else:
        value = float(m_field + (1 << m)) * pow2(e_field - P[P_BIAS] - m)
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
    m = P[P_M]
    emin = P[P_EMIN]
    subn = P[P_SUBN]
    # 0. Unsigned formats: a negative number is invalid (NaN if there is one).
    if negative and P[P_SIGNBIT] == 0:
        c = nan_code(P, False)
        if c < 0:
            return 0, FLAG_INVALID, INVALID_NEGATIVE
        return c, FLAG_INVALID, 0

    # 1. Exponent of the leading bit, and the quantum 2**qe of the format there.
    nbits = 64 - _clz64(sig)
    e = lsb_exp + nbits - 1
    if e > P[P_EMIN] + ((P[P_MAXMAG] >> m) - (1 if subn else 0)):
        # e > emax: overflows in every mode (even truncation stays >= 2**e > max).
        return _overflow(P, negative, mode, saturate)
    if subn:
        qe = (e if e > emin else emin) - m
    else:
        if e < emin:  # below the smallest value of a format without zero (e8m0)
            return 0, FLAG_INEXACT | FLAG_UNDERFLOW, 0
        qe = e - m
    shift = qe - lsb_exp

    # 2. Split sig at the quantum: kept bits r, round bit, sticky bits.
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

    # 3. Decide, by mode.
    if inexact:
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
    if mag > P[P_MAXMAG]:
        return _overflow(P, negative, mode, saturate)
    is_sub = subn and mag < (1 << m)
    if is_sub and ftz:
        # Flush-to-zero of subnormal results.
        return zero_code(P, negative), FLAG_INEXACT | FLAG_UNDERFLOW, 0
    if inexact and subn and e < emin:
        # Tininess after rounding: would the result, rounded to full precision
        # with an unbounded exponent, still be below 2**emin?
        if e < emin - 1 or not _carries_to_next_binade(sig, lsb_exp, e, m, sticky, negative,
                                                      mode, r, is_sub):
            flags |= FLAG_UNDERFLOW
    code = mag | (P[P_SIGNBIT] if negative else 0)
    return code, flags, 0


@_jit
def _carries_to_next_binade(sig, lsb_exp, e, m, sticky, negative, mode, r_sub, is_sub):
    """For e == emin - 1: does rounding to p bits at binade e reach 2**emin?"""
    if mode == STOCHASTIC:
        return not is_sub  # judged on the actual result
    shift = (e - m) - lsb_exp
    if shift <= 0:
        return False
    if shift <= 63:
        r = sig >> shift
        round_bit = (sig >> (shift - 1)) & 1
        below = sig & ((np.int64(1) << (shift - 1)) - 1)
    else:
        r = 0
        round_bit = 0
        below = sig
    if sticky:
        below |= 1
    if (round_bit | below) == 0:
        return False
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
    return r == (1 << (m + 1))


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
    sign = P[P_SIGNBIT] if negative else 0
    if to_inf and not saturate:
        if P[P_HASINF]:
            return inf_code(P, negative), flags, 0
        c = nan_code(P, negative)
        if c >= 0:
            return c, flags, 0
    return sign | P[P_MAXMAG], flags, 0


@_jit
def _clz64(x):
    """Leading zeros of a positive int64 (binary search; numba has no portable clz)."""
    n = 0
    if x >> 32 == 0:
        n += 32
        x <<= 32
    if x >> 48 == 0:
        n += 16
        x <<= 16
    if x >> 56 == 0:
        n += 8
        x <<= 8
    if x >> 60 == 0:
        n += 4
        x <<= 4
    if x >> 62 == 0:
        n += 2
        x <<= 2
    if x >> 63 == 0:
        n += 1
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
            if negative and P[P_SIGNBIT] == 0:
                c = nan_code(P, False)
            # IEEE 754 (7.2): converting a signaling NaN (quiet bit, the
            # leading fraction bit, clear) is an invalid operation.
            signaling = (frac >> (frac_bits - 1)) == 0
            return c, FLAG_INVALID if signaling else 0, 0
        if negative and P[P_SIGNBIT] == 0:
            return round_pack(P, True, 1, 0, False, mode, saturate, ftz, rnd)
        if P[P_HASINF] and not saturate:
            return inf_code(P, negative != 0), 0, 0
        if P[P_NAN] != NAN_NONE and not saturate:
            return nan_code(P, negative != 0), FLAG_INVALID, 0
        return (P[P_SIGNBIT] if negative else 0) | P[P_MAXMAG], 0, 0
    # Zero.
    if exp_field == 0 and frac == 0:
        if P[P_SUBN]:
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


# ---------------------------------------------------------------- fast path
# The kernels above handle every case through round_pack and are the reference.
# ``fast_kernel`` is the same rounding, specialised for the common case: a
# float32 (or float64) input and a signed format with subnormals whose values
# all fit the input's type. It works on the input's bit pattern directly; any
# input it does not handle inline (inf, NaN, overflow, stochastic rounding of
# values far below the smallest subnormal) goes through ``convert_one``. The
# tests and ``scripts/sweep_float32.py`` hold it equal to ``convert_one``.
@njit(cache=True, nogil=True, inline="always")
def _round_bits(v, sh, s, mode, w):
    """v rounded at bit ``sh`` (its low ``sh`` bits cleared), branch-free per mode.

    Adding ``inc`` and clearing the low bits rounds up exactly when the dropped
    bits ``low`` call for it; e.g. for rne, inc = half - 1 + (last kept bit):
    ``low + inc`` reaches the next quantum iff low > half, or low == half and
    the kept part is odd. For stochastic, inc = mask - R with R uniform on
    [0, 2**sh) rounds up iff low > R, with probability low / 2**sh.
    """
    if sh <= 0:
        return v  # nothing to drop (e.g. fp32 from float32)
    mask = (np.int64(1) << sh) - 1
    if mode == RNE:
        inc = (mask >> 1) + ((v >> sh) & 1)
    elif mode == RNA:
        inc = (mask >> 1) + 1
    elif mode == RUP:
        inc = mask * (1 - s)
    elif mode == RDOWN:
        inc = mask * s
    elif mode == ODD:
        return (v & ~mask) | (np.int64((v & mask) != 0) << sh)
    elif mode == STOCHASTIC:
        inc = mask - np.int64(w >> np.uint64(64 - sh))
    else:  # RTZ
        inc = np.int64(0)
    return (v + inc) & ~mask


@_kernel
def fast_kernel(P, xbits, is64, mode, saturate, ftz, rnd, out_bits, out_vals, codes, want_codes):
    m = P[P_M]
    if is64:
        frac_bits, bias_in = 52, 1023
    else:
        frac_bits, bias_in = 23, 127
    exp_ones = ((np.int64(1) << (11 if is64 else 8)) - 1) << frac_bits
    emin_b = P[P_EMIN] + bias_in  # the format's smallest normal exponent, biased as the input
    sh_n = frac_bits - m  # bits dropped in the normal range
    # Largest finite value of the format, as input-type bits.
    max_field = P[P_MAXMAG] >> m
    max_mant = P[P_MAXMAG] & ((1 << m) - 1)
    max_bits = ((max_field - 1 + emin_b) << frac_bits) | (max_mant << sh_n)
    code_off = (emin_b - 1) << m  # code magnitude = (a >> sh_n) - code_off in the normal range
    sub_q = pow2(P[P_EMIN] - m)  # quantum of the subnormal range
    signbit_out = P[P_SIGNBIT]
    no_negzero = P[P_NAN] == NAN_NEGZERO
    use_rnd = rnd.shape[0] > 0
    for i in range(xbits.shape[0]):
        b = np.int64(xbits[i])
        if is64:
            s = (b >> 63) & 1
            a = b & 0x7FFFFFFFFFFFFFFF
        else:
            s = (b >> 31) & 1
            a = b & 0x7FFFFFFF
        w = rnd[i] if use_rnd else np.uint64(0)
        ef = a >> frac_bits
        # With no mantissa bits the last kept bit of the input is an exponent
        # bit, not the significand's (which is always 1): those formats take
        # the generic path, where ties round up and odd truncates.
        generic = a >= exp_ones or m == 0
        code = np.int64(0)
        if not generic:
            if ef >= emin_b:
                # Normal range of the format: round the input's bits at bit sh_n;
                # a carry out of the mantissa steps the exponent, as it should.
                a2 = _round_bits(a, sh_n, s, mode, w)
                if a2 > max_bits:
                    generic = True  # overflow: rare, let the reference decide
                else:
                    code = (a2 >> sh_n) - code_off
                    if want_codes == 0:
                        out_bits[i] = (b - a) | a2
            else:
                # Subnormal range of the format (or zero): round the significand
                # at the fixed quantum 2**(emin - m).
                sig = (a & ((np.int64(1) << frac_bits) - 1)) | (
                    (np.int64(1) << frac_bits) if ef != 0 else 0)
                sh = sh_n + emin_b - (ef if ef > 1 else 1)
                if sh <= 62:
                    r = _round_bits(sig, sh, s, mode, w) >> sh
                elif mode == RUP or mode == RDOWN or mode == ODD or mode == STOCHASTIC:
                    generic = True  # far below the smallest subnormal, but not to zero
                    r = np.int64(0)
                else:
                    r = np.int64(0)  # below half the smallest subnormal
                if not generic:
                    if ftz and r < (np.int64(1) << m):
                        r = 0
                    code = r
                    if want_codes == 0:
                        v = float(r) * sub_q
                        if s != 0 and not (no_negzero and r == 0):
                            v = -v
                        out_vals[i] = v
        if generic:
            c, f, st = convert_one(P, b, is64, mode, saturate, ftz, w)
            if st != 0:
                return i, st
            if want_codes:
                codes[i] = c
            else:
                out_vals[i] = decode_one(P, c)
        elif want_codes:
            if s != 0 and not (no_negzero and code == 0):
                code |= signbit_out
            codes[i] = code
    return -1, 0


# -------------------------------------------------------- stochastic words
# Stochastic rounding needs one uniform 64-bit word per element. Drawing them
# from numpy in the main thread (random_raw, ~3 ns a word) was the bottleneck,
# so the words are made inside the kernels, in parallel, from a counter-based
# generator: the input is cut into blocks of SR_BLOCK elements, block k gets
# one 64-bit seed s_k drawn from the user's numpy Generator (in order), and
# element j of the block gets
#
#     word(s_k, j) = mix64(s_k + (j + 1) * GOLDEN)
#
# which is exactly the j-th output of SplitMix64 started from state s_k
# (G. Steele, D. Lea, C. Flood, "Fast splittable pseudorandom number
# generators", OOPSLA 2014; the mixer is D. Stafford's "Mix13" variant, as in
# Java's SplittableRandom and S. Vigna's splitmix64.c). mix64 is a bijection of
# 64-bit words, SplitMix64 passes TestU01's BigCrush, and the result depends on
# the seed and the element index only, never on the number of threads.
SR_BLOCK = 4096
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@_jit
def sr_word(seed, j):
    """The ``j``-th stochastic-rounding word of a block seeded with ``seed``."""
    z = np.uint64(seed) + np.uint64(j + 1) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@_kernel
def sr_fill(seed, words, n):
    """words[j] = sr_word(seed, j) for j < n."""
    for j in range(n):
        words[j] = sr_word(seed, j)


@_kernel
def sr_expand(seeds, n):
    """The words of elements 0..n-1 of consecutive blocks seeded by ``seeds``:
    the same words the rounding kernels make, for code (like lowprec.arith's
    integer kernels) that takes one word per element."""
    words = np.empty(n, np.uint64)
    for j in range(n):
        words[j] = sr_word(seeds[j // SR_BLOCK], j % SR_BLOCK)
    return words


@_kernel
def stochastic_kernel(kind, P, xbits, is64, saturate, ftz, seeds, out_bits, out_vals, codes,
                      flags, want_flags):
    """Stochastic rounding of ``xbits`` (which starts on a block boundary) with
    the words of ``seeds`` (one per SR_BLOCK elements), a block at a time.

    ``kind`` picks the kernel that rounds each block: 0 fast_kernel to values,
    1 fast_kernel to codes, 2 encode_kernel, 3 round_kernel (into out_vals).
    Arrays a kind does not use may be empty. Returns like the other kernels.
    """
    n = xbits.shape[0]
    words = np.empty(SR_BLOCK, np.uint64)
    for k in range((n + SR_BLOCK - 1) // SR_BLOCK):
        a = k * SR_BLOCK
        b = min(a + SR_BLOCK, n)
        sr_fill(seeds[k], words, b - a)
        w = words[:b - a]
        if kind == 0:
            bad, st = fast_kernel(P, xbits[a:b], is64, STOCHASTIC, saturate, ftz, w,
                                  out_bits[a:b], out_vals[a:b], codes[:0], 0)
        elif kind == 1:
            bad, st = fast_kernel(P, xbits[a:b], is64, STOCHASTIC, saturate, ftz, w,
                                  out_bits[:0], out_vals[:0], codes[a:b], 1)
        elif kind == 2:
            bad, st = encode_kernel(P, xbits[a:b], is64, STOCHASTIC, saturate, ftz, w,
                                    codes[a:b], flags[a:b] if want_flags else flags,
                                    want_flags)
        else:
            bad, st = round_kernel(P, xbits[a:b], is64, STOCHASTIC, saturate, ftz, w,
                                   out_vals[a:b])
        if bad >= 0:
            return a + bad, st
    return -1, 0


# ------------------------------------------------- vectorised float32 path
# ``vec32_kernel`` is fast_kernel again, for the commonest case (float32 in,
# float32 values or codes out, a signed format with subnormals whose normal
# range starts inside float32's), written so that LLVM can vectorise it: the
# first pass computes every element without a branch or a call (both the
# normal-range and the subnormal-range candidate, then a select) and only
# counts the elements it cannot finish (inf, NaN, overflow, stochastic
# rounding far below the smallest subnormal); a second pass, run only when
# that count is non-zero, redoes those through convert_one. Stochastic words
# are made in the loop (sr_word), a block of SR_BLOCK elements per seed.
@njit(cache=True, nogil=True, inline="always")
def _vec32_one(P, b, mode, w, emin_b, sub_shift, stoch):
    """(magnitude bits of the float32 result, code magnitude, needs generic path).

    One rounding for both ranges: the 24-bit significand ``sig`` of the input
    is rounded at the format's quantum, ``sh`` bits up (``23 - m`` in the
    normal range, more below it), giving ``r`` quanta; the code magnitude is
    then ``(binade above emin) << m + r`` in either range, since a carry out
    of ``r`` steps the exponent field by itself.
    """
    m = P[P_M]
    a = b & 0x7FFFFFFF
    ef = a >> 23
    s = b >> 31
    sig = (a & 0x7FFFFF) | (np.int64(ef != 0) << 23)
    sh = 23 - m + max(emin_b - max(ef, 1), 0)
    # Shifts beyond 62 drop every bit of a 24-bit significand alike, except
    # for stochastic rounding, which the generic path then does exactly.
    shc = min(sh, 62)
    r = _round_bits(sig, shc, s, mode, w) >> shc
    code = (max(ef - emin_b, 0) << m) + r
    # float32 bits of the value of code: normal codes are the float32 bits
    # shifted; subnormal ones are float32 subnormals too when emin_b == 1 (bf16),
    # else float32(r) is exact and its exponent field moves by emin - m (no
    # float arithmetic on subnormals, slow on x86).
    bits = (code + ((emin_b - 1) << m)) << (23 - m)
    if sub_shift < 0 and code < (1 << m):
        bits = np.int64(np.float32(r).view(np.int32)) + ((P[P_EMIN] - m) << 23)
        bits = bits if r != 0 else np.int64(0)
    generic = (a >= 0x7F800000) | (code > P[P_MAXMAG]) | (stoch & (sh > 62))
    return bits, code, generic


@njit(cache=True, nogil=True, inline="always")
def _vec32_full_one(P, b, mode, w):
    """_vec32_one for formats with float32's exponent range (emin == -126: bf16,
    tf32): the float32 bits themselves round at bit 23 - m, float32 subnormals
    included (their quantum 2**-149 * 2**(23 - m) is the format's), and the
    code is the top bits of the result."""
    sh = 23 - P[P_M]
    a = b & 0x7FFFFFFF
    a2 = _round_bits(a, sh, b >> 31, mode, w)
    code = a2 >> sh
    return a2, code, (a >= 0x7F800000) | (code > P[P_MAXMAG])


@njit(cache=True, nogil=True, inline="always")
def _vec32_run(P, xbits, mode, seeds, out_bits, codes, want_codes, todo):
    """Pass 1 of vec32_kernel, for one constant ``mode``: every element,
    without branches or calls, so that LLVM vectorises the loops. Counts, per
    block, the elements left to :func:`vec32_fixup` in ``todo``."""
    emin_b = P[P_EMIN] + 127
    # >= 0: subnormal codes shift into float32 (subnormal) bits like normal ones.
    sub_shift = 23 - P[P_M] if emin_b == 1 else -1
    signbit_out = P[P_SIGNBIT]
    no_negzero = P[P_NAN] == NAN_NEGZERO
    # Formats with float32's exponent range (bf16, tf32) have a simpler loop.
    full = emin_b == 1 and not no_negzero
    stoch = mode == STOCHASTIC
    n = xbits.shape[0]
    total = 0
    # Loops run over block slices from 0, so that LLVM sees unit-stride access.
    for k in range((n + SR_BLOCK - 1) // SR_BLOCK):
        lo = k * SR_BLOCK
        hi = min(lo + SR_BLOCK, n)
        seed = seeds[k] if stoch else np.uint64(0)
        xs = xbits[lo:hi]
        count = 0
        if want_codes:
            cs = codes[lo:hi]
            if full:
                for j in range(hi - lo):
                    b = np.int64(xs[j])
                    w = sr_word(seed, j) if stoch else np.uint64(0)
                    bits, code, generic = _vec32_full_one(P, b, mode, w)
                    count += generic
                    cs[j] = code | (signbit_out if (b >> 31) != 0 else 0)
            else:
                for j in range(hi - lo):
                    b = np.int64(xs[j])
                    w = sr_word(seed, j) if stoch else np.uint64(0)
                    bits, code, generic = _vec32_one(P, b, mode, w, emin_b, sub_shift, stoch)
                    count += generic
                    neg = (b >> 31) != 0 and not (no_negzero and code == 0)
                    cs[j] = code | (signbit_out if neg else 0)
        else:
            os_ = out_bits[lo:hi]
            if full:
                for j in range(hi - lo):
                    b = np.int64(xs[j])
                    w = sr_word(seed, j) if stoch else np.uint64(0)
                    bits, code, generic = _vec32_full_one(P, b, mode, w)
                    count += generic
                    os_[j] = np.int32(bits | (b & np.int64(-0x80000000)))
            else:
                for j in range(hi - lo):
                    b = np.int64(xs[j])
                    w = sr_word(seed, j) if stoch else np.uint64(0)
                    bits, code, generic = _vec32_one(P, b, mode, w, emin_b, sub_shift, stoch)
                    count += generic
                    neg = (b >> 31) != 0 and not (no_negzero and bits == 0)
                    os_[j] = np.int32(bits | (np.int64(-0x80000000) if neg else 0))
        todo[k] = count
        total += count
    return total


@_kernel
def vec32_fixup(P, xbits, mode, saturate, seeds, out_bits, codes, want_codes, todo):
    """Pass 2 of vec32_kernel: the elements pass 1 left (inf, NaN, overflow,
    stochastic rounding far below the smallest subnormal), in the blocks that
    have some, through convert_one. Returns (first invalid index or -1, status)."""
    emin_b = P[P_EMIN] + 127
    sub_shift = 23 - P[P_M] if emin_b == 1 else -1
    stoch = mode == STOCHASTIC
    n = xbits.shape[0]
    for k in range(todo.shape[0]):
        if todo[k] == 0:
            continue
        lo = k * SR_BLOCK
        seed = seeds[k] if stoch else np.uint64(0)
        for i in range(lo, min(lo + SR_BLOCK, n)):
            b = np.int64(xbits[i])
            w = sr_word(seed, i - lo) if stoch else np.uint64(0)
            bits, code, generic = _vec32_one(P, b, mode, w, emin_b, sub_shift, stoch)
            if generic:
                c, f, st = convert_one(P, b, False, mode, saturate, False, w)
                if st != 0:
                    return i, st
                if want_codes:
                    codes[i] = c
                else:
                    out_bits[i] = np.float32(decode_one(P, c)).view(np.int32)
    return -1, 0


# Pass 1 kernels, one per rounding mode (compiled on first use), indexed by the
# mode int. Each takes (P, xbits, seeds, out_bits, codes, want_codes, todo).
@_kernel
def _vec32_rne(P, xbits, seeds, out_bits, codes, want_codes, todo):
    return _vec32_run(P, xbits, RNE, seeds, out_bits, codes, want_codes, todo)


@_kernel
def _vec32_rna(P, xbits, seeds, out_bits, codes, want_codes, todo):
    return _vec32_run(P, xbits, RNA, seeds, out_bits, codes, want_codes, todo)


@_kernel
def _vec32_rtz(P, xbits, seeds, out_bits, codes, want_codes, todo):
    return _vec32_run(P, xbits, RTZ, seeds, out_bits, codes, want_codes, todo)


@_kernel
def _vec32_rup(P, xbits, seeds, out_bits, codes, want_codes, todo):
    return _vec32_run(P, xbits, RUP, seeds, out_bits, codes, want_codes, todo)


@_kernel
def _vec32_rdown(P, xbits, seeds, out_bits, codes, want_codes, todo):
    return _vec32_run(P, xbits, RDOWN, seeds, out_bits, codes, want_codes, todo)


@_kernel
def _vec32_odd(P, xbits, seeds, out_bits, codes, want_codes, todo):
    return _vec32_run(P, xbits, ODD, seeds, out_bits, codes, want_codes, todo)


@_kernel
def _vec32_stochastic(P, xbits, seeds, out_bits, codes, want_codes, todo):
    return _vec32_run(P, xbits, STOCHASTIC, seeds, out_bits, codes, want_codes, todo)


VEC32_KERNELS = (_vec32_rne, _vec32_rna, _vec32_rtz, _vec32_rup, _vec32_rdown, _vec32_odd,
                 _vec32_stochastic)


def vec32_kernel(P, xbits, mode, saturate, seeds, out_bits, codes, want_codes):
    """Round float32 bits ``xbits`` (uint32) into ``out_bits`` (the int32 view
    of a float32 result) or ``codes``, the same as fast_kernel; ``seeds``: one
    per SR_BLOCK elements (stochastic only). Returns (first invalid index or
    -1, status). Both passes release the GIL."""
    todo = np.empty((xbits.shape[0] + SR_BLOCK - 1) // SR_BLOCK, np.int64)
    if VEC32_KERNELS[mode](P, xbits, seeds, out_bits, codes, want_codes, todo) == 0:
        return -1, 0
    return vec32_fixup(P, xbits, mode, saturate, seeds, out_bits, codes, want_codes, todo)
