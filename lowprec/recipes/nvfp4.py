"""NVIDIA's NVFP4 training recipe, ingredient by ingredient.

The recipe (Transformer Engine ``recipe.NVFP4BlockScaling``; its pure-PyTorch
reference ``transformer_engine/pytorch/custom_recipes/reference_nvfp4.py``, and
torchao's transcription ``test/prototype/moe_training/nvfp4_training/nvfp4_reference.py``)
quantizes the operands of every linear layer's three GEMMs to NVFP4 (E2M1
elements, an E4M3 scale per block, an FP32 scale per tensor):

===========  ====================  ========================================================
GEMM         operands              how (:func:`quantize_operand` ``role=``)
===========  ====================  ========================================================
fprop        X, W                  X: 1x16 blocks along K, RNE; W: 16x16 blocks, RNE
dgrad        dY, W                 dY: 1x16 along N, stochastic rounding; W^T: 16x16 blocks
wgrad        dY^T, X^T             RHT (size 16, fixed signs) along M, then 1x16, SR for dY
===========  ====================  ========================================================

16x16 weight blocks make the quantized W and W^T the same numbers (a block's
scale does not depend on the direction), so fprop and dgrad see one weight.
Layers that stay in BF16: everything that is not a linear layer's GEMM
(embeddings, norms, softmax, attention's batched GEMMs, the loss), and by the
NVFP4 paper's recipe (NVIDIA, "Pretraining Large Language Models with NVFP4",
2025) the last few linear layers of the network; :data:`KEEP_BF16` lists them.

:func:`quantize` is the quantizer the rows above call. Its arithmetic is the
reference's, operation by operation in float32 (see ``docs/recipes.md``)::

    S_enc   = min(448 * 6 / amax, FLT_MAX), 1 if that is 0 or amax is 0
    s_block = e4m3_rne(min(block_amax * (S_enc * (1/6)), 448))
    enc     = min(1 / (s_block * (1 / S_enc)), FLT_MAX)
    e       = e2m1(clamp(x * enc, -6, 6))

``block_amax`` is over 1x16 or 16x16 tiles. Rounding of ``e``: ``"rne"``, or
``"stochastic"`` with 8 random bits per element: with ``q`` the E2M1 gap at
``|v|``, ``lo = q * floor(|v| / q)`` and ``t = floor(256 * (|v| - lo) / q)``,
``|v|`` rounds to ``lo + q`` iff ``r + t >= 256`` (``r`` the element's random
byte: the bits are added to the dropped part and the carry rounds up), so up with
probability exactly ``t / 256``. ``rbits=`` (uint8, one per element, C order of
the operand) gives the bytes; by default they come from
``np.random.default_rng(rng).integers(0, 256, n, dtype=np.uint8)``.

``four_over_six=True`` is Transformer Engine's 4over6 (``nvfp4_use_4over6``):
each block is quantized twice, with its scale mapping the block amax to 6 and to
4 (the scale times 1.5), and keeps the candidate whose error (sum of absolute
errors, or squared with ``error="mse"``) against the input is smaller; ties keep 6.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _blocks
from .._kernels import convert
from .._kernels import recipe as _k
from .._kernels.blocks import move_axis
from .._kernels.params import MODE_INT
from .._runtime import _get_rng
from ..hadamard import rht, rht_matrix
from ..nvfp4 import (
    BLOCK_SCALE,
    ELEMENT,
    NVFP4Tensor,
    _block_scale_codes,
    _scale_table,
    global_encode_scale,
)
from ..rounding import decode, encode

__all__ = ["KEEP_BF16", "ROLES", "RecipeNVFP4Tensor", "four_over_six_candidates",
           "fake_quantize", "quantize", "quantize_along", "quantize_operand", "random_bytes",
           "unrotate"]

_F32 = np.float32
_FLT_MAX = _F32(np.finfo(np.float32).max)
_E4M3_NAN = 0x7F
_BLOCK_SHAPES = ((1, 16), (16, 16))
_ROUNDINGS = ("rne", "stochastic")
_ERRORS = ("mae", "mse")

#: What the recipe keeps in BF16 (NVFP4 paper, section 4; Transformer Engine applies
#: NVFP4 to ``Linear``/``LayerNormLinear``/``GroupedLinear`` GEMMs only).
KEEP_BF16 = (
    "embeddings and the output projection (lm head)",
    "normalization layers, softmax, activations, residual additions",
    "attention's score and value GEMMs (batched, not weights)",
    "the last linear layers of the network (the paper keeps about the last 15% in BF16)",
    "optimizer state and master weights (FP32)",
)

#: :func:`quantize_operand` roles: (block shape, rounding, random Hadamard transform).
ROLES = {
    "fprop_input": ((1, 16), "rne", False),
    "weight": ((16, 16), "rne", False),
    "dgrad_grad": ((1, 16), "stochastic", False),
    "wgrad_grad": ((1, 16), "stochastic", True),
    "wgrad_input": ((1, 16), "rne", True),
}


@dataclass(frozen=True, eq=False)
class RecipeNVFP4Tensor(NVFP4Tensor):
    """An :class:`~lowprec.nvfp4.NVFP4Tensor` along the last axis whose scales may be
    shared by ``block_rows`` rows (16x16 blocks: ``scale_codes`` holds each block's
    code on every one of its rows, the layout of Transformer Engine's reference)."""

    block_rows: int = 1

    @property
    def _rows(self) -> int:
        return int(np.prod(self.shape[:-1], dtype=np.int64))

    @property
    def n_blocks(self) -> int:
        return int(-(-self._rows // self.block_rows) * self.scale_codes.shape[-1])

    @property
    def nbytes(self) -> int:
        """4 bytes of FP32 global scale, one E4M3 byte per block (per tile), 4 bits per
        element (the last axis padded to whole blocks)."""
        return 4 + self.n_blocks + -(-self._rows * self.scale_codes.shape[-1] * 16 // 2)

    def pack(self) -> np.ndarray:
        """:meth:`NVFP4Tensor.pack`'s layout with one scale byte per *tile* (the first of
        its rows), so ``pack().size == nbytes``; :meth:`from_packed` undoes it."""
        head = np.array([self.global_scale], dtype="<f4").view(np.uint8)
        nb = self.scale_codes.shape[-1]
        tiles = self.scale_codes.reshape(self._rows, nb)[::self.block_rows].reshape(-1)
        codes = np.ascontiguousarray(self.codes).reshape(self._rows, self.shape[-1])
        padded = np.zeros((codes.shape[0], nb * 16), np.uint8)
        padded[:, :codes.shape[1]] = codes
        return np.concatenate([head, tiles, _blocks.pack_bits(padded, 4)])

    @classmethod
    def from_packed(cls, data: Any, shape: tuple[int, ...], axis: int = -1,
                    block_size: int = 16, block_rows: int = 1, *,
                    scale_format: str = "ue4m3") -> RecipeNVFP4Tensor:
        """Rebuild a :class:`RecipeNVFP4Tensor` (last axis, blocks of 16) from :meth:`pack`."""
        shape = tuple(int(v) for v in shape)
        if scale_format != "ue4m3":
            raise ValueError("recipe NVFP4 tensors have UE4M3 (E4M3) block scales, got "
                             f"scale_format={scale_format!r}")
        if not shape or _blocks.normalize_axis(axis, len(shape)) != len(shape) - 1 \
                or block_size != 16 or block_rows not in (1, 16):
            raise ValueError("recipe NVFP4 tensors are blocked along the last axis in 1x16 or "
                             "16x16 blocks (block_rows 1 or 16)")
        buf = (np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray))
               else np.asarray(data, dtype=np.uint8)).reshape(-1)
        rows, cols = int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]
        nb = -(-cols // 16)
        n_tiles = -(-rows // block_rows) * nb
        need = 4 + n_tiles + -(-rows * nb * 16 // 2)
        if buf.size != need:
            raise ValueError(f"packed recipe NVFP4 data of shape {shape} is {need} bytes, "
                             f"got {buf.size}")
        gs = buf[:4].copy().view("<f4")[0]
        tiles = buf[4:4 + n_tiles].reshape(-(-rows // block_rows), nb)
        scales = np.repeat(tiles, block_rows, axis=0)[:rows]
        codes = _blocks.unpack_bits(buf[4 + n_tiles:], 4, rows * nb * 16).reshape(rows, nb * 16)
        return cls(np.ascontiguousarray(codes[:, :cols]).reshape(shape),
                   np.ascontiguousarray(scales).reshape(shape[:-1] + (nb,)), _F32(gs), shape,
                   len(shape) - 1, 16, block_rows=block_rows)


def random_bytes(n: int, rng: Any = None) -> np.ndarray:
    """The default random bytes of stochastic rounding: ``n`` uint8 from
    ``np.random.default_rng(rng).integers(0, 256, n, dtype=np.uint8)``."""
    return _get_rng(rng).integers(0, 256, n, dtype=np.uint8)


def _check(block_shape: Any, rounding: str, error: str, e4m3_max: int) -> tuple[int, int]:
    shape = tuple(block_shape) if isinstance(block_shape, (tuple, list)) else block_shape
    if shape not in _BLOCK_SHAPES:
        raise ValueError(f"block_shape must be (1, 16) or (16, 16), got {block_shape!r}")
    if rounding not in _ROUNDINGS:
        raise ValueError(f"rounding must be one of {_ROUNDINGS}, got {rounding!r}")
    if error not in _ERRORS:
        raise ValueError(f"error must be one of {_ERRORS}, got {error!r}")
    if e4m3_max not in (448, 256):
        raise ValueError(f"e4m3_max must be 448 or 256 (Transformer Engine's), got {e4m3_max!r}")
    return shape


def _tiles(a: np.ndarray, tr: int) -> np.ndarray:
    """(R, C) -> (R/tr, tr, C/16, 16) view."""
    r, c = a.shape
    return a.reshape(r // tr, tr, c // 16, 16)


def _per_row(tile_vals: np.ndarray, tr: int) -> np.ndarray:
    """(R/tr, nb) per-tile values -> (R/tr, tr, nb, 1), broadcastable over a tile."""
    return np.broadcast_to(tile_vals[:, None, :, None], (tile_vals.shape[0], tr,
                                                        tile_vals.shape[1], 1))


def _e2m1_values() -> np.ndarray:
    return np.asarray(decode(np.arange(16, dtype=np.uint8), ELEMENT), np.float32)


def _scale_values(codes: np.ndarray) -> np.ndarray:
    return np.asarray(decode(codes, BLOCK_SCALE), np.float32)


def four_over_six_candidates(x: np.ndarray, tile_amax: np.ndarray, amax: np.float32, tr: int,
                             error: str = "mae", e4m3_max: int = 448):
    """Transformer Engine's 4over6 on a padded float32 ``x`` (R, C) with per-tile amaxes
    ``tile_amax`` (R/tr, C/16): returns (E4M3 tile codes, E2M1 codes, S_enc) of the
    chosen candidate per tile, every step as in ``_quantize_blockwise_4over6_reference``."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s_enc = _F32(e4m3_max * 6) / _F32(amax)
        s_enc = min(s_enc, _FLT_MAX)
        if s_enc == 0:
            s_enc = _F32(1)
        s_dec = _F32(1) / s_enc
        base = (tile_amax / _F32(6)) * s_enc
        table = _e2m1_values()
        out = []
        for factor in (_F32(1.5), _F32(1)):
            sc = encode(np.minimum(base * factor, _F32(448)), BLOCK_SCALE, "rne", saturate=True)
            enc = np.minimum(_F32(1) / (_scale_values(sc) * s_dec), _FLT_MAX)
            v = np.clip(_tiles(x, tr) * _per_row(enc, tr), _F32(-6), _F32(6))
            q = encode(v, ELEMENT, "rne", saturate=True)
            # the error in the input's domain: ((e * s_block) * amax) / (6 * e4m3_max) - x
            val = (table[q] * _per_row(_scale_values(sc), tr)) * _F32(amax)
            diff = val / _F32(6 * e4m3_max) - _tiles(x, tr)
            term = np.abs(diff) if error == "mae" else diff * diff
            err = np.zeros(term.shape[:-1], np.float32)
            for i in range(16):  # in element order, float32, as the reference adds
                err += term[..., i]
            rows = err  # (R/tr, tr, nb): the 2D case sums its rows in a tree
            while rows.shape[1] > 1:
                h = rows.shape[1] // 2
                rows = rows[:, :h] + rows[:, h:]
            out.append((sc, q, rows[:, 0]))
    (sc4, q4, e4), (sc6, q6, e6) = out
    pick4 = e4 < e6
    codes = np.where(_per_row(pick4, tr), q4, q6)
    return np.where(pick4, sc4, sc6).astype(np.uint8), codes.astype(np.uint8), s_enc


def quantize(x: Any, block_shape: Any = (1, 16), rounding: str = "rne", *, rbits: Any = None,
             rng: Any = None, four_over_six: bool = False, error: str = "mae",
             e4m3_max: int = 448, global_amax: float | None = None) -> RecipeNVFP4Tensor:
    """Quantize ``x`` to NVFP4 along its last axis as the recipe does (module docstring).

    ``x``: an array with at least one dimension (seen as rows x last axis; rows and the
    last axis are zero-padded to the block shape). ``block_shape``: ``(1, 16)`` or
    ``(16, 16)``. ``rounding``: ``"rne"`` or ``"stochastic"`` (``rbits``/``rng`` as in the
    module docstring). ``four_over_six``/``error``/``e4m3_max``: 4over6 (``e4m3_max=256``
    is Transformer Engine's option that keeps the map-to-4 scale in range).
    ``global_amax``: the tensor amax to use instead of ``max |x|`` (as the recipe's
    kernels take it from a separate amax pass). A block holding NaN or inf gets the E4M3
    NaN scale code and element codes 0 (a lowprec convention; ``docs/recipes.md``).
    """
    tr, _ = _check(block_shape, rounding, error, e4m3_max)
    if e4m3_max != 448 and not four_over_six:
        raise ValueError("e4m3_max=256 is a four_over_six option")
    if rounding == "rne" and (rbits is not None or rng is not None):
        raise ValueError("rbits and rng are for rounding='stochastic' only")
    arr = _blocks.as_working_array(x)
    if arr.ndim == 0:
        raise ValueError("quantize needs an array with at least one dimension")
    with np.errstate(over="ignore"):
        x32 = arr.astype(np.float32, copy=False)
    shape = x32.shape
    x2 = x32.reshape(int(np.prod(shape[:-1], dtype=np.int64)), shape[-1])
    r, c = x2.shape
    rp, cp = -(-r // tr) * tr, -(-c // 16) * 16
    if (rp, cp) == (r, c):
        xp = np.ascontiguousarray(x2)
    else:
        xp = np.zeros((rp, cp), np.float32)
        xp[:r, :c] = x2
    tile_amax = np.empty((rp // tr, cp // 16), np.float32)
    bad = np.empty(tile_amax.shape, np.bool_)
    if xp.size:
        _k.tile_amax(xp, tr, tile_amax, bad)
    if global_amax is None:
        amax = _F32(tile_amax.max()) if tile_amax.size else _F32(0)
    else:
        amax = _F32(global_amax)
        if not (np.isfinite(amax) and amax >= 0):
            raise ValueError(f"global_amax must be a finite float32 >= 0, got {global_amax!r}")

    if four_over_six:
        if rounding != "rne":
            raise ValueError("four_over_six picks between round-to-nearest candidates; "
                             "use rounding='rne'")
        xz = np.where(np.isfinite(xp), xp, _F32(0))
        scale_codes, codes, s_enc = four_over_six_candidates(xz, tile_amax, amax, tr, error,
                                                             e4m3_max)
        codes = np.where(np.repeat(np.repeat(bad, tr, 0), 16, 1), np.uint8(0),
                         codes.reshape(rp, cp))
    else:
        s_enc = global_encode_scale(amax)
        scale_codes = _block_scale_codes(tile_amax.reshape(-1), s_enc).reshape(tile_amax.shape)
        with np.errstate(divide="ignore", over="ignore"):
            enc = np.minimum(_F32(1) / (_scale_values(scale_codes) * (_F32(1) / s_enc)),
                             _FLT_MAX).astype(np.float32)
        stochastic = rounding == "stochastic"
        if stochastic:
            bits = _rbits(rbits, rng, (r, c))
            if (rp, cp) != (r, c):
                full = np.zeros((rp, cp), np.uint8)
                full[:r, :c] = bits
                bits = full
            bits = np.ascontiguousarray(bits).reshape(-1)
        else:
            bits = np.empty(0, np.uint8)
        codes = None
        if not stochastic and xp.size:  # lowprec.nvfp4's compiled element pass, per row
            element = convert.kernel_for(ELEMENT, MODE_INT["rne"], True, False, True)
            codes = _k.rne_codes(xp, tr, scale_codes, bad, _F32(1) / s_enc, *element,
                                 _scale_table())
        if codes is None:
            codes = np.empty((rp, cp), np.uint8)
            _k.tile_codes(xp, tr, enc, bad, bits, stochastic, codes)
    scale_codes = np.where(bad, np.uint8(_E4M3_NAN), scale_codes).astype(np.uint8)
    rows_scales = np.repeat(scale_codes, tr, axis=0)[:r]
    nb = cp // 16
    return RecipeNVFP4Tensor(
        np.ascontiguousarray(codes[:r, :c]).reshape(shape),
        np.ascontiguousarray(rows_scales.reshape(shape[:-1] + (nb,))),
        _F32(1) / _F32(s_enc), tuple(shape), len(shape) - 1, 16, block_rows=tr)


def _rbits(rbits: Any, rng: Any, shape: tuple[int, int]) -> np.ndarray:
    n = shape[0] * shape[1]
    if rbits is None:
        return random_bytes(n, rng).reshape(shape)
    if rng is not None:
        raise ValueError("give rbits or rng, not both")
    b = np.asarray(rbits)
    if b.dtype != np.uint8 or b.size != n:
        raise ValueError(f"rbits must be a uint8 array with one byte per element ({n}), "
                         f"got dtype {b.dtype} and {b.size} elements")
    return b.reshape(shape)


def quantize_operand(x: Any, role: str, *, signs: Any = None, rbits: Any = None,
                     rng: Any = None, four_over_six: bool = False) -> RecipeNVFP4Tensor:
    """Quantize a 2-D GEMM operand as the recipe does for ``role`` (see :data:`ROLES`).

    ``x`` is the tensor as the layer holds it: the input X (tokens x K), the weight W
    (N x K) or the output gradient dY (tokens x N). The wgrad roles transpose it and apply
    the RHT (``signs``: :data:`lowprec.hadamard.SIGN_VECTOR` by default) along the token
    axis before quantizing; the weight is quantized as is (its transpose, for dgrad,
    has the same 16x16 blocks: quantize ``W.T`` with the same role to get the codes).
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, got {role!r}")
    block_shape, rounding, with_rht = ROLES[role]
    arr = _blocks.as_working_array(x)
    if arr.ndim != 2:
        raise ValueError(f"quantize_operand takes a 2-D operand, got shape {arr.shape}")
    if with_rht:
        arr = np.ascontiguousarray(rht(arr.astype(np.float32, copy=False), signs, axis=0).T)
    if rounding == "rne":
        return quantize(arr, block_shape, "rne", four_over_six=four_over_six)
    return quantize(arr, block_shape, "stochastic", rbits=rbits, rng=rng)


def fake_quantize(x: Any, block_shape: Any = (1, 16), rounding: str = "rne", *,
                  axis: int = -1, hadamard: bool = False, four_over_six: bool = False,
                  rng: Any = None, rotate_back: bool = False,
                  global_amax: float | None = None) -> np.ndarray:
    """``x`` quantized along ``axis`` as :func:`quantize` does and dequantized (float64):
    what a GEMM that reduces along ``axis`` reads. ``hadamard=True`` first applies the
    random Hadamard transform along ``axis`` (:func:`lowprec.hadamard.rht`), so the
    values are in the rotated domain (a GEMM whose other operand is rotated alike gives
    the product of the unrotated tensors); ``rotate_back=True`` undoes the rotation
    (:func:`unrotate`), for a tensor stored on its own. ``rng``: the generator of
    ``rounding="stochastic"`` (its bytes in C order of the operand with ``axis`` last).
    :func:`quantize_along` gives the quantized tensor too."""
    return quantize_along(x, block_shape, rounding, axis=axis, hadamard=hadamard,
                          four_over_six=four_over_six, rng=rng, rotate_back=rotate_back,
                          global_amax=global_amax)[1]


def quantize_along(x: Any, block_shape: Any = (1, 16), rounding: str = "rne", *,
                   axis: int = -1, hadamard: bool = False, four_over_six: bool = False,
                   rng: Any = None, rotate_back: bool = False,
                   global_amax: float | None = None) -> tuple[RecipeNVFP4Tensor, np.ndarray]:
    """(the :class:`RecipeNVFP4Tensor` of ``x`` with ``axis`` moved last, and
    :func:`fake_quantize`'s values in ``x``'s layout)."""
    arr = _blocks.as_working_array(x)
    if arr.ndim == 0:
        raise ValueError("fake_quantize needs an array with at least one dimension")
    axis = _blocks.normalize_axis(axis, arr.ndim)
    with np.errstate(over="ignore"):
        moved = move_axis(arr.astype(np.float32, copy=False), axis, -1)
    if hadamard:
        if moved.shape[-1] % 16:
            raise ValueError(f"the random Hadamard transform (nvfp4_rht) runs along the "
                             f"quantized axis in groups of 16, so its length must be a "
                             f"multiple of 16 (for a wgrad operand: the tokens, batch x "
                             f"sequence), got {moved.shape[-1]}")
        moved = rht(moved, axis=-1)
    moved = np.ascontiguousarray(moved)
    if rounding == "rne":
        t = quantize(moved, block_shape, "rne", four_over_six=four_over_six,
                     global_amax=global_amax)
    else:
        t = quantize(moved, block_shape, rounding, rng=rng, global_amax=global_amax)
    out = t.dequantize()
    if hadamard and rotate_back:
        out = unrotate(out)
    return t, move_axis(out, -1, axis)


def unrotate(y: Any) -> np.ndarray:
    """The inverse random Hadamard transform along the last axis (groups of 16), in
    float64, every output the sum of its 16 terms in a fixed order: ``y @ R^T``."""
    a = np.asarray(y, np.float64)
    if a.shape[-1] % 16:
        raise ValueError(f"the last axis ({a.shape[-1]}) must be a multiple of 16")
    g = a.reshape(-1, 16)
    rt = rht_matrix().T
    acc = np.zeros_like(g)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(16):
            acc += g[:, j:j + 1] * rt[j]
    return acc.reshape(a.shape)
