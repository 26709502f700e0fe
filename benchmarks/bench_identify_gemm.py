"""Time to identify a library GEMM: ``lp.identify_gemm`` on a 256 x 1024 x 256 FP8 GEMM.

Three ground truths made with lowprec (cuBLASLt's FP8 default ``promote(128, "h100")``,
Hopper's fast accumulation, split-K 4 of the fast accumulation with C), each identified
from (A, B, C, D), with the wall time of one ``lp.matmul`` of the same GEMM under the
truth's model as the reference in the same run (the ratio is what to compare across
machines). Best of ``--repeat`` runs after one warm-up (numba compile)::

    python benchmarks/bench_identify_gemm.py [--repeat 3] [--size 256 1024 256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import lowprec as lp
from lowprec.matmul import promote


def _best(fn, repeat: int) -> tuple[float, object]:
    out = fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def _split4(a, b, c):
    k = a.shape[1]
    parts = [lp.matmul(a[:, lo:lo + k // 4], b[lo:lo + k // 4], c if lo == 0 else None,
                       inputs="fp8_e4m3", model="h100").astype(np.float32)
             for lo in range(0, k, k // 4)]
    return (((parts[0] + parts[1]) + parts[2]) + parts[3]).astype(np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, nargs=3, default=(256, 1024, 256),
                    metavar=("M", "K", "N"))
    args = ap.parse_args()
    m, k, n = args.size
    rng = np.random.default_rng(0)
    a = lp.round_to(rng.standard_normal((m, k)), "fp8_e4m3")
    b = lp.round_to(rng.standard_normal((k, n)), "fp8_e4m3")
    c = rng.standard_normal((m, n)).astype(np.float32).astype(np.float64)
    truths = [
        ("cublaslt_fp8 (promote 128)", None, lambda: lp.matmul(a, b, inputs="fp8_e4m3",
                                                                model=promote(128))),
        ("h100 fast accumulation", None, lambda: lp.matmul(a, b, inputs="fp8_e4m3",
                                                            model="h100")),
        ("split-K 4 of h100, with C", c, lambda: _split4(a, b, c)),
    ]
    print(f"identify_gemm, {m} x {k} x {n} FP8 E4M3, fp32 output (best of {args.repeat})")
    print(f"{'truth':30s} {'identify s':>10s} {'matmul s':>9s} {'ratio':>6s}  best")
    for name, cc, make in truths:
        t_mm, d = _best(make, args.repeat)
        t_id, ident = _best(lambda cc=cc, d=d: lp.identify_gemm(a, b, cc, d, inputs="fp8_e4m3"),
                            args.repeat)
        print(f"{name:30s} {t_id:10.2f} {t_mm:9.2f} {t_id / t_mm:6.1f}  "
              f"{ident.best.label()} ({ident.explained:.0%}, {len(ident.ties)} ties)")


if __name__ == "__main__":
    main()
