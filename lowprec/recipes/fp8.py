"""FP8 training recipes: MXFP8 (torchao ``MXLinear``, Transformer Engine
``MXFP8BlockScaling``) and DeepSeek-V3's block-wise FP8 (torchao
``blockwise_fp8_training``, Transformer Engine ``Float8BlockScaling``).

A linear layer ``Y = X W^T`` runs three GEMMs, each reducing over a different axis;
every operand is quantized *from the high-precision tensor* along that GEMM's
reduction axis (so X, W and dY are each quantized twice, once per direction; nothing
quantized is re-quantized). With X (M x K), W (N x K), dY (M x N):

=======  ==================  =======================  ===============================
GEMM     computes            MXFP8: blocks of 32      DeepSeek-V3: tiles
=======  ==================  =======================  ===============================
fprop    Y  = X W^T          X along K, W along K      X 1x128, W 128x128
dgrad    dX = dY W           dY along N, W along N     dY 1x128, W 128x128 (the same)
wgrad    dW = dY^T X         dY along M, X along M     dY^T 1x128, X^T 1x128 (128x1 of X)
=======  ==================  =======================  ===============================

:data:`GEMM_AXES` holds the axis column. MXFP8's scale rule is ``"rceil"`` (the
E8M0 scale is ``amax / 448`` rounded up to a power of two: TE's and torchao's
``RCEIL`` recipe; torchao's default ``MXLinear`` config uses ``"floor"``, pass it).
Transformer Engine keeps E4M3 for every MXFP8 tensor; ``grad_fmt="mxfp8_e5m2"``
gives the hybrid choice. DeepSeek-V3's scales (TE ``Float8BlockScaling``:
``force_pow_2_scales=True`` by default; DeepSeek-V3.1's UE8M0 scales) are powers of
two with ``pow2=True`` (default); ``pow2=False`` is torchao's ``448 / amax`` in FP32.
An all-zero tile gets scale 1 (lowprec, as TE's current scaling); torchao clamps amax
to 1e-12 instead (its scale is then 4.48e14): the codes are 0 either way.

:func:`deepseek_gemm` multiplies two tile-quantized operands as DeepSeek-V3 describes
(technical report, arXiv 2412.19437, section 3.3.2): the tensor cores sum 128
products (the ``h100`` accumulation model of :mod:`lowprec.matmul`), and every 128
the partial sum is promoted to FP32 on the CUDA cores, multiplied by the two tiles'
dequantization scales (``s = fp32(s_a * s_b)``) and accumulated with one FMA
(``acc = fp32(acc + s * partial)``, exact before its single rounding whenever the two
addends are less than 29 binades apart).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _blocks, mx
from ..matmul import matmul
from ..rounding import decode
from ..scaling import ScaledTensor, quantize_tiles

__all__ = ["GEMM_AXES", "deepseek_gemm", "deepseek_operands", "mxfp8_operands"]

#: Per GEMM, each operand's name and the axis it is quantized along (its reduction axis).
GEMM_AXES = {
    "fprop": (("x", 1), ("w", 1)),
    "dgrad": (("dy", 1), ("w", 0)),
    "wgrad": (("dy", 0), ("x", 0)),
}
_F32 = np.float32


def _operands(x: Any, w: Any, dy: Any) -> dict[str, np.ndarray]:
    ops = {"x": _blocks.as_working_array(x), "w": _blocks.as_working_array(w),
           "dy": _blocks.as_working_array(dy)}
    for name, a in ops.items():
        if a.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {a.shape}")
    (m, k), (n, k2), (m2, n2) = ops["x"].shape, ops["w"].shape, ops["dy"].shape
    if k != k2 or m != m2 or n != n2:
        raise ValueError(f"shapes do not make a linear layer: x {ops['x'].shape} (M, K), "
                         f"w {ops['w'].shape} (N, K), dy {ops['dy'].shape} (M, N)")
    return ops


def mxfp8_operands(x: Any, w: Any, dy: Any, *, fmt: str = "mxfp8_e4m3",
                   grad_fmt: str | None = None, scale_rule: str = "rceil",
                   block_size: int = 32) -> dict[str, tuple[mx.MXTensor, mx.MXTensor]]:
    """The six MXFP8 operands of a linear layer's three GEMMs: ``{"fprop": (X, W),
    "dgrad": (dY, W), "wgrad": (dY, X)}``, each an :class:`~lowprec.mx.MXTensor` of the
    untransposed tensor, blocked along the axis of :data:`GEMM_AXES`.

    ``grad_fmt`` is dY's element format (default ``fmt``).
    """
    ops = _operands(x, w, dy)
    fmts = {"x": fmt, "w": fmt, "dy": grad_fmt or fmt}

    def q(name: str, axis: int) -> mx.MXTensor:
        return mx.quantize(ops[name], fmts[name], axis=axis, block_size=block_size,
                           scale_rule=scale_rule)

    return {gemm: (q(*a), q(*b)) for gemm, (a, b) in GEMM_AXES.items()}


def _tiles_along(a: np.ndarray, axis: int, tile: tuple[int, int], pow2: bool,
                 fmt: str) -> ScaledTensor:
    """``a`` (axis 1) or ``a.T`` (axis 0) quantized in ``tile``-shaped tiles."""
    src = a if axis == 1 else np.ascontiguousarray(a.T)
    return quantize_tiles(src, fmt, tile, power_of_two=pow2)


def deepseek_operands(x: Any, w: Any, dy: Any, *, pow2: bool = True, fmt: str = "fp8_e4m3",
                      tile: int = 128) -> dict[str, tuple[ScaledTensor, ScaledTensor]]:
    """DeepSeek-V3's FP8 operands of a linear layer's GEMMs, as
    :class:`~lowprec.scaling.ScaledTensor` tiles of the operand *as the GEMM reads it*
    (reduction axis last): ``fprop``: (X 1x128, W 128x128); ``dgrad``: (dY 1x128,
    W^T 128x128); ``wgrad``: (dY^T 1x128, X^T 1x128). Each feeds :func:`deepseek_gemm`.
    """
    ops = _operands(x, w, dy)
    t1, t2 = (1, tile), (tile, tile)
    out: dict[str, tuple[ScaledTensor, ScaledTensor]] = {}
    for gemm, ((an, aa), (bn, ba)) in GEMM_AXES.items():
        out[gemm] = (_tiles_along(ops[an], aa, t1, pow2, fmt),
                     _tiles_along(ops[bn], ba, t2 if bn == "w" else t1, pow2, fmt))
    return out


def _per_chunk_scale_inv(t: ScaledTensor, tile: int) -> np.ndarray:
    """(rows, K / tile) float32 dequantization scales of an operand with K last."""
    inv = (_F32(1) / t.scale.astype(_F32)).astype(_F32)
    return np.repeat(inv, t.tile[0], axis=0)[:t.shape[0]] if t.tile else inv


def deepseek_gemm(a: ScaledTensor, b: ScaledTensor, *, tile: int = 128,
                  inner: str = "h100") -> np.ndarray:
    """``A @ B^T`` (A: M x K, B: N x K, both tile-quantized with K last) with promotion
    to FP32 every ``tile`` products (module docstring); float32 result (M x N)."""
    if a.tile is None or b.tile is None or a.tile[1] != tile or b.tile[1] != tile:
        raise ValueError(f"deepseek_gemm takes tile-quantized operands with {tile} columns "
                         f"per tile (lowprec.scaling.quantize_tiles)")
    (m, k), (n, k2) = a.shape, b.shape
    if a.fmt != b.fmt:
        raise ValueError(f"A is {a.fmt.name} and B is {b.fmt.name}: one FP8 format, please")
    if k != k2:
        raise ValueError(f"A is {a.shape} and B is {b.shape}: their K differ")
    av, bv = decode(a.codes, a.fmt), decode(b.codes, b.fmt)
    sa, sb = _per_chunk_scale_inv(a, tile), _per_chunk_scale_inv(b, tile)
    acc = np.zeros((m, n), np.float64)
    for c in range(-(-k // tile)):
        sl = slice(c * tile, min((c + 1) * tile, k))
        part = matmul(av[:, sl], bv[:, sl].T, inputs=a.fmt, accumulate="fp32", model=inner)
        s = (sa[:, c][:, None] * sb[:, c][None, :]).astype(_F32).astype(np.float64)
        acc = (acc + s * part).astype(_F32).astype(np.float64)  # one FMA, rounded to FP32
    return acc.astype(_F32)
