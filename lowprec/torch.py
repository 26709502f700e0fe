"""The PyTorch bridge: capture a model's tensors, round tensors, emulate a recipe.

Needs the ``torch`` extra (``pip install lowprec[torch]``); ``import lowprec`` never
imports torch.

``capture(model)``
    Around your own training loop, records per site and step (a site: a linear or
    convolution layer, a matmul, an embedding, the parts of attention, whether a module
    or your own code calls it; :mod:`lowprec._torch_sites`) its input(s), its weight, the
    gradient with respect to its output and the weight's gradient, as bounded samples,
    and gives them to :func:`lowprec.inspect.report` (``cap.report()``).
``round_to(t, fmt)``
    :func:`lowprec.round_to` on a torch tensor, as an autograd function (identity
    gradient, or a rounded one when asked).
``emulate(model, policy)``
    Makes every site round its operands and output gradient (and weight gradient) as a
    lowprec :class:`~lowprec.train.Policy` says, per layer and kind, with the trainer's
    own rounders (delayed FP8 scaling and MX included), so your model trains under that
    recipe on a CPU. Names of how a tensor is stored: :mod:`lowprec.schemes`.

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

from lowprec._torch_emulate import Emulation, check_fits
from lowprec._torch_sites import (
    LINEAR,
    STATED_MODULES,
    ModuleStack,
    SiteMode,
    b_kind,
    compute_dtype,
    einsum_operands,
    site_of,
)
from lowprec.formats import FloatFormat, get_format
from lowprec.inspect import report as _report
from lowprec.rounding import round_to as _lp_round_to
from lowprec.train.policy import Policy, get_policy

__all__ = ["Capture", "Emulation", "capture", "emulate", "round_to"]

# ---------------------------------------------------------------- round_to in torch
def _check_float(t: Any, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{what} has dtype {t.dtype}; lowprec rounds floating-point tensors "
                        "(float16, bfloat16, float32, float64)")


_check_fits = check_fits


def _kind_of_param(pname: str) -> str:
    """The kind a parameter is recorded as: ``weight`` for ``weight`` and ``*_weight``
    (a MultiheadAttention's ``in_proj_weight``), ``bias`` for ``bias`` and ``*_bias``,
    else its own name."""
    for kind in ("weight", "bias"):
        if pname == kind or pname.endswith("_" + kind):
            return kind
    return pname


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
        # the modules holding parameters (norms are computed, not stored: left out)
        self.layers = {name or "model": m for name, m in model.named_modules()
                       if any(True for _ in m.parameters(recurse=False))
                       and not isinstance(m, STATED_MODULES)}
        #: per layer, the parameters whose gradients are recorded (``weight`` and
        #: ``*_weight`` for ``params=("weight",)``)
        self.params = {name: [(pn, p) for pn, p in m.named_parameters(recurse=False)
                              if params is None or _kind_of_param(pn) in params]
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
        self._param_names = None if params is None else set(params)
        self._stack: ModuleStack | None = None  # built at the first captured step
        self._hooked = False  # the site and parameter hooks are in place
        self._mode = SiteMode(self)
        self._entered = 0

    # -- hooks
    def _start_step(self, module: torch.nn.Module, args: Any) -> None:
        if not (module.training and torch.is_grad_enabled()):
            self._on = False
            return
        self._step = self.steps
        self.steps += 1
        self._on = self._step % self.every == 0
        # The site hooks are in place only for captured steps (installed at their
        # forward, removed at the next step's): other steps pay for this hook alone.
        if self._on and not self._hooked:
            if self._stack is None:
                self._stack = ModuleStack(self.model)
            self._stack.install()
            self._hooked = True
            for name, own in self.params.items():
                for pname, p in own:
                    if p.requires_grad:
                        self._layer_handles.append(
                            p.register_hook(self._param_hook(name, _kind_of_param(pname))))
        elif not self._on and self._hooked:
            self._remove_layer_hooks()
        if self._on:
            self._stack.reset()  # type: ignore[union-attr]
            self._mode.__enter__()
            self._entered += 1
            self._scale = float(self.scaler.get_scale()) if self.scaler is not None else 1.0
            self._kept.append(self._step)
            if self.max_steps is not None and len(self._kept) > self.max_steps:
                old = f"@{self._kept.popleft()}"
                for k in [k for k in self.samples if k.endswith(old)]:
                    del self.samples[k]

    def _end_forward(self, module: Any, args: Any, out: Any) -> None:
        if self._entered:
            self._entered -= 1
            self._mode.__exit__(None, None, None)

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

    # -- the handler SiteMode calls (it records, then runs the op unchanged)
    def seen(self, name: str, what: str) -> None:
        return None

    def _want(self, kind: str) -> bool:
        return self._param_names is None or kind in self._param_names

    def _rec(self, site: str, kind: str, t: Any, op: str) -> None:
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
            return
        dt = compute_dtype(op, t)
        self._record(f"{site}/{kind}@{self._step}", t if dt == t.dtype else t.detach().to(dt))

    def _out(self, site: str, out: Any) -> None:
        if isinstance(out, torch.Tensor) and out.requires_grad:
            key, scale = f"{site}/output_grad@{self._step}", self._scale
            out.register_hook(lambda g: self._record(key, g, scale))

    def op(self, op: str, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        st = self._stack
        assert st is not None
        if op == "sdpa":
            q, k, v = (list(args) + [kwargs.get(n) for n in ("query", "key", "value")])[:3]
            s_site, v_site = st.functional("scores"), st.functional("values")
            self._rec(s_site, "input", q, op)
            self._rec(s_site, "input_b", k, op)
            self._rec(v_site, "input_b", v, op)
            out = func(*args, **kwargs)
            self._out(v_site, out)
            return out
        if op == "einsum":
            operands = einsum_operands(args)[1]
        elif op in ("addmm", "baddbmm"):
            operands = list(args[1:3])
        else:
            operands = list(args[:2]) + ([kwargs["weight"]] if "weight" in kwargs else [])
        w = operands[1] if len(operands) > 1 else None
        kb = "weight" if op in LINEAR.values() or op == "embedding" else b_kind(st, w)
        site = site_of(st, op, w if kb == "weight" else None)
        if op != "embedding" and operands:
            self._rec(site, "input", operands[0], op)
        if w is not None and (kb != "weight" or self._want("weight")):
            self._rec(site, kb, w, op)
        if op in LINEAR.values() and len(args) > 2 and self._want("bias"):
            self._rec(site, "bias", args[2], op)
        out = func(*args, **kwargs)
        self._out(site, out)
        return out

    def _param_hook(self, name: str, kind: str) -> Any:
        def hook(g: torch.Tensor) -> None:
            if self._on:
                self._record(f"{name}/{kind}_grad@{self._step}", g, self._scale)
        return hook

    def __enter__(self) -> Capture:
        self._handles.append(self.model.register_forward_pre_hook(self._start_step))
        self._handles.append(self.model.register_forward_hook(self._end_forward,
                                                              always_call=True))
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def _remove_layer_hooks(self) -> None:
        for h in self._layer_handles:
            h.remove()
        self._layer_handles.clear()
        if self._stack is not None:
            self._stack.remove()
        self._hooked = False

    def remove(self) -> None:
        """Remove every hook (leaving the ``with`` block does it)."""
        while self._entered:
            self._end_forward(None, None, None)
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
        seen = len({k.rpartition("@")[0] for k in self.samples})
        sites = max(seen, sum(2 + 2 * len(own) for own in self.params.values()))
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
    In a captured step a ``TorchFunctionMode`` sees every site (the same sites and names
    as :func:`emulate`: ``fc1``, ``attn`` for a MultiheadAttention's in-projection,
    ``attn.out_proj``, ``attn.scores``...) and records its input(s) (in the dtype the op
    computes in, autocast's when it is on), the gradient with respect to its output, and
    its weight with the parameters named in ``params`` (default ``weight`` and
    ``*_weight``; ``None``: all, biases included) and their gradients. A
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
def emulate(model: torch.nn.Module, policy: Policy | str, *, seed: int = 0,
            strict: bool = False) -> Emulation:
    """Make ``model`` compute as ``policy`` stores tensors: every site rounds its operands
    and output gradient, per layer and kind.

    The sites (see :mod:`lowprec._torch_sites`) are every call, from a module or from
    your own code, of ``F.linear``, ``F.conv1d/2d/3d`` and the transposed convolutions
    (``input``, ``weight``, ``output_grad``, ``weight_grad``), ``torch.matmul``/``mm``/
    ``bmm``/``addmm``/``baddbmm``, ``x @ y`` and two-operand ``torch.einsum`` (``input``
    and ``input_b``, or ``weight`` when the operand is a parameter), ``F.embedding``
    (its table as ``weight``), ``F.scaled_dot_product_attention`` (site ``M.scores``:
    Q and K, site ``M.values``: the softmax output and V, each with its output gradient;
    the softmax in float32), and ``nn.MultiheadAttention`` (its in-projection as site
    ``M``, its attention as ``M.scores``/``M.values``, its out-projection as
    ``M.out_proj``). A policy's per-layer choices (``Policy.layers``, what
    ``recommend(...).policy()`` gives) win over its roles (``activations`` for inputs,
    ``weights``, ``act_grads``, ``weight_grads``). Forward roundings have identity
    gradients; scaled schemes keep their state per point (delayed amax history), MX and
    NVFP4 scale blocks along the last axis. Under autocast an operand in a plain format
    is first cast to the dtype the op computes in, then rounded (a format that does not
    fit it raises: it would be rounded twice); a scaled scheme's values are not
    bfloat16/float16 values, so such an op is formed in float32 from the float32 operand
    rounded, as an FP8/MX GEMM does, and its result cast to the dtype the op gives. Norms and softmax run as PyTorch runs them, unrounded
    (``Emulation.stated``). Modules holding parameters that no site covers (an LSTM,
    ``nn.Bilinear``...) and the ops lowprec does not round are listed in a warning,
    ``not emulated: ...`` (``strict=True``: a ValueError instead).
    Master weights, the optimizer state and loss scaling stay yours: a float32 model,
    your optimizer and, for fp16 policies, ``torch.amp.GradScaler``.
    ``seed`` feeds stochastic rounding. Returns an :class:`Emulation`
    (a context manager; ``.points`` lists the rounding points).

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    >>> with emulate(model, "bf16-master") as emu:
    ...     y = model(torch.full((1, 4), 0.1))
    >>> [p["role"] for p in emu.points]
    ['input', 'weight', 'output_grad', 'weight_grad']
    >>> "forward" in vars(model[0])   # the model's code is never replaced
    False
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return Emulation(model, get_policy(policy), seed, strict)
