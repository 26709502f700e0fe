"""Blackwell block-scaled MMA: ``lp.matmul(qa, qb, model="b200")`` on MX and NVFP4 tensors.

Blackwell's ``tcgen05.mma...block_scale`` (B200) and RTX Blackwell's
``mma.sync...block_scale`` (sm_120) multiply block-scaled operands directly:
``D = (A * scale_A) . (B * scale_B) + C``, one scale per block of K (PTX ISA,
"Block Scaling for tcgen05.mma"). How the sum is formed follows MMA-Sim
(microsoft/MMA-Sim c785138, ``nv_fused_dot_add`` and
``nv_fused_dot_add_with_block_scale``); both instructions share it:

* ``kind::mxf8f6f4`` (k = 32, E8M0 scales, block 32): every exact product times
  its two power-of-two scales is a term; the terms and C are aligned to the
  largest nominal exponent, truncated to **25** fraction bits below it, summed
  exactly and normalised once into FP32 toward zero (the tensor-core rule of
  :mod:`lowprec.tensorcores` with the scale exponents added).
* ``kind::mxf4nvf4`` (k = 64, FP4 E2M1 elements; E8M0 scales with block 32 or 16,
  or UE4M3 scales with block 16): each group of 16 products is summed exactly and
  multiplied by its two scales; its nominal exponent is the scales' (every group
  takes part in the alignment, zero or not); groups and C are aligned, truncated
  to **35** fraction bits, summed and normalised once into FP32 toward zero.

FP6 (E2M3, E3M2) elements go through ``kind::mxf8f6f4``: MMA-Sim leaves them as a
TODO; the PTX ISA defines them as operands of the same instruction kind with the
same block scaling, so lowprec gives them the FP8 rule (derived from the ISA's
definition, not measured). Mixed element types (e.g. FP8 x FP4) are allowed there,
as in the ISA. A K longer than one instruction chains instructions (each D the
next C); the result is rounded (``mode``) to ``output``. NVFP4's per-tensor FP32
scales are not part of the MMA: they are applied afterwards as cuBLAS's ``alpha``,
``D * fl32(gA * gB)`` rounded once to FP32.

Conventions beyond the sources: a zero product does not set the alignment in
``mxf8f6f4`` (lowprec's tensor-core convention; MMA-Sim lets zeros take part),
a NaN scale, NaN operand, ``inf * 0`` or infinities of both signs give NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kernels import params
from ._kernels.route_compiled import kernel
from ._runtime import _threads
from .formats import FloatFormat, get_format
from .rounding import check_mode, decode, encode

__all__ = ["BLOCK_MMA_MODELS", "block_scaled_matmul", "is_block_scaled"]

#: Model names that run block-scaled operands, with the instruction they name.
BLOCK_MMA_MODELS = {
    "b200": "tcgen05.mma.block_scale", "blackwell": "tcgen05.mma.block_scale",
    "b200:tcgen05": "tcgen05.mma.block_scale",
    "b200:tcgen05.mma.block_scale": "tcgen05.mma.block_scale",
    "rtx5090": "mma.sync.block_scale", "rtx_blackwell": "mma.sync.block_scale",
    "rtx5090:mma.block_scale": "mma.sync.block_scale",
    "rtx_blackwell:mma.block_scale": "mma.sync.block_scale",
}
_E4M3 = get_format("fp8_e4m3")
_FP32 = get_format("fp32")
_FP4 = "fp4_e2m1"
_F8F6F4 = ("fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", _FP4)


def is_block_scaled(x: Any) -> bool:
    """Whether ``x`` is an MX or NVFP4 quantized tensor (it offers its MMA operand)."""
    return hasattr(x, "_block_mma_operand")


def _operand(q: Any, name: str, k_axis: int) -> dict[str, Any]:
    op = q._block_mma_operand()
    if len(op["shape"]) != 2:
        raise ValueError(f"{name} must be a 2-D quantized tensor, got shape {op['shape']}")
    if op["axis"] != k_axis:
        want = "axis=1 (along K of an (M, K) A)" if k_axis == 1 else "axis=0 (along K of a (K, N) B)"
        raise ValueError(f"{name} is scaled in blocks along axis {op['axis']}; a block-scaled "
                         f"MMA needs {want}: quantize with that axis")
    return op


def _unpack(codes: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, ...]:
    c = np.ascontiguousarray(codes, dtype=np.int64)
    sig, exp = np.empty(c.shape, np.int64), np.empty(c.shape, np.int64)
    kernel("unpack")(params.format_params(fmt), c, sig, exp)
    nom = np.maximum(exp + fmt.mantissa_bits, fmt.emin)
    vals = decode(codes.astype(fmt.code_dtype), fmt)
    spec = np.zeros(c.shape, np.int64)
    spec[np.isinf(vals) & (vals > 0)] = 1
    spec[np.isinf(vals) & (vals < 0)] = 2
    spec[np.isnan(vals)] = 3
    return sig, exp, nom, spec


def _scales(op: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(significand, lsb exponent, nominal exponent) per block; significand -1 for NaN."""
    codes = np.ascontiguousarray(op["scale_codes"]).astype(np.int64)
    if op["scale_kind"] == "e8m0":
        exp = codes - 127
        sig = np.where(codes == 0xFF, -1, 1).astype(np.int64)
        return sig, exp, exp.copy()
    mag = codes & 0x7F  # UE4M3: the sign bit is ignored (MMA-Sim takes |scale|)
    sig, exp = np.empty(mag.shape, np.int64), np.empty(mag.shape, np.int64)
    kernel("unpack")(params.format_params(_E4M3), mag, sig, exp)
    nom = np.where(sig == 0, -(1 << 30), np.maximum(exp + 3, _E4M3.emin))  # 0: no part
    sig = np.where(mag == 0x7F, -1, sig)
    return sig, exp, nom


