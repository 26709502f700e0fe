"""Speed of the tensor-core models: ratios against numpy in the same run.

* 5,000 dot products of K = 32 (the size of the measured files) through
  ``lp.vecdot(..., model=...)`` for each architecture's FP8 or fp16 rule;
* a 256 x 256 x 4096 FP8 E4M3 matmul under the Hopper model, plain and promoted
  every 128 products (DeepSeek-V3), against numpy's float32 matmul;
* ``--big``: 1024 x 1024 x 1024 matmuls (fp16 and FP8 under ``h100``, FP8 under
  ``b200:tcgen05`` and ``deepseek_v3``) on one thread (``LOWPREC_NUM_THREADS=1``) in
  M multiply-adds per CPU-second and per wall second, beside numpy's float32 matmul,
  with the load average at the start and the end (issue #37: >= 1 G per CPU-second).
* ``--amd``: 1024 x 1024 x 1024 matmuls under the AMD mfma models (``mi100``,
  ``mi250``, ``mi300``, every input type of each; issue #37), the same columns, on
  one thread (``LOWPREC_NUM_THREADS=1``) and on every thread, beside numpy's float32
  matmul (on its own threads) and its rate per CPU-second.

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
    ap.add_argument("--big", action="store_true", help="only the 1024^3 matmuls")
    ap.add_argument("--amd", action="store_true", help="only the 1024^3 AMD mfma matmuls")
    ap.add_argument("--n", type=int, default=1024, help="matrix size for --amd (default 1024)")
    args = ap.parse_args()
    if args.big:
        _big(args.repeat)
        return
    if args.amd:
        _amd(args.repeat, args.n)
        return
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


def _big(repeat: int) -> None:
    import os

    from lowprec._kernels import route

    os.environ["LOWPREC_NUM_THREADS"] = "1"  # _runtime._threads reads it at every call
    rng = np.random.default_rng(1)
    n = 1024
    macs = float(n) ** 3
    x, y = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the start; "
          "lowprec on one thread (LOWPREC_NUM_THREADS=1), numpy on its own threads")
    ref_w, ref_c = _best(lambda: xf @ yf, repeat)
    print(f"1024^3 numpy float32 matmul: {macs / ref_w / 1e6:,.0f} M MAC/s wall, "
          f"{macs / ref_c / 1e6:,.0f} per CPU-second")
    for model, inputs in [("h100", "fp16"), ("h100", "fp8_e4m3"), ("b200:tcgen05", "fp8_e4m3"),
                          ("deepseek_v3", "fp8_e4m3")]:
        A, B = lp.round_to(x, inputs), lp.round_to(y, inputs)

        def run(m=model, f=inputs, A=A, B=B):
            return lp.matmul(A, B, inputs=f, model=m)

        run()
        route.wait()  # the kernels compiling in the background are ready (no numpy twin)
        wall, cpu = _best(run, repeat)
        print(f"  {model:>12} {inputs:>9}: {macs / cpu / 1e6:,.0f} M MAC/s per CPU-second, "
              f"{macs / wall / 1e6:,.0f} wall ({wall / ref_w:.0f}x numpy's wall time, "
              f"{cpu / ref_c:.0f}x its CPU time)")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the end")


def _amd(repeat: int, n: int) -> None:
    import os

    rng = np.random.default_rng(1)
    macs = float(n) ** 3
    x, y = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    ref_w, ref_c = _best(lambda: xf @ yf, repeat)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; "
          f"{n}^3 numpy float32 matmul: {macs / ref_w / 1e6:,.0f} M MAC/s wall, "
          f"{macs / ref_c / 1e6:,.0f} per CPU-second")
    rows = [("mi100", "fp16"), ("mi100", "bf16"), ("mi250", "fp16"), ("mi250", "bf16"),
            ("mi300", "fp16"), ("mi300", "bf16"), ("mi300", "tf32"), ("mi300", "fp8_e4m3fnuz"),
            ("mi300", "fp8_e5m2fnuz")]
    for threads in ("1", ""):
        if threads:
            os.environ["LOWPREC_NUM_THREADS"] = threads
        else:
            os.environ.pop("LOWPREC_NUM_THREADS", None)
        print(f"  {'one thread' if threads else 'every thread'}:")
        for model, inputs in rows:
            A, B = lp.round_to(x, inputs), lp.round_to(y, inputs)
            wall, cpu = _best(lambda m=model, f=inputs, A=A, B=B:
                              lp.matmul(A, B, inputs=f, model=m), repeat)
            print(f"  {model:>6}:mfma {inputs:>12}: {macs / wall / 1e6:,.0f} M MAC/s wall, "
                  f"{macs / cpu / 1e6:,.0f} per CPU-second ({wall / ref_w:.0f}x numpy's wall "
                  f"time, {cpu / ref_c:.0f}x its CPU time)")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the end")


if __name__ == "__main__":
    main()
