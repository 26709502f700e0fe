"""Store MMA-Sim's AMD CDNA3 mfma outputs as test vectors (tests/data/mmasim_amd/).

Runs MMA-Sim's own simulator (microsoft/MMA-Sim, ``mmasim/simulator/amd.py``) from a
local git mirror, exported to a temporary directory (nothing of it is committed), on
random and adversarial dot products: values of every magnitude, cancellation, carries,
tiny addends, subnormals, signed zeros, Inf/NaN. Each instruction's vectors go to one
``.npz`` with ``a`` (n, k), ``b`` (n, k), ``c`` (n,), ``d`` (n,) as float32/float64 and
the MMA-Sim commit. CDNA1/2 are not run: MMA-Sim c785138's pairwise path asserts FP32
operands and fails on its own FP16/BF16 instructions (docs/instructions.md).

Usage: python scripts/mmasim_amd_vectors.py [MIRROR_GIT_DIR] [--n N]
(needs torch and ml_dtypes; MIRROR_GIT_DIR defaults to /work/.mirror/microsoft+MMA-Sim/repo).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "mmasim_amd"
# lowprec input name -> (MMA-Sim CDNA3 qualifier, numpy dtype of the operands)
CASES = {
    "fp16": ("f32_16x16x16_f16", np.float16),
    "bf16": ("f32_16x16x16_bf16", ml_dtypes.bfloat16),
    "xf32": ("f32_16x16x8_xf32", np.float32),
    "fp8_e4m3fnuz": ("f32_16x16x32_fp8_fp8", ml_dtypes.float8_e4m3fnuz),
    "fp8_e5m2fnuz": ("f32_16x16x32_bf8_bf8", ml_dtypes.float8_e5m2fnuz),
}


def _values(rng: np.random.Generator, dtype, shape, spread: int) -> np.ndarray:
    """Random values of ``dtype``: signed significands, exponents within +-spread."""
    mant = rng.uniform(1.0, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return (mant * np.exp2(rng.integers(-spread, spread + 1, shape))).astype(dtype)


def make_cases(rng: np.random.Generator, dtype, k: int, n: int) -> tuple[np.ndarray, ...]:
    info = ml_dtypes.finfo(dtype)
    a = np.empty((n, k), dtype)
    b = np.empty((n, k), dtype)
    c = np.empty(n, np.float32)
    wide = min(12, int(info.maxexp) - 2)  # no overflow of the fnuz formats to NaN
    for i in range(n):
        kind = i % 8
        a[i] = _values(rng, dtype, k, 4 if kind < 4 else wide)
        b[i] = _values(rng, dtype, k, 4 if kind < 4 else wide)
        c[i] = np.float32(_values(rng, np.float64, 1, 6)[0])
        if kind == 1:    # cancellation: second half repeats the first with b negated
            h = k // 2
            a[i, h:2 * h] = a[i, :h]
            b[i, h:2 * h] = -b[i, :h].astype(np.float64)
            c[i] = np.float32(c[i] * 2.0 ** -20)
        elif kind == 2:  # tiny addends beside a big C of either sign
            c[i] = np.float32(rng.choice([-1.0, 1.0]) * 2.0 ** int(rng.integers(8, 20)))
        elif kind == 3:  # carries: equal magnitudes near 2
            a[i] = np.asarray(info.max if k < 0 else 1.9375, dtype)
            b[i] = np.asarray(1.9375, dtype)
        elif kind == 4:  # subnormals and smallest normals
            sub = float(info.smallest_subnormal)
            a[i, ::2] = (rng.integers(-7, 8, (k + 1) // 2) * sub).astype(dtype)
            c[i] = np.float32(float(a[i, 0]) * float(b[i, 0]))
        elif kind == 5:  # zeros with signs (fnuz formats have one zero)
            a[i, rng.integers(0, k, k // 2)] = np.asarray(-0.0, dtype)
            c[i] = np.float32(rng.choice([-0.0, 0.0]))
            b[i, : k // 2] = np.asarray(0.0, dtype)
        elif kind == 6 and i % 16 == 6:  # Inf/NaN where the format has them
            specials = [np.nan] + ([np.inf, -np.inf] if info.bits >= 16 else [])
            a[i, int(rng.integers(0, k))] = np.asarray(rng.choice(specials), dtype)
    return a, b, c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mirror", nargs="?", default="/work/.mirror/microsoft+MMA-Sim/repo")
    ap.add_argument("--n", type=int, default=400)
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "--git-dir", args.mirror, "rev-parse", "HEAD"],
                            check=True, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        tar = subprocess.run(["git", "--git-dir", args.mirror, "archive", "HEAD", "mmasim"],
                             check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        sys.path.insert(0, tmp)
        import torch
        from mmasim.simulator.amd import mfma  # type: ignore[import-not-found]

        OUT.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(37)
        for name, (qual, dtype) in CASES.items():
            sim = mfma("CDNA3", qual)
            sim.m = sim.n = 1  # one dot product per call; the rule is per element
            a, b, c = make_cases(rng, dtype, sim.k, args.n)
            tdt = sim.a_type
            d = np.empty(args.n, np.float32)
            for i in range(args.n):
                A = torch.from_numpy(a[i].astype(np.float32)).to(tdt).reshape(1, -1)
                B = torch.from_numpy(b[i].astype(np.float32)).to(tdt).reshape(-1, 1)
                C = torch.tensor([[float(c[i])]], dtype=torch.float32)
                d[i] = sim(A, B, C)[0, 0].item()
            np.savez_compressed(OUT / f"cdna3_{name}.npz", a=a.astype(np.float32),
                                b=b.astype(np.float32), c=c, d=d, commit=commit,
                                qualifier=qual)
            print(f"{name}: {args.n} vectors ({qual}, MMA-Sim {commit[:7]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
