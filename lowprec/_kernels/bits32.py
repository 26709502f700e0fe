"""float32 in, every element branch-free: the fast path of ``round_to``/``encode``.

The reference engine (``round_pack``) rounds one exact number at a time, with a
branch per case. This kernel does the same rounding on float32 *bits*, all the
cases computed for every element and the right one picked by selects, so that
LLVM vectorises the loop and no element ever leaves it: overflow, saturation,
infinities and NaNs, subnormal results, flush-to-zero and stochastic rounding
of tiny values are all selects. Tests hold it bit-equal to ``round_pack``
(``tests/test_bits32.py``).

One element, in numbered steps (``x_`` names are fields of the float32 input)::

    float32:  [ s | x_exp: 8 | x_frac: 23 ]      value = x_sig * 2**(max(x_exp, 1) - 150)

    1. x_sig: the 24-bit significand (implicit bit set when x_exp > 0).
    2. shift: how many low bits of x_sig fall below the format's quantum:
       23 - m in the format's normal range, more below it (subnormals).
    3. r = x_sig rounded at bit ``shift`` (kept bits + the mode's decision),
       in quanta of the format:

           x_sig = [ kept bits ....... | R | S S S S ]   (round bit, sticky bits)

    4. code magnitude = (binade above emin) << m  +  r. It is linear across
       binades: a carry out of r steps the exponent field by itself.
    5. selects: overflow (magnitude > max), inf, NaN, flush-to-zero, sign.

Format facts (overflow codes per mode, the NaN and infinity codes, ...) are
worked out once per call by the reference engine itself (:func:`kernel_params`)
and passed in as a tuple of ints, so one compiled kernel per rounding mode
serves every format.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

from .engine import _overflow, convert_one, decode_one
from .params import ODD, RDOWN, RNA, RNE, RTZ, RUP, STOCHASTIC, format_params
from .sr import SR_BLOCK, sr_word


class Bits32Params(NamedTuple):
    """What the kernel needs to know about a format (and the mode's overflow rule).

    numba types a NamedTuple of ints as one tuple: one compiled kernel serves
    every format.
    """

    mantissa_bits: int  # m
    emin_biased: int  # the format's emin + 127: first float32 exponent field of its normal range
    max_mag: int  # largest finite code magnitude
    sign_bit: int  # the code's sign bit (0: unsigned)
    subnormals: int  # 1: exponent field 0 holds subnormals and zero
    no_neg_zero: int  # 1: fnuz (a negative zero result is +0)
    has_nan: int  # 1: NaN inputs have a code
    ftz_limit: int  # magnitudes below this flush to zero (0 when not flushing)
    sub_limit: int  # magnitudes below this are subnormals needing the float trick
    sub_exp_shift: int  # (emin - m) << 23: moves float32(r) to the subnormal's value
    value_offset: int  # normal values' float32 bits = (mag + value_offset) << (23 - m)
    zero_mag_bits: int  # float32 bits of magnitude 0 (2**-127 in e8m0, else 0)
    ovf_code_pos: int  # code of a positive overflow in this mode (inf, NaN or max)
    ovf_code_neg: int
    inf_code_pos: int  # code of +inf input
    inf_code_neg: int
    nan_code_pos: int  # code of a NaN input (when has_nan)
    nan_code_neg: int
    ovf_bits_pos: int  # the same results as float32 bits
    ovf_bits_neg: int
    inf_bits_pos: int
    inf_bits_neg: int


def supports(fmt: Any) -> bool:
    """Whether the kernel handles ``fmt`` (every registered format but fp32).

    It needs a format narrower than float32 whose values are float32 values:
    a signed format with subnormals whose normal range starts inside float32's
    (and, below it, whose subnormals are float32 normals, or float32's own
    subnormals, as in bf16), or a format without subnormals and mantissa bits
    (e8m0).

    >>> from lowprec import get_format
    >>> supports(get_format("fp4_e2m1")), supports(get_format("fp32"))
    (True, False)
    """
    m = fmt.mantissa_bits
    emin_b = fmt.emin + 127
    if m > 22 or fmt.emax > 127 or not fmt.fits_float32:
        return False
    if fmt.has_subnormals:
        return fmt.signed and emin_b >= 1 and (emin_b == 1 or fmt.emin - m >= -126)
    return m == 0 and emin_b >= 0


_QNAN_BITS = 0x7FC00000  # numpy's float32 NaN
_PARAMS: dict[tuple, np.ndarray] = {}


def params_array(fmt: Any, mode: int, saturate: bool, ftz: bool) -> np.ndarray:
    """:func:`kernel_params` as the int64 array the kernels take (cached, read-only).

    An array, not the NamedTuple: numba types an array argument in a fraction
    of the time it takes for a tuple, which matters for small arrays.
    """
    key = (fmt, mode, bool(saturate), bool(ftz))
    q = _PARAMS.get(key)
    if q is None:
        q = np.array(kernel_params(fmt, mode, saturate, ftz), dtype=np.int64)
        q.setflags(write=False)
        _PARAMS[key] = q
    return q


@njit(cache=True, nogil=True, inline="always")
def _unpack(q):
    """The kernels' view of the parameters array: a Bits32Params, fields by name."""
    return Bits32Params(q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10],
                        q[11], q[12], q[13], q[14], q[15], q[16], q[17], q[18], q[19], q[20],
                        q[21])


