"""Training one policy on one task: :func:`train` (the loop, with PyTorch AMP's order).

Per step::

    loss   = cross_entropy(net(x), y) * 2**-k      # k: the task's gradient knob
    scaler.scale(loss).backward()                 # gradients rounded on the way
    scaler.step(optimizer); scaler.update()       # unscale, skip on inf/NaN, adjust

Every random choice (initial weights, batches, stochastic rounding) comes from
generators spawned from ``seed``, so the same seed gives the same run bit for bit.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..autograd import Tensor, cross_entropy, mse
from ..rounding import round_to
from .data import Task, get_task
from .model import Network
from .optim import SGD, Adam
from .policy import Policy, get_policy
from .results import MAX_SAMPLES, RunResult
from .scaler import GradScaler, StaticScaler

__all__ = ["OPTIMIZERS", "train"]

OPTIMIZERS = ("sgd", "adam")
Progress = Callable[[int, int], None]


def _make_scaler(policy: Policy) -> GradScaler:
    if policy.loss_scaling == "dynamic":
        return GradScaler(init_scale=policy.init_scale, growth_interval=policy.growth_interval)
    if policy.loss_scaling == "static":
        return StaticScaler(policy.static_scale)
    return GradScaler(enabled=False)


def _store_rounder(policy: Policy, rng: np.random.Generator):
    """How the optimizer writes weights: into the master format, or (no master) straight
    into the low-precision weight format with the weights' rounding mode."""
    q = policy.master if policy.master is not None else policy.weights
    if q is None or q.format == "fp32":
        return None
    if q.mode == "stochastic":
        return lambda x: round_to(x, q.format, "stochastic", rng=rng)
    return lambda x: round_to(x, q.format, q.mode)


def _loss(task: Task, out: Tensor, y: np.ndarray) -> Tensor:
    return cross_entropy(out, y) if task.kind == "classification" else mse(out, y)


def _accuracy(task: Task, out: np.ndarray, y: np.ndarray) -> float | None:
    if task.kind != "classification":
        return None
    return float(np.mean(out.argmax(axis=1) == y))


