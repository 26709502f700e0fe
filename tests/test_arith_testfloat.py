"""lowprec.arith against Berkeley TestFloat 3e vectors for binary16 (all six modes).

The full vectors when ``../shared/testfloat`` (or ``$LOWPREC_SHARED/testfloat``) is
there, else the subset shipped in ``tests/data/testfloat`` (``tests/data/README.md``).

Every result must match bit for bit (a NaN result matches any NaN, the
vectors' README) and every flag byte must match exactly. Operands are passed
as codes, so signaling-NaN operands keep their meaning.
"""

import gzip

import numpy as np
import pytest
from _shared_data import data_dir, missing

import lowprec as lp

# The full vectors in ../shared (LOWPREC_SHARED overrides), else the subset in tests/data.
TESTFLOAT, FULL = data_dir("testfloat")
#: Cases per file: the full level-1 set of a two-operand op, or the shipped subset's least.
MIN_CASES = {"sqrt": 2448, "mulAdd": 100_000 if FULL else 1900}
MODES = ["rne", "rna", "rtz", "rdown", "rup", "odd"]
OPS = {"add": (lp.add, 2), "sub": (lp.sub, 2), "mul": (lp.mul, 2), "div": (lp.div, 2),
       "sqrt": (lp.sqrt, 1), "mulAdd": (lp.fma, 3)}


def _load(op: str, mode: str) -> np.ndarray:
    path = TESTFLOAT / f"f16_{op}.{mode}.txt.gz"
    if not path.exists():
        pytest.skip(missing(path))
    with gzip.open(path, "rt") as fh:
        rows = [[int(t, 16) for t in line.split()] for line in fh if line.strip()]
    assert len(rows) >= MIN_CASES.get(op, 46_464 if FULL else 1900), path
    return np.array(rows, dtype=np.int64)


def _is_nan16(c: np.ndarray) -> np.ndarray:
    return ((c & 0x7C00) == 0x7C00) & ((c & 0x03FF) != 0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", list(OPS))
def test_f16_matches_testfloat(op, mode):
    fn, arity = OPS[op]
    rows = _load(op, mode)
    operands = [rows[:, i].astype(np.uint16) for i in range(arity)]
    expected, expected_flags = rows[:, arity], rows[:, arity + 1]
    got, flags = fn(*operands, "fp16", mode, flags=True, codes=True)
    got = got.astype(np.int64)
    same = (got == expected) | (_is_nan16(got) & _is_nan16(expected))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, (
        f"{bad.size}/{len(rows)} results differ; first: "
        + " ".join(f"{v:04X}" for v in rows[bad[0]]) + f" got {got[bad[0]]:04X}")
    bad = np.flatnonzero(flags != expected_flags)
    assert bad.size == 0, (
        f"{bad.size}/{len(rows)} flags differ; first: "
        + " ".join(f"{v:04X}" for v in rows[bad[0]]) + f" got flags {flags[bad[0]]:02X}")


@pytest.mark.parametrize("op", ["add", "mul", "div", "sqrt", "mulAdd"])
def test_fraction_reference_agrees_with_testfloat(op):
    """The Fraction reference used by the exhaustive tests is itself right:
    it reproduces TestFloat's binary16 results and flags (first 3000 cases)."""
    from arith_reference import Reference

    fmt = lp.get_format("fp16")
    ref = Reference(fmt)
    arity = OPS[op][1]
    name = {"mulAdd": "fma"}.get(op, op)
    for mode in MODES:
        rows = _load(op, mode)[:3000]
        ops = [lp.decode(rows[:, i].astype(np.uint16), fmt) for i in range(arity)]
        want = ref.evaluate(name, ops, modes=(mode,))[mode]
        exp = lp.decode(rows[:, arity].astype(np.uint16), fmt)
        for i, (v, f) in enumerate(want):
            ok = (np.isnan(v) and np.isnan(exp[i])) or (
                v == exp[i] and np.signbit(v) == np.signbit(exp[i]))
            # sNaN operands raise invalid in TestFloat; values cannot carry them.
            snan = any(((r & 0x7E00) == 0x7C00) and (r & 0x1FF) for r in rows[i, :arity])
            assert ok and (snan or f == rows[i, arity + 1]), (op, mode, rows[i], v, f)
