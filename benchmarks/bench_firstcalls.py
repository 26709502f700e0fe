"""First calls in a fresh process whose numba cache is warm (issue #39).

Each run is a fresh Python process on the same numba cache (filled first by one
process that compiles every kernel the sequence needs). It rounds 10^7 float32
values to several formats in several modes in turn, each case ``--calls`` times, and
times every call beside numpy's own ``x.astype(np.float16)`` on the same array (taken
just before, in the same process: what a user compares against). ``--runs`` fresh
processes; the table reports per case the first call, the median of the others, and
the worst call of any run (the issue asks for the worst, not only the median), each
as seconds and as a ratio to numpy's median, plus how many calls of all runs numpy's
reference served (``rounding._by_numpy``: a kernel not loaded yet).

    python benchmarks/bench_firstcalls.py [--runs 5] [--calls 4] [--n 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FORMATS = ("fp8_e4m3", "fp8_e5m2", "fp16", "bf16")
MODES = ("rne", "rtz", "stochastic")

CHILD = r"""
import json, sys, time
import numpy as np
import lowprec as lp
from lowprec import rounding
served = [0]
real = rounding._by_numpy
def counted(*a, **k):
    served[0] += 1
    return real(*a, **k)
rounding._by_numpy = counted
n, calls = int(sys.argv[1]), int(sys.argv[2])
x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
rows = []
for fmt in sys.argv[3].split(","):
    for mode in sys.argv[4].split(","):
        t = time.perf_counter(); x.astype(np.float16); ref = time.perf_counter() - t
        times, numpy_served = [], 0
        for i in range(calls):
            before = served[0]
            t = time.perf_counter()
            lp.round_to(x, fmt, mode, rng=1 if mode == "stochastic" else None)
            times.append(time.perf_counter() - t)
            numpy_served += served[0] > before
        rows.append([fmt, mode, ref, times, numpy_served])
print(json.dumps(rows))
"""


def _child(env: dict, n: int, calls: int) -> list:
    done = subprocess.run([sys.executable, "-c", CHILD, str(n), str(calls), ",".join(FORMATS),
                           ",".join(MODES)], env=env, capture_output=True, text=True,
                          check=True, timeout=1800)
    return json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--n", type=int, default=10_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
        _child(dict(env, LOWPREC_COLD="compile"), 1000, 1)  # fill the cache
        runs = [_child(dict(env, LOWPREC_COLD=""), args.n, args.calls) for _ in range(args.runs)]
    print(f"{args.runs} fresh processes, warm cache, {args.n:,} float32 values, "
          f"{args.calls} calls per case; seconds (ratio to numpy's astype(float16) median)")
    print(f"{'case':<24}{'numpy':>8}{'first call':>18}{'later (median)':>18}"
          f"{'worst call':>18}{'numpy-served':>14}")
    served_all = 0
    for i, (fmt, mode, *_rest) in enumerate(runs[0]):
        ref = float(np.median([r[i][2] for r in runs]))
        first = max(r[i][3][0] for r in runs)
        later = float(np.median([t for r in runs for t in r[i][3][1:]]))
        worst = max(t for r in runs for t in r[i][3])
        served = sum(r[i][4] for r in runs)
        served_all += served
        print(f"{fmt + ' ' + mode:<24}{ref:8.3f}{first:9.3f} ({first / ref:5.1f}x)"
              f"{later:9.3f} ({later / ref:5.1f}x){worst:9.3f} ({worst / ref:5.1f}x){served:14d}")
    print(f"calls served by numpy in all runs: {served_all} of "
          f"{args.runs * len(runs[0]) * args.calls}")


if __name__ == "__main__":
    main()
