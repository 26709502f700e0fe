"""The random Hadamard transform (RHT) of NVIDIA's NVFP4 training recipe.

Before the weight-gradient GEMM ``dW = dY^T X`` quantizes its operands to NVFP4,
the recipe multiplies every group of 16 consecutive values along the GEMM's
reduction axis by the same orthogonal 16x16 matrix ``R = diag(s) H / 4``:
``H`` is the Sylvester Hadamard matrix (entries +-1, ``H H^T = 16 I``) and ``s``
a fixed vector of 16 signs. ``R`` is orthogonal, so the GEMM's result is the
same in exact arithmetic (``(dY R)^T (X R) = dY^T X`` group by group), but an
outlier is spread over its whole group, which makes the block amax smaller
relative to the rest of the block and the FP4 error with it.

Sources (read, not copied): Transformer Engine,
``transformer_engine/pytorch/custom_recipes/reference_nvfp4.py``
(``get_wgrad_sign_vector``, ``_build_hadamard_matrix``, ``_apply_rht``: the
transform is ``x_group @ (diag(s) H) * (1/sqrt(16))``), and torchao,
``torchao/prototype/moe_training/nvfp4_training/hadamard_utils.py``
(``get_hadamard_matrix``, ``get_rht_matrix``: the same product in bfloat16, the
result rounded to bfloat16 as the GPU kernels do before quantizing).

How lowprec computes it (the convention, exact where the references agree):
every output is ``0.25 * sum_j (+-x_j)``, the 16 signed inputs summed by a fast
Walsh-Hadamard butterfly in float64, then rounded once to float32 (RNE) and, with
``precision="bfloat16"`` (the default, what the recipe feeds the quantizer), once
more to bfloat16 (RNE). The float64 sum is exact whenever a group's 16 inputs
span fewer than 29 binades (float32 inputs; 45 for bfloat16 inputs), so then
the result is the exact sum correctly rounded, whatever order a GPU or BLAS
accumulates in. Wider groups are the one place where references may differ
from each other (their accumulation order is not specified).

>>> import numpy as np, lowprec as lp
>>> r = lp.hadamard.rht_matrix()
>>> bool(np.array_equal(r @ r.T, np.eye(16)))
True
>>> y = lp.hadamard.rht(np.eye(16, dtype=np.float32)[:1] * 8)  # one outlier, spread
>>> sorted(set(np.abs(y).ravel().tolist()))
[2.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._blocks import as_working_array, normalize_axis
from ._kernels.blocks import move_axis
from ._kernels.recipe import fwht_columns, fwht_groups

__all__ = ["SIGN_VECTOR", "hadamard_matrix", "rht", "rht_matrix"]

#: Transformer Engine's fixed sign vector of the wgrad RHT (``get_wgrad_sign_vector``).
SIGN_VECTOR = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], np.int8)
_SIZES = (4, 16, 64, 256)  # powers of 4: 1/sqrt(n) is a power of two, the scaling exact
_PRECISIONS = ("bfloat16", "float32")


def hadamard_matrix(n: int = 16) -> np.ndarray:
    """The n x n Sylvester Hadamard matrix (entries +-1, float64), ``n`` a power of two:
    ``H_1 = [1]``, ``H_2k = [[H_k, H_k], [H_k, -H_k]]``."""
    if not isinstance(n, (int, np.integer)) or n < 1 or n & (n - 1):
        raise ValueError(f"a Hadamard matrix here has a power-of-two size, got {n!r}")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def _check_signs(signs: Any) -> np.ndarray:
    s = np.asarray(SIGN_VECTOR if signs is None else signs)
    if s.ndim != 1 or s.size not in _SIZES or not np.isin(s, (-1, 1)).all():
        raise ValueError(f"signs must be a vector of +1/-1 of length {' or '.join(map(str, _SIZES))}"
                         f" (16 for NVFP4), got {s.tolist()!r}")
    return s.astype(np.float64)


def rht_matrix(signs: Any = None) -> np.ndarray:
    """``diag(signs) @ H / sqrt(n)`` (float64, exact), the matrix each group of n
    values is multiplied by from the right; ``signs`` defaults to :data:`SIGN_VECTOR`."""
    s = _check_signs(signs)
    n = s.size
    return s[:, None] * hadamard_matrix(n) / np.sqrt(n)


def rht(x: Any, signs: Any = None, axis: int = -1, precision: str = "bfloat16") -> np.ndarray:
    """The random Hadamard transform of ``x`` along ``axis``, in groups of ``len(signs)``
    (16: the recipe's) consecutive values.

    Returns float32 (shape of ``x``) holding bfloat16 values with ``precision="bfloat16"``
    (the recipe's), or the float32 results with ``precision="float32"``. The length of
    ``axis`` must be a multiple of the group size (the recipe raises too).
    """
    if precision not in _PRECISIONS:
        raise ValueError(f"precision must be one of {_PRECISIONS}, got {precision!r}")
    s = _check_signs(signs)
    n = s.size
    arr = as_working_array(x)
    if arr.ndim == 0:
        raise ValueError("rht needs an array with at least one dimension")
    axis = normalize_axis(axis, arr.ndim)
    if arr.shape[axis] % n:
        raise ValueError(f"the length of axis {axis} ({arr.shape[axis]}) must be a multiple of "
                         f"the Hadamard size {n}")
    if arr.ndim == 2 and axis == 0:  # the wgrad operands: transformed and transposed at once
        out_t = np.empty(arr.shape[::-1], np.float32)
        fwht_columns(np.ascontiguousarray(arr), s, 1.0 / np.sqrt(n), precision == "bfloat16",
                      out_t)
        return out_t.T
    moved = np.ascontiguousarray(move_axis(arr, axis, -1))
    out = np.empty(moved.shape, np.float32)
    fwht_groups(moved.reshape(-1), s, 1.0 / np.sqrt(n), precision == "bfloat16",
                 out.reshape(-1))
    return move_axis(out, -1, axis)
