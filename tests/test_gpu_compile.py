"""Every CUDA source of lowprec.gpu compiles for Hopper (sm_90) with nvcc.

One nvcc call per source (to PTX, with CuPy's -ftz=true), then ptxas to sm_90
machine code. Skips when nvcc is not installed. No GPU needed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lowprec.gpu import KERNEL_DIR, SOURCES

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) is not installed")


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


@pytest.mark.parametrize("src", SOURCES)
def test_assembles_for_sm90(src, ptx, tmp_path):
    ptx_file = tmp_path / "k.ptx"
    ptx_file.write_text(ptx[src])
    res = subprocess.run([_ptxas(), "-arch=sm_90", str(ptx_file), "-o", str(tmp_path / "k.cubin")],
                         check=False, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "k.cubin").stat().st_size > 0


def test_every_catalogued_kernel_exists(ptx):
    from lowprec.gpu import ARITH_FORMATS, ARITH_OPS, BACK_CONVERSIONS, CONVERSIONS

    entries = set(re.findall(r"\.entry\s+(\w+)", "".join(ptx.values())))
    want = {c.kernel for c in CONVERSIONS.values()} | {b.kernel for b in BACK_CONVERSIONS.values()}
    want |= {"sweep_" + c.name for c in CONVERSIONS.values() if c.source == "float32"}
    want |= {f"{f}_{op}" for f in ARITH_FORMATS for op in ARITH_OPS}
    want |= {"gemm_e4m3_f32", "gemm_e5m2_f32"}
    assert want <= entries, sorted(want - entries)


def test_conversions_are_not_flushed_by_cupy_ftz(ptx):
    """CuPy adds -ftz=true; no conversion kernel may contain a flushing (.ftz) instruction."""
    flushing = [line.strip() for line in ptx["convert.cu"].splitlines() if ".ftz" in line]
    assert flushing == []


def test_hardware_instructions_are_used(ptx):
    conv, gemm = ptx["convert.cu"], ptx["gemm_fp8.cu"]
    assert "cvt.rn.satfinite.e4m3x2.f32" in conv and "cvt.rn.satfinite.e5m2x2.f32" in conv
    for mode in ("rn", "rz", "rm", "rp"):
        assert f"cvt.{mode}.f16.f32" in conv and f"cvt.{mode}.bf16.f32" in conv
        assert f"cvt.{mode}.f16.f64" in conv and f"cvt.{mode}.bf16.f64" in conv
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" in gemm
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32" in gemm
    assert "add.rn.f16" in ptx["arith.cu"] and "fma.rn.bf16" in ptx["arith.cu"]
