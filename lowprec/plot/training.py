"""Family 4, training runs: curves, per-layer underflow, lost updates, the loss scale.

Runs follow the ``run.json`` schema of ``lowprec.train``; any object or dict with
``policy`` and ``history`` works.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from ._style import (
    _DASHES,
    _MARKERS,
    SERIES_COLORS,
    _get,
    _get_opt,
    _new_ax,
    _series_color,
)

__all__ = ["final_ranking", "loss_scale_trace", "lost_updates", "memory_stack",
           "training_curves", "underflow_per_layer"]

#: Memory roles in stacking order (``lowprec.train.memory.ROLES``), with their colours:
#: the weight side in blues and greens, the activations in vermillion.
MEMORY_ROLES = {"master": "#56B4E9", "weights": "#0072B2", "weight_grads": "#009E73",
                "optimizer_state": "#999933", "activations": "#D55E00"}

# ------------------------------------------------------------ 4. training runs
def _runs(runs: Any) -> list[tuple[str, Any]]:
    """[(label, run)] from one run, a sequence of runs, or a mapping label -> run."""
    if isinstance(runs, Mapping) and "history" not in runs:
        return [(str(k), v) for k, v in runs.items()]
    if _get_opt(runs, "history") is not None:
        return [(str(_get(runs, "policy")), runs)]
    out = [(str(_get(r, "policy")), r) for r in runs]
    if not out:
        raise ValueError("no runs given")
    return out


def _hist(run: Any, key: str) -> Any:
    h = _get(run, "history")
    try:
        return _get(h, key)
    except (KeyError, AttributeError):
        raise ValueError(f"run {_get_opt(run, 'policy')!r} has no history field {key!r}") from None


def training_curves(
    runs: Any,
    metric: str = "loss",
    *,
    show_train: bool = True,
    logy: bool = False,
    legend: bool = True,
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Loss (``metric="loss"``) or accuracy (``"acc"``) per step, one colour per run.

    Up to thirteen runs get thirteen different colours (and each its own marker and dash
    pattern); ``legend=False`` leaves the legend to the caller (e.g. one ``fig.legend``
    outside the axes for several panels, so that it covers no data).

    Training values are a thin line (``show_train``), evaluation values (``eval_step``/
    ``eval_loss`` or ``eval_acc``) markers joined by a thick line; each run has its own
    colour, marker and dash pattern, so runs whose curves coincide stay visible. Runs are a mapping label -> run, a list
    of runs (labelled by ``policy``) or one run; a run is any object or dict with
    ``history`` holding the fields of ``run.json``.
    """
    if metric not in ("loss", "acc"):
        raise ValueError(f"metric must be 'loss' or 'acc', got {metric!r}")
    ax = _new_ax(ax, (7.0, 4.5))
    train_key = "loss" if metric == "loss" else "train_acc"
    curves: dict[str, np.ndarray] = {}
    all_runs = _runs(runs)
    for i, (label, run) in enumerate(all_runs):
        color = _series_color(i, len(all_runs))
        marker, dash = _MARKERS[i % len(_MARKERS)], _DASHES[i % len(_DASHES)]
        h = _get(run, "history")
        steps = np.asarray(_hist(run, "step"))
        train = _get_opt(h, train_key)
        if show_train and train is not None and len(train):
            y = np.asarray(train, dtype=np.float64)
            ax.plot(steps, y, color=color, linewidth=0.7, alpha=0.5, gid=f"{label}:train")
        ev_steps, ev = _get_opt(h, "eval_step"), _get_opt(h, f"eval_{metric}")
        if ev is not None and len(ev):
            curves[label] = np.asarray(ev, dtype=np.float64)
            ax.plot(np.asarray(ev_steps), np.asarray(ev, dtype=np.float64), color=color,
                    marker=marker, markersize=5, linewidth=1.6, linestyle=dash,
                    markerfacecolor="none" if i % 2 else color, gid=f"{label}:eval",
                    label=label)
        else:
            ax.plot([], [], color=color, linewidth=1.6, linestyle=dash, label=label)
    _note_coinciding(ax, curves)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (log scale)" if ax.get_yscale() == "log" and metric == "loss" else
                  ("loss" if metric == "loss" else "accuracy (fraction correct)"))
    handles, labels = ax.get_legend_handles_labels()
    if show_train:
        handles += [Line2D([], [], color="0.4", linewidth=0.7, alpha=0.6),
                    Line2D([], [], color="0.4", marker="o", markersize=3.5, linewidth=1.6)]
        labels += ["training batch (per step)", "held-out evaluation"]
    if legend:
        ax.legend(handles, labels, fontsize=8)
    ax.grid(True, color="0.92", linewidth=0.6)
    ax.set_title(title or ("Loss" if metric == "loss" else "Accuracy") + " per precision policy")
    return ax


