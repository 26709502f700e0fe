"""Every CUDA source of lowprec.gpu compiles for Hopper (sm_90), with nvcc and with NVRTC.

nvcc: one call per source (to PTX, with CuPy's -ftz=true), then ptxas to sm_90
machine code; skips when nvcc is not installed. NVRTC: the compiler CuPy's
RawModule uses, called through CuPy's binding; skips without it. No GPU needed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from lowprec.gpu import KERNEL_DIR, SOURCES, SOURCES_SM90A

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) is not installed")


def _ptxas() -> str:
    exe = Path(NVCC).resolve().parent / "ptxas"
    return str(exe) if exe.exists() else (shutil.which("ptxas") or "ptxas")


@pytest.fixture(scope="module")
def ptx(tmp_path_factory) -> dict[str, str]:
    """PTX of each source, compiled as CuPy compiles it (-ftz=true) for sm_90."""
    out = {}
    tmp = tmp_path_factory.mktemp("ptx")
    for src in SOURCES:
        path = tmp / (src + ".ptx")
        subprocess.run([NVCC, "-arch=sm_90", "-ftz=true", "--std=c++17", f"-I{KERNEL_DIR}",
                        "--ptx", str(KERNEL_DIR / src), "-o", str(path)],
                       check=True, capture_output=True, text=True)
        out[src] = path.read_text()
    return out


@needs_nvcc
@pytest.mark.parametrize("src", SOURCES)
def test_assembles_for_sm90(src, ptx, tmp_path):
    ptx_file = tmp_path / "k.ptx"
    ptx_file.write_text(ptx[src])
    res = subprocess.run([_ptxas(), "-arch=sm_90", str(ptx_file), "-o", str(tmp_path / "k.cubin")],
                         check=False, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "k.cubin").stat().st_size > 0


@needs_nvcc
def test_every_catalogued_kernel_exists(ptx):
    from lowprec.gpu import ARITH_FORMATS, ARITH_OPS, BACK_CONVERSIONS, CONVERSIONS

    entries = set(re.findall(r"\.entry\s+(\w+)", "".join(ptx.values())))
    want = {c.kernel for c in CONVERSIONS.values()} | {b.kernel for b in BACK_CONVERSIONS.values()}
    want |= {"sweep_" + c.name for c in CONVERSIONS.values() if c.source == "float32"}
    want |= {f"{f}_{op}" for f in ARITH_FORMATS for op in ARITH_OPS}
    want |= {"gemm_e4m3_f32", "gemm_e5m2_f32"}
    assert want <= entries, sorted(want - entries)


@needs_nvcc
def test_conversions_are_not_flushed_by_cupy_ftz(ptx):
    """CuPy adds -ftz=true; no conversion kernel may contain a flushing (.ftz) instruction."""
    flushing = [line.strip() for line in ptx["convert.cu"].splitlines() if ".ftz" in line]
    assert flushing == []


@needs_nvcc
def test_hardware_instructions_are_used(ptx):
    conv, gemm = ptx["convert.cu"], ptx["gemm_fp8.cu"]
    assert "cvt.rn.satfinite.e4m3x2.f32" in conv and "cvt.rn.satfinite.e5m2x2.f32" in conv
    for mode in ("rn", "rz", "rm", "rp"):
        assert f"cvt.{mode}.f16.f32" in conv and f"cvt.{mode}.bf16.f32" in conv
        assert f"cvt.{mode}.f16.f64" in conv and f"cvt.{mode}.bf16.f64" in conv
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" in gemm
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32" in gemm
    assert "add.rn.f16" in ptx["arith.cu"] and "fma.rn.bf16" in ptx["arith.cu"]


def _nvrtc_and_headers():
    """CuPy's NVRTC binding and the CUDA headers, or None (then the test skips)."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception:  # noqa: BLE001 -- CuPy or libnvrtc missing: nothing to test with
        return None
    roots = [Path(NVCC).resolve().parents[1]] if NVCC else []
    roots.append(Path("/usr/local/cuda"))
    for root in roots:
        for inc in (root / "include", root / "targets" / "x86_64-linux" / "include"):
            if (inc / "cuda_fp8.h").exists():
                return nvrtc, inc
    return None


