"""Hardware against emulator, bit for bit: ``lowprec validate [--gpu]``.

Every GPU kernel of :mod:`lowprec.gpu` is run next to its emulated twin on the
same inputs, and the report counts where the codes differ:

* float32 -> format conversions: all 2**32 inputs, checked on the device
  against the emulator's step table (see ``lowprec/gpu/_tables.py``); every
  mismatch the device records is re-checked with the emulator on the CPU;
* float64 -> format conversions and the elementwise kernels: random and
  near-midpoint samples compared on the CPU;
* codes -> wider format: every code;
* fp16/bf16 add, sub, mul, div: all 2**32 operand pairs on the device against
  the emulator's correctly rounded result (exact result in double, rounded to
  odd, then the emulator's double -> format table); fma: random triples;
  sqrt: all 2**16 inputs; and random samples against ``lowprec.arith`` itself;
* GEMMs: which accumulation model reproduces each output bit for bit.

Each part also says what the hardware *behaves like*, with the identification of
:mod:`lowprec.identify` (re-exported here): a conversion's rounding mode,
saturation and subnormal handling, and a GEMM's tensor-core architecture model
("this GPU's FP8 MMA behaves like the h100 model on 16384/16384 outputs").

Without ``--gpu`` (or without a GPU) only the emulator-side parts run: the
step tables are built and checked against the emulator, and the emulator is
compared with ml_dtypes -- what the GPU run would compare against.
"""

from __future__ import annotations

import datetime as _dt
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import arith
from ._validate_report import (
    _histogram,
    _is_nan_codes,
    explain_code,
    to_markdown,
    ulp_distance,
    write_report,
)
from .formats import FloatFormat, custom_format, get_format, reference_dtype
from .gpu._catalog import (
    ARITH_FORMATS,
    ARITH_OPS,
    BACK_CONVERSIONS,
    CONVERSIONS,
    GEMM_FP8_KERNELS,
    SWEEP_OPS,
    Conversion,
)
from .gpu._tables import StepTable, build_table, check_table
from .identify import Identification, identify_conversion, identify_dot
from .matmul import list_models
from .matmul import matmul as lp_matmul
from .rounding import decode, encode, round_to
from .tensorcores import ARCHITECTURES

__all__ = ["Identification", "conversion_behaviour", "explain_code", "gemm_behaviour",
           "identify_conversion", "identify_dot", "run", "to_markdown", "ulp_distance",
           "write_report"]

Log = Callable[[str], None]


# --------------------------------------------------------------------------- helpers
def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def _f32_inputs_near(fmt: FloatFormat, n: int, rng: np.random.Generator, dtype) -> np.ndarray:
    """Random bit patterns plus the format's values, midpoints and their neighbours."""
    ut = np.uint32 if dtype == np.float32 else np.uint64
    bits = rng.integers(0, np.iinfo(ut).max, size=n, dtype=ut, endpoint=True).view(dtype)
    codes = np.arange(1 << fmt.width, dtype=np.uint64).astype(fmt.code_dtype)
    with np.errstate(invalid="ignore"):
        vals = decode(codes, fmt).astype(np.float64)
    vals = np.sort(vals[np.isfinite(vals)])
    mids = (vals[1:] + vals[:-1]) / 2
    pts = np.concatenate([vals, mids]).astype(dtype)
    up, down = np.nextafter(pts, dtype(np.inf)), np.nextafter(pts, dtype(-np.inf))
    near = np.concatenate([pts, up, down])
    k = min(n, near.size)
    return np.concatenate([bits, rng.choice(near, size=k, replace=False)])


