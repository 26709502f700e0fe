"""Loading and launching the CUDA kernels with CuPy (imported only here)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ._catalog import (
    ARITH_FORMATS,
    ARITH_OPS,
    BACK_CONVERSIONS,
    CONVERSIONS,
    GEMM_FP8_KERNELS,
    KERNEL_DIR,
    WGMMA_FP8_KERNELS,
    Conversion,
)

_THREADS = 256


class GPUUnavailableError(RuntimeError):
    """No usable GPU: CuPy is missing, or no CUDA device/driver could be opened."""


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """Why the GPU cannot be used (``None`` when it can)."""
    try:
        import cupy
    except ImportError as exc:
        return (f"CuPy is not installed ({exc}); install the gpu extra: "
                "pip install 'lowprec[gpu]' (cupy-cuda13x)")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 -- any CUDA error here means 'no GPU'
        return f"CuPy {cupy.__version__} found no usable CUDA device: {exc}"
    if n < 1:
        return f"CuPy {cupy.__version__} found no CUDA device"
    major = cupy.cuda.Device(0).compute_capability
    if int(major) < 89:
        return (f"the GPU has compute capability {major}; lowprec.gpu needs sm_89 or newer "
                "(FP8 conversions and mma.sync on FP8)")
    return None


def available() -> bool:
    """True when CuPy is installed and an sm_89+ NVIDIA GPU can be used."""
    return unavailable_reason() is None


def require() -> None:
    """Raise :class:`GPUUnavailableError` saying why, unless the GPU can be used."""
    reason = unavailable_reason()
    if reason is not None:
        raise GPUUnavailableError(f"lowprec.gpu cannot run: {reason}")


def device_info() -> dict[str, Any]:
    """Name, compute capability, driver/runtime/CuPy versions, memory bandwidth."""
    require()
    import cupy

    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    # clockRate/memoryClockRate may be absent on CUDA 13 (removed from cudaDeviceProp).
    bw = None
    try:
        mem_khz = rt.deviceGetAttribute(rt.cudaDevAttrMemoryClockRate, 0)
        bus = rt.deviceGetAttribute(rt.cudaDevAttrGlobalMemoryBusWidth, 0)
        bw = 2 * mem_khz * 1e3 * bus / 8
    except Exception:  # noqa: BLE001, S110 -- optional figure
        pass

    def _ver(v: int) -> str:
        return f"{v // 1000}.{(v % 1000) // 10}"

    return {
        "name": name,
        "compute_capability": cupy.cuda.Device(0).compute_capability,
        "driver_cuda_version": _ver(rt.driverGetVersion()),
        "runtime_cuda_version": _ver(rt.runtimeGetVersion()),
        "cupy_version": cupy.__version__,
        "memory_bytes": int(props["totalGlobalMem"]),
        "multiprocessors": int(props["multiProcessorCount"]),
        "theoretical_bandwidth_bytes_per_s": bw,
    }


@functools.cache
def module(source: str):
    """The compiled CuPy RawModule of one CUDA source file of this package.

    CuPy compiles with NVRTC for the current device (it appends its own
    ``-arch=sm_XX`` and ``-ftz=true``; see lp_common.cuh for why -ftz does not
    change results here). We add C++17 and this directory for lp_common.cuh.
    """
    require()
    import cupy

    code = (KERNEL_DIR / source).read_text()
    return cupy.RawModule(code=code, options=("--std=c++17", f"-I{KERNEL_DIR}"))


@functools.cache
def module_sm90a(source: str):
    """A module for the sm_90a target (wgmma), which CuPy's RawModule cannot request.

    Compiled here with NVRTC (``-arch=sm_90a``) through CuPy's binding and loaded
    from the cubin. Needs a Hopper GPU (compute capability 9.0).
    """
    require()
    import tempfile

    import cupy
    from cupy_backends.cuda.libs import nvrtc

    cc = cupy.cuda.Device().compute_capability
    if cc != "90":
        raise GPUUnavailableError(f"{source} needs sm_90a (Hopper); this GPU is sm_{cc}")
    prog = nvrtc.createProgram((KERNEL_DIR / source).read_text(), source, [], [])
    try:
        nvrtc.compileProgram(prog, ["--std=c++17", f"-I{KERNEL_DIR}", "-arch=sm_90a"])
    except Exception as exc:  # add NVRTC's log to the error
        raise RuntimeError(f"NVRTC failed on {source}: {nvrtc.getProgramLog(prog)}") from exc
    cubin = nvrtc.getCUBIN(prog)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    return cupy.RawModule(path=f.name)


def _launch(kernel, n: int, args: tuple, per_thread: int = 1) -> None:
    import cupy

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    blocks = max(1, min(-(-n // (_THREADS * per_thread)), sms * 32))
    kernel((blocks,), (_THREADS,), args)


def _fresh(x, dtype):
    """A C-contiguous, freshly allocated (so 256-byte aligned) device array of x."""
    require()
    import cupy

    arr = cupy.asarray(x)
    if arr.dtype != dtype:
        raise TypeError(f"expected {np.dtype(dtype).name} data, got {arr.dtype}")
    if not arr.flags.c_contiguous or arr.data.ptr % 16:
        arr = arr.copy()
    return arr


def find_conversion(source: str, fmt: str, mode: str, saturate: bool) -> Conversion:
    """The hardware conversion matching these arguments, or a ValueError listing them."""
    from ..formats import get_format
    from ..rounding import check_mode

    fmt_name, mode = get_format(fmt).name, check_mode(mode)
    for c in CONVERSIONS.values():
        if (c.source, c.fmt, c.mode) == (source, fmt_name, mode) and (
                c.saturate == saturate or c.twin == "nan_to_max"):
            return c
    have = ", ".join(f"{c.source}->{c.fmt} {c.mode}{' sat' if c.saturate else ''}"
                     for c in CONVERSIONS.values())
    raise ValueError(f"the GPU has no conversion {source}->{fmt_name} mode={mode} "
                     f"saturate={saturate}; available: {have}")


def convert(x, fmt: str, mode: str = "rne", *, saturate: bool = False):
    """Round float32/float64 ``x`` (NumPy or CuPy) to ``fmt`` on the GPU; returns CuPy codes.

    Only the modes the hardware offers exist (see ``CONVERSIONS``); fp6/fp4
    conversions always saturate and give +max for NaN (CUDA's convention).
    """
    require()
    import cupy

    x = cupy.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x must be float32 or float64, got {x.dtype}")
    conv = find_conversion(x.dtype.name, fmt, mode, saturate)
    return convert_bits(conv, x.view(np.uint32 if x.dtype == np.float32 else np.uint64))


def convert_bits(conv: Conversion, bits):
    """Run one conversion kernel on float32 (uint32) / float64 (uint64) bit patterns."""
    require()
    import cupy

    src_dt = np.uint32 if conv.source == "float32" else np.uint64
    bits = _fresh(bits, src_dt)
    out = cupy.empty(bits.shape, dtype=conv.format.code_dtype)
    n = bits.size
    per = 4 if conv.source == "float32" else 1
    _launch(module("convert.cu").get_function(conv.kernel), n,
            (bits, out, np.uint64(n)), per_thread=per)
    return out


def widen(codes, fmt: str):
    """Hardware conversion of codes back to a wider format's bits: (bits, wide format name)."""
    require()
    import cupy

    from ..formats import get_format

    name = get_format(fmt).name
    for b in BACK_CONVERSIONS.values():
        if b.fmt == name:
            codes = _fresh(codes, get_format(name).code_dtype)
            out_dt = np.uint32 if b.to == "fp32" else np.uint16
            out = cupy.empty(codes.shape, dtype=out_dt)
            _launch(module("convert.cu").get_function(b.kernel), codes.size,
                    (codes, out, np.uint64(codes.size)))
            return out, b.to
    raise ValueError(f"no GPU conversion back from {name}; available: "
                     + ", ".join(b.fmt for b in BACK_CONVERSIONS.values()))


def arith(op: str, fmt: str, *operands):
    """fp16/bf16 arithmetic on the GPU on uint16 codes: ``arith("add", "bf16", a, b)``."""
    require()
    import cupy

    from ..formats import get_format

    name = get_format(fmt).name
    if name not in ARITH_FORMATS:
        raise ValueError(f"GPU arithmetic exists for {', '.join(ARITH_FORMATS)}, not {name}")
    if op not in ARITH_OPS:
        raise ValueError(f"unknown operation {op!r}; available: {', '.join(ARITH_OPS)}")
    arity = ARITH_OPS[op][0]
    if len(operands) != arity:
        raise ValueError(f"{op} takes {arity} operands, got {len(operands)}")
    ops = [_fresh(o, np.uint16) for o in operands]
    shape = ops[0].shape
    if any(o.shape != shape for o in ops):
        raise ValueError(f"operand shapes differ: {[o.shape for o in ops]}")
    out = cupy.empty(shape, dtype=np.uint16)
    _launch(module("arith.cu").get_function(f"{name}_{op}"), out.size,
            (*ops, out, np.uint64(out.size)))
    return out


def matmul(a, b, fmt: str, *, out: str = "float32", engine: str = "mma"):
    """Matrix product of code matrices on the GPU.

    * fp16/bf16, ``out="float32"``: cuBLAS ``cublasGemmEx`` with fp32 output and
      ``CUBLAS_COMPUTE_32F`` (tensor cores, fp32 accumulation);
    * fp16, ``out="float16"``: ``cupy.matmul`` on float16 arrays, as CuPy users
      call it (2-D; CuPy's batched fp16 path converts to fp32 first);
    * fp8_e4m3/fp8_e5m2: ``mma.sync.m16n8k32`` with fp32 accumulation (gemm_fp8.cu);
      on sm_90 ptxas makes it ``HMMA.16816.F32`` (the FP16 path, whose model is not yet
      found); ``engine="wgmma"``:
      ``wgmma.mma_async.m64n8k32`` on Hopper's FP8 tensor cores (gemm_fp8_wgmma.cu;
      the ``h100`` model on every output measured on an H200).

    Returns float32 (or float16) CuPy array of shape (M, N).
    """
    require()
    import cupy

    from ..formats import get_format

    name = get_format(fmt).name
    a = _fresh(a, get_format(name).code_dtype)
    b = _fresh(b, get_format(name).code_dtype)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"need 2-D (M, K) @ (K, N) code matrices, got {a.shape} @ {b.shape}")
    m, k = a.shape
    n = b.shape[1]
    if name in GEMM_FP8_KERNELS:
        if out != "float32":
            raise ValueError("FP8 products are returned as float32 only")
        if engine not in ("mma", "wgmma"):
            raise ValueError(f"engine must be 'mma' or 'wgmma', got {engine!r}")
        tile_m = 64 if engine == "wgmma" else 16
        mp, np_, kp = -(-m // tile_m) * tile_m, -(-n // 8) * 8, -(-k // 32) * 32
        ap = cupy.zeros((mp, kp), dtype=np.uint8)
        bp = cupy.zeros((kp, np_), dtype=np.uint8)
        ap[:m, :k] = a
        bp[:k, :n] = b
        c = cupy.empty((mp, np_), dtype=np.float32)
        dims = (np.int32(mp), np.int32(np_), np.int32(kp))
        if engine == "wgmma":  # B goes in transposed (N x K, "K-major")
            kern = module_sm90a("gemm_fp8_wgmma.cu").get_function(WGMMA_FP8_KERNELS[name])
            kern((np_ // 8, mp // 64), (128,), (ap, cupy.ascontiguousarray(bp.T), c, *dims))
        else:
            kern = module("gemm_fp8.cu").get_function(GEMM_FP8_KERNELS[name])
            kern((np_ // 8, mp // 16), (32,), (ap, bp, c, *dims))
        return c[:m, :n].copy()
    if name not in ("fp16", "bf16"):
        raise ValueError(f"GPU matmul exists for fp16, bf16, fp8_e4m3, fp8_e5m2, not {name}")
    if out == "float16":
        if name != "fp16":
            raise ValueError("out='float16' (cupy.matmul) exists for fp16 only")
        return cupy.matmul(a.view(cupy.float16), b.view(cupy.float16))
    if out != "float32":
        raise ValueError(f"out must be 'float32' or 'float16', got {out!r}")
    from cupy_backends.cuda.libs import cublas

    rt = cupy.cuda.runtime
    dtype = getattr(rt, "CUDA_R_16F", 2) if name == "fp16" else getattr(rt, "CUDA_R_16BF", 14)
    r32 = getattr(rt, "CUDA_R_32F", 0)
    compute_32f = getattr(cublas, "CUBLAS_COMPUTE_32F", 68)
    c = cupy.empty((m, n), dtype=np.float32)
    alpha, beta = np.ones(1, np.float32), np.zeros(1, np.float32)
    handle = cupy.cuda.device.get_cublas_handle()
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)  # alpha, beta on the host
    try:
        # Row-major C = A @ B is column-major C^T = B^T @ A^T.
        cublas.gemmEx(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k,
                      alpha.ctypes.data, b.data.ptr, dtype, n, a.data.ptr, dtype, k,
                      beta.ctypes.data, c.data.ptr, r32, n, compute_32f,
                      cublas.CUBLAS_GEMM_DEFAULT)
    finally:
        cublas.setPointerMode(handle, mode)
    return c


def sweep_conversion(conv: Conversion, lo, hi, nan_expect, is_nan, start: int, count: int,
                     cap: int = 1024, nan_default=None):
    """Run ``sweep_<name>`` over inputs start..start+count-1 (float32 bit patterns).

    ``nan_expect``: 4 codes, the hardware NaN rule's code per (sign << 1 | fraction
    bit 21); ``nan_default``: lowprec's NaN code per sign (default: nan_expect's).
    Returns (counters[6] as numpy, first mismatch keys as numpy uint64); counters[5]
    counts NaN results that follow the rule but differ from ``nan_default``.
    """
    require()
    import cupy

    nan_expect = np.asarray(cupy.asnumpy(nan_expect), dtype=np.uint32)
    if nan_expect.size == 2:  # one code per sign
        nan_expect = np.repeat(nan_expect, 2)
    if nan_default is None:
        nan_default = nan_expect[::2]
    counters = cupy.zeros(6, dtype=np.uint64)
    first = cupy.zeros(max(cap, 1), dtype=np.uint64)
    args = (np.uint64(start), np.uint64(count), cupy.asarray(lo), cupy.asarray(hi),
            np.uint32(1 << conv.format.width), cupy.asarray(nan_expect),
            cupy.asarray(is_nan), counters, first, np.uint32(cap),
            cupy.asarray(np.asarray(cupy.asnumpy(nan_default), dtype=np.uint32)))
    _launch(module("convert.cu").get_function("sweep_" + conv.name), count, args, per_thread=8)
    c = counters.get()
    return c, first[: int(min(c[4], cap))].get()


def sweep_arith(fmt: str, op: str, lo, hi, is_nan, start: int, count: int, seed: int = 0,
                cap: int = 1024):
    """Run ``sweep_<fmt>_<op>``: seed 0 = all pairs (a, b) = (i >> 16, i & 0xFFFF)."""
    require()
    import cupy

    counters = cupy.zeros(5, dtype=np.uint64)
    first = cupy.zeros(max(cap, 1), dtype=np.uint64)
    args = (np.uint64(start), np.uint64(count), np.uint64(seed), cupy.asarray(lo),
            cupy.asarray(hi), np.uint32(1 << 16), cupy.asarray(is_nan), counters, first,
            np.uint32(cap))
    _launch(module("arith.cu").get_function(f"sweep_{fmt}_{op}"), count, args, per_thread=8)
    c = counters.get()
    return c, first[: int(min(c[4], cap))].get()
