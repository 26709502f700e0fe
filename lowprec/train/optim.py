"""SGD with momentum and Adam, writing weights through a rounding function.

The optimizer updates ``params`` (the master copy, or, without one, the
low-precision weights themselves). Updates are computed in float32 from the
gradients and the optimizer state; ``state`` rounds the state to its format
and ``store`` rounds the new weights to theirs. Without a master copy ``store``
rounds to e.g. bfloat16, so an update smaller than half a unit in the last
place of the weight is *lost* -- :meth:`step` returns, per parameter, the
number of weights the update left unchanged although it was non-zero, and the number
of non-zero updates.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..autograd import Tensor

__all__ = ["SGD", "Adam"]

ArrayFn = Callable[[np.ndarray], np.ndarray]


def _identity(x: np.ndarray) -> np.ndarray:
    return x


class _Optimizer:
    def __init__(self, params: list[Tensor], lr: float, store: ArrayFn | None,
                 state: ArrayFn | None) -> None:
        if not lr > 0:
            raise ValueError(f"learning rate must be positive, got {lr}")
        self.params = list(params)
        self.lr = lr
        self.store = store or _identity
        self.state = state or _identity

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _apply(self, p: Tensor, update: np.ndarray) -> tuple[int, int]:
        """p <- store(p - update); returns (updates lost, non-zero updates)."""
        old = p.data
        new = self.store((old - update).astype(old.dtype))
        moved = update != 0
        n = int(np.count_nonzero(moved))
        lost = int(np.count_nonzero(moved & (new == old)))
        p.data = new
        return lost, n

    def step(self) -> list[tuple[int, int]]:
        """Update every parameter that has a gradient; per parameter (lost, non-zero) counts."""
        return [self._update(i, p) if p.grad is not None else (0, 0)
                for i, p in enumerate(self.params)]

    def _update(self, i: int, p: Tensor) -> tuple[int, int]:
        raise NotImplementedError


class SGD(_Optimizer):
    """SGD with momentum as PyTorch defines it: ``v = mu*v + g``, ``w -= lr*v``."""

    def __init__(self, params: list[Tensor], lr: float = 0.01, momentum: float = 0.9, *,
                 store: ArrayFn | None = None, state: ArrayFn | None = None) -> None:
        super().__init__(params, lr, store, state)
        self.momentum = momentum
        self.velocity: list[np.ndarray | None] = [None] * len(self.params)

    def _update(self, i: int, p: Tensor) -> tuple[int, int]:
        g = p.grad
        assert g is not None, "step() only updates parameters that have a gradient"
        if self.momentum:
            v = self.velocity[i]
            v = g.copy() if v is None else self.momentum * v + g
            v = self.state(v.astype(p.data.dtype))
            self.velocity[i] = v
            g = v
        return self._apply(p, (self.lr * g).astype(p.data.dtype))


class Adam(_Optimizer):
    """Adam (Kingma & Ba) with bias correction, PyTorch's defaults."""

    def __init__(self, params: list[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, *,
                 store: ArrayFn | None = None, state: ArrayFn | None = None) -> None:
        super().__init__(params, lr, store, state)
        self.betas = betas
        self.eps = eps
        self.m: list[np.ndarray] = [np.zeros_like(p.data) for p in self.params]
        self.v: list[np.ndarray] = [np.zeros_like(p.data) for p in self.params]
        self.t = 0

    def step(self) -> list[tuple[int, int]]:
        self.t += 1
        return super().step()

    def _update(self, i: int, p: Tensor) -> tuple[int, int]:
        b1, b2 = self.betas
        g = p.grad
        assert g is not None, "step() only updates parameters that have a gradient"
        dt = p.data.dtype
        self.m[i] = self.state((b1 * self.m[i] + (1 - b1) * g).astype(dt))
        self.v[i] = self.state((b2 * self.v[i] + (1 - b2) * g * g).astype(dt))
        mhat = self.m[i] / (1 - b1**self.t)
        vhat = self.v[i] / (1 - b2**self.t)
        return self._apply(p, (self.lr * mhat / (np.sqrt(vhat) + self.eps)).astype(dt))
