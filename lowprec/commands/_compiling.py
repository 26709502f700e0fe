"""Make numba's first-run compilation visible: ``compiling lowprec's kernels (once, ...)``.

lowprec's kernels are compiled by numba on first use and cached on disk. A cold
compile takes seconds to a minute; without a word the command line would seem to hang.
:func:`compile_notice` listens to numba's ``numba:compile`` events, which fire only
when numba really compiles (never when it loads a kernel from its cache), so a warm
run prints nothing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from numba.core import event

__all__ = ["COLD_SECONDS", "compile_notice"]

#: Seconds a cold first run of each command spent compiling (measured on the 2-core
#: development machine, an Intel Xeon, quiet, empty NUMBA_CACHE_DIR: explain 0.1 1.3 s,
#: demo 34.6, train 12.4, figures 89.1, validate --quick 71.0, warmup 127.1 (179.6 before the
#: rounding kernels inlined one route each); info and
#: tutorials compile little or nothing in this process); the estimate the notice gives.
COLD_SECONDS = {"info": 2, "explain": 2, "demo": 35, "train": 15, "figures": 90,
                "validate": 70, "tutorials": 60, "warmup": 130}


class _Notice(event.Listener):
    """Counts lowprec's compiles; prints the notice at the first, progress after each."""

    def __init__(self, stream: TextIO, estimate: float) -> None:
        self.stream, self.estimate = stream, estimate
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.depth = self.done = 0
        self.t0 = 0.0

    def _ours(self, ev: event.Event) -> bool:
        func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
        return getattr(func, "__module__", "").startswith("lowprec")

    def on_start(self, ev: event.Event) -> None:
        if not self._ours(ev):
            return
        if not self.done and not self.depth:
            self.t0 = time.perf_counter()
            self.stream.write(f"compiling lowprec's kernels (once, about "
                              f"{self.estimate:.0f} s)" + ("" if self.tty else "...\n"))
            self.stream.flush()
        self.depth += 1

    def on_end(self, ev: event.Event) -> None:
        if not self._ours(ev):
            return
        self.depth -= 1
        self.done += 1
        if self.tty:
            self.stream.write(f"\rcompiling lowprec's kernels (once, about "
                              f"{self.estimate:.0f} s): {self.done} compiled, "
                              f"{time.perf_counter() - self.t0:.0f} s")
            self.stream.flush()

    def finish(self) -> None:
        if self.done:
            end = "\n" if self.tty else ""
            self.stream.write(f"{end}compiled {self.done} kernels in "
                              f"{time.perf_counter() - self.t0:.1f} s; they are cached for "
                              "the next run\n")
            self.stream.flush()


@contextmanager
def compile_notice(command: str, stream: TextIO | None = None) -> Iterator[Any]:
    """While the block runs, announce numba compiles of lowprec's kernels on ``stream``."""
    listener = _Notice(stream or sys.stderr, COLD_SECONDS.get(command, 60))
    with event.install_listener("numba:compile", listener):
        try:
            yield listener
        finally:
            listener.finish()
