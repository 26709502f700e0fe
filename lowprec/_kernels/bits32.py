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

from .params import ODD, RDOWN, RNA, RNE, RTZ, RUP, STOCHASTIC, format_params
from .sr import SR_BLOCK, sr_keys, sr_step, sr_word_at
from .u32 import U, shl, shr
from .vec import convert_one, decode_one, overflow_code


class Bits32Params(NamedTuple):
    """What the kernel needs to know about a format (and the mode's overflow rule).

    Every format feature is a number that makes one formula right for all
    formats (a limit of 0 never matches, a mask of all ones keeps everything),
    not a flag the kernel tests: flags combined per element would cost
    mask-register logic that runs on one port. numba types a NamedTuple of
    ints as one tuple: one compiled kernel serves every format.
    """

    mantissa_bits: int  # m
    emin_biased: int  # the format's emin + 127: first float32 exponent field of its normal range
    max_mag: int  # largest finite code magnitude: anything above it is special
    sign_bit: int  # the code's sign bit (0: unsigned)
    abs_mask: int  # 0x7FFFFFFF, or all ones for unsigned formats (negatives read as NaN)
    keep_neg_zero: int  # 1; 0 in fnuz formats (a negative zero result is +0)
    no_nan: int  # 1: NaN inputs have no code (counted; the caller raises)
    x0_shl: int  # 1 in formats without subnormals: a float32 subnormal's significand is x_frac << 1
    below_bits: int  # inputs with magnitude bits below this are below the format (no subnormals)
    no_subn_one: int  # 1 << m in formats without subnormals (their code 0 is 2**emin), else 0
    ftz_limit: int  # magnitudes below this flush to zero (0 when not flushing)
    sub_limit: int  # magnitudes below this are subnormals, valued as float32(mag) * sub_scale
    sub_scale_bits: int  # float32 bits of 2**(emin - m), the subnormals' quantum
    value_offset: int  # normal values' float32 bits = (mag + value_offset) << (23 - m)
    zero_limit: int  # 1 in formats without subnormals: magnitude 0 is worth zero_mag_bits
    zero_mag_bits: int  # float32 bits of magnitude 0 there (2**-127 in e8m0)
    nan_a_zero: int  # 0 in unsigned formats (a zero input is NaN there), else never matched
    ovf_code_pos: int  # code of a positive overflow in this mode (inf, NaN or max)
    ovf_code_neg: int
    inf_code_pos: int  # code of +inf input
    inf_code_neg: int
    nan_code_pos: int  # code of a NaN input (when it has one)
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
    return m == 0 and emin_b >= 0 and (fmt.signed or fmt.has_nan)


_QNAN_BITS = 0x7FC00000  # numpy's float32 NaN
_PARAMS: dict[tuple, np.ndarray] = {}


def params_array(fmt: Any, mode: int, saturate: bool, ftz: bool,
                 build: Any = None) -> np.ndarray:
    """:func:`kernel_params` (or another kernel's ``build``, with the same
    arguments) as the uint32 array the kernels take (cached, read-only;
    negative fields wrap, as the kernels' 32-bit lanes add them).

    An array, not the NamedTuple: numba types an array argument in a fraction
    of the time it takes for a tuple, which matters for small arrays. uint32,
    not int64: LLVM would otherwise pick between two parameters in 64-bit
    lanes and narrow the result, twice the instructions.
    """
    build = build or kernel_params
    key = (build, fmt, mode, bool(saturate), bool(ftz))
    q = _PARAMS.get(key)
    if q is None:
        q = np.array([v & 0xFFFFFFFF for v in build(fmt, mode, saturate, ftz)], np.uint32)
        q.setflags(write=False)
        _PARAMS[key] = q
    return q


@njit(cache=True, nogil=True, inline="always")
def _unpack(q):
    """The kernels' view of the parameters array: a Bits32Params of uint32
    fields (negative ones wrap, as 32-bit lanes add them)."""
    return Bits32Params(U(q[0]), U(q[1]), U(q[2]), U(q[3]), U(q[4]), U(q[5]), U(q[6]),
                        U(q[7]), U(q[8]), U(q[9]), U(q[10]), U(q[11]), U(q[12]),
                        U(q[13]), U(q[14]), U(q[15]), U(q[16]), U(q[17]), U(q[18]),
                        U(q[19]), U(q[20]), U(q[21]), U(q[22]), U(q[23]), U(q[24]),
                        U(q[25]), U(q[26]))


