"""MX and NVFP4 quantize / dequantize of a 4096x4096 float32 array on ONE thread
(target: quantize <= 0.1 s for every MX element format under every scale rule, and
for NVFP4).

For each case it prints the best wall time of --repeat runs of the compiled block
kernels (``mx.quantize``, ``nvfp4.quantize``: the default path) and, in the same run,
of the numpy reference they replace (``mx._quantize_reference``,
``nvfp4._quantize_reference``), with the ratio and the process CPU time of the best
quantize run (robust on a busy machine); and, as the floor under both, the
time of the element rounding alone: ``lowprec.encode`` of the same array to the
element format (no scales), which both paths do once.

    PYTHONPATH=. python benchmarks/bench_quantize.py [--n 4096] [--repeat 3] [--no-reference]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

os.environ["LOWPREC_NUM_THREADS"] = "1"  # one thread: read by lowprec at each call

import numpy as np  # noqa: E402

import lowprec as lp  # noqa: E402
from lowprec import mx, nvfp4  # noqa: E402

TARGET = 0.1  # seconds per quantize


CPU: list[float] = []  # process CPU seconds of the best run of each best_of call


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``repeat`` runs after a warm-up (compiles, tables); the process
    CPU time of that run goes to CPU (on one thread it is the wall time a busy machine
    does not inflate)."""
    fn()
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
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-reference", action="store_true",
                    help="skip the numpy reference (3-5x slower)")
    args = ap.parse_args()
    x = (np.random.default_rng(0).standard_normal((args.n, args.n)) * 8).astype(np.float32)
    ref = not args.no_reference
    print(f"{args.n}x{args.n} float32 (normal * 8), threads={lp._runtime._threads()}, "
          f"best of {args.repeat}; seconds")
    print(f"{'case':24s} {'quantize':>9s} {'(CPU)':>6s} {'reference':>10s} {'ratio':>6s} "
          f"{'encode only':>12s} {'dequantize':>11s} {'reference':>10s}")
    worst = 0.0

    def row(name: str, fast_q: Callable[[], object], ref_q: Callable[[], object],
            element: Any, tensor: Any) -> None:
        nonlocal worst
        tq = best_of(fast_q, args.repeat)
        cq = CPU[-1]
        worst = max(worst, tq)
        tr = best_of(ref_q, args.repeat) if ref else float("nan")
        te = best_of(lambda: lp.encode(x, element, saturate=True), args.repeat)
        td = best_of(tensor.dequantize, args.repeat)
        tdr = best_of(tensor._dequantize_reference, args.repeat) if ref else float("nan")
        print(f"{name:24s} {tq:9.3f} {cq:6.3f} {tr:10.3f} {tr / tq:5.1f}x {te:12.3f} "
              f"{td:11.3f} {tdr:10.3f}")

    for fmt in mx.MX_FORMATS:
        mxf = mx.MX_FORMATS[fmt]
        for rule in mx.SCALE_RULES:
            def fast(fmt: str = fmt, rule: str = rule) -> object:
                return mx.quantize(x, fmt, scale_rule=rule)

            def reference(mxf: mx.MXFormat = mxf, rule: str = rule) -> object:
                return mx._quantize_reference(x, mxf, 1, 32, rule, "rne")

            row(f"{fmt} {rule}", fast, reference, mxf.element, fast())
    row("nvfp4", lambda: nvfp4.quantize(x),
        lambda: nvfp4._quantize_reference(x, 1, 16, "rne", None), "fp4_e2m1", nvfp4.quantize(x))
    verdict = "PASS" if worst <= TARGET else "MISS"
    print(f"slowest quantize: {worst:.3f} s (target <= {TARGET} s on one thread): {verdict}")


if __name__ == "__main__":
    main()
