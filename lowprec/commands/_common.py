"""What every sub-command shares: exit codes, the help layout, name and number arguments.

A sub-command module ``lowprec/commands/<name>.py`` exposes ``register(sub)``, which
adds its parser (a description, examples in the epilog, defaults shown) and
``set_defaults(func=run)``, and ``run(args) -> int``. It signals bad input by raising
`ValueError` with a one-line message naming the bad argument and what is accepted;
``lowprec.cli.main`` turns that into one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_NO_GPU", "EXIT_OK", "EXIT_USAGE",
    "HelpFormatter", "add_command", "add_out_dir", "int_at_least", "named",
]

#: The shell exit statuses of ``lowprec`` (documented in docs/cli.md).
EXIT_OK = 0  #: the work was done
EXIT_FAILED = 1  #: the work failed (a file could not be read or written, a check failed)
EXIT_USAGE = 2  #: bad usage: an unknown name, a bad number, a folder that is not empty
EXIT_NO_GPU = 3  #: --gpu was asked for, and there is no usable GPU or CuPy
EXIT_INTERRUPTED = 130  #: interrupted with Ctrl-C (128 + SIGINT, as shells report it)


class HelpFormatter(argparse.RawDescriptionHelpFormatter,
                    argparse.ArgumentDefaultsHelpFormatter):
    """Keep the examples' line breaks and show every option's default.

    Defaults that say nothing (``None``, ``False`` of a flag) and help texts that already
    name their default are left alone.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        quiet = action.default is None or action.default is False  # 0 is a default to show
        if quiet or action.default == argparse.SUPPRESS or "default" in text:
            return text
        return super()._get_help_string(action)


def add_command(sub: argparse._SubParsersAction, name: str, *, help: str, description: str,
                examples: Iterable[str]) -> argparse.ArgumentParser:
    """Add sub-command ``name`` with a description and an "examples:" epilog."""
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    return sub.add_parser(name, help=help, formatter_class=HelpFormatter, epilog=epilog,
                          description="\n".join(textwrap.wrap(description, 88)))


def add_out_dir(p: argparse.ArgumentParser, default: str | None, what: str) -> None:
    """``--out DIR`` and ``--force``, under the one output-folder policy (lowprec._outdir)."""
    p.add_argument("--out", default=default, metavar="DIR", help=f"folder for {what}; it must "
                   "be new or empty unless --force")
    p.add_argument("--force", action="store_true",
                   help="write into DIR even if it is not empty (files of the same name "
                   "are replaced)")


def named(lookup: Callable[[str], Any], what: str) -> Callable[[str], str]:
    """An argparse ``type=`` that checks a name with the module that owns the names.

    ``lookup`` (``get_policy``, ``get_task``, ...) raises ValueError with a message that
    suggests the closest valid names; argparse shows that message as the error.

    >>> from lowprec.formats import get_format
    >>> named(get_format, "format")("e4m3")
    'e4m3'
    """
    def check(text: str) -> str:
        try:
            lookup(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    check.__name__ = what  # argparse names the type in some messages
    return check


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type=``: a whole number >= ``low``, with a message that says so.

    >>> int_at_least(1)("600")
    600
    >>> int_at_least(1)("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '0' is too small: it must be >= 1
    """
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} is too small: it must be >= {low}")
        return value

    check.__name__ = f"integer >= {low}"
    return check