# --------------------------------------------------------------- emulator-only parts
def tables_section(quick: bool, rng: np.random.Generator, log: Log) -> tuple[dict, dict]:
    """Build and check the step table of every float32 conversion and of double -> fp16/bf16."""
    samples = 1 << (14 if quick else 20)
    rows, tables = [], {}
    for conv in CONVERSIONS.values():
        if conv.source != "float32":
            continue
        table, secs = _timed(build_table, conv.emulate, 32, 1 << conv.format.width)
        check = check_table(table, conv.emulate, samples, rng)
        tables[conv.name] = table
        rows.append({"name": conv.name, "steps": table.steps, "build_s": round(secs, 3), **check})
        log(f"  table {conv.name}: {table.steps} steps, {check['mismatches']} mismatches "
            f"in {check['inputs']} checks")
    for fmt in ARITH_FORMATS:
        def emulate(x, fmt=fmt):
            return encode(x, fmt, "rne")
        table, secs = _timed(build_table, emulate, 64, 1 << 16)
        check = check_table(table, emulate, samples, rng)
        tables["f64_" + fmt] = table
        rows.append({"name": f"f64_{fmt}_rn (arith reference)", "steps": table.steps,
                     "build_s": round(secs, 3), **check})
        log(f"  table f64->{fmt}: {table.steps} steps, {check['mismatches']} mismatches")
    return {"rows": rows}, tables


def ml_dtypes_section(quick: bool, rng: np.random.Generator, log: Log) -> dict:
    """The emulator's round-to-nearest-even conversions against ml_dtypes' casts."""
    n = 1 << (16 if quick else 22)
    rows = []
    for name in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1"):
        fmt = get_format(name)
        ref = reference_dtype(fmt)
        if ref is None:
            continue
        x = _f32_inputs_near(fmt, n, rng, np.float32)
        if not fmt.has_nan:
            x = x[~np.isnan(x)]
        with np.errstate(over="ignore", invalid="ignore"):
            want = x.astype(ref).view(fmt.code_dtype)
            if fmt.width < 8:
                want = want & np.uint8((1 << fmt.width) - 1)
        got = encode(x, fmt, "rne")
        isnan = _is_nan_codes(fmt).astype(bool)
        both_nan = isnan[got.astype(np.int64)] & isnan[want.astype(np.int64)]
        bad = (got != want) & ~both_nan
        first = [f"x=0x{int(v):08x}: lowprec {explain_code(g, fmt)}, "
                 f"ml_dtypes {explain_code(w, fmt)}"
                 for v, g, w in zip(x[bad].view(np.uint32)[:3], got[bad][:3], want[bad][:3])]
        rows.append({"format": name, "inputs": int(x.size), "mismatches": int(bad.sum()),
                     "nan_bit_differences": int((both_nan & (got != want)).sum()),
                     "first": first})
        log(f"  ml_dtypes {name}: {int(bad.sum())} mismatches in {x.size}")
    return {"rows": rows}


