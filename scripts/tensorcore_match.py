"""Model against measured GPU: matched/total for every file in ../shared/tensorcores.

Runs ``lp.vecdot(a, b, c, inputs=F, output=O, model=GPU)`` on every GPU x input
format x output of the measured tensor-core data (Khattak & Mikaitis 2025) and
prints the number of outputs reproduced bit for bit, as a Markdown table (the
README's "model vs measured GPU" table comes from this script)::

    python scripts/tensorcore_match.py [--data ../shared/tensorcores]

(``--data tests/data/tensorcores`` runs the subset shipped with the tests: every 10th dot
product, 500 per file.)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import lowprec as lp
from lowprec.identify import iter_tensorcore_files
from lowprec.matmul import get_model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = os.environ.get("LOWPREC_SHARED", Path(__file__).resolve().parents[2] / "shared")
    ap.add_argument("--data", default=str(Path(shared) / "tensorcores"),
                    help="the measured files (default: $LOWPREC_SHARED/tensorcores or "
                         "../shared/tensorcores next to the checkout)")
    args = ap.parse_args(argv)
    root = Path(args.data)
    if not root.is_dir():
        print(f"no data folder {root}", file=sys.stderr)
        return 1
    print("| GPU | inputs | output | K | model | matched / total |")
    print("|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for case in iter_tensorcore_files(root):
        got = lp.vecdot(case.a, case.b, case.c, inputs=case.inputs, output=case.output,
                        model=case.gpu.lower())
        same = got.astype(np.float32).view(np.uint32) == case.d.astype(np.float32).view(np.uint32)
        print(f"| {case.gpu} | {case.inputs} | {case.output} | {case.a.shape[1]} | "
              f"{get_model(case.gpu.lower()).name} | {int(same.sum())} / {same.size} |")
    print(f"\n({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
