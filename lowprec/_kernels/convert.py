"""Entry points from float32/float64 bit patterns into a format, one per output
kind: :func:`to_codes` and :func:`to_values`. Each chooses its kernel by ``path``:

* ``"reference"``: the scalar reference, ``engine.convert_one`` -> ``round_pack``
  for every element (the only path that reports exception flags);
* ``"fast"``: the fastest twin that applies (``bits32.round_bits32`` for
  float32 in, every format but fp32; else ``fast.vec32_kernel``, else
  ``fast.fast_kernel``), and the reference where none does, as the router
  picks it (:func:`.route.fast_path`, :func:`.route.kernel_for`);
* ``"auto"``: ``"fast"``, or :class:`.route.Cold` where that kernel is not
  compiled yet (the public verbs then serve the call with :mod:`.vec`).

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

from . import odd64
from .engine import encode_kernel, round_kernel
from .fast import VEC32_KERNELS, fast_kernel, vec32_fixup, vec32_kernel
from .params import INVALID_NAN, MODE_INT, STOCHASTIC, FormatParams, format_params
from .route import Cold, call, fast_path, kernel_for, kind, ready
from .sr import SR_BLOCK, sr_fill

__all__ = ["MODE_INT", "PATHS", "fast_path", "kernel_for", "to_codes", "to_values"]

#: The paths an entry point takes ("auto": "fast", or :class:`.route.Cold`
#: where its kernel would compile first).
PATHS = ("reference", "fast", "auto")

_kernel = njit(cache=True, nogil=True)
_NO_WORDS = np.empty(0, np.uint64)


@lru_cache(maxsize=256)
def _params(fmt: Any) -> FormatParams:
    return format_params(fmt)


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
    ``flags`` (reference path only, which ``"auto"`` then takes) receives the
    exception flags. Returns
    ``(index, status)`` of the first element without a code, or ``(-1, 0)``.
    ``path="auto"`` raises :class:`.route.Cold` (before writing anything)
    where the kernel would be compiled first.
    """
    is64 = _check(path, xbits, mode, seeds)
    P = _params(fmt)
    auto = path == "auto"
    how = kind(fmt, is64, True, ftz, mode, "reference" if auto and flags is not None else path)
    if flags is not None and how != "reference":
        raise ValueError("exception flags come from path='reference' only")
    if how == "odd64":
        return _odd64(fmt, xbits, mode, codes, saturate, ftz, auto)
    if how == "bits32":
        return _bits32(fmt, xbits, mode, codes, saturate, ftz, seeds, True, auto)
    if how == "vec32":
        return _vec32(auto, P, xbits, mode, saturate, seeds, np.empty(0, np.int32), codes, 1)
    no_bits = np.empty(0, xbits.dtype)
    no_vals = np.empty(0, np.float64 if is64 else np.float32)
    want_flags = flags is not None
    fl = flags if flags is not None else np.empty(0, np.uint8)
    if mode == STOCHASTIC:
        return call(auto, stochastic_kernel, 1 if how == "scalar" else 2, P, xbits, is64,
                    saturate, ftz, seeds, no_bits, no_vals, codes, fl, want_flags)
    if how == "scalar":
        return call(auto, fast_kernel, P, xbits, is64, mode, saturate, ftz, _NO_WORDS, no_bits,
                    no_vals, codes, 1)
    return call(auto, encode_kernel, P, xbits, is64, mode, saturate, ftz, _NO_WORDS, codes, fl,
                want_flags)


