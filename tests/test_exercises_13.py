"""Tutorial 13's checkers and helpers: right answers pass (against values worked out here
from the rule, not from the checker), the usual mistakes get named; the measuring
helpers of lowprec.recipes.measure against the recipe's operands."""

from __future__ import annotations

import numpy as np
import pytest

from lowprec._kernels.gemm import matmul_in_order
from lowprec.exercises import ExerciseError, check_rht_amax, check_sr8_probability
from lowprec.recipes import nvfp4 as R
from lowprec.recipes.measure import flushed_share, rel_error, wgrad


def test_sr8_probability(capsys) -> None:
    v = float(np.float32(2.3))
    right = np.floor(256 * (v - 2.0)) / 256  # the 8-bit rule, by hand: 76/256
    assert right == 76 / 256
    check_sr8_probability(v, right)
    assert capsys.readouterr().out.startswith("Correct:")
    check_sr8_probability(-v, right)  # the sign does not change the magnitude's rounding
    with pytest.raises(ExerciseError, match="exact stochastic rounding"):
        check_sr8_probability(v, v - 2.0)
    with pytest.raises(ExerciseError, match=r"\*down\*"):
        check_sr8_probability(v, 1 - right)
    with pytest.raises(ValueError, match="E2M1 value"):
        check_sr8_probability(3.0, 0.5)
    with pytest.raises(ValueError, match="0 < |v| < 6"):
        check_sr8_probability(7.0, 0.5)
    # below 0.5 the gap is 0.5 (subnormal E2M1): 0.3 is 0.6 of the way from 0 to 0.5
    check_sr8_probability(float(np.float32(0.3)), np.floor(256 * 0.6) / 256)


def test_rht_amax(capsys) -> None:
    check_rht_amax([12.0] + [0.0] * 15, 3.0)  # 12 / sqrt(16)
    with pytest.raises(ExerciseError, match="not by 16"):
        check_rht_amax([12.0] + [0.0] * 15, 0.75)
    with pytest.raises(ExerciseError, match="spread over all 16"):
        check_rht_amax([12.0] + [0.0] * 15, 12.0)
    # the block equal to the sign vector: its signed values are all 1, H sums them into
    # the first output, 16 / 4 (Transformer Engine's signs, typed in by hand)
    te_signs = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]
    check_rht_amax(te_signs, 4.0)
    with pytest.raises(ExerciseError):
        check_rht_amax([1.0] * 16, 4.0)  # all ones are not all ones after the signs


def test_measure_wgrad_is_the_product_of_the_recipe_operands() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 48)).astype(np.float32)
    g = rng.standard_normal((32, 16)).astype(np.float32)
    xw = np.asarray(R.quantize_operand(x, "wgrad_input").dequantize())  # K x M, rotated
    gw = R.quantize_operand(g, "wgrad_grad", rng=np.random.default_rng(3)).dequantize()
    got = wgrad(x, g, rounding="stochastic", rng=np.random.default_rng(3))
    np.testing.assert_array_equal(got, xw @ np.asarray(gw).T)
    plain = wgrad(x, g, hadamard=False)
    xq = np.asarray(R.quantize(np.ascontiguousarray(x.T)).dequantize())
    gq = np.asarray(R.quantize(np.ascontiguousarray(g.T)).dequantize())
    np.testing.assert_array_equal(plain, xq @ gq.T)
    exact = matmul_in_order(x.T.astype(np.float64), g.astype(np.float64))
    assert 0 < rel_error(plain, exact) < 0.25 and 0 < rel_error(got, exact) < 0.35
    with pytest.raises(ValueError, match="same tokens"):
        wgrad(x, g[:16])
    with pytest.raises(ValueError, match="2-D"):
        wgrad(x.ravel(), g)


def test_flushed_share_counts_what_became_zero() -> None:
    g = np.zeros((16, 2), np.float32)
    g[0, 0], g[1:, 0] = 6.0, 0.01  # 0.01 is far below the block's 6/6 * 0.25: flushed
    g[:, 1] = 1.0                   # an all-equal block: nothing flushed
    assert flushed_share(g) == 15 / 32
    assert flushed_share(g, hadamard=True) < flushed_share(g)
    assert rel_error([1.0, 1.0], [1.0, 2.0]) == pytest.approx(1 / np.sqrt(5))
