"""Fast twins of the reference conversion kernels, tested equal to them.

``fast_kernel`` (float32/float64 bits in, scalar) and ``vec32_kernel`` (float32
in, written branch-free so that LLVM vectorises it) give the codes and values
of :func:`lowprec._kernels.engine.convert_one`. :mod:`lowprec._kernels.convert`
chooses between them and the reference.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .engine import convert_one, decode_one, pow2
from .params import (
    MODE_TABLE,
    NAN_NEGZERO,
    ODD,
    RDOWN,
    RNA,
    RNE,
    RUP,
    STOCHASTIC,
)
from .sr import SR_BLOCK, sr_keys, sr_step, sr_word, sr_word_at

_kernel = njit(cache=True, nogil=True)

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
    m = P.m
    if is64:
        frac_bits, bias_in = 52, 1023
    else:
        frac_bits, bias_in = 23, 127
    exp_ones = ((np.int64(1) << (11 if is64 else 8)) - 1) << frac_bits
    emin_b = P.emin + bias_in  # the format's smallest normal exponent, biased as the input
    sh_n = frac_bits - m  # bits dropped in the normal range
    # Largest finite value of the format, as input-type bits.
    max_field = P.max_mag >> m
    max_mant = P.max_mag & ((1 << m) - 1)
    max_bits = ((max_field - 1 + emin_b) << frac_bits) | (max_mant << sh_n)
    code_off = (emin_b - 1) << m  # code magnitude = (a >> sh_n) - code_off in the normal range
    sub_q = pow2(P.emin - m)  # quantum of the subnormal range
    signbit_out = P.sign_bit
    no_negzero = P.nan_kind == NAN_NEGZERO
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
    m = P.m
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
        bits = np.int64(np.float32(r).view(np.int32)) + ((P.emin - m) << 23)
        bits = bits if r != 0 else np.int64(0)
    generic = (a >= 0x7F800000) | (code > P.max_mag) | (stoch & (sh > 62))
    return bits, code, generic


@njit(cache=True, nogil=True, inline="always")
def _vec32_full_one(P, b, mode, w):
    """_vec32_one for formats with float32's exponent range (emin == -126: bf16,
    tf32): the float32 bits themselves round at bit 23 - m, float32 subnormals
    included (their quantum 2**-149 * 2**(23 - m) is the format's), and the
    code is the top bits of the result."""
    sh = 23 - P.m
    a = b & 0x7FFFFFFF
    a2 = _round_bits(a, sh, b >> 31, mode, w)
    code = a2 >> sh
    return a2, code, (a >= 0x7F800000) | (code > P.max_mag)


@njit(cache=True, nogil=True, inline="always")
def _vec32_run(P, xbits, mode, seeds, out_bits, codes, want_codes, todo):
    """Pass 1 of vec32_kernel, for one constant ``mode``: every element,
    without branches or calls, so that LLVM vectorises the loops. Counts, per
    block, the elements left to :func:`vec32_fixup` in ``todo``."""
    emin_b = P.emin + 127
    # >= 0: subnormal codes shift into float32 (subnormal) bits like normal ones.
    sub_shift = 23 - P.m if emin_b == 1 else -1
    signbit_out = P.sign_bit
    no_negzero = P.nan_kind == NAN_NEGZERO
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
                z, k1 = sr_keys(seed)  # word j is sr_word(seed, j): z steps by G32
                for j in range(hi - lo):
                    b = np.int64(xs[j])
                    z = sr_step(z)
                    w = sr_word_at(z, k1) if stoch else np.uint64(0)
                    bits, code, generic = _vec32_full_one(P, b, mode, w)
                    count += generic
                    cs[j] = code | (signbit_out if (b >> 31) != 0 else 0)
            else:
                z, k1 = sr_keys(seed)  # word j is sr_word(seed, j): z steps by G32
                for j in range(hi - lo):
                    b = np.int64(xs[j])
                    z = sr_step(z)
                    w = sr_word_at(z, k1) if stoch else np.uint64(0)
                    bits, code, generic = _vec32_one(P, b, mode, w, emin_b, sub_shift, stoch)
                    count += generic
                    neg = (b >> 31) != 0 and not (no_negzero and code == 0)
                    cs[j] = code | (signbit_out if neg else 0)
        else:
            os_ = out_bits[lo:hi]
            if full:
                z, k1 = sr_keys(seed)  # word j is sr_word(seed, j): z steps by G32
                for j in range(hi - lo):
                    b = np.int64(xs[j])
                    z = sr_step(z)
                    w = sr_word_at(z, k1) if stoch else np.uint64(0)
                    bits, code, generic = _vec32_full_one(P, b, mode, w)
                    count += generic
                    os_[j] = np.int32(bits | (b & np.int64(-0x80000000)))
            else:
                z, k1 = sr_keys(seed)  # word j is sr_word(seed, j): z steps by G32
                for j in range(hi - lo):
                    b = np.int64(xs[j])
                    z = sr_step(z)
                    w = sr_word_at(z, k1) if stoch else np.uint64(0)
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
    emin_b = P.emin + 127
    sub_shift = 23 - P.m if emin_b == 1 else -1
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


def _vec32_pass(mode: int):
    """Pass 1 of vec32_kernel compiled for one constant rounding ``mode`` (a
    closure constant to numba, so that each mode's loop is branch-free); it
    takes (P, xbits, seeds, out_bits, codes, want_codes, todo). Compiled on
    first use."""

    @_kernel
    def vec32_pass(P, xbits, seeds, out_bits, codes, want_codes, todo):
        return _vec32_run(P, xbits, mode, seeds, out_bits, codes, want_codes, todo)

    return vec32_pass


#: Pass 1 kernels by mode int.
VEC32_KERNELS = {code: _vec32_pass(code) for _, code, _ in MODE_TABLE}


def vec32_kernel(P, xbits, mode, saturate, seeds, out_bits, codes, want_codes):
    """Round float32 bits ``xbits`` (uint32) into ``out_bits`` (the int32 view
    of a float32 result) or ``codes``, the same as fast_kernel; ``seeds``: one
    per SR_BLOCK elements (stochastic only). Returns (first invalid index or
    -1, status). Both passes release the GIL."""
    todo = np.empty((xbits.shape[0] + SR_BLOCK - 1) // SR_BLOCK, np.int64)
    if VEC32_KERNELS[mode](P, xbits, seeds, out_bits, codes, want_codes, todo) == 0:
        return -1, 0
    return vec32_fixup(P, xbits, mode, saturate, seeds, out_bits, codes, want_codes, todo)
