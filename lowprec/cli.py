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


def cmd_tutorials(args: argparse.Namespace) -> int:
    """List the tutorials, write student versions, or render notebooks."""
    from . import tutorials

    if args.action == "list":
        for path in tutorials.list_tutorials(args.source):
            print(path)
        return 0
    if args.dir is None:
        print(f"lowprec tutorials {args.action}: give the folder to write into (DIR)",
              file=sys.stderr)
        return 2
    try:
        if args.action == "student":
            written = tutorials.write_student_versions(args.dir, args.source, force=args.force)
        else:
            written = tutorials.render_notebooks(args.dir, args.source, student=args.student,
                                                 execute=not args.no_execute, only=args.only)
    except (FileExistsError, FileNotFoundError, ImportError) as exc:
        print(f"lowprec: error: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


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
    p = sub.add_parser(
        "tutorials", help="list tutorials, write the student version, render notebooks",
        description="Teacher's tools. 'student DIR' writes the tutorials with every solution "
                    "replaced by an exercise stub; 'render DIR' writes executed .ipynb "
                    "notebooks (needs the 'tutorials' extra: jupytext, nbclient, ipykernel).")
    p.add_argument("action", choices=["list", "student", "render"])
    p.add_argument("dir", nargs="?", metavar="DIR", help="folder to write into")
    p.add_argument("--source", metavar="SRC", help="tutorials folder (default: the checkout's)")
    p.add_argument("--force", action="store_true", help="overwrite existing student files")
    p.add_argument("--student", action="store_true", help="render: the student version")
    p.add_argument("--no-execute", action="store_true", help="render: do not run the cells")
    p.add_argument("--only", nargs="+", metavar="NN", help="render: only these tutorials (01 05)")
    p.set_defaults(func=cmd_tutorials)
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
