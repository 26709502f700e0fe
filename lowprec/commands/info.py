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
        "precision, infinities, NaN encoding), then the block formats (MX, NVFP4 and its "
        "E2M1 variants: element, block, scale format). With one FORMAT: its layout, limits, storage "
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
        print("\nBlock formats (lowprec.mx, lowprec.nvfp4; scheme names of lowprec.schemes):\n")
        _print_table(block_format_rows())
    return 0


def block_format_rows() -> list[tuple[str, ...]]:
    """The block-scaled formats, one row each: name, element, block, scale, tensor
    scale, bits per value (long rows), where it is defined."""
    from .. import mx
    from ..schemes import BLOCK_VARIANT_KINDS

    rows: list[tuple[str, ...]] = [("name", "element", "block", "block scale", "tensor scale",
                                    "bits/value", "defined by")]
    for m in mx.MX_FORMATS.values():
        rows.append((m.name, "int8 (q/64)" if m.integer else m.element.name, "32", "e8m0",
                     "-", f"{m.element.width + 8 / 32:g}", "OCP MX v1.0"))
    rows.append(("nvfp4", "fp4_e2m1", "16", "ue4m3", "fp32", "4.5",
                 "NVIDIA NVFP4 (Transformer Engine recipe)"))
    source = {"ue4m3": "NVFP4 recipe", "ue5m3": "NVFP4 recipe, UE5M3 scale (PTX ISA 9.4)"}
    for name, (block, scale_format, tensor_scale) in BLOCK_VARIANT_KINDS.items():
        rows.append((name, "fp4_e2m1", str(block), scale_format,
                     "fp32" if tensor_scale else "-", f"{4 + 8 / block:g}",
                     source[scale_format] + ("" if tensor_scale else ", no tensor scale")))
    return rows


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


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
