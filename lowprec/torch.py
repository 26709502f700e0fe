"""The PyTorch bridge: capture a model's tensors, round tensors, emulate a recipe.

Needs the ``torch`` extra (``pip install lowprec[torch]``); ``import lowprec`` never
imports torch.

``capture(model)``
    Around your own training loop, records per layer and step the layer's input, the
    gradient with respect to its output, its parameters and their gradients, as bounded
    samples, and gives them to :func:`lowprec.inspect.report` (``cap.report()``).
``round_to(t, fmt)``
    :func:`lowprec.round_to` on a torch tensor, as an autograd function (identity
    gradient, or a rounded one when asked).
``emulate(model, policy)``
    Makes every ``nn.Linear`` round its input, weight and output gradient (and weight
    gradient) as a lowprec :class:`~lowprec.train.Policy` says, with the trainer's own
    rounders (delayed FP8 scaling and MX included), so your model trains under that recipe
    on a CPU.

Memory bound of a capture (a fixed sample per tensor and step): every captured tensor
keeps at most ``max_values`` values, a window of whole rows of its last axis at a random
place (so MX and NVFP4 blocks in the sample are the tensor's own blocks) or, when one row is longer, an
aligned run of ``max_values // 32 * 32`` values of one row; the full tensor's amax is
kept beside it, so per-tensor scales are the full tensor's and every sampled value is
quantized exactly as in the full tensor. Counts are then exact for the sample (an unbiased
estimate for the full tensor). With ``max_steps`` only that many captured steps are kept
(the latest), so a capture holds at most ``max_values x 8 bytes x sites x max_steps``
(:attr:`Capture.bound_bytes`), however long it runs.

>>> import torch, lowprec.torch as lpt
>>> t = torch.tensor([0.1, 1e-6], requires_grad=True)
>>> y = lpt.round_to(t, "fp8_e4m3"); y.detach().tolist()
[0.1015625, 0.0]
>>> y.sum().backward(); t.grad.tolist()   # identity gradient
[1.0, 1.0]
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lowprec import mx
from lowprec.formats import FloatFormat, get_format
from lowprec.inspect import report as _report
from lowprec.rounding import round_to as _lp_round_to
from lowprec.train.policy import Policy, get_policy
from lowprec.train.quant import make_rounder

__all__ = ["Capture", "Emulation", "capture", "emulate", "round_to"]

_DTYPE_FORMATS = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


# ---------------------------------------------------------------- round_to in torch
def _check_float(t: Any, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{what} has dtype {t.dtype}; lowprec rounds floating-point tensors "
                        "(float16, bfloat16, float32, float64)")


def _check_fits(fmt: FloatFormat, dtype: torch.dtype) -> None:
    """Every value of ``fmt`` must be a value of ``dtype`` (else the result would be
    rounded a second time on the way back)."""
    if dtype == torch.float64:
        return
    if dtype not in _DTYPE_FORMATS:
        raise TypeError(f"tensors of dtype {dtype} are not supported; use float16, bfloat16, "
                        "float32 or float64")
    d = get_format(_DTYPE_FORMATS[dtype])
    if not (fmt.mantissa_bits <= d.mantissa_bits and fmt.emax <= d.emax
            and fmt.smallest_subnormal_exponent >= d.smallest_subnormal_exponent):
        raise ValueError(f"the values of {fmt.name} do not all fit {dtype}, so the result "
                         f"would be rounded twice; convert the tensor first (t.float())")


def _round_tensor(t: torch.Tensor, fmt: FloatFormat, mode: str, saturate: bool,
                  rng: Any) -> torch.Tensor:
    src = t.detach().cpu()
    if src.dtype in (torch.float16, torch.bfloat16):
        src = src.float()  # exact
    out = _lp_round_to(src.numpy(), fmt, mode, saturate=saturate, rng=rng)
    return torch.from_numpy(np.ascontiguousarray(out)).to(device=t.device, dtype=t.dtype)


class _Round(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, fmt: FloatFormat, mode: str, saturate: bool,
                rng: Any, grad: FloatFormat | None, grad_mode: str) -> torch.Tensor:
        ctx.grad_spec = (grad, grad_mode, saturate, rng)
        return _round_tensor(t, fmt, mode, saturate, rng)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        grad, grad_mode, saturate, rng = ctx.grad_spec
        if grad is not None:
            g = _round_tensor(g, grad, grad_mode, saturate, rng)
        return g, None, None, None, None, None, None


def round_to(t: torch.Tensor, fmt: FloatFormat | str, mode: str = "rne", *,
             saturate: bool = False, grad: FloatFormat | str | None = None,
             grad_mode: str = "rne", rng: Any = None) -> torch.Tensor:
    """:func:`lowprec.round_to` of a tensor, bit for bit, as an autograd function.

    The result has ``t``'s dtype and device (the values of ``fmt`` must fit the dtype:
    any format for float32/float64; a ValueError otherwise, e.g. fp16 into bfloat16). The
    gradient passes through unchanged (straight-through), or rounded to ``grad``
    (``"same"``: to ``fmt``) in ``grad_mode``. ``rng`` feeds ``mode="stochastic"``.

    >>> import torch
    >>> round_to(torch.tensor([1000.0]), "fp8_e4m3", saturate=True).tolist()
    [448.0]
    """
    _check_float(t, "t")
    f = get_format(fmt)
    _check_fits(f, t.dtype)
    g = None if grad is None else (f if grad == "same" else get_format(grad))
    if g is not None:
        _check_fits(g, t.dtype)
    from lowprec.rounding import check_mode

    return _Round.apply(t, f, check_mode(mode), bool(saturate), rng, g, check_mode(grad_mode))


# ---------------------------------------------------------------------------- capture
@dataclass
class _Sample:
    values: np.ndarray  # the sample, as captured (scaled gradients stay scaled)
    amax: float | None  # amax of the full tensor (NaN if it held NaN); None: kept whole
    scale: float        # the loss scale its backward ran under (1 for forward tensors)


class Capture:
    """What :func:`capture` records; use it as a context manager around training.

    ``samples``: ``"LAYER/KIND@STEP" -> sample``; ``steps``: the training steps seen so far
    (training-mode forward passes of the model with gradients enabled).
    """

    def __init__(self, model: torch.nn.Module, every: int = 1, max_values: int = 4096,
                 max_steps: int | None = None, scaler: Any = None, seed: int = 0,
                 params: tuple[str, ...] | None = ("weight",)) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive integer, got {every!r}")
        if not isinstance(max_values, int) or max_values < 32:
            raise ValueError(f"max_values must be an integer >= 32, got {max_values!r}")
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps must be a positive integer or None, got {max_steps!r}")
        self.layers = {name or "model": m for name, m in model.named_modules()
                       if any(True for _ in m.parameters(recurse=False))}
        #: per layer, the parameters recorded (with their gradients)
        self.params = {name: [(pn, p) for pn, p in m.named_parameters(recurse=False)
                              if params is None or pn in params]
                       for name, m in self.layers.items()}
        if not self.layers:
            raise ValueError("the model has no parameters, so there is nothing to capture "
                             "(capture hooks the modules that hold parameters)")
        self.model, self.every, self.max_values = model, every, max_values
        self.max_steps, self.scaler = max_steps, scaler
        self.samples: dict[str, _Sample] = {}
        self.steps = 0
        self._rng = np.random.default_rng(seed)  # never torch's generator: training unchanged
        self._on = False
        self._step = -1
        self._scale = 1.0
        self._kept: deque[int] = deque()
        self._handles: list[Any] = []
        self._layer_handles: list[Any] = []

    # -- hooks
    def _start_step(self, module: torch.nn.Module, args: Any) -> None:
        if not (module.training and torch.is_grad_enabled()):
            self._on = False
            return
        self._step = self.steps
        self.steps += 1
        self._on = self._step % self.every == 0
        # The layer hooks are in place only for captured steps (installed at their
        # forward, removed at the next step's): other steps pay for this hook alone.
        if self._on and not self._layer_handles:
            for name, m in self.layers.items():
                self._hook_module(name, m)
        elif not self._on and self._layer_handles:
            self._remove_layer_hooks()
        if self._on:
            self._scale = float(self.scaler.get_scale()) if self.scaler is not None else 1.0
            self._kept.append(self._step)
            if self.max_steps is not None and len(self._kept) > self.max_steps:
                old = f"@{self._kept.popleft()}"
                for k in [k for k in self.samples if k.endswith(old)]:
                    del self.samples[k]

    def _record(self, key: str, t: torch.Tensor, scale: float = 1.0) -> None:
        if key in self.samples:
            return
        dt = t.dtype
        if dt is not torch.float32 and dt is not torch.float64:
            if not t.is_floating_point():
                return
            t = t.float()  # float16, bfloat16, float8: exact
        t = t.detach()
        if t.device.type != "cpu":  # sample on the device, move only the sample
            x2 = self._window(t.reshape(-1, t.shape[-1]) if t.dim() else t.reshape(1, 1))
            amax = float(t.abs().amax()) if t.numel() else 0.0
            self.samples[key] = _Sample(x2.cpu().numpy().copy(), amax, scale)
            return
        a = t.numpy()  # a view: numpy is faster than torch for these small reductions
        a2 = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)
        if a.size <= self.max_values:  # kept whole: its amax is the sample's
            self.samples[key] = _Sample(a2.copy(), None, scale)
            return
        amax = float(max(-a.min(), a.max()))  # NaN if a holds NaN
        self.samples[key] = _Sample(np.array(self._window(a2), copy=True), amax, scale)

    def _window(self, x2: Any) -> Any:
        """At most ``max_values`` values of a 2-D ``x2``: a window of whole rows at a
        random place, or an aligned run of one row when a row is longer."""
        rows, cols = x2.shape
        if rows * cols <= self.max_values:
            return x2
        if cols <= self.max_values:
            k = self.max_values // cols
            r = int(self._rng.integers(rows - k + 1))
            return x2[r:r + k]
        run = self.max_values // 32 * 32
        r = int(self._rng.integers(rows))
        start = int(self._rng.integers((cols - run) // 32 + 1)) * 32
        return x2[r:r + 1, start:start + run]

    def _hook_module(self, name: str, module: torch.nn.Module) -> None:
        own = self.params[name]

        def forward_hook(mod: torch.nn.Module, args: Any, output: Any) -> None:
            if not self._on:
                return
            step = self._step
            if args and isinstance(args[0], torch.Tensor):
                self._record(f"{name}/input@{step}", args[0])
            for pname, p in own:
                self._record(f"{name}/{pname}@{step}", p)
            if isinstance(output, torch.Tensor) and output.requires_grad:
                scale = self._scale

                def grad_hook(g: torch.Tensor) -> None:
                    self._record(f"{name}/output_grad@{step}", g, scale)
                output.register_hook(grad_hook)

        self._layer_handles.append(module.register_forward_hook(forward_hook))
        for pname, p in own:
            if p.requires_grad:
                self._layer_handles.append(p.register_hook(self._param_hook(name, pname)))

    def _param_hook(self, name: str, pname: str) -> Any:
        def hook(g: torch.Tensor) -> None:
            if self._on:
                self._record(f"{name}/{pname}_grad@{self._step}", g, self._scale)
        return hook

    def __enter__(self) -> Capture:
        self._handles.append(self.model.register_forward_pre_hook(self._start_step))
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def _remove_layer_hooks(self) -> None:
        for h in self._layer_handles:
            h.remove()
        self._layer_handles.clear()

    def remove(self) -> None:
        """Remove every hook (leaving the ``with`` block does it)."""
        self._remove_layer_hooks()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._on = False

    # -- results
    @property
    def nbytes(self) -> int:
        """Bytes held by the samples."""
        return sum(s.values.nbytes for s in self.samples.values())

    @property
    def bound_bytes(self) -> float:
        """The most the samples can hold: ``max_values x 8 x sites x max_steps``
        (inf without ``max_steps``)."""
        sites = sum(2 + 2 * len(own) for own in self.params.values())
        steps = self.max_steps if self.max_steps is not None else float("inf")
        return self.max_values * 8 * sites * steps

    def tensors(self) -> dict[str, np.ndarray]:
        """The samples, gradients divided by the loss scale they ran under (exactly, in
        float64: the true gradients of the unscaled loss)."""
        return {k: (s.values if s.scale == 1.0 else s.values.astype(np.float64) / s.scale)
                for k, s in self.samples.items()}

    def loss_scales(self) -> dict[str, float]:
        """The GradScaler's scale of every captured gradient (1 for the others)."""
        return {k: s.scale for k, s in self.samples.items()}

    def report(self, recipes: Any = None, *, loss_scale: Any = "captured", **kw: Any) -> Any:
        """:func:`lowprec.inspect.report` of the samples (keys ``LAYER/KIND@STEP``).

        ``loss_scale="captured"`` (default) uses the GradScaler's scale of each step when
        a scaler was passed to :func:`capture`, otherwise the scale GradScaler would
        settle on; a number or None as in :func:`~lowprec.inspect.report`.
        """
        if not self.samples:
            raise ValueError("nothing was captured: run training steps (model.train(), "
                             "forward and backward) inside the 'with capture(...)' block")
        if isinstance(loss_scale, str) and loss_scale == "captured":
            loss_scale = self.loss_scales() if self.scaler is not None else None
        amax = {k: s.amax / s.scale for k, s in self.samples.items() if s.amax is not None}
        return _report(self.tensors(), recipes, loss_scale=loss_scale, amax=amax, **kw)


