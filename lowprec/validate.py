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

from . import _validate_gemm as G
from . import arith
from ._validate_report import (
    _histogram,
    _is_nan_codes,
    explain_code,
    to_markdown,
    ulp_distance,
    write_report,
)
from .formats import FloatFormat, get_format, reference_dtype
from .gpu._catalog import (
    ARITH_FORMATS,
    ARITH_OPS,
    BACK_CONVERSIONS,
    CONVERSIONS,
    SWEEP_OPS,
    Conversion,
)
from .gpu._tables import StepTable, build_table, check_table
from .identify import Identification, identify_conversion, identify_dot
from .rounding import decode, encode
from .tensorcores import ARCHITECTURES

__all__ = ["Identification", "conversion_behaviour", "difference_summary", "explain_code",
           "gemm_behaviour", "identify_conversion", "identify_dot", "nan_expectations", "run",
           "sample_accounting", "to_markdown", "ulp_distance", "write_report"]

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
def nan_expectations(conv: Conversion) -> tuple[np.ndarray, np.ndarray]:
    """The codes a sweep expects for NaN inputs: the hardware rule's per (sign << 1 |
    fraction bit 21) (4 codes) and lowprec's default per sign (2 codes)."""
    u = np.array([(s << 31) | 0x7FC00000 | (b << 21) for s in (0, 1) for b in (0, 1)],
                 dtype=np.uint32)
    x = u.view(np.float32)
    hw = np.asarray(conv.emulate(x, hardware_nan=True)).astype(np.uint32)
    default = np.asarray(conv.emulate(x[::2])).astype(np.uint32)
    return hw, default


def difference_summary(value_mismatches: int, nan_differences: int, rule: str,
                       nan_outside_rule: int = 0) -> str:
    """'N value mismatches (must be 0), M NaN-encoding differences (explained: ...)'."""
    from .nan_rules import NAN_RULES

    text = (f"{value_mismatches} value mismatches (must be 0), {nan_differences} NaN-encoding "
            f"differences (explained: the GPU's NaN rule '{rule}', "
            f"{NAN_RULES.get(rule, rule)}; lowprec.encode(..., nan='{rule}') gives it)")
    if nan_outside_rule:
        text += f", {nan_outside_rule} NaN codes outside that rule (must be 0)"
    return text


