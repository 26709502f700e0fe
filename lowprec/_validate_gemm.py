"""The GEMM parts of ``lowprec validate --gpu``: which model of :func:`lowprec.matmul`
reproduces a GPU's matrix product bit for bit.

Two sections:

* ``gemm``: lowprec.gpu's own kernels (cuBLAS fp16/bf16 with fp32 output,
  ``cupy.matmul`` fp16, FP8 through ``mma.sync`` and ``wgmma``);
* ``library_gemm``: what users call -- ``cupy.matmul`` (fp16 and bf16 out), and with
  torch on the GPU machine ``torch.matmul`` fp16/bf16 and ``torch._scaled_mm`` FP8
  E4M3 with ``use_fast_accum`` on and off -- over K from 16 to 8192.

Every candidate is a named model of :mod:`lowprec.matmul` (architecture models,
the library names ``cublas``, ``cublaslt_fp8``, ``cublaslt_fp8_fast``; for FP8 also
Hopper's FP16 rule on the FP8 values) or ``promote(K/s, "h100")``, the split-K reduction
of ``s`` slices. The ``mma.sync`` FP8 rows, which no named model reproduced on the H200
(it runs as ``HMMA.16816.F32`` there), also get :func:`lowprec.identify.identify_dot`'s
search over ``tensor_core(block, align_bits, ...)`` parameters on their smallest shape. All of them run in the few compiled kernels of ``lowprec/_kernels/matmul.py``
(exact, sequential, tensor core): no per-format kernel is compiled.

The same functions serve users' own tensors (docs/gpu.md, "Which model is my GEMM?"):
``match_models(a, b, got, inputs=..., output=...)`` counts, for each candidate, the
outputs it reproduces.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .formats import FloatFormat, get_format
from .matmul import H100, promote, tensor_core
from .matmul import matmul as lp_matmul
from .rounding import decode, round_to

Log = Callable[[str], None]

#: K values of the library sweep (the full run); quick runs take every other one.
LIBRARY_K = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def candidates(inputs: str, k: int) -> dict[str, Any]:
    """Named models worth trying for a GEMM of ``inputs`` with inner dimension ``k``."""
    out: dict[str, Any] = {"exact": "exact", "sequential": "sequential", "h100": "h100"}
    if inputs.startswith("fp8"):
        out.update({"cublaslt_fp8": "cublaslt_fp8", "cublaslt_fp8_fast": "cublaslt_fp8_fast",
                    "h100 FP16 rule on FP8 values": H100.rule("fp16"), "ada": "ada",
                    "b200": "b200"})
    else:
        out.update({"a100": "a100", "b200": "b200"})
    for s in (2, 4, 8, 16):  # split-K: s slices in the chain, partial sums added in fp32
        if k % s == 0 and k // s >= 16:
            out[f"promote({k // s}, h100) [split-K {s}]"] = promote(k // s, "h100")
    return out


def match_models(a: np.ndarray, b: np.ndarray, got: np.ndarray, *, inputs: str,
                 output: str = "fp32", models: dict[str, Any] | None = None) -> dict[str, Any]:
    """Outputs of ``got`` (M x N, the GPU's) that each model reproduces bit for bit.

    ``a``, ``b``: values of ``inputs``. Returns name -> count (or the error text of a
    model that cannot take these operands).
    """
    fout = get_format(output)
    want_bits = np.asarray(got, dtype=np.float64)
    models = candidates(inputs, a.shape[1]) if models is None else models
    out: dict[str, Any] = {}
    for name, model in models.items():
        try:
            d32 = lp_matmul(a, b, inputs=inputs, accumulate="fp32", model=model)
            if fout.name == "fp32":
                variants = {name: d32}
            else:  # fp32 result rounded once (cuBLAS COMPUTE_32F), or C/D in the output format
                variants = {f"{name}, then RNE to {fout.name}": round_to(d32, fout),
                            f"{name} ({fout.name} C/D)": lp_matmul(
                                a, b, inputs=inputs, accumulate="fp32", output=fout, model=model)}
        except ValueError as exc:
            out[name] = f"not run: {exc}"[:200]
            continue
        for vname, d in variants.items():
            d = np.asarray(d, dtype=np.float64)
            same = (d == want_bits) & (np.signbit(d) == np.signbit(want_bits))
            same |= np.isnan(d) & np.isnan(want_bits)
            out[vname] = int(same.sum())
    return out


def behaves_like(match: dict[str, Any], outputs: int) -> str:
    """'cublaslt_fp8 on 1024/1024 outputs': the first candidate (in the order tried)
    with the most outputs reproduced."""
    counts = {k: v for k, v in match.items() if isinstance(v, int)}
    if not counts:
        return "no model ran"
    best = max(counts, key=lambda k: counts[k])
    return f"{best} on {counts[best]}/{outputs} outputs"


def operands(fmt: FloatFormat, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Random codes with exponents in [-6, 3], both signs, 10% zeros."""
    m = fmt.mantissa_bits
    e = rng.integers(-6, 4, size=shape)
    codes = ((rng.integers(0, 2, size=shape) << (fmt.width - 1)) | ((e + fmt.bias) << m)
             | rng.integers(0, 1 << m, size=shape))
    codes[rng.random(shape) < 0.1] = 0
    return codes.astype(fmt.code_dtype)


def _row(what: str, fmt: str, shape: tuple[int, int, int], got: np.ndarray, a: np.ndarray,
         b: np.ndarray, output: str, secs: float) -> dict:
    m, n, k = shape
    match = match_models(a, b, got, inputs=fmt, output=output)
    counts = {k2: v for k2, v in match.items() if isinstance(v, int)}
    return {"gemm": what, "format": fmt, "output": output, "shape": [m, n, k], "outputs": m * n,
            "behaves_like": behaves_like(match, m * n),
            "models_matching_every_output": [k2 for k2, v in counts.items() if v == m * n],
            "all_models": dict(sorted(counts.items(), key=lambda kv: -kv[1])),
            "models_not_run": {k2: v for k2, v in match.items() if not isinstance(v, int)},
            "gpu_seconds": round(secs, 4)}


def kernel_section(quick: bool, rng: np.random.Generator, log: Log) -> list[dict]:
    """lowprec.gpu.matmul's engines against the named models."""
    import cupy

    from .gpu import _runtime as rt
    from .gpu._catalog import GEMM_FP8_KERNELS

    shapes = [(16, 8, 32), (64, 64, 256)] + ([] if quick else [(128, 128, 1024)])
    runs = [("fp16", "cublas", "float32"), ("bf16", "cublas", "float32"),
            ("fp16", "cupy.matmul", "float16")]
    runs += [(name, eng, "float32") for name in GEMM_FP8_KERNELS for eng in ("mma", "wgmma")]
    rows = []
    for name, engine, out in runs:
        fmt = get_format(name)
        what = {"cublas": "cublasGemmEx (fp32 out)", "cupy.matmul": "cupy.matmul (fp16 out)",
                "mma": "mma.sync m16n8k32", "wgmma": "wgmma m64n8k32"}[engine]
        for (m, n, k) in shapes:
            a, b = operands(fmt, (m, k), rng), operands(fmt, (k, n), rng)
            t0 = time.perf_counter()
            try:
                if engine in ("mma", "wgmma"):
                    got = rt.matmul(a, b, name, engine=engine)
                else:
                    got = rt.matmul(a, b, name, out=out)
                got = cupy.asnumpy(got).astype(np.float64)
            except Exception as exc:  # noqa: BLE001 -- e.g. wgmma on a non-Hopper GPU
                rows.append({"gemm": what, "format": name, "shape": [m, n, k],
                             "error": f"{type(exc).__name__}: {exc}"[:300]})
                log(f"  gemm {name} {what}: {type(exc).__name__}")
                continue
            secs = time.perf_counter() - t0
            output = "fp16" if out == "float16" else "fp32"
            av, bv = decode(a, fmt), decode(b, fmt)
            row = _row(what, name, (m, n, k), got, av, bv, output, secs)
            if engine == "mma" and m * n <= 128:  # the HMMA path: search the parameters
                row["identify_dot_search"] = _search(av, bv, got, name)
            rows.append(row)
            log(f"  gemm {name} {what} {m}x{n}x{k}: {row['behaves_like']}")
    return rows


def _search(av: np.ndarray, bv: np.ndarray, got: np.ndarray, fmt: str) -> str:
    """identify_dot with its tensor_core parameter search on every output of a GEMM."""
    from .identify import identify_dot

    m, n = got.shape
    rows_a = np.repeat(av, n, axis=0)
    rows_b = np.tile(bv.T, (m, 1))
    try:
        ident = identify_dot(rows_a, rows_b, None, got.ravel(), inputs=fmt, search=True)
    except ValueError as exc:
        return f"not run: {exc}"[:200]
    best = ", ".join(f"{k}={v}" for k, v in ident.best.items())
    text = f"{best} on {round(ident.explained * ident.n)}/{ident.n} outputs"
    # A wider grid than identify_dot's (accumulators of 13 ... 23 fraction bits), the
    # record's statistics pointing between its two (exact 59%, FP8 rule 0%).
    grid = {f"tensor_core({blk}, {al}, acc_mantissa_bits={acc}, hw_mode={hw})":
            tensor_core(blk, al, acc_mantissa_bits=acc, hw_mode=hw)
            for blk in (4, 8, 16, 32) for al in (0, 1, 2, 3) for acc in (13, 16, 18, 20, 22)
            for hw in ("rtz", "rne")}
    match = match_models(av, bv, got, inputs=fmt, models=grid)
    return text + "; wider grid: " + behaves_like(match, got.size)


def _torch_gemms(a: np.ndarray, b: np.ndarray, fmt: str) -> dict[str, np.ndarray]:
    """torch.matmul (fp16/bf16 in and out) or torch._scaled_mm (E4M3, fp32 out)."""
    import torch

    dev = "cuda"
    if fmt.startswith("fp8"):
        ta = torch.tensor(a, dtype=torch.float32, device=dev).to(torch.float8_e4m3fn)
        tb = torch.tensor(b.T.copy(), dtype=torch.float32, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        res = {}
        for fast in (False, True):
            d = torch._scaled_mm(ta, tb, scale_a=one, scale_b=one, out_dtype=torch.float32,
                                 use_fast_accum=fast)
            res[f"torch._scaled_mm use_fast_accum={fast}"] = d.double().cpu().numpy()
        return res
    dt = torch.float16 if fmt == "fp16" else torch.bfloat16
    d = torch.tensor(a, device=dev).to(dt) @ torch.tensor(b, device=dev).to(dt)
    return {f"torch.matmul {fmt}": d.double().cpu().numpy()}


def library_section(quick: bool, rng: np.random.Generator, log: Log) -> list[dict]:
    """The library GEMMs users call, over K = 16 .. 8192, each named by its model."""
    import cupy

    ks = LIBRARY_K[::2] if quick else LIBRARY_K
    # 32x32 at every K; a second shape up to K = 1024 (the emulation of all candidate
    # models costs M*N*K per model on the CPU, and the section must fit one GPU lease).
    shapes = [(32, 32)] + ([] if quick else [(64, 48)])
    try:
        import torch
        has_torch = bool(torch.cuda.is_available())
        torch_note = "" if has_torch else "torch has no CUDA device"
    except ImportError:
        has_torch, torch_note = False, "torch is not installed"
    rows: list[dict] = []
    if not has_torch:
        rows.append({"gemm": "torch.matmul / torch._scaled_mm", "skipped": torch_note})
        log(f"  library GEMMs: torch skipped ({torch_note})")
    for fname in ("fp16", "bf16", "fp8_e4m3"):
        fmt = get_format(fname)
        for (m, n) in shapes:
            for k in ks:
                if (m, n) != shapes[0] and k > 1024:
                    continue
                a, b = operands(fmt, (m, k), rng), operands(fmt, (k, n), rng)
                av, bv = decode(a, fmt), decode(b, fmt)
                runs: dict[str, tuple[np.ndarray, str]] = {}
                t0 = time.perf_counter()
                if fname != "fp8_e4m3":
                    dt = cupy.float16 if fname == "fp16" else None
                    if dt is not None:  # CuPy has no bf16 dtype
                        d = cupy.matmul(cupy.asarray(av, dt), cupy.asarray(bv, dt))
                        runs["cupy.matmul fp16"] = (cupy.asnumpy(d).astype(np.float64), "fp16")
                if has_torch and not (fname.startswith("fp8") and k % 16):
                    try:
                        for what, d in _torch_gemms(av, bv, fname).items():
                            runs[what] = (d, "fp32" if fname.startswith("fp8") else fname)
                    except Exception as exc:  # noqa: BLE001 -- a torch build without the op
                        rows.append({"gemm": "torch", "format": fname, "shape": [m, n, k],
                                     "skipped": f"{type(exc).__name__}: {exc}"[:300]})
                secs = time.perf_counter() - t0
                for what, (got, output) in runs.items():
                    row = _row(what, fname, (m, n, k), got, av, bv, output, secs)
                    rows.append(row)
                    log(f"  {what} {m}x{n}x{k}: {row['behaves_like']}")
    return rows
