"""Compile time of lowprec's numba kernels: first calls, cold and from the cache.

Runs fresh Python processes with an empty NUMBA_CACHE_DIR (cold: numba
compiles) and then again with that directory filled (warm: numba loads the
machine code it cached), and prints the seconds each step took:

    import lowprec
    round_to(float32 array, "fp8_e4m3")           first call, rne
    the other 6 modes                             first calls
    encode to codes, rne                          first call
    round_to(float64 array, "bf16")               first call
    encode(..., flags=True)                       first call (the reference kernel)

    python benchmarks/bench_compile.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

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


def run(cache: str) -> dict[str, float]:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    res = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        cold = run(cache)
        warm = run(cache)
    print(f"{'step':44s} {'cold (s)':>9s} {'cached (s)':>10s}")
    for k in cold:
        print(f"{k:44s} {cold[k]:9.2f} {warm[k]:10.2f}")
    print(f"{'total':44s} {sum(cold.values()):9.2f} {sum(warm.values()):10.2f}")


if __name__ == "__main__":
    main()
