"""The readable side of ``lowprec.validate``: codes explained bit by bit, ulp distances
and histograms, and the Markdown and JSON report files.

>>> explain_code(0x3C00, "fp16")
'0x3c00 = 0|01111|0000000000 = 1.0'
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from .formats import FloatFormat, get_format
from .rounding import decode


def explain_code(code: int, fmt: FloatFormat | str) -> str:
    """``0x3c00 = 0|01111|0000000000 = 1.0``: hex, the fields, and the value."""
    fmt = get_format(fmt)
    code = int(code)
    m = fmt.mantissa_bits
    e = fmt.exponent_bits
    digits = (fmt.width + 3) // 4
    mant = code & ((1 << m) - 1)
    exp = (code >> m) & ((1 << e) - 1)
    fields = f"{exp:0{e}b}|{mant:0{m}b}" if m else f"{exp:0{e}b}"
    if fmt.signed:
        fields = f"{code >> (fmt.width - 1)}|" + fields
    value = float(decode(np.array([code], dtype=fmt.code_dtype), fmt)[0])
    return f"0x{code:0{digits}x} = {fields} = {value!r}"


def _ordinal(codes: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Integers that order codes like their values (adjacent values differ by 1)."""
    c = codes.astype(np.int64)
    if not fmt.signed:
        return c
    mag = c & (fmt.sign_mask - 1)
    return np.where(c & fmt.sign_mask, -mag, mag)


def ulp_distance(got: np.ndarray, want: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Signed distance in units in the last place (code steps) from ``want`` to ``got``."""
    return _ordinal(np.asarray(got), fmt) - _ordinal(np.asarray(want), fmt)


def _is_nan_codes(fmt: FloatFormat) -> np.ndarray:
    codes = np.arange(1 << fmt.width, dtype=np.uint64).astype(fmt.code_dtype)
    with np.errstate(invalid="ignore"):
        return np.isnan(decode(codes, fmt)).astype(np.uint8)


def _histogram(got: np.ndarray, want: np.ndarray, fmt: FloatFormat) -> dict[str, int]:
    """Mismatches by ulp distance; NaN-involving ones counted apart."""
    if got.size == 0:
        return {}
    isnan = _is_nan_codes(fmt)
    top = isnan.size - 1
    nan = (isnan[np.minimum(got.astype(np.int64), top)]
           | isnan[np.minimum(want.astype(np.int64), top)]).astype(bool)
    d = ulp_distance(got[~nan], want[~nan], fmt)
    hist = Counter(f"{int(v):+d}" if abs(v) <= 4 else ("> +4" if v > 0 else "< -4") for v in d)
    if nan.any():
        hist["NaN involved"] = int(nan.sum())
    return dict(sorted(hist.items()))



def _md_table(rows: list[dict], cols: list[str]) -> list[str]:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(str(r.get(c, "")).replace("|", "\\|") for c in cols) + " |")
    return out


def to_markdown(report: dict) -> str:
    """The report as Markdown (tables of counts, then the first mismatches explained)."""
    L = ["# lowprec validation report", ""]
    dev = report.get("device")
    L.append(f"Date: {report['date']}; lowprec {report['lowprec_version']}, numpy "
             f"{report['numpy']}, ml_dtypes {report.get('ml_dtypes', '-')}; "
             f"{'quick' if report['quick'] else 'full'} run, {report['seconds']} s.")
    if dev:
        L.append(f"GPU: {dev['name']} (sm_{dev['compute_capability']}), driver CUDA "
                 f"{dev['driver_cuda_version']}, runtime CUDA {dev['runtime_cuda_version']}, "
                 f"CuPy {dev['cupy_version']}.")
    else:
        L.append("No GPU part was run: emulator-side checks only.")
    L += ["", "## Emulator step tables (checked against the emulator)", ""]
    L += _md_table(report["tables"]["rows"], ["name", "steps", "inputs", "mismatches"])
    L += ["", "## Emulator against ml_dtypes (round to nearest even)", ""]
    L += _md_table(report["ml_dtypes_check"]["rows"],
                   ["format", "inputs", "mismatches", "nan_bit_differences"])
    for key, title, cols in (
        ("conversion_sweeps", "float32 conversions, every input",
         ["name", "cuda", "inputs", "summary", "gpu_larger", "recorded_confirmed_by_emulator",
          "ulp_histogram_of_recorded", "seconds"]),
        ("conversion_samples", "Conversions on samples (elementwise kernels)",
         ["name", "cuda", "inputs", "summary", "ulp_histogram", "behaves_like"]),
        ("back_conversions", "Codes to a wider format (every code)",
         ["name", "cuda", "codes", "summary", "nan_codes_not_nan_on_gpu"]),
        ("gemm", "lowprec.gpu GEMM kernels: the model that reproduces them (outputs bit for bit)",
         ["format", "gemm", "shape", "outputs", "behaves_like", "models_matching_every_output",
          "error"]),
        ("library_gemm", "Library GEMMs users call: the model that reproduces them",
         ["format", "gemm", "output", "shape", "outputs", "behaves_like",
          "models_matching_every_output", "skipped"]),
    ):
        if key in report:
            L += ["", f"## {title}", ""] + _md_table(report[key], cols)
    if "arithmetic" in report:
        ar = report["arithmetic"]
        L += ["", "## fp16/bf16 arithmetic on the device (exact reference, every pair)", ""]
        L += _md_table(ar["sweeps"], ["format", "op", "cuda", "inputs", "exhaustive",
                                      "summary", "gpu_larger", "ulp_histogram_of_recorded",
                                      "seconds"])
        L += ["", "## fp16/bf16 arithmetic against lowprec.arith", ""]
        L += _md_table(ar["samples"], ["format", "op", "cuda", "inputs",
                                       "mismatches_vs_lowprec_arith", "ulp_histogram",
                                       "mismatches_vs_double_reference"])
    firsts = []
    for key in ("conversion_sweeps", "conversion_samples", "back_conversions"):
        for r in report.get(key, []):
            if r.get("first"):
                firsts.append(f"- **{key} {r['name']}**: " + "; ".join(r["first"][:3]))
    for r in report.get("arithmetic", {}).get("sweeps", []):
        if r.get("first"):
            firsts.append(f"- **{r['format']} {r['op']}**: " + "; ".join(r["first"][:3]))
    if firsts:
        L += ["", "## First mismatches, bits explained", ""] + firsts
    return "\n".join(L) + "\n"


def write_report(report: dict, out_dir: Path | str, stem: str = "validation") -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.md`` into ``out_dir``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    j, m = out / f"{stem}.json", out / f"{stem}.md"
    j.write_text(json.dumps(report, indent=1, default=str) + "\n")
    m.write_text(to_markdown(report))
    return j, m
