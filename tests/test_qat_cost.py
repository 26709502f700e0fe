"""QAT against PTQ (real seeded runs) and the roofline cost estimate (hand computations)."""

from __future__ import annotations

import numpy as np
import pytest

from lowprec import mx, nvfp4
from lowprec.train import get_task, train, transformer_layer
from lowprec.train.cost import GPUS, compute_class, estimate
from lowprec.train.memory import Linear, ModelShape
from lowprec.train.policy import Quant
from lowprec.train.qat import compare_qat_ptq, evaluate, fake_quantize, qat_policy


@pytest.fixture(scope="module")
def comparison():
    # 4 runs of 300 steps on the underflow task (a few seconds each)
    return compare_qat_ptq("underflow", steps=300, seed=0)


def test_qat_recovers_what_4bit_ptq_loses(comparison):
    """The finding (seeds 0, 1, 2 and 300 or 600 steps all show it; this test runs seed 0,
    300 steps): quantizing an FP32-trained MLP's weights to a 4-bit format costs held-out
    loss; training with the rounding in the forward pass wins most of it back."""
    base = comparison.fp32_loss
    for row in comparison.rows:
        if row.format in ("mxfp4", "nvfp4"):
            ptq_gap, qat_gap = row.ptq_loss - base, row.qat_loss - base
            assert ptq_gap > 0.02, (row.format, ptq_gap)
            assert row.qat_loss < row.ptq_loss, row
            assert qat_gap < ptq_gap / 2, (row.format, ptq_gap, qat_gap)


def test_fp8_ptq_is_already_enough(comparison):
    """When does QAT not help: FP8 weights (E4M3, per-tensor scale) lose almost nothing
    after training, so there is nothing for QAT to recover."""
    row = next(r for r in comparison.rows if r.format == "fp8")
    assert abs(row.ptq_loss - comparison.fp32_loss) < 0.005
    assert row.ptq_loss - row.qat_loss < 0.005


def test_nvfp4_ptq_loses_less_than_mxfp4(comparison):
    """Blocks of 16 with E4M3 scales fit the weights better than blocks of 32 with
    power-of-two scales."""
    by = {r.format: r for r in comparison.rows}
    assert by["nvfp4"].ptq_loss < by["mxfp4"].ptq_loss


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4", "fp8"])
def test_evaluate_is_the_trainers_own_evaluation(fmt):
    """qat.evaluate (a separate forward pass) gives bit for bit the held-out loss the
    trainer computed for the QAT run at the end of training."""
    task = get_task("underflow", 0, grad_exp=0)
    run = train(qat_policy(fmt), task, steps=20, seed=0, record=False)
    loss, acc = evaluate(run.params, task, fmt)
    assert loss == run.summary["final_loss"]
    assert acc == run.summary["final_acc"]


def test_fake_quantize_is_the_real_quantizer():
    w = np.random.default_rng(1).standard_normal((40, 6)).astype(np.float32)
    np.testing.assert_array_equal(fake_quantize(w, "mxfp4"),
                                  mx.quantize(w, "mxfp4", axis=0).dequantize())
    np.testing.assert_array_equal(fake_quantize(w, "nvfp4"),
                                  nvfp4.quantize(w, axis=0).dequantize().astype(np.float32))
    # E4M3 with a power-of-two scale: at most 3 mantissa bits survive, relative error <= 2^-4
    q = fake_quantize(w, "fp8")
    assert np.all(np.abs(q - w) <= np.abs(w) * 2.0**-4)
    assert len(np.unique(q)) < len(np.unique(w))


def test_qat_bad_format():
    with pytest.raises(ValueError, match="inference format must be one of"):
        qat_policy("int4")
    with pytest.raises(ValueError, match="inference format must be one of"):
        compare_qat_ptq(formats=("fp4",), steps=1)


# ----------------------------------------------------------------- cost estimate
ONE = ModelShape("one", (Linear("l", 256, 512, bias=False),), (("x", 256),))


def test_cost_flops_and_bytes_by_hand():
    m, k, n = 8, 256, 512
    est = estimate(ONE, "fp32", gpu="h100-sxm", batch=m)
    (row,) = est.rows
    assert row.flops == 3 * 2 * m * k * n
    x, w, y = 4 * m * k, 4 * k * n, 4 * m * n
    # forward x,W -> y; dgrad dy,W -> dx; wgrad x,dy -> dW (all float32)
    assert row.bytes_moved == (x + w + y) + (y + w + x) + (x + y + w)
    peak, bw = 67e12, 3.35e12
    expect = 3 * max(2 * m * k * n / peak, (x + w + y) / bw)
    assert row.seconds == pytest.approx(expect, rel=1e-12)
    assert row.bound == "memory"  # 8 rows: intensity ~ 3.8 FLOP/byte < ridge 20


def test_compute_bound_speedup_is_the_peak_ratio():
    """A big layer is compute-bound: bf16 over fp32 is the ratio of the datasheet peaks
    (989.5 / 67 on H100); FP8 over bf16 is 2."""
    big = transformer_layer(4096, 16384, 2048)
    t = {p: estimate(big, p, gpu="h100-sxm", batch=8) for p in ("fp32", "bf16-master", "fp8")}
    assert all(r.bound == "compute" for e in t.values() for r in e.rows)
    assert t["fp32"].seconds / t["bf16-master"].seconds == pytest.approx(989.5 / 67)
    assert t["bf16-master"].seconds / t["fp8"].seconds == pytest.approx(2.0)


def test_memory_bound_speedup_is_only_the_byte_ratio():
    """The demo's tiny layers are memory-bound: bf16 gains only what its bytes shrink
    (about 2x), not the 15x of the peaks."""
    fp32 = estimate((32, 64, 64, 10), "fp32", gpu="h100-sxm", batch=64)
    bf16 = estimate((32, 64, 64, 10), "bf16-pure", gpu="h100-sxm", batch=64)
    for a, b in zip(fp32.rows, bf16.rows):
        assert a.bound == b.bound == "memory"
        assert a.seconds / b.seconds == pytest.approx(a.bytes_moved / b.bytes_moved)
        assert a.bytes_moved == 2 * b.bytes_moved


def test_fp4_needs_blackwell_and_text_says_estimate():
    big = transformer_layer(1024, 4096, 512)
    hopper = estimate(big, "mxfp4", gpu="h100-sxm", batch=1)
    assert hopper.seconds is None and {r.bound for r in hopper.rows} == {"unsupported"}
    blackwell = estimate(big, "mxfp4", gpu="b200", batch=1, measured={"q": 1e-4})
    assert blackwell.seconds is not None and blackwell.rows[0].measured_seconds == 1e-4
    text = str(blackwell)
    assert text.startswith("ESTIMATE, NOT A MEASUREMENT")
    assert GPUS["b200"].source in text


def test_compute_classes():
    assert compute_class(None) == "fp32"
    assert compute_class(Quant("fp8_e5m2")) == "fp8"
    assert compute_class(Quant("nvfp4", scaling="nvfp4")) == "fp4"
    assert compute_class(Quant("mxfp6_e3m2", scaling="mx")) == "fp6"


def test_cost_bad_input():
    with pytest.raises(ValueError, match="unknown GPU 'a100'; known: h100-sxm"):
        estimate(ONE, "fp32", gpu="a100")
    with pytest.raises(ValueError, match="measured times for unknown layers"):
        estimate(ONE, "fp32", measured={"fc9": 1.0})
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        estimate(ONE, "fp32", batch=-1)
