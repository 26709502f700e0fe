"""FP8 (delayed per-tensor scaling) and MX presets on real runs of the default task.
"""

from __future__ import annotations

import numpy as np
import pytest

from lowprec.train import train

STEPS = 300


@pytest.fixture(scope="module")
def runs():
    return {p: train(p, steps=STEPS, seed=0) for p in ("fp32", "fp8", "mxfp8", "mxfp4")}


def test_fp8_and_mxfp8_track_fp32_without_loss_scaling(runs):
    ref = runs["fp32"].summary
    for name in ("fp8", "mxfp8"):
        s = runs[name].summary
        assert s["final_loss_scale"] == 1.0 and s["skipped_steps"] == 0
        assert s["grad_underflow_pct"] < 1  # per-tensor / per-block scales keep them in range
        assert abs(s["final_loss"] - ref["final_loss"]) < 0.05 * ref["final_loss"]


def test_mxfp4_costs_accuracy_but_trains(runs):
    fp4, fp8 = runs["mxfp4"].summary, runs["mxfp8"].summary
    assert fp4["final_loss"] > fp8["final_loss"] + 0.03
    assert fp4["final_loss"] < 0.75 * runs["mxfp4"].history["loss"][0]


def test_delayed_scaling_warms_up_one_layer_per_step(runs):
    """Delayed scaling starts from scale 1 (Transformer Engine's initial value): the first
    step's E5M2 gradient at the last layer underflows completely; the layer below sees only
    zeros until the step after, and so on. Once every scale has history, nothing underflows."""
    h = runs["fp8"].history
    layers = runs["fp8"].layers
    n = len(layers)
    for k, layer in enumerate(reversed(layers)):
        assert h["act_grad_underflow"][layer][k] == 1.0
        assert np.mean(h["act_grad_underflow"][layer][n:]) < 0.01
    assert all(v is None for v in h["grad_subnormal"]["fc1"])  # scaled: no fixed threshold
