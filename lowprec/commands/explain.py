"""``lowprec explain VALUE ... [-f FORMAT] [-m MODE]``: how each value rounds to each format."""

from __future__ import annotations

import argparse
import re

from ..explain import explain
from ..formats import get_format
from ..rounding import MODES, check_mode
from ._common import add_command, int_at_least

DEFAULT_FORMATS = "fp16,bf16,fp8_e4m3,fp8_e5m2"


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "explain", help="how a value rounds to a format: bits, neighbours, error",
        description="Round each VALUE to each format and explain the result. A VALUE is "
        "taken exactly as written: 0.1 means 1/10, and fractions like 1/3 work too.",
        examples=["lowprec explain 0.1 -f bf16", "lowprec explain 0.1 1/3 -f fp16,fp8_e4m3 "
                  "-f fp4 --mode rtz", "lowprec explain -3e-5 -1/3 -f e5m2"])
    # argparse takes "-1" for a value but "-3e-5" and "-1/3" for unknown options; teach it
    # every negative number explain reads (its own attribute for this, since Python 3.2)
    p._negative_number_matcher = re.compile(
        r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?(/\d+)?$|^-inf(inity)?$", re.IGNORECASE)
    p.add_argument("values", nargs="+", metavar="VALUE",
                   help="numbers: 0.1, -3e-5, 1/3, -1/3, inf, nan")
    p.add_argument("-f", "--format", action="append", metavar="FORMAT",
                   help=f"format name(s), repeat or comma-separate (default: {DEFAULT_FORMATS})")
    p.add_argument("-m", "--mode", default="rne",
                   help="rounding mode: " + ", ".join(MODES))
    p.add_argument("--saturate", action="store_true", help="clamp overflow to +-max")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="seed for --mode stochastic")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """How each value rounds to each format."""
    names = [n for group in (args.format or [DEFAULT_FORMATS])
             for n in group.split(",") if n.strip()]
    if not names:
        raise ValueError("--format: no format name given (e.g. -f fp16,bf16)")
    fmts = [get_format(n.strip()) for n in names]  # unknown names fail before any output
    mode = check_mode(args.mode)
    blocks = []
    for value in args.values:
        for f in fmts:
            rng = args.seed if mode == "stochastic" else None
            blocks.append(str(explain(value, f, mode, saturate=args.saturate, rng=rng)))
    print("\n\n".join(blocks))
    return 0
