"""32-bit integer lanes for numba kernels, and wide vectors of them.

:data:`U`, :func:`shl`, :func:`shr`, :func:`mul` and :func:`add` keep a
kernel's integers in 32 bits; :func:`wide_vectors` asks for 512-bit vectors.

numba widens every integer operation to 64 bits (``uint32 + uint32`` is a
``uint64``), so a loop over float32 bits would run in 64-bit SIMD lanes: half
as many per instruction, and AVX2 has no 64-bit min, max or int-to-float. The
kernels here keep 32-bit lanes by wrapping each result in ``U(...)`` (a
truncation, which LLVM folds back into a 32-bit add, and, or, compare or
select) and by shifting with :func:`shl`/:func:`shr`, which are 32-bit shifts
outright: LLVM cannot narrow a shift by a variable amount by itself, since
shifting an ``i64`` by 40 is defined and shifting an ``i32`` by 40 is not.

Shift amounts must be below 32 (as in C).

>>> from numba import njit
>>> @njit
... def f(x, n):
...     return shr(U(x), U(n)), shl(U(x), U(n))
>>> [int(v) for v in f(0x80000001, 31)]
[1, 2147483648]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import types
from numba.extending import intrinsic

__all__ = ["U", "WIDE", "add", "mul", "shl", "shr", "wide_vectors"]

#: The 32-bit lane type: ``U(expr)`` truncates a (widened) result back to 32 bits.
U = np.uint32


def _lanes(instruction: str, doc: str) -> Any:
    """A numba intrinsic ``f(x, y)``: LLVM's ``instruction`` on two uint32
    values, in 32 bits outright."""

    @intrinsic
    def op(typingctx, x, y):
        sig = types.uint32(types.uint32, types.uint32)

        def codegen(context, builder, signature, args):
            return getattr(builder, instruction)(args[0], args[1])

        return sig, codegen

    op.__doc__ = doc
    return op


shl = _lanes("shl", "``x << n`` in 32 bits (uint32; ``n`` < 32).")
shr = _lanes("lshr", "``x >> n`` in 32 bits, logical (uint32; ``n`` < 32).")
mul = _lanes("mul", """``x * y`` in 32 bits, wrapping (uint32): numba would multiply in 64 bits,
and AVX2 has no 64-bit vector multiply (LLVM builds one of three 32-bit ones).""")
add = _lanes("add", """``x + y`` in 32 bits, wrapping (uint32). Where LLVM narrows ``U(x + y)``
by itself, this is the same instruction; it matters for a value carried from one
iteration to the next (a counter), which LLVM would otherwise keep in 64-bit lanes
and truncate at every use.""")


#: The LLVM function attribute :func:`wide_vectors` sets.
WIDE = '"prefer-vector-width"="512"'


@intrinsic
def wide_vectors(typingctx):
    """``wide_vectors()`` in a kernel (or in a function numba inlines into it):
    let LLVM vectorise the kernel's loops in the processor's widest registers.

    LLVM vectorises in 256-bit registers by default on Intel's AVX-512
    processors ("prefer-256-bit", against the clock slow-down that 512-bit
    instructions cost the first of them). The rounding loops are long runs of
    32-bit integer operations, and on an Intel Xeon with AVX-512 (KVM model
    167) 512-bit lanes ran them 1.17-1.35x faster in cache and up to 1.4x
    from main memory (fp8 E4M3 rup at 10**7 values, ``out=``: 0.68x
    ``np.copyto`` -> 0.82x). A processor without AVX-512 has no wider
    registers, so there it changes nothing; it never changes a result.

    llvmlite accepts only LLVM's keyword attributes through its API, so the
    string attribute goes into the function's attribute set directly; should
    a later llvmlite keep its attributes otherwise, the hint is left out (the
    tests check that the kernels carry it).
    """
    sig = types.void()

    def codegen(context, builder, signature, args):
        try:
            set.add(builder.function.attributes, WIDE)
        except TypeError:  # not a set: a speed hint only
            pass
        return context.get_dummy_value()

    return sig, codegen
