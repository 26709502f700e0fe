"""Where a PyTorch model stores tensors: the sites :mod:`lowprec.torch` captures and rounds.

A ``TorchFunctionMode`` sees every call of the ops below, whether a module or your own
code makes it (``F.linear``, ``x @ w``, ``torch.einsum``...). Each call is a *site*
named like a layer: the module that owns the weight operand (``"fc1"``, ``"attn"`` for
a MultiheadAttention's in-projection, ``"attn.out_proj"``), else the innermost module
running plus the op (``"block.matmul"``, ``"attn.scores"``). The tensors of a site have
the kinds lowprec's vocabulary uses (:data:`lowprec.train.policy.ROLE_OF_KIND`):
``input`` (first operand), ``input_b`` (second operand when it is not a parameter),
``weight``, ``output_grad``, ``weight_grad``.

``F.multi_head_attention_forward`` is opened: its own Python body runs with the mode
active, so its in-projection, attention and out-projection are seen (the same code
PyTorch runs, so results are unchanged). ``F.scaled_dot_product_attention`` is the pair
of sites ``MODULE.scores`` (Q, K) and ``MODULE.values`` (softmax output, V).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

LINEAR = {F.linear: "linear", F.conv1d: "conv1d", F.conv2d: "conv2d", F.conv3d: "conv3d",
          F.conv_transpose1d: "conv_transpose1d", F.conv_transpose2d: "conv_transpose2d",
          F.conv_transpose3d: "conv_transpose3d"}
MATMUL = {torch.matmul: "matmul", torch.mm: "mm", torch.bmm: "bmm",
          torch.Tensor.matmul: "matmul", torch.Tensor.__matmul__: "matmul",
          torch.Tensor.mm: "mm", torch.Tensor.bmm: "bmm"}
#: ``input + product``: the product's operands are arguments 1 and 2.
ADDMM = {torch.addmm: "addmm", torch.baddbmm: "baddbmm", torch.Tensor.addmm: "addmm",
         torch.Tensor.baddbmm: "baddbmm"}
SDPA = F.scaled_dot_product_attention
MHA = F.multi_head_attention_forward
#: Ops computed as PyTorch computes them (float32, or autocast's float32 list), never
#: rounded: the stated precision of norms and softmax.
STATED = {F.layer_norm: "layer_norm", F.batch_norm: "batch_norm", F.group_norm: "group_norm",
          F.instance_norm: "instance_norm", F.softmax: "softmax", torch.softmax: "softmax",
          torch.Tensor.softmax: "softmax", F.log_softmax: "log_softmax"}
if hasattr(F, "rms_norm"):
    STATED[F.rms_norm] = "rms_norm"
#: Ops with matmul-like products that lowprec does not round: listed, and refused with
#: ``strict=True``.
NOT_EMULATED = {torch.addbmm: "addbmm", torch.addmv: "addmv", torch.mv: "mv",
                torch.tensordot: "tensordot", F.bilinear: "bilinear",
                F.embedding_bag: "embedding_bag"}
for _rnn in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
    if hasattr(torch, _rnn):
        NOT_EMULATED[getattr(torch, _rnn)] = _rnn
#: Modules whose parameters the sites cover (the others that hold parameters are listed
#: at entry as not emulated).
COVERED = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d,
           torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d,
           torch.nn.MultiheadAttention, torch.nn.Embedding)
STATED_MODULES: tuple[type, ...] = (torch.nn.LayerNorm, torch.nn.GroupNorm,
                                    torch.nn.modules.batchnorm._NormBase)
if hasattr(torch.nn, "RMSNorm"):
    STATED_MODULES = (*STATED_MODULES, torch.nn.RMSNorm)

#: Ops autocast runs in its lower precision (the ones the sites round).
_AUTOCAST_LOWERED = {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                     "conv_transpose2d", "conv_transpose3d", "matmul", "mm", "bmm",
                     "addmm", "baddbmm", "einsum", "sdpa"}


def _opened(fn: Any) -> Any:
    """``fn``'s own body without its ``has_torch_function`` dispatch, so that it can run
    with a mode active and the mode sees the ops inside (the same code, same results)."""
    g = dict(fn.__globals__)
    g["has_torch_function"] = lambda *a, **k: False
    body = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    body.__kwdefaults__ = fn.__kwdefaults__
    return body


_MHA_BODY = _opened(MHA)


def compute_dtype(op: str, t: torch.Tensor) -> torch.dtype:
    """The dtype ``op`` really computes ``t`` in: autocast's lower precision when
    autocast is on for the tensor's device and lowers this op, else ``t``'s dtype."""
    dev = t.device.type
    if op in _AUTOCAST_LOWERED and t.is_floating_point() and torch.is_autocast_enabled(dev):
        return torch.get_autocast_dtype(dev)
    return t.dtype


class ModuleStack:
    """Which module of ``model`` is running (hooks on every module) and who owns each
    parameter."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.names = {m: (name or "model") for name, m in model.named_modules()}
        self.attention = {(name or "model") for name, m in model.named_modules()
                          if isinstance(m, torch.nn.MultiheadAttention)}
        self._calls: dict[tuple[str, str], int] = {}
        self.owner = {id(p): (mname or "model")
                      for mname, m in model.named_modules()
                      for p in m.parameters(recurse=False)}
        self.stack: list[str] = []
        self._handles: list[Any] = []
        self._model = model
        self.install()

    def install(self) -> None:
        """Put the hooks on every module (again, after :meth:`remove`): the maps above
        are kept, so a capture that hooks only its captured steps pays for the hooks
        alone, not for walking the model."""
        if self._handles:
            return
        for m, name in self.names.items():
            if m is self._model:  # the root is "model" when nothing else runs (no hook)
                continue
            self._handles.append(m.register_forward_pre_hook(self._push(name)))
            self._handles.append(m.register_forward_hook(self._pop, always_call=True))

    def _push(self, name: str) -> Callable[..., None]:
        def pre(mod: Any, args: Any) -> None:
            self.stack.append(name)
        return pre

    def _pop(self, mod: Any, args: Any, out: Any) -> None:
        if self.stack:
            self.stack.pop()

    @property
    def current(self) -> str:
        return self.stack[-1] if self.stack else "model"

    def reset(self) -> None:
        """A new forward pass of the model begins."""
        self.stack.clear()
        self._calls.clear()

    def functional(self, op: str) -> str:
        """The site name of a call whose operands are not the model's parameters: the
        running module plus the op, numbered from the second call in a forward pass
        (``block.matmul``, ``block.matmul_1``); in a MultiheadAttention, its two batched
        matmuls are ``.scores`` and ``.values``."""
        cur = self.current
        if cur in self.attention and op in ("bmm", "baddbmm", "matmul"):
            n = self._calls.get((cur, "attention"), 0)
            self._calls[cur, "attention"] = n + 1
            return f"{cur}.{('scores', 'values')[n % 2]}"
        n = self._calls.get((cur, op), 0)
        self._calls[cur, op] = n + 1
        return f"{cur}.{op}" + (f"_{n}" if n else "")

    @property
    def installed(self) -> bool:
        return bool(self._handles)

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self.stack.clear()


