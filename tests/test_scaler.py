"""GradScaler: PyTorch's semantics (torch/amp/grad_scaler.py, _amp_update_scale_), and a
static scaler. Scenarios follow the rules stated in PyTorch's documentation."""

from __future__ import annotations

import numpy as np
import pytest

from lowprec.autograd import Tensor
from lowprec.train import SGD, GradScaler, StaticScaler


def make(grad: list[float]) -> tuple[SGD, Tensor]:
    p = Tensor(np.zeros(len(grad), np.float32), requires_grad=True)
    opt = SGD([p], lr=1.0, momentum=0.0)
    p.grad = np.asarray(grad, np.float32)
    return opt, p


def step(scaler: GradScaler, grad: list[float]) -> tuple[bool, np.ndarray]:
    """One scaler.step + update with the given (scaled) gradient; (stepped?, weights)."""
    opt, p = make(grad)
    scaler.step(opt)
    stepped = not scaler.found_inf()
    scaler.update()
    return stepped, p.data


def test_defaults_are_pytorchs():
    s = GradScaler()
    assert s.get_scale() == 2.0**16
    st = s.state_dict()
    assert (st["growth_factor"], st["backoff_factor"], st["growth_interval"]) == (2.0, 0.5, 2000)


def test_scale_multiplies_loss():
    s = GradScaler(init_scale=1024.0)
    loss = Tensor(np.float32(0.5), requires_grad=True)
    scaled = s.scale(loss)
    assert float(scaled.data) == 512.0
    scaled.backward()
    assert float(loss.grad) == 1024.0


def test_unscale_uses_float32_reciprocal_and_updates_weights():
    s = GradScaler(init_scale=3.0)
    stepped, w = step(s, [3.0, 6.0])
    inv = np.float32(1 / 3)  # 1/scale in double, rounded to float32 (as PyTorch)
    assert stepped
    np.testing.assert_array_equal(w, -(np.float32([3.0, 6.0]) * inv))


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_overflow_halves_and_skips(bad):
    s = GradScaler(init_scale=2.0**16)
    stepped, w = step(s, [1.0, bad])
    assert not stepped and np.all(w == 0)  # weights untouched
    assert s.get_scale() == 2.0**15


def test_growth_after_interval_and_tracker_reset_on_overflow():
    s = GradScaler(init_scale=8.0, growth_interval=3)
    trace = []
    for g in [1, 1, 1, 1, 1, np.inf, 1, 1, 1]:
        step(s, [float(g)])
        trace.append(s.get_scale())
    # 3 good steps -> x2; the overflow halves and restarts the count of good steps
    assert trace == [8, 8, 16, 16, 16, 8, 8, 8, 16]


def test_default_interval_is_2000_steps():
    s = GradScaler(init_scale=1.0)
    for _ in range(1999):
        step(s, [1.0])
    assert s.get_scale() == 1.0
    step(s, [1.0])
    assert s.get_scale() == 2.0


def test_scale_never_grows_to_float32_infinity():
    s = GradScaler(init_scale=2.0**127, growth_interval=1)
    step(s, [1.0])
    assert s.get_scale() == 2.0**127


def test_misuse_raises():
    s = GradScaler()
    opt, _ = make([1.0])
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="step"):
        s.step(opt)
    s.update()
    s.unscale_(opt)  # allowed again after update


def test_bad_arguments():
    with pytest.raises(ValueError, match="growth_factor"):
        GradScaler(growth_factor=1.0)
    with pytest.raises(ValueError, match="backoff_factor"):
        GradScaler(backoff_factor=1.5)
    with pytest.raises(ValueError, match="growth_interval"):
        GradScaler(growth_interval=0)


def test_disabled_scaler_is_transparent():
    s = GradScaler(enabled=False)
    loss = Tensor(np.float32(2.0))
    assert s.scale(loss) is loss and s.get_scale() == 1.0
    stepped, w = step(s, [1.0])
    assert stepped and w[0] == -1.0


def test_static_scaler_keeps_its_scale_and_skips_overflow():
    s = StaticScaler(2.0**12)
    for g in [1.0, np.inf, 1.0]:
        stepped, w = step(s, [g * 4096])
        assert stepped == np.isfinite(g)
        assert s.get_scale() == 2.0**12
        if stepped:
            assert w[0] == -1.0
