"""The reference engine in numpy: :func:`engine.convert_one` (so ``round_pack``)
and :func:`engine.decode_one` written over whole arrays, nothing compiled.

numba compiles a kernel on its first call in a process with an empty cache
(seconds each); these functions need no compiler, so they serve a first call
at once (:mod:`.route` decides when) while the compiled twin is made in the
background. They follow the scalar engine step by step, with a mask where the
engine has an ``if``: the same codes, flags and statuses bit for bit
(``tests/test_route.py`` holds them equal to the compiled reference), the
stochastic words included (:func:`sr_words`, the same words as
:func:`.sr.sr_expand`). Inputs are float32/float64 bit patterns, so every
significand has at most 53 bits and int64 arithmetic is exact.

>>> import numpy as np
>>> from lowprec.formats import get_format
>>> from lowprec._kernels.params import RNE, format_params
>>> P = format_params(get_format("fp8_e4m3"))
>>> bits = np.array([0.1, 500.0], np.float32).view(np.uint32)
>>> codes, flags, status = convert(P, bits, RNE, False, False)
>>> [hex(c) for c in codes], decode(P, codes).tolist()
(['0x1d', '0x7f'], [0.1015625, nan])
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
from .sr import SR_BLOCK

__all__ = ["CHUNK", "convert", "convert_one", "decode", "decode_one", "overflow_code",
           "round_pack", "sr_words"]

#: Elements per piece: the temporaries of a piece stay in the processor's caches.
CHUNK = 1 << 14
_I64 = np.int64
_U32 = np.uint32


# ------------------------------------------------------ stochastic rounding
def _mix32(x: np.ndarray) -> np.ndarray:
    """lowbias32 on uint32 arrays (numpy's uint32 products wrap, as the kernels')."""
    x = (x ^ (x >> _U32(16))) * _U32(0x7FEB352D)
    x = (x ^ (x >> _U32(15))) * _U32(0x846CA68B)
    return x ^ (x >> _U32(16))


def sr_words(seeds: np.ndarray, start: int, n: int) -> np.ndarray:
    """The stochastic-rounding words of elements ``start .. start+n-1`` of
    consecutive blocks seeded by ``seeds`` (:func:`.sr.sr_expand`'s words)."""
    i = np.arange(start, start + n, dtype=np.uint64)
    seed = np.asarray(seeds, np.uint64)[(i // np.uint64(SR_BLOCK)).astype(np.intp)]
    j = (i % np.uint64(SR_BLOCK)).astype(_U32)
    k0 = (seed & np.uint64(0xFFFFFFFF)).astype(_U32)
    k1 = (seed >> np.uint64(32)).astype(_U32)
    with np.errstate(over="ignore"):
        z = k0 + (j + _U32(1)) * _U32(0x9E3779B9)
        hi = _mix32(z ^ k1)
        lo = _mix32(k1 + hi)
    return (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)


# --------------------------------------------------------------------- codes
def _nan_code(P: Any, neg: np.ndarray) -> np.ndarray:
    """engine.nan_code for each sign in ``neg`` (-1: the format has no NaN)."""
    sign = np.where(neg, _I64(P.sign_bit), _I64(0))
    if P.nan_kind == NAN_IEEE:
        quiet = (1 << (P.m - 1)) if P.m > 0 else 1
        return sign | (((1 << P.exp_bits) - 1) << P.m) | quiet
    if P.nan_kind == NAN_MAX:
        return sign | (P.max_mag + 1)
    return np.full(neg.shape, P.sign_bit if P.nan_kind == NAN_NEGZERO else -1, _I64)


def _zero_code(P: Any, neg: np.ndarray) -> np.ndarray:
    return np.where(neg & (P.nan_kind != NAN_NEGZERO), _I64(P.sign_bit), _I64(0))


def _overflow(P: Any, neg: np.ndarray, mode: int, saturate: bool) -> np.ndarray:
    """engine._overflow's codes (its flags are OVERFLOW | INEXACT always)."""
    if mode in (RNE, RNA, STOCHASTIC):
        to_inf = np.ones(neg.shape, bool)
    elif mode == RUP:
        to_inf = ~neg
    elif mode == RDOWN:
        to_inf = neg.copy()
    else:
        to_inf = np.zeros(neg.shape, bool)
    sign = np.where(neg, _I64(P.sign_bit), _I64(0))
    code = sign | P.max_mag
    if not saturate:
        if P.has_inf:
            special = sign | (P.max_mag + 1)
        else:
            special = _nan_code(P, neg)
            to_inf &= special >= 0
        code = np.where(to_inf, special, code)
    return code


def _shift(v: np.ndarray, s: np.ndarray, left: bool = False) -> np.ndarray:
    """v >> s (or v << s) for shifts 0..63 given per element."""
    s = s.astype(_I64)
    return np.left_shift(v, s) if left else np.right_shift(v, s)


def _round_at(sig: np.ndarray, shift: np.ndarray, neg: np.ndarray, mode: int,
              rnd: np.ndarray | None, sticky: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """engine.round_at: (r, inexact)."""
    lo = shift <= 0
    hi = shift > 63
    s = np.clip(shift, 1, 63)
    r = np.where(lo, _shift(sig, np.clip(-shift, 0, 63), left=True),
                 np.where(hi, _I64(0), _shift(sig, s)))
    round_bit = np.where(lo | hi, _I64(0), _shift(sig, s - 1) & 1)
    below = np.where(lo, _I64(0), np.where(hi, sig, sig & (_shift(_I64(1), s - 1, True) - 1)))
    if sticky is not None:
        below = below | sticky
    inexact = (round_bit | below) != 0
    if mode == RNE:
        up = round_bit & ((below != 0) | ((r & 1) != 0))
    elif mode == RNA:
        up = round_bit
    elif mode == RUP:
        up = (~neg).astype(_I64)
    elif mode == RDOWN:
        up = neg.astype(_I64)
    elif mode == ODD:
        return np.where(inexact, r | 1, r), inexact
    elif mode == STOCHASTIC:
        assert rnd is not None
        rem = np.where(shift <= 62, sig & (_shift(_I64(1), np.clip(shift, 0, 62), True) - 1), sig)
        urem = rem.astype(np.uint64)
        t_low = np.left_shift(urem, np.clip(64 - shift, 0, 63).astype(np.uint64))
        if sticky is not None:
            t_low = t_low + ((sticky != 0) & (shift < 64)).astype(np.uint64)
        d = np.clip(shift - 64, 0, 62)
        lost = rem & (_shift(_I64(1), d, True) - 1)
        if sticky is not None:
            lost = lost | sticky
        t_high = np.right_shift(urem, d.astype(np.uint64)) + (lost != 0).astype(np.uint64)
        thresh = np.where(shift <= 64, t_low, np.where(shift - 64 >= 63, np.uint64(1), t_high))
        up = (rnd < thresh).astype(_I64)
    else:  # RTZ
        return r, inexact
    return np.where(inexact, r + up, r), inexact


def round_pack(P: Any, neg: np.ndarray, sig: np.ndarray, lsb: np.ndarray, mode: int,
               saturate: bool, ftz: bool, rnd: np.ndarray | None,
               sticky: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """engine.round_pack of arrays (``sig``: non-zero int64 below 2**62;
    ``sticky``: int64, non-zero where the value is a little larger):
    (code, flags, status)."""
    m, emin, subn = P.m, P.emin, bool(P.subnormals)
    n = sig.shape[0]
    code = np.zeros(n, _I64)
    flags = np.zeros(n, np.uint8)
    status = np.zeros(n, np.uint8)
    nbits = np.frexp(sig.astype(np.float64))[1].astype(_I64)  # exact below 2**53,
    nbits -= (_shift(sig, nbits - 1) == 0).astype(_I64)  # one too many where sig rounded up
    e = lsb + nbits - 1
    ebound = np.maximum(e, emin) if subn else e
    qe = ebound - m
    shift = qe - lsb
    r, inexact = _round_at(sig, shift, neg, mode, rnd, sticky)
    fl = np.where(inexact, np.uint8(FLAG_INEXACT), np.uint8(0))
    if subn:
        mag = ((ebound - emin) << m) + r
    else:
        mag = ((e - emin) << m) + r - (1 << m)
    is_sub = (mag < (1 << m)) if subn else np.zeros(n, bool)
    # the engine's branches, latest first, so that the earliest one wins
    code[:] = mag | np.where(neg, _I64(P.sign_bit), _I64(0))
    flags[:] = fl
    if subn:
        tiny = inexact & (e < emin)
        carries = np.zeros(n, bool)
        if mode == STOCHASTIC:
            carries = ~is_sub
        else:
            shift2 = (e - m) - lsb
            r2, inexact2 = _round_at(sig, shift2, neg, mode, None, sticky)
            carries = (shift2 > 0) & inexact2 & (r2 == (1 << (m + 1)))
        flags[tiny & ((e < emin - 1) | ~carries)] |= FLAG_UNDERFLOW
    if ftz:
        flushed = is_sub
        code[flushed] = _zero_code(P, neg[flushed])
        flags[flushed] = FLAG_INEXACT | FLAG_UNDERFLOW
    big = mag > P.max_mag
    zero = r == 0
    code[zero] = _zero_code(P, neg[zero])
    flags[zero] = np.where(inexact[zero], fl[zero] | FLAG_UNDERFLOW, fl[zero])
    over = (e > emin + ((P.max_mag >> m) - (1 if subn else 0))) | (big & ~zero)
    if not subn:
        under = e < emin
        code[under] = 0
        flags[under] = FLAG_INEXACT | FLAG_UNDERFLOW
        over &= ~under
    code[over] = _overflow(P, neg[over], mode, saturate)
    flags[over] = FLAG_OVERFLOW | FLAG_INEXACT
    if P.sign_bit == 0:  # unsigned: a negative number is invalid
        c = _nan_code(P, np.zeros(1, bool))[0]
        code[neg] = max(c, 0)
        flags[neg] = FLAG_INVALID
        if c < 0:
            status[neg] = INVALID_NEGATIVE
    return code, flags, status


def convert(P: Any, bits: np.ndarray, mode: int, saturate: bool, ftz: bool,
            rnd: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """engine.convert_one of every element of ``bits`` (float32 bits as uint32,
    float64 bits as uint64): ``(codes, flags, status)`` as int64, uint8, uint8
    arrays (status non-zero: no code, the engine's INVALID_*). ``rnd``: one
    uniform word per element (stochastic rounding)."""
    is64 = bits.dtype == np.uint64
    b = bits.astype(np.uint64)
    if is64:
        fb, bias, all_ones = 52, 1023, 0x7FF
    else:
        fb, bias, all_ones = 23, 127, 0xFF
    neg = (b >> np.uint64(63 if is64 else 31)) != 0
    ef = ((b >> np.uint64(fb)) & np.uint64(all_ones)).astype(_I64)
    frac = (b & np.uint64((1 << fb) - 1)).astype(_I64)
    n = b.shape[0]
    code = np.zeros(n, _I64)
    flags = np.zeros(n, np.uint8)
    status = np.zeros(n, np.uint8)
    special = ef == all_ones
    nan = special & (frac != 0)
    inf = special & (frac == 0)
    zero = (ef == 0) & (frac == 0)
    fin = ~(special | zero)
    if fin.any():
        sig = np.where(ef == 0, frac, frac | (1 << fb))[fin]
        lsb = np.where(ef == 0, 1 - bias - fb, ef - bias - fb)[fin]
        c, f, s = round_pack(P, neg[fin], sig, lsb, mode, saturate, ftz,
                              None if rnd is None else rnd[fin])
        code[fin], flags[fin], status[fin] = c, f, s
    if zero.any():
        if P.subnormals:
            code[zero] = _zero_code(P, neg[zero])
        else:  # a format without zero (e8m0)
            code[zero] = _nan_code(P, np.zeros(1, bool))[0]
            flags[zero] = FLAG_INVALID
    if inf.any():
        ni = neg[inf]
        if P.sign_bit == 0:
            c = _nan_code(P, np.zeros(1, bool))[0]
            ci = np.where(ni, max(c, 0), 0)
            fi = np.where(ni, np.uint8(FLAG_INVALID), np.uint8(0))
            si = np.where(ni & (c < 0), np.uint8(INVALID_NEGATIVE), np.uint8(0))
        else:
            ci = np.zeros(ni.shape, _I64)
            fi = np.zeros(ni.shape, np.uint8)
            si = np.zeros(ni.shape, np.uint8)
        pos = ~ni if P.sign_bit == 0 else np.ones(ni.shape, bool)
        sign = np.where(ni, _I64(P.sign_bit), _I64(0))
        if P.has_inf and not saturate:
            ci = np.where(pos, sign | (P.max_mag + 1), ci)
        elif P.nan_kind != NAN_NONE and not saturate:
            ci = np.where(pos, _nan_code(P, ni), ci)
            fi = np.where(pos, np.uint8(FLAG_INVALID), fi)
        else:
            ci = np.where(pos, sign | P.max_mag, ci)
        code[inf], flags[inf], status[inf] = ci, fi, si
    if nan.any():
        nn = neg[nan]
        c = _nan_code(P, nn)
        if P.sign_bit == 0:
            c = np.where(nn, _nan_code(P, np.zeros(1, bool))[0], c)
        signaling = (frac[nan] >> (fb - 1)) == 0
        code[nan] = np.maximum(c, 0)
        flags[nan] = np.where(signaling, np.uint8(FLAG_INVALID), np.uint8(0))
        status[nan] = np.where(c < 0, np.uint8(INVALID_NAN), np.uint8(0))
    return code, flags, status


def decode(P: Any, codes: np.ndarray) -> np.ndarray:
    """engine.decode_one of every code (float64 values)."""
    c = np.asarray(codes).astype(_I64)
    m = P.m
    sign = c & P.sign_bit
    mag = c ^ sign
    e_field = mag >> m
    m_field = mag & ((1 << m) - 1)
    if P.subnormals:
        sub = e_field == 0
    else:
        sub = np.zeros(c.shape, bool)
    with np.errstate(over="ignore"):  # the inf/NaN codes' fields, replaced below
        value = np.where(sub, np.ldexp(m_field.astype(np.float64), P.emin - m),
                         np.ldexp((m_field + (1 << m)).astype(np.float64),
                                  (e_field - P.bias - m).astype(np.int32)))
    if P.has_inf:
        value = np.where(mag == P.max_mag + 1, np.inf, value)
    value = np.where(sign != 0, -value, value)
    if P.nan_kind == NAN_IEEE:
        value = np.where(mag > P.max_mag + 1, np.nan, value)
    elif P.nan_kind == NAN_MAX:
        value = np.where(mag == P.max_mag + 1, np.nan, value)
    elif P.nan_kind == NAN_NEGZERO:
        value = np.where((sign != 0) & (mag == 0), np.nan, value)
    return value


# ------------------------------------------- one value, for Python callers
def convert_one(P: Any, bits: int, is64: bool, mode: int, saturate: bool, ftz: bool
                ) -> tuple[int, int, int]:
    """engine.convert_one of one float32/float64 bit pattern, with the random
    word 0 in stochastic rounding: ``(code, flags, status)``, compiling nothing."""
    code, flags, status = convert(P, np.array([bits], np.uint64 if is64 else np.uint32),
                                  mode, saturate, ftz, np.zeros(1, np.uint64))
    return int(code[0]), int(flags[0]), int(status[0])


def decode_one(P: Any, code: int) -> float:
    """engine.decode_one of one code."""
    return float(decode(P, np.array([code]))[0])


def overflow_code(P: Any, negative: bool, mode: int, saturate: bool) -> int:
    """The code of engine._overflow (a value too large for the format)."""
    return int(_overflow(P, np.array([negative]), mode, saturate)[0])
