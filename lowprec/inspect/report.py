"""``report(tensors, recipes)``: every tensor through every recipe, measured exactly."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import scaling
from .._blocks import as_working_array
from .._kernels.route_compiled import kernel
from .recipes import DEFAULT_RECIPES, Recipe, apply, describe_scale, get_recipe
from .stats import BlockStats, exponent_histogram, measure

__all__ = ["COLUMNS", "Report", "as_numpy", "is_gradient", "parse_name", "report"]

#: The columns of :attr:`Report.rows`, in order (see :mod:`lowprec.inspect.stats`).
COLUMNS: tuple[str, ...] = (
    "tensor", "layer", "kind", "step", "recipe", "n", "zeros", "nonzero", "underflow",
    "underflow_frac", "subnormal", "overflow", "clipped", "nan", "nan_in", "inf_in", "sqnr_db",
    "max_rel_error", "mean_rel_error", "bits_per_value", "scale", "blocks", "blocks_clipped",
    "blocks_flushed",
)
_STEP = re.compile(r"^(?P<base>.*)@(?P<step>\d+)$")


def parse_name(name: str) -> tuple[str, str, int | None]:
    """``(layer, kind, step)`` of a tensor name ``"LAYER/KIND@STEP"`` (both parts optional).

    Without ``/KIND`` the kind is ``"grad"`` when the name mentions a gradient, else
    ``"tensor"``.

    >>> parse_name("fc1/output_grad@12"), parse_name("conv.weight")
    (('fc1', 'output_grad', 12), ('conv.weight', 'tensor', None))
    """
    m = _STEP.match(name)
    base, step = (m["base"], int(m["step"])) if m else (name, None)
    layer, slash, kind = base.rpartition("/")
    if not slash:
        layer, kind = base, ("grad" if "grad" in base.lower() else "tensor")
    return layer, kind, step


def is_gradient(kind: str) -> bool:
    """Whether tensors of this kind are gradients (a loss scale multiplies them)."""
    return "grad" in kind


def as_numpy(name: str, a: Any) -> np.ndarray:
    """A float array from numpy, torch (CPU or GPU), CuPy, JAX or anything with
    ``__array__`` / DLPack; a TypeError naming the tensor for non-float data."""
    if hasattr(a, "detach") and hasattr(a, "cpu"):  # torch: no grad, on the CPU, not bf16
        a = a.detach().cpu()
        if str(a.dtype) in ("torch.bfloat16",) or str(a.dtype).startswith("torch.float8"):
            a = a.float()  # exact
    elif type(a).__module__.split(".")[0] == "cupy":
        a = a.get()
    try:
        arr = np.asarray(a)
    except (TypeError, RuntimeError):
        arr = np.from_dlpack(a)
    if arr.dtype.kind != "f" and not (arr.dtype.kind == "V" and arr.dtype.itemsize <= 2):
        raise TypeError(f"tensor {name!r} has dtype {arr.dtype}; inspect reports floating-point "
                        "tensors (float16, bfloat16, float32, float64)")
    return as_working_array(arr)


@dataclass
class Report:
    """The result of :func:`report`: one row per tensor and recipe.

    ``rows``: dicts with the keys :data:`COLUMNS`; ``blocks``: per-block forensics
    (:class:`~lowprec.inspect.stats.BlockStats`) by ``(tensor, recipe)`` for MX and NVFP4;
    ``histograms``: per tensor, finite non-zero values per binade; ``loss_scale``: the
    loss scale ``fp16_loss_scale`` used (NaN when none was needed); ``amax``: per tensor,
    the largest finite magnitude (of the full tensor, for samples).
    """

    rows: list[dict[str, Any]]
    recipes: list[str]
    blocks: dict[tuple[str, str], BlockStats] = field(default_factory=dict)
    histograms: dict[str, dict[int, int]] = field(default_factory=dict)
    loss_scale: float = float("nan")
    amax: dict[str, float] = field(default_factory=dict)

    @property
    def tensors(self) -> list[str]:
        """Tensor names, in order."""
        return list(dict.fromkeys(r["tensor"] for r in self.rows))

    def where(self, **match: Any) -> list[dict[str, Any]]:
        """The rows whose columns equal ``match`` (``report.where(recipe="fp16")``)."""
        return [r for r in self.rows if all(r[k] == v for k, v in match.items())]

    def row(self, tensor: str, recipe: str) -> dict[str, Any]:
        """The one row of ``tensor`` under ``recipe`` (KeyError if there is none)."""
        for r in self.rows:
            if r["tensor"] == tensor and r["recipe"] == recipe:
                return r
        raise KeyError(f"no row for tensor {tensor!r} and recipe {recipe!r}")

    def to_csv(self, path: str | Path | None = None) -> str:
        """The rows as CSV (written to ``path`` if given); returns the text."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow({k: ("" if r[k] is None else r[k]) for k in COLUMNS})
        text = buf.getvalue()
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def to_json(self, path: str | Path | None = None) -> str:
        """Rows, block forensics and the loss scale as JSON (inf/NaN as strings)."""
        def clean(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return str(v)
            if isinstance(v, dict):
                return {str(k): clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v
        doc = {"recipes": self.recipes, "loss_scale": self.loss_scale, "rows": self.rows,
               "blocks": [{"tensor": t, "recipe": r, "n_blocks": b.n_blocks,
                           "clipped": b.clipped, "flushed": b.flushed,
                           "scale_exponents": b.scale_exponents, "worst": b.worst}
                          for (t, r), b in self.blocks.items()]}
        text = json.dumps(clean(doc), indent=1)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def recommend(self, max_underflow: float = 1e-3, min_sqnr_db: float = 20.0,
                  candidates: Iterable[str] | None = None) -> Any:
        """Per layer and tensor kind, the narrowest recipe meeting the thresholds
        (see :func:`lowprec.inspect.recommend`)."""
        from .recommend import recommend

        return recommend(self, max_underflow=max_underflow, min_sqnr_db=min_sqnr_db,
                         candidates=candidates)

    def __str__(self) -> str:
        head = ["tensor", "recipe", "underflow", "subnormal", "overflow", "clipped", "NaN",
                "SQNR dB", "scale"]
        body = [[r["tensor"], r["recipe"], f"{r['underflow_frac']:.2%}",
                 f"{r['subnormal'] / r['n']:.2%}" if r["n"] else "-",
                 str(r["overflow"]), str(r["clipped"]), str(r["nan"]),
                 f"{r['sqnr_db']:.1f}", r["scale"]] for r in self.rows]
        widths = [max(len(c) for c in col) for col in zip(head, *body)]

        def line(cells: list[str]) -> str:
            return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths)))
        return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body])


