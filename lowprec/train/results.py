"""The results of a training run on disk: ``run.json`` + ``grads.npz`` (the contract with
:mod:`lowprec.figures`).

One folder per run (the demo writes ``<out>/<policy>/``):

``run.json``
    ``policy``, ``task``, ``steps``, ``seed``, ``lowprec_version``,
    ``policy_config`` (:meth:`Policy.to_dict`), ``layers`` (``["fc1", ...]``),
    ``history`` and ``summary``, plus (additions to the original contract)
    ``task_config`` (model widths, learning rate, batch size, ``grad_exp``,
    optimizer) and ``format_version`` (1).

    ``history`` holds one entry per training step in ``step``, ``loss``
    (the batch's training loss as a float64, *without* the task's ``2**-k``
    loss weight and the loss scale), ``train_acc`` (batch accuracy; ``null``
    for regression), ``loss_scale`` (the scale the step used; 1.0 without
    scaling), ``skipped`` (the step was skipped for inf/NaN gradients), and per
    layer (``{layer: [...]}``):

    * ``grad_underflow``: of the gradient values (activation gradient at the
      layer's output, weight and bias gradients) that were non-zero before
      rounding, the fraction that rounded to zero. "Before rounding" is the
      value computed in the accumulation precision (float32 by default) from
      the low-precision operands -- the shadow the rounding is judged against;
    * ``grad_subnormal``: the fraction (of the same non-zero values) that became
      subnormal; ``null`` for scaled formats (FP8 delayed scaling, MX), whose
      thresholds move with the scale;
    * ``grad_overflow``: the number of values that were finite before and inf or
      NaN after rounding;
    * ``lost_updates``: of the weights and biases whose update was non-zero, the
      fraction the optimizer's rounded write left unchanged (0 on skipped steps);
    * additions: ``act_grad_underflow`` and ``weight_grad_underflow`` split
      ``grad_underflow`` by kind.

    ``eval_step``, ``eval_loss``, ``eval_acc`` hold the held-out evaluations
    (every ``eval_every`` steps and after the last step).

    ``summary``: ``final_loss`` and ``final_acc`` (last held-out evaluation;
    ``final_acc`` null for regression), ``grad_underflow_pct`` and
    ``lost_update_pct`` (over the whole run, all layers: 100 * total count /
    total non-zero count), ``skipped_steps``, ``final_loss_scale`` (after the
    last update), ``wall_seconds``.
``grads.npz``
    For a few steps (first, middle, last by default), arrays named
    ``<kind>/<layer>/step<N>`` with ``kind`` ``act_grad`` or ``weight_grad``: the
    gradient values before rounding, divided by the loss scale (so comparable
    across policies), as float64, at most 100,000 values each (an evenly
    strided subsample of larger ones).

:func:`save_run` and :func:`load_run` write and read it; JSON holds NaN as null.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMAT_VERSION", "RunResult", "load_run", "save_run"]

FORMAT_VERSION = 1
MAX_SAMPLES = 100_000


@dataclass
class RunResult:
    """A training run: what was run, its per-step history, its summary and gradient samples."""

    policy: str
    task: str
    steps: int
    seed: int
    lowprec_version: str
    policy_config: dict[str, Any]
    layers: list[str]
    history: dict[str, Any]
    summary: dict[str, Any]
    task_config: dict[str, Any] = field(default_factory=dict)
    grads: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: The final stored weights and biases (``[W1, b1, W2, b2, ...]``, float32) of a run
    #: made in this process; not written by :func:`save_run` (empty after :func:`load_run`).
    params: list[np.ndarray] = field(default_factory=list, repr=False)

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("policy", "task", "steps", "seed", "lowprec_version",
                                            "policy_config", "layers", "history", "summary",
                                            "task_config")}
        d["format_version"] = FORMAT_VERSION
        return _clean(d)


def _clean(x: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN/inf to None."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    return x


def save_run(result: RunResult, folder: str | Path) -> Path:
    """Write ``run.json`` and ``grads.npz`` into ``folder`` (created if needed)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(result.to_json(), indent=1) + "\n")
    # Typed Any, not ndarray: numpy's stub types savez's **kwds and its allow_pickle: bool
    # alike, so mypy cannot tell a dict of arrays from one holding allow_pickle (gradient
    # site names never are "allow_pickle").
    arrays: dict[str, Any] = {k: np.asarray(v, dtype=np.float64)
                              for k, v in result.grads.items()}
    np.savez_compressed(folder / "grads.npz", **arrays)
    return folder


def load_run(folder: str | Path) -> RunResult:
    """Read a run written by :func:`save_run` (gradient samples included)."""
    folder = Path(folder)
    path = folder / "run.json"
    if not path.is_file():
        raise ValueError(f"{folder} holds no run.json: not a lowprec training run folder")
    d = json.loads(path.read_text())
    grads: dict[str, np.ndarray] = {}
    if (folder / "grads.npz").is_file():
        with np.load(folder / "grads.npz") as z:
            grads = {k: z[k] for k in z.files}
    return RunResult(
        policy=d["policy"], task=d["task"], steps=d["steps"], seed=d["seed"],
        lowprec_version=d["lowprec_version"], policy_config=d["policy_config"],
        layers=d["layers"], history=d["history"], summary=d["summary"],
        task_config=d.get("task_config", {}), grads=grads,
    )
