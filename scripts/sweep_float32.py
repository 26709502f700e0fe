#!/usr/bin/env python
"""Sweep float32 bit patterns through lowprec and numpy/ml_dtypes (rne).

For each format that numpy or ml_dtypes implements (fp16, bf16, every 8-bit
format, fp6, fp4, e8m0) every float32 bit pattern (or an evenly spread subset,
``--patterns``) is encoded by ``lowprec.encode`` and by the reference cast
(``x.astype(dtype)``), and the codes are compared (any NaN matches any NaN).
By default it also holds lowprec's fast kernel equal to its generic kernel
(``encode(..., flags=True)`` takes ``_kernels.convert``'s ``path="reference"``, through ``round_pack``).

One documented exception is counted apart, not as a mismatch: ml_dtypes'
float8_e8m0fnu rounds float32 subnormals strictly between 2**-127 and
1.5 * 2**-127 (bits 0x00400001..0x005FFFFF) up to 2**-126, though 2**-127 is
nearer (see tests/test_round_reference.py); the script checks that lowprec
gives 2**-127 there.

With ``--stochastic SEED`` it sweeps stochastic rounding instead: there is no
reference cast, so the fast kernels' codes are compared with the generic
kernel's (``round_pack``, one element at a time) under the same words (chunk k
of a format rounds with ``rng=SEED + k`` on both sides); every format of 16
bits or fewer and tf32.

Usage::

    python scripts/sweep_float32.py                       # all 2**32 patterns
    python scripts/sweep_float32.py --patterns 16777216   # 2**24, spread out
    python scripts/sweep_float32.py --formats fp16 bf16 --no-generic
    python scripts/sweep_float32.py --jobs 4              # formats in parallel
    python scripts/sweep_float32.py --stochastic 1 --patterns 67108864   # fast vs round_pack

Exit status 1 if any format has an unexplained mismatch.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import lowprec as lp
from lowprec.formats import reference_dtype

TOTAL = 1 << 32
DEFAULT_FORMATS = [n for n in lp.FORMATS if n not in ("fp32", "tf32")]


def patterns(start: int, count: int, stride: int) -> np.ndarray:
    """Bit patterns k * stride + (a scrambled offset below stride), for
    start <= k < start + count: evenly spread, every exponent and sign."""
    if stride == 1:
        return np.arange(start, start + count, dtype=np.uint32)
    k = np.arange(start, start + count, dtype=np.uint64)
    offset = (k * np.uint64(2654435761)) % np.uint64(stride) if stride > 1 else 0
    return (k * np.uint64(stride) + offset).astype(np.uint32)


def sweep(name: str, n_patterns: int, chunk: int, generic: bool,
          stochastic: int | None = None) -> dict:
    fmt = lp.get_format(name)
    dt = reference_dtype(fmt)
    stride = TOTAL // n_patterns
    stats = {"checked": 0, "mismatches": 0, "explained": 0, "fast_vs_generic": 0,
             "skipped_nan": 0, "first": None}
    # Which codes are NaN (any NaN matches any NaN), as a lookup table.
    is_nan_code = np.isnan(lp.decode(np.arange(1 << fmt.width, dtype=fmt.code_dtype), fmt))
    t0 = time.perf_counter()
    for start in range(0, n_patterns, chunk):
        bits = patterns(start, min(chunk, n_patterns - start), stride)
        x = bits.view(np.float32)
        if not fmt.has_nan:  # NaN has no code in fp4/fp6: lowprec raises, by design
            keep = ~np.isnan(x)
            stats["skipped_nan"] += int(x.size - keep.sum())
            bits, x = bits[keep], x[keep]
        if stochastic is not None:  # the fast kernels against round_pack, the same words
            seed = stochastic + start // chunk
            codes = lp.encode(x, fmt, "stochastic", rng=seed)
            codes_generic, _ = lp.encode(x, fmt, "stochastic", rng=seed, flags=True)
            bad = codes != codes_generic
            stats["fast_vs_generic"] += int(np.count_nonzero(bad))
            if bad.any() and stats["first"] is None:
                i = int(np.flatnonzero(bad)[0])
                stats["first"] = (int(bits[i]), int(codes[i]), int(codes_generic[i]))
            stats["checked"] += int(x.size)
            continue
        with np.errstate(all="ignore"):
            ref = x.astype(dt)
            ref_nan = np.isnan(ref.astype(np.float64))
        ref_codes = ref.view(fmt.code_dtype)
        codes = lp.encode(x, fmt)
        nan = is_nan_code.take(codes)
        bad = ~((codes == ref_codes) | (nan & ref_nan))
        if name == "e8m0":
            window = (bits > 0x00400000) & (bits < 0x00600000)
            explained = bad & window & (codes == 0)  # lowprec: 2**-127, the nearest
            stats["explained"] += int(explained.sum())
            bad &= ~explained
        if bad.any():
            stats["mismatches"] += int(bad.sum())
            if stats["first"] is None:
                i = int(np.flatnonzero(bad)[0])
                stats["first"] = (int(bits[i]), int(codes[i]), int(ref_codes[i]))
        if generic:
            codes_generic, _ = lp.encode(x, fmt, flags=True)
            stats["fast_vs_generic"] += int(np.count_nonzero(codes_generic != codes))
        stats["checked"] += int(x.size)
    stats["seconds"] = time.perf_counter() - t0
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", nargs="+", default=DEFAULT_FORMATS,
                        help="formats to sweep (default: all with a numpy/ml_dtypes type)")
    parser.add_argument("--patterns", type=int, default=TOTAL,
                        help="how many float32 patterns, a power of two (default 2**32: all)")
    parser.add_argument("--chunk", type=int, default=1 << 24, help="patterns per chunk")
    parser.add_argument("--jobs", type=int, default=1,
                        help="formats swept in parallel processes (default 1)")
    parser.add_argument("--no-generic", action="store_true",
                        help="skip the fast-vs-generic kernel comparison")
    parser.add_argument("--stochastic", type=int, metavar="SEED", default=None,
                        help="sweep stochastic rounding (fast kernels against round_pack, "
                             "the same words) instead of rne against numpy/ml_dtypes")
    args = parser.parse_args(argv)
    n = args.patterns
    if n < 1 or n > TOTAL or n & (n - 1):
        parser.error("--patterns must be a power of two between 1 and 2**32")
    import ml_dtypes

    print(f"lowprec {lp.__version__}, numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}")
    what = "rne" if args.stochastic is None else f"stochastic (seed {args.stochastic}, " \
        "fast kernels against round_pack)"
    print(f"{n} float32 patterns per format (stride {TOTAL // n}), {what}")
    print(f"{'format':16} {'checked':>11} {'mismatches':>10} {'explained':>9} "
          f"{'fast!=gen':>9} {'seconds':>8}")
    failed = False
    total_time = 0.0
    names = []
    formats = args.formats
    if args.stochastic is not None and formats == DEFAULT_FORMATS:
        formats = [n for n, f in lp.FORMATS.items() if f.width <= 16] + ["tf32"]
    for name in formats:
        fmt = lp.get_format(name)
        if reference_dtype(fmt) is None and args.stochastic is None:
            print(f"{fmt.name:16} (no numpy/ml_dtypes type: skipped)")
        else:
            names.append(fmt.name)
    jobs = [(name, n, min(args.chunk, n), not args.no_generic, args.stochastic)
            for name in names]
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(args.jobs) if args.jobs > 1 else None
    try:  # (the pool is shut down before exit: an open one fails at interpreter exit)
        results = pool.map(sweep, *zip(*jobs)) if pool else (sweep(*job) for job in jobs)
        for name, s in zip(names, results):
            total_time += s["seconds"]
            gen = ("-" if args.no_generic and args.stochastic is None
                   else str(s["fast_vs_generic"]))
            print(f"{name:16} {s['checked']:>11} {s['mismatches']:>10} {s['explained']:>9} "
                  f"{gen:>9} {s['seconds']:>8.1f}", flush=True)
            if s["first"] is not None:
                b, c, r = s["first"]
                print(f"    first mismatch: float32 {b:#010x}: lowprec {c:#x}, reference {r:#x}")
            failed |= s["mismatches"] > 0 or s["fast_vs_generic"] > 0
    finally:
        if pool is not None:
            pool.shutdown()
    print(f"total {total_time:.1f} s of sweeping; {'FAILED' if failed else 'all match'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