def _code_bits(P: tuple, code: int) -> int:
    """float32 bits of a code's value (NaN: the positive quiet NaN, as numpy's)."""
    value = np.float32(decode_one(P, code))
    return int(value.view(np.int32))


def special_codes(fmt: Any, mode: int, saturate: bool, ftz: bool) -> dict[tuple[str, int], int]:
    """The codes of the special results, asked of the reference engine (its numpy
    transcription :mod:`.vec`, which compiles nothing) so that a kernel and
    ``round_pack`` cannot disagree on them: ``("inf" | "nan" | "ovf",
    sign)`` for an infinite input, a NaN input (0 where the format has no NaN)
    and an overflow in ``mode``, sign +1 or -1."""
    P = format_params(fmt)
    specials = {}
    for name, pos_bits in (("inf", 0x7F800000), ("nan", _QNAN_BITS)):
        for sign in (1, -1):
            bits = pos_bits | (0x80000000 if sign < 0 else 0)
            code, _, status = convert_one(P, bits, False, mode, saturate, ftz)
            specials[name, sign] = code if status == 0 else 0
    if not fmt.signed:  # negative inputs (NaN among them) are NaN
        specials["nan", -1] = specials["nan", 1]
    for sign in (1, -1):
        specials["ovf", sign] = overflow_code(P, sign < 0, mode, saturate)
    return specials


