"""convert.cu's fast float32 -> FP8 __NV_NOSAT / fp6 / fp4 conversions
(lp_fast_convert.cuh), built for the host with nvcc, against CUDA's own software
conversions from the same headers (what ran before, 0 mismatches on the H200).

On the host CUDA's __NV_SATFINITE conversion is its software path; on sm_89+ it is the
cvt.rn.satfinite instruction, which the H200 sweeps found equal to lowprec's saturating
rounding on every non-NaN float32 (docs/hardware/h200-2026-12-04.md). Inputs: every sign
and exponent with every top-5-bit mantissa and each rounding case of the low bits (zero,
one ulp, just below/at/above half of each target quantum, all ones), NaNs and infinities,
and 4 million pseudo-random bit patterns; the slow test runs all 2**32.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lowprec.gpu import KERNEL_DIR

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) is not installed")

_MAIN = r"""
#include "lp_fast_convert.cuh"
#include <cuda_fp6.h>
#include <cuda_fp4.h>
#include <cstdio>
#include <cstdlib>
static unsigned long long bad[8], checked = 0;
static void check(unsigned u) {
    float f; memcpy(&f, &u, 4);
    const double d = (double)f;  // exact; NaN payload kept, quiet bit set (as cvt.f64.f32)
    const unsigned got[8] = {
        lp_fast_fp8_nosat(u, false), lp_fast_fp8_nosat(u, true),
        lp_fast_small(u, 2, 1, true), lp_fast_small(u, 2, 1, false),
        lp_fast_small(u, 2, 3, true), lp_fast_small(u, 2, 3, false),
        lp_fast_small(u, 3, 2, true), lp_fast_small(u, 3, 2, false)};
    const unsigned want[8] = {
        __nv_cvt_double_to_fp8(d, __NV_NOSAT, __NV_E4M3),
        __nv_cvt_double_to_fp8(d, __NV_NOSAT, __NV_E5M2),
        __nv_cvt_double_to_fp4(d, __NV_E2M1, cudaRoundNearest),
        __nv_cvt_double_to_fp4(d, __NV_E2M1, cudaRoundZero),
        __nv_cvt_double_to_fp6(d, __NV_E2M3, cudaRoundNearest),
        __nv_cvt_double_to_fp6(d, __NV_E2M3, cudaRoundZero),
        __nv_cvt_double_to_fp6(d, __NV_E3M2, cudaRoundNearest),
        __nv_cvt_double_to_fp6(d, __NV_E3M2, cudaRoundZero)};
    for (int i = 0; i < 8; i++) {
        if (got[i] != want[i]) {
            if (bad[i] < 3) fprintf(stderr, "conv %d x=0x%08x fast 0x%x cuda 0x%x\n", i, u,
                                    got[i], want[i]);
            bad[i]++;
        }
    }
    checked++;
}
int main(int argc, char** argv) {
    if (argc > 1) {  // every input
        for (unsigned long long u = 0; u < (1ULL << 32); u++) check((unsigned)u);
    } else {
        for (unsigned s = 0; s < 2; s++)
            for (unsigned e = 0; e < 256; e++)
                for (unsigned top = 0; top < 32; top++)
                    for (int b = 0; b < 19; b++) {  // tails around each bit position
                        const unsigned base = (s << 31) | (e << 23) | (top << 18);
                        const unsigned h = 1u << b;
                        const unsigned tails[6] = {0u, 1u, h - 1u, h, h + 1u, (1u << 18) - 1u};
                        for (int t = 0; t < 6; t++) check(base | (tails[t] & 0x3FFFFu));
                    }
        unsigned long long x = 88172645463325252ULL;
        for (int i = 0; i < (1 << 22); i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            check((unsigned)x);
        }
    }
    printf("%llu", checked);
    for (int i = 0; i < 8; i++) printf(" %llu", bad[i]);
    printf("\n");
    return 0;
}
"""


def _run(tmp_path, *args: str) -> list[int]:
    src = tmp_path / "fast.cu"
    src.write_text(_MAIN)
    exe = tmp_path / "fast"
    subprocess.run([NVCC, "-O2", f"-I{KERNEL_DIR}", str(src), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    res = subprocess.run([str(exe), *args], check=True, capture_output=True, text=True)
    counts = [int(v) for v in res.stdout.split()]
    assert counts[1:] == [0] * 8, res.stderr
    return counts


def test_fast_conversions_equal_cudas_software_conversions(tmp_path):
    counts = _run(tmp_path)
    assert counts[0] > 5_000_000


@pytest.mark.slow
def test_fast_conversions_on_every_float32(tmp_path):
    assert _run(tmp_path, "all")[0] == 1 << 32


def test_kernels_use_the_fast_paths():
    src = (KERNEL_DIR / "convert.cu").read_text()
    assert "lp_fast_fp8_nosat(u, KIND == __NV_E5M2)" in src
    assert "LP_CVT_SHORT(e2m3_rn, 2, 3, true)" in src and "return FN(" not in src