# ----------------------------------------------------------------------- GPU parts
def _conversion_sweep(conv: Conversion, table: StepTable, quick: bool, log: Log) -> dict:
    from .gpu import _runtime as rt

    fmt = conv.format
    lo, hi = table.lo_hi()
    nan_expect = table.nan_expect.astype(np.uint32)
    is_nan = _is_nan_codes(fmt)
    total = 1 << 32
    chunk = 1 << 30
    counters = np.zeros(5, dtype=np.uint64)
    keys: list[np.ndarray] = []
    t0 = time.perf_counter()
    for start in range(0, total, chunk):
        c, first = rt.sweep_conversion(conv, lo, hi, nan_expect, is_nan, start, chunk, cap=256)
        counters += c
        keys.append(first)
    import cupy
    cupy.cuda.Device().synchronize()
    secs = time.perf_counter() - t0
    key = np.concatenate(keys)[:1024]
    u = (key & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    got = (key >> np.uint64(32)).astype(np.int64)
    want = conv.emulate(u.view(np.float32)).astype(np.int64) if u.size else got
    confirmed = int((got != want).sum())
    first = [f"x=0x{int(a):08x} ({float(a.view(np.float32))!r}): GPU {explain_code(g, fmt)}; "
             f"emulator {explain_code(w, fmt)}" for a, g, w in zip(u[:5], got[:5], want[:5])]
    res = {"name": conv.name, "cuda": conv.cuda, "inputs": int(counters[0]),
           "mismatches": int(counters[1]), "nan_bit_differences": int(counters[2]),
           "mismatches_not_nan_bits": int(counters[1] - counters[2]),
           "gpu_larger": int(counters[3]), "recorded": int(u.size),
           "recorded_confirmed_by_emulator": confirmed,
           "ulp_histogram_of_recorded": _histogram(got, want, fmt),
           "first": first, "seconds": round(secs, 3)}
    log(f"  sweep {conv.name}: {res['mismatches']} mismatches in {res['inputs']} inputs "
        f"({secs:.2f} s)")
    return res


def _sample_compare(conv: Conversion, n: int, rng: np.random.Generator) -> dict:
    """Elementwise kernel on random and near-midpoint inputs against the emulator."""
    import cupy

    from .gpu import _runtime as rt

    dt = np.float32 if conv.source == "float32" else np.float64
    x = _f32_inputs_near(conv.format, n, rng, dt)
    got = cupy.asnumpy(rt.convert_bits(conv, x.view(np.uint32 if dt == np.float32 else np.uint64)))
    want = conv.emulate(x)
    fmt = conv.format
    isnan = _is_nan_codes(fmt).astype(bool)
    both_nan = isnan[got.astype(np.int64)] & isnan[want.astype(np.int64)]
    bad = (got != want) & ~both_nan
    first = [f"x={float(v)!r}: GPU {explain_code(g, fmt)}; emulator {explain_code(w, fmt)}"
             for v, g, w in zip(x[bad][:5], got[bad][:5], want[bad][:5])]
    return {"name": conv.name, "cuda": conv.cuda, "inputs": int(x.size),
            "mismatches": int(bad.sum()), "behaves_like": conversion_behaviour(x, got, fmt),
            "nan_bit_differences": int(((got != want) & both_nan).sum()),
            "ulp_histogram": _histogram(got[bad], want[bad], fmt), "first": first}


def conversion_behaviour(x: np.ndarray, got: np.ndarray, fmt: FloatFormat) -> str:
    """'rne, saturate=False, ... on N/N inputs': the lowprec semantics of a GPU
    conversion's codes ``got`` for inputs ``x`` (:func:`identify_conversion`)."""
    ident = identify_conversion(x, got.astype(np.int64), fmt)
    sem = ", ".join(f"{k}={v}" for k, v in ident.best.items())
    return f"{sem} on {round(ident.explained * ident.n)}/{ident.n} inputs"


def gemm_behaviour(match: dict[str, int], outputs: int) -> str:
    """'the h100 model on N/N outputs': the architecture model of lowprec.matmul that
    reproduces most of a GPU GEMM's outputs (``match``: model key -> outputs matched)."""
    arch = {k.split(":", 1)[1]: v for k, v in match.items()
            if k.startswith("lowprec.matmul:") and k.split(":", 1)[1] in ARCHITECTURES}
    if not arch:
        return "no architecture model ran"
    best = max(arch, key=lambda k: arch[k])
    return f"the {best} model on {arch[best]}/{outputs} outputs"


def _back_compare() -> list[dict]:
    import cupy
    import ml_dtypes

    from .gpu import _runtime as rt

    rows = []
    for b in BACK_CONVERSIONS.values():
        fmt = get_format(b.fmt)
        codes = np.arange(1 << fmt.width, dtype=np.uint64).astype(fmt.code_dtype)
        got, wide = rt.widen(codes, fmt.name)
        got = cupy.asnumpy(got)
        with np.errstate(invalid="ignore", over="ignore"):
            vals = decode(codes, fmt).astype(np.float64)
            wide_dt = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}[wide]
            want = vals.astype(wide_dt).view(got.dtype)
        nan = np.isnan(vals)
        bad = (got != want) & ~nan
        got_nan = np.isnan(got.view(wide_dt).astype(np.float64))
        rows.append({"name": b.name, "cuda": b.cuda, "codes": int(codes.size),
                     "mismatches": int(bad.sum()),
                     "nan_codes_not_nan_on_gpu": int((nan & ~got_nan).sum()),
                     "first": [f"{explain_code(c, fmt)}: GPU 0x{int(g):x}, emulator 0x{int(w):x}"
                               for c, g, w in zip(codes[bad][:5], got[bad][:5], want[bad][:5])]})
    return rows


def _emulate_op(op: str, fmt: FloatFormat, *codes: np.ndarray) -> np.ndarray:
    """lowprec.arith's result codes for operand codes."""
    base = op.removesuffix("_rn")
    fn = getattr(arith, base)
    with np.errstate(all="ignore"):  # codes in, codes out: NaN payloads survive
        r = np.asarray(fn(*codes, fmt, mode="rne", codes=True))
    return r.astype(fmt.code_dtype)


