"""``lowprec demo`` and ``lowprec train``: run presets side by side, print the comparison.

The demo trains every standard preset on the default task with the same seed,
draws a plain-text progress bar on stderr, prints a table and writes each run
to ``<out>/<policy>/`` (see :mod:`lowprec.train.results`), then draws the
figures if :mod:`lowprec.figures` provides ``demo_figures(runs, out)``.

Output folders follow the policy of :mod:`lowprec._outdir`: a folder named with
``--out`` must be new or empty (or ``--force`` given), checked before any training;
the default ``lowprec-demo`` is skipped for a fresh name (``lowprec-demo-2``, ...)
when it is not empty.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from ._outdir import prepare_out_dir
from .train.memory import MemoryTable, memory
from .train.policy import POLICIES, Policy, get_policy
from .train.results import RunResult, save_run
from .train.runner import train

__all__ = ["DEMO_POLICIES", "ProgressBar", "choose_out_dir", "format_table", "run_demo"]

#: The presets the demo trains, in table order.
DEMO_POLICIES = tuple(POLICIES)
DEFAULT_OUT = "lowprec-demo"


class ProgressBar:
    """A one-line text progress bar (``\\r``-redrawn on a terminal, a line per run otherwise)."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream, self.width = stream or sys.stderr, width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.label = ""
        self.t0 = time.perf_counter()

    def start(self, label: str) -> None:
        self.label, self.t0 = label, time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if self.tty and (done == total or done % max(total // 100, 1) == 0):
            k = self.width * done // total
            self.stream.write(f"\r{self.label:<28} [{'#' * k}{'.' * (self.width - k)}] "
                              f"{done}/{total} {time.perf_counter() - self.t0:5.1f}s")
            self.stream.flush()
        if done == total:
            if not self.tty:
                self.stream.write(f"{self.label:<28} {total} steps "
                                  f"{time.perf_counter() - self.t0:5.1f}s")
            self.stream.write("\n")
            self.stream.flush()


def choose_out_dir(out: str | None, *, force: bool = False) -> Path:
    """The folder to write to, created (see the module docstring); raises ValueError to refuse."""
    if out is not None:
        return prepare_out_dir(out, force=force)
    p = Path(DEFAULT_OUT)
    k = 2
    while p.exists() and not (p.is_dir() and not any(p.iterdir())):
        p = Path(f"{DEFAULT_OUT}-{k}")
        k += 1
    return prepare_out_dir(p)


def _pct(x: float) -> str:
    return f"{x:.1f}" if x >= 0.1 or x == 0 else f"{x:.2g}"


def _memory(run: RunResult) -> MemoryTable:
    """The exact memory of the run's model under its policy, optimizer and batch."""
    cfg = run.task_config
    return memory(cfg["sizes"], Policy.from_dict(run.policy_config),
                  batch=cfg["batch_size"], optimizer=cfg["optimizer"])


def format_table(runs: dict[str, RunResult], *, timings: bool = True) -> str:
    """The comparison table of the demo (one row per run); ``timings=False`` leaves out
    the wall-clock column, the only one that changes between identical runs."""
    header = ("policy", "final loss", "acc %", "grads underflowed %", "updates lost %",
              "skipped", "final scale", "B/param", "act B/ex", "time s")
    rows: list[tuple[str, ...]] = [header]
    for name, r in runs.items():
        s = r.summary
        acc = "-" if s["final_acc"] is None else f"{100 * s['final_acc']:.1f}"
        mem = _memory(r)
        rows.append((name, f"{s['final_loss']:.4f}", acc, _pct(s["grad_underflow_pct"]),
                     _pct(s["lost_update_pct"]), str(s["skipped_steps"]),
                     f"{s['final_loss_scale']:g}",
                     f"{float(mem.weight_side_per_param()):.4g}",
                     f"{float(mem.activation_bytes_per_example()):.4g}",
                     f"{s['wall_seconds']:.1f}"))
    if not timings:
        rows = [row[:-1] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_demo(out: str | None = None, *, policies: tuple[str, ...] = DEMO_POLICIES,
             task: str = "underflow", steps: int = 600, seed: int = 0, figures: bool = True,
             stream: TextIO | None = None, progress: TextIO | None = None,
             force: bool = False) -> dict[str, RunResult]:
    """Train ``policies`` side by side, save each run, print the table; returns the runs."""
    stream = stream or sys.stdout
    for name in policies:
        get_policy(name)  # unknown names fail before anything is written
    folder = choose_out_dir(out, force=force)
    print(f"lowprec demo: writing into {folder}/", file=stream, flush=True)
    runs: dict[str, RunResult] = {}
    bar = ProgressBar(progress)
    t0 = time.perf_counter()
    for name in policies:
        bar.start(f"{name}")
        runs[name] = train(name, task, steps=steps, seed=seed, progress=bar)
        save_run(runs[name], folder / name)
    print(f"\nlowprec demo: task {task!r}, {steps} steps, seed {seed}, "
          f"{time.perf_counter() - t0:.1f} s\n", file=stream)
    print(format_table(runs), file=stream)
    print("\nfinal loss, acc: held-out set after the last step.  grads underflowed: gradient "
          "values non-zero\nbefore rounding and zero after.  updates lost: non-zero weight "
          "updates that left the\nstored weight unchanged.  skipped: steps skipped for inf/NaN "
          "gradients.  B/param: exact bytes\nper parameter of master copy, weights, gradients "
          "and optimizer state (lowprec memory).\nact B/ex: activations kept for the backward "
          "pass, bytes per example.", file=stream)
    print(f"\nresults: {folder}/<policy>/run.json (+ grads.npz)", file=stream)
    if figures:
        _figures(runs, folder, stream)
    return runs


def _figures(runs: dict[str, RunResult], folder: Path, stream: TextIO) -> None:
    from .figures import demo_figures  # matplotlib: only when figures are drawn

    for path in demo_figures(runs, folder):
        print(f"figure: {path}", file=stream)
