"""Where the tests find the reference data: the full sets, or the subset in tests/data.

The full sets (Berkeley TestFloat 3e vectors, tensor-core outputs measured on real GPUs)
live in ``../shared`` next to the checkout, or wherever ``LOWPREC_SHARED`` points. A clone
without them runs the same tests on the subset shipped in ``tests/data/`` (chosen by
``scripts/subset_shared_data.py``; ``tests/data/README.md`` says which lines and why).
"""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SHIPPED = TESTS / "data"

#: Where each full set comes from, for the skip messages.
SOURCES = {
    "testfloat": ("Berkeley TestFloat 3e vectors, generated with testfloat_gen "
                  "(http://www.jhauser.us/arithmetic/TestFloat.html; see "
                  "tests/data/README.md for the exact options)"),
    "tensorcores": ("tensor-core outputs measured by Khattak & Mikaitis, folder "
                    "model_validation/ of github.com/north-numerical-computing/"
                    "MATLAB-tensor-core (see tests/data/README.md)"),
}


def shared_root() -> Path:
    """``$LOWPREC_SHARED``, else ``../shared`` next to the checkout."""
    return Path(os.environ.get("LOWPREC_SHARED") or TESTS.parent.parent / "shared")


def data_dir(kind: str) -> tuple[Path, bool]:
    """(folder, full) for ``kind`` ("testfloat" or "tensorcores"): the full set when
    present, else the shipped subset (``full`` False)."""
    full = shared_root() / kind
    if full.is_dir():
        return full, True
    return SHIPPED / kind, False


def missing(path: Path) -> str:
    """The skip reason for a data file found in neither place."""
    kind = next(k for k in SOURCES if k in path.parts)
    return (f"{path} not found: neither the full set ({shared_root() / kind}; set "
            f"LOWPREC_SHARED to the folder holding {kind}/) nor the subset shipped in "
            f"tests/data/{kind} is there. The full set: {SOURCES[kind]}")


def full_set_missing(*kinds: str) -> str:
    """The skip reason of a test that compares the shipped subset with the full sets."""
    return (f"compares tests/data with the full sets, not found under {shared_root()} (set "
            "LOWPREC_SHARED to the folder holding " + " and ".join(f"{k}/" for k in kinds)
            + "): " + "; ".join(SOURCES[k] for k in kinds))
