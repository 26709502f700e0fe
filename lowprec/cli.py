"""The ``lowprec`` command line: ``main()`` and the list of sub-commands.

Each sub-command lives in its own module ``lowprec/commands/<name>.py`` with
``register(sub)`` (its parser) and ``run(args) -> int`` (its work). To add one, write
that module and add it to `COMMANDS` below.

Exit statuses (docs/cli.md): 0 done, 1 the work failed, 2 bad usage or a bad argument,
3 no usable GPU for ``--gpu``, 130 interrupted. No traceback reaches the user unless
``--debug`` asks for it.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from . import __version__
from ._names import did_you_mean
from .commands import (
    cost,
    demo,
    explain,
    explore,
    figures,
    grade,
    info,
    inspect,
    memory,
    train,
    tutorials,
    validate,
    warmup,
)
from .commands._common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    HelpFormatter,
)
from .commands._compiling import compile_notice

__all__ = ["build_parser", "main"]

#: The sub-commands, in the order ``lowprec --help`` lists them.
COMMANDS = [info, explain, demo, train, memory, cost, inspect, figures, validate, tutorials,
            grade, explore, warmup]

EXAMPLES = """\
examples:
  lowprec warmup                          compile the kernels once (about 3 minutes)
  lowprec info                            the table of formats
  lowprec info fp8_e4m3                   everything about one format
  lowprec explain 0.1 -f bf16,fp8_e4m3    how 0.1 rounds, bit by bit
  lowprec demo                            train thirteen precision recipes side by side
  lowprec train --help                    the options of one sub-command

exit status: 0 done, 1 the work failed, 2 bad usage or argument, 3 no GPU for --gpu,
130 interrupted. --debug shows the Python traceback of an error."""


class Parser(argparse.ArgumentParser):
    """argparse, with one-line errors that suggest the closest valid choice."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own check, with "did you mean ...?" added to its message
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{did_you_mean(value, choices)}; "
                f"choose from {', '.join(choices)}")


def build_parser() -> argparse.ArgumentParser:
    """The ``lowprec`` parser with every sub-command of `COMMANDS` registered."""
    parser = Parser(
        prog="lowprec", formatter_class=HelpFormatter, epilog=EXAMPLES,
        description="Low-precision floating point (FP16, bf16, FP8, MX, NVFP4), emulated "
        "bit-exactly: explain, train, validate.")
    parser.add_argument("--version", action="version", version=f"lowprec {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    for p in sub.choices.values():  # --debug after the sub-command too
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the Python traceback of an error")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lowprec`` with ``argv`` (default: the command line); returns the exit status.

    >>> main(["info", "fp8"])  # the message goes to stderr
    2
    """
    real = sys.stdout
    guard = _Stdout(real)
    sys.stdout = guard
    try:
        status = _run(argv)
        guard.flush()  # a closed pipe shows up here, not at interpreter exit
        return status
    except BrokenPipeError:  # a write that went around the guard
        return _closed_stdout()
    finally:
        sys.stdout = real if real is not None else guard


class _Stdout:
    """``sys.stdout`` while a command runs: when its reader is gone (``lowprec demo | head
    -1``) or it was closed from the start (``lowprec info >&-``), the output is dropped and
    the command goes on -- the files it writes are its work, not the printing."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.gone = real is None

    def _lost(self) -> None:
        self.gone = True
        _closed_stdout()

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return int(self._real.write(text))
            except (OSError, ValueError):  # EPIPE, EBADF, a closed file
                self._lost()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._real.flush()
            except (OSError, ValueError):
                self._lost()

    def isatty(self) -> bool:
        return not self.gone and bool(self._real.isatty())

    def __getattr__(self, name: str) -> Any:
        if self._real is None:
            raise AttributeError(name)
        return getattr(self._real, name)


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error argparse printed
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_OK
    try:
        with compile_notice(args.command):
            return int(args.func(args) or EXIT_OK)
    except BrokenPipeError:
        raise  # main() handles it
    except KeyboardInterrupt:
        return _fail(args, "interrupted", EXIT_INTERRUPTED)
    except (ValueError, TypeError) as exc:  # bad input: the message names it and what is
        return _fail(args, str(exc), EXIT_USAGE)  # accepted
    except (OSError, ImportError) as exc:  # the work itself failed: a file, a package
        return _fail(args, str(exc) or type(exc).__name__, EXIT_FAILED)
    except Exception as exc:  # a bug in lowprec: still one line, and how to see more
        return _fail(args, f"{type(exc).__name__}: {exc} (a bug in lowprec? rerun with "
                     "--debug for the traceback and report it)", EXIT_FAILED)


def _fail(args: argparse.Namespace, message: str, status: int) -> int:
    """One line on stderr (and the traceback with --debug); returns ``status``."""
    if args.debug:
        traceback.print_exc()
    print(f"lowprec {args.command}: error: {message}", file=sys.stderr)
    return status


def _closed_stdout() -> int:
    """The reader of our output went away (``lowprec info | head -3``): stop quietly.

    As the Python docs recommend (signal module, "Note on SIGPIPE"), point stdout at
    devnull so that the interpreter's final flush does not fail again.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != 1:
            os.dup2(devnull, 1)
            os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (a test's capture)
        pass
    return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
