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

from ._kernels import convert, params, quick, route, sr, vec
from ._names import did_you_mean
from ._runtime import _SPLIT_MIN, _as_float_array, _get_rng, _random_words, _run_split
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


def _small_kernel(fmt: FloatFormat | str, mode: str, saturate: bool, subnormals: bool,
                  to_codes: bool) -> tuple | None:
    """(kernel, params, output dtype) of the single-call path, or None where it
    does not apply (stochastic rounding, fp32)."""
    f = get_format(fmt)
    m = params.MODE_INT[check_mode(mode)]
    if m == params.STOCHASTIC or route.fast_path(f, False, True, not subnormals) != "bits32":
        return None
    kernel, q = route.kernel_for(f, m, bool(saturate), not subnormals, to_codes)
    dtype = f.code_dtype if to_codes else np.dtype(np.float32)
    if not route.ready(kernel, (q, _NO_X, _NO_SEEDS, np.empty(0, dtype))):
        return None  # not compiled yet: _convert serves it (and says when it is)
    return kernel, q, dtype


def _small(x: Any, fmt: Any, mode: str, saturate: bool, subnormals: bool,
           to_codes: bool) -> np.ndarray | None:
    """The single-call path for small contiguous float32 arrays: straight to the
    bits32 kernel, no chunks, threads or per-call set-up (a few microseconds
    less than :func:`_convert`, which is most of the time of a small call).
    None where it does not apply; :func:`_convert` then does everything,
    errors included."""
    if (type(x) is not np.ndarray or x.dtype is not _F32 or x.size >= _SPLIT_MIN
            or not x.flags.c_contiguous):  # (a non-native float32 dtype is not _F32)
        return None
    try:
        found = _SMALL[fmt, mode, saturate, subnormals, to_codes]
    except KeyError:
        found = _small_found(fmt, mode, saturate, subnormals, to_codes)
    except TypeError:  # unhashable arguments: _convert says what is wrong
        return None
    if found is None:
        return None
    kernel, q, dtype = found
    flat = x if x.ndim == 1 else x.reshape(-1)
    out = np.empty(flat.shape[0], dtype)
    if kernel(q, flat, _NO_SEEDS, out):
        return None  # a NaN without a code: _convert says which
    return out if x.ndim == 1 else out.reshape(x.shape)


_SMALL: dict[tuple, tuple | None] = {}
_F32 = np.dtype(np.float32)


def _small_found(fmt: Any, mode: Any, saturate: Any, subnormals: Any,
                 to_codes: bool) -> tuple | None:
    """_small_kernel for a new combination of arguments, remembered in _SMALL
    (None where the path does not apply or the arguments are wrong)."""
    try:
        found = _small_kernel(fmt, mode, saturate, subnormals, to_codes)
    except (ValueError, KeyError, TypeError):
        return None  # _convert raises the proper error
    if found is None and mode != "stochastic":
        return None  # maybe a kernel still compiling: ask again next time
    if len(_SMALL) < 512:
        _SMALL[fmt, mode, saturate, subnormals, to_codes] = found
    return found