def final_ranking(runs: Any, metric: str = "loss", *, title: str | None = None,
                  ax: Axes | None = None) -> Axes:
    """The runs ranked by their final held-out loss (``summary["final_loss"]``) or
    accuracy (``"acc"``), as horizontal bars (best on top), in the colours
    :func:`training_curves` gives the same runs. Loss uses a log axis (a diverged run
    can be 20x worse than the rest); each bar is labelled with its value, and with the
    accuracy when ranking by loss. Bars have gid ``"<label>:final"``.
    """
    if metric not in ("loss", "acc"):
        raise ValueError(f"metric must be 'loss' or 'acc', got {metric!r}")
    ax = _new_ax(ax, (6.0, 4.5))
    all_runs = _runs(runs)
    colors = {label: _series_color(i, len(all_runs)) for i, (label, _) in enumerate(all_runs)}
    key = "final_loss" if metric == "loss" else "final_acc"
    summaries = {label: _get(run, "summary") for label, run in all_runs}
    values = {label: _get_opt(sm, key) for label, sm in summaries.items()}
    if any(v is None for v in values.values()):
        raise ValueError(f"every run needs summary[{key!r}] (regression runs have no accuracy)")
    order = sorted(values, key=lambda k: values[k], reverse=(metric == "acc"))
    y = np.arange(len(order))[::-1]
    for yi, label in zip(y, order):
        ax.barh(yi, values[label], color=colors[label], height=0.7, gid=f"{label}:final")
        text = f" {values[label]:.4f}" if metric == "loss" else f" {100 * values[label]:.1f}%"
        acc = _get_opt(summaries[label], "final_acc")
        if metric == "loss" and acc is not None:
            text += f"  ({100 * acc:.1f}%)"
        ax.text(values[label], yi, text, va="center", ha="left", fontsize=7.5)
    ax.set_yticks(y, order, fontsize=8)
    if metric == "loss":
        ax.set_xscale("log")
        lo, hi = min(values.values()), max(values.values())
        ax.set_xlim(lo / 1.15, hi * 4.0)  # room for the labels right of the longest bar
        ax.set_xlabel("final held-out loss (log scale; accuracy in brackets)")
    else:
        ax.set_xlim(0, 1.2)
        ax.set_xlabel("final held-out accuracy")
    ax.grid(True, axis="x", color="0.92", linewidth=0.6)
    ax.set_title(title or ("Final held-out loss, best on top" if metric == "loss"
                           else "Final held-out accuracy, best on top"))
    return ax


def _note_coinciding(ax: Axes, curves: dict[str, np.ndarray], tol: float = 0.02) -> None:
    """Say which runs' evaluation curves lie within ``tol`` (relative) of the first one,
    since they are drawn on top of each other."""
    if len(curves) < 2:
        return
    (ref_label, ref), *rest = curves.items()
    same = [label for label, c in rest if c.shape == ref.shape and np.all(
        np.abs(c - ref) <= tol * np.maximum(np.abs(ref), 1e-12))]
    if same:
        ax.text(0.5, -0.14, "on top of " + ref_label + " (within " + f"{tol:.0%}"
                + " at every evaluation): " + ", ".join(same), transform=ax.transAxes,
                ha="center", va="top", fontsize=8, gid="coinciding", wrap=True)


def _per_layer(run: Any, key: str, ylabel: str, title: str, ax: Axes | None) -> Axes:
    ax = _new_ax(ax, (7.0, 4.5))
    steps = np.asarray(_hist(run, "step"))
    data = _hist(run, key)
    layers = _get_opt(run, "layers") or list(data)
    for i, layer in enumerate(layers):
        if data.get(layer) is None:  # not measured for this policy (null in run.json)
            continue
        y = 100 * np.asarray(data[layer], dtype=np.float64)  # null steps become NaN
        ax.plot(steps[: y.size], y, color=SERIES_COLORS[i % len(SERIES_COLORS)],
                linewidth=1.3, label=str(layer), gid=str(layer))
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.legend(title="layer", fontsize=8, title_fontsize=8)
    ax.grid(True, color="0.92", linewidth=0.6)
    ax.set_title(title)
    return ax


