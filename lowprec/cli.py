"""The ``lowprec`` command line. Each subcommand is a small function below."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from .commands import explore, grade, tutorials
from .explain import explain
from .formats import FloatFormat, get_format, list_formats, reference_dtype
from .rounding import MODES, check_mode, decode


def _fmt_value(v: float) -> str:
    return f"{v:.6g}"


def cmd_info(args: argparse.Namespace) -> int:
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


def cmd_figures(args: argparse.Namespace) -> int:
    """Regenerate the PNGs of figures/ (lowprec.figures)."""
    from .figures import run

    return run(args)


def cmd_demo(args: argparse.Namespace) -> int:
    """Train the standard precision presets side by side (lowprec.train.demo)."""
    from .train.demo import DEMO_POLICIES, run_demo

    policies = tuple(args.policies.split(",")) if args.policies else DEMO_POLICIES
    run_demo(args.out, policies=policies, task=args.task, steps=args.steps, seed=args.seed,
             figures=not args.no_figures)
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Train one policy on one task and save the run (lowprec.train)."""
    from .train import save_run, train
    from .train.demo import ProgressBar, choose_out_dir, format_table

    bar = ProgressBar()
    bar.start(args.policy)
    knobs = {"grad_exp": args.grad_exp} if args.grad_exp is not None else {}
    run = train(args.policy, args.task, steps=args.steps, seed=args.seed,
                optimizer=args.optimizer, progress=bar, **knobs)
    folder = choose_out_dir(args.out) if args.out else None
    print(format_table({args.policy: run}))
    if folder is not None:
        (folder / ".lowprec-demo").parent.mkdir(parents=True, exist_ok=True)
        (folder / ".lowprec-demo").write_text("written by lowprec train; safe to overwrite\n")
        print(f"results: {save_run(run, folder / args.policy)}")
    return 0


def _add_train_parsers(sub: argparse._SubParsersAction) -> None:
    from .train.data import TASKS
    from .train.policy import POLICIES

    p = sub.add_parser("demo", help="train the precision presets side by side (no arguments "
                       "needed)", description="Train every standard precision preset on the "
                       "same task and seed; print a comparison table and save the runs.")
    p.add_argument("--out", default=None, help="output folder (default: ./lowprec-demo, or a "
                   "fresh name if that folder is someone else's)")
    p.add_argument("--task", default="underflow", choices=list(TASKS))
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--policies", default=None,
                   help=f"comma-separated presets (default: all): {', '.join(POLICIES)}")
    p.add_argument("--no-figures", action="store_true", help="do not draw figures")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("train", help="train one precision policy on one task")
    p.add_argument("--policy", default="fp16-amp", choices=list(POLICIES))
    p.add_argument("--task", default="underflow", choices=list(TASKS))
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    p.add_argument("--grad-exp", type=int, default=None,
                   help="gradient knob k: loss * 2^-k, learning rate * 2^k (SGD)")
    p.add_argument("--out", default=None, help="folder for <out>/<policy>/run.json")
    p.set_defaults(func=cmd_train)


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
    ref = reference_dtype(f)
    if ref is not None:
        lines.append(f"  same as          numpy/ml_dtypes {ref.name}")
    if f.width <= 6:  # small enough to list: 8 codes a line
        values = decode(np.arange(1 << f.width), f)
        cells = [f"{c:#04x}={v:<7g}" for c, v in enumerate(values)]
        for k in range(0, len(cells), 8):
            lines.append(("  codes            " if k == 0 else " " * 19)
                         + " ".join(cells[k:k + 8]).rstrip())
    return "\n".join(lines)


def cmd_explain(args: argparse.Namespace) -> int:
    """How each value rounds to each format."""
    names = [n for group in (args.format or ["fp16,bf16,fp8_e4m3,fp8_e5m2"])
             for n in group.split(",") if n.strip()]
    fmts = [get_format(n) for n in names]  # unknown names fail before any output
    mode = check_mode(args.mode)
    blocks = []
    for value in args.values:
        for f in fmts:
            rng = args.seed if mode == "stochastic" else None
            blocks.append(str(explain(value, f, mode, saturate=args.saturate, rng=rng)))
    print("\n\n".join(blocks))
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
    tutorials.register(sub)
    p = sub.add_parser(
        "explain", help="how a value rounds to a format: bits, neighbours, error",
        description="Round each VALUE to each format and explain the result. A VALUE is "
        "taken exactly as written: 0.1 means 1/10, and fractions like 1/3 work too.")
    p.add_argument("values", nargs="+", metavar="VALUE",
                   help="numbers: 0.1, 3e-5, 1/3, inf, nan (put -- before negative ones)")
    p.add_argument("-f", "--format", action="append", metavar="FORMAT",
                   help="format name(s), repeat or comma-separate "
                   "(default: fp16,bf16,fp8_e4m3,fp8_e5m2)")
    p.add_argument("-m", "--mode", default="rne",
                   help="rounding mode: " + ", ".join(MODES) + " (default rne)")
    p.add_argument("--saturate", action="store_true", help="clamp overflow to +-max")
    p.add_argument("--seed", type=int, default=0, help="seed for --mode stochastic")
    p.set_defaults(func=cmd_explain)
    _add_train_parsers(sub)
    p = sub.add_parser("validate", help="check GPU kernels bit for bit against the emulator")
    p.add_argument("--gpu", action="store_true",
                   help="run the GPU kernels (needs CuPy and an NVIDIA GPU, sm_89+)")
    p.add_argument("--quick", action="store_true", help="smaller samples (a minute or less)")
    p.add_argument("--out", default="validation-report", metavar="DIR",
                   help="directory for validation.json and validation.md")
    p.set_defaults(func=cmd_validate)
    explore.register(sub)
    grade.register(sub)
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