def to_values(fmt: Any, xbits: np.ndarray, mode: int, out: np.ndarray, *,
              saturate: bool = False, ftz: bool = False, seeds: np.ndarray = _NO_WORDS,
              path: str = "fast") -> tuple[int, int]:
    """Write the values of ``xbits`` rounded to ``fmt`` into ``out`` (float32 or
    float64: every value of the format must be one). Arguments and result as
    :func:`to_codes`."""
    is64 = _check(path, xbits, mode, seeds)
    P = _params(fmt)
    same = out.dtype == (np.float64 if is64 else np.float32)
    how = kind(fmt, is64, same, ftz, mode, path)
    auto = path == "auto"
    if how == "odd64":
        return _odd64(fmt, xbits, mode, out, saturate, ftz, auto)
    if how == "bits32":
        return _bits32(fmt, xbits, mode, out, saturate, ftz, seeds, False, auto)
    if how == "vec32":
        return _vec32(auto, P, xbits, mode, saturate, seeds, out.view(np.int32),
                      np.empty(0, fmt.code_dtype), 0)
    no_codes = np.empty(0, fmt.code_dtype)
    no_flags = np.empty(0, np.uint8)
    if mode == STOCHASTIC:
        if how == "scalar":
            return call(auto, stochastic_kernel, 0, P, xbits, is64, saturate, ftz, seeds,
                        out.view(xbits.dtype), out, no_codes, no_flags, False)
        return call(auto, stochastic_kernel, 3, P, xbits, is64, saturate, ftz, seeds,
                    np.empty(0, xbits.dtype), out, no_codes, no_flags, False)
    if how == "scalar":
        return call(auto, fast_kernel, P, xbits, is64, mode, saturate, ftz, _NO_WORDS,
                    out.view(xbits.dtype), out, no_codes, 0)
    return call(auto, round_kernel, P, xbits, is64, mode, saturate, ftz, _NO_WORDS, out)


def _vec32(auto: bool, P: Any, xbits: np.ndarray, mode: int, saturate: bool,
           seeds: np.ndarray, out_bits: np.ndarray, codes: np.ndarray, want_codes: int
           ) -> tuple[int, int]:
    """fast.vec32_kernel, whose two passes are compiled (or, with ``auto``,
    both asked for and :class:`.route.Cold` raised) before either runs."""
    if auto:
        todo = np.empty(0, np.int64)
        first = ready(VEC32_KERNELS[mode], (P, xbits, seeds, out_bits, codes, want_codes, todo))
        if not (ready(vec32_fixup, (P, xbits, mode, saturate, seeds, out_bits, codes,
                                    want_codes, todo)) and first):
            raise Cold("vec32")
    return vec32_kernel(P, xbits, mode, saturate, seeds, out_bits, codes, want_codes)


def _bits32(fmt: Any, xbits: np.ndarray, mode: int, out: np.ndarray, saturate: bool,
            ftz: bool, seeds: np.ndarray, want_codes: bool, auto: bool = False
            ) -> tuple[int, int]:
    """The bits32 kernels (:func:`.route.kernel_for`), answering like the other
    kernels: the index of the first NaN when the format has none, else (-1, 0).
    They take float32 arrays in and out (values) or codes out, one signature
    for every caller."""
    kernel, q = kernel_for(fmt, mode, saturate, ftz, want_codes)
    x = xbits.view(np.float32)
    if x.shape[0] and out.ctypes.data == x.ctypes.data:
        if auto:
            call(auto, kernel, q, x[:0], seeds, np.empty(0, x.dtype))  # Cold, or compiled
        bad = _in_place(kernel, q, x, seeds)
    else:
        bad = call(auto, kernel, q, x, seeds, out)
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
           ftz: bool, auto: bool = False) -> tuple[int, int]:
    """float64 bits through float32 rounded to odd, then bits32: codes into
    ``out`` (an integer array) or values (float64, converted exactly)."""
    x32 = np.empty(xbits.shape[0], np.uint32)
    if auto:  # both kernels compiled (or Cold, both asked for) before either runs
        kernel, q = kernel_for(fmt, mode, saturate, ftz, out.dtype.kind in "iu")
        first = ready(odd64.to_float32_odd, (xbits.view(np.float64), x32))
        if not (ready(kernel, (q, x32[:0].view(np.float32), _NO_WORDS,
                               out[:0] if out.dtype.kind in "iu" else np.empty(0, np.float32)))
                and first):
            raise Cold("odd64")
    odd64.to_float32_odd(xbits.view(np.float64), x32)
    if out.dtype.kind in "iu":
        return _bits32(fmt, x32, mode, out, saturate, ftz, _NO_WORDS, True, auto)
    vals = np.empty(xbits.shape[0], np.float32)
    res = _bits32(fmt, x32, mode, vals, saturate, ftz, _NO_WORDS, False, auto)
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
