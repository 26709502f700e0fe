"""``lowprec figures [NAME ...] [--out DIR]``: regenerate the PNGs of figures/ from code."""

from __future__ import annotations

import argparse

from ._common import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "figures", help="regenerate every PNG in figures/ from code",
        description="Draw the figures of lowprec's documentation from code (lowprec.figures): "
        "all of them, or the ones named.",
        examples=["lowprec figures --list", "lowprec figures --out figs/",
                  "lowprec figures stochastic_rounding --out figs/"])
    p.add_argument("--out", default="figures", help="folder for the PNGs")
    p.add_argument("names", nargs="*", metavar="FIGURE", help="figures to draw (default: all)")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Regenerate the PNGs of figures/ (lowprec.figures)."""
    from .. import figures

    return figures.run(args)
