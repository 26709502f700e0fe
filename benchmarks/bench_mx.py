"""MX quantize + dequantize of a 4096x4096 float32 matrix (target: < 2 s on 2 cores).

Prints the wall time (best of --repeat) of each MX format, the process CPU time of
that run (robust on a busy machine), and, as a reference on the same machine, the
time of a plain float32 -> fp8_e4m3 -> float64 round trip of the same matrix
(``lowprec.encode`` + ``lowprec.decode``), so the ratio says what the blocking
and scaling cost on top of element rounding.

    PYTHONPATH=. python benchmarks/bench_mx.py [--n 4096] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import lowprec as lp
from lowprec import mx, nvfp4

CPU: list[float] = []  # process CPU seconds of the best run of each best_of call


def best_of(fn, repeat: int) -> float:
    """Best wall time of ``repeat`` runs (after a warm-up); its CPU time goes to CPU."""
    fn()  # warm up (numba compile, tables)
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0, time.process_time() - c0))
    CPU.append(best[1])
    return best[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal((args.n, args.n)).astype(np.float32)

    ref = best_of(lambda: lp.decode(lp.encode(x, "fp8_e4m3", saturate=True), "fp8_e4m3"),
                  args.repeat)
    print(f"{args.n}x{args.n} float32, threads={lp._runtime._threads()}")
    print(f"reference fp8_e4m3 encode+decode (no scaling): {ref:.3f} s   (CPU {CPU[-1]:.3f} s)")
    worst = 0.0
    for name in mx.MX_FORMATS:
        t = best_of(lambda name=name: mx.quantize(x, name).dequantize(), args.repeat)
        worst = max(worst, t)
        print(f"{name:12s} quantize+dequantize: {t:.3f} s   ratio to reference {t / ref:5.2f}"
              f"   (CPU {CPU[-1]:.3f} s)")
    for rule in ("rceil", "even"):
        t = best_of(lambda rule=rule: mx.quantize(x, "mxfp4", scale_rule=rule).dequantize(),
                    args.repeat)
        print(f"mxfp4 {rule:6s} quantize+dequantize: {t:.3f} s   ratio {t / ref:5.2f}")
    t = best_of(lambda: nvfp4.quantize(x).dequantize(), args.repeat)
    print(f"nvfp4        quantize+dequantize: {t:.3f} s   ratio to reference {t / ref:5.2f}")
    print(f"slowest MX format: {worst:.3f} s (target < 2 s): {'PASS' if worst < 2 else 'FAIL'}")


if __name__ == "__main__":
    main()
