"""What every array front end needs around the compiled kernels: input coercion,
the random words of stochastic rounding, chunking and worker threads.

``rounding``, ``arith`` and ``matmul`` share these; none of it is public API.
"""

from __future__ import annotations

import numbers
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ._kernels import sr

_CHUNK = 1 << 20  # elements per chunk (a multiple of sr.SR_BLOCK)


def _is_ml_dtypes_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of ml_dtypes' floating-point types (bfloat16, float8_*, ...)."""
    import ml_dtypes

    try:
        ml_dtypes.finfo(dtype)
    except (TypeError, ValueError, KeyError, AttributeError):
        return False
    return True


def _as_float_array(x: Any, what: str = "x") -> tuple[np.ndarray, bool]:
    """``x`` as a float32/float64 array, never a view that we might write to.

    Returns the array and whether ``x`` was a scalar (to return a scalar back).
    """
    scalar = np.ndim(x) == 0 and not isinstance(x, np.ndarray)
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind == "c":
        raise TypeError(f"{what} is complex ({arr.dtype}); round the real and imaginary parts")
    if kind == "V" and _is_ml_dtypes_float(arr.dtype):
        with np.errstate(invalid="ignore"):  # ml_dtypes warns on casting its NaNs
            return arr.astype(np.float64), scalar  # bfloat16, float8_*, ...: exact in float64
    if kind in "OSUVMm":
        raise TypeError(
            f"{what} has dtype {arr.dtype}; lowprec accepts real numbers "
            "(float, int or bool arrays, ml_dtypes floats, Python scalars and lists of them)"
        )
    if arr.dtype == np.float32 or arr.dtype == np.float64:
        return arr, scalar
    if kind == "f" and arr.dtype.itemsize > 8:
        raise TypeError(
            f"{what} has dtype {arr.dtype}; lowprec rounds from float32 or float64 only "
            "(longdouble would be rounded twice)"
        )
    if kind in "iu":
        as_float = arr.astype(np.float64)
        if arr.dtype.itemsize == 8 and arr.size:
            # Integers of 8 bytes may not be float64s: converting would round
            # them once before lowprec rounds them again. Refuse those.
            top = 2.0**63 if kind == "i" else 2.0**64  # the dtype's range, as floats
            fits = (as_float >= -top) & (as_float < top)
            back = np.where(fits, as_float, 0).astype(arr.dtype)
            inexact = ~fits | (back != arr)
            if inexact.any():
                raise ValueError(
                    f"{what} holds integers that float64 cannot hold exactly (e.g. "
                    f"{arr.reshape(-1)[np.argmax(inexact.reshape(-1))]}); pass them as floats "
                    "if rounding them to float64 first is what you want"
                )
        return as_float, scalar
    # float16 and bool: exact in float64.
    return arr.astype(np.float64), scalar


def _random_words(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniform 64-bit words (stochastic rounding's block seeds): the raw output
    of the Generator's bit generator (PCG64, SFC64, Philox, MT19937 all give full
    64-bit words)."""
    return rng.bit_generator.random_raw(n)


def _get_rng(rng: Any) -> np.random.Generator:
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, numbers.Integral):  # Python and numpy ints, bool
        return np.random.default_rng(int(rng))
    if isinstance(rng, np.random.Generator):
        return rng
    raise TypeError(
        f"rng must be a numpy Generator (np.random.default_rng(seed)), a seed or None, "
        f"got {type(rng).__name__}"
    )


_POOL: ThreadPoolExecutor | None = None


def _threads() -> int:
    """Worker threads for large arrays: LOWPREC_NUM_THREADS, else the CPU count (<= 8)."""
    env = os.environ.get("LOWPREC_NUM_THREADS")
    if env:
        return max(1, int(env))
    return max(1, min(8, os.cpu_count() or 1))


def _submit(run, start: int, stop: int, seeds: np.ndarray) -> list:
    """Start converting start..stop, split across threads at multiples of
    SR_BLOCK (so each part starts on a stochastic-rounding block); returns the
    pending results, each ``(offset, future)`` (or ``(offset, (bad, status))``
    when run inline). ``seeds`` holds one seed per block of start..stop (or none)."""
    n = stop - start
    nt = _threads() if n >= 1 << 15 else 1  # small arrays: no thread hand-off
    if nt == 1:
        return [(start, run(start, stop, seeds))]
    global _POOL
    if _POOL is None or _POOL._max_workers != nt:  # noqa: SLF001
        _POOL = ThreadPoolExecutor(max_workers=nt, thread_name_prefix="lowprec")
    block = sr.SR_BLOCK
    cuts = [start + ((n * k) // nt) // block * block for k in range(nt)] + [stop]
    return [
        (a, _POOL.submit(run, a, b,
                         seeds[(a - start) // block:] if seeds.shape[0] else seeds))
        for a, b in zip(cuts[:-1], cuts[1:])
    ]


def _collect(pending: list):
    """Wait for results of :func:`_submit`; yields (first bad index or -1, status)."""
    for offset, res in pending:
        bad, status = res.result() if hasattr(res, "result") else res
        yield (offset + bad if bad >= 0 else -1), status



# Single-pass kernels (no chunks: they allocate nothing per element) are split
# across threads only where a thread hand-off (tens of microseconds) pays.
_SPLIT_MIN = 1 << 18  # elements per thread, at least


def _run_split(run, n: int, block: int) -> list:
    """``run(start, stop)`` over 0..n, on up to :func:`_threads` threads in
    parts of at least ``_SPLIT_MIN`` elements cut at multiples of ``block``
    (stochastic rounding's block); the calling thread does the first part
    itself. Returns ``(start, result)`` of the parts, in order."""
    if n < 2 * _SPLIT_MIN:
        return [(0, run(0, n))]
    nt = min(_threads(), n // _SPLIT_MIN)
    if nt == 1:
        return [(0, run(0, n))]
    global _POOL
    if _POOL is None or _POOL._max_workers != nt:  # noqa: SLF001  (the pool _submit uses)
        _POOL = ThreadPoolExecutor(max_workers=nt, thread_name_prefix="lowprec")
    cuts = [((n * k) // nt) // block * block for k in range(nt)] + [n]
    futures = [(a, _POOL.submit(run, a, b)) for a, b in zip(cuts[1:-1], cuts[2:])]
    return [(0, run(cuts[0], cuts[1]))] + [(a, f.result()) for a, f in futures]
