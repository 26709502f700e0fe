"""Choosing a precision per layer from measured statistics, and the loss scale.

:func:`recommend` groups a report's rows by layer and tensor kind (all steps together)
and picks, for each group, the narrowest candidate recipe (fewest bits per value; the
report's order breaks ties) whose measured statistics meet the thresholds:

* underflow: at most ``max_underflow`` of the finite non-zero values became zero;
* no finite value became inf or NaN (``overflow == 0``);
* SQNR of every step at least ``min_sqnr_db``.

Each choice carries its reason: the numbers that made it pass, and why every narrower
candidate failed.

:func:`settled_loss_scale` is the scale PyTorch's dynamic loss scaling ends up at for
given gradients, found by running lowprec's own :class:`~lowprec.train.GradScaler` (the
re-implementation of ``torch.amp.GradScaler``) with the fp16 gradients the scale produces.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..autograd import Tensor
from ..formats import get_format
from ..rounding import round_to
from ..train.policy import ROLE_OF_KIND, Policy, Quant
from ..train.scaler import GradScaler

__all__ = ["Choice", "Recommendation", "recommend", "settled_loss_scale"]


class _OneGradient:
    """The smallest optimizer GradScaler can drive: one parameter, no update."""

    def __init__(self) -> None:
        self.params = [Tensor(np.zeros(1, dtype=np.float32))]

    def step(self) -> None:
        return None


def settled_loss_scale(amaxes: Sequence[float] | np.ndarray, fmt: str = "fp16", *,
                       init_scale: float = 2.0**16, max_steps: int = 600) -> float:
    """The loss scale dynamic loss scaling settles on for gradients of these amaxes.

    Runs :class:`lowprec.train.GradScaler` (PyTorch's rules: halve on inf/NaN, double
    after a run of good steps; here every step is a run, ``growth_interval=1``, the
    long-run limit) on a parameter whose gradient is ``max(amaxes) * scale`` rounded to
    ``fmt``: a gradient overflows exactly when its largest magnitude does. Returns the
    largest scale the scaler reaches without overflow, where it oscillates. Non-finite
    amaxes are ignored; with no non-zero gradient the scale grows to float32's largest
    power of two.

    >>> settled_loss_scale([3.0e-3])   # 3e-3 * 2**24 = 50332 < 65504, 2**25 overflows
    16777216.0
    """
    a = np.asarray(amaxes, dtype=np.float64).reshape(-1)
    a = a[np.isfinite(a)]
    amax = float(a.max()) if a.size else 0.0
    f = get_format(fmt)
    scaler = GradScaler(init_scale=init_scale, growth_interval=1)
    opt = _OneGradient()
    best = float("nan")
    seen: set[float] = set()
    for _ in range(max_steps):
        s = scaler.get_scale()
        g = round_to(np.array([amax * s], dtype=np.float64), f)
        opt.params[0].grad = g.astype(np.float32)
        scaler.step(opt)
        if not scaler.found_inf():
            best = s if math.isnan(best) else max(best, s)
        if s in seen and not math.isnan(best):
            break
        seen.add(s)
        scaler.update()
    return best


@dataclass
class Choice:
    """The recipe chosen for one layer's tensors of one kind, and why."""

    layer: str
    kind: str
    recipe: str | None
    bits_per_value: float
    underflow_frac: float
    sqnr_db: float
    reason: str
    rejected: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.layer}/{self.kind}: {self.recipe or '(none)'} -- {self.reason}"


@dataclass
class Recommendation:
    """:func:`recommend`'s answer: ``choices`` (one :class:`Choice` per layer and kind),
    the thresholds, and ``loss_scale``, the fp16 loss scale for the gradients (NaN when
    there are none)."""

    choices: list[Choice]
    max_underflow: float
    min_sqnr_db: float
    loss_scale: float

    def choice(self, layer: str, kind: str) -> Choice:
        for c in self.choices:
            if c.layer == layer and c.kind == kind:
                return c
        raise KeyError(f"no choice for layer {layer!r}, kind {kind!r}")

    @property
    def unmet(self) -> list[Choice]:
        """The choices where no candidate met the thresholds (kept in float32)."""
        return [c for c in self.choices if c.recipe is None]

    def policy(self, name: str = "recommended") -> Policy:
        """A :class:`~lowprec.train.Policy` holding every choice, per layer and role
        (``input``/``input_b`` -> activations, ``weight`` -> weights, ``output_grad`` ->
        act_grads, ``weight_grad`` -> weight_grads; other kinds, e.g. ``bias``, are not
        rounded), as
        :attr:`Policy.layers <lowprec.train.Policy.layers>`, for ``lowprec.torch.emulate``.
        Any scheme a report measures can be chosen and held
        (:meth:`Quant.from_scheme <lowprec.train.Quant.from_scheme>`). A tensor no
        candidate fits stays float32 (:attr:`unmet` lists them); a layer not measured is
        not rounded (the roles' defaults are None). FP32 master weights; dynamic loss
        scaling when a gradient chose ``fp16_loss_scale``."""
        layers: list[tuple[str, str, Quant | None]] = []
        dynamic = False
        for c in self.choices:
            if c.kind not in ROLE_OF_KIND:
                continue
            layers.append((c.layer, c.kind, None if c.recipe is None
                           else Quant.from_scheme(c.recipe)))
            dynamic = dynamic or c.recipe == "fp16_loss_scale"
        desc = "chosen by lowprec.inspect.recommend from measured statistics: " + ", ".join(
            f"{layer} {kind} {q if q is not None else 'fp32 (no candidate met the thresholds)'}"
            for layer, kind, q in layers)
        return Policy(name, desc, master=Quant("fp32"),
                      loss_scaling="dynamic" if dynamic else "none", layers=tuple(layers))

    def as_dict(self) -> dict[str, str | None]:
        """``"LAYER/KIND" -> recipe``."""
        return {f"{c.layer}/{c.kind}": c.recipe for c in self.choices}

    def __str__(self) -> str:
        lines = [f"narrowest recipe with underflow <= {self.max_underflow:.2%}, no overflow "
                 f"and SQNR >= {self.min_sqnr_db:g} dB:"]
        lines += [f"  {c}" for c in self.choices]
        if self.unmet:
            lines.append(f"no candidate met the thresholds for {len(self.unmet)} tensor(s): "
                         f"{', '.join(f'{c.layer}/{c.kind}' for c in self.unmet)}; "
                         "they stay float32 (not rounded) in policy()")
        if math.isfinite(self.loss_scale):
            lines.append(f"fp16 loss scale that keeps the gradients finite: "
                         f"2^{math.log2(self.loss_scale):g} (what GradScaler settles on)")
        return "\n".join(lines)


