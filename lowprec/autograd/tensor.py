"""The :class:`Tensor` and its operations (see the package docstring).

Each op computes its value with numpy and attaches a ``_backward`` closure that,
given ``g`` (the gradient of the objective with respect to the op's output), adds
the op's contribution to its parents' gradients (chain rule). The closure is
named after the op (``mul_backward`` for a product), so a graph can be read node
by node. Gradients have the dtype of the data (float32 in training, float64 in
gradient checks).

Numbers work on either side of an operator (``1.0 - t``, ``2.0 / t``, ``2 * t``):
they become constant leaves of the graph.

>>> t = Tensor(4.0, requires_grad=True)
>>> y = 2.0 / t - 1.0
>>> y.backward()
>>> float(y.data), float(t.grad), t.grad_fn_name, y.grad_fn_name
(-0.5, -0.125, None, 'add_backward')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

ArrayFn = Callable[[np.ndarray], np.ndarray]


def _unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` over the axes that broadcasting added or stretched to reach ``shape``."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, n in enumerate(shape):
        if n == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad


class Tensor:
    """An array that remembers how it was computed.

    Parameters
    ----------
    data:
        The value (converted to a numpy float array; float32 stays float32).
    requires_grad:
        Whether :meth:`backward` should fill ``grad`` for this leaf.
    parents, op:
        Set by the operations; users leave them out.
    """

    __array_priority__ = 1000  # numpy scalars and arrays defer to Tensor's operators

    def __init__(
        self,
        data: np.ndarray | float,
        *,
        requires_grad: bool = False,
        parents: Sequence[Tensor] = (),
        op: str = "",
    ) -> None:
        arr = np.asarray(data)
        if arr.dtype.kind != "f":
            arr = arr.astype(np.float64)
        self.data: np.ndarray = arr
        self.grad: np.ndarray | None = None
        self.parents: tuple[Tensor, ...] = tuple(parents)
        self.op = op
        self.requires_grad: bool = requires_grad or any(p.requires_grad for p in self.parents)
        self._backward: Callable[[np.ndarray], None] = _leaf_backward

    def __repr__(self) -> str:
        return f"Tensor(shape={self.data.shape}, dtype={self.data.dtype}, op={self.op or 'leaf'!r})"

    @property
    def grad_fn_name(self) -> str | None:
        """The name of the closure that pushes this node's gradient back, such as
        ``"mul_backward"``; None for a leaf."""
        return None if not self.parents else self._backward.__name__

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    def _add_grad(self, g: np.ndarray) -> None:
        if not self.requires_grad:
            return
        g = _unbroadcast(g, self.data.shape)
        self.grad = g.astype(self.data.dtype, copy=True) if self.grad is None else self.grad + g

    # ---- arithmetic -------------------------------------------------------------------------

    def __add__(self, other: Tensor | float) -> Tensor:
        other = _as_tensor(other, self.data.dtype)
        out = Tensor(self.data + other.data, parents=(self, other), op="add")

        def add_backward(g: np.ndarray) -> None:
            self._add_grad(g)
            other._add_grad(g)

        out._backward = add_backward
        return out

    __radd__ = __add__

    def __mul__(self, other: Tensor | float) -> Tensor:
        other = _as_tensor(other, self.data.dtype)
        out = Tensor(self.data * other.data, parents=(self, other), op="mul")

        def mul_backward(g: np.ndarray) -> None:
            self._add_grad(g * other.data)
            other._add_grad(g * self.data)

        out._backward = mul_backward
        return out

    __rmul__ = __mul__

    def __truediv__(self, other: Tensor | float) -> Tensor:
        other = _as_tensor(other, self.data.dtype)
        out = Tensor(self.data / other.data, parents=(self, other), op="div")

        def div_backward(g: np.ndarray) -> None:  # d(a/b) = da / b - a db / b**2
            self._add_grad(g / other.data)
            other._add_grad(-g * self.data / (other.data * other.data))

        out._backward = div_backward
        return out

    def __pow__(self, k: float) -> Tensor:
        """``self ** k`` for a constant number ``k``; d(x**k) = k x**(k-1)."""
        if isinstance(k, Tensor):
            raise TypeError("Tensor ** Tensor is not supported; the exponent must be a number")
        out = Tensor(self.data**k, parents=(self,), op="pow")

        def pow_backward(g: np.ndarray) -> None:
            self._add_grad(g * (k * self.data ** (k - 1)))

        out._backward = pow_backward
        return out

    def __neg__(self) -> Tensor:
        return self * -1.0

    def __sub__(self, other: Tensor | float) -> Tensor:
        return self + (-_as_tensor(other, self.data.dtype))

    # A number on the left (``1.0 - t``, ``2.0 / t``) becomes a constant leaf.
    def __rsub__(self, other: float) -> Tensor:
        return _as_tensor(other, self.data.dtype) - self

    def __rtruediv__(self, other: float) -> Tensor:
        return _as_tensor(other, self.data.dtype) / self

    def __matmul__(self, other: Tensor) -> Tensor:
        return matmul(self, other)

    def relu(self) -> Tensor:
        """max(x, 0); the gradient is 1 where x > 0 and 0 elsewhere (also at 0)."""
        out = Tensor(np.maximum(self.data, 0), parents=(self,), op="relu")

        def relu_backward(g: np.ndarray) -> None:
            self._add_grad(g * (self.data > 0))

        out._backward = relu_backward
        return out

    def tanh(self) -> Tensor:
        """Hyperbolic tangent; d tanh(x) = 1 - tanh(x)**2."""
        t = np.tanh(self.data)
        out = Tensor(t, parents=(self,), op="tanh")

        def tanh_backward(g: np.ndarray) -> None:
            self._add_grad(g * (1 - t * t))

        out._backward = tanh_backward
        return out

    def sum(self, axis: int | None = None) -> Tensor:
        """Sum over ``axis`` (all axes when None)."""
        out = Tensor(self.data.sum(axis=axis), parents=(self,), op="sum")

        def sum_backward(g: np.ndarray) -> None:
            if axis is not None:
                g = np.expand_dims(g, axis)
            self._add_grad(np.broadcast_to(g, self.data.shape))

        out._backward = sum_backward
        return out

    def mean(self, axis: int | None = None) -> Tensor:
        """Mean over ``axis`` (all axes when None)."""
        n = self.data.size if axis is None else self.data.shape[axis]
        return self.sum(axis) * (1.0 / n)

    # ---- backpropagation --------------------------------------------------------------------

    def backward(self, grad: np.ndarray | float | None = None) -> None:
        """Fill ``grad`` of every tensor this one depends on.

        ``grad`` is the gradient of the final objective with respect to this
        tensor; by default 1 (this tensor *is* the objective). Loss scaling
        passes the scale here, exactly as ``scaler.scale(loss).backward()``.
        """
        order: list[Tensor] = []
        seen: set[int] = set()

        def visit(t: Tensor) -> None:  # depth-first, iterative to allow deep graphs
            stack = [(t, False)]
            while stack:
                node, done = stack.pop()
                if done:
                    order.append(node)
                    continue
                if id(node) in seen:
                    continue
                seen.add(id(node))
                stack.append((node, True))
                stack.extend((p, False) for p in node.parents if id(p) not in seen)

        visit(self)
        g = np.ones_like(self.data) if grad is None else np.asarray(grad, dtype=self.data.dtype)
        self.grad = np.broadcast_to(g, self.data.shape).astype(self.data.dtype)
        for node in reversed(order):
            if node.grad is not None and node.parents:
                node._backward(node.grad)

    def zero_grad(self) -> None:
        self.grad = None


def _leaf_backward(g: np.ndarray) -> None:
    """A leaf has no parents: nothing to push back."""


def _as_tensor(x: Tensor | float | np.ndarray, dtype: np.dtype) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(np.asarray(x, dtype=dtype))


def matmul(a: Tensor, b: Tensor, product: Callable[[np.ndarray, np.ndarray], np.ndarray] | None
           = None) -> Tensor:
    """``a @ b`` for 2-D operands; ``product`` replaces numpy's ``@`` (an accumulation model).

    The backward pass uses the same ``product`` for ``grad @ b.T`` and ``a.T @ grad``,
    so gradients are accumulated the way the forward pass is.
    """
    mm = product or np.matmul
    out = Tensor(mm(a.data, b.data), parents=(a, b), op="matmul")

    def matmul_backward(g: np.ndarray) -> None:
        if a.requires_grad:
            a._add_grad(mm(g, b.data.T))
        if b.requires_grad:
            b._add_grad(mm(a.data.T, g))

    out._backward = matmul_backward
    return out


def gelu(x: Tensor) -> Tensor:
    """GELU with the tanh approximation (as in GPT-2): 0.5 x (1 + tanh(c (x + 0.044715 x^3)))."""
    c = np.sqrt(2 / np.pi)
    xd = x.data
    inner = c * (xd + 0.044715 * xd**3)
    t = np.tanh(inner)
    out = Tensor(0.5 * xd * (1 + t), parents=(x,), op="gelu")

    def gelu_backward(g: np.ndarray) -> None:
        d = 0.5 * (1 + t) + 0.5 * xd * (1 - t * t) * c * (1 + 3 * 0.044715 * xd**2)
        x._add_grad(g * d)

    out._backward = gelu_backward
    return out


def cross_entropy(logits: Tensor, labels: np.ndarray) -> Tensor:
    """Mean negative log-likelihood of integer ``labels`` under ``softmax(logits)``.

    Computed through a stable log-softmax (max subtracted); the gradient with
    respect to the logits is ``(softmax - onehot) / batch``.
    """
    z = logits.data
    labels = np.asarray(labels)
    if labels.shape != z.shape[:1] or labels.dtype.kind not in "iu":
        raise ValueError(
            f"labels must be integers of shape {z.shape[:1]} (one per row of logits), "
            f"got {labels.dtype} of shape {labels.shape}"
        )
    shifted = z - z.max(axis=1, keepdims=True)
    logsumexp = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    logp = shifted - logsumexp
    rows = np.arange(z.shape[0])
    out = Tensor(-logp[rows, labels].mean(), parents=(logits,), op="cross_entropy")

    def cross_entropy_backward(g: np.ndarray) -> None:
        d = np.exp(logp)  # softmax - onehot
        d[rows, labels] -= 1
        logits._add_grad(d * (g / z.shape[0]))

    out._backward = cross_entropy_backward
    return out


def mse(pred: Tensor, target: np.ndarray) -> Tensor:
    """Mean squared error ``mean((pred - target)**2)``."""
    target = np.asarray(target, dtype=pred.data.dtype)
    if target.shape != pred.data.shape:
        raise ValueError(f"target shape {target.shape} differs from prediction {pred.data.shape}")
    diff = pred.data - target
    out = Tensor(np.mean(diff * diff), parents=(pred,), op="mse")

    def mse_backward(g: np.ndarray) -> None:
        pred._add_grad(g * (2.0 / diff.size) * diff)

    out._backward = mse_backward
    return out


def round_value(x: Tensor, rounder: ArrayFn, name: str = "round") -> Tensor:
    """``rounder(x)`` on the way forward; the gradient passes straight through.

    ``rounder`` is any function array -> array of the same shape, typically
    ``lambda a: lowprec.round_to(a, "fp16")`` or a scaled quantizer.
    """
    out = Tensor(rounder(x.data), parents=(x,), op=name)

    def round_value_backward(g: np.ndarray) -> None:
        x._add_grad(g)

    round_value_backward.__name__ = round_value_backward.__qualname__ = f"{name}_backward"
    out._backward = round_value_backward
    return out


def round_grad(x: Tensor, rounder: ArrayFn, name: str = "round_grad") -> Tensor:
    """The identity on the way forward; ``rounder(grad)`` on the way back.

    This is where a gradient is stored in a narrow format: values too small for
    it underflow to zero here, and the instrumentation watches this spot.
    """
    out = Tensor(x.data, parents=(x,), op=name)

    def round_grad_backward(g: np.ndarray) -> None:
        x._add_grad(rounder(g))

    round_grad_backward.__name__ = round_grad_backward.__qualname__ = f"{name}_backward"
    out._backward = round_grad_backward
    return out
