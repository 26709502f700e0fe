"""What each scaling scheme costs in accuracy, on your tensor.

>>> import numpy as np
>>> x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
>>> rows = compare_schemes(x, ["per_tensor:fp8_e4m3", "mxfp8_e4m3", "mxfp4", "nvfp4"])
>>> [r.scheme for r in rows], rows[2].bits_per_value
(['per_tensor:fp8_e4m3', 'mxfp8_e4m3', 'mxfp4', 'nvfp4'], 4.25)
>>> print(format_table(rows))  # doctest: +SKIP

Scheme specs are strings ``kind[:option[:option...]]`` (or :class:`Scheme`
objects); options are ``key=value`` or flags:

==============================  ===============================================
``cast:FMT``                    plain rounding to FMT, saturating (no scale);
                                ``nosat``: overflow gives inf/NaN
``per_tensor:FMT``              one current scale (:func:`scaling.quantize_per_tensor`);
                                options ``margin=N``, ``pow2``
``tiles:FMT``                   a scale per tile (:func:`scaling.quantize_tiles`);
                                ``tile=1x128`` (default) or ``tile=128x128``, ``pow2``
``mxfp8_e4m3`` ... ``mxint8``   OCP MX (:func:`mx.quantize`); ``block=32``,
                                ``rule=floor|ceil|rceil|even|trn``, ``axis=-1``
``nvfp4``                       NVFP4 (:func:`nvfp4.quantize`); ``block=16``, ``axis=-1``,
                                ``scale=ue4m3|ue5m3``, ``global=S`` (tensor scale; ``1``:
                                none)
``nvfp4_1x16`` ... ``_4over6``  the NVFP4 training recipe's quantizers
                                (:data:`lowprec.schemes.NVFP4_RECIPE_KINDS`); ``axis=-1``;
                                ``nvfp4_rht`` is measured rotated back
==============================  ===============================================

Every name of the :mod:`lowprec.schemes` table is a spec too (``"fp8_e4m3_current"`` is
``per_tensor:fp8_e4m3``, ``"mxfp4_rceil"`` is ``mxfp4:rule=rceil``, ``"fp16"`` is plain
rounding without saturation, ``NAME_sr`` adds ``mode=stochastic``), except the ones the
table marks as refused here (``fp16_loss_scale``, the delayed recipes).

Every kind accepts ``mode=`` (a rounding mode; ``stochastic`` uses ``seed=``, 0
by default). Examples: ``"per_tensor:fp8_e5m2:pow2"``, ``"mxfp4:block=16"``,
``"mxfp4:rule=rceil"``, ``"tiles:fp8_e4m3:tile=128x128"``, ``"cast:bf16"``.

Statistics (over the finite entries of ``x``):

* ``sqnr_db``: ``10 log10(sum x**2 / sum (x - q)**2)`` (inf when exact);
* ``max_rel_error``, ``mean_rel_error``: of ``|q - x| / |x|`` over ``x != 0``;
* ``frac_clipped``: saturated: at or beyond the point where round-to-nearest
  would carry it past the element maximum at its scale (``max + ulp/2``);
* ``frac_flushed``: non-zero but quantized to zero;
* ``frac_nonfinite``: finite but quantized to NaN/inf (e.g. an MX block shared
  with a NaN);
* ``bits_per_value``: storage, scales included.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from . import mx, nvfp4, scaling
from ._blocks import as_working_array, overflow_threshold
from .formats import get_format
from .rounding import check_mode, round_to
from .schemes import BLOCK_VARIANT_KINDS, NVFP4_RECIPE_KINDS

__all__ = [
    "Scheme",
    "SchemeError",
    "compare_schemes",
    "format_table",
    "parse_scheme",
    "plot_schemes",
    "to_columns",
]

_KINDS = ("cast", "per_tensor", "tiles", "nvfp4", *NVFP4_RECIPE_KINDS, *mx.MX_FORMATS)


@dataclass(frozen=True)
class Scheme:
    """A quantization scheme: ``kind`` (see the module docstring), the element
    format for ``cast``/``per_tensor``/``tiles``, and options."""

    kind: str
    fmt: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    def label(self) -> str:
        return self.name or ":".join(
            [self.kind] + ([self.fmt] if self.fmt else [])
            + [k if v is True else f"{k}={v}" for k, v in self.options.items()])

    def _element_format(self) -> str:
        """The element format of ``cast``/``per_tensor``/``tiles`` (they need one)."""
        if self.fmt is None:
            raise ValueError(f"scheme {self.label()!r}: {self.kind} needs an element format, "
                             f"e.g. '{self.kind}:fp8_e4m3'")
        return self.fmt

    def quantize(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(dequantized values, clip threshold per element, bits per value)."""
        o = dict(self.options)
        mode = check_mode(o.pop("mode", "rne"))
        seed = int(o.pop("seed", 0))
        rng = np.random.default_rng(seed) if mode == "stochastic" else None
        if self.kind == "cast":
            f = get_format(self._element_format())
            sat = not o.pop("nosat", False)
            _no_more(o, self)
            q = round_to(x, f, mode, saturate=sat, rng=rng).astype(np.float64)
            lim = overflow_threshold(f) if sat or not (f.has_inf or f.has_nan) else np.inf
            return q, np.full(x.shape, lim), float(f.width)
        if self.kind in ("per_tensor", "tiles"):
            pow2 = bool(o.pop("pow2", False))
            margin = int(o.pop("margin", 0))
            if self.kind == "per_tensor":
                t = scaling.quantize_per_tensor(x, self._element_format(), mode=mode, margin=margin,
                                                power_of_two=pow2, rng=rng)
            else:
                tr, tc = (int(v) for v in str(o.pop("tile", "1x128")).lower().split("x"))
                t = scaling.quantize_tiles(x, self._element_format(), (tr, tc), mode=mode, margin=margin,
                                           power_of_two=pow2, rng=rng)
            _no_more(o, self)
            return t.dequantize(), t.clip_threshold(), t.bits_per_value
        axis = int(o.pop("axis", -1))
        if self.kind in NVFP4_RECIPE_KINDS:
            from .recipes.nvfp4 import quantize_along

            _no_more(o, self)
            shape, rht, four = NVFP4_RECIPE_KINDS[self.kind]
            t4, q4 = quantize_along(x, shape, mode, axis=axis, hadamard=rht,
                                    four_over_six=four, rng=rng, rotate_back=True)
            # the rotated tensor clips in the rotated domain: no per-element threshold
            lim4 = (np.full(x.shape, np.inf) if rht
                    else np.moveaxis(t4.clip_threshold(), -1, axis))
            return q4, lim4, 8.0 * t4.nbytes / max(x.size, 1)
        if self.kind == "nvfp4":
            gs = o.pop("global", None)
            t2 = nvfp4.quantize(x, axis=axis, block_size=int(o.pop("block", 16)), mode=mode,
                                rng=rng, scale_format=str(o.pop("scale", "ue4m3")),
                                global_scale=None if gs is None else float(gs))
            _no_more(o, self)
            # a tensor scale of 1 (global=1: none) need not be stored: 32 bits less
            bits2 = t2.bits_per_value - (32 / max(x.size, 1) if t2.global_scale == 1 and gs
                                         is not None else 0.0)
            return t2.dequantize(), t2.clip_threshold(), bits2
        t3 = mx.quantize(x, self.kind, axis=axis, block_size=int(o.pop("block", 32)),
                         scale_rule=str(o.pop("rule", "floor")), mode=mode, rng=rng)
        _no_more(o, self)
        return t3.dequantize(), t3.clip_threshold(), t3.bits_per_value


