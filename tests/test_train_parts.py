"""Pieces of the trainer checked against direct counts: gradient-rounding statistics,
lost updates in the optimizers, policies."""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp
from lowprec.autograd import Tensor
from lowprec.train import SGD, Adam, Policy, Quant, get_policy
from lowprec.train.quant import SiteStats


def test_site_stats_match_direct_counts():
    rng = np.random.default_rng(0)
    g = (rng.standard_normal(10_000) * 2.0 ** rng.uniform(-30, 20, 10_000)).astype(np.float32)
    g[::7] = 0
    r = lp.round_to(g, "fp16")
    st = SiteStats()
    with np.errstate(over="ignore"):
        st.record(g, r, lp.get_format("fp16").smallest_normal)
    nz = g != 0
    assert st.nonzero == nz.sum()
    assert st.underflow == (nz & (r == 0)).sum() > 0
    sub = (np.abs(r) > 0) & (np.abs(r) < 2.0**-14)
    assert st.subnormal == sub.sum() > 0
    assert st.overflow == np.isinf(r).sum() > 0
    uf, sf = st.fractions()
    assert uf == st.underflow / st.nonzero and sf == st.subnormal / st.nonzero


def test_sgd_without_master_loses_updates_below_half_an_ulp():
    # bf16 spacing at 1.0 is 2**-7: an update of 2**-9 is lost, 2**-7 is kept
    p = Tensor(np.ones(4, np.float32), requires_grad=True)
    opt = SGD([p], lr=1.0, momentum=0.0, store=lambda x: lp.round_to(x, "bf16"))
    p.grad = np.array([2.0**-9, 2.0**-7, 0.0, -(2.0**-9)], np.float32)
    (lost, moved), = opt.step()
    assert (lost, moved) == (2, 3)
    np.testing.assert_array_equal(p.data, [1.0, 1.0 - 2.0**-7, 1.0, 1.0])


def test_stochastic_rounding_keeps_small_updates_on_average():
    p = Tensor(np.ones(20_000, np.float32), requires_grad=True)
    rng = np.random.default_rng(1)
    opt = SGD([p], lr=1.0, momentum=0.0,
              store=lambda x: lp.round_to(x, "bf16", "stochastic", rng=rng))
    p.grad = np.full(20_000, 2.0**-10, np.float32)  # 1/4 of the spacing below 1.0 (2**-8)
    opt.step()
    # expected value preserved: mean within 4 standard errors
    drift = 1.0 - p.data.mean()
    sd = 2.0**-8 * np.sqrt(0.25 * 0.75 / 20_000)
    assert abs(drift - 2.0**-10) < 4 * sd


def test_momentum_and_adam_state_rounding():
    p = Tensor(np.zeros(3, np.float32), requires_grad=True)
    opt = SGD([p], lr=0.5, momentum=0.9, state=lambda x: lp.round_to(x, "fp16"))
    for _ in range(2):
        p.grad = np.array([1e-8, 1.0, 1 / 3], np.float32)
        opt.step()
    v = opt.velocity[0]
    np.testing.assert_array_equal(v, lp.round_to(np.float32(0.9) * lp.round_to(
        np.array([1e-8, 1.0, 1 / 3], np.float32), "fp16") + np.array([1e-8, 1.0, 1 / 3],
                                                                        np.float32), "fp16"))
    a = Tensor(np.zeros(2, np.float32), requires_grad=True)
    adam = Adam([a], lr=0.1)
    a.grad = np.array([1.0, -2.0], np.float32)
    adam.step()  # first Adam step moves every weight by lr against the gradient's sign
    np.testing.assert_allclose(a.data, [-0.1, 0.1], rtol=1e-6)
    with pytest.raises(ValueError, match="learning rate"):
        SGD([a], lr=0.0)


def test_policy_validation_and_round_trip():
    with pytest.raises(ValueError, match="scaling"):
        Quant("fp16", scaling="per-row")
    with pytest.raises(ValueError, match="rounding mode"):
        Quant("fp16", mode="nearest-ish")
    with pytest.raises(ValueError, match="MX format"):
        Quant("fp8_e4m3", scaling="mx")
    with pytest.raises(ValueError, match="loss_scaling"):
        Policy("x", "y", loss_scaling="auto")
    with pytest.raises(ValueError, match="master"):
        Policy("x", "y", weights=Quant("mxfp4", scaling="mx"))
    assert Quant("half").format == "fp16" and Quant("fp16", "sr").mode == "stochastic"
    for name in ("fp16-amp", "bf16-pure-sr", "mxfp4"):
        p = get_policy(name)
        assert Policy.from_dict(p.to_dict()) == p


def test_accumulation_model_from_lowprec_matmul():
    from lowprec.train import train

    fp32 = train("fp16-amp", steps=3, eval_every=3)
    fp16 = train(get_policy("fp16-amp").replace(accumulate="fp16:sequential"), steps=3,
                 eval_every=3)
    assert fp16.policy_config["accumulate"] == "fp16:sequential"
    assert fp16.history["loss"] != fp32.history["loss"]  # FP16 sums round differently