@pytest.mark.parametrize("src", SOURCES)
def test_nvrtc_compiles_like_cupy(src):
    """NVRTC (what CuPy's RawModule uses; no GPU needed) with CuPy's -ftz=true, for sm_90."""
    found = _nvrtc_and_headers()
    if found is None:
        pytest.skip("CuPy's NVRTC binding (cupy + nvidia-cuda-nvrtc) or the CUDA headers missing")
    nvrtc, inc = found
    prog = nvrtc.createProgram((KERNEL_DIR / src).read_text(), src, [], [])
    try:
        nvrtc.compileProgram(prog, ["--std=c++17", f"-I{KERNEL_DIR}", f"-I{inc}", "-ftz=true",
                                    "-arch=sm_90"])
    except Exception as exc:  # noqa: BLE001 -- show NVRTC's log
        pytest.fail(f"{exc}\n{nvrtc.getProgramLog(prog)}")
    assert len(nvrtc.getCUBIN(prog)) > 0


_HOST_MAIN = r"""
#include "arith.cu"
#include <cstdio>
#include <cstring>
int main() {  // reads "op a b c" (double bits in hex), prints lp_exact_odd's bits
    unsigned op; unsigned long long a, b, c;
    while (scanf("%u %llx %llx %llx", &op, &a, &b, &c) == 4) {
        double x, y, z, r;
        memcpy(&x, &a, 8); memcpy(&y, &b, 8); memcpy(&z, &c, 8);
        r = lp_exact_odd((int)op, x, y, z);
        unsigned long long rb; memcpy(&rb, &r, 8);
        printf("%016llx\n", rb);
    }
    return 0;
}
"""


def _round_to_odd(exact: Fraction) -> float:
    """The double that truncates ``exact`` and has its last bit set if that lost anything."""
    import math

    f = float(exact)  # nearest
    if Fraction(f) == exact:
        return f
    if abs(Fraction(f)) > abs(exact):
        f = math.nextafter(f, 0.0)  # now the truncation
    bits = np.array([f]).view(np.uint64)[0]
    return f if bits & 1 else math.nextafter(f, math.copysign(math.inf, f))


@needs_nvcc
def test_sweep_reference_rounds_exact_results_to_odd(tmp_path):
    """The arithmetic sweeps' reference (lp_exact_odd in arith.cu, built for the host)
    gives the exact result rounded to odd, checked with Fractions on random fp16/bf16
    operands: add, sub, mul, fma, div."""
    from lowprec import decode

    src = tmp_path / "host.cu"
    src.write_text(_HOST_MAIN)
    exe = tmp_path / "host"
    subprocess.run([NVCC, "-arch=sm_90", f"-I{KERNEL_DIR}", str(src), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    rng = np.random.default_rng(11)
    cases, lines = [], []
    for fmt in ("fp16", "bf16"):
        for op in range(5):
            codes = rng.integers(0, 1 << 16, size=(3, 400), dtype=np.uint16)
            vals = [decode(c, fmt).astype(np.float64) for c in codes]
            for a, b, c in zip(*vals, strict=True):
                if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)) or (op == 4 and b == 0):
                    continue
                cases.append((op, a, b, c))
                h = [f"{int(np.array([v]).view(np.uint64)[0]):x}" for v in (a, b, c)]
                lines.append(f"{op} {h[0]} {h[1]} {h[2]}")
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", check=True,
                         capture_output=True, text=True).stdout.split()
    assert len(out) == len(cases)
    bad = []
    for (op, a, b, c), got in zip(cases, out, strict=True):
        A, B, C = Fraction(a), Fraction(b), Fraction(c)
        exact = [A + B, A - B, A * B, A * B + C, A / B if b else None][op]
        want = _round_to_odd(exact)
        g = np.array([int(got, 16)], dtype=np.uint64).view(np.float64)[0]
        if want == 0.0:
            ok = g == 0.0  # the sign of an exact zero follows IEEE rules, not checked here
        else:
            ok = np.array([want]).view(np.uint64)[0] == int(got, 16)
        if not ok:
            bad.append((op, a, b, c, g, want))
    assert bad == [], bad[:3]


_TABLE_MAIN = r"""
#include "lp_common.cuh"
#include <cstdio>
#include <vector>
int main(int argc, char** argv) {  // argv: ncodes lo.bin hi.bin; stdin: "sign mag code"
    const unsigned n = (unsigned)atoi(argv[1]);
    std::vector<unsigned> lo(2 * n), hi(2 * n);
    FILE* f = fopen(argv[2], "rb"); fread(lo.data(), 4, 2 * n, f); fclose(f);
    f = fopen(argv[3], "rb"); fread(hi.data(), 4, 2 * n, f); fclose(f);
    unsigned s, m, c;
    while (scanf("%u %u %u", &s, &m, &c) == 3) {
        bool big = false;
        const bool ok = lp_in_range<unsigned>(lo.data(), hi.data(), n, s, c, m, &big);
        printf("%d %d\n", (int)ok, (int)big);
    }
    return 0;
}
"""


