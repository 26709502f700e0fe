"""The parameters of :mod:`.bits32_direct`'s kernels: which formats they take
(:func:`supports`, :func:`full_range`, :func:`plain`, :func:`rne_by_addition`)
and a format's constants in float32 bits (:class:`DirectParams`,
:func:`params_array`), the special results asked of the reference engine.
Split from :mod:`.bits32_direct` (whose docstring explains the rounding) to
keep each file readable; that module re-exports every public name here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

from . import bits32
from .bits32 import _code_bits, special_codes
from .params import ODD, RDOWN, RNA, RNE, RTZ, RUP, STOCHASTIC, format_params
from .u32 import U

__all__ = ["DIRECT_MODES", "DirectParams", "full_range", "kernel_params", "params_array",
           "plain", "rne_by_addition", "supports"]

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