def capture(model: torch.nn.Module, every: int = 1, max_values: int = 4096, *,
            max_steps: int | None = None, scaler: Any = None, seed: int = 0,
            params: tuple[str, ...] | None = ("weight",)) -> Capture:
    """Record ``model``'s tensors every ``every`` training steps (see the module docstring).

    Use as ``with capture(model) as cap: <your training loop>``, then ``cap.report()``.
    Hooks go on every module that holds parameters: its input, the gradient with respect
    to its output, and its parameters named in ``params`` (default the ``weight``;
    ``None``: all, biases included) and their gradients. A
    step is a training-mode forward pass of ``model`` with gradients enabled. ``scaler``:
    your ``torch.amp.GradScaler``, whose scale is read so that gradients are seen before
    and after the loss scale. Nothing changes what the model computes: the same losses and
    gradients, bit for bit, with and without capture.

    >>> import torch
    >>> model = torch.nn.Linear(4, 2)
    >>> with capture(model) as cap:
    ...     model(torch.ones(3, 4)).sum().backward()
    >>> sorted(cap.samples)
    ['model/input@0', 'model/output_grad@0', 'model/weight@0', 'model/weight_grad@0']
    >>> cap.report(["fp8_e4m3"]).row("model/input@0", "fp8_e4m3")["sqnr_db"]
    inf
    """
    return Capture(model, every, max_values, max_steps, scaler, seed, params)


