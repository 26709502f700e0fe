"""Tutorial 12, quantization-aware training: what training with QAT stores per parameter."""

from __future__ import annotations

from typing import Any

from ._common import _number
from ._verdict import Mistake, verdict

__all__ = ["check_bytes_per_param"]


def check_bytes_per_param(model: Any, policy: Any, optimizer: str, answer: Any) -> None:
    """Weight-side bytes per parameter (master + weights + gradients + optimizer state)
    of ``model`` (MLP widths or a :class:`lowprec.train.memory.ModelShape`) under
    ``policy`` with ``optimizer``, exactly as :func:`lowprec.train.memory` counts them."""
    from ..train.memory import WEIGHT_SIDE, memory

    t = memory(model, policy, optimizer=optimizer)
    expected = float(t.weight_side_per_param())
    a = _number(answer, "bytes per parameter")
    parts = ", ".join(f"{role} {t.bytes_of(role) / t.n_params:.6g}" for role in WEIGHT_SIDE)
    why = (f"per parameter, {t.policy} with {optimizer} stores: {parts}; together "
           f"{expected:.6g} bytes")
    master = t.bytes_of("master") / t.n_params
    state = t.bytes_of("optimizer_state") / t.n_params

    def close(v: float) -> bool:
        return abs(a - v) <= 1e-9 * max(1.0, expected)

    verdict(
        close(expected),
        said=f"you said {a:g}",
        solution=why,
        mistakes=[
            Mistake(bool(master) and close(expected - master),
                    "You left out the FP32 master copy the optimizer updates."),
            Mistake(bool(state) and close(expected - state),
                    "You left out the optimizer state (Adam keeps two values per parameter)."),
        ],
    )