def _finite_amax(x: np.ndarray) -> float:
    """The largest finite ``|x|`` (0.0 when there is none), in one compiled pass."""
    v = np.ascontiguousarray(x).reshape(-1)
    return float(kernel("inspect_amax")(v if v.dtype in (np.float32, np.float64) else v.astype(np.float64)))


def _loss_scales(arrays: dict[str, np.ndarray], kinds: dict[str, str], loss_scale: Any,
                 needed: bool) -> tuple[dict[str, float], float]:
    """The loss scale of each tensor (1 for non-gradients) and the report's scale."""
    grads = [n for n in arrays if is_gradient(kinds[n])]
    if isinstance(loss_scale, Mapping):
        per = {n: float(loss_scale.get(n, 1.0)) if n in grads else 1.0 for n in arrays}
        vals = {per[n] for n in grads}
        return per, (vals.pop() if len(vals) == 1 else float("nan"))
    if loss_scale is None:
        if not needed:
            return {n: 1.0 for n in arrays}, float("nan")
        from .recommend import settled_loss_scale

        amaxes = [_finite_amax(arrays[n]) for n in grads]
        s = settled_loss_scale(amaxes) if grads else 1.0
    else:
        s = float(loss_scale)
        if not (math.isfinite(s) and s > 0):
            raise ValueError(f"loss_scale must be a positive finite number, got {loss_scale!r}")
    return {n: (s if n in grads else 1.0) for n in arrays}, s