def _code_bits(P: tuple, code: int) -> int:
    """float32 bits of a code's value (NaN: the positive quiet NaN, as numpy's)."""
    value = np.float32(decode_one(P, code))
    return int(value.view(np.int32))


def kernel_params(fmt: Any, mode: int, saturate: bool, ftz: bool) -> Bits32Params:
    """The kernel's parameters for ``fmt`` in ``mode`` (an int of ``_engine``).

    The special results are asked of the reference engine, so the kernel and
    ``round_pack`` cannot disagree on them.
    """
    P = format_params(fmt)
    m = fmt.mantissa_bits
    emin_b = fmt.emin + 127
    subn = int(fmt.has_subnormals)
    specials = {}
    for name, pos_bits in (("inf", 0x7F800000), ("nan", _QNAN_BITS)):
        for sign in (1, -1):
            bits = pos_bits | (0x80000000 if sign < 0 else 0)
            code, _, status = convert_one(P, bits, False, mode, saturate, ftz,
                                                  np.uint64(0))
            specials[name, sign] = code if status == 0 else 0
    ovf = {sign: _overflow(P, sign < 0, mode, saturate)[0] for sign in (1, -1)}
    return Bits32Params(
        mantissa_bits=m,
        emin_biased=emin_b,
        max_mag=fmt.max_code_magnitude,
        sign_bit=fmt.sign_mask,
        subnormals=subn,
        no_neg_zero=int(fmt.nan == "negzero"),
        has_nan=int(fmt.has_nan),
        ftz_limit=(1 << m) if (ftz and subn) else 0,
        sub_limit=(1 << m) if (subn and emin_b > 1) else 0,
        sub_exp_shift=(fmt.emin - m) << 23,
        value_offset=(emin_b - subn) << m,
        zero_mag_bits=_code_bits(P, 0) if not subn else 0,
        ovf_code_pos=ovf[1],
        ovf_code_neg=ovf[-1],
        inf_code_pos=specials["inf", 1],
        inf_code_neg=specials["inf", -1],
        nan_code_pos=specials["nan", 1],
        nan_code_neg=specials["nan", -1],
        ovf_bits_pos=_code_bits(P, ovf[1]),
        ovf_bits_neg=_code_bits(P, ovf[-1]),
        inf_bits_pos=_code_bits(P, specials["inf", 1]),
        inf_bits_neg=_code_bits(P, specials["inf", -1]),
    )