def _no_more(options: dict[str, Any], scheme: Scheme) -> None:
    if options:
        raise ValueError(f"scheme {scheme.label()!r}: unknown option(s) {sorted(options)}")


def parse_scheme(spec: str | Scheme) -> Scheme:
    """A :class:`Scheme` from a spec string such as ``"mxfp4:block=16"``."""
    if isinstance(spec, Scheme):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"a scheme is a non-empty string or a Scheme, got {spec!r}")
    if ":" not in spec:
        table = _from_table(spec)
        if table is not None:
            return table
    parts = [p.strip() for p in spec.strip().split(":")]
    kind = parts[0].lower()
    kind = {"mxfp8": "mxfp8_e4m3", "mxfp6": "mxfp6_e3m2", "tile": "tiles"}.get(kind, kind)
    if kind not in _KINDS:
        raise ValueError(f"scheme {spec!r}: unknown kind {parts[0]!r}; valid: {', '.join(_KINDS)}")
    rest = parts[1:]
    fmt = None
    if kind in ("cast", "per_tensor", "tiles"):
        if not rest or "=" in rest[0]:
            raise ValueError(f"scheme {spec!r}: {kind} needs a format, e.g. '{kind}:fp8_e4m3'")
        fmt = get_format(rest[0]).name
        rest = rest[1:]
    options: dict[str, Any] = {}
    for opt in rest:
        key, eq, value = opt.partition("=")
        options[key.strip().lower()] = value.strip() if eq else True
    return Scheme(kind, fmt, options, name=spec.strip())


