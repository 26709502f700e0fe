"""The ``lowprec`` command line. Each subcommand is a small function below."""

from __future__ import annotations

import argparse
import sys

from .formats import get_format, list_formats


def _fmt_value(v: float) -> str:
    return f"{v:.6g}"


def cmd_info(args: argparse.Namespace) -> int:
    """Table of formats: bits, range, precision."""
    fmts = [get_format(n) for n in args.formats] if args.formats else list_formats()
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


def cmd_figures(args: argparse.Namespace) -> int:
    """Regenerate the PNGs of figures/ (lowprec.figures)."""
    from .figures import run

    return run(args)


def cmd_validate(args: argparse.Namespace) -> int:
    """Hardware against emulator, bit for bit (emulator-side checks only without --gpu)."""
    from . import validate
    from .gpu import _runtime

    if args.gpu:
        reason = _runtime.unavailable_reason()
        if reason is not None:
            print(f"lowprec validate: --gpu needs CuPy and an NVIDIA GPU (sm_89+): {reason}",
                  file=sys.stderr)
            return 3
    report = validate.run(gpu=args.gpu, quick=args.quick,
                          log=lambda s: print(s, flush=True))
    json_path, md_path = validate.write_report(report, args.out)
    print(f"wrote {json_path} and {md_path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lowprec",
        description="Low-precision floating point: emulate, explain, train, validate.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("info", help="table of formats")
    p.add_argument("formats", nargs="*", metavar="FORMAT", help="formats to show (default: all)")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("figures", help="regenerate every PNG in figures/ from code")
    p.add_argument("--out", default="figures", help="folder for the PNGs (default: figures)")
    p.add_argument("names", nargs="*", metavar="FIGURE", help="figures to draw (default: all)")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    p.set_defaults(func=cmd_figures)
    p = sub.add_parser("validate", help="check GPU kernels bit for bit against the emulator")
    p.add_argument("--gpu", action="store_true",
                   help="run the GPU kernels (needs CuPy and an NVIDIA GPU, sm_89+)")
    p.add_argument("--quick", action="store_true", help="smaller samples (a minute or less)")
    p.add_argument("--out", default="validation-report", metavar="DIR",
                   help="directory for validation.json and validation.md")
    p.set_defaults(func=cmd_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError) as exc:
        print(f"lowprec: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
