"""The ``lowprec`` command line: ``main()`` and the list of sub-commands.

Each sub-command lives in its own module ``lowprec/commands/<name>.py`` with
``register(sub)`` (its parser) and ``run(args) -> int`` (its work). To add one, write
that module and add it to `COMMANDS` below.

Exit statuses (see docs/cli.md): 0 done, 1 the work failed, 2 bad usage or a bad
argument, 3 no usable GPU for ``--gpu``, 130 interrupted. No traceback reaches the user
unless ``--debug`` asks for it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .commands import demo, explain, explore, figures, grade, info, train, tutorials, validate

__all__ = ["build_parser", "main"]

#: The sub-commands, in the order ``lowprec --help`` lists them.
COMMANDS = [info, explain, demo, train, figures, validate, tutorials, grade, explore]


def build_parser() -> argparse.ArgumentParser:
    """The ``lowprec`` parser with every sub-command of `COMMANDS` registered."""
    parser = argparse.ArgumentParser(
        prog="lowprec",
        description="Low-precision floating point: emulate, explain, train, validate.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lowprec`` with ``argv`` (default: the command line); returns the exit status."""
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
