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
(:func:`_ordinary_fp` and its twins); a piece with one other input takes the long loop,
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

The module is in three files: :mod:`.direct_params` (which formats, and their
constants), :mod:`.direct_round` (one element, inlined) and this one (the
loop and the kernels); the names of the first two are re-exported here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

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
    no_redo,
    no_short,
    ordinary_bounds,
    ordinary_from,
)
from .memory import AHEAD, FAR, PIECE, ahead
from .params import RNE, STOCHASTIC
from .sr import SR_BLOCK, sr_hi, sr_keys, sr_lo, sr_step
from .u32 import U, wide_vectors

__all__ = ["DIRECT_MODES", "FULL_KERNELS", "KERNELS", "NOT_NEAREST", "NearestEven",
           "PLAIN_KERNELS", "fpu_rounds_to_nearest",
           "full_range", "kernel", "ordinary_bounds", "ordinary_from", "params_array", "plain",
           "rne_by_addition", "supports"]


@njit(cache=True, nogil=True, inline="always")
def _loop(F, xbits, seeds, out, mode, full, codes, fp, one, ordinary, short, redo):
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
    piece then in L1) takes the short loop of ``short`` (an ``_ordinary_*`` route), about
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
                        bits, code = short(F, b, mode, wh, fp, codes)
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
                bits, code, maybe = redo(F, b, mode, wh, sr_lo(wh, k1), full, fp, True)
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
    Each branch below passes :func:`_loop` the one route of the element
    function its constants pick (:func:`_direct_one`'s docstring says why).
    """

    @njit(cache=True, nogil=True)
    def kernel(q, x, seeds, out):
        F = _unpack(q)
        xbits = x.view(np.uint32)  # x: float32 values or their bits
        if plain and mode == STOCHASTIC:
            amax = _loop(F, xbits, seeds, out, mode, full, codes, False, _plain_one, False,
                         no_short, _plain_one)
        elif plain:
            amax = _loop(F, xbits, seeds, out, mode, full, codes, False, _plain_one, False,
                         no_short, no_redo)
        elif addition:
            if (F.rne_fp == U(0)) or not fpu_rounds_to_nearest(F):
                return NOT_NEAREST
            amax = _loop(F, xbits, seeds, out, mode, full, codes, True, _direct_fp, True,
                         _ordinary_fp, no_redo)
        elif full and mode == STOCHASTIC:
            amax = _loop(F, xbits, seeds, out, mode, full, codes, False, _direct_full, False,
                         no_short, _direct_full)
        elif full:
            amax = _loop(F, xbits, seeds, out, mode, full, codes, False, _direct_full, False,
                         no_short, no_redo)
        elif mode == STOCHASTIC:
            amax = _loop(F, xbits, seeds, out, mode, full, codes, False, _direct_sr, True,
                         _ordinary_sr, _direct_sr)
        else:
            amax = _loop(F, xbits, seeds, out, mode, full, codes, False, _direct_det, True,
                         _ordinary_det, no_redo)
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
