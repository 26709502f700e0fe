"""GPU speed: conversion kernels against memory bandwidth, and exhaustive sweeps.

    python benchmarks/bench_gpu.py [--quick] [--json OUT.json]

1. Each float32 -> format conversion kernel on 2**28 inputs (1 GiB in), timed
   with cupyx.profiler.benchmark; bandwidth = (bytes read + written) / time,
   printed as a ratio to a device-to-device copy measured in the same run and to
   the datasheet figure (4.8 TB/s for an H200). Target: >= 0.90 of the copy for
   every conversion (FP8 __NV_NOSAT, fp6 and fp4 run lp_fast_convert.cuh: the
   satfinite instruction plus a fix-up, integer rounding; 2026-12-04, before it:
   0.60-0.84x). The summary line gives the lowest ratio.
2. The exhaustive sweep of every float32 conversion (all 2**32 inputs, checked
   on the device against the emulator's step table, NaN inputs against the
   conversion's hardware NaN rule). Target: < 10 s each; mismatches must be 0,
   NaN-encoding differences from lowprec's default NaN are counted apart.

Needs CuPy and an NVIDIA GPU; exits with status 3 and the reason otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

DATASHEET_BW = {"H200": 4.8e12, "H100": 3.35e12}
TARGET_RATIO = 0.90
TARGET_SWEEP_S = 10.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer conversions")
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args(argv)

    import lowprec.gpu as lg
    reason = lg.unavailable_reason()
    if reason is not None:
        print(f"bench_gpu: no GPU: {reason}", file=sys.stderr)
        return 3
    import cupy
    from cupyx.profiler import benchmark

    from lowprec import validate as V
    from lowprec.gpu import _runtime as rt
    from lowprec.gpu._tables import build_table

    info = lg.device_info()
    print(f"GPU: {info['name']}, CuPy {info['cupy_version']}, driver CUDA "
          f"{info['driver_cuda_version']}")
    datasheet = next((v for k, v in DATASHEET_BW.items() if k in info["name"]), None)
    n = 1 << 28
    # Bit patterns spread over all of float32 (a multiplicative hash of the index).
    src = cupy.arange(n, dtype=cupy.uint32) * cupy.uint32(2654435761)
    dst = cupy.empty_like(src)

    def gpu_mean(fn) -> float:
        return float(np.mean(benchmark(fn, n_repeat=20, n_warmup=3).gpu_times))

    t_copy = gpu_mean(lambda: cupy.copyto(dst, src))
    copy_bw = 2 * src.nbytes / t_copy
    print(f"device-to-device copy: {copy_bw / 1e12:.2f} TB/s (read + write)")
    names = [c.name for c in lg.CONVERSIONS.values() if c.source == "float32"]
    if args.quick:
        names = ["f32_fp16_rn", "f32_bf16_rn", "f32_e4m3_sat", "f32_e4m3_nosat", "f32_e2m1_rn",
                 "f32_e8m0_rz_sat"]
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    results = {"device": info, "copy_bandwidth_bytes_per_s": copy_bw,
               "datasheet_bandwidth_bytes_per_s": datasheet, "conversions": [], "sweeps": []}
    print(f"\n{'conversion':22s} {'TB/s':>6s} {'vs copy':>8s} {'vs datasheet':>12s}")
    for name in names:
        conv = lg.CONVERSIONS[name]
        out = cupy.empty(n, dtype=conv.format.code_dtype)
        kern = rt.module("convert.cu").get_function(conv.kernel)
        blocks = min(-(-n // (256 * 4)), sms * 32)
        t = gpu_mean(lambda k=kern, b=blocks, o=out: k((b,), (256,), (src, o, np.uint64(n))))
        bw = (src.nbytes + out.nbytes) / t
        row = {"name": name, "seconds": t, "bandwidth": bw, "ratio_to_copy": bw / copy_bw,
               "ratio_to_datasheet": bw / datasheet if datasheet else None}
        results["conversions"].append(row)
        ds = f"{row['ratio_to_datasheet']:.2f}" if datasheet else "-"
        flag = "" if row["ratio_to_copy"] >= TARGET_RATIO else "  (below target)"
        print(f"{name:22s} {bw / 1e12:6.2f} {row['ratio_to_copy']:8.2f} {ds:>12s}{flag}")

    low = min(results["conversions"], key=lambda r: r["ratio_to_copy"])
    results["lowest_ratio_to_copy"] = {"name": low["name"], "ratio": low["ratio_to_copy"]}
    print(f"lowest ratio to copy: {low['ratio_to_copy']:.2f} ({low['name']}; target "
          f">= {TARGET_RATIO:.2f})")

    print(f"\n{'exhaustive sweep (2**32 inputs)':34s} {'seconds':>8s} {'mismatches':>11s} "
          f"{'NaN-encoding differences':>25s}")
    for name in names:
        conv = lg.CONVERSIONS[name]
        table = build_table(conv.emulate, 32, 1 << conv.format.width)
        lo, hi = (cupy.asarray(t) for t in table.lo_hi())
        nan_hw, nan_default = V.nan_expectations(conv)
        is_nan = cupy.asarray(V._is_nan_codes(conv.format))
        rt.sweep_conversion(conv, lo, hi, nan_hw, is_nan, 0, 1 << 20,
                            nan_default=nan_default)  # warm up
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        bad = nan_diff = 0
        for start in range(0, 1 << 32, 1 << 30):
            c, _ = rt.sweep_conversion(conv, lo, hi, nan_hw, is_nan, start, 1 << 30,
                                       nan_default=nan_default)
            bad += int(c[1])
            nan_diff += int(c[5])
        secs = time.perf_counter() - t0
        results["sweeps"].append({"name": name, "seconds": secs, "mismatches": bad,
                                  "nan_rule": conv.nan_rule,
                                  "nan_encoding_differences": nan_diff})
        flag = "" if secs < TARGET_SWEEP_S else "  (over target)"
        print(f"{name:34s} {secs:8.2f} {bad:11d} {nan_diff:25d}{flag}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