def kernel_params(fmt: Any, mode: int, saturate: bool, ftz: bool) -> Bits32Params:
    """The kernel's parameters for ``fmt`` in ``mode`` (an int of ``_engine``).

    The special results are asked of the reference engine, so the kernel and
    ``round_pack`` cannot disagree on them.
    """
    P = format_params(fmt)
    m = fmt.mantissa_bits
    emin_b = fmt.emin + 127
    subn = fmt.has_subnormals
    specials = special_codes(fmt, mode, saturate, ftz)
    ovf = {sign: specials["ovf", sign] for sign in (1, -1)}
    subnormal_range = subn and emin_b > 1  # subnormals that are float32 normals
    return Bits32Params(
        mantissa_bits=m,
        emin_biased=emin_b,
        max_mag=fmt.max_code_magnitude,
        sign_bit=fmt.sign_mask,
        abs_mask=0x7FFFFFFF if fmt.signed else 0xFFFFFFFF,
        keep_neg_zero=int(fmt.nan != "negzero"),
        no_nan=int(not fmt.has_nan),
        x0_shl=int(not subn),
        below_bits=0 if subn else (emin_b << 23 if emin_b else 0x00400000),
        no_subn_one=0 if subn else 1 << m,
        ftz_limit=(1 << m) if (ftz and subn) else 0,
        sub_limit=(1 << m) if subnormal_range else 0,
        sub_scale_bits=_f32_bits(2.0 ** (fmt.emin - m)) if subnormal_range else 0,
        value_offset=(emin_b - int(subn)) << m,
        zero_limit=int(not subn),
        zero_mag_bits=0 if subn else _code_bits(P, 0),
        nan_a_zero=0xFFFFFFFF if fmt.signed else 0,
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


def _f32_bits(value: float) -> int:
    """The float32 bits of ``value`` (exact)."""
    return int(np.float32(value).view(np.uint32))


@njit(cache=True, nogil=True, inline="always")
def _round_sig(x_sig, shift, s, mode, w):
    """x_sig rounded at bit ``shift``, in quanta: the kept bits plus the mode's
    decision, without a branch. ``mode`` is a compile-time constant.

    Shifts of 25 and more drop every bit of a 24-bit significand alike (the
    value is below half a quantum), so the deterministic modes clamp the shift
    there and stay in 32-bit lanes. Stochastic rounding compares the
    probability x_sig / 2**shift with the 64-bit word ``w`` exactly as
    ``round_pack`` does, however far below the quantum.
    """
    sh = min(shift, U(25))
    mask = U(shl(U(1), sh) - U(1))
    kept = shr(x_sig, sh)
    if mode == RNE:  # + half a quantum, less one unless the kept bits are odd
        return shr(U(x_sig + shr(mask, U(1)) + U(kept & U(1))), sh)
    if mode == RNA:  # + half a quantum
        return shr(U(x_sig + shl(U(1), U(sh - U(1)))), sh)
    if mode == RUP:  # up unless negative
        return shr(U(x_sig + (U(0) if s else mask)), sh)
    if mode == RDOWN:  # up if negative
        return shr(U(x_sig + (mask if s else U(0))), sh)
    if mode == ODD:  # the sticky bit into the last kept bit
        return U(kept | U(U(x_sig & mask) != U(0)))
    if mode == STOCHASTIC:
        # Up iff w < x_low * 2**(64 - shift) (exact: the comparison of the
        # top `shift` bits of w with x_low); beyond 64, iff w < ceil(x_sig / 2**(shift - 64)).
        sh64 = np.int64(shift)
        low = np.uint64(x_sig & mask)
        top = w >> np.uint64(64 - min(sh64, 64))
        up_near = top < low
        j = min(max(sh64 - 64, 0), 40)
        x64 = np.int64(x_sig)
        thresh = (x64 >> j) + np.int64((x64 & ((np.int64(1) << j) - 1)) != 0)
        up_far = w < np.uint64(thresh)
        up = up_far if sh64 > 64 else up_near
        return U(kept + U(up))
    return kept  # RTZ


@njit(cache=True, nogil=True, inline="always")
def _one(Q, b, mode, w):
    """(code, float32 bits of its value, 1 for a NaN without a code) of float32
    bits ``b``, every step in 32-bit lanes (:mod:`.u32`)."""
    b = U(b)
    m = Q.mantissa_bits
    emin_b = Q.emin_biased
    # 1. Fields of the input.
    s = shr(b, U(31))
    a = U(b & Q.abs_mask)
    x_exp = shr(a, U(23))
    x_frac = U(a & U(0x7FFFFF))
    # Formats without subnormals (e8m0) read a float32 subnormal >= 2**-127 as
    # the binade of x_exp = 0 (its significand shifted up); anything smaller is
    # below their smallest value.
    x_sig = U(x_frac | U(0x800000)) if x_exp != U(0) else shl(x_frac, Q.x0_shl)
    # 2. Bits below the quantum: 23 - m, and one more per binade below the
    # format's normal range (where it has none, those inputs are below it).
    e1 = max(x_exp, U(1))
    shift = U(U(23) - m + U(max(emin_b, e1) - e1))
    # 3. Round; 4. the code magnitude: binade above emin, then the rounded
    # significand (a carry steps the exponent field by itself).
    r = _round_sig(x_sig, shift, s, mode, w)
    mag = U(U(shl(U(max(x_exp, emin_b) - emin_b), m) + r) - Q.no_subn_one)
    mag = U(0) if a < Q.below_bits else mag
    mag = U(0) if mag < Q.ftz_limit else mag  # flush to zero
    neg = U(s & min(U(mag + Q.keep_neg_zero), U(1)))  # the result's sign
    # 5. Special results: overflow, infinity, NaN (inputs with a > inf, which
    # in unsigned formats includes every negative), all above max_mag.
    is_inf = a == U(0x7F800000)
    is_nan = a > U(0x7F800000)
    special = mag > Q.max_mag
    zero_nan = a == Q.nan_a_zero  # unsigned formats: zero is NaN
    code = U(mag | U(U(U(0) - neg) & Q.sign_bit))
    sp = Q.ovf_code_neg if s else Q.ovf_code_pos
    sp = (Q.inf_code_neg if s else Q.inf_code_pos) if is_inf else sp
    sp = (Q.nan_code_neg if s else Q.nan_code_pos) if is_nan else sp
    code = sp if special else code
    code = Q.nan_code_pos if zero_nan else code
    # The value: normal codes are the float32 bits shifted; subnormal ones are
    # float32(mag) times their quantum, a float32 normal (in bf16 they are
    # float32 subnormals and the shift is right for them too).
    bits = shl(U(mag + Q.value_offset), U(U(23) - m))
    sub_scale = U(Q.sub_scale_bits).view(np.float32)
    sub_bits = U(np.float32(np.float32(np.int32(mag)) * sub_scale).view(U))
    bits = sub_bits if mag < Q.sub_limit else bits
    bits = Q.zero_mag_bits if mag < Q.zero_limit else bits
    bits = U(bits | shl(neg, U(31)))
    sp = Q.ovf_bits_neg if s else Q.ovf_bits_pos
    sp = (Q.inf_bits_neg if s else Q.inf_bits_pos) if is_inf else sp
    sp = U(_QNAN_BITS) if is_nan else sp
    bits = sp if special else bits
    bits = U(_QNAN_BITS) if zero_nan else bits
    no_code = U(shr(U(U(0x7F800000) - a), U(31)) & Q.no_nan)  # a > inf, as arithmetic
    return code, bits, no_code


@njit(cache=True, nogil=True, inline="always")
def _run(q, xbits, mode, seeds, out, codes):
    """Every element of ``xbits`` (uint32) into ``out`` (codes, or the int32
    view of float32 values; ``codes`` a compile-time constant), a block of
    SR_BLOCK elements per stochastic seed. Returns 1 if a NaN had no code (the
    caller raises), else 0."""
    Q = _unpack(q)
    xbits = xbits.view(np.uint32)  # float32 values or their bits
    stoch = mode == STOCHASTIC
    n = xbits.shape[0]
    bad = U(0)
    for k in range((n + SR_BLOCK - 1) // SR_BLOCK):
        lo = k * SR_BLOCK
        hi = min(lo + SR_BLOCK, n)
        seed = seeds[k] if stoch else np.uint64(0)
        xs = xbits[lo:hi]
        os_ = out[lo:hi] if codes else out[lo:hi].view(np.int32)  # values: their bits
        z, k1 = sr_keys(seed)  # word j is sr_word(seed, j): z steps by G32
        for j in range(hi - lo):
            z = sr_step(z)
            w = sr_word_at(z, k1) if stoch else np.uint64(0)
            code, bits, nan_bad = _one(Q, xs[j], mode, w)
            os_[j] = code if codes else np.int32(bits)
            bad = U(bad | nan_bad)
    return bad


def _make(mode: int, codes: bool):
    """The kernel for one rounding ``mode``, writing codes (``codes``) or float32
    values: kernel(q, xbits, seeds, out). Both are closure constants, so that each
    kernel's loop holds only its own rounding and its own store; the closure holds
    nothing else, which numba's disk cache needs. Compiled on first use."""

    @njit(cache=True, nogil=True)
    def kernel(q, xbits, seeds, out):
        return _run(q, xbits, mode, seeds, out, codes)

    return kernel


#: One kernel per rounding mode and output (codes or values), by (mode int, codes?).
KERNELS = {(mode, codes): _make(mode, codes)
           for mode in (RNE, RNA, RTZ, RUP, RDOWN, ODD, STOCHASTIC) for codes in (True, False)}


def round_bits32(q: np.ndarray, mode: int, xbits: np.ndarray, seeds: np.ndarray,
                 out: np.ndarray, want_codes: bool) -> int:
    """Round float32 ``xbits`` (values, or their bits as uint32) into ``out`` (``q``: the
    :func:`params_array` of the same mode): codes when
    ``want_codes``, else float32 values (or their int32 view). ``seeds``: one per
    SR_BLOCK elements (stochastic; else empty). Returns 1 if some NaN has no
    code in the format (the caller raises and says which), else 0. Releases the GIL.

    >>> import numpy as np
    >>> from lowprec import get_format
    >>> q = params_array(get_format("fp4_e2m1"), RNE, False, False)
    >>> x = np.array([0.3, 2.6, 100.0, -np.inf], np.float32)
    >>> out = np.empty(4, np.uint8)
    >>> round_bits32(q, RNE, x, np.empty(0, np.uint64), out, True)
    0
    >>> [hex(c) for c in out]
    ['0x1', '0x5', '0x7', '0xf']
    """
    return KERNELS[mode, want_codes](q, xbits, seeds, out)
