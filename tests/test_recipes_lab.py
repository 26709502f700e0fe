"""The gradient-quantizer lab (lowprec.recipes.lab): deterministic quantizers' bias is
their error, and the stochastic ones are unbiased on real runs (the squared bias of the
mean of n draws is the variance / n, as for any unbiased estimator)."""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp
from lowprec.recipes import lab

F32 = np.float32


def _grad(seed=0, shape=(64, 64)):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, (shape[0], 1)))).astype(F32)


def test_deterministic_quantizers_bias_is_their_error():
    g = _grad()
    s = lab.block_stats(g, ("rtn", "4over6"), draws=4, rng=0)
    err = lp.nvfp4.quantize(g).dequantize() - g.astype(np.float64)  # the 1x16 RNE quantizer
    assert np.allclose(s["rtn"].bias, np.sqrt((err ** 2).reshape(64, 4, 16).mean(-1)),
                       rtol=1e-12, atol=0)
    assert (s["rtn"].variance == 0).all() and s["rtn"].draws == 1
    assert s["4over6"].mse.mean() < s["rtn"].mse.mean()


def _clip_free(seed=2):
    """Every block's amax is the tensor amax: every E4M3 block scale is exact (448), so no
    block maximum is scaled past 6 and nothing clips."""
    g = np.random.default_rng(seed).uniform(-1, 1, (64, 64)).astype(F32)
    g[:, ::16] = 1
    return g


def test_stochastic_rounding_is_unbiased():
    """4096 elements, 64 draws: mean squared bias / (mean variance / draws) is 1 within
    about 3% (one standard deviation); the bounds 0.8..1.25 are many deviations wide."""
    st = lab.block_stats(_clip_free(), "sr", draws=64, rng=5)["sr"]
    ratio = (st.bias ** 2).mean() / (st.variance.mean() / st.draws)
    assert 0.8 < ratio < 1.25


def test_stochastic_quantizers_beat_rtn_bias_and_clipping_biases_sr():
    """On a Gaussian gradient the block maxima whose E4M3 scale rounded down are scaled
    past 6 and clamped: a deterministic bias that stochastic rounding keeps (the squared
    bias is well above variance / draws), though far below round-to-nearest's."""
    rng = np.random.default_rng(1)
    g = (rng.standard_normal((64, 64)) * np.exp2(rng.integers(-3, 4, (64, 1)))).astype(F32)
    s = lab.block_stats(g, ("sr", "rht_sr", "rtn"), draws=64, rng=5)
    for name in ("sr", "rht_sr"):
        st = s[name]
        assert st.bias.mean() < 0.5 * s["rtn"].bias.mean() and st.variance.mean() > 0
    st = s["sr"]
    assert (st.bias ** 2).mean() / (st.variance.mean() / st.draws) > 1.15


def test_bad_input():
    with pytest.raises(ValueError, match="multiple of 16"):
        lab.block_stats(np.ones((3, 20), F32))
    with pytest.raises(ValueError, match="finite"):
        lab.block_stats(np.full((1, 16), np.nan, F32))
    with pytest.raises(ValueError, match="unknown quantizers"):
        lab.block_stats(np.ones((1, 16), F32), ("quartet",))
    with pytest.raises(ValueError, match="draws"):
        lab.block_stats(np.ones((1, 16), F32), draws=1)


def test_ms_eden_is_nearly_unbiased_with_lower_error_than_sr():
    """MS-EDEN on a Gaussian gradient, 64 draws: squared bias 1.16 +- 0.06 times
    variance / draws (6 seeds: nearly unbiased; sign-randomized Hadamard rotations make
    EDEN unbiased only approximately), and its mse about 0.57 of SR's."""
    g = np.random.default_rng(1).standard_normal((64, 64)).astype(F32)
    s = lab.block_stats(g, ("eden", "sr", "rtn"), draws=64, rng=3)
    e = s["eden"]
    assert (e.bias ** 2).mean() / (e.variance.mean() / e.draws) < 1.5
    assert e.mse.mean() < 0.7 * s["sr"].mse.mean()
    assert e.bias.mean() < 0.25 * s["rtn"].bias.mean()
