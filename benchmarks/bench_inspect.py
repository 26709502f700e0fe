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
3. ``report`` of a captured ResNet-size set of tensors (``--captured``): the tensors a
   ``capture(max_values=65536)`` of a ResNet-18 at half width keeps for one step (every
   conv/linear layer's weight and weight gradient whole, its input and output gradient
   as 65536-value samples with the full tensor's amax): about 10^7 values in 84 named
   tensors, one report per plain and FP8 recipe (target >= 20 M values/s each).

    PYTHONPATH=. python benchmarks/bench_inspect.py [--steps 200] [--rounds 5] [--repeat 3]
        [--report-only]   # part 2 alone (LOWPREC_NUM_THREADS=1 for one thread)
        [--captured]      # part 3 alone
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
    ap.add_argument("--captured", action="store_true",
                    help="part 3 alone: report of a captured ResNet-size set of tensors")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.captured:
        captured_report_speed(args.repeat)
        return
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


#: ResNet-18's conv and linear layers at half width: (name, out, in, kernel), and the
#: spatial size of each layer's output at batch 32, 224x224 input.
_RESNET18_HALF = (
    [("conv1", 32, 3, 7, 112)]
    + [(f"layer1.{b}.conv{c}", 32, 32, 3, 56) for b in range(2) for c in (1, 2)]
    + [("layer2.0.conv1", 64, 32, 3, 28), ("layer2.0.conv2", 64, 64, 3, 28),
       ("layer2.0.downsample", 64, 32, 1, 28), ("layer2.1.conv1", 64, 64, 3, 28),
       ("layer2.1.conv2", 64, 64, 3, 28)]
    + [("layer3.0.conv1", 128, 64, 3, 14), ("layer3.0.conv2", 128, 128, 3, 14),
       ("layer3.0.downsample", 128, 64, 1, 14), ("layer3.1.conv1", 128, 128, 3, 14),
       ("layer3.1.conv2", 128, 128, 3, 14)]
    + [("layer4.0.conv1", 256, 128, 3, 7), ("layer4.0.conv2", 256, 256, 3, 7),
       ("layer4.0.downsample", 256, 128, 1, 7), ("layer4.1.conv1", 256, 256, 3, 7),
       ("layer4.1.conv2", 256, 256, 3, 7), ("fc", 1000, 256, 1, 1)])


def captured_resnet(max_values: int = 65536, seed: int = 0) -> tuple[dict, dict]:
    """The samples and full-tensor amaxes a capture of the network above keeps for one
    step (synthetic values of each kind's usual magnitude)."""
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {}
    amax: dict[str, float] = {}
    for name, cout, cin, k, hw in _RESNET18_HALF:
        shape = (cout, cin) if name == "fc" else (cout, cin, k, k)
        w = (rng.standard_normal(shape) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        tensors[f"{name}/weight@0"] = w
        tensors[f"{name}/weight_grad@0"] = (w * rng.lognormal(-12, 2, shape)).astype(np.float32)
        cols = hw if name != "fc" else cin  # the last axis, whole rows as captured
        rows = max_values // cols
        x = np.maximum(rng.standard_normal((rows, cols)), 0).astype(np.float32)
        g = (rng.standard_normal((rows, cols)) * rng.lognormal(-14, 2, (rows, 1))
             ).astype(np.float32)
        tensors[f"{name}/input@0"], tensors[f"{name}/output_grad@0"] = x, g
        amax[f"{name}/input@0"] = float(np.abs(x).max()) * 1.5  # the full tensor's
        amax[f"{name}/output_grad@0"] = float(np.abs(g).max()) * 1.5
    return tensors, amax


def captured_report_speed(repeat: int) -> None:
    """Part 3: ``report`` of the captured set, one report per plain and FP8 recipe."""
    tensors, amax = captured_resnet()
    n = sum(t.size for t in tensors.values())
    print(f"report of a captured ResNet-18 (half width) step: {len(tensors)} tensors, "
          f"{n / 1e6:.1f} M values, threads={lp_runtime._threads()} "
          "(M values/s: wall, per CPU second)")
    names = [r for r in inspect.RECIPES if inspect.get_recipe(r).kind
             in ("cast", "loss_scale", "current", "delayed") and r != "fp32"]
    slowest = np.inf
    for name in names:
        inspect.report({"l/output_grad": tensors["fc/output_grad@0"][:8]}, [name],
                       loss_scale=1024.0)  # warm up
        wall = cpu = np.inf
        for _ in range(repeat):
            c0, t0 = time.process_time(), time.perf_counter()
            inspect.report(tensors, [name], amax=amax, loss_scale=1024.0)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            if dt < wall:
                wall, cpu = dt, dc
        rate, rate_cpu = n / wall / 1e6, n / cpu / 1e6
        slowest = min(slowest, rate)
        print(f"  {name:18s} {rate:7.1f} {rate_cpu:7.1f}")
    print(f"slowest plain/FP8 recipe: {slowest:.1f} M values/s wall (target >= 20)")


if __name__ == "__main__":
    main()
