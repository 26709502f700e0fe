"""NVFP4: E2M1 elements, an E4M3 scale per 16 values and an FP32 per-tensor scale.

A value is ``x = e * s_block * s_tensor`` with ``e`` an FP4 E2M1 element,
``s_block`` an FP8 E4M3 (positive) block scale shared by ``block_size`` = 16
consecutive values along ``axis`` and ``s_tensor`` one FP32 number for the
whole tensor (NVIDIA, "Introducing NVFP4 for efficient and accurate
low-precision inference", 2025; Blackwell block-scaled MMA).

The two-level scale follows NVIDIA's recipe as Transformer Engine (2.x,
``common/cast/nvfp4/core_nvfp4.cuh``) computes it, every step in FP32 with
round-to-nearest-even, which this module reproduces operation by operation:

1. global encode scale ``S_enc = 448 * 6 / amax(x)`` (``amax`` over the whole
   tensor; ``min(S_enc, FLT_MAX)``; 1 if ``amax`` is 0 or ``S_enc`` is 0);
   the stored per-tensor (decode) scale is ``s_tensor = 1 / S_enc``;
2. block scale ``s_block = e4m3(block_amax * (S_enc * (1/6)))``, rounded to
   nearest even and saturated at 448 (the CUDA ``satfinite`` conversion);
3. elements ``e = e2m1(x * min(1 / (s_block * s_tensor), FLT_MAX))``,
   saturated at 6; the product is rounded to FP32 first, as on the GPU, then
   rounded by :func:`lowprec.encode` in the requested mode.

``global_scale=`` gives ``s_tensor`` yourself (then ``S_enc = 1 / s_tensor``).
Input is converted to float32 first (exact for float32, bf16, fp16 input).
A block whose scale rounds to zero dequantizes to zero (its element codes are
whatever step 3 gives, as on the GPU). Choices of lowprec (the recipe has
none): a block holding NaN or ±inf gets the E4M3 NaN code (0x7F) as its scale
and element codes 0, so it dequantizes to NaN; such values are left out of
``amax(x)``.

Block variants (``block_size=``, ``scale_format=``, ``global_scale=``), each the
recipe above with one parameter changed, nothing else:

* ``block_size=32``: NVFP4 with blocks of 32 (two-level, UE4M3 scales);
* ``global_scale=1.0``: no tensor scale (``S_enc = s_tensor = 1``), so step 2 is
  ``s_block = e4m3(block_amax * fp32(1/6))``: E2M1 with one UE4M3 scale per block
  (``block_size=32``: "MXFP4 with UE4M3 scales"); block amaxes below ``6 * 2**-10``
  get the scale 0 (the block dequantizes to zero), above ``6 * 464`` the scale
  saturates at 448 and the elements at 6;
* ``scale_format="ue5m3"``: the block scales are NVIDIA's UE5M3 (``lowprec.get_format
  ("ue5m3")``: unsigned E5M3, bias 15, subnormals, no infinity, NaN = 0xFF, largest
  114688; CUDA 13.4 ``__nv_fp8_ue5m3``, PTX ISA 9.4 ``.ue5m3x2``), rounded to nearest
  even and saturated at 114688 as step 2 rounds E4M3 (``cvt.rn.satfinite``). No public
  rule derives a tensor scale for UE5M3 scales, so ``global_scale=None`` means no
  tensor scale (1) with them; pass ``global_scale`` to use one. A non-finite block
  gets the UE5M3 NaN code 0xFF.

>>> import numpy as np, lowprec.nvfp4 as nvfp4
>>> t = nvfp4.quantize(np.array([6.0, 3.0, -1.0, 0.25] * 4, dtype=np.float32))
>>> t.dequantize()[:2].tolist()  # s_tensor = 1/(2688/6) is not exact in FP32
[6.0000002682209015, 3.0000001341104507]
>>> float(t.dequantize()[3]), t.bits_per_value  # 0.25 is a tie between 0 and 0.5
(0.0, 6.5)
>>> u = nvfp4.quantize(np.array([6.0, 3.0, -1.0, 0.25] * 8), block_size=32,
...                    scale_format="ue5m3")
>>> u.scales.tolist(), u.dequantize()[:4].tolist()   # amax 6: scale 6/6 = 1
([1.0], [6.0, 3.0, -1.0, 0.0])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _blocks
from ._kernels import convert, route
from ._kernels.blocks import (
    dequantize_blocks,
    move_axis,
    nvfp4_block_amax,
    nvfp4_elements,
    nvfp4_ready,
)
from ._kernels.params import MODE_INT, STOCHASTIC
from ._kernels.sr import SR_BLOCK
from ._runtime import _get_rng, _random_words
from .formats import get_format
from .rounding import check_mode, decode, encode

__all__ = ["BLOCK_SCALE", "ELEMENT", "NVFP4Tensor", "SCALE_FORMATS", "global_encode_scale",
           "quantize"]

ELEMENT = get_format("fp4_e2m1")
BLOCK_SCALE = get_format("fp8_e4m3")
#: The block-scale formats, by the name ``quantize(scale_format=)`` takes: UE4M3 is
#: FP8 E4M3 with the sign bit 0 (NaN 0x7F), UE5M3 the unsigned E5M3 (NaN 0xFF).
SCALE_FORMATS = {"ue4m3": BLOCK_SCALE, "ue5m3": get_format("ue5m3")}
_SCALE_NAN = {"ue4m3": 0x7F, "ue5m3": 0xFF}
_F32 = np.float32
_FLT_MAX = _F32(np.finfo(np.float32).max)
_E4M3_NAN = 0x7F
_NO_SEEDS = np.empty(0, np.uint64)


def _check_scale_format(scale_format: str) -> str:
    key = scale_format.strip().lower() if isinstance(scale_format, str) else None
    if key not in SCALE_FORMATS:
        raise ValueError(f"scale_format must be one of {', '.join(SCALE_FORMATS)} (UE4M3: "
                         f"NVFP4's E4M3 block scale; UE5M3: NVIDIA's unsigned E5M3), got "
                         f"{scale_format!r}")
    return str(key)


def global_encode_scale(amax: float) -> np.float32:
    """``S_enc = 448 * 6 / amax`` in FP32, as Transformer Engine computes it."""
    amax = _F32(amax)
    with np.errstate(divide="ignore", over="ignore"):
        s = _F32(BLOCK_SCALE.max * ELEMENT.max) / amax
    s = min(s, _FLT_MAX)
    if amax == 0 or s == 0 or np.isnan(s):
        return _F32(1.0)
    return _F32(s)


_TABLES: dict[str, np.ndarray] = {}


def _element_table() -> np.ndarray:
    """The value of every E2M1 code, float64 (cached)."""
    if "e2m1" not in _TABLES:
        _TABLES["e2m1"] = np.asarray(decode(np.arange(16, dtype=np.uint8), ELEMENT))
    return _TABLES["e2m1"]


def _scale_table(scale_format: str = "ue4m3") -> np.ndarray:
    """The value of every scale code as float32 (E4M3: NaN for 0x7F, 0xFF), cached."""
    if scale_format not in _TABLES:
        _TABLES[scale_format] = decode(np.arange(256, dtype=np.uint8),
                                       SCALE_FORMATS[scale_format]).astype(_F32)
    return _TABLES[scale_format]


@dataclass(frozen=True, eq=False)
class NVFP4Tensor:
    """An NVFP4-quantized array.

    ``codes``: E2M1 codes (uint8, low 4 bits), the input's shape;
    ``scale_codes``: block-scale codes (uint8: UE4M3 = E4M3, or UE5M3), the input's
    shape with ``axis`` replaced by the number of blocks; ``global_scale``: the FP32
    per-tensor decode scale ``s_tensor`` (1 when there is none);
    ``scale_format``: ``"ue4m3"`` or ``"ue5m3"``.
    """

    codes: np.ndarray
    scale_codes: np.ndarray
    global_scale: np.float32
    shape: tuple[int, ...]
    axis: int
    block_size: int = 16
    scale_format: str = "ue4m3"

    @property
    def scales(self) -> np.ndarray:
        """Block scales ``s_block`` (float64; NaN marks a non-finite block)."""
        return decode(self.scale_codes, SCALE_FORMATS[self.scale_format])

    def _broadcast(self, per_block: np.ndarray, per_element: np.ndarray) -> np.ndarray:
        blocks = _blocks.to_blocks(per_element, self.axis, self.block_size)
        out = blocks * move_axis(per_block, self.axis, -1)[..., None]
        return _blocks.from_blocks(out, self.axis, self.shape[self.axis])

    def dequantize(self, dtype: Any = np.float64) -> np.ndarray:
        """``e * s_block * s_tensor``, exact in float64."""
        fast = dequantize_blocks(self.codes, self.scales * np.float64(self.global_scale),
                                 _element_table(), self.axis, self.block_size, dtype)
        return fast if fast is not None else self._dequantize_reference(dtype)

    def _dequantize_reference(self, dtype: Any = np.float64) -> np.ndarray:
        """:meth:`dequantize` in numpy steps (the reference of the compiled one)."""
        elems = decode(self.codes, ELEMENT)
        with np.errstate(invalid="ignore"):
            out = self._broadcast(self.scales * np.float64(self.global_scale), elems)
        return np.ascontiguousarray(out, dtype=dtype)

    def _block_mma_operand(self) -> dict[str, Any]:
        """What a block-scaled MMA reads (:mod:`lowprec.blockmma`)."""
        if self.scale_format != "ue4m3":
            raise ValueError(f"lowprec models no block-scaled MMA that reads "
                             f"{self.scale_format.upper()} scales (PTX ISA 9.4 gives them to "
                             "sm_107's tcgen05.mma, which is not modelled); dequantize first")
        return {"codes": self.codes, "element": ELEMENT, "scale_kind": "ue4m3",
                "scale_codes": self.scale_codes, "block": self.block_size, "axis": self.axis,
                "shape": self.shape, "global_scale": float(self.global_scale)}

    def clip_threshold(self) -> np.ndarray:
        """Per element, the smallest input magnitude that was clipped (saturated):
        ``7 * s_block * s_tensor`` (7 = E2M1's max 6 plus half its last gap)."""
        per_block = self.scales * np.float64(self.global_scale) * _blocks.overflow_threshold(
            ELEMENT)
        return self._broadcast(per_block, np.ones(self.shape))

    @property
    def n_blocks(self) -> int:
        return int(self.scale_codes.size)

    @property
    def nbytes(self) -> int:
        """4 bytes of FP32 global scale, one E4M3 byte per block, 4 bits per
        element (padding included)."""
        return 4 + self.n_blocks + -(-self.n_blocks * self.block_size * 4 // 8)

    @property
    def bits_per_value(self) -> float:
        n = int(np.prod(self.shape))
        return 8.0 * self.nbytes / n if n else float("nan")

    def pack(self) -> np.ndarray:
        """One ``uint8`` array: the FP32 global scale (4 bytes, little-endian),
        then the E4M3 block-scale bytes and the E2M1 codes two per byte (low
        nibble first), both in the block order of :meth:`lowprec.mx.MXTensor.pack`."""
        head = np.array([self.global_scale], dtype="<f4").view(np.uint8)
        scales = move_axis(self.scale_codes, self.axis, -1).reshape(-1)
        elems = _blocks.to_blocks(self.codes, self.axis, self.block_size)
        return np.concatenate([head, scales, _blocks.pack_bits(elems, 4)])

    @classmethod
    def from_packed(cls, data: bytes | np.ndarray, shape: tuple[int, ...], axis: int = -1,
                    block_size: int = 16, *, scale_format: str = "ue4m3") -> NVFP4Tensor:
        """Rebuild an :class:`NVFP4Tensor` from :meth:`pack`'s bytes."""
        scale_format = _check_scale_format(scale_format)
        header, scales, codes, shape, axis, block_size = _blocks.unpack_scaled(
            data, shape, axis, block_size, 4, 4, "NVFP4")
        gs = header.copy().view("<f4")[0]
        return cls(codes, scales, _F32(gs), shape, axis, block_size, scale_format)

    unpack = from_packed

    def __repr__(self) -> str:
        extra = "" if self.scale_format == "ue4m3" else f", scale_format={self.scale_format!r}"
        return (f"NVFP4Tensor(shape={self.shape}, axis={self.axis}, block_size="
                f"{self.block_size}, global_scale={float(self.global_scale)!r}{extra})")


def quantize(
    x: Any,
    axis: int = -1,
    block_size: int = 16,
    mode: str = "rne",
    global_scale: float | None = None,
    *,
    rng: Any = None,
    scale_format: str = "ue4m3",
) -> NVFP4Tensor:
    """Quantize ``x`` to NVFP4 along ``axis`` (see the module docstring for the recipe).

    ``mode``/``rng`` round the elements (any :data:`lowprec.MODES` mode;
    Transformer Engine uses ``rne``, and ``stochastic`` for gradients).
    ``global_scale`` is the FP32 per-tensor decode scale; by default
    ``amax(x) / (448 * 6)`` as the recipe computes it (UE4M3 scales), or 1 (no
    tensor scale) with ``scale_format="ue5m3"``. ``block_size`` (16 in NVFP4) and
    ``scale_format`` (``"ue4m3"``, NVFP4's; ``"ue5m3"``) give the block variants of
    the module docstring.

    The work is done by the compiled block kernels (:mod:`lowprec._kernels.blocks`: one
    pass for the block amaxes, one for the elements); :func:`_quantize_reference`, the
    numpy implementation the tests hold them equal to, takes what they do not (the
    stochastic mode on rows the block size does not divide, errors).
    """
    mode = check_mode(mode)
    block_size = _blocks.check_block_size(block_size)
    scale_format = _check_scale_format(scale_format)
    if global_scale is None and scale_format == "ue5m3":
        global_scale = 1.0  # no published tensor-scale rule for UE5M3 block scales
    arr = _blocks.as_working_array(x)
    with np.errstate(over="ignore"):
        x32 = arr.astype(np.float32, copy=False)
    if x32.ndim == 0:
        x32 = x32.reshape(1)
    axis = _blocks.normalize_axis(axis, x32.ndim)

    if global_scale is not None:
        s_dec = _F32(global_scale)
        if not (np.isfinite(s_dec) and s_dec > 0):
            raise ValueError(f"global_scale must be a positive finite float32, got {global_scale!r}")
    if x32.size and route.takes_bits32(ELEMENT):
        fast = _quantize_fast(x32, axis, block_size, mode, global_scale, rng, scale_format)
        if fast is not None:
            return fast
    return _quantize_reference(x32, axis, block_size, mode, global_scale, rng=rng,
                               scale_format=scale_format)


def _tensor_scales(amax: float, global_scale: float | None) -> tuple[np.float32, np.float32]:
    """``(S_enc, s_tensor)`` from the tensor's amax, or from the given decode scale."""
    if global_scale is None:
        s_enc = global_encode_scale(amax)
        return s_enc, _F32(1) / s_enc
    s_dec = _F32(global_scale)
    return _F32(1) / s_dec, s_dec


def _block_scale_codes(block_amax: np.ndarray, s_enc: np.float32,
                      scale_format: str = "ue4m3") -> np.ndarray:
    """Scale codes of ``block_amax * (S_enc / 6)`` (FP32, rne, saturating): what
    ``encode(..., "rne", saturate=True)`` gives, for E4M3 from its float32 kernel
    directly once it is compiled (UE5M3, unsigned with subnormals, is not a
    ``bits32`` format: ``encode`` always)."""
    s_dec_b = block_amax * (s_enc * _F32(1.0 / ELEMENT.max))
    np.minimum(s_dec_b, _FLT_MAX, out=s_dec_b)
    fmt = SCALE_FORMATS[scale_format]
    if route.takes_bits32(fmt):
        codes = np.empty(s_dec_b.shape, np.uint8)
        kernel, q = convert.kernel_for(fmt, MODE_INT["rne"], True, False, True)
        if route.ready(kernel, (q, s_dec_b, _NO_SEEDS, codes)):
            kernel(q, s_dec_b, _NO_SEEDS, codes)
            return codes  # every float32, NaN included, has an E4M3 code
    return np.asarray(encode(s_dec_b, fmt, "rne", saturate=True), dtype=np.uint8)


def _quantize_fast(x32: np.ndarray, axis: int, block_size: int, mode: str,
                   global_scale: float | None, rng: Any,
                   scale_format: str = "ue4m3") -> NVFP4Tensor | None:
    """:func:`quantize` through the block kernels (a pass for the block amaxes, a pass
    for the elements); None where it does not apply or a scaled element is NaN (the
    reference then raises)."""
    m = MODE_INT[mode]
    moved = move_axis(x32, axis, -1)
    cols = moved.shape[-1]
    nb = -(-cols // block_size)
    flat = np.ascontiguousarray(moved).reshape(-1)
    kernel, q = convert.kernel_for(ELEMENT, m, True, False, True)
    # Asked before any random word is drawn, so that the reference, answering while
    # a kernel is not compiled yet, draws the same words (the same bits).
    if not nvfp4_ready(flat, cols, block_size, kernel, q, np.empty(0, np.uint64),
                       *convert.kernel_for(BLOCK_SCALE, MODE_INT["rne"], True, False, True)):
        return None
    if m == STOCHASTIC:
        # The reference draws one seed per SR_BLOCK elements of its zero-padded blocks.
        if cols % block_size or math.lcm(block_size, SR_BLOCK) > 1 << 20:
            return None
        seeds = _random_words(_get_rng(rng), -(-moved.size // SR_BLOCK))
    elif rng is not None:
        return None  # the reference raises: rng is for stochastic rounding only
    else:
        seeds = np.empty(0, np.uint64)
    n_blocks = (flat.size // cols) * nb
    block_amax = np.empty(n_blocks, _F32)
    bad = np.empty(n_blocks, np.bool_)
    nvfp4_block_amax(flat, cols, block_size, block_amax, bad)
    s_enc, s_dec = _tensor_scales(float(block_amax.max()), global_scale)
    scale_codes = _block_scale_codes(block_amax, s_enc, scale_format)
    codes = nvfp4_elements(flat, cols, block_size, scale_codes, _scale_table(scale_format),
                           s_dec, bad, kernel, q, seeds)
    if codes is None:
        return None
    scale_codes[bad] = _SCALE_NAN[scale_format]
    codes = np.ascontiguousarray(move_axis(codes.reshape(moved.shape), -1, axis))
    scale_codes = np.ascontiguousarray(
        move_axis(scale_codes.reshape(moved.shape[:-1] + (nb,)), -1, axis))
    return NVFP4Tensor(codes, scale_codes, _F32(s_dec), tuple(x32.shape), axis, block_size,
                       scale_format)


def _quantize_reference(x32: np.ndarray, axis: int, block_size: int, mode: str,
                        global_scale: float | None, *, rng: Any = None,
                        scale_format: str = "ue4m3") -> NVFP4Tensor:
    """:func:`quantize` in whole-array numpy steps (``x32`` the float32 input, the other
    arguments checked): the reference of the block kernels."""
    blocks = _blocks.to_blocks(x32, axis, block_size)
    mag = np.abs(blocks)
    finite = np.isfinite(mag)
    bad_block = ~finite.all(axis=-1)
    mag = np.where(finite, mag, _F32(0))
    block_amax = mag.max(axis=-1) if mag.size else np.zeros(mag.shape[:-1], _F32)

    if global_scale is None:
        s_enc = global_encode_scale(block_amax.max() if block_amax.size else 0.0)
        s_dec = _F32(1) / s_enc
    else:
        s_dec = _F32(global_scale)
        if not (np.isfinite(s_dec) and s_dec > 0):
            raise ValueError(f"global_scale must be a positive finite float32, got {global_scale!r}")
        s_enc = _F32(1) / s_dec

    s_dec_b = block_amax * (s_enc * _F32(1.0 / ELEMENT.max))
    sfmt = SCALE_FORMATS[scale_format]
    scale_codes = encode(np.minimum(s_dec_b, _FLT_MAX), sfmt, "rne", saturate=True)
    s_block = decode(scale_codes, sfmt).astype(np.float32)
    with np.errstate(divide="ignore", over="ignore"):
        scale_rcp = np.minimum(_F32(1) / (s_block * s_dec), _FLT_MAX)
        scaled = blocks * scale_rcp[..., None]
    scaled = np.where(bad_block[..., None], _F32(0), scaled)
    codes = encode(scaled, ELEMENT, mode, saturate=True, rng=rng)
    scale_codes = np.where(bad_block, _SCALE_NAN[scale_format], scale_codes).astype(np.uint8)

    codes = np.ascontiguousarray(_blocks.from_blocks(codes, axis, x32.shape[axis]))
    scale_codes = np.ascontiguousarray(move_axis(scale_codes, -1, axis))
    return NVFP4Tensor(codes, scale_codes, _F32(s_dec), tuple(x32.shape), axis, block_size,
                       scale_format)
