"""``lowprec figures [NAME ...] [--out DIR]``: regenerate the PNGs of figures/ from code."""

from __future__ import annotations

import argparse

from ._common import add_command, add_out_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "figures", help="regenerate every PNG in figures/ from code",
        description="Draw the figures of lowprec's documentation from code (lowprec.figures): "
        "all of them, or the ones named. The checkout's own figures/ folder is not empty, so "
        "regenerating it in place needs --force.",
        examples=["lowprec figures --list", "lowprec figures --out figs/",
                  "lowprec figures stochastic_rounding --out figs/",
                  "lowprec figures --force          # redraw figures/ in place"])
    add_out_dir(p, "figures", "the PNGs")
    p.add_argument("names", nargs="*", metavar="FIGURE", help="figures to draw (default: all; "
                   "see --list)")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Regenerate the PNGs of figures/ (lowprec.figures)."""
    from .. import figures

    return figures.run(args)