@njit(cache=True, nogil=True, inline="always")
def _round_sig(x_sig, shift, s, mode, w):
    """x_sig rounded at bit ``shift``, in quanta: the kept bits plus the mode's
    decision, without a branch. ``mode`` is a compile-time constant.

    Shifts of 25 and more drop every bit of a 24-bit significand alike (the
    value is below half a quantum), except for stochastic rounding, whose
    probability x_sig / 2**shift is compared with the 64-bit word ``w``
    exactly as ``round_pack`` does, however far below the quantum.
    """
    sh = min(shift, 25)
    mask = (np.int64(1) << sh) - 1
    kept = x_sig >> sh
    low = x_sig & mask
    if mode == RNE:
        return (x_sig + (mask >> 1) + (kept & 1)) >> sh
    if mode == RNA:
        return (x_sig + (np.int64(1) << (sh - 1))) >> sh
    if mode == RUP:
        return (x_sig + mask * (1 - s)) >> sh
    if mode == RDOWN:
        return (x_sig + mask * s) >> sh
    if mode == ODD:
        return kept | np.int64(low != 0)
    if mode == STOCHASTIC:
        # Up iff w < x_low * 2**(64 - shift) (exact: the comparison of the
        # top `shift` bits of w with x_low); beyond 64, iff w < ceil(x_sig / 2**(shift - 64)).
        top = w >> np.uint64(64 - min(shift, 64))
        up_near = top < np.uint64(low)
        j = min(max(shift - 64, 0), 40)
        thresh = (x_sig >> j) + np.int64((x_sig & ((np.int64(1) << j) - 1)) != 0)
        up_far = w < np.uint64(thresh)
        up = up_far if shift > 64 else up_near
        return kept + np.int64(up)
    return kept  # RTZ


@njit(cache=True, nogil=True, inline="always")
def _one(Q, b, mode, w):
    """(code, float32 bits of its value, NaN without a code) of float32 bits ``b``."""
    m = Q.mantissa_bits
    emin_b = Q.emin_biased
    subn = Q.subnormals
    # 1. Fields of the input.
    s = b >> 31
    a = b & 0x7FFFFFFF
    x_exp = a >> 23
    x_frac = a & 0x7FFFFF
    # Formats without subnormals (e8m0) read a float32 subnormal >= 2**-127 as
    # the binade of x_exp = 0 (its significand shifted up); anything smaller is
    # below their smallest value.
    x_sig = x_frac | (np.int64(1) << 23) if x_exp != 0 else (x_frac if subn else x_frac << 1)
    below = (subn == 0) & ((x_exp < emin_b) | ((x_exp == 0) & (x_frac < (1 << 22))))
    # 2. Bits below the quantum.
    extra = max(emin_b - max(x_exp, 1), 0) if subn else 0
    shift = 23 - m + extra
    # 3. Round; 4. the code magnitude.
    r = _round_sig(x_sig, shift, s, mode, w)
    binade = max(x_exp - emin_b, 0)
    mag = (binade << m) + r - (0 if subn else (np.int64(1) << m))
    mag = 0 if below else mag
    mag = 0 if mag < Q.ftz_limit else mag  # flush to zero
    # 5. Selects: sign, overflow, specials.
    neg = (s != 0) & ((Q.no_neg_zero == 0) | (mag != 0))
    code = mag | (Q.sign_bit if neg else 0)
    over = mag > Q.max_mag
    code = (Q.ovf_code_neg if s else Q.ovf_code_pos) if over else code
    is_inf = a == 0x7F800000
    is_nan = a > 0x7F800000
    code = (Q.inf_code_neg if s else Q.inf_code_pos) if is_inf else code
    code = (Q.nan_code_neg if s else Q.nan_code_pos) if is_nan else code
    unsigned_nan = (Q.sign_bit == 0) & ((s != 0) | (a == 0))  # e8m0: negative or zero
    code = Q.nan_code_pos if unsigned_nan else code
    # The value: normal codes are the float32 bits shifted; subnormal ones are
    # float32 subnormals too when emin_b == 1 (bf16), else float32(r) is exact
    # and its exponent field moves by emin - m (no float arithmetic on
    # subnormals, which is slow on x86).
    bits = (mag + Q.value_offset) << (23 - m)
    sub_bits = np.int64(np.float32(mag).view(np.int32)) + Q.sub_exp_shift
    sub_bits = sub_bits if mag != 0 else 0
    bits = sub_bits if mag < Q.sub_limit else bits
    bits = Q.zero_mag_bits if (mag == 0) & (subn == 0) else bits
    bits = bits | (np.int64(1) << 31 if neg else 0)
    bits = (Q.ovf_bits_neg if s else Q.ovf_bits_pos) if over else bits
    bits = (Q.inf_bits_neg if s else Q.inf_bits_pos) if is_inf else bits
    bits = _QNAN_BITS if (is_nan | unsigned_nan) else bits
    return code, bits, is_nan & (Q.has_nan == 0)


