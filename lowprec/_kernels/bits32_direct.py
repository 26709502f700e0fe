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
(:func:`ordinary_from`) no result is special or flushed. So the other
formats' loop checks each piece of its input first (the largest of
``|x| - lo``: a few instructions per 16 elements) and rounds a piece of such
inputs in a short loop without the selects (:func:`_ordinary_fp` and its
twins); a piece with one other input takes the long loop, whole
(:mod:`.direct_loop`). Both give the same bits; the short loop is about half
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

The module is in four files: :mod:`.direct_params` (which formats, and their
constants), :mod:`.direct_round` (one element, inlined), :mod:`.direct_loop`
(the loop, shared with :mod:`.pow2`) and this one (the kernels of each
format family and mode); the names of the first two are re-exported here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .direct_loop import ADDITION, DET, FULL, NOT_NEAREST, PLAIN, SR, make_kernel
from .direct_params import (  # noqa: F401 (re-exported: this module's names of old)
    _AT_BIT_23,
    _INF,
    _QNAN,
    DIRECT_MODES,
    DirectParams,
    _f32_bits,
    _unpack,
    full_range,
    kernel_params,
    params_array,
    plain,
    rne_by_addition,
    supports,
)
from .direct_round import (  # noqa: F401 (re-exported)
    _direct_det,
    _direct_fp,
    _direct_full,
    _direct_one,
    _direct_sr,
    _finish,
    _ordinary_det,
    _ordinary_fp,
    _ordinary_sr,
    _plain_one,
    _rne_by_addition,
    _round_bits,
    _round_deterministic,
    _round_stochastic,
    _round_tiny,
    fpu_rounds_to_nearest,
    ordinary_bounds,
    ordinary_from,
)
from .params import RNE, STOCHASTIC

__all__ = ["DIRECT_MODES", "FULL_KERNELS", "KERNELS", "NOT_NEAREST", "NearestEven",
           "PLAIN_KERNELS", "fpu_rounds_to_nearest",
           "full_range", "kernel", "ordinary_bounds", "ordinary_from", "params_array", "plain",
           "rne_by_addition", "supports"]


def _make(mode: int, full: bool, codes: bool, plain: bool = False, addition: bool = False):
    """The kernel for one rounding ``mode`` (:func:`.direct_loop.make_kernel`,
    one route of the element function), for formats with float32's exponent
    range (``full``) or the others, writing codes (``codes``) or float32 values.
    With ``addition`` (rne, not ``full``) it rounds by the float32 addition and
    answers :data:`NOT_NEAREST`, writing nothing, where that route does not
    hold (:class:`NearestEven` then runs the integer kernel)."""
    route = (PLAIN if plain else ADDITION if addition else FULL if full
             else SR if mode == STOCHASTIC else DET)
    return make_kernel(route, mode, codes)


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