@needs_nvcc
@pytest.mark.parametrize("name", ["f32_e4m3_nosat", "f32_fp16_rz", "f32_e2m1_rn"])
def test_device_table_check_agrees_with_python_tables(name, tmp_path):
    """lp_in_range (the sweeps' check, built for the host) reads the tables that
    lowprec.gpu._tables lays out: the emulator's code passes, its neighbours fail,
    and 'GPU larger' is flagged for the neighbour of larger magnitude."""
    from lowprec.gpu import CONVERSIONS
    from lowprec.gpu._tables import build_table

    conv = CONVERSIONS[name]
    ncodes = 1 << conv.format.width
    table = build_table(conv.emulate, 32, ncodes)
    lo, hi = table.lo_hi()
    lo.tofile(tmp_path / "lo.bin")
    hi.tofile(tmp_path / "hi.bin")
    (tmp_path / "t.cu").write_text(_TABLE_MAIN)
    subprocess.run([NVCC, f"-I{KERNEL_DIR}", str(tmp_path / "t.cu"), "-o", str(tmp_path / "t")],
                   check=True, capture_output=True, text=True)
    rng = np.random.default_rng(2)
    u = rng.integers(0, 1 << 32, size=3000, dtype=np.uint64).astype(np.uint32)
    u = u[(u & 0x7FFFFFFF) <= 0x7F800000]
    code = conv.emulate(u.view(np.float32)).astype(np.int64)
    sign, mag = u >> 31, u & 0x7FFFFFFF
    mask = conv.format.sign_mask - 1
    bigger = (code & ~mask) | np.minimum((code & mask) + 1, mask)
    lines = [f"{s} {m} {c}" for s, m, c in zip(sign, mag, code, strict=True)]
    lines += [f"{s} {m} {c}" for s, m, c in zip(sign, mag, bigger, strict=True)]
    res = subprocess.run([str(tmp_path / "t"), str(ncodes), str(tmp_path / "lo.bin"),
                          str(tmp_path / "hi.bin")], input="\n".join(lines) + "\n",
                         check=True, capture_output=True, text=True).stdout.split("\n")
    res = np.array([list(map(int, r.split())) for r in res if r])
    k = len(u)
    assert res[:k, 0].all()  # the emulator's own code is accepted
    differs = bigger != code
    assert not res[k:, 0][differs].any()  # a different code is rejected ...
    assert res[k:, 1][differs].all()  # ... and flagged as larger in magnitude


@needs_nvcc
@pytest.mark.parametrize("src", SOURCES_SM90A)
def test_wgmma_source_compiles_for_sm90a(src, tmp_path):
    """wgmma exists only for sm_90a: nvcc -gencode arch=compute_90a,code=sm_90a."""
    out = tmp_path / "w.cubin"
    res = subprocess.run([NVCC, "-gencode=arch=compute_90a,code=sm_90a", "--std=c++17",
                          f"-I{KERNEL_DIR}", "-cubin", str(KERNEL_DIR / src), "-o", str(out)],
                         check=False, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert out.stat().st_size > 0


@pytest.mark.parametrize("src", SOURCES_SM90A)
def test_wgmma_source_compiles_with_nvrtc_for_sm90a(src):
    """What lowprec.gpu._runtime.module_sm90a does at run time, minus loading."""
    found = _nvrtc_and_headers()
    if found is None:
        pytest.skip("CuPy's NVRTC binding (cupy + nvidia-cuda-nvrtc) or the CUDA headers missing")
    nvrtc, _ = found
    prog = nvrtc.createProgram((KERNEL_DIR / src).read_text(), src, [], [])
    try:
        nvrtc.compileProgram(prog, ["--std=c++17", f"-I{KERNEL_DIR}", "-arch=sm_90a"])
    except Exception as exc:  # noqa: BLE001 -- show NVRTC's log
        pytest.fail(f"{exc}\n{nvrtc.getProgramLog(prog)}")
    ptx = nvrtc.getPTX(prog).decode() if hasattr(nvrtc, "getPTX") else ""
    assert len(nvrtc.getCUBIN(prog)) > 0
    if ptx:
        assert "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3" in ptx
