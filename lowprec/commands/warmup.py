"""``lowprec warmup``: compile every numba kernel ahead of time (once per machine)."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from ._common import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "warmup", help="compile all of lowprec's kernels now (once per machine)",
        description="numba compiles lowprec's kernels on first use and caches them on disk. "
        "warmup runs every kernel once on a tiny input so that later commands and scripts "
        "start at full speed. A second warmup only loads the cache (about a second).",
        examples=["lowprec warmup", "lowprec warmup --skip-training"])
    p.add_argument("--skip-training", action="store_true",
                   help="leave out the training kernels (one step of every preset)")
    p.set_defaults(func=run)


def steps(training: bool = True) -> list[tuple[str, Callable[[], object]]]:
    """The warm-up steps: a label and a call that runs one family of kernels."""
    import lowprec as lp

    from .._kernels.gemm import matmul_in_order

    x32 = np.array([0.1, -3.0, 1e-9, 7e4, np.inf, np.nan, 0.0, 2.0**-20], dtype=np.float32)
    x64 = x32.astype(np.float64)
    a = np.linspace(-2, 2, 16).reshape(4, 4)

    def rounding() -> None:
        for mode in lp.MODES:
            rng = 0 if mode == "stochastic" else None
            for x in (x32, x64, x32[:4], x64[:4]):  # with and without inf/NaN
                lp.round_to(x, "fp8_e4m3", mode, rng=rng)
                lp.encode(x, "bf16", mode, flags=True, rng=rng)
                lp.encode(x, "e8m0", mode, rng=rng)
        lp.decode(np.arange(256, dtype=np.uint8), "fp8_e4m3")

    def arithmetic() -> None:
        for mode, rng in (("rne", None), ("rtz", None), ("stochastic", 0)):
            h = lp.round_to(x64, "fp16")
            lp.add(h, h, "fp16", mode, rng=rng)
            lp.sub(h, h, "fp16", mode, rng=rng)
            lp.mul(h, h, "fp16", mode, rng=rng)
            lp.div(h, h, "fp16", mode, rng=rng)
            lp.sqrt(np.abs(h), "fp16", mode, rng=rng)
            lp.fma(h, h, h, "fp16", mode, rng=rng)

    def matmul() -> None:
        for model in lp.list_models():
            lp.matmul(a, a, model=model)
        for dtype in (np.float32, np.float64):  # the trainer's (lowprec._kernels.gemm)
            matmul_in_order(a.astype(dtype), a.astype(dtype))

    def scaled() -> None:
        lp.mx.quantize(np.tile(x64[:4], 8), "mxfp8_e4m3")
        lp.nvfp4.quantize(np.tile(x64[:4], 4))
        lp.scaling.quantize_per_tensor(x64[:4], "fp8_e4m3")
        for mode in ("rne", "rup"):  # float32: the block kernels (float32 and float64 scaling)
            lp.mx.quantize(np.tile(x32[:4], 8), "mxint8", mode=mode).dequantize(np.float32)
            lp.nvfp4.quantize(np.tile(x32[:4], 4), mode=mode).dequantize()

    def training_() -> None:
        from ..train import train
        from ..train.policy import POLICIES

        for name in POLICIES:
            train(name, "underflow", steps=1, eval_every=1)

    out: list[tuple[str, Callable[[], object]]] = [("rounding, every mode", rounding), ("arithmetic", arithmetic),
           ("matmul, every accumulation model", matmul), ("MX, NVFP4, per-tensor", scaled)]
    if training:
        out.append(("training, one step of every preset", training_))
    return out


def run(args: argparse.Namespace) -> int:
    """Run every warm-up step, printing what each one cost. The kernels compile
    here, in place (not served by the numpy engine while a background process
    compiles them, as first calls elsewhere are: docs/kernels.md)."""
    before = os.environ.get("LOWPREC_COLD")
    os.environ["LOWPREC_COLD"] = "compile"
    try:
        t_all = time.perf_counter()
        for label, call in steps(training=not args.skip_training):
            t0 = time.perf_counter()
            call()
            print(f"  {label:<36} {time.perf_counter() - t0:6.1f} s", flush=True)
    finally:
        if before is None:
            del os.environ["LOWPREC_COLD"]
        else:
            os.environ["LOWPREC_COLD"] = before
    print(f"lowprec warmup: done in {time.perf_counter() - t_all:.1f} s; the kernels are "
          "cached for every later run", flush=True)
    return 0
