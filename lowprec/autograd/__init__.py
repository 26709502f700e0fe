"""A small array-level autograd engine, in the spirit of micrograd, with rounding as a visible op.

A :class:`Tensor` holds a numpy array (``data``), its gradient (``grad``), the
tensors it was computed from (``parents``) and a closure that pushes its
gradient back to them. :meth:`Tensor.backward` visits the graph in reverse
topological order. Only the operations a multilayer perceptron needs are here.

Precision loss is never hidden inside an op: rounding to a format is its own
node. :func:`round_value` rounds on the way forward and passes the gradient
through unchanged (straight-through); :func:`round_grad` leaves the value alone
and rounds the gradient flowing back, which is where activation gradients
underflow in FP16 training.

>>> import numpy as np
>>> from lowprec.autograd import Tensor
>>> x = Tensor(np.array([[1.0, -2.0]]))
>>> w = Tensor(np.array([[0.5], [-0.25]]), requires_grad=True)
>>> loss = (x @ w).relu().sum()
>>> loss.backward()
>>> w.grad.ravel().tolist()
[1.0, -2.0]
"""

from .tensor import (
    Tensor,
    cross_entropy,
    gelu,
    mse,
    round_grad,
    round_value,
)

__all__ = ["Tensor", "cross_entropy", "gelu", "mse", "round_grad", "round_value"]