@njit(cache=True, nogil=True, inline="always")
def _run(q, xbits, mode, seeds, out, want_codes):
    """Every element of ``xbits`` (uint32) into ``out`` (codes, or the int32
    view of float32 values), a block of SR_BLOCK elements per stochastic seed.
    Returns how many NaNs had no code (the caller raises)."""
    Q = _unpack(q)
    stoch = mode == STOCHASTIC
    n = xbits.shape[0]
    bad = 0
    for k in range((n + SR_BLOCK - 1) // SR_BLOCK):
        lo = k * SR_BLOCK
        hi = min(lo + SR_BLOCK, n)
        seed = seeds[k] if stoch else np.uint64(0)
        xs = xbits[lo:hi]
        os_ = out[lo:hi]
        if want_codes:
            for j in range(hi - lo):
                w = sr_word(seed, j) if stoch else np.uint64(0)
                code, bits, nan_bad = _one(Q, np.int64(xs[j]), mode, w)
                os_[j] = code
                bad += nan_bad
        else:
            for j in range(hi - lo):
                w = sr_word(seed, j) if stoch else np.uint64(0)
                code, bits, nan_bad = _one(Q, np.int64(xs[j]), mode, w)
                os_[j] = np.int32(np.uint32(bits))
                bad += nan_bad
    return bad


_kernel = njit(cache=True, nogil=True)


# One compiled kernel per rounding mode, indexed by the mode int (compiled on first use).
@_kernel
def _k_rne(q, xbits, seeds, out, want_codes):
    return _run(q, xbits, RNE, seeds, out, want_codes)


@_kernel
def _k_rna(q, xbits, seeds, out, want_codes):
    return _run(q, xbits, RNA, seeds, out, want_codes)


@_kernel
def _k_rtz(q, xbits, seeds, out, want_codes):
    return _run(q, xbits, RTZ, seeds, out, want_codes)


@_kernel
def _k_rup(q, xbits, seeds, out, want_codes):
    return _run(q, xbits, RUP, seeds, out, want_codes)


@_kernel
def _k_rdown(q, xbits, seeds, out, want_codes):
    return _run(q, xbits, RDOWN, seeds, out, want_codes)


@_kernel
def _k_odd(q, xbits, seeds, out, want_codes):
    return _run(q, xbits, ODD, seeds, out, want_codes)


@_kernel
def _k_stochastic(q, xbits, seeds, out, want_codes):
    return _run(q, xbits, STOCHASTIC, seeds, out, want_codes)


KERNELS = (_k_rne, _k_rna, _k_rtz, _k_rup, _k_rdown, _k_odd, _k_stochastic)


def round_bits32(q: np.ndarray, mode: int, xbits: np.ndarray, seeds: np.ndarray,
                 out: np.ndarray, want_codes: bool) -> int:
    """Round float32 bits ``xbits`` (uint32) into ``out`` (``q``: the
    :func:`params_array` of the same mode): codes when
    ``want_codes``, else the int32 view of float32 values. ``seeds``: one per
    SR_BLOCK elements (stochastic; else empty). Returns the number of NaNs that
    have no code in the format (the caller raises). Releases the GIL.

    >>> import numpy as np
    >>> from lowprec import get_format
    >>> q = params_array(get_format("fp4_e2m1"), RNE, False, False)
    >>> x = np.array([0.3, 2.6, 100.0, -np.inf], np.float32)
    >>> out = np.empty(4, np.uint8)
    >>> round_bits32(q, RNE, x.view(np.uint32), np.empty(0, np.uint64), out, True)
    0
    >>> [hex(c) for c in out]
    ['0x1', '0x5', '0x7', '0xf']
    """
    return KERNELS[mode](q, xbits, seeds, out, want_codes)
