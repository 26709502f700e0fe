"""``lowprec validate [--gpu]``: GPU kernels against the emulator, bit for bit."""

from __future__ import annotations

import argparse
import sys

from . import identify
from ._common import EXIT_NO_GPU, add_command, add_out_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "validate", help="check GPU kernels bit for bit against the emulator",
        description="Compare lowprec's GPU kernels with the CPU emulator bit for bit and "
        "write validation.json and validation.md. Without --gpu only the emulator-side "
        "checks run. Exit status 3 when --gpu finds no usable GPU or CuPy. 'lowprec "
        "validate identify conversion|dot|gemm' names the semantics behind measured outputs.",
        examples=["lowprec validate --quick --out report/",
                  "lowprec validate --gpu --out report/ --force",
                  "lowprec validate identify dot --help"])
    p.add_argument("--gpu", action="store_true",
                   help="run the GPU kernels (needs CuPy and an NVIDIA GPU, sm_89+)")
    p.add_argument("--quick", action="store_true", help="smaller samples (a minute or less)")
    add_out_dir(p, "validation-report", "validation.json and validation.md")
    p.set_defaults(func=run)
    identify.register(p.add_subparsers(dest="validate_command", metavar="identify"))


def run(args: argparse.Namespace) -> int:
    """Hardware against emulator, bit for bit (emulator-side checks only without --gpu)."""
    from .. import validate
    from .._outdir import prepare_out_dir
    from ..gpu import _runtime

    if args.gpu:
        reason = _runtime.unavailable_reason()
        if reason is not None:
            print(f"lowprec validate: --gpu needs CuPy and an NVIDIA GPU (sm_89+): {reason}",
                  file=sys.stderr)
            return EXIT_NO_GPU
    folder = prepare_out_dir(args.out, force=args.force)
    print(f"lowprec validate: writing into {folder}/", flush=True)
    report = validate.run(gpu=args.gpu, quick=args.quick,
                          log=lambda s: print(s, flush=True))
    json_path, md_path = validate.write_report(report, folder)
    print(f"wrote {json_path} and {md_path}")
    return 0
