"""Finite-difference gradient checks (float64) for every op of lowprec.autograd."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import lowprec as lp
from lowprec.autograd import Tensor, cross_entropy, gelu, mse, round_grad, round_value
from lowprec.autograd.tensor import matmul

RNG = np.random.default_rng(1234)


def numeric_grad(f: Callable[[list[np.ndarray]], float], arrays: list[np.ndarray], i: int,
                 h: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar f with respect to arrays[i]."""
    g = np.zeros_like(arrays[i])
    for idx in np.ndindex(arrays[i].shape):
        old = arrays[i][idx]
        arrays[i][idx] = old + h
        up = f(arrays)
        arrays[i][idx] = old - h
        down = f(arrays)
        arrays[i][idx] = old
        g[idx] = (up - down) / (2 * h)
    return g


def check(build: Callable[[list[Tensor]], Tensor], *shapes: tuple[int, ...],
          positive: bool = False) -> None:
    """Gradients of sum(build(...) * weights) against finite differences, every input."""
    arrays = [RNG.standard_normal(s) for s in shapes]
    if positive:
        arrays = [np.abs(a) + 0.5 for a in arrays]
    out_shape = build([Tensor(a) for a in arrays]).shape
    weights = RNG.standard_normal(out_shape)  # a random linear functional of the output

    def f(arrs: list[np.ndarray]) -> float:
        return float(np.sum(build([Tensor(a) for a in arrs]).data * weights))

    ts = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    (build(ts) * Tensor(weights)).sum().backward()
    for i, t in enumerate(ts):
        want = numeric_grad(f, arrays, i)
        np.testing.assert_allclose(t.grad, want, rtol=1e-6, atol=1e-8,
                                   err_msg=f"gradient of input {i}")


def test_add_broadcast():
    check(lambda t: t[0] + t[1], (4, 3), (3,))
    check(lambda t: t[0] + t[1], (4, 1), (1, 5))


def test_mul_broadcast():
    check(lambda t: t[0] * t[1], (4, 3), (3,))
    check(lambda t: t[0] * t[1], (2, 3), (2, 3))
    check(lambda t: t[0] * 2.5, (3, 2))


def test_sub_neg():
    check(lambda t: t[0] - t[1], (3, 4), (4,))
    check(lambda t: -t[0], (5,))


def test_matmul():
    check(lambda t: t[0] @ t[1], (4, 3), (3, 5))


def test_matmul_custom_product_used_both_ways():
    calls = []

    def product(a, b):
        calls.append((a.shape, b.shape))
        return a @ b

    a = Tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    b = Tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    matmul(a, b, product).sum().backward()
    assert calls == [((4, 3), (3, 2)), ((4, 2), (2, 3)), ((3, 4), (4, 2))]


def test_relu_tanh_gelu():
    # keep relu's inputs away from its kink at 0, where finite differences are undefined
    check(lambda t: (t[0] * t[1]).relu(), (6, 4), (6, 4), positive=False)
    check(lambda t: t[0].tanh(), (3, 4))
    check(lambda t: gelu(t[0]), (3, 4))


def test_sum_mean():
    check(lambda t: t[0].sum(), (3, 4))
    check(lambda t: t[0].sum(axis=0), (3, 4))
    check(lambda t: t[0].sum(axis=1), (3, 4))
    check(lambda t: t[0].mean(), (3, 4))
    check(lambda t: t[0].mean(axis=1), (3, 4))


def test_cross_entropy():
    labels = RNG.integers(0, 5, 6)
    check(lambda t: cross_entropy(t[0], labels), (6, 5))
    # large logits: the log-softmax must stay finite and exact
    z = Tensor(np.array([[1000.0, 0.0], [0.0, -1000.0]]), requires_grad=True)
    loss = cross_entropy(z, np.array([0, 0]))
    loss.backward()
    assert loss.data == 0.0 and np.all(np.isfinite(z.grad))


def test_cross_entropy_rejects_bad_labels():
    with pytest.raises(ValueError, match="labels"):
        cross_entropy(Tensor(np.zeros((3, 2))), np.array([0.0, 1.0, 0.0]))


def test_mse():
    target = RNG.standard_normal((5, 3))
    check(lambda t: mse(t[0], target), (5, 3))
    with pytest.raises(ValueError, match="shape"):
        mse(Tensor(np.zeros((2, 2))), np.zeros(3))


def test_mlp_composition():
    labels = RNG.integers(0, 3, 5)
    check(lambda t: cross_entropy((t[0] @ t[1] + t[2]).relu() @ t[3], labels),
          (5, 4), (4, 6), (6,), (6, 3))


