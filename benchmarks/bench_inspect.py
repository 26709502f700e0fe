"""Cost of lowprec.torch.capture and speed of lowprec.inspect.report (targets: capture
every=1 <= 2x and every=10 <= 1.2x a plain training step of tutorial 11's model; report
>= 20 M values/s per recipe, MX and NVFP4 included).

1. Training steps of tutorial 11's digits MLP (64-128-64-10, batch 64, SGD with
   momentum, one torch thread), plain and under ``capture(every=1)`` and
   ``capture(every=10)``, in CPU seconds, interleaved in rounds so the machine's load
   hits all three alike; the ratios are of the best round of each.
2. ``report`` of one 1024x1024 float32 gradient-like tensor under each recipe: values per
   second of wall time (best of --repeat) and per CPU second of that run (robust on a
   busy machine; ``LOWPREC_NUM_THREADS`` sets lowprec's threads).

    PYTHONPATH=. python benchmarks/bench_inspect.py [--steps 200] [--rounds 5] [--repeat 3]
        [--report-only]   # part 2 alone (LOWPREC_NUM_THREADS=1 for one thread)
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np
import torch

import lowprec.torch as lpt
from lowprec import _runtime as lp_runtime
from lowprec import inspect


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10))


def train_seconds(steps: int, every: int | None) -> float:
    """CPU seconds per step of ``steps`` training steps (capture every ``every``): the
    process's CPU time, which a busy machine does not inflate as it does wall time
    (torch runs on one thread here)."""
    g = torch.Generator().manual_seed(1)
    x = torch.rand(1400, 64, generator=g)
    y = torch.randint(0, 10, (1400,), generator=g)
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ctx = lpt.capture(model, every=every) if every else contextlib.nullcontext()
    with ctx:
        t0 = time.process_time()
        for _ in range(steps):
            idx = torch.randint(0, 1400, (64,), generator=g)
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        return (time.process_time() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--report-only", action="store_true", help="skip the capture timings")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not args.report_only:
        capture_costs(args.steps, args.rounds)
    report_speed(args.n, args.repeat)


def capture_costs(steps: int, rounds: int) -> None:
    """Part 1: training steps plain and under capture, CPU time, best round of each."""
    best = {None: np.inf, 1: np.inf, 10: np.inf}
    train_seconds(20, 1)  # warm up
    for _ in range(rounds):
        for every in best:
            best[every] = min(best[every], train_seconds(steps, every))
    plain = best[None]
    print(f"training step of the tutorial-11 model (CPU time): plain {plain * 1e3:.3f} ms")
    for every, target in ((1, 2.0), (10, 1.2)):
        ratio = best[every] / plain
        verdict = "ok" if ratio <= target else "OVER TARGET"
        print(f"  capture every={every:2d}: {best[every] * 1e3:.3f} ms = {ratio:.2f}x plain "
              f"(target <= {target}x) {verdict}")


def report_speed(n: int, repeat: int) -> None:
    """Part 2: ``report`` of one n x n float32 tensor under each recipe."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((n, n)) * np.exp2(rng.integers(-20, 0, (n, 1)))
         ).astype(np.float32)
    print(f"\nreport of one {n}x{n} float32 tensor, per recipe, threads="
          f"{lp_runtime._threads()} (M values/s: wall, per CPU second)")
    slowest = np.inf
    for name in inspect.RECIPES:
        inspect.report({"l/output_grad": x[:64]}, [name])  # warm up
        wall = cpu = np.inf
        for _ in range(repeat):
            c0, t0 = time.process_time(), time.perf_counter()
            inspect.report({"l/output_grad": x}, [name])
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            if dt < wall:
                wall, cpu = dt, dc
        rate, rate_cpu = x.size / wall / 1e6, x.size / cpu / 1e6
        slowest = min(slowest, rate)
        print(f"  {name:18s} {rate:7.1f} {rate_cpu:7.1f}")
    print(f"slowest recipe: {slowest:.1f} M values/s wall (target >= 20)")


if __name__ == "__main__":
    main()