def _arith_section(tables: dict, quick: bool, rng: np.random.Generator, log: Log) -> dict:
    import cupy

    from .gpu import _runtime as rt

    sweeps, samples = [], []
    for fname in ARITH_FORMATS:
        fmt = get_format(fname)
        table = tables["f64_" + fname]
        lo, hi = table.lo_hi()
        is_nan = _is_nan_codes(fmt)
        for op in SWEEP_OPS:
            seed = 0x5EED if op == "fma" else 0
            total = (1 << (26 if quick else 30)) if op == "fma" else 1 << 32
            chunk = min(total, 1 << 30)
            counters = np.zeros(5, dtype=np.uint64)
            keys = []
            t0 = time.perf_counter()
            for start in range(0, total, chunk):
                c, first = rt.sweep_arith(fname, op, lo, hi, is_nan, start, chunk, seed, cap=256)
                counters += c
                keys.append(first)
            cupy.cuda.Device().synchronize()
            secs = time.perf_counter() - t0
            key = np.concatenate(keys)[:1024]
            a = ((key >> np.uint64(16)) & np.uint64(0xFFFF)).astype(np.uint16)
            b = (key & np.uint64(0xFFFF)).astype(np.uint16)
            c3 = ((key >> np.uint64(32)) & np.uint64(0xFFFF)).astype(np.uint16)
            got = (key >> np.uint64(48)).astype(np.uint16)
            operands = (a, b, c3) if op == "fma" else (a, b)
            first = [", ".join(explain_code(o[i], fmt) for o in operands)
                     + f" -> GPU {explain_code(got[i], fmt)}" for i in range(min(5, key.size))]
            row = {"format": fname, "op": op, "cuda": ARITH_OPS[op][1],
                   "inputs": int(counters[0]), "exhaustive": op != "fma",
                   "mismatches": int(counters[1]), "gpu_larger": int(counters[3]),
                   "recorded": int(key.size), "first": first, "seconds": round(secs, 3)}
            if key.size:
                want = _emulate_op(op, fmt, *operands)
                row["recorded_confirmed_by_lowprec_arith"] = int((want != got).sum())
                row["ulp_histogram_of_recorded"] = _histogram(got, want, fmt)
            sweeps.append(row)
            log(f"  sweep {fname} {op}: {row['mismatches']} mismatches in {row['inputs']} "
                f"({secs:.2f} s)")
        # Random operands against lowprec.arith itself; sqrt: every input.
        n = 1 << (14 if quick else 18)  # lowprec.arith runs on the CPU
        for op, (arity, cuda_fn) in ARITH_OPS.items():
            ops: tuple[np.ndarray, ...]
            if arity == 1:
                ops = (np.arange(1 << 16, dtype=np.uint16),)
            else:
                ops = tuple(rng.integers(0, 1 << 16, size=n, dtype=np.uint16) for _ in range(arity))
            got = cupy.asnumpy(rt.arith(op, fname, *ops))
            row = {"format": fname, "op": op, "cuda": cuda_fn, "inputs": int(got.size)}
            if arity == 1:  # sqrt in double then rounding once is correctly rounded (53 >= 2p+2)
                with np.errstate(invalid="ignore"):
                    want = encode(np.sqrt(decode(ops[0], fmt).astype(np.float64)), fmt, "rne")
                isnan = _is_nan_codes(fmt).astype(bool)
                bad = (got != want) & ~(isnan[got] & isnan[want])
                row["mismatches_vs_double_reference"] = int(bad.sum())
                row["ulp_histogram_vs_double_reference"] = _histogram(got[bad], want[bad], fmt)
            want = _emulate_op(op, fmt, *ops)
            isnan = _is_nan_codes(fmt).astype(bool)
            bad = (got != want) & ~(isnan[got] & isnan[want])
            row["mismatches_vs_lowprec_arith"] = int(bad.sum())
            row["ulp_histogram"] = _histogram(got[bad], want[bad], fmt)
            row["first"] = [", ".join(explain_code(o[i], fmt) for o in ops)
                            + f" -> GPU {explain_code(got[i], fmt)}, lowprec.arith "
                            f"{explain_code(want[i], fmt)}"
                            for i in np.flatnonzero(bad)[:5]]
            samples.append(row)
    return {"sweeps": sweeps, "samples": samples}


