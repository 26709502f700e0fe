"""A matrix product in the operands' own float type, the same on every machine.

``numpy.matmul`` calls the BLAS, whose float32 kernels add in an order that
depends on the processor (vector width, blocking, fused multiply-adds):
the same program trains to a different loss on an AVX2 and an AVX-512
machine. The trainer's matmuls take this loop instead (numpy, one k at a
time, while it compiles: the same operations):

    out[i, j] = (...((a[i,0]*b[0,j] + a[i,1]*b[1,j]) + a[i,2]*b[2,j]) ...)

every product rounded to the dtype, every sum rounded to the dtype, in k
order (what a plain loop without fused multiply-adds computes). The inner
loop runs along j, so the compiler vectorises across output elements
without reassociating any sum; numba compiles without ``fastmath``, so no
multiply and add are fused. IEEE arithmetic then makes every bit the same
on every processor. Four k at a time share one load and store of the
output row: about 20 G multiply-adds/s in float32 on one core of the
2-core development machine (AVX2). The trainer's matrices are small, so a
step of the demo model costs about what it did with numpy's BLAS; a wider
model pays more (docs/training.md, "Speed", gives both).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import route

__all__ = ["matmul_in_order"]


@njit(cache=True, nogil=True)
def _kernel(a, b, out):
    """``out = a @ b`` in k order (``b`` and ``out`` C-contiguous, out zeroed)."""
    m, kk = a.shape
    n = b.shape[1]
    k4 = kk - kk % 4
    for i in range(m):
        row = out[i]
        for k in range(0, k4, 4):  # four k at a time: the row is loaded and stored once
            a0, a1, a2, a3 = a[i, k], a[i, k + 1], a[i, k + 2], a[i, k + 3]
            b0, b1, b2, b3 = b[k], b[k + 1], b[k + 2], b[k + 3]
            for j in range(n):  # (the same sums in the same order, parenthesised)
                row[j] = (((row[j] + a0 * b0[j]) + a1 * b1[j]) + a2 * b2[j]) + a3 * b3[j]
        for k in range(k4, kk):
            aik = a[i, k]
            bk = b[k]
            for j in range(n):
                row[j] = row[j] + aik * bk[j]


def matmul_in_order(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of 2-D real arrays, accumulated in k order (module docstring) in
    float32, or in float64 if either is float64 (numpy's promotion, at least
    float32): bit-identical on every machine.

    >>> a = np.array([[1e8, 1.0, -1e8]], np.float32)
    >>> b = np.ones((3, 1), np.float32)
    >>> matmul_in_order(a, b)   # (1e8 + 1) rounds to 1e8 in float32, then - 1e8
    array([[0.]], dtype=float32)
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul_in_order needs 2-D operands (m, k) and (k, n); got shapes "
                         f"{a.shape} and {b.shape}")
    dtype = np.result_type(a.dtype, b.dtype, np.float32)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"matmul_in_order needs real operands (bool, integer or float of at "
                        f"most 64 bits); got {a.dtype} and {b.dtype}")
    out = np.zeros((a.shape[0], b.shape[1]), dtype)
    # Contiguous operands of one dtype: one compiled kernel per dtype.
    args = (np.ascontiguousarray(a, dtype), np.ascontiguousarray(b, dtype), out)
    if route.ready(_kernel, args):
        _kernel(*args)
    else:  # while it compiles: the same products and sums in numpy
        _in_order_numpy(*args)
    return out


def _in_order_numpy(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """The kernel's products and sums in numpy, one k at a time (``out`` zeroed). Tried:
    ``np.add.accumulate`` or ``reduce`` along k of all the products at once, no faster
    on the trainer's shapes."""
    with np.errstate(over="ignore", invalid="ignore"):  # IEEE results, as the kernel's
        for k in range(a.shape[1]):
            out += a[:, k, None] * b[k]
