"""Real low-precision formats on NVIDIA GPUs, through CuPy (the ``gpu`` extra).

Importing this module never needs CuPy; :func:`available` says whether a GPU
can be used and :func:`require` raises with the reason when not.

>>> import lowprec.gpu as lg
>>> isinstance(lg.available(), bool)
True

With a GPU (CuPy arrays of raw codes in and out; CuPy has no fp8 dtype)::

    codes = lg.convert(cupy.asarray(x, cupy.float32), "fp8_e4m3", saturate=True)
    bits, wide = lg.widen(codes, "fp8_e4m3")        # back to fp16 bits
    s = lg.arith("add", "bf16", a_codes, b_codes)   # __hadd_rn
    c = lg.matmul(a_codes, b_codes, "fp8_e4m3")     # mma.sync m16n8k32 (HMMA on sm_90)
    c = lg.matmul(a_codes, b_codes, "fp8_e4m3", engine="wgmma")  # sm_90a FP8 tensor cores

The kernels are CUDA sources in this directory (``convert.cu``, ``arith.cu``,
``gemm_fp8.cu``), compiled by CuPy's NVRTC for the device at first use;
``gemm_fp8_wgmma.cu`` (Hopper's FP8 tensor cores, sm_90a; on an H200 it reproduced
the ``h100`` model on every output, docs/hardware/h200-2026-12-04.md) is compiled by
lowprec with NVRTC, since CuPy cannot target sm_90a.
``lowprec validate --gpu`` checks them bit for bit against the emulator.
"""

from ._catalog import (
    ARITH_FORMATS,
    ARITH_OPS,
    BACK_CONVERSIONS,
    CONVERSIONS,
    KERNEL_DIR,
    SOURCES,
    SOURCES_SM90A,
    BackConversion,
    Conversion,
)
from ._runtime import (
    GPUUnavailableError,
    arith,
    available,
    convert,
    device_info,
    matmul,
    require,
    unavailable_reason,
    widen,
)

__all__ = [
    "ARITH_FORMATS", "ARITH_OPS", "BACK_CONVERSIONS", "CONVERSIONS", "KERNEL_DIR", "SOURCES",
    "SOURCES_SM90A",
    "BackConversion", "Conversion", "GPUUnavailableError", "arith", "available", "convert",
    "device_info", "matmul", "require", "unavailable_reason", "widen",
]
