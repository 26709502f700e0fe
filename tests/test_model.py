"""lowprec.train.model: the plain Layer/MLP, and Network as an MLP with a policy's roundings."""

from __future__ import annotations

import numpy as np

import lowprec as lp
from lowprec.autograd import Tensor
from lowprec.train import get_policy
from lowprec.train.model import MLP, Layer, Network, Roundings

SIZES = (6, 5, 4, 3)


def _graph_ops(out: Tensor) -> list[str]:
    """The op of every node of the graph behind ``out``, depth first, parents in order."""
    ops, stack, seen = [], [out], set()
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        ops.append(t.op or "leaf")
        stack.extend(reversed(t.parents))
    return ops


def test_mlp_is_relu_of_affine_maps_computed_by_numpy():
    """Each layer in numpy's float32 elementwise operations, the products added in k order
    (the trainer's matmul: the same bits on every machine, unlike the BLAS's)."""
    mlp = MLP(SIZES, np.random.default_rng(7))
    x = np.random.default_rng(8).standard_normal((9, SIZES[0])).astype(np.float32)
    h = x
    for i, layer in enumerate(mlp.layers):
        assert (layer.name, layer.w.shape, layer.relu) == (f"fc{i + 1}", SIZES[i:i + 2],
                                                           i < len(SIZES) - 2)
        acc = np.zeros((h.shape[0], layer.w.shape[1]), np.float32)
        for k in range(h.shape[1]):
            acc = acc + h[:, k:k + 1] * layer.w.data[k]
        np.testing.assert_allclose(acc, h @ layer.w.data, rtol=1e-5, atol=1e-6)
        h = acc + layer.b.data
        h = np.maximum(h, 0) if layer.relu else h
    np.testing.assert_array_equal(mlp(x).data, h)
    assert mlp.parameters() == [p for layer in mlp.layers for p in (layer.w, layer.b)]


def test_layer_gradients_match_the_chain_rule():
    layer = Layer(3, 2, np.random.default_rng(0), relu=False)
    layer.w.data, layer.b.data = layer.w.data.astype(np.float64), layer.b.data.astype(np.float64)
    x = np.array([[1.0, -2.0, 0.5], [0.25, 4.0, -1.0]])
    layer(Tensor(x)).sum().backward()
    np.testing.assert_array_equal(layer.w.grad, x.sum(axis=0)[:, None] * np.ones((1, 2)))
    np.testing.assert_array_equal(layer.b.grad, [2.0, 2.0])


def test_network_without_roundings_is_the_plain_mlp():
    net = Network(SIZES, get_policy("fp32"), np.random.default_rng(3))
    mlp = MLP(SIZES, np.random.default_rng(3))
    for a, b in zip(net.parameters(), mlp.parameters()):
        np.testing.assert_array_equal(a.data, b.data)
    x = np.random.default_rng(4).standard_normal((5, SIZES[0])).astype(np.float32)
    np.testing.assert_array_equal(net(x).data, mlp(x).data)
    np.testing.assert_array_equal(net(x, train=False).data, mlp(x).data)


def test_each_layer_carries_its_own_roundings():
    net = Network(SIZES, get_policy("fp8"), np.random.default_rng(0))
    outs = [layer.train_rounds.out for layer in net.layers]
    assert all(r is not None for r in outs) and len({id(r) for r in outs}) == len(outs)
    assert all(isinstance(layer.grad_rounds, Roundings) for layer in net.layers)


def test_fp16_amp_graph_rounds_where_the_docstring_says():
    net = Network(SIZES, get_policy("fp16-amp"), np.random.default_rng(1))
    x = np.random.default_rng(2).standard_normal((4, SIZES[0])).astype(np.float32)
    out = net(x)
    ops = _graph_ops(out)
    n = len(SIZES) - 1
    assert ops.count("matmul") == n and ops.count("relu") == n - 1
    assert ops.count("round_act_grad") == n and ops.count("round_activations") == n
    assert ops.count("round_weights") == 2 * n and ops.count("round_weight_grad") == 2 * n
    # the compute copies are the master weights rounded to fp16, cast in one call
    w = net.layers[0].w
    cast = net.cast_weights()[0].weights(w.data)
    np.testing.assert_array_equal(cast, lp.round_to(w.data, "fp16"))
    # evaluation builds no gradient roundings
    assert "round_act_grad" not in _graph_ops(net(x, train=False))