def block_scaled_matmul(qa: Any, qb: Any, c: Any = None, *, model: Any = "b200",
                        output: FloatFormat | str = "fp32", mode: str = "rne") -> np.ndarray:
    """``qa @ qb + c`` on a Blackwell block-scaled MMA (module docstring), as float64.

    ``qa``: an (M, K) MX or NVFP4 tensor quantized along axis 1; ``qb``: (K, N)
    along axis 0; ``c``: (M, N) values (rounded to FP32 first) or None.

    >>> import numpy as np, lowprec as lp
    >>> qa = lp.mx.quantize(np.ones((1, 64)), "mxfp4", axis=1)
    >>> qb = lp.mx.quantize(np.ones((64, 1)), "mxfp4", axis=0)
    >>> float(lp.matmul(qa, qb, model="b200")[0, 0])
    64.0
    """
    key = model.strip().lower() if isinstance(model, str) else ""
    if key not in BLOCK_MMA_MODELS:
        raise ValueError(f"block-scaled operands need a Blackwell block-scale MMA model; got "
                         f"{model!r}; known: {', '.join(BLOCK_MMA_MODELS)}")
    if not (is_block_scaled(qa) and is_block_scaled(qb)):
        raise TypeError("a block-scaled matmul needs both operands quantized (lp.mx.quantize "
                        "or lp.nvfp4.quantize); dequantize the other or quantize both")
    oa, ob = _operand(qa, "a", 1), _operand(qb, "b", 0)
    (M, K), (K2, N) = oa["shape"], ob["shape"]
    if K != K2:
        raise ValueError(f"a is {M}x{K} and b is {K2}x{N}: K differs")
    if oa["scale_kind"] != ob["scale_kind"] or oa["block"] != ob["block"]:
        raise ValueError(f"a and b need one scale type and block: a has {oa['scale_kind']} "
                         f"block {oa['block']}, b has {ob['scale_kind']} block {ob['block']}")
    fa, fb, kind_s, block = oa["element"], ob["element"], oa["scale_kind"], oa["block"]
    if fa.name == _FP4 and fb.name == _FP4:
        kind, k_instr, frac = 1, 64, 35  # kind::mxf4nvf4
        if not (block == 16 or (block == 32 and kind_s == "e8m0")):
            raise ValueError(f"mxf4nvf4 takes E8M0 block 16 or 32 or UE4M3 block 16, got "
                             f"{kind_s} block {block}")
    else:
        kind, k_instr, frac = 0, 32, 25  # kind::mxf8f6f4
        bad = [f.name for f in (fa, fb) if f.name not in _F8F6F4]
        if bad or kind_s != "e8m0" or block != 32:
            raise ValueError(f"mxf8f6f4 takes {', '.join(_F8F6F4)} elements with E8M0 scales "
                             f"in blocks of 32; got {fa.name} x {fb.name}, {kind_s} block {block}")
    asig, aexp, anom, aspec = _unpack(oa["codes"], fa)
    bsig, bexp, bnom, bspec = _unpack(np.ascontiguousarray(ob["codes"].T), fb)
    sa_sig, sa_exp, sa_nom = _scales(oa)
    sb_sig, sb_exp, sb_nom = (np.ascontiguousarray(x.T) for x in _scales(ob))
    Pc = params.format_params(_FP32)
    if c is None:
        cc = np.zeros(M * N, np.int64)
    else:
        cv = np.broadcast_to(np.asarray(c, dtype=np.float64), (M, N))
        cc = np.ascontiguousarray(encode(cv, _FP32), dtype=np.int64).ravel()
    ia = np.repeat(np.arange(M, dtype=np.int64), N)
    ib = np.tile(np.arange(N, dtype=np.int64), M)
    out = np.empty(M * N, np.int64)
    n_out = M * N
    nt = max(1, min(_threads(), n_out // 64))
    cuts = [n_out * t // nt for t in range(nt + 1)]

    def run(t: int) -> None:
        kernel("block_mma")(Pc, asig, aexp, anom, bsig, bexp, bnom, aspec, bspec, sa_sig, sa_exp,
                         sa_nom, sb_sig, sb_exp, sb_nom, block,
                         kind, k_instr, frac, ia, ib, cc, cuts[t], cuts[t + 1], out)

    if nt == 1:
        run(0)
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=nt) as pool:
            list(pool.map(run, range(nt)))
    d = decode(out.astype(np.uint32), _FP32).reshape(M, N)
    alpha = np.float32(np.float32(oa["global_scale"]) * np.float32(ob["global_scale"]))
    if alpha != 1:
        with np.errstate(over="ignore", invalid="ignore"):
            d = (d.astype(np.float32) * alpha).astype(np.float64)
    fout = get_format(output)
    return decode(encode(d, fout, check_mode(mode)), fout)
