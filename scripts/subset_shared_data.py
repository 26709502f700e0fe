#!/usr/bin/env python
"""Write the subset of ``../shared`` that the repository ships in ``tests/data/``.

The full reference data (Berkeley TestFloat 3e vectors, 22 MB; the tensor-core outputs
measured by Khattak & Mikaitis, 6.4 MB) lives next to the checkout in ``../shared`` and is
not in the repository. A clone still runs every test that reads it, on this subset; with
``../shared`` present (or ``LOWPREC_SHARED`` set) the same tests read the full sets.

The selection is deterministic and uses no lowprec code (only the files' own fields), so
the subset cannot be chosen to suit the code under test:

``testfloat``
    Every line of a vector file is put in a stratum by its exception flags, the class of its
    expected result and the class of each operand (NaN, infinity, zero, subnormal, normal;
    read from the bit patterns). Every stratum keeps ``ceil`` of an equal share of the
    file's half budget (all of it when smaller), the lines evenly spaced through the
    stratum, so rare cases (overflow, invalid, signaling NaNs, subnormal results) are kept;
    the other half of the budget is lines evenly spaced through the whole file, so the
    common cases keep their weight. The budget is ``--lines`` lines per file (at most: the
    two halves overlap), except sqrt: every line (2,448).
``tensorcores``
    Every ``--stride``-th dot product (lines 0, stride, 2·stride, ...) of every file of a
    GPU/format folder, the same lines from its ``a_``, ``b_``, ``c_`` and ``d_`` files.

Usage::

    python scripts/subset_shared_data.py              # rewrite tests/data from ../shared
    python scripts/subset_shared_data.py --check      # exit 1 if tests/data differs
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data"
#: Bits (exponent, mantissa) of the formats by the width of their hex field.
WIDTHS = {4: (5, 10), 8: (8, 23), 16: (11, 52)}


def _shared() -> Path:
    return Path(os.environ.get("LOWPREC_SHARED") or ROOT.parent / "shared")


def value_class(token: str, bf16: bool = False) -> str:
    """NaN, inf, zero, sub or normal, from a hexadecimal bit pattern."""
    e_bits, m_bits = (8, 7) if bf16 else WIDTHS[len(token)]
    bits = int(token, 16)
    exp = (bits >> m_bits) & ((1 << e_bits) - 1)
    man = bits & ((1 << m_bits) - 1)
    if exp == (1 << e_bits) - 1:
        return "nan" if man else "inf"
    if exp == 0:
        return "sub" if man else "zero"
    return "normal"


def select_testfloat(lines: list[str], budget: int, bf16_result: bool) -> list[str]:
    """The stratified, evenly spaced selection described in the module docstring."""
    strata: dict[tuple, list[int]] = {}
    for i, line in enumerate(lines):
        *operands, result, flags = line.split()
        key = (flags, value_class(result, bf16_result),
               *(value_class(t) for t in operands))
        strata.setdefault(key, []).append(i)
    if budget >= len(lines):
        return lines
    # Half the budget: evenly spaced through the whole file (the common cases as common
    # as they are in the file).
    even = budget // 2
    keep = {(j * len(lines)) // even for j in range(even)}
    # The other half, water-filled: the largest equal share q of every stratum with
    # sum(min(size, q)) <= budget - even.
    sizes = sorted(len(v) for v in strata.values())
    left, q = budget - even, 0
    for k, size in enumerate(sizes):
        share = left // (len(sizes) - k)
        if size <= share:
            left -= size
            continue
        q = max(share, 1)
        break
    else:
        q = sizes[-1]
    for members in strata.values():
        n = min(len(members), q)
        keep.update(members[(j * len(members)) // n] for j in range(n))
    return [lines[i] for i in sorted(keep)]


def _gzip_bytes(text: str) -> bytes:
    """gzip with no timestamp or name: the same text gives the same bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as f:
        f.write(text.encode())
    return buf.getvalue()


def _read(path: Path) -> list[str]:
    with gzip.open(path, "rt") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def build(shared: Path, lines: int, stride: int) -> dict[str, bytes]:
    """Relative path -> file bytes of the whole subset."""
    files: dict[str, bytes] = {}
    tf = shared / "testfloat"
    for path in sorted(tf.glob("*.txt.gz")):
        rows = _read(path)
        budget = len(rows) if path.name.startswith("f16_sqrt") else lines
        keep = select_testfloat(rows, budget, bf16_result="bf16" in path.name)
        files[f"testfloat/{path.name}"] = _gzip_bytes("\n".join(keep) + "\n")
    tc = shared / "tensorcores"
    for path in sorted(tc.glob("*/*/*.txt.gz")):
        rows = _read(path)
        files[str(path.relative_to(shared))] = _gzip_bytes("\n".join(rows[::stride]) + "\n")
    files["tensorcores/LICENCE"] = (tc / "LICENCE").read_bytes()
    # TestFloat's licence (tests/data/testfloat/COPYING.txt) is not in ../shared: it is
    # committed by hand, and left alone here.
    return files


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shared", type=Path, default=None,
                   help="the full data (default: $LOWPREC_SHARED or ../shared)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--lines", type=int, default=2000, help="TestFloat lines per file")
    p.add_argument("--stride", type=int, default=10, help="every n-th measured dot product")
    p.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    args = p.parse_args(argv)
    shared = args.shared or _shared()
    if not (shared / "testfloat").is_dir() or not (shared / "tensorcores").is_dir():
        print(f"no testfloat/ and tensorcores/ under {shared}: set LOWPREC_SHARED or "
              "--shared to the full data", file=sys.stderr)
        return 2
    files = build(shared, args.lines, args.stride)
    if args.check:
        stale = [rel for rel, data in files.items()
                 if not (args.out / rel).is_file() or (args.out / rel).read_bytes() != data]
        for rel in stale:
            print(f"{args.out / rel}: differs from a fresh selection")
        return 1 if stale else 0
    for old in sorted(args.out.glob("*/**/*.txt.gz")):
        old.unlink()
    for rel, data in files.items():
        (args.out / rel).parent.mkdir(parents=True, exist_ok=True)
        (args.out / rel).write_bytes(data)
    total = sum(len(d) for d in files.values())
    print(f"wrote {len(files)} files, {total / 1e6:.2f} MB, under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
