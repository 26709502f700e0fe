"""What the training experiments show, asserted on real (small) runs of the default task.

The underflow task (grad_exp = 18, 300 steps, seed 0) separates the presets by wide
margins: measured gaps are 5-20x the tolerances used here, and the same holds for seeds
1 and 2 (see docs/training.md for the tuning).
"""

from __future__ import annotations

import itertools
import json
import re
import sys

import numpy as np
import pytest

from lowprec.train import get_policy, get_task, list_policies, load_run, save_run, train

STEPS = 300
PRESETS = ("fp32", "fp16-naive", "fp16-master", "fp16-static", "fp16-amp", "bf16-pure",
           "bf16-pure-sr", "bf16-master")


@pytest.fixture(scope="module")
def runs():
    return {p: train(p, steps=STEPS, seed=0) for p in PRESETS}


def s(runs, name):
    return runs[name].summary


def test_fp16_naive_underflows_and_ends_clearly_worse(runs):
    naive, fp32 = s(runs, "fp16-naive"), s(runs, "fp32")
    assert naive["grad_underflow_pct"] > 30
    assert naive["final_loss"] > 1.25 * fp32["final_loss"]
    assert naive["final_acc"] < fp32["final_acc"] - 0.05
    # a master copy alone does not help: the gradients still underflow
    assert s(runs, "fp16-master")["grad_underflow_pct"] > 30
    assert s(runs, "fp16-master")["final_loss"] > 1.25 * fp32["final_loss"]


@pytest.mark.parametrize("name", ["fp16-amp", "fp16-static"])
def test_loss_scaling_tracks_fp32(runs, name):
    r, fp32 = s(runs, name), s(runs, "fp32")
    assert r["grad_underflow_pct"] < 5
    assert abs(r["final_loss"] - fp32["final_loss"]) < 0.02 * fp32["final_loss"]
    assert abs(r["final_acc"] - fp32["final_acc"]) < 0.02


def test_bf16_loses_almost_no_gradients_without_scaling(runs):
    for name in ("bf16-pure", "bf16-pure-sr", "bf16-master"):
        assert s(runs, name)["grad_underflow_pct"] < 0.1
        assert s(runs, name)["final_loss_scale"] == 1.0


