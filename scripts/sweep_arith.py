"""Long arithmetic sweeps kept out of CI (minutes on 2 cores).

1. The slow-marked tests: 10**5 random bf16 and tf32 operand tuples per
   operation, every deterministic mode, against the Fraction reference.
2. fp16 add/sub/mul/div/sqrt on --pairs random operand pairs against numpy's
   float16 arithmetic (which rounds a float32 result once; exact for these ops).

    python scripts/sweep_arith.py [--pairs 10000000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np


def numpy_sweep(pairs: int) -> int:
    import lowprec as lp

    rng = np.random.default_rng(2024)
    bad = 0
    chunk = 1 << 22
    for start in range(0, pairs, chunk):
        n = min(chunk, pairs - start)
        a = rng.integers(0, 1 << 16, n, dtype=np.uint64).astype(np.uint16).view(np.float16)
        b = rng.integers(0, 1 << 16, n, dtype=np.uint64).astype(np.uint16).view(np.float16)
        with np.errstate(all="ignore"):
            for fn, ref in [(lp.add, np.add(a, b)), (lp.sub, np.subtract(a, b)),
                            (lp.mul, np.multiply(a, b)), (lp.div, np.divide(a, b))]:
                got = fn(a, b, "fp16")
                ok = (got.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(got) & np.isnan(ref))
                bad += int((~ok).sum())
            got, ref = lp.sqrt(a, "fp16"), np.sqrt(a)
            ok = (got.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(got) & np.isnan(ref))
            bad += int((~ok).sum())
    print(f"fp16 vs numpy float16: {pairs:,} pairs x 5 ops, {bad} mismatches")
    return bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000_000)
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "slow",
                          str(root / "tests" / "test_arith_more.py")], cwd=root)
    bad = numpy_sweep(args.pairs)
    sys.exit(1 if rc or bad else 0)


if __name__ == "__main__":
    main()