def _check_out(out: Any, shape: tuple, dtype: Any, what: str) -> np.ndarray:
    """``out=`` the numpy way: an existing, writeable array of the result's shape and dtype."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
    if out.shape != shape or out.dtype != dtype:
        raise ValueError(
            f"out has shape {out.shape} and dtype {out.dtype}; {what} needs shape {shape} "
            f"and dtype {np.dtype(dtype)}"
        )
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    return out


#: The conversions (format, mode, options, dtypes) _convert has run compiled.
_WARM: set[tuple] = set()
_NO_SEEDS = np.empty(0, dtype=np.uint64)
_NO_X = np.empty(0, dtype=np.float32)
_NO_FLAGS = np.empty(0, dtype=np.uint8)


def _convert(x: Any, fmt: FloatFormat | str, mode: str, saturate: bool, subnormals: bool,
             rng: Any, *, to_codes: bool, want_flags: bool = False, out: Any = None) -> Any:
    """Values (or codes, and flags) of ``x`` in ``fmt``: argument checks, then the
    array through ``_kernels.convert`` (its fast path; the reference when flags
    are asked for), split across threads where that pays."""
    fmt = get_format(fmt)
    mode = check_mode(mode)
    arr, scalar = _as_float_array(x)
    m = params.MODE_INT[mode]
    stochastic = mode == "stochastic"
    gen = _get_rng(rng) if stochastic else None
    if not stochastic and rng is not None:
        raise ValueError(f"rng is only used by mode='stochastic', not mode={mode!r}")

    if to_codes:
        out_dtype = fmt.code_dtype
    else:
        # float32 in, float32 out when every value of the format is a float32.
        out_dtype = np.dtype(np.float32 if (arr.dtype == np.float32 and fmt.fits_float32)
                             else np.float64)
    result = None
    if out is not None:
        result = _check_out(out, arr.shape, out_dtype, "encode" if to_codes else "round_to")
        # The kernels write element i after reading it: out may be x itself,
        # but another view of x's memory (or a strided out) is written apart.
        if not out.flags.c_contiguous or (out is not arr and np.may_share_memory(out, arr)):
            out = None
    if out is None:
        out = np.empty(arr.shape, dtype=out_dtype)
    flags = np.zeros(arr.shape, dtype=np.uint8) if want_flags else _NO_FLAGS

    x_flat = arr.reshape(-1)  # a view when arr is contiguous
    if not x_flat.flags.c_contiguous:
        x_flat = np.ascontiguousarray(x_flat)
    out_flat = out.reshape(-1)
    flags_flat = flags.reshape(-1)
    bits = x_flat.view(np.uint64 if x_flat.dtype == np.float64 else np.uint32)
    ftz = not subnormals
    # A conversion that ran compiled before runs so again, unasked; a new one
    # asks the router first ("auto": route.Cold where its kernel is not compiled).
    warm = (fmt, m, bool(saturate), ftz, to_codes, want_flags, bits.dtype, out_flat.dtype)
    path = ("reference" if want_flags else "fast") if warm in _WARM else "auto"
    # Stochastic rounding: one 64-bit seed per block of SR_BLOCK elements, drawn
    # from the Generator in order; the kernels make each element's word from
    # its block's seed and its index in the block (see sr.sr_word). Results
    # depend on the seed only, never on the number of threads.
    block = sr.SR_BLOCK
    seeds = _random_words(gen, -(-bits.shape[0] // block)) if gen is not None else _NO_SEEDS

    def run(start: int, stop: int) -> tuple[int, int]:
        """Convert elements start..stop (a compiled kernel; releases the GIL)."""
        xb, o = bits[start:stop], out_flat[start:stop]
        s = seeds[start // block:] if stochastic else seeds
        if to_codes:
            fl = flags_flat[start:stop] if want_flags else None
            return convert.to_codes(fmt, xb, m, o, saturate=saturate, ftz=ftz, seeds=s,
                                    flags=fl, path=path)
        return convert.to_values(fmt, xb, m, o, saturate=saturate, ftz=ftz, seeds=s, path=path)

    try:
        if path == "auto":
            with route.large(bits.shape[0]):  # a large call may load a cached kernel here
                run(0, 0)  # route.Cold where the kernel is not compiled yet
    except route.Cold:
        _by_numpy(fmt, x_flat, bits, m, saturate, ftz, seeds if stochastic else None, to_codes,
                  out_flat, flags_flat if want_flags else None)
    else:
        if len(_WARM) < 4096:
            _WARM.add(warm)
        for start, (bad, status) in _run_split(run, bits.shape[0], block):
            if bad >= 0:
                _raise_status(x_flat, start + bad, status, fmt)
    if result is not None:
        if result is not out:
            np.copyto(result, out)
        return (result, flags) if want_flags else result
    if scalar:
        return (out[()], flags[()]) if want_flags else out[()]
    return (out, flags) if want_flags else out


def _by_numpy(fmt: FloatFormat, x_flat: np.ndarray, bits: np.ndarray, m: int, saturate: bool,
              ftz: bool, seeds: np.ndarray | None, to_codes: bool, out_flat: np.ndarray,
              flags_flat: np.ndarray | None) -> None:
    """_convert's work by the reference engine in numpy (``_kernels.vec``), a
    piece at a time: the first calls, while numba compiles the kernel. Pieces
    that ``_kernels.quick`` serves (deterministic modes, no flags) take it."""
    P = params.format_params(fmt)
    short = quick.codes if to_codes else quick.values
    for a in range(0, bits.shape[0], vec.CHUNK):
        b = min(a + vec.CHUNK, bits.shape[0])
        if seeds is None and flags_flat is None and short(P, x_flat[a:b], m, saturate, ftz,
                                                          out_flat[a:b]):
            continue
        rnd = None if seeds is None else vec.sr_words(seeds, a, b - a)
        codes, flags, status = vec.convert(P, bits[a:b], m, saturate, ftz, rnd)
        if status.any():
            bad = int(np.flatnonzero(status)[0])
            _raise_status(x_flat, a + bad, int(status[bad]), fmt)
        if to_codes:
            out_flat[a:b] = codes
        else:
            out_flat[a:b] = vec.decode(P, codes)
        if flags_flat is not None:
            flags_flat[a:b] = flags


def round_to(
    x: Any,
    fmt: FloatFormat | str,
    mode: str = "rne",
    *,
    saturate: bool = False,
    subnormals: bool = True,
    rng: Any = None,
    out: np.ndarray | None = None,
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
        element's uniform 64-bit word is made from its block's seed and its
        index by a counter-based hash (``lowprec._kernels.sr.sr_word``); the
        same seed gives the same result, whatever the number of threads.

    out:
        An existing array to write the result into (numpy's convention: the
        result's shape and dtype, see Returns); it is returned. It may be
        ``x`` itself, to round in place.

    Returns
    -------
    An array of ``x``'s shape: float32 if ``x`` is float32 (and the format's
    values fit float32, as all built-in formats do), otherwise float64. A
    scalar input gives a numpy scalar.

    >>> import numpy as np
    >>> x = np.array([0.1, 1000.0], np.float32)
    >>> buf = np.empty_like(x)
    >>> round_to(x, "fp8_e4m3", saturate=True, out=buf) is buf, buf.tolist()
    (True, [0.1015625, 448.0])

    >>> float(round_to(0.1, "bf16"))
    0.10009765625
    >>> float(round_to(500.0, "fp8_e4m3")), float(round_to(500.0, "fp8_e4m3", saturate=True))
    (nan, 448.0)
    """
    if out is None and rng is None:
        small = _small(x, fmt, mode, saturate, subnormals, False)
        if small is not None:
            return small
    return _convert(x, fmt, mode, saturate, subnormals, rng, to_codes=False, out=out)


