"""Values to codes and back, in every rounding mode: ``round_to``, ``encode``, ``decode``.

All three are thin wrappers around the compiled engine in ``lowprec._kernels``;
this module only checks arguments, converts inputs and walks the array in
chunks (so peak extra memory stays near the size of the result).

Semantics are IEEE 754's: the exact input is rounded to the format's precision
with an unbounded exponent range below the largest binade (gradual underflow
into subnormals included), then overflow is applied:

* round-to-nearest (``rne``, ``rna``), ``stochastic``, and ``rup``/``rdown``
  pointing away from zero give infinity; ``rtz``, ``odd`` and the other
  directed mode give the largest finite value;
* a format without infinity gives NaN instead (the ml_dtypes and CUDA
  ``__NV_NOSAT`` convention), a format with neither saturates;
* ``saturate=True`` clamps every overflow (input infinities included) to
  ±max; NaN stays NaN;
* ``subnormals=False`` flushes subnormal *results* to (signed) zero;
* ``fnuz`` formats have no negative zero: ``-0.0`` and negative results that
  round to zero become ``+0``;
* ``e8m0`` has no zero: zero and negative numbers give its NaN, positive
  numbers below ``2**-127`` give ``2**-127``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kernels import convert, engine, params, sr
from ._names import did_you_mean
from ._runtime import (
    _CHUNK,
    _as_float_array,
    _collect,
    _get_rng,
    _random_words,
    _submit,
)
from .formats import FloatFormat, get_format

__all__ = ["MODES", "round_to", "encode", "decode", "check_mode"]

#: Rounding modes accepted everywhere a ``mode=`` is, with what they mean.
MODES: dict[str, str] = {name: meaning for name, _, meaning in params.MODE_TABLE}
_MODE_ALIASES = {
    "nearest": "rne", "nearest_even": "rne", "rn": "rne",
    "nearest_away": "rna", "rz": "rtz", "toward_zero": "rtz", "truncate": "rtz",
    "ru": "rup", "up": "rup", "rd": "rdown", "down": "rdown",
    "sr": "stochastic", "round_to_odd": "odd",
}


def check_mode(mode: str) -> str:
    """Canonical name of a rounding mode, or a ValueError listing the valid ones."""
    if isinstance(mode, str):
        key = mode.strip().lower()
        key = _MODE_ALIASES.get(key, key)
        if key in MODES:
            return key
    hint = did_you_mean(mode, [*MODES, *_MODE_ALIASES]) if isinstance(mode, str) else ""
    raise ValueError(
        f"unknown rounding mode {mode!r}{hint}; valid modes: "
        + ", ".join(f"{k!r} ({v})" for k, v in MODES.items())
    )


def _raise_status(x_flat: np.ndarray, index: int, status: int, fmt: FloatFormat) -> None:
    value = x_flat[index]
    if status == params.INVALID_NAN:
        raise ValueError(
            f"element {index} is NaN, but {fmt.name} has no NaN encoding; remove or replace "
            "NaNs (np.nan_to_num) before converting"
        )
    raise ValueError(
        f"element {index} is negative ({value!r}), but {fmt.name} is unsigned and has no NaN"
    )


def _convert(x: Any, fmt: FloatFormat | str, mode: str, saturate: bool, subnormals: bool,
             rng: Any, *, to_codes: bool, want_flags: bool = False) -> Any:
    """Values (or codes, and flags) of ``x`` in ``fmt``: argument checks, then the
    array in chunks through ``_kernels.convert`` (its fast path; the reference
    when flags are asked for)."""
    fmt = get_format(fmt)
    mode = check_mode(mode)
    arr, scalar = _as_float_array(x)
    m = params.MODE_INT[mode]
    stochastic = mode == "stochastic"
    gen = _get_rng(rng) if stochastic else None
    if not stochastic and rng is not None:
        raise ValueError(f"rng is only used by mode='stochastic', not mode={mode!r}")

    if to_codes:
        out = np.empty(arr.shape, dtype=fmt.code_dtype)
    else:
        # float32 in, float32 out when every value of the format is a float32.
        out_dtype = np.float32 if (arr.dtype == np.float32 and fmt.fits_float32) else np.float64
        out = np.empty(arr.shape, dtype=out_dtype)
    flags = np.zeros(arr.shape if want_flags else 0, dtype=np.uint8)

    x_flat = arr.reshape(-1)  # a view when arr is contiguous
    if not x_flat.flags.c_contiguous:
        x_flat = np.ascontiguousarray(x_flat)
    out_flat = out.reshape(-1)
    flags_flat = flags.reshape(-1)
    bits = x_flat.view(np.uint64 if x_flat.dtype == np.float64 else np.uint32)
    path = "reference" if want_flags else "fast"
    ftz = not subnormals

    def run(start: int, stop: int, seeds: np.ndarray) -> tuple[int, int]:
        """Convert elements start..stop (a compiled kernel; releases the GIL)."""
        xb, o = bits[start:stop], out_flat[start:stop]
        if to_codes:
            fl = flags_flat[start:stop] if want_flags else None
            return convert.to_codes(fmt, xb, m, o, saturate=saturate, ftz=ftz, seeds=seeds,
                                    flags=fl, path=path)
        return convert.to_values(fmt, xb, m, o, saturate=saturate, ftz=ftz, seeds=seeds,
                                 path=path)

    # Stochastic rounding: one 64-bit seed per block of SR_BLOCK elements is
    # drawn from the Generator, in order, a chunk at a time; the kernels make
    # each element's word from its block's seed and its index in the block
    # (see sr.sr_word). Results depend on the seed only, never on the
    # number of threads.
    no_seeds = np.empty(0, dtype=np.uint64)
    for start in range(0, bits.shape[0], _CHUNK):
        stop = min(start + _CHUNK, bits.shape[0])
        seeds = no_seeds if gen is None else _random_words(gen, -(-(stop - start) // sr.SR_BLOCK))
        for bad, status in _collect(_submit(run, start, stop, seeds)):
            if bad >= 0:
                _raise_status(x_flat, bad, status, fmt)
    if scalar:
        return (out[()], flags[()]) if want_flags else out[()]
    return (out, flags) if want_flags else out


def round_to(
    x: Any,
    fmt: FloatFormat | str,
    mode: str = "rne",
    *,
    saturate: bool = False,
    subnormals: bool = True,
    rng: Any = None,
) -> Any:
    """Round ``x`` to the nearest values of ``fmt`` (under ``mode``).

    Parameters
    ----------
    x:
        Real numbers: an array, list or scalar. float32 and float64 are
        rounded directly and exactly (float64 once, never through float32);
        other real dtypes are converted to float64 first (exactly).
    fmt:
        A format name (``"fp8_e4m3"``, ``"bfloat16"``, ...), a dtype or a
        :class:`~lowprec.FloatFormat`.
    mode:
        One of :data:`MODES`: ``rne`` (default), ``rna``, ``rtz``, ``rup``,
        ``rdown``, ``odd``, ``stochastic``.
    saturate:
        Clamp overflow (and infinities) to ±max instead of inf/NaN.
    subnormals:
        ``False`` flushes subnormal results to signed zero.
    rng:
        For ``stochastic`` only: a ``numpy.random.Generator`` or a seed. One
        64-bit seed is drawn from it per block of 4096 elements, and each
        element's uniform 64-bit word is made from its block's seed by
        SplitMix64 (``lowprec._kernels.sr.sr_word``); the same seed gives the same
        result, whatever the number of threads.

    Returns
    -------
    An array of ``x``'s shape: float32 if ``x`` is float32 (and the format's
    values fit float32, as all built-in formats do), otherwise float64. A
    scalar input gives a numpy scalar.

    >>> float(round_to(0.1, "bf16"))
    0.10009765625
    >>> float(round_to(500.0, "fp8_e4m3")), float(round_to(500.0, "fp8_e4m3", saturate=True))
    (nan, 448.0)
    """
    return _convert(x, fmt, mode, saturate, subnormals, rng, to_codes=False)


def encode(
    x: Any,
    fmt: FloatFormat | str,
    mode: str = "rne",
    *,
    saturate: bool = False,
    subnormals: bool = True,
    rng: Any = None,
    flags: bool = False,
) -> Any:
    """Round ``x`` to ``fmt`` and return the bit patterns (codes).

    Codes are ``uint8``/``uint16``/``uint32``, the smallest that holds the
    format; sub-byte formats sit in the low bits of a ``uint8``, exactly as
    ml_dtypes stores them (``codes.view(ml_dtypes.float4_e2m1fn)`` works).
    With ``flags=True`` also returns a ``uint8`` array of IEEE exception flags
    (TestFloat layout: 0x01 inexact, 0x02 underflow, 0x04 overflow, 0x10 invalid).

    Raises ``ValueError`` for NaN into a format with no NaN code (fp4, fp6).

    >>> hex(int(encode(1.0, "fp8_e4m3")))
    '0x38'
    """
    return _convert(x, fmt, mode, saturate, subnormals, rng, to_codes=True, want_flags=flags)


def decode(codes: Any, fmt: FloatFormat | str) -> Any:
    """Values of the codes of ``fmt``, as float64.

    Every value of every format lowprec accepts is a float64 exactly. Codes
    must be unsigned or non-negative integers below ``2**width``.

    >>> float(decode(0x7E, "fp8_e4m3"))
    448.0
    """
    fmt = get_format(fmt)
    scalar = np.ndim(codes) == 0 and not isinstance(codes, np.ndarray)
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        raise TypeError(
            f"codes must be an integer array (uint8/uint16/uint32), got dtype {arr.dtype}"
        )
    # Range check, skipped when the dtype cannot hold an out-of-range code.
    if arr.size and not (arr.dtype.kind == "u" and arr.dtype.itemsize * 8 <= fmt.width):
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= (1 << fmt.width):
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"code {bad} is out of range for {fmt.name}: codes are 0 .. {(1 << fmt.width) - 1}"
                f" ({fmt.width} bits)"
            )
    table = _decode_table(fmt) if fmt.width <= 16 else None
    if table is not None:
        out = table.take(arr) if arr.size else np.empty(arr.shape)  # take: 2x faster
    else:
        flat = np.ascontiguousarray(arr.reshape(-1)).astype(np.uint32, copy=False)
        out = np.empty(flat.shape, dtype=np.float64)
        engine.decode_kernel(params.format_params(fmt), flat, out)
        out = out.reshape(arr.shape)
    return out[()] if scalar else out


_TABLES: dict[FloatFormat, np.ndarray] = {}


def _decode_table(fmt: FloatFormat) -> np.ndarray:
    """All values of a format of at most 16 bits, indexed by code (cached)."""
    table = _TABLES.get(fmt)
    if table is None:
        codes = np.arange(1 << fmt.width, dtype=np.uint32)
        table = np.empty(codes.shape, dtype=np.float64)
        engine.decode_kernel(params.format_params(fmt), codes, table)
        table.setflags(write=False)
        _TABLES[fmt] = table
    return table
