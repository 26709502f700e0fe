"""Compile time of lowprec's numba kernels: first calls, cold and from the cache.

Default: fresh Python processes with an empty NUMBA_CACHE_DIR (cold: numba
compiles) and then again with that directory filled (warm: numba loads the
machine code it cached), compiling in place (``LOWPREC_COLD=compile``: without
it the first calls are answered by numpy while a background process compiles,
which ``bench_coldstart.py`` measures), and prints the seconds each step took:

    import lowprec
    round_to(float32 array, "fp8_e4m3")           first call, rne
    the other 6 modes                             first calls
    encode to codes, rne                          first call
    round_to(float64 array, "bf16")               first call
    encode(..., flags=True)                       first call (the reference kernel)

``--kernels``: the compile of single conversion kernels, each the first call of
the routed kernel (``route.kernel_for``) in a fresh process with an empty cache,
``--runs`` times, then its speed on 10^5 float32 values (best of 50) and a
checksum of its output. ``--against DIR`` runs the same in another checkout's
lowprec, interleaved with this one, so that a change to the kernels is
compared on one machine in one run (the checksums must agree):

    python benchmarks/bench_compile.py
    python benchmarks/bench_compile.py --kernels --runs 3 --against ../old-checkout
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, time
t0 = time.perf_counter()
import numpy as np
import lowprec as lp
out = {"import lowprec": time.perf_counter() - t0}
x = np.linspace(-3, 3, 1000, dtype=np.float32)
def timed(name, fn):
    t = time.perf_counter(); fn(); out[name] = time.perf_counter() - t
timed("round_to float32 fp8_e4m3 rne", lambda: lp.round_to(x, "fp8_e4m3"))
timed("round_to float32 fp8_e4m3, 6 other modes", lambda: [
    lp.round_to(x, "fp8_e4m3", m, **({"rng": 0} if m == "stochastic" else {}))
    for m in lp.MODES if m != "rne"])
timed("encode float32 fp8_e4m3 rne (codes)", lambda: lp.encode(x, "fp8_e4m3"))
timed("round_to float64 bf16 rne", lambda: lp.round_to(x.astype(np.float64), "bf16"))
timed("encode flags=True (reference kernel)", lambda: lp.encode(x, "fp8_e4m3", flags=True))
print(json.dumps(out))
"""

# One routed kernel: python -c KERNEL <checkout> <format> <mode> <codes 0/1>
KERNEL = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from lowprec._kernels import route
from lowprec._kernels.params import MODE_INT
from lowprec._kernels.sr import SR_BLOCK
from lowprec.formats import get_format
fmt, mode, codes = get_format(sys.argv[2]), MODE_INT[sys.argv[3]], sys.argv[4] == "1"
kernel, q = route.kernel_for(fmt, mode, False, False, codes)
x = np.random.default_rng(0).standard_normal(10**5).astype(np.float32)
x = np.abs(x) if not fmt.signed else x
out = np.empty(x.shape, np.uint8 if codes else np.float32)
seeds = np.arange(-(-x.size // SR_BLOCK), dtype=np.uint64)
t = time.perf_counter(); kernel(q, x, seeds, out); first = time.perf_counter() - t
best = float("inf")
for _ in range(50):
    t = time.perf_counter(); kernel(q, x, seeds, out); best = min(best, time.perf_counter() - t)
print(json.dumps({"compile": first, "run": best, "sum": int(out.view(np.uint8).sum())}))
"""

#: (format, mode, codes): the kernel families of bits32_direct and pow2.
CASES = (("fp8_e4m3", "rne", 0), ("fp8_e4m3", "rne", 1), ("fp8_e4m3", "stochastic", 1),
         ("fp16", "rtz", 0), ("bf16", "rne", 0), ("bf16", "stochastic", 1),
         ("e8m0", "rtz", 1))


def run(cache: str) -> dict[str, float]:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, LOWPREC_COLD="compile")
    res = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def one_kernel(checkout: Path, case: tuple[str, str, int]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, LOWPREC_COLD="compile")
        res = subprocess.run([sys.executable, "-c", KERNEL, str(checkout),
                              *map(str, case)], env=env, capture_output=True, text=True,
                             check=True, cwd=cache)
    return json.loads(res.stdout.strip().splitlines()[-1])


def kernels(runs: int, against: Path | None) -> int:
    trees = {"this": ROOT} | ({"against": against} if against else {})
    print(f"{'kernel':32s} {'tree':8s} {'compile (s), each run':28s} {'run (us)':>9s}")
    differ = 0
    for case in CASES:
        got: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(runs):
            for name, tree in trees.items():  # interleaved, to share the machine's noise
                got[name].append(one_kernel(tree, case))
        sums = {r["sum"] for rs in got.values() for r in rs}
        differ += len(sums) > 1
        label = f"{case[0]} {case[1]} {'codes' if case[2] else 'values'}"
        for name, rs in got.items():
            each = " ".join(f"{r['compile']:.2f}" for r in rs)
            print(f"{label:32s} {name:8s} {each:28s} {min(r['run'] for r in rs) * 1e6:9.1f}"
                  + ("" if len(sums) == 1 else "  OUTPUTS DIFFER"))
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", action="store_true",
                    help="time single conversion kernels' compiles instead of first calls")
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per kernel")
    ap.add_argument("--against", type=Path, help="another checkout to compare, interleaved")
    args = ap.parse_args()
    if args.against and not (args.against / "lowprec" / "__init__.py").is_file():
        ap.error(f"--against {args.against}: no lowprec/__init__.py there (give a checkout)")
    if args.kernels:
        return kernels(args.runs, args.against.resolve() if args.against else None)
    with tempfile.TemporaryDirectory() as cache:
        cold = run(cache)
        warm = run(cache)
    print(f"{'step':44s} {'cold (s)':>9s} {'cached (s)':>10s}")
    for k in cold:
        print(f"{k:44s} {cold[k]:9.2f} {warm[k]:10.2f}")
    print(f"{'total':44s} {sum(cold.values()):9.2f} {sum(warm.values()):10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
