"""Measuring the NVFP4 recipe's GEMMs on your tensors (tutorial 13).

:func:`wgrad` forms the weight-gradient GEMM ``dW = X^T dY`` from NVFP4 operands
quantized along the tokens as the recipe does (optionally after the random Hadamard
transform, which cancels in the product), :func:`flushed_share` counts the values a 1x16
quantization sends to zero, :func:`rel_error` is the relative error of one array
against another.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = rng.standard_normal((64, 32)).astype(np.float32)
>>> g = rng.standard_normal((64, 16)).astype(np.float32)
>>> exact = x.astype(np.float64).T @ g
>>> rel_error(wgrad(x, g, hadamard=True), exact) < 0.25
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _blocks
from ..hadamard import rht
from .nvfp4 import fake_quantize

__all__ = ["flushed_share", "rel_error", "wgrad"]


def rel_error(a: Any, b: Any) -> float:
    """``||a - b|| / ||b||`` (Frobenius norms, float64)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.shape != b64.shape:
        raise ValueError(f"shapes differ: {a64.shape} and {b64.shape}")
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(b64))


def _two_d(name: str, a: Any) -> np.ndarray:
    arr = _blocks.as_working_array(a)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (tokens x features), got shape {arr.shape}")
    return arr


def wgrad(x: Any, g: Any, *, hadamard: bool = True, rounding: str = "rne",
          rng: Any = None) -> np.ndarray:
    """``x^T g`` (x: tokens x K, g: tokens x N) from NVFP4 operands, each quantized in
    1x16 blocks along the tokens (the wgrad GEMM's reduction axis), after the random
    Hadamard transform along the tokens with ``hadamard=True`` (the recipe's; the tokens
    a multiple of 16). ``rounding``/``rng``: of ``g`` (the recipe rounds it
    ``"stochastic"``). Float64 products of the dequantized values (K x N)."""
    xa, ga = _two_d("x", x), _two_d("g", g)
    if xa.shape[0] != ga.shape[0]:
        raise ValueError(f"x {xa.shape} and g {ga.shape} must have the same tokens (rows)")
    xq = fake_quantize(xa, axis=0, hadamard=hadamard)
    gq = fake_quantize(ga, rounding=rounding, axis=0, hadamard=hadamard, rng=rng)
    return xq.T @ gq


def flushed_share(g: Any, *, hadamard: bool = False) -> float:
    """The share of ``g``'s non-zero values (of the rotated ``g`` with ``hadamard=True``)
    that a 1x16 NVFP4 quantization along the tokens (axis 0) sends to zero."""
    ga = _two_d("g", g).astype(np.float32)
    src = rht(ga, axis=0) if hadamard else ga
    q = fake_quantize(src, axis=0)
    nonzero = src != 0
    n = int(np.count_nonzero(nonzero))
    return int(np.count_nonzero(nonzero & (q == 0))) / max(n, 1)
