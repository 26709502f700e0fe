"""``lowprec validate identify conversion|dot|gemm``: name the semantics behind measured
outputs.

A sub-action of ``lowprec validate``: ``lowprec.commands.validate`` calls
``register(sub)`` with the validate parser's sub-parsers. Inputs are ``.npy``,
``.npz`` or the text layout of ``../shared/tensorcores`` (hexadecimal float32
rows; 32-character bit lines).
"""

from __future__ import annotations

import argparse
import textwrap

import numpy as np

from ._common import HelpFormatter

EPILOG = """examples:
  lowprec validate identify conversion --inputs x.npy --codes codes.npy --format fp8_e4m3
  lowprec validate identify dot --a a_H100_fp16.txt.gz --b b_H100_fp16.txt.gz \\
      --c c_H100_fp32.txt.gz --d d_H100_fp32.txt.gz --inputs fp16
  lowprec validate identify dot --a a.npy --b b.npy --d d.npy --inputs fp8_e4m3 --output fp16
  lowprec validate identify gemm A.npy B.npy D.npy --inputs fp8_e4m3
  lowprec validate identify gemm A.npy B.npy D.npy --c C.npy --inputs fp16 --output fp16 \
      --separating-out sep.npz
"""


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, 88))


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``identify`` (``conversion``, ``dot``, ``gemm``) to ``validate``'s sub-parsers."""
    fmt = HelpFormatter
    p = sub.add_parser("identify", help="which semantics reproduce measured outputs",
                       description=_wrap("Name the semantics of someone's hardware from its "
                       "outputs: the rounding of a conversion, or the tensor-core model of dot "
                       "products."),
                       epilog=EPILOG, formatter_class=fmt)
    isub = p.add_subparsers(dest="identify_what", metavar="WHAT", required=True)
    c = isub.add_parser("conversion", help="float -> format conversions",
                        description=_wrap("Which rounding mode, saturation and subnormal "
                        "handling reproduce CODES = hardware(INPUTS)."), formatter_class=fmt,
                        epilog=EPILOG)
    c.add_argument("--inputs", required=True, metavar="X",
                   help="float32/float64 inputs (.npy, .npz or text)")
    c.add_argument("--codes", required=True, metavar="Y", help="the codes produced (integers)")
    c.add_argument("--format", required=True, metavar="F", help="the target format (fp8_e4m3, ...)")
    c.set_defaults(func=run)
    d = isub.add_parser("dot", help="tensor-core dot products D = A·B + C",
                        description=_wrap("Which GPU architecture model (or tensor_core "
                        "parameters) reproduces the measured D, one dot product per row of A "
                        "and B."),
                        formatter_class=fmt, epilog=EPILOG)
    d.add_argument("--a", required=True, help="(N, K) values of --inputs")
    d.add_argument("--b", required=True, help="(N, K) values of --inputs")
    d.add_argument("--c", default=None, help="(N,) accumulator inputs (default: zero)")
    d.add_argument("--d", required=True, help="(N,) measured outputs")
    d.add_argument("--inputs", required=True, metavar="F",
                   help="input format: fp16, bf16, tf32, fp8_e4m3, fp8_e5m2")
    d.add_argument("--output", default="fp32", choices=["fp32", "fp16"], help="output format")
    d.add_argument("--search", action="store_true",
                   help="also try the grid of tensor_core(...) parameters when a model fits")
    d.set_defaults(func=run)
    g = isub.add_parser("gemm", help="a library's GEMM D = A·B + C of any size",
                        description=_wrap("Which instruction model, promotion interval, "
                        "split-K (factor and order of the partial sums) and dropped K tail "
                        "reproduce the D a library returned for A (M, K) and B (K, N); when "
                        "several explain everything, a small separating input to run through "
                        "the same library call."), formatter_class=fmt, epilog=EPILOG)
    g.add_argument("a", metavar="A", help="(M, K) values of --inputs (.npy, .npz or text)")
    g.add_argument("b", metavar="B", help="(K, N) values of --inputs")
    g.add_argument("d", metavar="D", help="(M, N) the library's outputs")
    g.add_argument("--c", default=None, metavar="C", help="(M, N) FP32 accumulator input "
                   "(default: none)")
    g.add_argument("--inputs", required=True, metavar="F",
                   help="input format: fp16, bf16, tf32, fp8_e4m3, fp8_e5m2, ...")
    g.add_argument("--output", default="fp32", choices=["fp32", "fp16", "bf16"],
                   help="output format")
    g.add_argument("--operand-rounding", default=None, choices=["rne", "rtz"],
                   help="convert A and B to --inputs first (rtz: a TF32 tensor core fed FP32 "
                   "data); default: they must already be values of --inputs")
    g.add_argument("--separating-out", default=None, metavar="FILE.npz",
                   help="write the separating input (a, b, c) and each tied candidate's D")
    g.add_argument("--force", action="store_true", help="overwrite --separating-out")
    g.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the files, identify, print the report; 0 when the best explains every case."""
    from ..identify import identify_conversion, identify_dot, read_array

    if args.identify_what == "gemm":
        return _run_gemm(args, read_array)
    if args.identify_what == "conversion":
        x = read_array(args.inputs)
        codes = read_array(args.codes)
        if codes.dtype.kind == "f":
            if not np.all(np.isfinite(codes)) or np.any(codes != np.round(codes)):
                raise ValueError("--codes must hold integer codes (bit patterns), not values")
            codes = codes.astype(np.int64)
        if x.dtype not in (np.float32, np.float64):
            x = x.astype(np.float64)
        ident = identify_conversion(x, codes, args.format)
    else:
        a, b, d = (read_array(p) for p in (args.a, args.b, args.d))
        c = read_array(args.c) if args.c else None
        ident = identify_dot(a, b, c, d, inputs=args.inputs, output=args.output,
                             search=True if args.search else None)
    print(ident)
    return 0 if ident.explained == 1.0 else 1  # 1: no candidate explains every case


def _run_gemm(args: argparse.Namespace, read_array) -> int:
    from pathlib import Path

    from ..gemm_identify import identify_gemm

    out = Path(args.separating_out) if args.separating_out else None
    if out is not None:
        if out.exists() and not args.force:
            raise ValueError(f"{out} exists; pass --force to overwrite it")
        if not out.name.endswith(".npz"):
            raise ValueError(f"--separating-out must name an .npz file, got {out.name!r}")
        if not out.parent.is_dir():
            raise ValueError(f"--separating-out: no folder {str(out.parent)!r}")
    a, b, d = (read_array(p) for p in (args.a, args.b, args.d))
    c = read_array(args.c) if args.c else None
    ident = identify_gemm(a, b, c, d, inputs=args.inputs, output=args.output,
                          operand_rounding=args.operand_rounding)
    print(ident)
    if out is not None:
        if ident.separating is None:
            print(f"no ties: nothing written to {out}")
        else:
            ident.save_separating(out, force=args.force)
            print(f"separating input written to {out}")
    return 0 if ident.explained == 1.0 else 1  # 1: no candidate explains every output
