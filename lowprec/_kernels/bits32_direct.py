"""Rounding float32 bit patterns in place: the fastest path of ``round_to``/``encode``.

:mod:`.bits32` rounds the 24-bit significand of each input and builds the
result's code and value from scratch, which works for every format and mode.
For the usual formats (signed, with subnormals and at least one mantissa bit),
in every mode, the result's float32 bits can be had from the input's bits
directly, in about half the instructions:

    float32 bits a = [ exponent | fraction ]          (the magnitude, sign apart)

    rounding x to the format's quantum is rounding ``a`` at bit ``sh``:

        a = [ kept bits .......... | R | S S S ]   ->   [ kept bits + decision | 0 0 0 0 ]

    sh = 23 - m in the format's normal range and one more per binade below it
    (its subnormals). A carry out of the kept fraction bits steps the exponent
    field, which is exactly the next binade's first value, so no case is needed.

That holds while the lowest kept bit is a fraction bit (sh <= 22, inputs of at
least twice the smallest subnormal q), and in rtz, rna, rup and rdown, which
never look at the last kept bit, at the implicit bit too (sh = 23, inputs in
[q, 2q): a carry steps the exponent field to 2q). Below, the result is 0, q or
2q (0 or q in those four), and each deterministic mode's choice is a comparison
or two with constants.
Stochastic rounding has one rule for every input, tiny ones included: its
64-bit word against the dropped part of |x| in units of the quantum, exactly
as :mod:`.bits32` compares them. From q up that is the bit arithmetic again,
with the word's top bits added below the quantum (:func:`_round_stochastic`),
and below q one float32 product by 2**32 / q gives the threshold. Overflow,
infinity, NaN and flush-to-zero are selects; nothing leaves the loop. The
codes follow from the rounded bits: a shift in the normal range, a product by
1/q below it.
bf16 and tf32, rounded without saturation or flushing, need none of those
selects but NaN's (:func:`plain`, :data:`PLAIN_KERNELS`).

Most data needs none of them either: from the flushing bound (0 without
flushing; in stochastic rounding, from q) up to the format's largest value
(:func:`ordinary_from`) no result is special or flushed. So the other formats' loop checks each piece of its input first (the
largest of ``|x| - lo``: a few instructions per 16 elements) and rounds a
piece of such inputs in a short loop without the selects
(:func:`_ordinary_one`); a piece with one other input takes the long loop,
whole (:func:`_loop`). Both give the same bits; the short loop is about half
as long (stochastic rounding: 30 instructions per 16 elements against 60).

Round-to-nearest-even has a shorter route, the processor's own float32
addition. With C = 2**(e + 23 - m), e the input's binade clamped to the
format's (at least emin: its subnormals share emin's quantum), the quantum of
|x| is float32's ulp of C + |x|, so

    r = (|x| + C) - C        (the sum rounds once, to nearest even; the difference is exact)

is |x| rounded at the format's quantum, tiny inputs and ties included. That
holds while the processor rounds to nearest even and reads subnormal inputs
as they are, the state every program starts in; the kernel checks it once per
call on three sums of its parameters (which the compiler cannot fold), and
if a program has changed it (``fesetround``, denormals-are-zero) answers so
and writes nothing; :class:`NearestEven` then runs the integer route's
kernel, which numba compiles only then.

The special results are picked with arithmetic where it saves a select: a
negative input's result differs from the positive one's by a constant XOR
(``*_flip``), and the sign goes back on a value unless a fnuz zero forbids it
(the top bit of ``r + sign_keep``).

Tests hold it bit-equal to ``round_pack`` on every boundary
(``tests/test_bits32.py``), as :mod:`.bits32` is.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

from . import bits32
from .bits32 import _code_bits, special_codes
from .memory import AHEAD, FAR, PIECE, ahead
from .params import ODD, RDOWN, RNA, RNE, RTZ, RUP, STOCHASTIC, format_params
from .sr import SR_BLOCK, sr_hi, sr_keys, sr_lo, sr_step
from .u32 import U, shl, shr, wide_vectors

__all__ = ["DIRECT_MODES", "FULL_KERNELS", "KERNELS", "NOT_NEAREST", "NearestEven",
           "PLAIN_KERNELS", "fpu_rounds_to_nearest",
           "full_range", "kernel", "ordinary_bounds", "ordinary_from", "params_array", "plain",
           "rne_by_addition", "supports"]

#: The modes this kernel has: all seven.
DIRECT_MODES = (RNE, RNA, RTZ, RUP, RDOWN, ODD, STOCHASTIC)

_INF = 0x7F800000
_QNAN = 0x7FC00000  # numpy's float32 NaN
#: The modes whose rounding of the magnitude bits is also right at bit 23, the
#: implicit bit of [q, 2q): a carry steps the exponent field to 2q, and none
#: needs the last kept bit (nearest-even and odd do: it is an exponent bit
#: there). Their tiny inputs are those below q, which round to 0 or q.
_AT_BIT_23 = (RTZ, RNA, RUP, RDOWN, STOCHASTIC)


class DirectParams(NamedTuple):
    """What the kernel needs to know of a format, in float32 bits where it can."""

    mantissa_bits: int  # m
    emin_biased: int  # emin + 127: the first float32 exponent field of the normal range
    exp_lo: int  # the smallest exponent field whose shift is at most 22, or 23 in the modes
    #              of _AT_BIT_23 (lower: tiny)
    sh_top: int  # 23 - m + emin_biased: the shift is sh_top minus the clamped exponent field
    q_bits: int  # the smallest subnormal q, and its multiples below
    half_q_bits: int  # q / 2
    one_half_q_bits: int  # 1.5 q
    two_q_bits: int  # 2 q: below it, inputs are tiny
    ftz_bits: int  # results below this flush to zero (2**emin when flushing, else 0)
    max_bits: int  # the largest finite value: rounded magnitudes above it are special
    sign_keep: int  # the sign goes back on a value iff r + sign_keep has its top bit: 0x80000000
    #                 (always), 0x7FFFFFFF in fnuz formats (unless r is 0: -0 becomes +0)
    negzero_code: int  # the sign bit alone, in fnuz formats (a negative zero's code), else never
    sub_bits: int  # results below this are subnormals (their code: value / q), else 0
    inv_q_bits: int  # 1 / q
    code_offset: int  # normal codes: (bits >> (23 - m)) - code_offset
    sign_bit: int  # the code's sign bit
    no_nan: int  # 1: NaN inputs have no code (the caller raises)
    ovf_code_pos: int  # code of a positive overflow in this mode
    ovf_code_flip: int  # a negative one's: ovf_code_pos ^ ovf_code_flip
    inf_code_pos: int  # code of an infinite input
    inf_code_flip: int
    nan_code_pos: int  # code of a NaN input (when there is one)
    nan_code_flip: int
    ovf_bits_pos: int  # the same results as float32 bits (NaN: numpy's quiet NaN)
    ovf_bits_flip: int
    inf_bits_pos: int
    inf_bits_flip: int
    rne_fp: int  # 1: rne may take the processor's addition (:func:`rne_by_addition`)
    rne_lo: int  # there, the binade's exponent field clamped to [rne_lo, rne_hi] (the format's
    rne_hi: int  # emin, and one binade above its max) plus rne_add ((23 - m) << 23) is C's
    rne_add: int
    one_bits: int  # 1.0, 0.75 and 0.25 of float32's ulp at 1, 1 + ulp, the smallest subnormal:
    three_quarters_bits: int  # the FPU check's operands (runtime values, so the compiler
    quarter_bits: int  # cannot fold the sums)
    one_up_bits: int
    tiny_bits: int
    scale_lo_bits: int  # 2**32 / q as the product of these two float32 powers of two (the first
    scale_hi_bits: int  # at most 2**127): |x| * 2**32 / q, exact, is a tiny input's threshold


def supports(fmt: Any) -> bool:
    """Whether the kernel handles ``fmt``: the signed formats with subnormals and
    mantissa bits whose values are float32 values and whose quantum ``q`` is
    a float32 normal or, in bf16, float32's own subnormal quantum.

    >>> from lowprec import get_format
    >>> supports(get_format("fp4_e2m1")), supports(get_format("e8m0"))
    (True, False)
    """
    m = fmt.mantissa_bits
    emin_b = fmt.emin + 127
    return (fmt.signed and fmt.has_subnormals and 1 <= m <= 22 and fmt.emax <= 127
            and fmt.fits_float32 and emin_b >= 1 and (emin_b == 1 or fmt.emin - m >= -126))


def rne_by_addition(fmt: Any) -> bool:
    """Whether round-to-nearest-even into ``fmt`` may take the float32 addition
    ``(|x| + C) - C`` (the module's docstring): a format :func:`supports` takes
    without float32's exponent range, whose C stays finite one binade above its
    largest value (emax + 24 - m <= 127: every registered one).

    >>> from lowprec import get_format
    >>> [rne_by_addition(get_format(f)) for f in ("fp16", "fp8_e4m3", "bf16")]
    [True, True, False]
    """
    return (supports(fmt) and not full_range(fmt)
            and fmt.emax + 24 - fmt.mantissa_bits <= 127)


def _f32_bits(value: float) -> int:
    """The float32 bits of ``value`` (exact for the powers of two and the
    format values used here)."""
    return int(np.float32(value).view(np.uint32))


def kernel_params(fmt: Any, mode: int, saturate: bool, ftz: bool) -> DirectParams:
    """The kernel's parameters for ``fmt`` in ``mode``; the special results are
    asked of the reference engine, so the two cannot disagree on them."""
    P = format_params(fmt)
    m = fmt.mantissa_bits
    emin_b = fmt.emin + 127
    q = 2.0 ** (fmt.emin - m)
    specials = special_codes(fmt, mode, saturate, ftz)
    ovf = {sign: specials["ovf", sign] for sign in (1, -1)}
    ovf_bits = {sign: _code_bits(P, ovf[sign]) for sign in (1, -1)}
    inf_bits = {sign: _code_bits(P, specials["inf", sign]) for sign in (1, -1)}
    float_subnormals = emin_b > 1  # the format's subnormals are float32 normals
    return DirectParams(
        mantissa_bits=m,
        emin_biased=emin_b,
        exp_lo=max(emin_b - m + (0 if mode in _AT_BIT_23 else 1), 1),
        sh_top=23 - m + emin_b,
        q_bits=_f32_bits(q),
        half_q_bits=_f32_bits(q / 2),
        one_half_q_bits=_f32_bits(1.5 * q),
        two_q_bits=_f32_bits(2 * q),
        ftz_bits=emin_b << 23 if ftz else 0,
        max_bits=_f32_bits(fmt.max),
        sign_keep=0x7FFFFFFF if fmt.nan == "negzero" else 0x80000000,
        negzero_code=fmt.sign_mask if fmt.nan == "negzero" else 0xFFFFFFFF,
        sub_bits=emin_b << 23 if float_subnormals else 0,
        inv_q_bits=_f32_bits(1 / q) if float_subnormals else 0,
        code_offset=(emin_b - 1) << m,
        sign_bit=fmt.sign_mask,
        no_nan=int(not fmt.has_nan),
        ovf_code_pos=ovf[1],
        ovf_code_flip=ovf[1] ^ ovf[-1],
        inf_code_pos=specials["inf", 1],
        inf_code_flip=specials["inf", 1] ^ specials["inf", -1],
        nan_code_pos=specials["nan", 1],
        nan_code_flip=specials["nan", 1] ^ specials["nan", -1],
        ovf_bits_pos=ovf_bits[1],
        ovf_bits_flip=ovf_bits[1] ^ ovf_bits[-1],
        inf_bits_pos=inf_bits[1],
        inf_bits_flip=inf_bits[1] ^ inf_bits[-1],
        rne_fp=int(rne_by_addition(fmt)),
        rne_lo=emin_b << 23,
        rne_hi=(fmt.emax + 128) << 23,
        rne_add=(23 - m) << 23,
        one_bits=_f32_bits(1.0),
        three_quarters_bits=_f32_bits(3 * 2.0 ** -25),
        quarter_bits=_f32_bits(2.0 ** -25),
        one_up_bits=_f32_bits(1 + 2.0 ** -23),
        tiny_bits=1,
        scale_lo_bits=_f32_bits(2.0 ** min(32 - fmt.emin + m, 127)),
        scale_hi_bits=_f32_bits(2.0 ** max(32 - fmt.emin + m - 127, 0)),
    )


def params_array(fmt: Any, mode: int, saturate: bool, ftz: bool) -> np.ndarray:
    """:func:`kernel_params` as the (cached, read-only) int64 array the kernels take."""
    return bits32.params_array(fmt, mode, saturate, ftz, kernel_params)


@njit(cache=True, nogil=True, inline="always")
def _unpack(q):
    """The parameters array as a DirectParams of uint32 fields."""
    return DirectParams(U(q[0]), U(q[1]), U(q[2]), U(q[3]), U(q[4]), U(q[5]), U(q[6]),
                        U(q[7]), U(q[8]), U(q[9]), U(q[10]), U(q[11]), U(q[12]), U(q[13]),
                        U(q[14]), U(q[15]), U(q[16]), U(q[17]), U(q[18]), U(q[19]),
                        U(q[20]), U(q[21]), U(q[22]), U(q[23]), U(q[24]), U(q[25]),
                        U(q[26]), U(q[27]), U(q[28]), U(q[29]), U(q[30]), U(q[31]),
                        U(q[32]), U(q[33]), U(q[34]), U(q[35]), U(q[36]), U(q[37]))


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
    :func:`fpu_rounds_to_nearest` and ``F.rne_fp``)."""
    a = U(b & U(0x7FFFFFFF))
    s = shr(b, U(31))
    neg = U(U(0) - s)  # all ones for a negative input
    unsure = U(0)
    if full:
        r = _round_bits(a, s, U(U(23) - F.mantissa_bits), mode, wh)
    elif fp and mode == RNE:
        r = _rne_by_addition(F, a)
    elif mode == STOCHASTIC:
        r, unsure = _round_stochastic(a, F, wh, wl, exact)
    else:
        r = _round_deterministic(F, a, s, mode)
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
    rounded by :func:`_ordinary_one`. Those inputs are not flushed (the
    flushing bound is on the grid, so no rounding of an input above it lands
    below it) and their results are not special (nor is the largest value,
    for the same reason). The deterministic modes take tiny inputs and zeros
    as well; stochastic rounding takes inputs from q up (below, its rule is
    the threshold's, :func:`_round_stochastic`)."""
    if mode == STOCHASTIC:
        return max(F.q_bits, F.ftz_bits)
    return F.ftz_bits


@njit(cache=True, nogil=True, inline="always")
def _ordinary_one(F, b, mode, wh, fp, codes):
    """(float32 bits of the rounded value, its code) of float32 bits ``b``
    whose magnitude is ordinary (:func:`ordinary_from`), exactly as
    :func:`_direct_one` gives them, in about half its instructions: no select
    of a special result, no flush, no NaN (``codes``, compile-time: whether
    the code is wanted; else it is 0)."""
    a = U(b & U(0x7FFFFFFF))
    s = shr(b, U(31))
    if fp and mode == RNE:
        r = _rne_by_addition(F, a)
    elif mode == STOCHASTIC:  # the inputs are not tiny: the shift needs no clamp from below
        r = _round_bits(a, s, U(F.sh_top - min(shr(a, U(23)), F.emin_biased)), mode, wh)
    else:
        r = _round_deterministic(F, a, s, mode)
    return _finish(F, r, b, a, s, codes)


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


@njit(cache=True, nogil=True, inline="always")
def _loop(F, xbits, seeds, out, mode, full, codes, fp, one, ordinary=False):
    """The kernels' loop (every flag but F compile-time): ``one`` (an element
    function like :func:`_direct_one`) on every element; returns the largest
    input magnitude bits (a NaN's are above inf's).

    Stochastic rounding makes only the top half of each word (``sr.sr_hi``, in
    32-bit lanes). An element that comes back unsure (its word's bottom half
    would decide) gets its input written as its value, and after its block the
    loop redoes the block with whole words (``one``'s ``exact`` rule, every
    element, so that the loop holds one more copy of ``one``, not two): it
    reads the input again, which is still there when ``out`` is the input
    itself, and the other elements' rounded values round to themselves (they
    are the format's values, or its infinities and NaN).

    Arrays of at least ``memory.FAR`` elements are walked in pieces of
    ``memory.PIECE``, each asking for the memory ``memory.AHEAD`` elements on
    (:mod:`.memory`): a loop this long outruns the processor's own prefetchers.
    Smaller arrays are one piece a block.

    With ``ordinary`` (compile-time), a piece whose inputs are all ordinary
    (:func:`ordinary_from`: one pass for the largest of ``|x| - lo``, the
    piece then in L1) takes the short loop of :func:`_ordinary_one`, about
    half the instructions of ``one``. A piece that is not gets the long loop,
    and so do the next 1, 3, 7, ... 63 pieces unchecked while no piece has
    passed since (back-off): data that never passes (fp4 on a normal
    distribution times 8, where half the inputs overflow) pays for a check
    once in 64 pieces, data that passes but for a few stray elements loses
    a piece or two to each. Either loop gives the same bits.
    """
    wide_vectors()  # (the loop is inlined: this marks the kernel that runs it)
    stoch = mode == STOCHASTIC
    n = xbits.shape[0]
    far = n >= FAR  # from main memory: pieces that ask for memory AHEAD of them
    step = SR_BLOCK if stoch or far else max(n, 1)  # a block per stochastic seed
    piece = PIECE if far else step
    amax = U(0)
    lo_b = span = U(0)
    if ordinary:  # (F has the fields ordinary_from reads)
        lo_b = ordinary_from(F, mode)
        span = U(F.max_bits - lo_b)
    wait = 0  # pieces left to take the long loop unchecked
    backoff = 0
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        seed = seeds[lo // SR_BLOCK] if stoch else np.uint64(0)
        z, k1 = sr_keys(seed)  # word i is sr_word(seed, i): the Weyl state z steps by G32
        unsure = U(0)
        run = lo
        while run < hi:
            if ordinary and wait == 0:
                phi = min(run + piece, hi)
                if far:
                    ahead(xbits, out, run + AHEAD, phi + AHEAD)
                xs = xbits[run:phi]
                worst = U(0)  # (a magnitude below lo_b wraps round above span)
                for i in range(phi - run):
                    worst = max(worst, U(U(U(xs[i]) & U(0x7FFFFFFF)) - lo_b))
                if worst <= span:
                    os_ = out[run:phi] if codes else out[run:phi].view(np.int32)
                    for i in range(phi - run):
                        b = U(xs[i])
                        z = sr_step(z)
                        wh = sr_hi(z, k1) if stoch else U(0)
                        bits, code = _ordinary_one(F, b, mode, wh, fp, codes)
                        os_[i] = code if codes else np.int32(bits)
                    amax = max(amax, U(worst + lo_b))
                    backoff = 0
                    run = phi
                    continue
                backoff = min(2 * backoff + 1, 63)
                wait = backoff + 1  # this piece and the next `backoff`
            # The long loop, over the next `wait` pieces (with `ordinary`), or all.
            # (One loop nest of its own: inside the one above it ran 5-10% slower.)
            end = min(run + wait * piece, hi) if ordinary else hi
            for plo in range(run, end, piece):
                phi = min(plo + piece, end)
                if far:
                    ahead(xbits, out, plo + AHEAD, phi + AHEAD)
                xs = xbits[plo:phi]
                os_ = out[plo:phi] if codes else out[plo:phi].view(np.int32)  # values: bits
                for i in range(phi - plo):
                    b = U(xs[i])
                    z = sr_step(z)
                    wh = sr_hi(z, k1) if stoch else U(0)
                    bits, code, maybe = one(F, b, mode, wh, U(0), full, fp)
                    os_[i] = code if codes else np.int32(b if maybe != U(0) else bits)
                    unsure = U(unsure | maybe)
                    amax = max(amax, U(b & U(0x7FFFFFFF)))
                if ordinary:
                    wait -= 1
            run = end
        if stoch and unsure != U(0):
            xs = xbits[lo:hi]
            os_ = out[lo:hi] if codes else out[lo:hi].view(np.int32)
            z, k1 = sr_keys(seed)
            for i in range(hi - lo):
                b = U(xs[i])
                z = sr_step(z)
                wh = sr_hi(z, k1)
                bits, code, maybe = one(F, b, mode, wh, sr_lo(wh, k1), full, fp, True)
                os_[i] = code if codes else np.int32(bits)
    return amax


def _make(mode: int, full: bool, codes: bool, plain: bool = False, addition: bool = False):
    """The kernel for one rounding ``mode`` (a closure constant to numba, so the
    loop is branch-free), for formats with float32's exponent range (``full``)
    or the others, writing codes (``codes``) or float32 values:
    kernel(q, x, seeds, out) -> 1 if a NaN has no code in the format, else 0.
    ``seeds``: one per SR_BLOCK elements (stochastic rounding; else unused).
    Compiled on first use, for each dtype of ``out`` it meets. The kernels of
    the other formats hold two loops, the short one for ordinary pieces and
    the long one (:func:`_loop`). With ``addition`` (rne, not ``full``) the
    loops round by the float32 addition, and the kernel answers
    :data:`NOT_NEAREST`, writing nothing, where that route does not hold
    (:class:`NearestEven` then runs the integer kernel).

    The closure holds plain constants and nothing else: numba's disk cache
    keys a closure by its variables' pickled bytes, which for a compiled
    function differ between processes (the cache would never hit). Codes and
    values are separate kernels so that each compiles one loop, not both.
    """
    ordinary = not full  # a short loop for ordinary pieces

    @njit(cache=True, nogil=True)
    def kernel(q, x, seeds, out):
        F = _unpack(q)
        xbits = x.view(np.uint32)  # x: float32 values or their bits
        if plain:
            amax = _loop(F, xbits, seeds, out, mode, full, codes, False, _plain_one)
        elif addition:
            if (F.rne_fp == U(0)) or not fpu_rounds_to_nearest(F):
                return NOT_NEAREST
            amax = _loop(F, xbits, seeds, out, mode, full, codes, True, _direct_one, ordinary)
        else:
            amax = _loop(F, xbits, seeds, out, mode, full, codes, False, _direct_one, ordinary)
        return 1 if (amax > U(_INF)) & (F.no_nan != U(0)) else 0

    return kernel


#: What an ``addition`` kernel answers where the float32 addition does not
#: round to nearest even (or the format is not :func:`rne_by_addition`).
NOT_NEAREST = 2


class NearestEven:
    """Round-to-nearest-even's kernel for the formats without float32's
    exponent range, called like the others: the float32 addition's kernel,
    and where it answers :data:`NOT_NEAREST` (a program changed the
    processor's rounding) the integer one, which numba compiles only then.
    A format whose C leaves float32's range (none registered) is given the
    integer kernel directly (:func:`kernel`). Each holds one route's
    loops: as one kernel with both, rne took twice as long as rtz to
    compile (fp8 E4M3: 13.9 s against 8.1 s), on every first run."""

    __slots__ = ("addition", "integer")

    def __init__(self, codes: bool) -> None:
        self.addition = _make(RNE, False, codes, addition=True)
        self.integer = _make(RNE, False, codes)

    def __call__(self, q: np.ndarray, x: np.ndarray, seeds: np.ndarray, out: np.ndarray
                 ) -> int:
        status = self.addition(q, x, seeds, out)
        return self.integer(q, x, seeds, out) if status == NOT_NEAREST else status


#: Kernels by (mode int, codes?).
KERNELS: dict[tuple[int, bool], Any] = {
    (mode, codes): NearestEven(codes) if mode == RNE else _make(mode, False, codes)
    for mode in DIRECT_MODES for codes in (True, False)}
#: The same for formats with float32's exponent range (:func:`full_range`).
FULL_KERNELS = {(mode, codes): _make(mode, True, codes)
                for mode in DIRECT_MODES for codes in (True, False)}
#: And for those of them without saturation or flushing (:func:`plain`).
PLAIN_KERNELS = {(mode, codes): _make(mode, True, codes, plain=True)
                 for mode in DIRECT_MODES for codes in (True, False)}


def full_range(fmt: Any) -> bool:
    """Whether ``fmt`` has float32's exponent range (emin -126, so every float32
    rounds at bit 23 - m): bf16 and tf32 take :data:`FULL_KERNELS`.

    >>> from lowprec import get_format
    >>> full_range(get_format("bf16")), full_range(get_format("fp16"))
    (True, False)
    """
    return supports(fmt) and fmt.emin == -126


def plain(fmt: Any, saturate: bool, ftz: bool) -> bool:
    """Whether ``fmt`` is float32 cut short, infinities and IEEE NaNs included
    (bf16, tf32), rounded without saturation or flushing: then the rounded
    magnitude bits are the result, overflow and infinity included, and only a
    NaN needs a select (:data:`PLAIN_KERNELS`).

    >>> from lowprec import get_format
    >>> plain(get_format("bf16"), False, False), plain(get_format("bf16"), True, False)
    (True, False)
    """
    return (full_range(fmt) and fmt.has_inf and fmt.nan == "ieee" and not saturate
            and not ftz)


def kernel(fmt: Any, mode: int, codes: bool, saturate: bool = False, ftz: bool = False
           ) -> Any:
    """The kernel of ``fmt`` (one :func:`supports`) in ``mode``, to codes or
    values, for those ``saturate`` and ``ftz`` options."""
    if plain(fmt, saturate, ftz):
        return PLAIN_KERNELS[mode, codes]
    if full_range(fmt):
        return FULL_KERNELS[mode, codes]
    if mode == RNE and not rne_by_addition(fmt):
        # C would leave float32's range: the addition kernel would only answer
        # NOT_NEAREST, so go straight to the integer one (and compile only it)
        return KERNELS[RNE, codes].integer
    return KERNELS[mode, codes]
