"""OCP Microscaling (MX) block formats: MXFP8, MXFP6, MXFP4 and MXINT8.

An MX tensor cuts one axis into blocks of ``block_size`` (32 in the spec)
values; each block stores one shared scale ``X = 2**k`` as an E8M0 byte and
``block_size`` narrow elements ``P_i``; the value of element ``i`` is
``X * P_i`` (OCP Microscaling Formats (MX) v1.0, sections 5 and 6).

>>> import numpy as np, lowprec.mx as mx
>>> t = mx.quantize(np.array([7.0, 1.0, -2.0, 0.0]), "mxfp4", block_size=4)
>>> t.dequantize().tolist(), t.scales.tolist()
([6.0, 1.0, -2.0, 0.0], [1.0])
>>> mx.quantize(np.array([7.0, 1.0, -2.0, 0.0]), "mxfp4", block_size=4,
...             scale_rule="rceil").dequantize().tolist()
[8.0, 1.0, -2.0, 0.0]

Scale rules (``scale_rule=``), with ``amax`` the block's largest magnitude and
``emax_elem`` the exponent of the element format's largest binade:

``floor`` (default)
    ``k = floor(log2(amax)) - emax_elem``: the spec's rule (section 6.3) and
    microxcaling's and torchao's ``FLOOR``. The block's largest value can
    exceed the element maximum after scaling; it is clamped (saturated) to it,
    as the spec prescribes (E2M1 block with amax 7: scale 1, 7 -> 6).
``ceil``
    ``k = ceil(log2(amax)) - emax_elem`` (torchao ``CEIL``): nothing clips.
``rceil``
    ``2**k`` is ``amax / elem_max`` rounded up to a power of two, the cuBLAS
    block-quantization rule that Transformer Engine and torchao ``RCEIL`` use:
    the smallest scale at which nothing clips. As on the GPU the quotient is
    computed as ``amax * (1 / elem_max)`` in the input's precision (float32
    for float32 input) before rounding up (E2M1 block with amax 7: 7/6 ->
    scale 2, 7 -> 3.5 -> 4 in ``rne``, dequantized 8).
``even``
    torchao ``EVEN``: ``amax`` is first rounded to the element's precision
    (``mantissa_bits + 1`` bits, ties away from zero), then ``floor``.
``trn``
    ``k = floor(log2(amax)) - emax_elem + 1``: twice the ``floor`` scale, the block
    scale of AWS Trainium's ``nki.isa.quantize_mx`` (Neuron 2.32+, NeuronCore-v4:
    "a block scale that is two times larger" than the OCP sample conversion,
    "reserving additional range for rounding the largest values in each group
    without saturation"; AWS documents it for MXFP8). Nothing clips. AWS does not
    say how zero or non-finite blocks or the elements are handled: lowprec's
    conventions below apply, as for every rule.

Special cases (the spec's choices, and ours where it leaves one):

* A block holding NaN or ±inf gets the E8M0 NaN scale (0xFF) and its
  elements are stored as code 0; it dequantizes to all NaN (spec section 5,
  E8M0 scale: a NaN scale makes every element of its block NaN; microxcaling
  and torchao do the same for non-finite inputs). The spec leaves the element
  codes open.
* An all-zero block gets the smallest scale 2**-127 (code 0x00), as
  microxcaling, torchao and gfloat do; any scale would be exact.
* ``k < -127``: clamped to -127 (tiny elements may flush to zero);
  ``k > 127`` (only reachable from float64 input or the ``ceil`` rules near
  the float32 maximum): the block's scale is NaN, as in microxcaling.
* A length that ``block_size`` does not divide is padded with zeros to whole
  blocks; the padding never changes a scale and is not stored in ``codes``
  (it is in ``pack()``'s byte layout, as zero codes).
* MXINT8 elements are 8-bit two's complement integers ``q`` with value
  ``q / 64``; quantization is symmetric (``q`` in -127..127, never -128),
  decoding accepts -128 (value -2) as the spec defines it.

Elements are rounded by the one rounding engine (:func:`lowprec.encode`, or for
float32 input its float32 kernel, called from the block pass of
:mod:`lowprec._kernels.blocks`) in any of its modes, saturating at the element maximum. Scaling by ``2**-k`` is exact
(float64; float32 for float32 input in ``rne``/``rna``/``rtz``, where only
values that round to zero anyway can lose bits); for float64 input a value
could underflow float64 only if its block spans more than ~1000 binades.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _blocks
from ._kernels import convert, route
from ._kernels.blocks import RULE_INT, dequantize_blocks, move_axis, mx_quantize, twos_complement
from ._kernels.params import MODE_INT
from ._names import did_you_mean
from .formats import FloatFormat, custom_format, get_format
from .rounding import check_mode, decode, encode, round_to

__all__ = [
    "MX_FORMATS",
    "SCALE_RULES",
    "MXFormat",
    "MXTensor",
    "e8m0_scale_codes",
    "get_mx_format",
    "quantize",
]

E8M0 = get_format("e8m0")
E8M0_NAN = 0xFF
E8M0_BIAS = 127

#: MXINT8 elements as a float format: sign-magnitude with one exponent bit,
#: six mantissa bits and bias 1 has exactly the values q/64 for |q| <= 127
#: (exponent field 0: q = M, field 1: q = 64 + M), so the engine rounds them.
_INT8_AS_FLOAT = custom_format(1, 6, bias=1, has_inf=False, nan="none", name="int8_q6")


@dataclass(frozen=True)
class MXFormat:
    """One MX format: its element format and how codes are stored."""

    name: str
    element: FloatFormat
    integer: bool = False  # MXINT8: codes are two's complement q, value q/64

    @property
    def emax_elem(self) -> int:
        """Exponent of the element format's largest binade (the spec's emax_elem)."""
        return self.element.emax

    @property
    def element_bits(self) -> int:
        return self.element.width

    @property
    def element_max(self) -> float:
        return self.element.max


MX_FORMATS: dict[str, MXFormat] = {
    f.name: f
    for f in [
        MXFormat("mxfp8_e4m3", get_format("fp8_e4m3")),
        MXFormat("mxfp8_e5m2", get_format("fp8_e5m2")),
        MXFormat("mxfp6_e3m2", get_format("fp6_e3m2")),
        MXFormat("mxfp6_e2m3", get_format("fp6_e2m3")),
        MXFormat("mxfp4", get_format("fp4_e2m1")),
        MXFormat("mxint8", _INT8_AS_FLOAT, integer=True),
    ]
}
_MX_ALIASES = {"mxfp8": "mxfp8_e4m3", "mxfp6": "mxfp6_e3m2", "mxfp4_e2m1": "mxfp4"}

#: Scale rules and where they come from (see the module docstring).
SCALE_RULES: dict[str, str] = {
    "floor": "2**(floor(log2(amax)) - emax_elem): OCP MX v1.0 6.3, microxcaling, torchao FLOOR",
    "ceil": "2**(ceil(log2(amax)) - emax_elem): torchao CEIL",
    "rceil": "amax / elem_max rounded up to a power of two: cuBLAS, Transformer Engine, "
             "torchao RCEIL",
    "even": "floor after rounding amax to the element precision: torchao EVEN",
    "trn": "2**(floor(log2(amax)) - emax_elem + 1), twice floor's: AWS Trainium "
           "nki.isa.quantize_mx",
}


def get_mx_format(fmt: MXFormat | str) -> MXFormat:
    if isinstance(fmt, MXFormat):
        return fmt
    if isinstance(fmt, str):
        key = fmt.strip().lower().replace("-", "_")
        key = _MX_ALIASES.get(key, key)
        if key in MX_FORMATS:
            return MX_FORMATS[key]
    hint = did_you_mean(fmt, [*MX_FORMATS, *_MX_ALIASES]) if isinstance(fmt, str) else ""
    raise ValueError(f"unknown MX format {fmt!r}{hint}; valid: {', '.join(MX_FORMATS)}")


def _check_rule(rule: str) -> str:
    if isinstance(rule, str) and rule.lower() in SCALE_RULES:
        return rule.lower()
    raise ValueError(
        f"unknown scale_rule {rule!r}; valid: "
        + "; ".join(f"{k!r} ({v})" for k, v in SCALE_RULES.items())
    )


_EVEN_FORMATS: dict[int, FloatFormat] = {}


def _floor_log2(v: np.ndarray) -> np.ndarray:
    """floor(log2(v)) for positive finite float64 v, exactly (from frexp)."""
    return np.frexp(v)[1].astype(np.int64) - 1


def e8m0_scale_codes(
    amax: np.ndarray, fmt: MXFormat | str, scale_rule: str = "floor",
    dtype: Any = np.float64,
) -> np.ndarray:
    """E8M0 scale codes for blocks with largest magnitudes ``amax``.

    ``amax`` is NaN for a block holding NaN or inf. ``dtype`` is the precision
    the ``rceil`` quotient ``amax * (1/elem_max)`` is formed in (the input's).
    """
    mxf = get_mx_format(fmt)
    rule = _check_rule(scale_rule)
    amax = np.asarray(amax, dtype=np.float64)
    finite = np.isfinite(amax)
    positive = finite & (amax > 0)
    safe = np.where(positive, amax, 1.0)
    if rule == "rceil":
        # amax * (1/max) in the input precision, rounded up to a power of two by
        # the engine (e8m0 'rup' gives NaN above 2**127, 2**-127 below 2**-127).
        dt = np.float32 if np.dtype(dtype) == np.float32 else np.float64
        descale = safe.astype(dt) * dt(1.0 / mxf.element_max)
        # A quotient that underflows to 0 (amax near the float32 minimum) takes
        # the smallest scale, like a zero block (torchao does the same).
        tiny = descale == 0
        codes = encode(np.where(tiny, 1.0, descale), E8M0, "rup")
        codes = np.where(positive & ~tiny, codes, 0).astype(np.uint8)
        return np.where(finite, codes, E8M0_NAN).astype(np.uint8)
    if rule == "floor":
        k = _floor_log2(safe) - mxf.emax_elem
    elif rule == "trn":
        k = _floor_log2(safe) - mxf.emax_elem + 1
    elif rule == "ceil":
        mant = np.frexp(safe)[0]
        k = _floor_log2(safe) + (mant != 0.5) - mxf.emax_elem
    else:  # even: round amax to the element precision first (ties away), then floor
        m = mxf.element.mantissa_bits
        if m not in _EVEN_FORMATS:
            _EVEN_FORMATS[m] = custom_format(11, m, name=f"e11m{m}")
        rounded = round_to(safe, _EVEN_FORMATS[m], "rna")
        past_max = np.isinf(rounded)  # rounded beyond float64's largest binade
        e = _floor_log2(np.where(past_max, 1.0, rounded))
        k = np.where(past_max, 1024, e) - mxf.emax_elem
    k = np.where(positive, k, -E8M0_BIAS)
    too_big = k > E8M0_BIAS
    k = np.clip(k, -E8M0_BIAS, E8M0_BIAS)
    codes = k + E8M0_BIAS  # 2**k's E8M0 code (k in range: not NaN's)
    return np.where(finite & ~too_big, codes, E8M0_NAN).astype(np.uint8)


def _scale_values(scale_codes: np.ndarray) -> np.ndarray:
    """2**(code - 127) as float64, NaN for 0xFF."""
    return decode(scale_codes, E8M0)


_VALUE_TABLES: dict[str, np.ndarray] = {}


def _element_values(mxf: MXFormat) -> np.ndarray:
    """Value of every element code (256 or fewer entries), float64."""
    table = _VALUE_TABLES.get(mxf.name)
    if table is None:
        codes = np.arange(1 << mxf.element_bits, dtype=np.uint32)
        if mxf.integer:
            table = codes.astype(np.uint8).view(np.int8).astype(np.float64) / 64.0
        else:
            table = decode(codes, mxf.element)
        table.setflags(write=False)
        _VALUE_TABLES[mxf.name] = table
    return table


@dataclass(frozen=True, eq=False)
class MXTensor:
    """An MX-quantized array.

    Attributes
    ----------
    codes:
        Element codes, ``uint8``, the input's shape: float elements as
        :func:`lowprec.encode` gives them (ml_dtypes storage, sub-byte codes in
        the low bits); MXINT8 as the two's complement byte of ``q``.
    scale_codes:
        E8M0 codes, ``uint8``, the input's shape with ``axis`` replaced by the
        number of blocks along it.
    fmt, shape, axis, block_size, scale_rule:
        How it was made (``axis`` is non-negative).
    """

    codes: np.ndarray
    scale_codes: np.ndarray
    fmt: MXFormat
    shape: tuple[int, ...]
    axis: int
    block_size: int
    scale_rule: str = "floor"

    # ------------------------------------------------------------ values
    @property
    def scales(self) -> np.ndarray:
        """Block scales ``2**k`` as float64 (NaN for the NaN scale)."""
        return _scale_values(self.scale_codes)

    @property
    def elements(self) -> np.ndarray:
        """Element values ``P_i`` (before scaling), float64."""
        return _element_values(self.fmt)[self.codes]

    def _broadcast(self, per_block: np.ndarray, per_element: np.ndarray) -> np.ndarray:
        """per_element times its block's per_block value; per_element must be a
        fresh array (it is overwritten)."""
        blocks = _blocks.to_blocks(per_element, self.axis, self.block_size)
        blocks *= move_axis(per_block, self.axis, -1)[..., None]
        return _blocks.from_blocks(blocks, self.axis, self.shape[self.axis])

    def dequantize(self, dtype: Any = np.float64) -> np.ndarray:
        """``X * P_i`` for every element (exact in float64; every MX value of a
        float32 input also fits float32 exactly, so ``dtype=np.float32`` is
        exact for those)."""
        fast = dequantize_blocks(self.codes, self.scales, _element_values(self.fmt),
                                 self.axis, self.block_size, dtype)
        return fast if fast is not None else self._dequantize_reference(dtype)

    def _dequantize_reference(self, dtype: Any = np.float64) -> np.ndarray:
        """:meth:`dequantize` in numpy steps (the reference of the compiled one)."""
        with np.errstate(invalid="ignore"):
            out = self._broadcast(self.scales, self.elements)
        return np.ascontiguousarray(out, dtype=dtype)

    def _block_mma_operand(self) -> dict[str, Any]:
        """What a block-scaled MMA reads (:mod:`lowprec.blockmma`)."""
        if self.fmt.integer:
            raise ValueError("MXINT8 has no block-scaled MMA on NVIDIA GPUs; use an MXFP format")
        return {"codes": self.codes, "element": self.fmt.element, "scale_kind": "e8m0",
                "scale_codes": self.scale_codes, "block": self.block_size, "axis": self.axis,
                "shape": self.shape, "global_scale": 1.0}

    def clip_threshold(self) -> np.ndarray:
        """Per element, the smallest input magnitude that was clipped: its
        block's scale times the element's overflow threshold (``max + ulp/2``,
        where round-to-nearest would pass the maximum); float64."""
        ones = np.ones(self.shape)
        return self._broadcast(self.scales * _blocks.overflow_threshold(self.fmt.element), ones)

    # ----------------------------------------------------------- storage
    @property
    def n_blocks(self) -> int:
        return int(self.scale_codes.size)

    @property
    def nbytes(self) -> int:
        """Bytes of the packed storage: one E8M0 byte per block plus the
        elements densely packed (padding included), as :meth:`pack` writes."""
        elem_bits = self.n_blocks * self.block_size * self.fmt.element_bits
        return self.n_blocks + -(-elem_bits // 8)

    @property
    def bits_per_value(self) -> float:
        """Storage bits per input value (scales and padding included):
        e.g. 4.25 for MXFP4 with blocks of 32."""
        n = int(np.prod(self.shape)) if self.shape else 1
        return 8.0 * self.nbytes / n if n else float("nan")

    def pack(self) -> np.ndarray:
        """The tensor as one ``uint8`` array.

        Layout: first the E8M0 scale bytes, one per block, in C order of the
        blocked shape (``axis`` moved last, then the block index); then the
        element codes of every block, in the same block order, each block's
        ``block_size`` codes in order (padding codes are 0), packed as a
        little-endian bit stream (see :mod:`lowprec._blocks`: two FP4 codes per
        byte, low nibble first; four FP6 codes per three bytes; one byte per
        FP8/INT8 code). Shape, axis, format and block size are not stored:
        pass them to :meth:`from_packed`.
        """
        scales = move_axis(self.scale_codes, self.axis, -1).reshape(-1)
        elems = _blocks.to_blocks(self.codes, self.axis, self.block_size)
        return np.concatenate([scales, _blocks.pack_bits(elems, self.fmt.element_bits)])

    @classmethod
    def from_packed(
        cls, data: bytes | np.ndarray, fmt: MXFormat | str, shape: tuple[int, ...],
        axis: int = -1, block_size: int = 32, scale_rule: str = "floor",
    ) -> MXTensor:
        """Rebuild an :class:`MXTensor` from :meth:`pack`'s bytes."""
        mxf = get_mx_format(fmt)
        _, scales, codes, shape, axis, block_size = _blocks.unpack_scaled(
            data, shape, axis, block_size, mxf.element_bits, 0, mxf.name)
        return cls(codes, scales, mxf, shape, axis, block_size, _check_rule(scale_rule))

    unpack = from_packed

    def __repr__(self) -> str:
        return (f"MXTensor({self.fmt.name}, shape={self.shape}, axis={self.axis}, "
                f"block_size={self.block_size}, scale_rule={self.scale_rule!r}, "
                f"{self.bits_per_value:.3g} bits/value)")


def quantize(
    x: Any,
    fmt: MXFormat | str = "mxfp8_e4m3",
    axis: int = -1,
    block_size: int = 32,
    scale_rule: str = "floor",
    mode: str = "rne",
    *,
    rng: Any = None,
) -> MXTensor:
    """Quantize ``x`` to an MX format along ``axis``.

    Parameters
    ----------
    x:
        Real array. float32 and narrower float dtypes (float16, bfloat16)
        are worked on in float32 (the ``rceil`` quotient is FP32, as on the
        GPU), float64 and integers in float64.
    fmt:
        ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp6_e3m2"``, ``"mxfp6_e2m3"``,
        ``"mxfp4"`` or ``"mxint8"``.
    axis, block_size:
        Blocks are ``block_size`` consecutive values along ``axis`` (the spec
        uses 32); a ragged last block is zero-padded.
    scale_rule:
        ``"floor"`` (spec), ``"ceil"``, ``"rceil"``, ``"even"`` or ``"trn"``: see the
        module docstring.
    mode, rng:
        Rounding of the elements, any :data:`lowprec.MODES` mode (``rng`` for
        ``"stochastic"``); elements saturate at the element maximum.

    Float32 input in a deterministic mode takes one compiled pass over the blocks
    (:mod:`lowprec._kernels.blocks`); everything else, and the reference the tests
    hold that pass equal to, is :func:`_quantize_reference`, which also answers
    while the pass's kernels are not compiled yet (a first call with an empty
    numba cache: they compile in the background meanwhile).
    """
    mxf = get_mx_format(fmt)
    rule = _check_rule(scale_rule)
    mode = check_mode(mode)
    block_size = _blocks.check_block_size(block_size)
    arr = _blocks.as_working_array(x)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    axis = _blocks.normalize_axis(axis, arr.ndim)
    if arr.dtype == np.float32 and arr.size and rng is None and mode != "stochastic":
        fast = _quantize_fast(arr, mxf, axis, block_size, rule, mode)
        if fast is not None:
            return fast
    return _quantize_reference(arr, mxf, axis, block_size, rule, mode, rng=rng)


def _quantize_fast(arr: np.ndarray, mxf: MXFormat, axis: int, block_size: int, rule: str,
                   mode: str) -> MXTensor | None:
    """:func:`quantize` of a float32 array through the block kernel; None where it does
    not apply. Elements are scaled in float32 for ``rne``/``rna``/``rtz`` and exactly
    (float64, then rounded to odd in float32) otherwise, as the reference does."""
    elem = mxf.element
    wide = mode not in ("rne", "rna", "rtz")
    if not route.takes_bits32(elem) or (wide and not route.takes_bits32(elem, True)):
        return None
    m = MODE_INT[mode]
    moved = move_axis(arr, axis, -1)
    cols = moved.shape[-1]
    nb = -(-cols // block_size)
    if mxf.integer and not route.ready(twos_complement, (np.empty(0, np.uint8),)):
        return None
    done = mx_quantize(
        np.ascontiguousarray(moved).reshape(-1), cols, block_size, RULE_INT[rule],
        mxf.emax_elem, elem.mantissa_bits, 1.0 / mxf.element_max,
        *convert.kernel_for(elem, m, True, False, True), wide, auto=True)
    if done is None:  # a kernel not compiled yet: the reference answers meanwhile
        return None
    codes, scale_codes = done
    if mxf.integer:
        twos_complement(codes)
    codes = np.ascontiguousarray(move_axis(codes.reshape(moved.shape), -1, axis))
    scale_codes = np.ascontiguousarray(
        move_axis(scale_codes.reshape(moved.shape[:-1] + (nb,)), -1, axis))
    return MXTensor(codes, scale_codes, mxf, tuple(arr.shape), axis, block_size, rule)


def _quantize_reference(arr: np.ndarray, mxf: MXFormat, axis: int, block_size: int,
                        rule: str, mode: str, *, rng: Any = None) -> MXTensor:
    """:func:`quantize` in whole-array numpy steps (``arr`` the working array, the
    other arguments checked): the reference of the block kernel."""
    blocks = _blocks.to_blocks(arr, axis, block_size)
    if blocks.size:  # max |x| per block (NaN if it holds a NaN) without an |x| copy
        amax = np.maximum(blocks.max(axis=-1), -blocks.min(axis=-1))
    else:
        amax = np.zeros(blocks.shape[:-1])
    amax = amax.astype(np.float64)
    amax[~np.isfinite(amax)] = np.nan  # a block with inf is treated like NaN
    scale_codes = e8m0_scale_codes(amax, mxf, rule, arr.dtype)

    # Elements: x / X, then rounded once by the engine. In float64 x / X is
    # exact. In float32 it is exact unless |x / X| < 2**-126, far below half of
    # every element format's smallest subnormal (2**-17 at most), where rne,
    # rna and rtz give a signed zero from the exact and the rounded quotient
    # alike: so float32 input in those modes is scaled in float32 (faster).
    work = np.float32 if arr.dtype == np.float32 and mode in ("rne", "rna", "rtz") \
        else np.float64
    k = scale_codes.astype(np.int32) - E8M0_BIAS
    nan_block = scale_codes == E8M0_NAN
    inv = np.ldexp(work(1), np.where(nan_block, 0, -k)).astype(work)
    inv[nan_block] = 0
    with np.errstate(invalid="ignore"):
        scaled = blocks * inv[..., None]
    if nan_block.any():
        scaled[nan_block] = 0.0
    codes = encode(scaled, mxf.element, mode, saturate=True, rng=rng)
    if mxf.integer:
        q = (codes & 0x7F).astype(np.int16)
        codes = np.where(codes & 0x80, -q, q).astype(np.int8).view(np.uint8)
    codes = np.ascontiguousarray(_blocks.from_blocks(codes, axis, arr.shape[axis]))
    scale_codes = np.ascontiguousarray(move_axis(scale_codes, -1, axis))
    return MXTensor(codes, scale_codes, mxf, tuple(arr.shape), axis, block_size, rule)