def _aggregate(rows: list[dict[str, Any]]) -> dict[str, float]:
    nonzero = sum(r["nonzero"] for r in rows)
    under = sum(r["underflow"] for r in rows)
    sq = [r["sqnr_db"] for r in rows if not math.isnan(r["sqnr_db"])]
    return {"underflow_frac": under / nonzero if nonzero else 0.0,
            # finite values that overflowed (±inf inputs are reported, not chosen against)
            "overflow": sum(r["overflow"] - r.get("inf_in", 0) for r in rows),
            "sqnr_db": min(sq) if sq else float("nan"),
            "bits": float(np.mean([r["bits_per_value"] for r in rows]))}



def _pct_above(frac: float, limit: float) -> str:
    """``frac`` as a percentage with the digits that show it above ``limit`` (0.104%
    rather than a "0.10% > 0.10%" that reads false)."""
    for digits in range(2, 8):
        text = f"{frac:.{digits}%}"
        if float(text[:-1]) / 100 > limit or digits == 7:
            return text
    return f"{frac:%}"


def _below(db: float, limit: float) -> str:
    """An SQNR in dB with the digits that show it below ``limit``."""
    for digits in range(1, 7):
        text = f"{db:.{digits}f}"
        if not float(text) >= limit or digits == 6:
            return text
    return f"{db}"

def recommend(report: Any, *, max_underflow: float = 1e-3, min_sqnr_db: float = 20.0,
              candidates: Iterable[str] | None = None) -> Recommendation:
    """Per layer and tensor kind, the narrowest recipe of ``candidates`` (default: the
    report's recipes) that meets the thresholds (see the module docstring).

    >>> import numpy as np
    >>> from lowprec.inspect import report
    >>> x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    >>> rec = report({"fc/input": x}, ["fp16", "fp8_e4m3", "mxfp4"]).recommend(min_sqnr_db=25)
    >>> rec.choice("fc", "input").recipe
    'fp8_e4m3'
    """
    if not (0 <= max_underflow <= 1):
        raise ValueError(f"max_underflow is a fraction between 0 and 1, got {max_underflow!r}")
    names = list(report.recipes if candidates is None else candidates)
    unknown = [c for c in names if c not in report.recipes]
    if unknown:
        raise ValueError(f"candidates {unknown} are not in the report; it has: "
                         f"{', '.join(report.recipes)}")
    groups: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for r in report.rows:
        if r["recipe"] in names:
            groups.setdefault((r["layer"], r["kind"]), {}).setdefault(r["recipe"], []).append(r)
    choices = []
    for (layer, kind), by_recipe in groups.items():
        stats = {name: _aggregate(rows) for name, rows in by_recipe.items()}
        order = sorted(stats, key=lambda nm: (stats[nm]["bits"], names.index(nm)))
        rejected: list[tuple[str, str]] = []
        chosen = None
        for nm in order:
            s = stats[nm]
            why = []
            if s["underflow_frac"] > max_underflow:
                why.append(f"underflow {_pct_above(s['underflow_frac'], max_underflow)} > "
                           f"{max_underflow:.2%}")
            if s["overflow"]:
                why.append(f"{s['overflow']} values overflowed")
            if not s["sqnr_db"] >= min_sqnr_db:
                why.append(f"SQNR {_below(s['sqnr_db'], min_sqnr_db)} dB < {min_sqnr_db:g} dB")
            if why:
                rejected.append((nm, "; ".join(why)))
                continue
            chosen = nm
            break
        if chosen is None:
            s = stats[order[-1]]
            reason = ("no candidate meets the thresholds, kept in float32 (" + "; ".join(
                f"{n}: {w}" for n, w in rejected) + ")")
            choices.append(Choice(layer, kind, None, s["bits"], s["underflow_frac"],
                                  s["sqnr_db"], reason, rejected))
            continue
        s = stats[chosen]
        reason = (f"{s['bits']:.3g} bits, underflow {s['underflow_frac']:.2%}, SQNR "
                  f"{s['sqnr_db']:.1f} dB")
        if rejected:
            reason += "; narrower: " + "; ".join(f"{n} ({w})" for n, w in rejected)
        choices.append(Choice(layer, kind, chosen, s["bits"], s["underflow_frac"],
                              s["sqnr_db"], reason, rejected))
    scale = report.loss_scale
    if not math.isfinite(scale):
        grads = [r["tensor"] for r in report.rows if "grad" in r["kind"]]
        if grads:
            scale = settled_loss_scale([report.amax[t] for t in dict.fromkeys(grads)])
    return Recommendation(choices, max_underflow, min_sqnr_db, scale)