def test_without_master_copy_small_updates_are_lost_and_training_stalls(runs):
    pure, master = runs["bf16-pure"], runs["bf16-master"]
    assert pure.summary["lost_update_pct"] > 50
    assert master.summary["lost_update_pct"] < 1
    assert s(runs, "fp16-naive")["lost_update_pct"] > 5
    assert pure.history["loss"][0] == master.history["loss"][0]  # same weights and batch
    # after all its steps, bf16-pure is still behind where bf16-master was at half of them
    half = master.history["eval_step"].index(STEPS // 2)
    assert pure.summary["final_loss"] > master.history["eval_loss"][half]
    assert pure.summary["final_acc"] < master.summary["final_acc"] - 0.05


def test_stochastic_rounding_recovers_most_of_it(runs):
    pure, sr, master = (s(runs, n)["final_loss"] for n in ("bf16-pure", "bf16-pure-sr",
                                                            "bf16-master"))
    assert sr - master < 0.2 * (pure - master)
    assert s(runs, "bf16-pure-sr")["lost_update_pct"] > 50  # most single updates still round away


def test_dynamic_scaler_trace_in_a_real_run():
    """From 2**40 the fp16 gradients overflow: halve and skip until they fit; then double
    after every `growth_interval` good steps, overflow, halve again (PyTorch's sawtooth)."""
    pol = get_policy("fp16-amp").replace(init_scale=2.0**40, growth_interval=20)
    r = train(pol, steps=150, seed=0)
    h = r.history
    scale, skipped = h["loss_scale"], h["skipped"]
    overflow = np.sum([h["grad_overflow"][layer] for layer in r.layers], axis=0)
    assert skipped[0] and scale[0] == 2.0**40
    good = 0
    for t in range(len(scale) - 1):
        assert skipped[t] == (overflow[t] > 0), f"step {t}"
        if skipped[t]:
            assert scale[t + 1] == scale[t] / 2, f"step {t}"
            good = 0
        else:
            good += 1
            if good == 20:
                assert scale[t + 1] == 2 * scale[t], f"step {t}"
                good = 0
            else:
                assert scale[t + 1] == scale[t], f"step {t}"
    n_skipped = sum(skipped)
    growths = sum(b == 2 * a for a, b in itertools.pairwise(scale))
    assert n_skipped >= 10 and growths >= 3
    assert r.summary["skipped_steps"] == n_skipped
    assert all(h["lost_updates"][layer][t] == 0 for layer in r.layers
               for t in range(len(scale)) if skipped[t])


def test_same_seed_same_run_bit_for_bit():
    for name in ("fp16-amp", "bf16-pure-sr"):
        a, b = (train(name, steps=40, seed=3, eval_every=20) for _ in range(2))
        assert json.dumps(a.history) == json.dumps(b.history)
        for k in a.grads:
            np.testing.assert_array_equal(a.grads[k], b.grads[k])
    c = train("bf16-pure-sr", steps=40, seed=4, eval_every=20)
    assert c.history["loss"] != a.history["loss"]


def test_fp32_is_unchanged_by_the_gradient_knob():
    """loss * 2^-k with lr * 2^k is exact in float32: the same run bit for bit."""
    a = train("fp32", steps=60, seed=1, grad_exp=0)
    b = train("fp32", steps=60, seed=1, grad_exp=18)
    assert a.history["loss"] == b.history["loss"]
    assert a.history["eval_loss"] == b.history["eval_loss"]


def test_results_round_trip_and_schema(tmp_path, runs):
    r = runs["fp16-amp"]
    save_run(r, tmp_path / "fp16-amp")
    back = load_run(tmp_path / "fp16-amp")
    assert back.history == json.loads(json.dumps(r.history))
    assert back.summary == r.summary and back.layers == ["fc1", "fc2", "fc3"]
    assert get_policy("fp16-amp").from_dict(back.policy_config) == get_policy("fp16-amp")
    h = back.history
    for key in ("step", "loss", "train_acc", "loss_scale", "skipped"):
        assert len(h[key]) == STEPS
    for key in ("grad_underflow", "grad_subnormal", "grad_overflow", "lost_updates"):
        assert set(h[key]) == set(back.layers) and all(len(v) == STEPS for v in h[key].values())
    assert h["eval_step"][-1] == STEPS
    pattern = re.compile(r"(act_grad|weight_grad)/fc[123]/step(0|150|299)")
    assert back.grads and all(pattern.fullmatch(k) for k in back.grads)
    assert all(v.dtype == np.float64 and v.size <= 100_000 for v in back.grads.values())
    with pytest.raises(ValueError, match="run.json"):
        load_run(tmp_path)


def test_gradient_samples_are_unscaled(runs):
    """At step 0 (same weights, same batch) the samples divided by the loss scale match the
    fp32 run's gradients to within FP16 rounding."""
    key = "act_grad/fc1/step0"
    amp, fp32 = runs["fp16-amp"].grads[key], runs["fp32"].grads[key]
    nz = fp32 != 0
    rel = np.abs(amp[nz] - fp32[nz]) / np.abs(fp32[nz])
    assert np.median(rel) < 2.0**-8
    assert np.median(np.abs(fp32[nz])) < 2.0**-24  # far below FP16's smallest subnormal


def test_policies_listed_with_descriptions():
    pols = list_policies()
    for name in ("fp32", "fp16-naive", "fp16-master", "fp16-static", "fp16-amp", "bf16-pure",
                 "bf16-pure-sr", "bf16-master", "fp8", "mxfp8", "mxfp4"):
        assert name in pols and len(pols[name]) > 20
    with pytest.raises(ValueError, match="presets: fp32"):
        get_policy("fp12")


def test_bad_arguments():
    with pytest.raises(ValueError, match="steps"):
        train("fp32", steps=0)
    with pytest.raises(ValueError, match="optimizer"):
        train("fp32", steps=2, optimizer="lbfgs")
    with pytest.raises(ValueError, match="task"):
        train("fp32", "mnist", steps=2)


def test_adam_and_regression():
    r = train("fp32", "regression", steps=200, optimizer="adam")
    assert r.summary["final_acc"] is None
    assert r.summary["final_loss"] < 0.5 * r.history["loss"][0]
    amp = train("fp16-amp", "regression", steps=200, optimizer="adam")
    assert abs(amp.summary["final_loss"] - r.summary["final_loss"]) < 0.05 * r.summary["final_loss"]


def test_digits():
    pytest.importorskip("sklearn")
    r = train("fp16-amp", "digits", steps=200)
    assert r.summary["final_acc"] > 0.9
    assert get_task("digits").x_train.shape == (1437, 64)


def test_digits_without_sklearn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ValueError, match=r"lowprec\[data\]"):
        get_task("digits")
