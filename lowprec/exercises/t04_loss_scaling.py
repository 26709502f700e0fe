"""Tutorial 04, loss scaling: the smallest sufficient scale, the dynamic scaler."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..formats import FloatFormat, get_format
from ..rounding import round_to
from ._common import _number, _wrong
from ._verdict import Mistake, verdict

__all__ = [
    "check_grad_scaler_scale",
    "check_smallest_loss_scale",
]


def check_smallest_loss_scale(x: Any, fmt: FloatFormat | str, answer: Any, *,
                              max_underflow: float = 0.01) -> None:
    """The smallest power-of-two loss scale S with at most ``max_underflow`` of ``x * S``
    rounding to zero in ``fmt`` and nothing overflowing."""
    f = get_format(fmt)
    a = np.abs(np.asarray(x, dtype=np.float64)).ravel()
    a = a[np.isfinite(a) & (a > 0)]
    if a.size == 0:
        raise ValueError("x has no non-zero finite values")

    def shares(scale: float) -> tuple[float, float]:
        with np.errstate(over="ignore"):
            r = round_to(a * scale, f)
        return float(np.mean(r == 0)), float(np.mean(~np.isfinite(r)))

    expected = None
    for k in range(-64, 200):
        under, over = shares(2.0**k)
        if under <= max_underflow and over == 0:
            expected = 2.0**k
            break
    if expected is None:
        raise ValueError(f"no power-of-two scale brings the underflow of x in {f.name} to "
                         f"{max_underflow:.2%} without overflow")
    s = _number(answer, "loss scale")
    e = int(math.log2(expected))
    u_exp, _ = shares(expected)
    u_half, _ = shares(expected / 2)
    why = (f"with S = 2^{e} {u_exp:.2%} of the values of x * S round to zero in {f.name} and "
           f"none overflow, while with 2^{e - 1} {u_half:.2%} still do")
    if s != expected and not (s > 0 and math.isfinite(s)):
        _wrong(f"a loss scale must be a positive finite number, got {s!r}")
    under, over = shares(s)
    if over > 0:
        detail = (f"with S = {s:g}, {over:.2%} of the values overflow to inf/NaN (the step would "
                  "be skipped)")
    elif under > max_underflow:
        detail = f"with S = {s:g}, {under:.2%} of the values still round to zero"
    else:
        detail = (f"S = {s:g} works ({under:.2%} underflow), but it is not the smallest "
                  "power of two that does")
    verdict(
        s == expected,
        said=detail,
        but="; ",
        solution=why,
        mistakes=[Mistake(math.log2(s) != round(math.log2(s)),
                          "(Loss scales are powers of two.)")],
    )


def check_grad_scaler_scale(found_inf: list[bool], answer: Any, *,
                            init_scale: float = 2.0**16, growth_interval: int = 2000) -> None:
    """The scale of a PyTorch-style ``GradScaler`` after steps whose gradients had inf/NaN
    (True) or not (False), with growth factor 2 and backoff 0.5 (lowprec.train.GradScaler)."""
    from ..train import GradScaler  # the trainer's scaler is the reference

    events = [bool(e) for e in found_inf]
    scaler = GradScaler(init_scale=init_scale, growth_interval=growth_interval)
    trace = [scaler.get_scale()]
    for bad in events:
        param = _Param(np.array([np.inf if bad else 1.0], dtype=np.float32))
        with np.errstate(invalid="ignore", over="ignore"):
            scaler.step(_NoOptimizer([param]))
        scaler.update()
        trace.append(scaler.get_scale())
    expected = trace[-1]
    s = _number(answer, "final loss scale")
    steps = " -> ".join(f"2^{int(math.log2(t))}" for t in trace)
    why = (f"the scale halves after every step with inf/NaN (and that step is skipped) and "
           f"doubles after every {growth_interval} consecutive good steps; here it goes {steps}")
    verdict(
        s == expected,
        said=f"you said {s:g}",
        solution=why,
        mistakes=[Mistake(s == init_scale * 2.0 ** (len(events) // growth_interval)
                          or s == init_scale,
                          "Check each overflow: it halves the scale *and* restarts the count of "
                          "good steps.")],
    )


class _Param:
    """The one attribute of a parameter that GradScaler reads and writes."""

    def __init__(self, grad: np.ndarray) -> None:
        self.grad = grad


class _NoOptimizer:
    def __init__(self, params: list[_Param]) -> None:
        self.params = params

    def step(self) -> None:
        return None
