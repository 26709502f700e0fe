"""Scaled FP8 tensors: per-tensor current and delayed scaling, and tile scaling.

Convention (NVIDIA Transformer Engine's): a *scale* multiplies on the way in,

    codes = round(x * scale)             quantize
    x_hat = decode(codes) * scale_inv    dequantize, scale_inv = fp32(1 / scale)

with ``scale = fmt.max / amax / 2**margin`` so that the largest magnitude
lands on the format's maximum (``margin`` leaves ``2**margin`` headroom).
Arithmetic follows Transformer Engine's FP32 kernels: ``scale`` is computed in
float32 (``amax`` is converted to float32 first), ``x * scale`` is formed in
the input's precision (float32 for float32 input, as on the GPU) and then
rounded once by :func:`lowprec.encode`, saturating at ±max (CUDA's
``satfinite`` conversion); NaN stays NaN in formats that have it. Inputs
whose values are float32 exactly (float32, float16, bfloat16) are worked on
in float32, float64 and integer inputs in float64.

Special amax values (Transformer Engine, ``compute_scale_from_amax`` and the
delayed-scaling update): ``amax`` 0, inf or NaN keeps the previous scale (1.0
for current scaling); a scale that overflows float32 becomes ``FLT_MAX``.
``power_of_two=True`` rounds the scale down to a power of two (TE's
``force_pow_2_scales``), so ``x * scale`` and ``decode * scale_inv`` are exact.

Delayed scaling (:class:`DelayedScaling`) mirrors Transformer Engine 2.x's
``DelayedScaling`` recipe (defaults since TE 1.x: ``margin=0``,
``amax_history_len=1024``, ``amax_compute_algo="max"``; TE 0.x used a history
of 1 and ``"most_recent"``). Each step quantizes with the scale computed
*before* the step and records the step's amax in ``amax_history[0]``;
:meth:`DelayedScaling.update`, called after the step, reduces the history
(``max`` over the window or ``most_recent`` = entry 0), computes the next scale,
then rolls the history by one (entry 0 moves to the end, a fresh 0 enters at 0).

Tile scaling (:func:`quantize_tiles`) gives every tile of the last two axes its
own current scale, as DeepSeek-V3 does for FP8 training (1x128 tiles for
activations, 128x128 blocks for weights; DeepSeek-V3 technical report, 3.3.1)
and Transformer Engine's ``Float8BlockScaling`` recipe implements. The scale
per tile is ``fmt.max / tile_amax`` as above (DeepSeek's kernels store the
reciprocal ``amax / 448`` and divide; dividing by it can differ from
multiplying by our scale by one float32 rounding before the FP8 rounding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _blocks
from .formats import FloatFormat, get_format
from .rounding import check_mode, decode, encode, round_to

__all__ = [
    "DelayedScaling",
    "ScaledTensor",
    "current_scale",
    "fake_quantize_per_tensor",
    "quantize_per_tensor",
    "quantize_tiles",
]

_F32 = np.float32
_FLT_MAX = _F32(np.finfo(np.float32).max)
AMAX_COMPUTE = ("max", "most_recent")


def _pow2_floor(s: np.ndarray) -> np.ndarray:
    """Largest power of two <= s (s positive, finite float32)."""
    _, exp = np.frexp(s)
    return np.ldexp(_F32(0.5), exp).astype(_F32)


def _check_margin(margin: Any) -> int:
    if not isinstance(margin, (int, np.integer)) or isinstance(margin, bool):
        raise TypeError(f"margin must be an integer (a power-of-two headroom), got {margin!r}")
    return int(margin)


def _scales(amax: np.ndarray, fmt: FloatFormat, margin: int, power_of_two: bool,
            previous: np.ndarray | float = 1.0) -> np.ndarray:
    """Vectorised scale computation: fmt.max / amax / 2**margin in float32."""
    amax = np.asarray(amax, dtype=_F32)
    ok = np.isfinite(amax) & (amax > 0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s = (_F32(fmt.max) / np.where(ok, amax, _F32(1))) / _F32(2.0 ** margin)
    s = np.where(np.isinf(s), _FLT_MAX, s).astype(_F32)
    s = np.where(ok, s, _F32(previous)).astype(_F32)
    if power_of_two:
        s = np.where(s > 0, _pow2_floor(s), s).astype(_F32)
    return s


def current_scale(amax: float, fmt: FloatFormat | str, *, margin: int = 0,
                  power_of_two: bool = False) -> float:
    """``fmt.max / amax / 2**margin`` in float32 (1.0 if amax is 0, inf or NaN).

    >>> current_scale(2.0, "fp8_e4m3"), current_scale(3.0, "fp8_e4m3", power_of_two=True)
    (224.0, 128.0)
    """
    fmt = get_format(fmt)
    return float(_scales(np.float64(amax), fmt, _check_margin(margin), power_of_two))


def _scale_inv(scale: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return (_F32(1) / np.asarray(scale, dtype=_F32)).astype(_F32)


@dataclass(frozen=True, eq=False)
class ScaledTensor:
    """An array quantized to ``fmt`` with float32 scale(s).

    ``codes``: the format's codes, the input's shape. ``scale``: float32, a
    0-d array for per-tensor scaling or one value per tile (shape
    ``(*leading, ceil(rows / tile[0]), ceil(cols / tile[1]))``). ``tile`` is
    ``None`` for per-tensor scaling.
    """

    codes: np.ndarray
    scale: np.ndarray
    fmt: FloatFormat
    shape: tuple[int, ...]
    tile: tuple[int, int] | None = None

    @property
    def scale_inv(self) -> np.ndarray:
        """float32 ``1 / scale``, the factor dequantization multiplies by (TE's ``scale_inv``)."""
        return _scale_inv(self.scale)

    def _per_element(self, per_scale: np.ndarray) -> np.ndarray:
        if self.tile is None:
            return np.broadcast_to(per_scale, self.shape)
        tr, tc = self.tile
        rows, cols = (1, self.shape[0]) if len(self.shape) == 1 else self.shape[-2:]
        out = np.repeat(np.repeat(per_scale, tr, axis=-2), tc, axis=-1)
        return out[..., :rows, :cols].reshape(self.shape)

    def dequantize(self, dtype: Any = np.float64) -> np.ndarray:
        """``decode(codes) * scale_inv`` (the product exact in float64)."""
        vals = decode(self.codes, self.fmt)
        with np.errstate(invalid="ignore"):
            out = vals * self._per_element(self.scale_inv.astype(np.float64)).reshape(
                vals.shape)
        return np.asarray(out, dtype=dtype)

    def clip_threshold(self) -> np.ndarray:
        """Per element, the smallest input magnitude that was clipped (saturated):
        ``(max + ulp(max)/2) / scale``, where ``x * scale`` rounds past the maximum."""
        with np.errstate(divide="ignore"):
            t = _blocks.overflow_threshold(self.fmt) / np.asarray(self.scale, np.float64)
        return np.array(self._per_element(t), dtype=np.float64).reshape(self.shape)

    @property
    def nbytes(self) -> int:
        """Codes densely packed (``fmt.width`` bits each) plus 4 bytes per scale."""
        n = int(np.prod(self.shape))
        return -(-n * self.fmt.width // 8) + 4 * int(np.asarray(self.scale).size)

    @property
    def bits_per_value(self) -> float:
        n = int(np.prod(self.shape))
        return 8.0 * self.nbytes / n if n else float("nan")

    def __repr__(self) -> str:
        kind = "per-tensor" if self.tile is None else f"tiles {self.tile[0]}x{self.tile[1]}"
        return f"ScaledTensor({self.fmt.name}, shape={self.shape}, {kind})"


def _scaled(arr: np.ndarray, scale: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """x * scale, formed in the input's precision (what is rounded)."""
    with np.errstate(over="ignore", invalid="ignore"):
        prod = arr * scale.astype(arr.dtype)
    if not fmt.has_nan and np.isnan(prod).any():
        raise ValueError(
            f"x holds NaN, but {fmt.name} has no NaN encoding; remove or replace NaNs first")
    return prod


def _encode_scaled(arr: np.ndarray, scale: np.ndarray, fmt: FloatFormat, mode: str,
                   rng: Any) -> np.ndarray:
    """round(x * scale) with saturation, as codes."""
    return encode(_scaled(arr, scale, fmt), fmt, mode, saturate=True, rng=rng)


def _amax(arr: np.ndarray) -> float:
    if arr.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        return float(np.max(np.abs(arr)))  # NaN if any element is NaN


def quantize_per_tensor(
    x: Any, fmt: FloatFormat | str = "fp8_e4m3", *, scale: float | None = None,
    mode: str = "rne", margin: int = 0, power_of_two: bool = False, rng: Any = None,
) -> ScaledTensor:
    """Quantize with one scale for the whole tensor (current scaling by default).

    ``scale=None`` computes :func:`current_scale` from this tensor's amax;
    pass ``scale`` to use another (delayed scaling does).

    >>> import numpy as np
    >>> t = quantize_per_tensor(np.array([0.5, -2.0, 1e-3]), "fp8_e4m3", power_of_two=True)
    >>> float(t.scale), t.dequantize().tolist()
    (128.0, [0.5, -2.0, 0.0009765625])
    >>> t = quantize_per_tensor(np.array([0.5, -2.0]), "fp8_e4m3")  # scale_inv = fp32(1/224)
    >>> float(t.scale), t.dequantize().tolist()
    (224.0, [0.5000000223517418, -2.000000089406967])
    """
    fmt, mode, arr, s = _per_tensor(x, fmt, scale, mode, margin, power_of_two)
    codes = _encode_scaled(arr, s, fmt, mode, rng)
    return ScaledTensor(np.asarray(codes), np.asarray(s, dtype=_F32), fmt, tuple(arr.shape))


def fake_quantize_per_tensor(
    x: Any, fmt: FloatFormat | str = "fp8_e4m3", *, scale: float | None = None,
    mode: str = "rne", margin: int = 0, power_of_two: bool = False, rng: Any = None,
) -> np.ndarray:
    """:func:`quantize_per_tensor` then :meth:`ScaledTensor.dequantize`, the same
    float64 values bit for bit, without the codes: ``x * scale`` rounded to the
    format's values (:func:`lowprec.round_to`, saturating) times ``scale_inv``.
    What a simulation that only reads the values back needs (the trainer's FP8
    rounders); the rounding kernel is the one every format's values share.

    >>> import numpy as np
    >>> fake_quantize_per_tensor(np.array([0.5, -2.0]), "fp8_e4m3").tolist()
    [0.5000000223517418, -2.000000089406967]
    """
    fmt, mode, arr, s = _per_tensor(x, fmt, scale, mode, margin, power_of_two)
    return _fake(arr, s, fmt, mode, rng)


def _per_tensor(x: Any, fmt: FloatFormat | str, scale: float | None, mode: str, margin: Any,
                power_of_two: bool) -> tuple[FloatFormat, str, np.ndarray, np.ndarray]:
    """The checked arguments of a per-tensor quantization, and its scale."""
    fmt = get_format(fmt)
    mode = check_mode(mode)
    margin = _check_margin(margin)
    arr = _blocks.as_working_array(x)
    if scale is None:
        s = _scales(np.float64(_amax(arr)), fmt, margin, power_of_two)
    else:
        s = np.asarray(scale, dtype=_F32)
        if s.ndim != 0 or not (np.isfinite(s) and s > 0):
            raise ValueError(f"scale must be one positive finite number, got {scale!r}")
    return fmt, mode, arr, s


def _fake(arr: np.ndarray, s: np.ndarray, fmt: FloatFormat, mode: str, rng: Any
          ) -> np.ndarray:
    """decode(encode(x * s)) * scale_inv in float64, from the values: the format's
    values are those its codes decode to, and each product is exact in float64
    (at most 24 significant bits times float32's 24)."""
    vals = round_to(_scaled(arr, s, fmt), fmt, mode, saturate=True, rng=rng)
    with np.errstate(invalid="ignore"):
        return np.asarray(vals, dtype=np.float64) * np.float64(_scale_inv(s))


class DelayedScaling:
    """Per-tensor delayed scaling, as Transformer Engine's ``DelayedScaling`` recipe.

    >>> import numpy as np
    >>> ds = DelayedScaling("fp8_e4m3", history_len=4)
    >>> t = ds.quantize(np.array([2.0, -1.0]))   # step 1 uses the initial scale 1.0
    >>> float(t.scale), ds.amax_history.tolist()
    (1.0, [2.0, 0.0, 0.0, 0.0])
    >>> ds.update(); ds.scale, ds.amax_history.tolist()   # after the step
    (224.0, [0.0, 0.0, 0.0, 2.0])

    Parameters
    ----------
    fmt:
        The FP8 (or any lowprec) format.
    margin:
        Scale headroom: ``scale = fmt.max / amax / 2**margin``.
    history_len:
        Length of the amax window (TE 2.x default 1024).
    amax_compute:
        ``"max"`` (largest amax in the window, TE default) or ``"most_recent"``.
    power_of_two:
        Round each new scale down to a power of two.
    """

    def __init__(self, fmt: FloatFormat | str, *, margin: int = 0, history_len: int = 1024,
                 amax_compute: str = "max", power_of_two: bool = False) -> None:
        self.fmt = get_format(fmt)
        self.margin = _check_margin(margin)
        if not isinstance(history_len, (int, np.integer)) or history_len < 1:
            raise ValueError(f"history_len must be a positive integer, got {history_len!r}")
        if amax_compute not in AMAX_COMPUTE:
            raise ValueError(f"amax_compute must be one of {AMAX_COMPUTE}, got {amax_compute!r}")
        self.amax_compute = amax_compute
        self.power_of_two = bool(power_of_two)
        self.amax_history = np.zeros(int(history_len), dtype=_F32)
        self.scale = 1.0  # TE initialises scales to 1

    def quantize(self, x: Any, mode: str = "rne", *, rng: Any = None) -> ScaledTensor:
        """Quantize with the current :attr:`scale` and record this tensor's amax
        in ``amax_history[0]`` (the larger one if called twice in a step)."""
        arr = _blocks.as_working_array(x)
        out = quantize_per_tensor(arr, self.fmt, scale=self.scale, mode=mode, rng=rng)
        self._record(arr)
        return out

    def fake_quantize(self, x: Any, mode: str = "rne", *, rng: Any = None) -> np.ndarray:
        """``quantize(x, mode, rng=rng).dequantize()``, the same float64 values and the
        same amax recorded, without the codes (:func:`fake_quantize_per_tensor`)."""
        arr = _blocks.as_working_array(x)
        _, mode, _, s = _per_tensor(arr, self.fmt, self.scale, mode, self.margin, False)
        out = _fake(arr, s, self.fmt, mode, rng)
        self._record(arr)
        return out

    def _record(self, arr: np.ndarray) -> None:
        """This tensor's amax into ``amax_history[0]`` (the larger one if called twice)."""
        amax = _F32(_amax(arr))
        if np.isnan(amax) or np.isnan(self.amax_history[0]):
            self.amax_history[0] = np.nan
        else:
            self.amax_history[0] = max(self.amax_history[0], amax)

    def update(self) -> None:
        """End of step: new scale from the history, then roll the history.

        A reduced amax that is 0, inf or NaN keeps the previous scale.
        """
        h = self.amax_history
        amax = h.max() if self.amax_compute == "max" else h[0]
        self.scale = float(_scales(amax, self.fmt, self.margin, self.power_of_two,
                                   previous=self.scale))
        self.amax_history = np.roll(h, -1)
        self.amax_history[0] = 0.0

    def __repr__(self) -> str:
        return (f"DelayedScaling({self.fmt.name}, margin={self.margin}, history_len="
                f"{self.amax_history.size}, amax_compute={self.amax_compute!r}, "
                f"scale={self.scale!r})")


def quantize_tiles(
    x: Any, fmt: FloatFormat | str = "fp8_e4m3", tile: tuple[int, int] = (1, 128), *,
    mode: str = "rne", margin: int = 0, power_of_two: bool = False, rng: Any = None,
) -> ScaledTensor:
    """Quantize with one current scale per ``tile`` of the last two axes.

    ``tile=(1, 128)``: DeepSeek-V3's activation tiles (1 row x 128 columns);
    ``tile=(128, 128)``: its weight blocks. Any positive tile shape works;
    edge tiles that do not fill a whole tile are scaled by their own amax
    (as if zero-padded). 1-D input is treated as one row (its ``scale`` then
    has shape ``(1, n_tiles)``).
    """
    fmt = get_format(fmt)
    mode = check_mode(mode)
    margin = _check_margin(margin)
    if (not isinstance(tile, tuple) or len(tile) != 2
            or not all(isinstance(t, (int, np.integer)) and t > 0 for t in tile)):
        raise ValueError(f"tile must be a pair of positive integers like (1, 128), got {tile!r}")
    tr, tc = int(tile[0]), int(tile[1])
    arr = _blocks.as_working_array(x)
    if arr.ndim == 0:
        raise ValueError("quantize_tiles needs an array of at least one dimension")
    orig_shape = tuple(arr.shape)
    a2 = arr.reshape(1, -1) if arr.ndim == 1 else arr
    rows, cols = a2.shape[-2], a2.shape[-1]
    nr, nc = -(-rows // tr), -(-cols // tc)
    padded = np.zeros(a2.shape[:-2] + (nr * tr, nc * tc), dtype=a2.dtype)
    padded[..., :rows, :cols] = a2
    tiles = padded.reshape(a2.shape[:-2] + (nr, tr, nc, tc))
    with np.errstate(invalid="ignore"):
        amax = np.max(np.abs(tiles), axis=(-3, -1)) if tiles.size else np.zeros(
            a2.shape[:-2] + (nr, nc))
    scale = _scales(amax, fmt, margin, power_of_two)  # (..., nr, nc)
    per_elem = np.repeat(np.repeat(scale, tr, axis=-2), tc, axis=-1)[..., :rows, :cols]
    codes = _encode_scaled(a2, per_elem, fmt, mode, rng).reshape(orig_shape)
    return ScaledTensor(codes, scale, fmt, orig_shape, (tr, tc))