def site_of(stack: ModuleStack, op: str, weight: Any = None) -> str:
    """The site name of a call: the weight's owner module, else the running module plus
    the op."""
    if weight is not None and id(weight) in stack.owner:
        return stack.owner[id(weight)]
    return stack.functional(op)


class SiteMode(TorchFunctionMode):
    """Sends every call of a site op to ``handler.op(kind, func, args, kwargs)`` (kind:
    ``linear``-like, ``matmul``-like, ``addmm``-like, ``einsum``, ``embedding``, ``sdpa``),
    runs the opened
    body of MultiheadAttention, and tells ``handler.seen(name, what)`` of stated and
    not-emulated ops."""

    def __init__(self, handler: Any) -> None:
        super().__init__()
        self.handler = handler

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        h = self.handler
        if func in LINEAR:
            return h.op(LINEAR[func], func, args, kwargs)
        if func in MATMUL:
            return h.op(MATMUL[func], func, args, kwargs)
        if func in ADDMM:
            return h.op(ADDMM[func], func, args, kwargs)
        if func is torch.einsum:
            return h.op("einsum", func, args, kwargs)
        if func is F.embedding:
            return h.op("embedding", func, args, kwargs)
        if func is SDPA:
            return h.op("sdpa", func, args, kwargs)
        if func is MHA:
            with self:
                return _MHA_BODY(*args, **kwargs)
        if func in STATED:
            h.seen(STATED[func], "stated")
        elif func in NOT_EMULATED:
            h.seen(NOT_EMULATED[func], "not emulated")
        return func(*args, **kwargs)


def einsum_operands(args: Any) -> tuple[str, list[Any]]:
    """``(equation, operands)`` of a ``torch.einsum`` call (operands given one by one or
    as a list)."""
    eq = args[0]
    ops = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else \
        list(args[1:])
    return eq, ops


def b_kind(stack: ModuleStack, t: Any) -> str:
    """The kind of a matmul's second operand: ``weight`` for a parameter of the model,
    else ``input_b``."""
    return "weight" if id(t) in stack.owner else "input_b"
