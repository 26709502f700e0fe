"""The loop of the direct kernels (:mod:`.bits32_direct`, :mod:`.pow2`): one
element function on every float32 input, in pieces sized for the memory, with
stochastic rounding's words made as it goes.

:func:`make_kernel` writes the loop once for every kernel; the kernel's
``route`` (a closure constant) picks the element function at each of its
three call sites. numba prunes the branches a closure constant decides before
it copies the chosen function's code in, so each kernel holds one route. The
loop is the kernel's own body, not a function inlined into it: numba copies
an ``inline="always"`` function's code into its caller before it prunes that
code's branches, so the loop's element functions, passed as arguments, cost
the compiler more (each kernel compiled 0.45-0.6 s sooner once the loop became
its body, at the same speed: ``docs/kernels.md``, ``bench_compile.py --kernels``).

Stochastic rounding makes only the top half of each word (``sr.sr_hi``, in
32-bit lanes). An element that comes back unsure (its word's bottom half
would decide) gets its input written as its value, and after its block the
loop redoes the block with whole words (the element function's ``exact``
rule, every element, so that the loop holds one more copy of it, not two): it
reads the input again, which is still there when ``out`` is the input itself,
and the other elements' rounded values round to themselves (they are the
format's values, or its infinities and NaN).

Arrays of at least ``memory.FAR`` elements are walked in pieces of
``memory.PIECE``, each asking for the memory ``memory.AHEAD`` elements on
(:mod:`.memory`): a loop this long outruns the processor's own prefetchers.
Smaller arrays are one piece a block.

The routes with a short loop (``ADDITION``, ``SR``, ``DET``: the formats
without float32's exponent range) check each piece first: a piece whose
inputs are all ordinary (:func:`.direct_round.ordinary_from`: one pass for the
largest of ``|x| - lo``, the piece then in L1) takes the short loop of an
``_ordinary_*`` route, about half the instructions of the element function. A
piece that is not gets the long loop, and so do the next 1, 3, 7, ... 63
pieces unchecked while no piece has passed since (back-off): data that never
passes (fp4 on a normal distribution times 8, where half the inputs overflow)
pays for a check once in 64 pieces, data that passes but for a few stray
elements loses a piece or two to each. Either loop gives the same bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .direct_params import _INF, _unpack
from .direct_round import (
    _direct_det,
    _direct_fp,
    _direct_full,
    _direct_sr,
    _ordinary_det,
    _ordinary_fp,
    _ordinary_sr,
    _plain_one,
    fpu_rounds_to_nearest,
    ordinary_from,
)
from .memory import AHEAD, FAR, PIECE, ahead
from .params import RNE, STOCHASTIC
from .pow2_round import _pow2_one
from .pow2_round import _unpack as _unpack_pow2
from .sr import SR_BLOCK, sr_hi, sr_keys, sr_lo, sr_step
from .u32 import U, wide_vectors

__all__ = ["ADDITION", "DET", "FULL", "NOT_NEAREST", "PLAIN", "POW2", "ROUTES", "SR",
           "make_kernel"]

#: The element routes: :func:`.direct_round._plain_one` (bf16, tf32 without
#: saturation or flushing), rne by the float32 addition (``_direct_fp``),
#: float32's exponent range (``_direct_full``), stochastic rounding and the
#: deterministic modes of the other formats (``_direct_sr``, ``_direct_det``),
#: and the powers of two (:func:`.pow2_round._pow2_one`).
PLAIN, ADDITION, FULL, SR, DET, POW2 = range(6)
ROUTES = (PLAIN, ADDITION, FULL, SR, DET, POW2)

#: What an ``ADDITION`` kernel answers where the float32 addition does not
#: round to nearest even (or the format is not ``rne_by_addition``).
NOT_NEAREST = 2


def make_kernel(route: int, mode: int, codes: bool) -> Any:
    """The kernel of one element ``route`` in one rounding ``mode``, writing
    codes (``codes``) or float32 values: kernel(q, x, seeds, out) -> 1 if a
    NaN has no code in the format, else 0 (:data:`NOT_NEAREST` from an
    ``ADDITION`` kernel that did not run). ``seeds``: one per SR_BLOCK elements
    (stochastic rounding; else unused). Compiled on first use, for each dtype
    of ``out`` it meets.

    The closure holds plain constants and nothing else: numba's disk cache
    keys a closure by its variables' pickled bytes, which for a compiled
    function differ between processes (the cache would never hit). Codes and
    values are separate kernels so that each compiles one loop, not both.
    """
    if route not in ROUTES:
        raise ValueError(f"route {route!r} is not one of {ROUTES}")
    if route == ADDITION and mode != RNE:
        raise ValueError("the ADDITION route rounds to nearest even only")
    if (route == SR) != (mode == STOCHASTIC) and route in (SR, DET):
        raise ValueError("the SR route is stochastic rounding's, DET the other modes'")
    full = route in (PLAIN, FULL)  # float32's exponent range: no tiny inputs
    fp = route == ADDITION
    stoch = mode == STOCHASTIC
    ordinary = route in (ADDITION, SR, DET)  # a short loop for ordinary pieces

    @njit(cache=True, nogil=True)
    def kernel(q, x, seeds, out):
        wide_vectors()  # (marks the kernel: it may use 512-bit vectors)
        if route == POW2:
            F = _unpack_pow2(q)
        else:
            F = _unpack(q)
        if route == ADDITION:
            if (F.rne_fp == U(0)) or not fpu_rounds_to_nearest(F):
                return NOT_NEAREST
        xbits = x.view(np.uint32)  # x: float32 values or their bits
        n = xbits.shape[0]
        far = n >= FAR  # from main memory: pieces that ask for memory AHEAD of them
        step = SR_BLOCK if stoch or far else max(n, 1)  # a block per stochastic seed
        piece = PIECE if far else step
        amax = U(0)  # the largest input magnitude bits (a NaN's are above inf's)
        lo_b = span = U(0)
        if ordinary:
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
                            if route == ADDITION:
                                bits, code = _ordinary_fp(F, b, mode, wh, fp, codes)
                            elif route == SR:
                                bits, code = _ordinary_sr(F, b, mode, wh, fp, codes)
                            else:
                                bits, code = _ordinary_det(F, b, mode, wh, fp, codes)
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
                        if route == PLAIN:
                            bits, code, maybe = _plain_one(F, b, mode, wh, U(0), full, fp)
                        elif route == ADDITION:
                            bits, code, maybe = _direct_fp(F, b, mode, wh, U(0), full, fp)
                        elif route == FULL:
                            bits, code, maybe = _direct_full(F, b, mode, wh, U(0), full, fp)
                        elif route == SR:
                            bits, code, maybe = _direct_sr(F, b, mode, wh, U(0), full, fp)
                        elif route == DET:
                            bits, code, maybe = _direct_det(F, b, mode, wh, U(0), full, fp)
                        else:
                            bits, code, maybe = _pow2_one(F, b, mode, wh, U(0), full, fp)
                        os_[i] = code if codes else np.int32(b if maybe != U(0) else bits)
                        unsure = U(unsure | maybe)
                        amax = max(amax, U(b & U(0x7FFFFFFF)))
                    if ordinary:
                        wait -= 1
                run = end
            if stoch and unsure != U(0):  # redo the block with whole words
                xs = xbits[lo:hi]
                os_ = out[lo:hi] if codes else out[lo:hi].view(np.int32)
                z, k1 = sr_keys(seed)
                for i in range(hi - lo):
                    b = U(xs[i])
                    z = sr_step(z)
                    wh = sr_hi(z, k1)
                    wl = sr_lo(wh, k1)
                    # (stochastic rounding only: ADDITION and DET never get here)
                    if route == PLAIN:
                        bits, code, maybe = _plain_one(F, b, mode, wh, wl, full, fp, True)
                    elif route == FULL:
                        bits, code, maybe = _direct_full(F, b, mode, wh, wl, full, fp, True)
                    elif route == SR:
                        bits, code, maybe = _direct_sr(F, b, mode, wh, wl, full, fp, True)
                    else:
                        bits, code, maybe = _pow2_one(F, b, mode, wh, wl, full, fp, True)
                    os_[i] = code if codes else np.int32(bits)
        if route == POW2:
            return 0  # every input has a code
        return 1 if (amax > U(_INF)) & (F.no_nan != U(0)) else 0

    return kernel