# GEMM: exact products, partial sums kept as integers (values * 2**(2s)).
def _gemm_operands(fmt: FloatFormat, shape: tuple[int, int], rng: np.random.Generator):
    """Random codes with exponents in [-6, 3] (and some zeros): every value * 2**s is an integer."""
    m = fmt.mantissa_bits
    e = rng.integers(-6, 4, size=shape)
    codes = ((rng.integers(0, 2, size=shape) << (fmt.width - 1)) | ((e + fmt.bias) << m)
             | rng.integers(0, 1 << m, size=shape))
    codes[rng.random(shape) < 0.1] = 0
    codes = codes.astype(fmt.code_dtype)
    s = 6 + m
    ints = np.rint(decode(codes, fmt).astype(np.float64) * 2.0 ** s).astype(np.int64)
    return codes, ints, s


def _gemm_models(a_int, b_int, scale: int, chunks, precisions, modes):
    """Outputs of each model ``acc = round_p(acc + exact sum of the next chunk of k)``."""
    k = a_int.shape[1]
    out = {}
    f = 2.0 ** (-2 * scale)
    for chunk in dict.fromkeys(min(c, k) for c in chunks):
        parts = [a_int[:, i:i + chunk] @ b_int[i:i + chunk, :] for i in range(0, k, chunk)]
        for p in precisions:
            acc_fmt = get_format("fp32") if p == 24 else custom_format(8, p - 1)
            for mode in modes:
                acc = np.zeros(parts[0].shape, dtype=np.float64)
                for part in parts:
                    acc = np.asarray(round_to(acc + part * f, acc_fmt, mode), dtype=np.float64)
                out[f"chunk{chunk}_p{p}_{mode}"] = acc.astype(np.float32)
    return out


def _arith_gemm_models(a_vals: np.ndarray, b_vals: np.ndarray, fmt: str) -> dict:
    """Outputs of every accumulation model of ``lowprec.matmul`` for these operands.

    A model that cannot run on them (a ValueError: say, FP8 inputs for a chip without
    FP8) is recorded with its error text instead of outputs, so the report says why it
    is missing.
    """
    out: dict = {}
    for name in list_models():
        try:
            res = lp_matmul(a_vals, b_vals, inputs=fmt, accumulate="fp32", model=name)
        except ValueError as exc:
            out[f"lowprec.matmul:{name}"] = f"not run: {exc}"
            continue
        out[f"lowprec.matmul:{name}"] = np.asarray(res).astype(np.float32)
    return out


