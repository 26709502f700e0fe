"""AMD CDNA1/2 (mi100, mi250) beside Khattak & Mikaitis's MATLAB models.

tests/data/matlab_amd/ holds the MATLAB models' error statistics (not GPU outputs;
README there). scripts/crosscheck_cdna12.py regenerates the experiment's inputs (MATLAB
rng(1)) and restates the two MATLAB rules; these tests run it on the small sizes:

* the files' format (the bound column is the paper's formula of n);
* the first row of each file that began from rng(1) is lowprec's, digit for digit;
* lowprec's mi250 equals MATLAB's MI210MC rule bit for bit (K zero-padded);
* lowprec's mi100 (MMA-Sim's rounded tree) is *not* MATLAB's MI100MC (exact group sum,
  one rounding): the documented difference, measured on the experiment's inputs.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

import lowprec as lp

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "matlab_amd"
FILES = sorted(DATA.glob("matmul_test_*_words_1_model_*.dat"))


def _script():
    spec = importlib.util.spec_from_file_location("crosscheck_cdna12",
                                                  ROOT / "scripts" / "crosscheck_cdna12.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cc = _script()


def _inputs(informat: str, nmax: int = 379):
    return list(cc.experiment_inputs(informat, nmax))


def test_files_present_and_format():
    assert len(FILES) == 6
    for path in FILES:
        informat = path.name.split("_")[2]
        _, t, emin, emax = cc.FORMATS[informat]
        u, fmin, fmax = 2.0 ** -t, 2.0 ** emin, 2.0 ** emax * (2 - 2 * 2.0 ** -t)
        rows = cc.read_dat(path)
        assert [n for n, _, _ in rows] == cc.NLIST
        for n, _, bound in rows:   # matmul_test_CDNA.m's bound (3.26), printed %e
            theta = min(fmax, math.sqrt(cc.FMAX32 / n))
            want = (2 * u + n * 2.0 ** -24 + 4 * n ** 2 * fmin / theta
                    + 4 * n ** 2 * 2.0 ** -126 / theta ** 2)
            assert bound == f"{want:e}", (path.name, n)


@pytest.mark.parametrize("informat, chip, model", [
    ("binary16", "mi100", "mi100:mfma"), ("bfloat16", "mi300x", "mi300:mfma")])
def test_first_row_from_rng1(informat, chip, model):
    """These two files' n = 10 rows were computed from MATLAB's rng(1) stream: the
    regenerated inputs give the printed error under lowprec (all three AMD models agree
    at n = 10, so this checks the inputs and the format, not a rule). The other rows
    (and the other files' n = 10) came from a different stream state: see README."""
    fmt = cc.FORMATS[informat][0]
    n, a, b, la, bm, linv, minv = _inputs(informat, 10)[0]
    want = dict((m, e) for m, e, _ in cc.read_dat(
        DATA / f"matmul_test_{informat}_binary32_words_1_model_{chip}.dat"))[n]
    d = lp.matmul(la, bm, inputs=fmt, model=model).astype(np.float64)
    assert cc.err_string(linv * d * minv, a, b) == want


@pytest.mark.parametrize("informat", ["binary16", "bfloat16"])
def test_mi250_is_matlab_mi210_rule(informat):
    fmt, _, emin, _ = cc.FORMATS[informat]
    outputs = 0
    for _, _, _, la, bm, _, _ in _inputs(informat):
        want = cc.matlab_mi210_rule(la, bm, emin)
        got = lp.matmul(cc.pad(la, 1, 4), cc.pad(bm, 0, 4), inputs=fmt, model="mi250:mfma")
        same, size = cc._bits_equal(got, want)
        assert same == size
        outputs += size
    assert outputs == 700


@pytest.mark.parametrize("informat", ["binary16", "bfloat16"])
def test_mi100_differs_from_matlab_mi100_rule(informat):
    """MI100MC sums each group and C exactly and rounds once; lowprec's mi100 rounds at
    every tree node. On the experiment's inputs (n <= 379, 700 outputs) they differ on
    some outputs and agree on most."""
    fmt = cc.FORMATS[informat][0]
    group = cc.MI100_GROUP[informat]
    equal = total = 0
    for _, _, _, la, bm, _, _ in _inputs(informat):
        got = lp.matmul(cc.pad(la, 1, group), cc.pad(bm, 0, group), inputs=fmt,
                        model="mi100:mfma")
        rule = cc.matlab_mi100_rule(la, bm, group)
        e, t = cc._bits_equal(got, rule)
        equal, total = equal + e, total + t
    assert total == 700
    assert 0 < total - equal < total          # they differ, but not everywhere


def test_matlab_mi100_rule_is_one_rounding():
    """The restated MI100MC rule on one group with C = 0 is the exact sum rounded once
    (the nearest FP32 value, checked with Fractions on a sum exact in float64)."""
    a = np.array([[1.0, 2.0 ** -24, 2.0 ** -24, 2.0 ** -24]])    # fp16 values
    b = np.ones((4, 1))
    exact = 1 + 3 * 2.0 ** -24                        # exact in float64
    assert cc.matlab_mi100_rule(a, b, 4)[0, 0] == float(np.float32(exact))
    # one rounding: 1 + 2**-23 + 2**-24 is a tie, to even: 1 + 2**-22. lowprec's tree:
    # (1 + 2**-24) ties to 1, (2**-24 + 2**-24) = 2**-23 exactly, 1 + 2**-23 exact.
    assert float(np.float32(exact)) == 1 + 2.0 ** -22
    assert float(lp.matmul(a, b, inputs="fp16", model="mi100:mfma")[0, 0]) == 1 + 2.0 ** -23


@pytest.mark.parametrize("model", ["mi100:mfma", "mi250:mfma"])
def test_short_group_is_not_zero_padded(model):
    """K = 3 with groups of 4: MATLAB's GEMM.m (and software feeding a fixed-K MFMA)
    pads a zero, giving (p1 + p2) + (p3 + 0); lowprec splits the short group as
    p1 + (p2 + p3). With products (1, 2**-24, 2**-24) of normal fp16 values: padded,
    1 + 2**-24 ties to 1 and 1 + 2**-24 again to 1; unpadded, 2**-24 + 2**-24 = 2**-23
    exactly, then 1 + 2**-23 exactly."""
    a = np.array([[1.0, 2.0 ** -12, 2.0 ** -12]])
    b = a.T.copy()
    short = float(lp.matmul(a, b, inputs="fp16", model=model)[0, 0])
    padded = float(lp.matmul(cc.pad(a, 1, 4), cc.pad(b, 0, 4), inputs="fp16",
                             model=model)[0, 0])
    assert (short, padded) == (1 + 2.0 ** -23, 1.0)
    if model == "mi250:mfma":
        assert float(cc.matlab_mi210_rule(a, b, -14)[0, 0]) == padded