def encode(
    x: Any,
    fmt: FloatFormat | str,
    mode: str = "rne",
    *,
    saturate: bool = False,
    subnormals: bool = True,
    rng: Any = None,
    flags: bool = False,
    out: np.ndarray | None = None,
    nan: str | None = None,
) -> Any:
    """Round ``x`` to ``fmt`` and return the bit patterns (codes).

    Codes are ``uint8``/``uint16``/``uint32``, the smallest that holds the
    format; sub-byte formats sit in the low bits of a ``uint8``, exactly as
    ml_dtypes stores them (``codes.view(ml_dtypes.float4_e2m1fn)`` works).
    With ``flags=True`` also returns a ``uint8`` array of IEEE exception flags
    (TestFloat layout: 0x01 inexact, 0x02 underflow, 0x04 overflow, 0x10 invalid).

    Raises ``ValueError`` for NaN into a format with no NaN code (fp4, fp6).
    ``out=``: an existing array of the codes' shape and dtype to write them
    into (it is returned), as in numpy.
    ``nan=``: which codes NaN inputs get (:data:`lowprec.nan_rules.NAN_RULES`):
    ``None``/``"lowprec"`` (sign kept, the quiet NaN), ``"canonical"`` (PTX's
    hardware conversions), ``"truncate"`` (CUDA's software FP8 conversion),
    ``"max"`` (CUDA's fp6/fp4: +max).

    >>> hex(int(encode(1.0, "fp8_e4m3")))
    '0x38'
    >>> hex(int(encode(float("nan"), "fp16", nan="canonical")))
    '0x7fff'
    """
    if nan is not None and nan != "lowprec":
        if flags or out is not None or rng is not None:
            raise ValueError("encode(nan=...) cannot be combined with flags=, out= or rng=")
        from .nan_rules import encode_nan_rule

        return encode_nan_rule(x, fmt, nan, mode, saturate=saturate, subnormals=subnormals)
    if out is None and rng is None and not flags:
        small = _small(x, fmt, mode, saturate, subnormals, True)
        if small is not None:
            return small
    return _convert(x, fmt, mode, saturate, subnormals, rng, to_codes=True, want_flags=flags,
                    out=out)


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
        out = route.decode(params.format_params(fmt), flat).reshape(arr.shape)
    return out[()] if scalar else out


_TABLES: dict[FloatFormat, np.ndarray] = {}


def _decode_table(fmt: FloatFormat) -> np.ndarray:
    """All values of a format of at most 16 bits, indexed by code (cached)."""
    table = _TABLES.get(fmt)
    if table is None:
        table = vec.decode(params.format_params(fmt), np.arange(1 << fmt.width))
        table.setflags(write=False)
        _TABLES[fmt] = table
    return table
