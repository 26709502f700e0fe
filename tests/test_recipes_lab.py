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


# -- FP4-All-the-Way's noise threshold (lab.noise_threshold)

def _sq_err(g, q):
    return float(np.sum((q.astype(np.float64) - g.astype(np.float64)) ** 2))


def test_noise_threshold_of_a_deterministic_quantizer_is_its_error():
    """rtn draws once: the noise is exactly the root of the summed squared error of the
    1x16 quantizer, the norm the tensor's."""
    g = _grad(3, (32, 48))
    (row,) = lab.noise_threshold(g, "rtn", rng=0)
    assert row.name == "tensor" and row.steps == 1 and row.size == g.size
    assert row.norm == pytest.approx(np.sqrt(np.sum(g.astype(np.float64) ** 2)), rel=1e-12)
    want = np.sqrt(_sq_err(g, lp.nvfp4.quantize(g).dequantize()))
    assert row.noise == pytest.approx(want, rel=1e-12)
    assert row.ratio == pytest.approx(row.norm / want, rel=1e-12)


def test_noise_threshold_estimates_the_exact_expected_noise_of_sr():
    """The recipe's stochastic rounding draws one byte per element: the exact expected
    squared error is the mean over all 256 bytes (every element given the same byte).
    64 draws of 2048 elements estimate it within a few tenths of a percent."""
    g = _grad(4, (32, 64))
    from lowprec.recipes import nvfp4

    exact = np.mean([_sq_err(g, nvfp4.quantize(g, rounding="stochastic", rbits=np.full(
        g.size, r, np.uint8)).dequantize()) for r in range(256)])
    (row,) = lab.noise_threshold({"fc/weight_grad@0": g}, "sr", draws=64, rng=7)
    assert row.name == "fc" and row.steps == 1
    assert row.noise ** 2 == pytest.approx(exact, rel=0.03)


def test_noise_threshold_averages_the_steps_and_flags_below_sqrt3():
    """Two steps whose gradients nearly cancel: the expected gradient (their mean) is
    small against each step's quantization noise, and the row says so; the same layer
    with agreeing steps is far above. Exact for the deterministic quantizer."""
    x = _grad(5, (16, 32))
    tiny = np.full_like(x, 1e-3)
    steps = {"l/weight_grad@0": x, "l/weight_grad@1": (-x + tiny).astype(F32),
             "m/weight_grad@0": x, "m/weight_grad@1": x, "m/input@0": x}
    rows = {r.name: r for r in lab.noise_threshold(steps, "rtn")}
    assert set(rows) == {"l", "m"} and rows["l"].steps == 2
    mean = (x.astype(np.float64) + (-x + tiny).astype(F32)) / 2
    assert rows["l"].norm == pytest.approx(np.sqrt(np.sum(mean ** 2)), rel=1e-12)
    q = [lp.nvfp4.quantize(t).dequantize() for t in (x, (-x + tiny).astype(F32))]
    noise2 = (_sq_err(x, q[0]) + _sq_err((-x + tiny).astype(F32), q[1])) / 2
    assert rows["l"].noise == pytest.approx(np.sqrt(noise2), rel=1e-12)
    assert rows["l"].below and rows["l"].ratio < lab.SQRT3
    assert not rows["m"].below and rows["m"].ratio > 10
    assert "sqrt(3)" in str(rows["l"]) and "sqrt(3)" not in str(rows["m"])


def test_noise_threshold_refuses_what_it_cannot_measure():
    g = _grad(6, (8, 16))
    with pytest.raises(ValueError, match="unknown quantizer"):
        lab.noise_threshold(g, "nearest")
    with pytest.raises(ValueError, match="no weight gradient"):
        lab.noise_threshold({"l/input@0": g})
    with pytest.raises(ValueError, match="differ in shape"):
        lab.noise_threshold({"l/weight_grad@0": g, "l/weight_grad@1": g[:4]})
    bad = g.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        lab.noise_threshold(bad)


def test_noise_threshold_takes_a_capture():
    torch = pytest.importorskip("torch")
    import lowprec.torch as lpt

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 16)
    with lpt.capture(model, max_values=1024) as cap:
        for _ in range(4):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
    rows = lab.noise_threshold(cap, draws=4, rng=0)
    assert sorted((r.name, r.steps, r.size) for r in rows) == [("0", 4, 512), ("2", 4, 256)]
    assert all(r.noise > 0 and np.isfinite(r.ratio) for r in rows)
    with lpt.capture(model, max_values=256) as small:  # layer 0's 512 values sampled
        model(x).square().mean().backward()
    with pytest.raises(ValueError, match="max_values"):
        lab.noise_threshold(small)
