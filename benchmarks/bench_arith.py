"""Benchmark lowprec.arith and lowprec.matmul; prints ratios against numpy in one run.

Targets (issue #3): elementwise ops on 10**6 fp16 pairs at most 10x the time of
the same numpy float16 op, in every mode; matmul 256x256x256 with a tensor-core
model under 2 s and sequential FP32 accumulation under 1 s.

    python benchmarks/bench_arith.py            # everything
    python benchmarks/bench_arith.py --quick    # fewer repetitions
    python benchmarks/bench_arith.py --formats  # only add/sub/mul in every format

First-call times include numba compilation (or loading it from the cache:
delete lowprec/__pycache__ to measure a cold compile).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best_of(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--formats", action="store_true",
                        help="only the add/sub/mul section over every format")
    args = parser.parse_args()
    reps = 3 if args.quick else 7

    t0 = time.perf_counter()
    import lowprec as lp
    print(f"import lowprec: {time.perf_counter() - t0:.2f} s")

    rng = np.random.default_rng(0)
    n = 10**6
    if args.formats:
        formats_section(lp, rng, n, reps)
        return
    a = rng.standard_normal(n).astype(np.float16)
    b = rng.standard_normal(n).astype(np.float16)
    c = rng.standard_normal(n).astype(np.float16)
    pos = np.abs(a)

    # First calls (compile or cache load), one per kernel signature used below.
    t = time.perf_counter()
    lp.add(a[:10], b[:10], "fp16")
    print(f"first call lp.add (compile/cache load): {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    lp.matmul(np.ones((2, 2)), np.ones((2, 2)), model="v100")
    lp.matmul(np.ones((2, 2)), np.ones((2, 2)), model="sequential")
    print(f"first call lp.matmul tensor_core + sequential: {time.perf_counter() - t:.2f} s")

    cases = [
        ("add", lambda m: lp.add(a, b, "fp16", m, rng=0 if m == "stochastic" else None),
         lambda: np.add(a, b)),
        ("sub", lambda m: lp.sub(a, b, "fp16", m, rng=0 if m == "stochastic" else None),
         lambda: np.subtract(a, b)),
        ("mul", lambda m: lp.mul(a, b, "fp16", m, rng=0 if m == "stochastic" else None),
         lambda: np.multiply(a, b)),
        ("div", lambda m: lp.div(a, b, "fp16", m, rng=0 if m == "stochastic" else None),
         lambda: np.divide(a, b)),
        ("sqrt", lambda m: lp.sqrt(pos, "fp16", m, rng=0 if m == "stochastic" else None),
         lambda: np.sqrt(pos)),
        # numpy has no fp16 fma: compare with a float32 multiply-add and cast.
        ("fma", lambda m: lp.fma(a, b, c, "fp16", m, rng=0 if m == "stochastic" else None),
         lambda: (a.astype(np.float32) * b + c).astype(np.float16)),
    ]
    print(f"\nelementwise, {n:,} fp16 operands (best of {reps}); ratio = lowprec / numpy")
    modes = list(lp.MODES)
    print(f"{'op':5s} {'numpy ms':>9s} " + " ".join(f"{m:>10s}" for m in modes))
    worst = 0.0
    with np.errstate(all="ignore"):
        for name, ours, ref in cases:
            t_ref = best_of(ref, reps)
            ratios = []
            for m in modes:
                ours(m)  # warm
                ratios.append(best_of(lambda ours=ours, m=m: ours(m), reps) / t_ref)
            worst = max(worst, max(ratios))
            print(f"{name:5s} {t_ref * 1e3:9.2f} " + " ".join(f"{r:9.1f}x" for r in ratios))
    print(f"worst ratio: {worst:.1f}x (target <= 10x)")
    formats_section(lp, rng, n, reps)

    print("\nmatmul 256 x 256 x 256, fp16 inputs, fp32 accumulation")
    A = rng.standard_normal((256, 256))
    B = rng.standard_normal((256, 256))
    t_np = best_of(lambda: A.astype(np.float32) @ B.astype(np.float32), reps)
    for model, target in [("sequential", 1.0), ("v100", 2.0), ("a100", 2.0), ("h100", 2.0),
                          ("pairwise", None), ("blocked", None), ("exact", None),
                          ("deepseek_v3", None)]:
        inputs = "fp8_e4m3" if model == "deepseek_v3" else "fp16"
        lp.matmul(A[:4, :4], B[:4, :4], inputs=inputs, model=model)
        t = best_of(lambda inputs=inputs, model=model: lp.matmul(A, B, inputs=inputs, model=model),
                    max(1, reps // 2))
        goal = f"(target < {target:.0f} s)" if target else ""
        print(f"  {model:12s} {t:6.3f} s  {t / t_np:8.0f}x numpy float32 {goal}")


def formats_section(lp, rng, n: int, reps: int) -> None:
    """add/sub/mul (rne) in every format of 16 bits or fewer and tf32, operands
    as float32 values and as the format's own ml_dtypes type, against numpy's
    float16 ops and (bf16) ml_dtypes' bfloat16 ops on the same values."""
    import ml_dtypes

    from lowprec.formats import reference_dtype

    a16 = rng.standard_normal(n).astype(np.float16)
    b16 = rng.standard_normal(n).astype(np.float16)
    ops = {"add": (lp.add, np.add), "sub": (lp.sub, np.subtract), "mul": (lp.mul, np.multiply)}
    t_np = {op: best_of(lambda f=f: f(a16, b16), reps) for op, (_, f) in ops.items()}
    names = [name for name, f in lp.FORMATS.items() if f.width <= 16 and f.signed] + ["tf32"]
    print(f"\nadd/sub/mul (rne), {n:,} operands: lowprec time / numpy float16's; "
          f"bf16 also against ml_dtypes bfloat16 (target: every format <= 2x numpy, bf16/tf32 "
          f"<= 1x ml_dtypes)")
    print(f"{'format':16s} {'operands':9s} " + " ".join(f"{op:>7s}" for op in ops))
    worst = 0.0
    with np.errstate(all="ignore"):
        for name in names:
            fmt = lp.get_format(name)
            x = lp.round_to(rng.standard_normal(n).astype(np.float32) * 2, fmt, saturate=True)
            y = lp.round_to(rng.standard_normal(n).astype(np.float32) * 2, fmt, saturate=True)
            own = reference_dtype(fmt)
            kinds = [("float32", x, y)] + ([("own", x.astype(own), y.astype(own))] if own else [])
            for kind, u, v in kinds:
                ratios = []
                for op, (ours, _) in ops.items():
                    ours(u[:10], v[:10], fmt)  # warm
                    t = best_of(lambda ours=ours, u=u, v=v, fmt=fmt: ours(u, v, fmt), reps)
                    ratios.append(t / t_np[op])
                worst = max(worst, max(ratios))
                print(f"{name:16s} {kind:9s} " + " ".join(f"{r:6.2f}x" for r in ratios))
    print(f"worst over formats: {worst:.2f}x numpy float16 (target <= 2x)")
    bx = lp.round_to(rng.standard_normal(n).astype(np.float32), "bf16").astype(ml_dtypes.bfloat16)
    by = lp.round_to(rng.standard_normal(n).astype(np.float32), "bf16").astype(ml_dtypes.bfloat16)
    tx = lp.round_to(rng.standard_normal(n).astype(np.float32), "tf32")
    ty = lp.round_to(rng.standard_normal(n).astype(np.float32), "tf32")
    slowest = float("inf")
    for op, (ours, ref) in ops.items():
        t_ml = best_of(lambda ref=ref: ref(bx, by), reps)
        t_lp = best_of(lambda ours=ours: ours(bx, by, "bf16"), reps)
        t_32 = best_of(lambda ours=ours: ours(bx.astype(np.float32), by.astype(np.float32),
                                               "bf16"), reps)
        t_tf = best_of(lambda ours=ours: ours(tx, ty, "tf32"), reps)
        slowest = min(slowest, t_ml / t_lp, t_ml / t_tf)
        print(f"bf16 {op}: lowprec {n / t_lp / 1e6:.0f} M/s (bfloat16 operands), "
              f"{n / t_32 / 1e6:.0f} M/s (float32 operands, conversion included); tf32 "
              f"{n / t_tf / 1e6:.0f} M/s (float32 operands); ml_dtypes bfloat16 "
              f"{n / t_ml / 1e6:.0f} M/s -> bf16 {t_ml / t_lp:.2f}x, tf32 {t_ml / t_tf:.2f}x "
              "ml_dtypes' speed")
    print(f"slowest of bf16 and tf32: {slowest:.2f}x ml_dtypes' speed (target >= 1x)")


if __name__ == "__main__":
    main()
