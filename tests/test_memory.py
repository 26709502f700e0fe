"""lowprec.train.memory: exact bytes per tensor role, against hand computations.

The model is the two-layer MLP 40-8-3: fc1 has W (40, 8) and b (8,), fc2 W (8, 3) and
b (3,), so 320 + 8 + 24 + 3 = 355 parameters. MX blocks run along the 40 and 8 inputs:
fc1's 40 rows make two blocks per column (the second padded from 8 to 32 values), fc2's
8 rows one padded block per column: 2 * 8 + 1 * 3 = 19 blocks of 32 slots.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from lowprec import mx, nvfp4, scaling
from lowprec.train import POLICIES, memory, transformer_layer
from lowprec.train.memory import Linear, ModelShape, tensor_bytes
from lowprec.train.policy import Quant

SIZES = (40, 8, 3)
W_VALUES = 320 + 24          # weight matrix values
B_VALUES = 8 + 3             # bias values
N = W_VALUES + B_VALUES      # 355 parameters
MX_BLOCKS = 2 * 8 + 1 * 3    # blocks of 32 along the input axis of each weight matrix
ACT_VALUES = 40 + 8          # per example: the input of fc1 and of fc2
HISTORY = 4 + 4 * 1024       # delayed scaling: an FP32 scale and 1024 FP32 amax values


def _mx_bytes(elem_bits: int) -> int:
    return MX_BLOCKS + MX_BLOCKS * 32 * elem_bits // 8


# Hand-written per policy, from the preset descriptions in lowprec/train/policy.py:
# (master, weights, weight_grads, one optimizer state tensor, activations per example)
HAND = {
    "fp32": (0, 4 * N, 4 * N, 4 * N, 4 * ACT_VALUES),
    "fp16-naive": (0, 2 * N, 2 * N, 2 * N, 2 * ACT_VALUES),
    "fp16-master": (4 * N, 2 * N, 2 * N, 4 * N, 2 * ACT_VALUES),
    "fp16-static": (4 * N, 2 * N, 2 * N, 4 * N, 2 * ACT_VALUES),
    "fp16-amp": (4 * N, 2 * N, 2 * N, 4 * N, 2 * ACT_VALUES),
    "bf16-pure": (0, 2 * N, 2 * N, 2 * N, 2 * ACT_VALUES),
    "bf16-pure-sr": (0, 2 * N, 2 * N, 2 * N, 2 * ACT_VALUES),
    "bf16-master": (4 * N, 2 * N, 2 * N, 4 * N, 2 * ACT_VALUES),
    # scaled weights: the two matrices get a low-precision copy, the biases are read from
    # the FP32 master; weight gradients stay FP32
    "fp8": (4 * N, W_VALUES + 2 * HISTORY, 4 * N, 4 * N, None),
    "mxfp8": (4 * N, _mx_bytes(8), 4 * N, 4 * N, None),
    "mxfp4": (4 * N, _mx_bytes(4), 4 * N, 4 * N, None),
    # GEMM-format presets: bf16 roles as bf16-master; the operands each GEMM quantizes
    # (NVFP4 / MXFP8) are transient copies, not stored tensors, and are not counted
    "nvfp4": (4 * N, 2 * N, 4 * N, 4 * N, 2 * ACT_VALUES),
    "mxfp8-torchao": (4 * N, 2 * N, 4 * N, 4 * N, 2 * ACT_VALUES),
}


def test_every_preset_has_a_hand_computation():
    assert set(HAND) == set(POLICIES)


@pytest.mark.parametrize("optimizer,n_states", [("sgd", 1), ("adam", 2)])
@pytest.mark.parametrize("policy", list(HAND))
def test_weight_side_bytes_by_hand(policy, optimizer, n_states):
    t = memory(SIZES, policy, batch=5, optimizer=optimizer)
    master, weights, grads, state, _ = HAND[policy]
    assert t.n_params == N
    assert t.bytes_of("master") == master
    assert t.bytes_of("weights") == weights
    assert t.bytes_of("weight_grads") == grads
    assert t.bytes_of("optimizer_state") == n_states * state
    assert t.weight_side_bytes() == master + weights + grads + n_states * state
    assert t.weight_side_per_param() == Fraction(master + weights + grads + n_states * state, N)


@pytest.mark.parametrize("policy", list(HAND))
def test_activation_bytes_by_hand(policy):
    batch = 5
    t = memory(SIZES, policy, batch=batch)
    per_example = HAND[policy][4]
    if per_example is not None:
        expected = batch * per_example
    elif policy == "fp8":  # two saved tensors, each E4M3 with its own scale and history
        expected = batch * ACT_VALUES + 2 * HISTORY
    else:  # MX along the features: fc1 input 40 -> 2 blocks, fc2 input 8 -> 1 block
        bits = 8 if policy == "mxfp8" else 4
        blocks = batch * (2 + 1)
        expected = blocks + blocks * 32 * bits // 8
    assert t.bytes_of("activations") == expected


def test_block_scaled_sizes_agree_with_real_quantized_tensors():
    """tensor_bytes against the nbytes of tensors lowprec really quantized."""
    rng = np.random.default_rng(0)
    for shape, axis in (((40, 8), 0), ((8, 3), 0), ((5, 40), -1), ((3, 17), -1)):
        x = rng.standard_normal(shape)
        for fmt in ("mxfp4", "mxfp8_e4m3", "mxfp6_e3m2"):
            real = mx.quantize(x, fmt, axis=axis).nbytes
            assert tensor_bytes(shape, Quant(fmt, scaling="mx"), axis) == real, (fmt, shape)
        assert tensor_bytes(shape, Quant("nvfp4", scaling="nvfp4"), axis) == \
            nvfp4.quantize(x, axis=axis).nbytes
        per_tensor = scaling.quantize_per_tensor(x, "fp8_e4m3").nbytes  # codes + one scale
        assert tensor_bytes(shape, Quant("fp8_e4m3", scaling="delayed")) == \
            per_tensor + 4 * 1024


def test_master_and_adam_do_not_shrink_the_weight_side():
    """The issue's lesson, asserted: with an FP32 master copy and Adam the weight-side
    bytes per parameter do not halve; they stay at FP32's 16 (16-bit recipes) or go up
    (FP8 and MX recipes, which also keep FP32 weight gradients); only recipes without a
    master copy halve them. Activations do shrink."""
    shape = transformer_layer(4096, 16384, 2048)
    t = {p: memory(shape, p, batch=4, optimizer="adam") for p in POLICIES}
    fp32 = t["fp32"].weight_side_per_param()
    assert fp32 == 16
    for p in ("fp16-master", "fp16-static", "fp16-amp", "bf16-master"):
        assert t[p].weight_side_per_param() == fp32, p
    for p in ("fp8", "mxfp8", "mxfp4"):
        assert t[p].weight_side_per_param() > fp32, p
    assert t["mxfp8"].weight_side_per_param() == Fraction(4 + 1 + Fraction(1, 32) + 4 + 8)
    assert t["mxfp4"].weight_side_per_param() == Fraction(4 + Fraction(1, 2) + Fraction(1, 32)
                                                          + 4 + 8)
    for p in ("fp16-naive", "bf16-pure", "bf16-pure-sr"):
        assert t[p].weight_side_per_param() == fp32 / 2, p
    for p in ("fp16-amp", "bf16-master", "bf16-pure"):
        assert t[p].bytes_of("activations") * 2 == t["fp32"].bytes_of("activations"), p


def test_transformer_layer_shapes():
    t = transformer_layer(8, 32, 3, bias=True)
    assert t.n_params == 4 * (8 * 8 + 8) + (8 * 32 + 32) + (32 * 8 + 8)
    m = memory(t, "fp32", batch=2)
    assert m.bytes_of("activations") == 4 * 2 * 3 * (8 + 8 + 8 + 32)


def test_custom_shape_and_table_text():
    shape = ModelShape("one layer", (Linear("only", 4, 2, bias=False),), (("x", 4),))
    m = memory(shape, "bf16-master", batch=3, optimizer="adam")
    assert m.weight_side_bytes() == 8 * (4 + 2 + 2 + 8)
    text = str(m)
    assert "master" in text and "weight side" in text and "16" in text


@pytest.mark.parametrize("kwargs,match", [
    ({"optimizer": "rmsprop"}, "optimizer must be one of"),
    ({"batch": 0}, "batch must be a positive integer"),
    ({"batch": 1.5}, "batch must be a positive integer"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        memory(SIZES, "fp32", **kwargs)


def test_bad_model_and_policy():
    with pytest.raises(ValueError, match="at least two positive"):
        memory((5,), "fp32")
    with pytest.raises(ValueError, match="unknown policy"):
        memory(SIZES, "fp7")
    with pytest.raises(ValueError, match="d_ff must be a positive integer"):
        transformer_layer(8, 0, 4)
    with pytest.raises(ValueError, match="role must be one of"):
        memory(SIZES, "fp32").bytes_of("gradients")
