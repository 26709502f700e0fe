"""Loss scaling: PyTorch's dynamic ``GradScaler`` and a static scaler.

Semantics follow ``torch.amp.GradScaler`` (torch/amp/grad_scaler.py and the
``_amp_update_scale_`` kernel), re-implemented here:

* the scale is a float32, initially ``init_scale`` (2**16);
* :meth:`GradScaler.scale` multiplies the loss by it (``scale(loss).backward()``);
* :meth:`GradScaler.unscale_` multiplies every gradient by the float32
  reciprocal of the scale (computed in double, then rounded, as PyTorch does)
  and notes whether any gradient was inf or NaN; calling it twice before
  :meth:`GradScaler.update` is an error;
* :meth:`GradScaler.step` unscales if needed, then runs ``optimizer.step()``
  only when every gradient was finite (otherwise the step is *skipped*);
* :meth:`GradScaler.update` multiplies the scale by ``backoff_factor`` (0.5)
  after a step with inf/NaN and resets the count of good steps; after
  ``growth_interval`` (2000) consecutive good steps it multiplies the scale by
  ``growth_factor`` (2.0), unless that would overflow float32, and resets the
  count.

>>> s = GradScaler(init_scale=8.0, growth_interval=2)
>>> s.get_scale()
8.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ..autograd import Tensor

__all__ = ["GradScaler", "StaticScaler"]


class _HasGrad(Protocol):
    """What the scaler touches of a parameter: its gradient (a Tensor's, say)."""

    grad: Any


class _Optimizer(Protocol):
    @property
    def params(self) -> Sequence[_HasGrad]: ...

    def step(self) -> Any: ...


class GradScaler:
    """Dynamic loss scaling with PyTorch's defaults (see the module docstring)."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        if not growth_factor > 1.0:
            raise ValueError(f"growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"backoff_factor must be in (0, 1), got {backoff_factor}")
        if int(growth_interval) != growth_interval or growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive integer, got {growth_interval}")
        self._scale = np.float32(init_scale)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._enabled = enabled
        self._unscaled = False
        self._stepped = False
        self._found_inf = False

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return float(self._scale) if self._enabled else 1.0

    def scale(self, loss: Tensor) -> Tensor:
        """``loss * scale`` (call ``.backward()`` on the result)."""
        if not self._enabled:
            return loss
        return loss * Tensor(np.asarray(self._scale, dtype=loss.data.dtype))

    def unscale_(self, optimizer: _Optimizer) -> None:
        """Divide the optimizer's gradients by the scale, in place; look for inf/NaN."""
        if not self._enabled:
            return
        if self._unscaled:
            raise RuntimeError("unscale_() has already been called since the last update()")
        if self._stepped:
            raise RuntimeError("unscale_() is being called after step()")
        inv_scale = np.float32(1.0 / np.float64(self._scale))
        found = False
        for p in optimizer.params:
            if p.grad is None:
                continue
            found = found or not bool(np.all(np.isfinite(p.grad)))
            if inv_scale != 1:
                p.grad = (p.grad * inv_scale).astype(p.grad.dtype)
        self._found_inf = found
        self._unscaled = True

    def step(self, optimizer: _Optimizer) -> Any:
        """``optimizer.step()`` unless a gradient was inf/NaN; returns its result or None."""
        if not self._enabled:
            return optimizer.step()
        if self._stepped:
            raise RuntimeError("step() has already been called since the last update()")
        if not self._unscaled:
            self.unscale_(optimizer)
        self._stepped = True
        return None if self._found_inf else optimizer.step()

    def found_inf(self) -> bool:
        """Whether the gradients unscaled since the last update held inf/NaN."""
        return self._found_inf

    def update(self, new_scale: float | None = None) -> None:
        """Adjust the scale after a step (see the module docstring)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = np.float32(new_scale)
        elif self._found_inf:
            self._scale = np.float32(self._scale * self._backoff_factor)
            self._growth_tracker = 0
        else:
            successful = self._growth_tracker + 1
            if successful == self._growth_interval:
                with np.errstate(over="ignore"):  # a scale past float32's range stays put
                    grown = np.float32(np.float64(self._scale) * self._growth_factor)
                if np.isfinite(grown):
                    self._scale = grown
                self._growth_tracker = 0
            else:
                self._growth_tracker = successful
        self._unscaled = self._stepped = self._found_inf = False

    def state_dict(self) -> dict[str, float | int]:
        return {"scale": float(self._scale), "growth_tracker": self._growth_tracker,
                "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval}


class StaticScaler(GradScaler):
    """A constant loss scale. Steps with inf/NaN gradients are still skipped (so an
    overflow is visible as a skipped step rather than a corrupted model), but the
    scale never changes."""

    def __init__(self, scale: float = 2.0**12, enabled: bool = True) -> None:
        super().__init__(init_scale=scale, enabled=enabled)

    def update(self, new_scale: float | None = None) -> None:
        if new_scale is not None:
            self._scale = np.float32(new_scale)
        self._unscaled = self._stepped = self._found_inf = False