def _conversion_sweep(conv: Conversion, table: StepTable, quick: bool, log: Log) -> dict:
    from .gpu import _runtime as rt

    fmt = conv.format
    lo, hi = table.lo_hi()
    nan_hw, nan_default = nan_expectations(conv)
    is_nan = _is_nan_codes(fmt)
    total = 1 << 32
    chunk = 1 << 30
    counters = np.zeros(6, dtype=np.uint64)
    keys: list[np.ndarray] = []
    t0 = time.perf_counter()
    for start in range(0, total, chunk):
        c, first = rt.sweep_conversion(conv, lo, hi, nan_hw, is_nan, start, chunk, cap=256,
                                       nan_default=nan_default)
        counters[:len(c)] += c
        keys.append(first)
    import cupy
    cupy.cuda.Device().synchronize()
    secs = time.perf_counter() - t0
    key = np.concatenate(keys)[:1024]
    u = (key & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    got = (key >> np.uint64(32)).astype(np.int64)
    want = (conv.emulate(u.view(np.float32), hardware_nan=True).astype(np.int64)
            if u.size else got)
    confirmed = int((got != want).sum())
    first = [f"x=0x{int(a):08x} ({float(a.view(np.float32))!r}): GPU {explain_code(g, fmt)}; "
             f"emulator {explain_code(w, fmt)}" for a, g, w in zip(u[:5], got[:5], want[:5])]
    value = int(counters[1] - counters[2])
    summary = difference_summary(value, int(counters[5]), conv.nan_rule, int(counters[2]))
    res = {"name": conv.name, "cuda": conv.cuda, "inputs": int(counters[0]),
           "mismatches": int(counters[1]), "value_mismatches": value,
           "mismatches_not_nan_bits": value,
           "nan_rule": conv.nan_rule, "nan_rule_source": conv.nan_source,
           "nan_encoding_differences": int(counters[5]),
           "nan_codes_outside_rule": int(counters[2]),
           "summary": summary,
           "gpu_larger": int(counters[3]), "recorded": int(u.size),
           "recorded_confirmed_by_emulator": confirmed,
           "ulp_histogram_of_recorded": _histogram(got, want, fmt),
           "first": first, "seconds": round(secs, 3)}
    log(f"  sweep {conv.name}: {summary.split(' (explained')[0]} in {int(counters[0])} "
        f"inputs ({secs:.2f} s)")
    return res


def _sample_compare(conv: Conversion, n: int, rng: np.random.Generator) -> dict:
    """Elementwise kernel on random and near-midpoint inputs against the emulator."""
    import cupy

    from .gpu import _runtime as rt

    dt = np.float32 if conv.source == "float32" else np.float64
    x = _f32_inputs_near(conv.format, n, rng, dt)
    got = cupy.asnumpy(rt.convert_bits(conv, x.view(np.uint32 if dt == np.float32 else np.uint64)))
    return sample_accounting(conv, x, got)


def sample_accounting(conv: Conversion, x: np.ndarray, got: np.ndarray) -> dict:
    """A sample row: GPU codes ``got`` for inputs ``x`` against the emulator, value
    mismatches and NaN-encoding differences counted apart."""
    fmt = conv.format
    want = conv.emulate(x, hardware_nan=True)
    default = conv.emulate(x)
    isnan = _is_nan_codes(fmt).astype(bool)
    both_nan = isnan[got.astype(np.int64)] & isnan[want.astype(np.int64)]
    bad = (got != want) & ~both_nan
    outside = int(((got != want) & both_nan).sum())
    explained = int(((got == want) & (want != default)).sum())
    first = [f"x={float(v)!r}: GPU {explain_code(g, fmt)}; emulator {explain_code(w, fmt)}"
             for v, g, w in zip(x[bad][:5], got[bad][:5], want[bad][:5])]
    return {"name": conv.name, "cuda": conv.cuda, "inputs": int(x.size),
            "mismatches": int(bad.sum()) + outside, "value_mismatches": int(bad.sum()),
            "nan_rule": conv.nan_rule, "nan_encoding_differences": explained,
            "nan_codes_outside_rule": outside,
            "summary": difference_summary(int(bad.sum()), explained, conv.nan_rule, outside),
            "behaves_like": conversion_behaviour(x, got, fmt),
            "ulp_histogram": _histogram(got[bad], want[bad], fmt), "first": first}


def conversion_behaviour(x: np.ndarray, got: np.ndarray, fmt: FloatFormat) -> str:
    """'rne, saturate=False, ... on N/N inputs; NaN: canonical on M/M NaN inputs': the
    lowprec semantics of a GPU conversion's codes ``got`` for inputs ``x``
    (:func:`identify_conversion`, then the NaN rule of :mod:`lowprec.nan_rules` that
    gives the GPU's codes for the NaN inputs)."""
    from .nan_rules import NAN_RULES, nan_codes

    x = np.asarray(x)
    nan = np.isnan(x)
    ident = identify_conversion(x[~nan], got[~nan].astype(np.int64), fmt)
    sem = ", ".join(f"{k}={v}" for k, v in ident.best.items())
    text = f"{sem} on {round(ident.explained * ident.n)}/{ident.n} inputs"
    if nan.any():
        best, hits = "none", -1
        for rule in NAN_RULES:
            try:
                k = int((nan_codes(x[nan], fmt, rule) == got[nan]).sum())
            except ValueError:
                continue
            if k > hits:
                best, hits = rule, k
        text += f"; NaN: {best} on {hits}/{int(nan.sum())} NaN inputs"
    return text


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
            got_nan = np.isnan(got.view(wide_dt).astype(np.float64))
        nan = np.isnan(vals)
        bad = (got != want) & ~nan
        nan_diff = int((nan & got_nan & (got != want)).sum())
        rows.append({"name": b.name, "cuda": b.cuda, "codes": int(codes.size),
                     "mismatches": int(bad.sum()),
                     "summary": f"{int(bad.sum())} value mismatches (must be 0), {nan_diff} "
                                "NaN-encoding differences (explained: a NaN code widens to a "
                                "NaN; IEEE 754 leaves its payload open)",
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
                   "summary": f"{int(counters[1])} value mismatches (must be 0); NaN results: "
                              "any NaN code accepted (the sweep does not compare NaN "
                              "encodings; the sample rows compare them with lowprec.arith)",
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


def _gemm_operands(fmt: FloatFormat, shape: tuple[int, int], rng: np.random.Generator):
    """Random codes (:func:`lowprec._validate_gemm.operands`), their values times
    ``2**s`` as exact integers, and ``s``."""
    codes = G.operands(fmt, shape, rng)
    s = 6 + fmt.mantissa_bits
    ints = np.rint(decode(codes, fmt).astype(np.float64) * 2.0 ** s).astype(np.int64)
    return codes, ints, s


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
        log("GEMMs (lowprec.gpu kernels):")
        report["gemm"] = G.kernel_section(quick, rng, log)
        log("library GEMMs (cupy.matmul, torch.matmul, torch._scaled_mm):")
        report["library_gemm"] = G.library_section(quick, rng, log)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    return report
