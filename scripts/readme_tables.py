#!/usr/bin/env python
"""Regenerate the tables that README.md and docs/training.md print, from real runs.

Each table sits between two markers in the Markdown file::

    <!-- table:NAME (regenerate: python scripts/readme_tables.py --write) -->
    ```text
    ...
    ```
    <!-- /table:NAME -->

Tables:

``demo``
    ``lowprec demo``'s comparison table: every preset, 600 steps, seed 0, on the default
    task, without the wall-clock column (the one number that changes between identical
    runs). Training is deterministic, so the committed table must equal a fresh run's
    exactly (about 25 s of CPU).
``formats``
    ``lowprec info`` (derived from the format definitions; exact).
``speed``
    The README's summary and the full tables of ``docs/performance.md`` (the sections
    headed ``## Speed``). Not regenerated automatically: their numbers are timings from
    the benchmark scripts, which vary between runs on a shared machine by more than their
    differences (``docs/performance.md`` states the noise; ``bench_round.py --readme
    docs/performance.md`` rewrites its per-format table). ``--check`` verifies that every
    row of both names a benchmark script that exists; ``--speed`` runs the demo once and
    prints its wall time to compare by hand.

Usage::

    python scripts/readme_tables.py --check        # exit 1 if a committed table is stale
    python scripts/readme_tables.py --write        # rewrite the tables in place
    python scripts/readme_tables.py --only formats --check
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Which tables each file holds.
FILES = {"README.md": ("demo", "formats"), "docs/training.md": ("demo",)}
#: The files whose ``## Speed`` section cites benchmark scripts row by row.
SPEED_FILES = ("README.md", "docs/performance.md")
MARK = re.compile(r"(<!-- table:(?P<name>\w+) [^>]*-->\n```text\n)(?P<body>.*?)(```\n"
                  r"<!-- /table:(?P=name) -->)", re.DOTALL)


def demo_table(runs: dict | None = None) -> str:
    """The demo's table without timings, from fresh runs (or ``runs``)."""
    from lowprec.demo import DEMO_POLICIES, format_table
    from lowprec.train import train

    if runs is None:
        runs = {p: train(p, "underflow", steps=600, seed=0) for p in DEMO_POLICIES}
    return format_table(runs, timings=False)


def formats_table() -> str:
    """``lowprec info``'s table, without its footnote."""
    from lowprec import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(["info"])
    return out.getvalue().split("\n\nNaN encodings", 1)[0].rstrip("\n")


GENERATORS: dict[str, Callable[[], str]] = {"demo": demo_table, "formats": formats_table}


def tables_in(text: str) -> dict[str, str]:
    """The marked tables of a Markdown text, name -> body (without the fences)."""
    return {m["name"]: m["body"].rstrip("\n") for m in MARK.finditer(text)}


def replace_tables(text: str, fresh: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        body = fresh.get(m["name"])
        return m.group(0) if body is None else m.group(1) + body + "\n" + m.group(4)

    return MARK.sub(sub, text)


def speed_rows_cite_scripts(text: str) -> list[str]:
    """Problems with a speed table (the ``## Speed`` section of the README or of
    docs/performance.md): rows that cite a benchmark script that does not exist."""
    if "\n## Speed\n" not in text:
        return ["no '## Speed' section"]
    section = text.split("\n## Speed\n", 1)[1].split("\n## ", 1)[0]
    problems = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| what", "|---")):
            continue
        for script in re.findall(r"`(bench_\w+\.py)", line):
            if not (ROOT / "benchmarks" / script).is_file():
                problems.append(f"speed row cites benchmarks/{script}, which does not exist")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="compare, exit 1 if stale")
    mode.add_argument("--write", action="store_true", help="rewrite the tables in place")
    mode.add_argument("--speed", action="store_true", help="time one demo run (by hand)")
    p.add_argument("--only", default=None, help=f"comma-separated: {', '.join(GENERATORS)}")
    args = p.parse_args(argv)
    if args.speed:
        t0 = time.perf_counter()
        demo_table()
        print(f"demo, 11 presets x 600 steps (no figures): {time.perf_counter() - t0:.1f} s")
        return 0
    names = args.only.split(",") if args.only else list(GENERATORS)
    unknown = [n for n in names if n not in GENERATORS]
    if unknown:
        p.error(f"--only: unknown {', '.join(unknown)}; tables: {', '.join(GENERATORS)}")
    fresh = {n: GENERATORS[n]() for n in names}
    stale = []
    for rel, held in FILES.items():
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")
        found = tables_in(text)
        for name in held:
            if name in fresh and name not in found:
                stale.append(f"{rel}: no marked table {name!r}")
            elif name in fresh and found[name] != fresh[name]:
                stale.append(f"{rel}: table {name!r} differs from what the code prints")
        if args.write:
            path.write_text(replace_tables(text, fresh), encoding="utf-8")
    problems = [f"{rel}: {problem}" for rel in SPEED_FILES
                for problem in speed_rows_cite_scripts((ROOT / rel).read_text(encoding="utf-8"))]
    for line in (stale if args.check else []) + problems:
        print(line)
    if args.write:
        print("wrote " + ", ".join(FILES))
        return 1 if problems else 0
    return 1 if stale or problems else 0


if __name__ == "__main__":
    sys.exit(main())