def _gemm_section(quick: bool, rng: np.random.Generator, log: Log) -> list[dict]:
    import cupy

    from .gpu import _runtime as rt

    shapes = [(16, 8, 32), (64, 64, 256)] + ([] if quick else [(128, 128, 1024)])
    rows = []
    runs = [(name, "cublas") for name in ("fp16", "bf16")]
    runs += [(name, eng) for name in GEMM_FP8_KERNELS for eng in ("mma", "wgmma")]
    for name, engine in runs:
        fmt = get_format(name)
        for (m, n, k) in shapes:
            a, ai, s = _gemm_operands(fmt, (m, k), rng)
            b, bi, _ = _gemm_operands(fmt, (k, n), rng)
            kernel = {"cublas": "cublasGemmEx", "mma": "mma.sync m16n8k32",
                      "wgmma": "wgmma m64n8k32 (experimental)"}[engine]
            try:
                if engine == "cublas":
                    got = cupy.asnumpy(rt.matmul(a, b, name))
                else:
                    got = cupy.asnumpy(rt.matmul(a, b, name, engine=engine))
            except Exception as exc:  # noqa: BLE001 -- e.g. wgmma on a non-Hopper GPU
                rows.append({"format": name, "shape": [m, n, k], "kernel": kernel,
                             "error": f"{type(exc).__name__}: {exc}"[:300]})
                log(f"  gemm {name} {kernel}: {type(exc).__name__}")
                continue
            chunks = [k, 32, 16, 8, 4]
            models = _gemm_models(ai, bi, s, chunks, (24, 23, 22, 21, 20, 16, 13), ("rne", "rtz"))
            emulated = _arith_gemm_models(decode(a, fmt), decode(b, fmt), name)
            not_run = {k: v for k, v in emulated.items() if isinstance(v, str)}
            models.update({k: v for k, v in emulated.items() if not isinstance(v, str)})
            match = {mname: int((v.view(np.uint32) == got.view(np.uint32)).sum())
                     for mname, v in models.items()}
            best = max(match, key=lambda mname: match[mname])
            exact = models.get(f"chunk{k}_p24_rne")
            row: dict[str, Any] = {"format": name, "shape": [m, n, k], "outputs": m * n,
                                   "kernel": kernel,
                   "best_model": best, "best_matches": match[best],
                   "matches_exact_then_round_once": match.get(f"chunk{k}_p24_rne"),
                   "models_matching_every_output": [k for k, v in match.items() if v == m * n][:6],
                   "all_models": dict(sorted(match.items(), key=lambda kv: -kv[1])[:8]),
                   "models_not_run": not_run,
                   "behaves_like": gemm_behaviour(match, m * n)}
            if exact is not None:
                d = np.abs(got.astype(np.float64) - exact.astype(np.float64))
                row["max_abs_diff_vs_exact"] = float(d.max())
            rows.append(row)
            log(f"  gemm {name} {kernel} {m}x{n}x{k}: best {best} matches {match[best]}/{m * n}")
        if name == "fp16" and engine == "cublas":  # cupy.matmul itself (fp16 out)
            a, ai, s = _gemm_operands(fmt, (64, 256), rng)
            b, bi, _ = _gemm_operands(fmt, (256, 64), rng)
            got16 = cupy.asnumpy(rt.matmul(a, b, name, out="float16")).view(np.uint16)
            models = _gemm_models(ai, bi, s, [256, 32, 16, 8], (24,), ("rne", "rtz"))
            match = {mn: int((encode(v, "fp16", "rne") == got16).sum()) for mn, v in models.items()}
            best = max(match, key=lambda mname: match[mname])
            fp16_row: dict[str, Any] = {
                "format": "fp16 (cupy.matmul, fp16 out)", "shape": [64, 64, 256],
                "outputs": 64 * 64, "kernel": "cupy.matmul",
                "best_model": best + " then rne to fp16", "best_matches": match[best],
                "all_models": match}
            rows.append(fp16_row)
    return rows


# ------------------------------------------------------------------------ driver
def run(*, gpu: bool = False, quick: bool = False, log: Log = print, seed: int = 0) -> dict:
    """Run the validation and return the report (a JSON-ready dict).

    ``gpu=True`` needs :func:`lowprec.gpu.available`; it raises
    :class:`lowprec.gpu.GPUUnavailableError` with the reason otherwise.
    """
    from . import __version__
    from .gpu import _runtime as rt

    if gpu:
        rt.require()
    rng = np.random.default_rng(seed)
    report: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "lowprec_version": __version__, "python": platform.python_version(),
        "numpy": np.__version__, "quick": quick, "gpu": gpu,
    }
    try:
        import ml_dtypes
        report["ml_dtypes"] = ml_dtypes.__version__
    except ImportError:
        pass
    t0 = time.perf_counter()
    log("emulator step tables (what the GPU sweeps compare against):")
    report["tables"], tables = tables_section(quick, rng, log)
    log("emulator against ml_dtypes:")
    report["ml_dtypes_check"] = ml_dtypes_section(quick, rng, log)
    if gpu:
        report["device"] = rt.device_info()
        log(f"GPU: {report['device']['name']}")
        log("float32 conversions, all 2**32 inputs:")
        report["conversion_sweeps"] = [
            _conversion_sweep(c, tables[c.name], quick, log)
            for c in CONVERSIONS.values() if c.source == "float32"]
        log("conversions on samples (elementwise kernels, float64 sources):")
        n = 1 << (16 if quick else 20)
        report["conversion_samples"] = [_sample_compare(c, n, rng) for c in CONVERSIONS.values()]
        report["back_conversions"] = _back_compare()
        log("fp16/bf16 arithmetic:")
        report["arithmetic"] = _arith_section(tables, quick, rng, log)
        log("GEMMs:")
        report["gemm"] = _gemm_section(quick, rng, log)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    return report
