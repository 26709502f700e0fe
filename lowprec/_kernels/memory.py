"""Asking for memory ahead of a kernel's loop: :func:`ahead`.

A rounding loop spends 20 to 60 instructions on eight elements. On arrays that
come from main memory (10**7 float32) such loops ran far below their in-cache
speed on an Intel Xeon with AVX-512, though they ask memory for no more than a
copy does: the processor's own prefetchers did not keep ahead of a loop that
slow, and it waited for its input lines and for the output lines it writes
(a line is read before it is written). Writing codes, a quarter of the bytes,
was worst: fp8 E4M3 rne to codes ran at 0.2x ``np.copyto``.

So for arrays of at least :data:`FAR` elements the loops of
:mod:`.bits32_direct` walk their blocks in pieces of :data:`PIECE` elements and,
before each piece, ask for the lines :data:`AHEAD` elements further on: the
input's to read (``prefetcht0``) and the output's to write (``prefetchw``, which
fetches a line ready to be written). Smaller arrays, likely in cache already,
keep one piece per block: in cache the pieces cost 14-40% (bf16, the shortest
loop, the most). A prefetch is a hint:
it changes no result, and a processor without the instruction ignores it.

Measured (one thread, 10**7 values, kernels alone, each over ``np.copyto`` timed
just before it, the median of five alternations of the old and new code):
fp8 E4M3 rne 0.64 -> 0.80, rup 0.34 -> 0.56, rne to codes 0.22 -> 0.67, stochastic
0.15 -> 0.31 (with :func:`.sr.sr_step` besides); bf16 rne 0.81 -> 0.92; e8m0 rup
0.68 -> 0.99.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["AHEAD", "FAR", "PIECE", "ahead"]

#: Arrays of at least this many elements are taken to come from main memory
#: (with the output, twice L2's 1-2 MB); smaller ones run one piece per block.
FAR = 1 << 18
#: Elements of a loop's piece there.
PIECE = 256
#: How far ahead of a piece the lines are asked for, in elements (4 KB of float32).
AHEAD = 1024


def _prefetch(write: int) -> object:
    """The intrinsic ``prefetch(array, i)``: ask for the line of ``array[i]``
    (to write when ``write``), kept in every cache level (locality 3)."""

    @intrinsic
    def prefetch(typingctx, arr, i):
        sig = types.void(arr, i)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]])
            i8p = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            # llvm.prefetch.p0 (opaque pointers) or .p0i8 (older LLVMs)
            fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], fnty)
            builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, write),
                              ir.Constant(i32, 3), ir.Constant(i32, 1)])
            return context.get_dummy_value()

        return sig, codegen

    return prefetch


prefetch_read = _prefetch(0)
prefetch_write = _prefetch(1)


@njit(cache=True, nogil=True, inline="always")
def ahead(x, out, lo, hi):
    """Ask for the lines of ``x[lo:hi]`` to read and of ``out[lo:hi]`` to
    write (clipped to the arrays; one request per 64 bytes)."""
    n = min(hi, x.shape[0])
    for j in range(lo, n, max(64 // x.itemsize, 1)):
        prefetch_read(x, j)
    n = min(hi, out.shape[0])
    for j in range(lo, n, max(64 // out.itemsize, 1)):
        prefetch_write(out, j)
