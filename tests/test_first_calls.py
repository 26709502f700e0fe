"""The first calls of a fresh process whose numba cache already holds the kernels.

numba's first load in a process costs about 0.6 s of CPU (its typing and target
contexts); until a kernel is loaded, a call is served by the numpy reference
(``_kernels.vec``), about 0.15 s per million values. So a large call (at least
``route.LOAD_IN_PLACE`` values) loads its kernel in the calling thread where the
cache holds it, and a small one is served by numpy while a background thread loads
it (docs/kernels.md, "First calls in a warm process"). These tests run fresh
processes on a cache folder of their own, count the calls numpy served, and check
the bits against ml_dtypes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

from lowprec._kernels import route

ROOT = Path(__file__).resolve().parent.parent

_SCRIPT = """
import sys, numpy as np
import lowprec as lp
from lowprec import rounding
served = []
real = rounding._by_numpy
def counted(*args, **kwargs):
    served.append(1)
    return real(*args, **kwargs)
rounding._by_numpy = counted
x = np.load(sys.argv[1])
out = []
for n in map(int, sys.argv[3:]):
    before = len(served)
    out.append(lp.round_to(x[:n], "fp8_e4m3", "rne"))
    print(len(served) - before)
np.save(sys.argv[2], np.concatenate(out))
"""


def _process(tmp_path: Path, sizes: list[int], policy: str | None = None) -> list[int]:
    """Run _SCRIPT on the first ``sizes`` values of x in turn in a fresh process on
    tmp_path's cache; whether numpy served each call (1) or a kernel (0)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    env.pop("LOWPREC_COLD", None)
    if policy:
        env["LOWPREC_COLD"] = policy
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "x.npy"),
                           str(tmp_path / "out.npy"), *map(str, sizes)], env=env,
                          capture_output=True, text=True, timeout=600, check=True)
    return [int(line) for line in done.stdout.split()]


def test_a_large_first_call_loads_the_cached_kernel_in_place(tmp_path: Path) -> None:
    n = route.LOAD_IN_PLACE
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-12, 6, n)).astype(np.float32)  # |x| < 448
    np.save(tmp_path / "x.npy", x)
    want = x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)

    assert _process(tmp_path, [1000], policy="compile") == [0]  # fills the cache
    # a fresh process: the large call runs the kernel, loaded here (no numpy piece)
    assert _process(tmp_path, [n]) == [0]
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy").view(np.uint32),
                                  want.view(np.uint32))
    # a small first call is served by numpy while the kernel loads in the background;
    # a large call right after loads it here instead of waiting for that thread
    small, big = _process(tmp_path, [1000, n])
    assert (small, big) == (1, 0)
    got = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(got[1000:].view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(got[:1000].view(np.uint32), want[:1000].view(np.uint32))


def test_a_large_call_on_an_empty_cache_is_served_by_numpy(tmp_path: Path) -> None:
    # nothing to load: the call does not wait for a compile (LOWPREC_COLD=numpy
    # compiles nothing, so no process outlives the test's folder)
    n = route.LOAD_IN_PLACE
    x = np.linspace(-440, 440, n, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    assert _process(tmp_path, [n], policy="numpy") == [1]
    np.testing.assert_array_equal(
        np.load(tmp_path / "out.npy").view(np.uint32),
        x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32).view(np.uint32))