def _from_table(spec: str) -> Scheme | None:
    """The :class:`Scheme` of a :mod:`lowprec.schemes` name (None if it is not one)."""
    from .schemes import get_scheme

    try:
        s = get_scheme(spec)
    except ValueError:
        return None
    for part, reason in s.refused:
        if part == "quant_error":
            raise ValueError(f"scheme {spec!r} is refused here: {reason}")
    opts: dict[str, Any] = {"mode": "stochastic"} if s.mode == "stochastic" else {}
    if s.kind == "cast":
        return Scheme("cast", s.fmt, {"nosat": True, **opts}, name=s.name)
    if s.kind == "current":
        return Scheme("per_tensor", s.fmt, opts, name=s.name)
    if s.kind == "mx":
        return Scheme(s.fmt, None, {"rule": s.scale_rule, **opts}, name=s.name)
    if s.kind == "nvfp4" or s.kind in NVFP4_RECIPE_KINDS:
        return Scheme(s.kind, None, opts, name=s.name)
    if s.kind in BLOCK_VARIANT_KINDS:
        block, scale_format, tensor_scale = BLOCK_VARIANT_KINDS[s.kind]
        extra: dict[str, Any] = {} if tensor_scale else {"global": 1.0}
        return Scheme("nvfp4", None, {"block": block, "scale": scale_format, **extra, **opts},
                      name=s.name)
    raise ValueError(f"scheme {spec!r} ({s.kind}) has no compare_schemes equivalent")


@dataclass(frozen=True)
class SchemeError:
    """Error statistics of one scheme on one tensor (see the module docstring)."""

    scheme: str
    sqnr_db: float
    max_rel_error: float
    mean_rel_error: float
    frac_clipped: float
    frac_flushed: float
    frac_nonfinite: float
    bits_per_value: float


def _stats(label: str, x: np.ndarray, q: np.ndarray, threshold: np.ndarray,
           bits: float) -> SchemeError:
    ok = np.isfinite(x)
    xs, qs, lim = x[ok], q[ok], threshold[ok]
    n = max(xs.size, 1)
    good = np.isfinite(qs)
    err = np.where(good, qs - xs, 0.0)
    signal, noise = float(np.sum(xs * xs)), float(np.sum(err * err))
    sqnr = np.inf if noise == 0 else (10 * np.log10(signal / noise) if signal else -np.inf)
    nz = (xs != 0) & good
    rel = np.abs(err[nz]) / np.abs(xs[nz])
    return SchemeError(
        scheme=label,
        sqnr_db=float(sqnr),
        max_rel_error=float(rel.max()) if rel.size else 0.0,
        mean_rel_error=float(rel.mean()) if rel.size else 0.0,
        frac_clipped=float(np.count_nonzero(np.abs(xs) >= lim)) / n,
        frac_flushed=float(np.count_nonzero((xs != 0) & (qs == 0))) / n,
        frac_nonfinite=float(np.count_nonzero(~good)) / n,
        bits_per_value=float(bits),
    )


def compare_schemes(x: Any, schemes: list[str | Scheme]) -> list[SchemeError]:
    """Quantize ``x`` with every scheme; one :class:`SchemeError` per scheme, in order."""
    arr = as_working_array(x)
    x64 = arr.astype(np.float64)
    out = []
    for spec in schemes:
        s = parse_scheme(spec)
        q, threshold, bits = s.quantize(arr)
        with np.errstate(invalid="ignore", over="ignore"):
            out.append(_stats(s.label(), x64, np.asarray(q, np.float64).reshape(arr.shape),
                              np.asarray(threshold).reshape(arr.shape), bits))
    return out


def to_columns(results: list[SchemeError]) -> dict[str, list]:
    """The results as columns (``{"scheme": [...], "sqnr_db": [...], ...}``) for plotting."""
    return {f.name: [getattr(r, f.name) for r in results] for f in fields(SchemeError)}


def format_table(results: list[SchemeError]) -> str:
    """A fixed-width text table of the results."""
    head = ["scheme", "SQNR dB", "max rel", "mean rel", "clipped", "flushed", "bits/val"]
    rows = [[r.scheme, f"{r.sqnr_db:.2f}", f"{r.max_rel_error:.3g}", f"{r.mean_rel_error:.3g}",
             f"{r.frac_clipped:.2%}", f"{r.frac_flushed:.2%}", f"{r.bits_per_value:.3g}"]
            for r in results]
    widths = [max(len(c) for c in col) for col in zip(head, *rows)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def plot_schemes(results: list[SchemeError], metric: str = "sqnr_db", *, ax: Any = None) -> Any:
    """Scatter ``metric`` against bits per value, one labelled point per scheme.
    Returns the matplotlib Axes."""
    numeric = [f.name for f in fields(SchemeError) if f.name != "scheme"]
    if metric not in numeric:
        raise ValueError(f"metric must be one of {numeric}, got {metric!r}")
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.figure().add_subplot()
    cols = to_columns(results)
    ax.scatter(cols["bits_per_value"], cols[metric])
    for name, bx, y in zip(cols["scheme"], cols["bits_per_value"], cols[metric]):
        ax.annotate(name, (bx, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("bits per value (scales included)")
    ax.set_ylabel(metric)
    return ax