def _subsample(x: np.ndarray) -> np.ndarray:
    x = x.ravel()
    if x.size > MAX_SAMPLES:
        x = x[:: -(-x.size // MAX_SAMPLES)]
    return x.astype(np.float64)


def train(
    policy: str | Policy,
    task: str | Task = "underflow",
    *,
    steps: int = 400,
    seed: int = 0,
    optimizer: str = "sgd",
    lr: float | None = None,
    batch_size: int | None = None,
    eval_every: int = 50,
    record: bool = True,
    sample_steps: tuple[int, ...] | None = None,
    progress: Progress | None = None,
    **task_knobs: int,
) -> RunResult:
    """Train the task's MLP under ``policy`` and return the instrumented :class:`RunResult`.

    Parameters
    ----------
    policy: a preset name (:func:`list_policies`) or a :class:`Policy`.
    task: ``"underflow"`` (default), ``"regression"``, ``"digits"`` or a :class:`Task`.
    steps, seed: length of the run and the seed of every random choice.
    optimizer: ``"sgd"`` (momentum 0.9, the task's learning rate) or ``"adam"`` (lr 1e-3).
    lr, batch_size: override the task's defaults (``lr`` before the ``2**k`` factor).
    record: count underflow etc. and keep gradient samples (off for timing only).
    sample_steps: steps whose gradients go into ``grads.npz`` (default first, middle, last).
    progress: called as ``progress(step + 1, steps)`` after every step.
    task_knobs: passed to the task builder (e.g. ``grad_exp=16``).
    """
    policy = get_policy(policy)
    if policy.layers:
        raise ValueError(f"policy {policy.name!r} has per-layer choices (for "
                         "lowprec.torch.emulate, whose layers are a PyTorch model's); the "
                         "trainer applies one Quant per role: use policy.replace(layers=())")
    if isinstance(task, str):
        task = get_task(task, seed, **task_knobs)
    elif task_knobs:
        raise ValueError("task knobs are given to get_task(); pass them there for a Task")
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    t0 = time.perf_counter()
    init_rng, batch_rng, round_rng = (np.random.default_rng(s)
                                      for s in np.random.SeedSequence(seed).spawn(3))
    net = Network(task.sizes, policy, init_rng, round_rng, record=record)
    x_train, x_test = net.round_inputs(task.x_train), net.round_inputs(task.x_test)
    weight = np.float32(2.0**-task.grad_exp)
    bs = batch_size or task.batch_size
    store = _store_rounder(policy, round_rng)
    state_q = policy.optimizer_state
    state = (lambda x: round_to(x, state_q.format, state_q.mode, rng=round_rng
                                if state_q.mode == "stochastic" else None)) \
        if state_q is not None and state_q.format != "fp32" else None
    opt: SGD | Adam
    if optimizer == "sgd":
        base_lr = task.lr if lr is None else lr
        opt = SGD(net.parameters(), base_lr * 2.0**task.grad_exp, task.momentum, store=store,
                  state=state)
    else:
        base_lr = 1e-3 if lr is None else lr
        opt = Adam(net.parameters(), base_lr, store=store, state=state)  # scale-invariant: no 2**k
    scaler = _make_scaler(policy)
    if sample_steps is None:
        sample_steps = (0, steps // 2, steps - 1)

    h: dict = {"step": [], "loss": [], "train_acc": [], "loss_scale": [], "skipped": [],
               "eval_step": [], "eval_loss": [], "eval_acc": []}
    per_layer = ("grad_underflow", "grad_subnormal", "grad_overflow", "lost_updates",
                 "act_grad_underflow", "weight_grad_underflow")
    for key in per_layer:
        h[key] = {layer.name: [] for layer in net.layers}
    totals = {"nonzero": 0, "underflow": 0, "moved": 0, "lost": 0}
    grads: dict[str, np.ndarray] = {}

    def evaluate(step: int) -> None:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = net.forward(x_test, train=False)
            eval_loss = float(_loss(task, out, task.y_test).data)
        h["eval_step"].append(step)
        h["eval_loss"].append(eval_loss)
        h["eval_acc"].append(_accuracy(task, out.data, task.y_test))

    for step in range(steps):
        idx = batch_rng.integers(0, task.x_train.shape[0], bs)
        x, y = x_train[idx], task.y_train[idx]
        net.reset_stats()
        net.samples = {} if (record and step in sample_steps) else None
        opt.zero_grad()
        # inf and NaN are part of what is simulated (an overflowing FP16 gradient is
        # what makes the scaler skip a step), so numpy must not warn about them here
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = net.forward(x)
            loss = _loss(task, out, y)
            scale_used = scaler.get_scale()
            scaler.scale(loss * Tensor(weight)).backward()
            net.finish_backward()
            lost = scaler.step(opt)
        skipped = scaler.is_enabled() and scaler.found_inf()
        scaler.update()

        h["step"].append(step)
        h["loss"].append(float(loss.data))
        h["train_acc"].append(_accuracy(task, out.data, y))
        h["loss_scale"].append(scale_used)
        h["skipped"].append(bool(skipped))
        for i, layer in enumerate(net.layers):
            name, a, w = layer.name, layer.act_stats, layer.weight_stats
            nz, uf = a.nonzero + w.nonzero, a.underflow + w.underflow
            totals["nonzero"] += nz
            totals["underflow"] += uf
            h["grad_underflow"][name].append(uf / nz if nz else 0.0)
            sub = (a.subnormal + w.subnormal) / nz if nz else 0.0
            h["grad_subnormal"][name].append(sub if a.has_subnormal and w.has_subnormal
                                             else None)
            h["grad_overflow"][name].append(a.overflow + w.overflow)
            h["act_grad_underflow"][name].append(a.fractions()[0])
            h["weight_grad_underflow"][name].append(w.fractions()[0])
            counts = [lost[2 * i], lost[2 * i + 1]] if lost is not None else [(0, 0), (0, 0)]
            moved = counts[0][1] + counts[1][1]
            gone = counts[0][0] + counts[1][0]
            totals["moved"] += moved
            totals["lost"] += gone
            h["lost_updates"][name].append(gone / moved if moved else 0.0)
        if net.samples:
            for key, arrays in net.samples.items():
                grads[f"{key}/step{step}"] = _subsample(
                    np.concatenate([a.ravel() for a in arrays]) / scale_used)
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            evaluate(step + 1)
        if progress is not None:
            progress(step + 1, steps)

    summary = {
        "final_loss": h["eval_loss"][-1],
        "final_acc": h["eval_acc"][-1],
        "grad_underflow_pct": 100.0 * totals["underflow"] / max(totals["nonzero"], 1),
        "lost_update_pct": 100.0 * totals["lost"] / max(totals["moved"], 1),
        "skipped_steps": int(sum(h["skipped"])),
        "final_loss_scale": scaler.get_scale(),
        "wall_seconds": time.perf_counter() - t0,
    }
    from .. import __version__

    return RunResult(
        policy=policy.name, task=task.name, steps=steps, seed=seed, lowprec_version=__version__,
        policy_config=policy.to_dict(), layers=[layer.name for layer in net.layers], history=h, summary=summary,
        task_config={"sizes": list(task.sizes), "lr": base_lr, "momentum": task.momentum,
                     "batch_size": bs, "grad_exp": task.grad_exp, "optimizer": optimizer,
                     "n_train": int(task.x_train.shape[0]), "n_test": int(task.x_test.shape[0])},
        grads=grads, params=[p.data.copy() for p in net.parameters()],
    )