# ---------------------------------------------------------------------------- emulate
class _Apply(torch.autograd.Function):
    """``fwd(t)`` forward and ``bwd(g)`` backward (either may be None: identity)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, fwd: Any, bwd: Any) -> torch.Tensor:
        ctx.bwd = bwd
        return t if fwd is None else _numpy_apply(t, fwd)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        return (g if ctx.bwd is None else _numpy_apply(g, ctx.bwd)), None, None


def _numpy_apply(t: torch.Tensor, fn: Any) -> torch.Tensor:
    src = t.detach().cpu()
    if src.dtype in (torch.float16, torch.bfloat16):
        src = src.float()
    out = np.ascontiguousarray(fn(src.numpy()))
    return torch.from_numpy(out).to(device=t.device, dtype=t.dtype)


class Emulation:
    """The rounding points :func:`emulate` installed; ``remove()`` (or leaving the ``with``
    block) restores the model. ``points``: one dict per point (``layer``, ``role``,
    ``quant``)."""

    def __init__(self, model: torch.nn.Module, policy: Policy, seed: int) -> None:
        self.policy = policy
        self.points: list[dict[str, str]] = []
        self._modules: list[torch.nn.Module] = []
        self._handles: list[Any] = []
        rng = np.random.default_rng(seed)
        for name, m in model.named_modules():
            if isinstance(m, torch.nn.Linear):
                self._install(name or "model", m, rng)
        if not self._modules:
            raise ValueError("emulate rounds nn.Linear layers, and the model has none")

    def _install(self, name: str, m: torch.nn.Linear, rng: np.random.Generator) -> None:
        p = self.policy
        for q in (p.activations, p.weights, p.act_grads, p.weight_grads):
            if q is not None:  # e.g. fp16 in a bfloat16 model would round twice
                elem = mx.get_mx_format(q.format).element if q.scaling == "mx" else \
                    get_format(q.format)
                _check_fits(elem, m.weight.dtype)
        act = make_rounder(p.activations, rng) if p.activations else None
        wgt = make_rounder(p.weights, rng) if p.weights else None
        gout = make_rounder(p.act_grads, rng) if p.act_grads else None
        for role, q in (("input", p.activations), ("weight", p.weights),
                        ("output_grad", p.act_grads), ("weight_grad", p.weight_grads)):
            if q is not None:
                self.points.append({"layer": name, "role": role, "quant": str(q)})

        def forward(x: torch.Tensor) -> torch.Tensor:
            xin = x if act is None else _Apply.apply(x, act, None)
            w = m.weight if wgt is None else _Apply.apply(m.weight, wgt, None)
            out = torch.nn.functional.linear(xin, w, m.bias)
            return out if gout is None else _Apply.apply(out, None, gout)

        m.forward = forward  # type: ignore[assignment]  # instance attribute; del restores
        self._modules.append(m)
        if p.weight_grads is not None and m.weight.requires_grad:
            wg = make_rounder(p.weight_grads, rng)
            self._handles.append(m.weight.register_hook(lambda g: _numpy_apply(g, wg)))

    def remove(self) -> None:
        for m in self._modules:
            if "forward" in m.__dict__:
                del m.forward
        for h in self._handles:
            h.remove()
        self._modules.clear()
        self._handles.clear()

    def __enter__(self) -> Emulation:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __str__(self) -> str:
        return "\n".join(f"{d['layer']}: {d['role']} -> {d['quant']}" for d in self.points)


def emulate(model: torch.nn.Module, policy: Policy | str, *, seed: int = 0) -> Emulation:
    """Make ``model``'s ``nn.Linear`` layers round as ``policy`` says.

    Every linear layer rounds its input (``policy.activations``), its weight
    (``policy.weights``) and the gradient with respect to its output
    (``policy.act_grads``), with identity gradients through the forward roundings, and
    its weight gradient (``policy.weight_grads``); each point has its own rounder (delayed
    FP8 scaling keeps its amax history per point, MX scales blocks of 32 along the last
    axis). Master weights, the optimizer state and loss scaling stay yours: use a float32
    model, your optimizer and, for fp16 policies, ``torch.amp.GradScaler``.
    ``seed`` feeds stochastic rounding. Returns an :class:`Emulation`
    (a context manager; ``.points`` lists the rounding points).

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    >>> with emulate(model, "bf16-master") as emu:
    ...     y = model(torch.full((1, 4), 0.1))
    >>> [p["role"] for p in emu.points]
    ['input', 'weight', 'output_grad', 'weight_grad']
    >>> "forward" in vars(model[0])   # restored on leaving the block
    False
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return Emulation(model, get_policy(policy), seed)
