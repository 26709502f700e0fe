"""Tutorial 11's checkers: right answers pass, the usual mistakes get named."""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp
from lowprec.exercises import ExerciseError, check_block_flush_share, check_underflow_count


def _grads() -> np.ndarray:
    rng = np.random.default_rng(0)
    g = (rng.standard_normal((8, 64)) * np.exp2(rng.integers(-30, -10, (8, 64)))).astype(
        np.float32)
    g[0, :5] = 0.0
    return g


def test_underflow_count(capsys) -> None:
    g = _grads()
    q = lp.round_to(g, "fp16")
    right = int(np.sum((g != 0) & (q == 0)))
    assert 0 < right < g.size - 5
    check_underflow_count(g, "fp16", right)
    assert capsys.readouterr().out.startswith("Correct:")
    with pytest.raises(ExerciseError, match="including the 5 values that were zero"):
        check_underflow_count(g, "fp16", int(np.sum(q == 0)))
    with pytest.raises(ExerciseError, match="become subnormals"):
        check_underflow_count(g, "fp16", int(np.sum((g != 0) & (np.abs(g) < 2.0**-14))))
    with pytest.raises(ExerciseError, match="no answer yet"):
        check_underflow_count(g, "fp16", ...)


def test_block_flush_share(capsys) -> None:
    w = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    q = lp.mx.quantize(w, "mxfp4").dequantize()
    flushed = ((w != 0) & (q == 0)).reshape(16, 2, 32)
    right = float(flushed.any(-1).mean())
    check_block_flush_share(w, right)
    assert capsys.readouterr().out.startswith("Correct:")
    with pytest.raises(ExerciseError, match="share of non-zero \\*values\\*"):
        check_block_flush_share(w, float(flushed.sum() / w.size))
    with pytest.raises(ExerciseError, match="not a percentage"):
        check_block_flush_share(w, right * 100)