def test_shared_node_accumulates():
    x = Tensor(np.array([1.5, -2.0]), requires_grad=True)
    y = x * x + x  # x used three times
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * x.data + 1)


def test_round_value_is_straight_through():
    x = np.array([0.1, 1 / 3, 1e-9, 70000.0])
    t = Tensor(x, requires_grad=True)
    r = round_value(t, lambda a: lp.round_to(a, "fp16"))
    np.testing.assert_array_equal(r.data, lp.round_to(x, "fp16"))
    g = np.array([1e-3, -2.0, 1e-9, 5.0])
    r.backward(g)
    np.testing.assert_array_equal(t.grad, g)  # passed back unchanged


def test_round_grad_rounds_only_the_gradient():
    x = np.array([0.1, 1 / 3, 2.0])
    t = Tensor(x, requires_grad=True)
    r = round_grad(t, lambda a: lp.round_to(a, "fp16"))
    np.testing.assert_array_equal(r.data, x)  # value untouched
    g = np.array([1e-9, 1 / 3, 2.0**-24 * 0.75])  # underflows, rounds, rounds up to 2^-24
    r.backward(g)
    np.testing.assert_array_equal(t.grad, [0.0, lp.round_to(1 / 3, "fp16"), 2.0**-24])


def test_float32_stays_float32():
    a = Tensor(np.ones((2, 3), np.float32), requires_grad=True)
    b = Tensor(np.ones((3, 1), np.float32), requires_grad=True)
    out = (a @ b).relu().sum()
    out.backward()
    assert out.data.dtype == np.float32 and a.grad.dtype == np.float32


def test_reflected_operators_against_finite_differences():
    check(lambda t: 1.0 - t[0], (3, 2))
    check(lambda t: 2.0 / t[0], (4,), positive=True)
    check(lambda t: 2 * t[0] + 3, (2, 3))
    check(lambda t: np.float64(0.5) - t[0] / t[1], (3, 4), (4,), positive=True)
    check(lambda t: t[0] ** 3 - t[0] ** -0.5, (5,), positive=True)


def test_reflected_operators_exact_rationals():
    """Dyadic inputs: every value and gradient below is exact in float64."""
    x = Tensor(np.array([4.0, -0.5, 0.25]), requires_grad=True)
    y = 1.0 - 2.0 / x            # 1 - 2/x; dy/dx = 2 / x**2
    np.testing.assert_array_equal(y.data, [0.5, 5.0, -7.0])
    y.backward()
    np.testing.assert_array_equal(x.grad, [0.125, 8.0, 32.0])
    z = Tensor(np.array([3.0]), requires_grad=True)
    w = -(2 * z) ** 2 / 4.0      # -z**2; dw/dz = -2z
    w.backward()
    np.testing.assert_array_equal(w.data, [-9.0])
    np.testing.assert_array_equal(z.grad, [-6.0])


def test_reflected_operators_keep_float32():
    t = Tensor(np.array([2.0, 4.0], np.float32), requires_grad=True)
    for out in (1.0 - t, 2.0 / t, 2 * t, 3 + t, -t, t ** 2, np.float32(1) - t):
        assert out.data.dtype == np.float32, out.op


def test_pow_rejects_a_tensor_exponent():
    with pytest.raises(TypeError, match="exponent must be a number"):
        Tensor(2.0) ** Tensor(3.0)


def test_backward_closures_are_named_by_op():
    x = Tensor(np.array([[1.0, -2.0]]), requires_grad=True)
    w = Tensor(np.array([[0.5], [0.25]]), requires_grad=True)
    nodes = {
        "add": x + 1.0, "mul": 2.0 * x, "div": x / 2.0, "pow": x ** 2, "relu": x.relu(),
        "tanh": x.tanh(), "sum": x.sum(), "matmul": x @ w, "gelu": gelu(x),
        "mse": mse(x, np.zeros((1, 2))), "cross_entropy": cross_entropy(x, np.array([1])),
        "round_weights": round_value(x, lambda a: a, "round_weights"),
        "round_act_grad": round_grad(x, lambda a: a, "round_act_grad"),
    }
    for op, node in nodes.items():
        assert node.op == op
        assert node._backward.__name__ == node.grad_fn_name == f"{op}_backward"
        assert f"{op}_backward" in repr(node._backward)
    assert x.grad_fn_name is None and (1.0 - x).grad_fn_name == "add_backward"
