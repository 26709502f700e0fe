"""Entry points from float32/float64 bit patterns into a format, one per output
kind: :func:`to_codes` and :func:`to_values`. Each chooses its kernel by ``path``:

* ``"reference"``: the scalar reference, ``engine.convert_one`` -> ``round_pack``
  for every element (the only path that reports exception flags);
* ``"fast"``: the fastest twin that applies (``bits32.round_bits32`` for
  float32 in, every format but fp32; else ``fast.vec32_kernel``, else
  ``fast.fast_kernel``), and the reference where none does (:func:`fast_path`).

Both give the same codes and values bit for bit, stochastic rounding included
(the same words of ``sr.py``, a block of ``sr.SR_BLOCK`` elements per seed); tests
name the path they compare against.

>>> import numpy as np
>>> from lowprec.formats import get_format
>>> x = np.array([0.1, 500.0], np.float32).view(np.uint32)
>>> codes = np.empty(2, np.uint8)
>>> to_codes(get_format("fp8_e4m3"), x, MODE_INT["rne"], codes, path="reference")
(-1, 0)
>>> [hex(c) for c in codes]
['0x1d', '0x7f']
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from numba import njit

from . import bits32, bits32_direct, odd64, pow2
from .engine import encode_kernel, round_kernel
from .fast import fast_kernel, vec32_kernel
from .params import INVALID_NAN, MODE_INT, STOCHASTIC, FormatParams, format_params
from .sr import SR_BLOCK, sr_fill

__all__ = ["MODE_INT", "PATHS", "fast_path", "kernel_for", "to_codes", "to_values"]

#: The paths an entry point takes.
PATHS = ("reference", "fast")

_kernel = njit(cache=True, nogil=True)
_NO_WORDS = np.empty(0, np.uint64)


@lru_cache(maxsize=256)
def _params(fmt: Any) -> FormatParams:
    return format_params(fmt)


@lru_cache(maxsize=1024)
def fast_path(fmt: Any, is64: bool, same_type: bool, ftz: bool) -> str:
    """The kernel ``path="fast"`` takes: ``"bits32"``, ``"vec32"``, ``"scalar"`` or
    ``"reference"``.

    ``bits32`` takes float32 in (values out as float32, or codes) for every
    format it supports (:func:`bits32.supports`: all of the registry but fp32);
    ``odd64`` float64 in for the formats of :func:`odd64.supports`, in every
    mode but stochastic (which then takes ``scalar``).
    ``fast_kernel`` needs a signed format with subnormals and mantissa bits
    whose values are all of the input's type (it takes ties-to-even's parity
    from the input's bits, which for m = 0 is an exponent bit), and values out
    of the input's type (``same_type``) or codes. ``vec32_kernel`` needs besides
    float32 in, no flush to zero, and a normal range that starts inside float32's.
    """
    if not is64 and same_type and bits32.supports(fmt):
        return "bits32"
    if is64 and same_type and odd64.supports(fmt):
        return "odd64"  # float64 -> float32 rounded to odd -> bits32 (not stochastic)
    if not (fmt.signed and fmt.has_subnormals and fmt.mantissa_bits > 0 and same_type
            and (fmt.emin >= -1022 if is64 else fmt.fits_float32)):
        return "reference"
    if (not is64 and not ftz and fmt.emin >= -126
            and (fmt.emin == -126 or fmt.smallest_subnormal_exponent >= -126)):
        return "vec32"
    return "scalar"


def _kind(fmt: Any, is64: bool, same_type: bool, ftz: bool, mode: int, path: str) -> str:
    """The kernel a conversion takes: :func:`fast_path`'s for ``path="fast"``
    (``odd64`` becomes ``scalar`` for stochastic rounding, which needs every
    bit of the input), else the reference."""
    if path != "fast":
        return "reference"
    kind = fast_path(fmt, is64, same_type, ftz)
    return "scalar" if kind == "odd64" and mode == STOCHASTIC else kind


def _check(path: str, xbits: np.ndarray, mode: int, seeds: np.ndarray) -> bool:
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    if xbits.dtype not in (np.uint32, np.uint64):
        raise TypeError(f"xbits must be the uint32/uint64 view of a float array, got {xbits.dtype}")
    if mode == STOCHASTIC and seeds.shape[0] < -(-xbits.shape[0] // SR_BLOCK):
        raise ValueError(f"stochastic rounding needs a seed per {SR_BLOCK} elements")
    return xbits.dtype == np.uint64


def to_codes(fmt: Any, xbits: np.ndarray, mode: int, codes: np.ndarray, *,
             saturate: bool = False, ftz: bool = False, seeds: np.ndarray = _NO_WORDS,
             flags: np.ndarray | None = None, path: str = "fast") -> tuple[int, int]:
    """Write the codes of ``xbits`` (float32 or float64 bits) in ``fmt`` into ``codes``.

    ``mode`` is a kernel int (``params.MODE_INT``); ``seeds`` one word per
    ``SR_BLOCK`` elements (stochastic rounding, ``xbits`` starting on a block);
    ``flags`` (reference path only) receives the exception flags. Returns
    ``(index, status)`` of the first element without a code, or ``(-1, 0)``.
    """
    is64 = _check(path, xbits, mode, seeds)
    P = _params(fmt)
    kind = _kind(fmt, is64, True, ftz, mode, path)
    if flags is not None and kind != "reference":
        raise ValueError("exception flags come from path='reference' only")
    if kind == "odd64":
        return _odd64(fmt, xbits, mode, codes, saturate, ftz)
    if kind == "bits32":
        return _bits32(fmt, xbits, mode, codes, saturate, ftz, seeds, True)
    if kind == "vec32":
        return vec32_kernel(P, xbits, mode, saturate, seeds, np.empty(0, np.int32), codes, 1)
    no_bits = np.empty(0, xbits.dtype)
    no_vals = np.empty(0, np.float64 if is64 else np.float32)
    want_flags = flags is not None
    fl = flags if flags is not None else np.empty(0, np.uint8)
    if mode == STOCHASTIC:
        return stochastic_kernel(1 if kind == "scalar" else 2, P, xbits, is64, saturate, ftz,
                                 seeds, no_bits, no_vals, codes, fl, want_flags)
    if kind == "scalar":
        return fast_kernel(P, xbits, is64, mode, saturate, ftz, _NO_WORDS, no_bits, no_vals,
                           codes, 1)
    return encode_kernel(P, xbits, is64, mode, saturate, ftz, _NO_WORDS, codes, fl, want_flags)


def to_values(fmt: Any, xbits: np.ndarray, mode: int, out: np.ndarray, *,
              saturate: bool = False, ftz: bool = False, seeds: np.ndarray = _NO_WORDS,
              path: str = "fast") -> tuple[int, int]:
    """Write the values of ``xbits`` rounded to ``fmt`` into ``out`` (float32 or
    float64: every value of the format must be one). Arguments and result as
    :func:`to_codes`."""
    is64 = _check(path, xbits, mode, seeds)
    P = _params(fmt)
    same = out.dtype == (np.float64 if is64 else np.float32)
    kind = _kind(fmt, is64, same, ftz, mode, path)
    if kind == "odd64":
        return _odd64(fmt, xbits, mode, out, saturate, ftz)
    if kind == "bits32":
        return _bits32(fmt, xbits, mode, out, saturate, ftz, seeds, False)
    if kind == "vec32":
        return vec32_kernel(P, xbits, mode, saturate, seeds, out.view(np.int32),
                            np.empty(0, fmt.code_dtype), 0)
    no_codes = np.empty(0, fmt.code_dtype)
    no_flags = np.empty(0, np.uint8)
    if mode == STOCHASTIC:
        if kind == "scalar":
            return stochastic_kernel(0, P, xbits, is64, saturate, ftz, seeds,
                                     out.view(xbits.dtype), out, no_codes, no_flags, False)
        return stochastic_kernel(3, P, xbits, is64, saturate, ftz, seeds, np.empty(0, xbits.dtype),
                                 out, no_codes, no_flags, False)
    if kind == "scalar":
        return fast_kernel(P, xbits, is64, mode, saturate, ftz, _NO_WORDS, out.view(xbits.dtype),
                           out, no_codes, 0)
    return round_kernel(P, xbits, is64, mode, saturate, ftz, _NO_WORDS, out)


def kernel_for(fmt: Any, mode: int, saturate: bool, ftz: bool, codes: bool
               ) -> tuple[Any, np.ndarray]:
    """(kernel, params array) of the fastest float32-bits kernel for ``fmt`` in
    ``mode``, writing codes (``codes``) or float32 values: :mod:`.bits32_direct`
    where it applies (the usual formats), :mod:`.pow2` for E8M0, else
    :mod:`.bits32`'s. Either is
    called as ``kernel(q, xbits, seeds, out)`` and returns 1 if a NaN has no
    code in the format, else 0 (cached per format, mode and output).

    >>> from lowprec import get_format
    >>> from lowprec._kernels.params import RNE
    >>> kernel_for(get_format("fp16"), RNE, False, False, True)[0] is \\
    ...     bits32_direct.KERNELS[RNE, True]
    True
    >>> kernel_for(get_format("e8m0"), RNE, False, False, False)[0] is pow2.KERNELS[RNE, False]
    True
    """
    key = (fmt, mode, bool(saturate), bool(ftz), bool(codes))
    found = _FOR.get(key)
    if found is None:
        if mode in bits32_direct.DIRECT_MODES and bits32_direct.supports(fmt):
            found = (bits32_direct.kernel(fmt, mode, bool(codes), saturate, ftz),
                     bits32_direct.params_array(fmt, mode, saturate, ftz))
        elif mode in pow2.POW2_MODES and pow2.supports(fmt):
            found = (pow2.kernel(fmt, mode, bool(codes)),
                     pow2.params_array(fmt, mode, saturate, ftz))
        else:
            found = (bits32.KERNELS[mode, bool(codes)],
                     bits32.params_array(fmt, mode, saturate, ftz))
        _FOR[key] = found
    return found


_FOR: dict[tuple, tuple[Any, np.ndarray]] = {}


def _bits32(fmt: Any, xbits: np.ndarray, mode: int, out: np.ndarray, saturate: bool,
            ftz: bool, seeds: np.ndarray, want_codes: bool) -> tuple[int, int]:
    """The bits32 kernels (:func:`kernel_for`), answering like the other
    kernels: the index of the first NaN when the format has none, else (-1, 0).
    They take float32 arrays in and out (values) or codes out, one signature
    for every caller."""
    kernel, q = kernel_for(fmt, mode, saturate, ftz, want_codes)
    x = xbits.view(np.float32)
    if x.shape[0] and out.ctypes.data == x.ctypes.data:
        bad = _in_place(kernel, q, x, seeds)
    else:
        bad = kernel(q, x, seeds, out)
    if bad == 0:
        return -1, 0
    return int(np.flatnonzero(np.isnan(x))[0]), INVALID_NAN


#: Elements per piece of an in-place rounding: a multiple of SR_BLOCK, and the
#: piece and its scratch copy stay in the processor's L2 cache.
IN_PLACE_PIECE = 1 << 15


def _in_place(kernel: Any, q: np.ndarray, x: np.ndarray, seeds: np.ndarray) -> int:
    """``kernel(q, x, seeds, x)``, at the speed of a separate output.

    A kernel's loop given the same array in and out runs one element at a
    time: LLVM vectorises it only behind a run-time check that the two do
    not overlap, and falls back to its scalar loop when they do (3 to 10
    times slower). So each piece of ``x`` is rounded into a scratch array
    in cache and copied back. Returns what the kernel does (1 if any piece
    had a NaN the format cannot encode)."""
    n = x.shape[0]
    scratch = np.empty(min(n, IN_PLACE_PIECE), x.dtype)
    bad = 0
    for lo in range(0, n, IN_PLACE_PIECE):
        hi = min(lo + IN_PLACE_PIECE, n)
        piece = scratch[:hi - lo]
        bad |= kernel(q, x[lo:hi], seeds[lo // SR_BLOCK:] if seeds.shape[0] else seeds, piece)
        x[lo:hi] = piece
    return bad


def _odd64(fmt: Any, xbits: np.ndarray, mode: int, out: np.ndarray, saturate: bool,
           ftz: bool) -> tuple[int, int]:
    """float64 bits through float32 rounded to odd, then bits32: codes into
    ``out`` (an integer array) or values (float64, converted exactly)."""
    x32 = np.empty(xbits.shape[0], np.uint32)
    odd64.to_float32_odd(xbits.view(np.float64), x32)
    if out.dtype.kind in "iu":
        return _bits32(fmt, x32, mode, out, saturate, ftz, _NO_WORDS, True)
    vals = np.empty(xbits.shape[0], np.float32)
    res = _bits32(fmt, x32, mode, vals, saturate, ftz, _NO_WORDS, False)
    out[:] = vals
    return res


# ------------------------------------------------------ stochastic rounding
@_kernel
def stochastic_kernel(kind, P, xbits, is64, saturate, ftz, seeds, out_bits, out_vals, codes,
                      flags, want_flags):
    """Stochastic rounding of ``xbits`` (which starts on a block boundary) with
    the words of ``seeds`` (one per SR_BLOCK elements), a block at a time.

    ``kind`` picks the kernel that rounds each block: 0 fast_kernel to values,
    1 fast_kernel to codes, 2 encode_kernel, 3 round_kernel (into out_vals).
    Arrays a kind does not use may be empty. Returns like the other kernels.
    """
    n = xbits.shape[0]
    words = np.empty(SR_BLOCK, np.uint64)
    for k in range((n + SR_BLOCK - 1) // SR_BLOCK):
        a = k * SR_BLOCK
        b = min(a + SR_BLOCK, n)
        sr_fill(seeds[k], words, b - a)
        w = words[:b - a]
        if kind == 0:
            bad, st = fast_kernel(P, xbits[a:b], is64, STOCHASTIC, saturate, ftz, w,
                                  out_bits[a:b], out_vals[a:b], codes[:0], 0)
        elif kind == 1:
            bad, st = fast_kernel(P, xbits[a:b], is64, STOCHASTIC, saturate, ftz, w,
                                  out_bits[:0], out_vals[:0], codes[a:b], 1)
        elif kind == 2:
            bad, st = encode_kernel(P, xbits[a:b], is64, STOCHASTIC, saturate, ftz, w,
                                    codes[a:b], flags[a:b] if want_flags else flags,
                                    want_flags)
        else:
            bad, st = round_kernel(P, xbits[a:b], is64, STOCHASTIC, saturate, ftz, w,
                                   out_vals[a:b])
        if bad >= 0:
            return a + bad, st
    return -1, 0
