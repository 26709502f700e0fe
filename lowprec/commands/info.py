"""``lowprec info [FORMAT ...]``: the table of formats, or everything about one format."""

from __future__ import annotations

import argparse

import numpy as np

from ..formats import FloatFormat, get_format, list_formats, reference_dtype_name
from ..rounding import decode
from ._common import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "info", help="table of formats, or all about one format",
        description="Without FORMAT: a table of every format lowprec knows (bits, range, "
        "precision, infinities, NaN encoding). With one FORMAT: its layout, limits, storage "
        "and, for 6 bits or fewer, every code and value. Format names accept aliases "
        "(float16, bfloat16, e4m3, e5m2, ...).",
        examples=["lowprec info", "lowprec info fp8_e4m3", "lowprec info fp16 bf16 e5m2"])
    p.add_argument("formats", nargs="*", metavar="FORMAT", help="formats to show (default: all)")
    p.set_defaults(func=run)


def _fmt_value(v: float) -> str:
    return f"{v:.6g}"


def run(args: argparse.Namespace) -> int:
    """Table of formats: bits, range, precision; one format: all about it."""
    fmts = [get_format(n) for n in args.formats] if args.formats else list_formats()
    if len(args.formats) == 1:
        print(format_detail(fmts[0]))
        return 0
    header = ("format", "bits", "E", "M", "bias", "max", "min normal", "min subnormal",
              "eps", "binades", "inf", "NaN")
    rows = [header]
    for f in fmts:
        rows.append((
            f.name, str(f.width), str(f.exponent_bits), str(f.mantissa_bits), str(f.bias),
            _fmt_value(f.max), _fmt_value(f.smallest_normal),
            _fmt_value(f.smallest_subnormal) if f.has_subnormals else "-",
            _fmt_value(f.eps), f"{f.dynamic_range_binades:.1f}",
            "yes" if f.has_inf else "no", f.nan,
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for k, r in enumerate(rows):
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    if not args.formats:
        print("\nNaN encodings: ieee = all-ones exponent; max = only S.11..1 (OCP 'fn'); "
              "negzero = the -0 code (fnuz); none = no NaN.")
    return 0


_PACKED = {4: "2 per byte", 6: "4 per 3 bytes"}


def format_detail(f: FloatFormat) -> str:
    """Everything about one format, for ``lowprec info FORMAT``."""
    sign = "1 sign bit, " if f.signed else "no sign bit, "
    nan = {"ieee": "exponent all ones, mantissa non-zero (IEEE)",
           "max": "only the all-ones magnitude S.1...1 (OCP 'fn')",
           "negzero": "only the code of -0, 0x" + format(f.sign_mask, "x") + " ('fnuz')",
           "none": "none"}[f.nan]
    lines = [
        f"{f.name}: {f.description}" if f.description else f.name,
        (f"  layout           {f.width} bits: {sign}{f.exponent_bits} exponent, "
         f"{f.mantissa_bits} mantissa (precision {f.precision} bit"
         f"{'s' if f.precision > 1 else ''})"),
        f"  exponent bias    {f.bias}  (emin {f.emin}, emax {f.emax})",
        f"  largest          {f.max!r}",
        f"  smallest normal  {f.smallest_normal!r}",
        f"  smallest > 0     {f.smallest_subnormal!r}"
        + ("  (subnormal)" if f.has_subnormals else "  (no subnormals, no zero)"),
        f"  epsilon          {f.eps!r}  (unit roundoff {f.unit_roundoff!r})",
        f"  finite values    {f.num_finite:,}  ({f.dynamic_range_binades:.1f} binades)",
        f"  infinity         {'yes' if f.has_inf else 'no'}",
        f"  NaN              {nan}",
        f"  negative zero    {'yes' if f.has_negative_zero else 'no'}",
        f"  storage          {f.code_dtype.name} codes" + (
            f"; packed {_PACKED.get(f.width, f'{f.width} bits each')} (lowprec.pack)"
            if f.width < 8 else ""),
    ]
    ref = reference_dtype_name(f)  # the name alone: info does not import ml_dtypes
    if ref is not None:
        lines.append(f"  same as          numpy/ml_dtypes {ref}")
    if f.width <= 6:  # small enough to list: 8 codes a line
        values = decode(np.arange(1 << f.width), f)
        cells = [f"{c:#04x}={v:<7g}" for c, v in enumerate(values)]
        for k in range(0, len(cells), 8):
            lines.append(("  codes            " if k == 0 else " " * 19)
                         + " ".join(cells[k:k + 8]).rstrip())
    return "\n".join(lines)
