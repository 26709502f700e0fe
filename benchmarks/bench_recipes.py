"""NVFP4 training-recipe quantizers on a 4096x4096 float32 matrix (target: <= 0.2 s each
on one core for the RHT + 16x16-block operands).

Prints, per recipe step, the wall time (best of --repeat) and the process CPU time of
that run (robust on a busy machine; every step here runs on one thread), and, as the
reference of the same run, lowprec.nvfp4.quantize (the 1x16 RNE quantizer without the
recipe's parts), so the ratio says what the recipe's ingredients cost on top of it.

    PYTHONPATH=. python benchmarks/bench_recipes.py [--n 4096] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from lowprec import hadamard, nvfp4
from lowprec.recipes import nvfp4 as recipe


def best_of(fn, repeat: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the run with the best wall time, after a warm-up."""
    fn()
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0, time.process_time() - c0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal((args.n, args.n)).astype(np.float32)
    steps = {
        "reference: lowprec.nvfp4.quantize (1x16, rne)": lambda: nvfp4.quantize(x),
        "recipe 1x16 rne (fprop input)": lambda: recipe.quantize(x),
        "recipe 16x16 rne (weight)": lambda: recipe.quantize(x, (16, 16)),
        "rht along axis 0, transposed (wgrad)": lambda: hadamard.rht(x, axis=0),
        "rht + 16x16 blocks": lambda: recipe.quantize(hadamard.rht(x), (16, 16)),
        "wgrad_grad: rht + 1x16 stochastic (8-bit)": lambda: recipe.quantize_operand(
            x, "wgrad_grad", rng=0),
        "recipe 1x16 four_over_six (numpy)": lambda: recipe.quantize(x, four_over_six=True),
    }
    print(f"{args.n}x{args.n} float32, best of {args.repeat} (wall / CPU seconds)")
    ref = None
    for name, fn in steps.items():
        wall, cpu = best_of(fn, args.repeat)
        ref = ref or wall
        print(f"{name:48s} {wall:7.3f} s  CPU {cpu:7.3f} s  {wall / ref:5.2f}x reference")


if __name__ == "__main__":
    main()
