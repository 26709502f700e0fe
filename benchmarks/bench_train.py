"""Speed of the trainer: one fp16-amp step against one fp32 step of the same model, and
the whole ``lowprec demo``.

Targets (issue #5): fp16-amp step <= 3x the fp32 step; ``lowprec demo`` < 2 minutes on
2 cores (including numba compilation on a first run: run this in a fresh process after
clearing lowprec's numba cache to include it).

    python benchmarks/bench_train.py            # step ratios
    python benchmarks/bench_train.py --demo     # also time the full demo in a subprocess
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time

from lowprec.train import get_task, train


def step_times(policies: tuple[str, ...], task, steps: int, record: bool,
               repeats: int = 10) -> list[tuple[float, float]]:
    """Best-of-``repeats`` (wall, CPU) seconds per training step for each policy
    (evaluation excluded).

    The policies are timed in alternation, so a burst of load from other processes
    hits all of them alike; CPU time (``time.process_time``) is reported beside wall
    time because it is far less disturbed by other processes on a shared machine."""
    for p in policies:  # warm up: numba compilation, caches
        train(p, task, steps=5, eval_every=10**9, record=record)
    best = [(float("inf"), float("inf"))] * len(policies)
    for _ in range(repeats):
        for i, p in enumerate(policies):
            w, c = time.perf_counter(), time.process_time()
            train(p, task, steps=steps, eval_every=10**9, record=record, sample_steps=())
            w, c = (time.perf_counter() - w) / steps, (time.process_time() - c) / steps
            best[i] = (min(best[i][0], w), min(best[i][1], c))
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--demo", action="store_true", help="also time `lowprec demo` end to end")
    args = ap.parse_args()
    base = get_task("underflow")
    models = {
        "demo model 32-64-64-10, batch 64": base,
        "wider 32-256-256-10, batch 256": dataclasses.replace(base, hidden=(256, 256),
                                                               batch_size=256),
    }
    for label, task in models.items():
        for record in (True, False):
            (w32, c32), (w16, c16) = step_times(("fp32", "fp16-amp"), task, args.steps,
                                                record)
            print(f"{label:36s} instrumented={record!s:5s}  fp32 {w32 * 1e3:6.3f} ms/step "
                  f"(CPU {c32 * 1e3:6.3f})  fp16-amp {w16 * 1e3:6.3f} ms/step (CPU "
                  f"{c16 * 1e3:6.3f})  ratio {w16 / w32:4.2f}x wall, {c16 / c32:4.2f}x CPU "
                  "(target <= 3x)", flush=True)
    if args.demo:
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "lowprec", "demo", "--out", f"{tmp}/demo"],
                           check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - t
        print(f"lowprec demo: {wall:.1f} s wall (the README asks < 30 s warm on 2 cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
