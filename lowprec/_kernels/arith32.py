"""``add``, ``sub`` and ``mul`` in one compiled pass: operands in, results out.

For the usual formats (:func:`supports`) and the deterministic modes, each
element is read (float32 values, or the format's own codes decoded inline),
checked, computed exactly or *rounded to odd* in float32, rounded once into the
format by the float32 rounding of ``round_to`` (``bits32_direct._direct_one``)
and written out (float32 values or codes): no temporary arrays.

Why one rounding of the float32 intermediate is the correctly rounded result
(``odd(x)``: x truncated to 24 bits, the last bit set if anything was dropped):

* Boldo & Melquiond ("Emulation of FMA and correctly rounded sums: proved
  algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008):
  rounding ``odd(x)`` to p bits in any deterministic mode gives the rounding of
  x when the intermediate has at least p + 2 bits *at x's magnitude*. float32
  has 24 (m <= 21 here); below the format's normal range the format keeps
  fewer bits, float32 as many down to 2**-126 and then quanta of 2**-149, at
  most a quarter of the format's quantum q >= 2**-147. Where x is exact in
  float32 there is nothing to prove.
* add/sub: s = fl32(a + b) and TwoSum's error e = (a + b) - s, exact
  (Knuth, TAOCP vol. 2, 4.2.2; no underflow can spoil it: a sum of float32
  values that lands below 2**-126 is exact). If e != 0 and s is even, the odd
  neighbour of s on e's side is odd(a + b). IEEE signs of zero: float32 gives
  them for rne (x + (-x) = +0); in ``rdown`` an exact zero sum is -0 unless
  both terms are +0.
* rne and rna sums into formats of p <= 11 bits skip TwoSum: fl32(a + b)
  rounds to nearest in the format like a + b. If fl32 was inexact, a + b needs
  more than 24 bits, so the smaller term is below 2**(t - 24 + p) (2**(t - 23 +
  p) when the signs agree), t the exponent of the larger term's leading bit;
  a + b and fl32(a + b) then both lie less than half a format ulp from the
  larger term, the nearest value of both, when 24 >= 2p + 1 (Figueroa, "When is
  double rounding innocuous?", ACM SIGNUM Newsletter 30(3), 1995).
* mul: the product of two p-bit significands has at most 2p bits. With
  2p <= 24 and the products' range inside float32's (fp16 and the 8/6/4-bit
  formats: :func:`wide_product` false), the float32 product is exact. bf16 and
  tf32 products (2**-266 .. 2**256) are exact in float64 and brought to
  float32 rounded to odd (``odd64.float32_odd``).
* Overflow of float32 (an exact result beyond float32's largest value F): the
  intermediate becomes +-F, odd. Every format here has max < F and rounds
  every value above F like F in every mode (to max, or to its overflow result).

Operands given as float32 values are checked as ``arith._operand_codes`` does:
a value of the format rounds to itself (round toward zero, no saturation, no
flush: -0.0 in formats without -0 reads as +0); a NaN is one where the format
has NaNs; an infinity where it has infinities. A NaN result is the format's
canonical (positive) NaN, as the integer kernel gives. The kernel reports a
bad operand by its return value; the caller then takes the integer route,
which raises the error. No invalid result needs reporting: inf - inf and
0 * inf need an infinity, and formats with infinities have NaNs.

Tests: ``tests/test_arith_fused.py`` holds it bit-equal to the integer kernel
(``lowprec._kernels.arith.op_kernel``) on every pair of every 8/6/4-bit format
and on adversarial fp16, bf16 and tf32 pairs, in every deterministic mode.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import overload

from . import bits32_direct
from .arith import MUL
from .bits32_direct import _direct_one, _unpack
from .odd64 import float32_odd
from .params import RDOWN, RNA, RNE, RTZ
from .u32 import U, shl, shr, wide_vectors

__all__ = ["BAD_OPERAND", "decode_params", "float32_prefix", "kernel_for", "supports",
           "wide_product"]

_INF = 0x7F800000
_QNAN = 0x7FC00000
_F32_MAX = 0x7F7FFFFF
_SIGN = 0x80000000
_ABS = 0x7FFFFFFF

#: The kernel's status when an operand is not a value of the format (0: all written).
BAD_OPERAND = 1

_BLOCK = 4096  # elements per block (length-1 operands are copied to one block)


def supports(fmt: Any) -> bool:
    """Whether add/sub/mul of ``fmt`` take this kernel (deterministic modes):
    the formats of ``bits32_direct`` with at most 21 mantissa bits (the float32
    intermediate needs two bits more than the format).

    >>> from lowprec import get_format
    >>> [supports(get_format(f)) for f in ("fp16", "bf16", "tf32", "fp4_e2m1", "e8m0", "fp32")]
    [True, True, True, True, False, False]
    """
    return bits32_direct.supports(fmt) and fmt.mantissa_bits <= 21


def wide_product(fmt: Any) -> bool:
    """Whether products of ``fmt`` values need float64: more than 24 bits, or a
    range beyond float32's (bf16, tf32); else the float32 product is exact.

    >>> from lowprec import get_format
    >>> wide_product(get_format("fp16")), wide_product(get_format("bf16"))
    (False, True)
    """
    p = fmt.mantissa_bits + 1
    lsb = fmt.emin - fmt.mantissa_bits  # exponent of the smallest subnormal
    return not (2 * p <= 24 and 2 * lsb >= -149 and 2 * (fmt.emax + 1) <= 128)


def float32_prefix(fmt: Any) -> bool:
    """Whether ``fmt`` is the top bits of float32 (its sign, float32's 8-bit
    exponent, infinities and NaNs, and the first m fraction bits): a float32
    is one of its values iff its lower fraction bits are zero, or it is a NaN.

    >>> from lowprec import get_format
    >>> float32_prefix(get_format("bf16")), float32_prefix(get_format("fp16"))
    (True, False)
    """
    return (bits32_direct.full_range(fmt) and fmt.exponent_bits == 8 and fmt.has_inf
            and fmt.emax == 127)


class DecodeParams(NamedTuple):
    """How the kernel reads a code of the format as float32 bits."""

    mantissa_bits: int  # m
    sign_shift: int  # width - 1: the code's sign bit
    mag_mask: int  # the code bits below the sign bit
    min_normal_mag: int  # 2**m: smaller magnitudes are subnormals
    exp_offset: int  # (127 - bias) << 23: normal bits = (magnitude << (23 - m)) + exp_offset
    q_bits: int  # float32 bits of the smallest subnormal q (subnormal value = magnitude * q)
    max_mag: int  # the largest finite magnitude: above it, infinity or NaN
    inf_mag: int  # the magnitude of infinity (never, in formats without)
    nan_code: int  # the fnuz NaN (the sign bit alone), else never


@lru_cache(maxsize=256)
def decode_params(fmt: Any) -> np.ndarray:
    """:class:`DecodeParams` of ``fmt`` as the uint32 array the kernel takes
    (cached, read-only)."""
    never = 0xFFFFFFFF
    m = fmt.mantissa_bits
    d = DecodeParams(
        mantissa_bits=m,
        sign_shift=fmt.width - 1,
        mag_mask=fmt.sign_mask - 1,
        min_normal_mag=1 << m,
        exp_offset=(127 - fmt.bias) << 23,
        q_bits=int(np.float32(fmt.smallest_subnormal).view(np.uint32)),
        max_mag=fmt.max_code_magnitude,
        inf_mag=fmt.max_code_magnitude + 1 if fmt.has_inf else never,
        nan_code=fmt.sign_mask if fmt.nan == "negzero" else never,
    )
    q = np.array(d, dtype=np.uint32)
    q.setflags(write=False)
    return q


@njit(cache=True, nogil=True)
def _format_params(q):
    """``bits32_direct._unpack`` compiled once, for every kernel."""
    return _unpack(q)


@njit(cache=True, nogil=True)
def _unpack_decode(dq):
    """The :func:`decode_params` array as a DecodeParams of uint32 fields."""
    return DecodeParams(U(dq[0]), U(dq[1]), U(dq[2]), U(dq[3]), U(dq[4]), U(dq[5]), U(dq[6]),
                        U(dq[7]), U(dq[8]))


@njit(cache=True, nogil=True)
def _decode(D, c, full):
    """float32 bits of code ``c``: the fields moved into place (normal codes;
    subnormals of formats with float32's range too), magnitude * q (the other
    subnormals), then infinity, NaN and the sign."""
    mag = U(c & D.mag_mask)
    bits = U(shl(mag, U(U(23) - D.mantissa_bits)) + D.exp_offset)
    if not full:
        sub = np.float32(np.float32(mag) * U(D.q_bits).view(np.float32)).view(np.uint32)
        bits = U(sub) if mag < D.min_normal_mag else bits
    special = U(_INF) if mag == D.inf_mag else U(_QNAN)
    bits = special if mag > D.max_mag else bits
    bits = U(bits | shl(shr(U(c), D.sign_shift), U(31)))
    return U(_QNAN) if U(c) == D.nan_code else bits


@njit(cache=True, nogil=True)
def _checked(Fc, b, full, prefix):
    """(bits, is a value of the format) of float32 bits ``b``: it rounds to
    itself toward zero (``Fc``: rtz, no saturation, no flush; a zero of either
    sign is one, -0 reading as +0 where there is none), or is a NaN where the
    format has NaNs. ``prefix`` (bf16, tf32: :func:`float32_prefix`): the same
    test is that the fraction bits below the format's are zero, or a NaN.
    (A function of its own, not inlined by numba: compiled once for every
    kernel, and LLVM inlines it.)"""
    mag = U(b & U(_ABS))
    nan = mag > U(_INF)  # (rounds to numpy's NaN, a NaN even where the format has none)
    if prefix:
        low = U(shl(U(1), U(U(23) - Fc.mantissa_bits)) - U(1))
        return b, (U(b & low) == U(0)) | nan
    r, _, _ = _direct_one(Fc, b, RTZ, U(0), U(0), full, False)
    return r, ((r == b) & ~nan) | (mag == U(0)) | (nan & (Fc.no_nan == U(0)))


@njit(cache=True, nogil=True)
def _rounded(F, r, mode, full):
    """(float32 bits, code) of float32 bits ``r`` rounded into the format
    (``bits32_direct._direct_one``; compiled once for every kernel, as
    :func:`_checked`)."""
    bits, code, _ = _direct_one(F, r, mode, U(0), U(0), full, False)
    return bits, code


def _load(x, i, D, Fc, full, prefix):  # typed by the overload below
    raise NotImplementedError


@overload(_load)
def _load_impl(x, i, D, Fc, full, prefix):
    """(float32 bits, is a value) of operand element ``x[i]``: float32 values
    come as their uint32 bits and are checked; codes are decoded."""
    if x.dtype == types.uint32:
        def load_value(x, i, D, Fc, full, prefix):
            return _checked(Fc, U(x[np.uintp(i)]), full, prefix)  # unsigned index: no wraparound test
        return load_value

    def load_code(x, i, D, Fc, full, prefix):
        return _decode(D, U(x[np.uintp(i)]), full), True
    return load_code


def _store(out, i, bits, code):  # typed by the overload below
    raise NotImplementedError


@overload(_store)
def _store_impl(out, i, bits, code):
    """Write one result: float32 bits (uint32 out) or the code."""
    if out.dtype == types.uint32:
        def store_bits(out, i, bits, code):
            out[np.uintp(i)] = bits
        return store_bits

    def store_code(out, i, bits, code):
        out[np.uintp(i)] = code
    return store_code


@njit(cache=True, nogil=True)
def _sum_odd(xa, xb, rdown, nearest):
    """float32 bits of odd(a + b) for float32 bits xa, xb (TwoSum; see the
    module docstring), with IEEE's zero signs (``rdown``: rounding down).
    ``nearest`` (rne and rna into formats of p <= 11 bits): the float32 sum
    rounded to nearest instead, which rounds to nearest in the format like
    the exact sum (the 2p + 1 rule, module docstring)."""
    fa = U(xa).view(np.float32)
    fb = U(xb).view(np.float32)
    s = fa + fb
    s_bits = U(np.float32(s).view(np.uint32))
    s_mag = U(s_bits & U(_ABS))
    if not nearest:
        bb = s - fa
        e = (fa - (s - bb)) + (fb - bb)  # exact: a + b = s + e (s finite)
        away = (e > 0) == (s > 0)  # the exact sum is further from zero than s
        step = U(1) if away else U(0xFFFFFFFF)
        odd = (s_mag < U(_INF)) & (e != 0) & ((s_bits & U(1)) == U(0))
        s_bits = U(s_bits + step) if odd else s_bits
    finite_in = (U(xa & U(_ABS)) < U(_INF)) & (U(xb & U(_ABS)) < U(_INF))
    overflow = (s_mag == U(_INF)) & finite_in
    s_bits = U(U(s_bits & U(_SIGN)) | U(_F32_MAX)) if overflow else s_bits
    if rdown:  # an exact zero is -0 unless both terms are +0
        s_bits = U(U(xa | xb) & U(_SIGN)) if s_mag == U(0) else s_bits
    return s_bits


@njit(cache=True, nogil=True)
def _product_odd(xa, xb, wide):
    """float32 bits of odd(a * b): the float32 product (exact unless ``wide``),
    or the exact float64 product rounded to odd."""
    fa = U(xa).view(np.float32)
    fb = U(xb).view(np.float32)
    if wide:
        return float32_odd(np.float64(fa) * np.float64(fb))
    return U(np.float32(fa * fb).view(np.uint32))


def _make(op: int, mode: int, wide: bool, full: bool, nearest: bool, prefix: bool):
    """The kernel of ``op`` (ADD for add and sub, or MUL) in ``mode``, with
    ``wide`` products (:func:`wide_product`), for formats of float32's
    exponent range (``full``, see ``bits32_direct._direct_one``); ``nearest``:
    sums rounded to nearest in float32 (:func:`_sum_odd`); ``prefix``: the
    format is :func:`float32_prefix`. All six are compile-time constants: each
    kernel is one branch-free loop::

        kernel(q, qc, dq, neg_b, a, b, out) -> status

    ``q``: ``bits32_direct.params_array`` of the format in the mode; ``qc``:
    the same for rtz, no saturation or flush (the operand check); ``dq``:
    :func:`decode_params`; ``neg_b``: 0x80000000 to negate b (sub), else 0;
    ``a``, ``b``: uint32 bits of float32 values, or codes (uint8/uint16), a
    length-1 operand broadcast; ``out``: uint32 (float32 bits) or codes.
    Returns :data:`BAD_OPERAND` if an operand is not a value, else 0.

    Like ``bits32_direct._make``, the closure holds plain constants only (a
    compiled function in it would make numba's disk cache miss). The helpers
    are functions of their own, compiled once for all kernels (numba's own
    inlining copies their code into every caller, at a cost of seconds per
    kernel); LLVM inlines them.
    """
    rdown = mode == RDOWN

    @njit(cache=True, nogil=True, error_model="numpy")
    def kernel(q, qc, dq, neg_b, a, b, out):
        wide_vectors()  # (u32.wide_vectors: 512-bit lanes where the processor has them)
        F = _format_params(q)
        Fc = _format_params(qc)
        D = _unpack_decode(dq)
        neg = U(neg_b)
        n = out.shape[0]
        # A length-1 operand is read from a block of copies: the loop below
        # then reads both operands contiguously, and LLVM vectorises it.
        a_fill = np.full(min(n, _BLOCK), a[0]) if a.shape[0] == 1 else a[:0]
        b_fill = np.full(min(n, _BLOCK), b[0]) if b.shape[0] == 1 else b[:0]
        good = True
        for lo in range(0, n, _BLOCK):
            hi = min(lo + _BLOCK, n)
            a_blk = a_fill[:hi - lo] if a.shape[0] == 1 else a[lo:hi]
            b_blk = b_fill[:hi - lo] if b.shape[0] == 1 else b[lo:hi]
            o_blk = out[lo:hi]
            for i in range(hi - lo):
                xa, ok_a = _load(a_blk, i, D, Fc, full, prefix)
                xb, ok_b = _load(b_blk, i, D, Fc, full, prefix)
                good &= ok_a & ok_b
                if op == MUL:
                    r = _product_odd(xa, xb, wide)
                else:
                    r = _sum_odd(xa, U(xb ^ neg), rdown, nearest)
                r = U(_QNAN) if U(r & U(_ABS)) > U(_INF) else r  # the canonical NaN
                # mode + 0: an int, not a literal, so one compiled _rounded
                # serves every mode (LLVM folds the constant after inlining).
                bits, code = _rounded(F, r, mode + 0, full)
                _store(o_blk, i, bits, code)
        return 0 if good else BAD_OPERAND

    return kernel


_KERNELS: dict[tuple[int, int, bool, bool, bool, bool], Any] = {}


def kernel_for(op: int, fmt: Any, mode: int) -> Any:
    """The kernel of ``op`` (ADD, also for sub, or MUL) into ``fmt`` in
    ``mode`` (a deterministic one), made once and compiled on first use.

    >>> from lowprec import get_format
    >>> from lowprec._kernels.params import RNE
    >>> kernel_for(MUL, get_format("bf16"), RNE) is kernel_for(MUL, get_format("tf32"), RNE)
    True
    """
    nearest = op != MUL and mode in (RNE, RNA) and 2 * (fmt.mantissa_bits + 1) + 1 <= 24
    key = (op, mode, op == MUL and wide_product(fmt), bits32_direct.full_range(fmt), nearest,
           float32_prefix(fmt))
    found = _KERNELS.get(key)
    if found is None:
        found = _KERNELS[key] = _make(*key)
    return found