def report(tensors: Mapping[str, Any] | Iterable[tuple[str, Any]],
           recipes: Iterable[str | Recipe] | None = None, *, loss_scale: Any = None,
           amax: Mapping[str, float] | None = None, kinds: Mapping[str, str] | None = None,
           worst_blocks: int = 5, seed: int = 0) -> Report:
    """Replay every tensor through every recipe and measure what it does.

    Parameters
    ----------
    tensors:
        Named arrays: a dict ``name -> array`` (numpy, torch, CuPy, JAX, anything numpy
        reads through ``__array__`` or DLPack). Names ``"LAYER/KIND@STEP"`` give the layer,
        the kind (``input``, ``weight``, ``output_grad``, ``weight_grad``...) and the step
        (see :func:`parse_name`).
    recipes:
        Recipe names (:func:`lowprec.inspect.list_recipes`); default
        :data:`~lowprec.inspect.DEFAULT_RECIPES`.
    loss_scale:
        The scale of ``fp16_loss_scale``, applied to gradient tensors only: a number, a
        dict ``name -> scale``, or None for the scale PyTorch's GradScaler settles on for
        these gradients (:func:`~lowprec.inspect.settled_loss_scale`).
    amax:
        Per tensor name, the amax of the full tensor when the array is a sample of it:
        per-tensor and NVFP4 scales then come from it (capture passes these).
    kinds:
        Per tensor name, its kind (overrides the name).
    worst_blocks:
        How many worst blocks the block forensics list.
    seed:
        Seeds the generator of stochastic-rounding recipes (``NAME_sr``).

    Delayed-scaling recipes run through the steps of each series (``LAYER/KIND``) in
    step order, each step using the scale from the earlier steps' amax (the first step
    the initial scale 1, as Transformer Engine does).

    >>> import numpy as np
    >>> g = np.array([1e-8, 3e-5, 0.0, 2.0], dtype=np.float32)
    >>> r = report({"fc/output_grad": g}, ["fp16", "fp16_loss_scale"], loss_scale=1024)
    >>> [(row["recipe"], row["underflow"], row["subnormal"]) for row in r.rows]
    [('fp16', 1, 1), ('fp16_loss_scale', 0, 1)]
    """
    items = list(tensors.items()) if isinstance(tensors, Mapping) else list(tensors)
    recs = [get_recipe(r) for r in (DEFAULT_RECIPES if recipes is None else recipes)]
    if not recs:
        raise ValueError("recipes is empty; give at least one (see lowprec.inspect.list_recipes)")
    arrays = {str(n): as_numpy(str(n), a) for n, a in items}
    names = {n: parse_name(n) for n in arrays}
    kind_of = {n: (kinds or {}).get(n, names[n][1]) for n in arrays}
    scales, shared = _loss_scales(arrays, kind_of, loss_scale,
                                  any(r.kind == "loss_scale" for r in recs))
    amax = dict(amax or {})
    rng = np.random.default_rng(seed)  # stochastic-rounding recipes (NAME_sr)

    outcomes: dict[tuple[str, str], Any] = {}
    for rec in recs:  # delayed scaling walks each series in step order
        if rec.kind != "delayed":
            continue
        series: dict[str, scaling.DelayedScaling] = {}
        order = sorted(arrays, key=lambda n: (names[n][0], kind_of[n], names[n][2] or 0))
        for n in order:
            key = f"{names[n][0]}/{kind_of[n]}"
            ds = series.setdefault(key, scaling.DelayedScaling(rec.element))
            outcomes[n, rec.name] = apply(rec, arrays[n], delayed=ds, amax=amax.get(n),
                                          rng=rng)

    rows: list[dict[str, Any]] = []
    blocks: dict[tuple[str, str], BlockStats] = {}
    for n, x in arrays.items():
        layer, _, step = names[n]
        for rec in recs:
            out = outcomes.pop((n, rec.name), None)
            if out is None:
                out = apply(rec, x, loss_scale=scales[n], amax=amax.get(n), rng=rng)
            row = {"tensor": n, "layer": layer, "kind": kind_of[n], "step": step,
                   "recipe": rec.name}
            counts, b = measure(x, out, float(rec.element.smallest_normal), rec.block_size,
                                worst_blocks)
            row.update(counts)
            row["scale"] = describe_scale(rec, out.scale)
            row["blocks"] = row["blocks_clipped"] = row["blocks_flushed"] = None
            if b is not None:
                blocks[n, rec.name] = b
                row.update(blocks=b.n_blocks, blocks_clipped=b.clipped, blocks_flushed=b.flushed)
            rows.append(row)
    hists = {n: exponent_histogram(x) for n, x in arrays.items()}
    amaxes = {n: float(amax[n]) if n in amax else _finite_amax(x) for n, x in arrays.items()}
    return Report(rows, [r.name for r in recs], blocks, hists, shared, amaxes)
