"""Tutorial 07, FP8 scaling: current and delayed per-tensor scales."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats import FloatFormat, get_format
from ._common import _number
from ._verdict import Mistake, verdict

__all__ = [
    "check_current_scale",
    "check_delayed_scale",
]


def check_current_scale(amax: float, fmt: FloatFormat | str, answer: Any, *,
                        margin: int = 0, power_of_two: bool = False) -> None:
    """The per-tensor scale for a tensor with largest magnitude ``amax`` (Transformer
    Engine's convention: ``codes = round(x * scale)``, ``scale = max / amax / 2**margin``)."""
    from ..scaling import current_scale

    f = get_format(fmt)
    expected = current_scale(amax, f, margin=margin, power_of_two=power_of_two)
    s = _number(answer, "scale")
    how = f"{f.name}'s max {f.max:g} / amax {float(amax):g}" + (
        f" / 2^{margin}" if margin else "")
    why = (f"the scale maps the tensor's largest magnitude onto the format's largest value: "
           f"scale = {how} = "
           + (f"{f.max / float(amax) / 2.0**margin:g}, rounded down to a power of two: "
              if power_of_two else "")
           + f"{expected:g} (computed in float32)")
    amax_f = float(amax)

    def used_max_of(g: FloatFormat) -> bool:  # the scale computed with g's max instead
        return abs(s - g.max / amax_f / 2.0**margin) <= 1e-6 * s

    other_formats = [g for g in map(get_format, ("fp16", "fp8_e5m2", "fp8_e4m3")) if g != f]
    verdict(
        s == expected or (not power_of_two and abs(s - expected) <= 1e-6 * expected),
        said=f"you said {s:g}",
        solution=why,
        mistakes=[
            Mistake(expected != 0 and abs(s * expected - 1) < 1e-6,
                    "That is scale_inv = 1 / scale, the factor that dequantization multiplies "
                    "by; the scale multiplies on the way in."),
            Mistake(power_of_two and used_max_of(f), "Round it down to a power of two."),
        ] + [Mistake(used_max_of(g), f"You used {g.name}'s max ({g.max:g}) instead of {f.name}'s.")
             for g in other_formats],
    )


def check_delayed_scale(amaxes: list[float], fmt: FloatFormat | str, answer: Any, *,
                        history_len: int = 1024, amax_compute: str = "max",
                        margin: int = 0) -> None:
    """The scale delayed scaling uses at the step *after* the steps whose amaxes are
    ``amaxes`` (lowprec.scaling.DelayedScaling, Transformer Engine's recipe)."""
    from ..scaling import DelayedScaling

    ds = DelayedScaling(fmt, margin=margin, history_len=history_len, amax_compute=amax_compute)
    for a in amaxes:
        ds.quantize(np.array([float(a)], dtype=np.float32))
        ds.update()
    expected = ds.scale
    f = get_format(fmt)
    s = _number(answer, "delayed scale")
    window = [float(a) for a in amaxes][-history_len:]
    used = max(window) if amax_compute == "max" else window[-1]
    why = (f"delayed scaling takes the amax from the history of the last {history_len} step(s) "
           f"({'their maximum' if amax_compute == 'max' else 'the most recent'}: {used:g}), "
           f"not from the tensor it is about to quantize, so the next scale is "
           f"{f.max:g} / {used:g}" + (f" / 2^{margin}" if margin else "") + f" = {expected:g}")
    verdict(
        abs(s - expected) <= 1e-6 * abs(expected),
        said=f"you said {s:g}",
        solution=why,
        mistakes=[
            Mistake(bool(amaxes) and abs(s - f.max / float(amaxes[-1])) <= 1e-6 * s
                    and used != amaxes[-1],
                    "You used only the most recent amax; the recipe takes the maximum over the "
                    "window."),
            Mistake(abs(s - f.max / max(float(a) for a in amaxes)) <= 1e-6 * s
                    and used != max(amaxes),
                    f"The window holds only the last {history_len} step(s); older amaxes have "
                    "left it."),
        ],
    )