def underflow_per_layer(run: Any, *, key: str = "grad_underflow", title: str | None = None,
                        ax: Axes | None = None) -> Axes:
    """Per layer, the % of gradient values that are non-zero in float64 but flushed to zero
    by rounding (``history[key]``, a mapping layer -> fraction per step)."""
    what = {"grad_underflow": "flushed to zero", "grad_subnormal": "subnormal"}.get(key, key)
    return _per_layer(run, key, f"% of gradient values {what}",
                      title or f"Gradient values {what} per layer "
                      f"({_get_opt(run, 'policy') or 'run'})", ax)


def lost_updates(run: Any, *, title: str | None = None, ax: Axes | None = None) -> Axes:
    """Per layer, the % of weights left unchanged although their update was non-zero
    (``history["lost_updates"]``): the update was below half an ulp of the weight."""
    return _per_layer(run, "lost_updates", "% of weights whose update was lost",
                      title or f"Lost weight updates per layer "
                      f"({_get_opt(run, 'policy') or 'run'})", ax)


def loss_scale_trace(runs: Any, *, title: str | None = None, ax: Axes | None = None) -> Axes:
    """Loss scale per step (log2 axis), with skipped steps (inf/NaN gradients) marked ×.

    The trace of each run has gid ``"<label>:scale"``, its skipped steps ``"<label>:skipped"``.
    """
    ax = _new_ax(ax, (7.0, 4.5))
    all_runs = _runs(runs)
    for i, (label, run) in enumerate(all_runs):
        color = _series_color(i, len(all_runs))
        steps = np.asarray(_hist(run, "step"))
        scale = np.asarray(_hist(run, "loss_scale"), dtype=np.float64)
        skipped = np.asarray(_hist(run, "skipped"), dtype=bool)
        ax.step(steps, scale, where="post", color=color, linewidth=1.5, label=label,
                gid=f"{label}:scale")
        n_skip = int(skipped.sum())
        ax.plot(steps[skipped], scale[skipped], marker="x", markersize=7, color=color,
                markeredgewidth=1.6, linestyle="none", gid=f"{label}:skipped",
                label=f"{label}: {n_skip} skipped steps" if n_skip else None)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss scale S  (log scale, base 2)")
    ax.legend(fontsize=8)
    ax.grid(True, color="0.92", linewidth=0.6)
    ax.set_title(title or "Dynamic loss scale; × = step skipped (inf/NaN gradients)")
    return ax


def memory_stack(tables: Any, *, unit: str = "GiB", title: str | None = None,
                 ax: Axes | None = None) -> Axes:
    """Memory per recipe as horizontal bars stacked by tensor role (master copy, weights,
    gradients, optimizer state, activations), from :func:`lowprec.train.memory` tables.
    Each segment has gid ``"<policy>:<role>"``; its width is the role's bytes in ``unit``
    (``"B"``, ``"KiB"``, ``"MiB"`` or ``"GiB"``); the total is written after the bar."""
    scale = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    if unit not in scale:
        raise ValueError(f"unit must be one of {tuple(scale)}, got {unit!r}")
    tables = list(tables)
    if not tables:
        raise ValueError("no memory tables given")
    ax = _new_ax(ax, (7.0, 4.5))
    y = np.arange(len(tables))[::-1]
    for yi, t in zip(y, tables):
        left = 0.0
        for role, color in MEMORY_ROLES.items():
            w = t.bytes_of(role) / scale[unit]
            ax.barh(yi, w, left=left, color=color, height=0.7, gid=f"{t.policy}:{role}",
                    label=role.replace("_", " ") if yi == y[0] else None)
            left += w
        ax.text(left, yi, f" {left:.3g} {unit}", va="center", ha="left", fontsize=7.5)
    ax.set_yticks(y, [t.policy for t in tables], fontsize=8)
    ax.set_xlim(0, max(t.total_bytes for t in tables) / scale[unit] * 1.18)
    ax.set_xlabel(f"memory ({unit}, exact)")
    ax.grid(True, axis="x", color="0.92", linewidth=0.6)
    ax.set_title(title or "Memory per recipe, by tensor role")
    return ax
