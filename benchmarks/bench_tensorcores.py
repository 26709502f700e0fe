"""Speed of the tensor-core models: ratios against numpy in the same run.

* 5,000 dot products of K = 32 (the size of the measured files) through
  ``lp.vecdot(..., model=...)`` for each architecture's FP8 or fp16 rule;
* a 256 x 256 x 4096 FP8 E4M3 matmul under the Hopper model, plain and promoted
  every 128 products (DeepSeek-V3), against numpy's float32 matmul.

Wall and CPU seconds, best of ``--repeat`` runs after one warm-up (numba compile)::

    python benchmarks/bench_tensorcores.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import lowprec as lp


def _best(fn, repeat: int) -> tuple[float, float]:
    fn()  # compile / warm up
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("5,000 dot products, K = 32 (lp.vecdot)")
    for model, inputs in [("v100", "fp16"), ("a100", "bf16"), ("ada", "fp8_e4m3"),
                          ("h100", "fp8_e4m3"), ("b200", "fp8_e5m2")]:
        a = lp.round_to(rng.standard_normal((5000, 32)), inputs)
        b = lp.round_to(rng.standard_normal((5000, 32)), inputs)
        c = lp.round_to(rng.standard_normal(5000), "fp32")
        def run(a=a, b=b, c=c, inputs=inputs, model=model):
            return lp.vecdot(a, b, c, inputs=inputs, model=model)

        def numpy_ref(a=a, b=b):
            return np.vecdot(a.astype(np.float32), b.astype(np.float32))

        wall, cpu = _best(run, args.repeat)
        ref, _ = _best(numpy_ref, args.repeat)
        print(f"  {model:>5} {inputs:>9}: {wall:.3f} s wall, {cpu:.3f} s CPU "
              f"({wall / ref:.0f}x numpy float32 vecdot)")
    A = lp.round_to(rng.standard_normal((256, 4096)), "fp8_e4m3")
    B = lp.round_to(rng.standard_normal((4096, 256)), "fp8_e4m3")
    ref, _ = _best(lambda: A.astype(np.float32) @ B.astype(np.float32), args.repeat)
    print("256 x 256 x 4096 FP8 E4M3 matmul")
    for model in ("h100", "deepseek_v3"):
        wall, cpu = _best(lambda m=model: lp.matmul(A, B, inputs="fp8_e4m3", model=m),
                          args.repeat)
        print(f"  {model:>11}: {wall:.2f} s wall, {cpu:.2f} s CPU ({wall / ref:.0f}x numpy "
              "float32 matmul)")


if __name__ == "__main__":
    main()
