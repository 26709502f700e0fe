"""``lowprec.torch.emulate``: a PyTorch model computing as a lowprec policy stores tensors.

Every site of :mod:`lowprec._torch_sites` (linear and convolution layers, matmuls,
einsum, embeddings, the parts of attention) rounds its operands and its output gradient
as the policy says for that layer and kind (:meth:`lowprec.train.Policy.quant`), with
the trainer's rounders (:func:`lowprec.train.quant.make_rounder`), in the dtype the op
really computes in (autocast's, when it is on).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch

from . import mx
from ._torch_sites import (
    COVERED,
    LINEAR,
    STATED_MODULES,
    ModuleStack,
    SiteMode,
    b_kind,
    compute_dtype,
    einsum_operands,
    site_of,
)
from .formats import FloatFormat, get_format
from .train.gemm import gemm_rounders
from .train.policy import Policy, Quant
from .train.quant import make_rounder

__all__ = ["Emulation"]

#: The op name of the functions whose compute dtype ``_run`` asks for.
_OP_OF = {**{f: n for f, n in LINEAR.items()}, torch.einsum: "einsum",
          torch.nn.functional.embedding: "embedding"}

_DTYPE_FORMATS = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


def check_fits(fmt: FloatFormat, dtype: torch.dtype) -> None:
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


def element(q: Quant) -> FloatFormat:
    """The format of ``q``'s stored elements."""
    if q.scaling == "mx":
        return mx.get_mx_format(q.format).element
    if q.scaling == "nvfp4" or q.format == "nvfp4":
        from .nvfp4 import ELEMENT

        return ELEMENT
    return get_format(q.format)


class _Apply(torch.autograd.Function):
    """``fwd(t)`` forward and ``bwd(g)`` backward (either may be None: identity)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, fwd: Any, bwd: Any) -> torch.Tensor:
        ctx.bwd = bwd
        return t.view_as(t) if fwd is None else numpy_apply(t, fwd)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        return (g if ctx.bwd is None else numpy_apply(g, ctx.bwd)), None, None


#: Each GEMM operand's reduction axis in ``F.linear``'s layout (input: tokens x K,
#: weight: N x K, output gradient: tokens x N; the tokens flattened to one axis).
TORCH_AXES = {"fprop.input": -1, "fprop.weight": 1, "dgrad.output_grad": -1,
              "dgrad.weight": 0, "wgrad.output_grad": 0, "wgrad.input": 0}


def _read(r: Any, t: torch.Tensor) -> torch.Tensor:
    return t if r is None else numpy_apply(t, r)


class _Gemms(torch.autograd.Function):
    """``F.linear`` whose fprop, dgrad and wgrad GEMMs read their operands through the
    rounders ``r`` (:mod:`lowprec.train.gemm`, with :data:`TORCH_AXES`), in float32 with
    autocast off; the result and the gradients in the operands' dtypes. Backward forms
    dgrad first (when the input needs a gradient), then wgrad, then the bias gradient
    (the sum of the output gradient as it arrives)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: Any, r: Any) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.r, ctx.b_dtype = r, None if b is None else b.dtype
        with torch.autocast(x.device.type, enabled=False):
            x2 = x.float().reshape(-1, x.shape[-1])
            out = F_linear(_read(r["fprop.input"], x2), _read(r["fprop.weight"], w.float()),
                           None if b is None else b.float())
        return out.reshape(*x.shape[:-1], out.shape[-1]).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        x, w = ctx.saved_tensors
        r = ctx.r
        g2 = g.float().reshape(-1, g.shape[-1])
        dx = dw = db = None
        with torch.autocast(g.device.type, enabled=False):
            if ctx.needs_input_grad[0]:
                dx = _read(r["dgrad.output_grad"], g2) @ _read(r["dgrad.weight"], w.float())
                dx = dx.reshape(x.shape).to(x.dtype)
            if ctx.needs_input_grad[1]:
                x2 = x.float().reshape(-1, x.shape[-1])
                dw = (_read(r["wgrad.output_grad"], g2).T
                      @ _read(r["wgrad.input"], x2)).to(w.dtype)
            if ctx.needs_input_grad[2]:
                db = g2.sum(0).to(ctx.b_dtype)
        return dx, dw, db, None


def F_linear(x: torch.Tensor, w: torch.Tensor, b: Any) -> torch.Tensor:
    return torch.nn.functional.linear(x, w, b)


def numpy_apply(t: torch.Tensor, fn: Any) -> torch.Tensor:
    """``fn`` (numpy in, numpy out) on ``t``; a ValueError when the rounded values are
    not all values of ``t``'s dtype (a scaled value past float16's range: it would be
    rounded a second time)."""
    src = t.detach().cpu()
    half = src.dtype in (torch.float16, torch.bfloat16)
    if half:
        src = src.float()  # exact
    out = np.ascontiguousarray(fn(src.numpy()))
    res = torch.from_numpy(out).to(device=t.device, dtype=t.dtype)
    if half and not np.array_equal(res.detach().cpu().float().numpy(), out, equal_nan=True):
        raise ValueError(f"the rounded values do not all fit {t.dtype} (a scaled format's "
                         f"values past its range), so they would be rounded twice; run "
                         f"this op in float32 (outside autocast) or choose another scheme")
    return res


class Emulation:
    """The rounding points :func:`lowprec.torch.emulate` installed; ``remove()`` (or
    leaving the ``with`` block) restores the model.

    ``points``: one dict per point (``layer``, ``role`` (the tensor's kind), ``quant``);
    ``not_emulated``: the modules and ops it cannot round (warned at entry, or at the
    first call of an op; ``strict=True`` raises instead); ``stated``: the ops computed as
    PyTorch computes them, unrounded (norms, softmax: float32, or autocast's float32).
    """

    def __init__(self, model: torch.nn.Module, policy: Policy, seed: int,
                 strict: bool = False) -> None:
        self.policy, self.strict = policy, strict
        self.points: list[dict[str, str]] = []
        self.not_emulated: list[str] = []
        self._listed: set[str] = set()  # modules listed at entry (their ops are theirs)
        self.stated: set[str] = set()
        self._rng = np.random.default_rng(seed)
        self._rounders: dict[tuple[str, str], Any] = {}
        self._promoted: torch.dtype | None = None
        self._gemms: dict[str, Any] = {}
        # the NVFP4 recipe keeps the last linear layers out of the GEMM formats
        linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        self._kept = set(linears[len(linears) - policy.keep_last:]) if policy.keep_last \
            else set()
        self._hooked: set[int] = set()
        self._handles: list[Any] = []
        # PyTorch's own modules are known at entry; the parameters of your own modules
        # are checked after the first forward pass (each must reach a rounded op).
        self._unchecked: dict[int, str] = {}
        for name, m in model.named_modules():
            if isinstance(m, STATED_MODULES):
                self.stated.add(type(m).__name__)
            elif not isinstance(m, COVERED) and any(True for _ in m.parameters(recurse=False)):
                if type(m).__module__.startswith("torch."):
                    self.not_emulated.append(f"{name or 'model'} ({type(m).__name__})")
                    self._listed.add(name or "model")
                else:
                    for pn, p in m.named_parameters(recurse=False):
                        self._unchecked[id(p)] = f"{name or 'model'}.{pn}"
        if self.not_emulated:
            self._refuse(", ".join(self.not_emulated))
        for name, m in model.named_modules():
            self._announce(name or "model", m)
        self.stack = ModuleStack(model)
        self.mode = SiteMode(self)
        self._handles.append(model.register_forward_pre_hook(self._enter))
        self._handles.append(model.register_forward_hook(self._exit, always_call=True))
        self._entered = 0

    # -- entry
    def _refuse(self, what: str) -> None:
        msg = (f"not emulated: {what} (lowprec rounds Linear, Conv1d/2d/3d, ConvTranspose, "
               "MultiheadAttention, Embedding, matmul/bmm/einsum/F.linear and "
               "scaled_dot_product_attention)")
        if self.strict:
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=4)

    def _announce(self, name: str, m: torch.nn.Module) -> None:
        """The points a covered module will have (known before any forward)."""
        if isinstance(m, torch.nn.MultiheadAttention):
            sites = [(name, ("input", "weight", "output_grad", "weight_grad")),
                     (f"{name}.scores", ("input", "input_b", "output_grad")),
                     (f"{name}.values", ("input", "input_b", "output_grad"))]
        elif isinstance(m, torch.nn.Embedding):
            sites = [(name, ("weight", "output_grad", "weight_grad"))]
        elif isinstance(m, COVERED):
            sites = [(name, ("input", "weight", "output_grad", "weight_grad"))]
        else:
            return
        dtype = next(m.parameters()).dtype
        for site, kinds in sites:
            for kind in kinds:
                q = self._quant(site, kind)
                if q is not None:  # e.g. fp16 in a bfloat16 model would round twice
                    check_fits(element(q), dtype)

    def _quant(self, site: str, kind: str) -> Quant | None:
        q = self.policy.quant(site, kind)
        if q is not None and (site, kind) not in self._rounders:
            self._rounders[site, kind] = make_rounder(q, self._rng)
            self.points.append({"layer": site, "role": kind, "quant": str(q)})
        return q

    def _enter(self, module: Any, args: Any) -> None:
        self.stack.reset()
        self.mode.__enter__()
        self._entered += 1

    def _exit(self, module: Any, args: Any, out: Any) -> None:
        if self._entered:
            self._entered -= 1
            self.mode.__exit__(None, None, None)
            if self._unchecked and module is not None:
                left = sorted(self._unchecked.values())
                self._unchecked.clear()
                what = ", ".join(f"{n} (a parameter no rounded op read)" for n in left)
                self.not_emulated.extend(left)
                self._refuse(what)

    # -- the handler SiteMode calls
    def seen(self, name: str, what: str) -> None:
        if what == "stated":
            self.stated.add(name)
        elif name not in self.not_emulated and self.stack.current not in self._listed:
            # (an op of a module already listed at entry, a GRU's gru, is not listed twice)
            self.not_emulated.append(name)
            self._refuse(name)

    def _round(self, site: str, kind: str, t: Any, op: str) -> Any:
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
            return t
        q = self._quant(site, kind)
        if q is None:
            return t
        dt = compute_dtype(op, t)
        if q.scaling != "none" and dt in (torch.float16, torch.bfloat16):
            # A scaled format's values (elements times a scale) are dequantized in float32
            # and multiplied in float32, as an FP8/MX GEMM does; the output is cast to the
            # dtype the op would have given (see _run).
            self._promoted = dt
            return _Apply.apply(t.float(), self._rounders[site, kind], None)
        if dt != t.dtype:
            t = t.to(dt)  # what autocast casts it to anyway
        check_fits(element(q), dt)
        return _Apply.apply(t, self._rounders[site, kind], None)

    def _run(self, func: Any, args: list[Any], kwargs: dict[str, Any], site: str,
             param: Any = None) -> Any:
        """``func(*args, **kwargs)`` with the output-gradient rounding of ``site``; after
        a scaled rounding of a float16/bfloat16 operand, or before a scaled rounding of
        its output gradient, in float32 with autocast off, the result cast to that dtype
        after the gradient point (so the gradient is rounded in float32, as the GEMM
        that consumes it would read it)."""
        low, self._promoted = self._promoted, None
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        qg = self.policy.quant(site, "output_grad")
        if low is None and qg is not None and qg.scaling != "none" and first is not None:
            dt = compute_dtype(_OP_OF.get(func, "matmul"), first)
            low = dt if dt in (torch.float16, torch.bfloat16) else None
        if low is None:
            return self._grad(site, func(*args, **kwargs), param)

        def up(a: Any) -> Any:
            if isinstance(a, (list, tuple)):
                return type(a)(up(b) for b in a)
            return a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a

        dev = next((a.device.type for a in args if isinstance(a, torch.Tensor)), "cpu")
        with torch.autocast(dev, enabled=False):
            out = func(*up(list(args)), **{k: up(v) for k, v in kwargs.items()})
        return self._grad(site, out, param).to(low)

    def _grad(self, site: str, out: Any, param: Any = None) -> Any:
        if param is not None and id(param) not in self._hooked and param.requires_grad:
            q = self._quant(site, "weight_grad")
            if q is not None:
                self._hooked.add(id(param))
                check_fits(element(q), param.dtype)
                r = self._rounders[site, "weight_grad"]
                self._handles.append(param.register_hook(lambda g: numpy_apply(g, r)))
        if not (isinstance(out, torch.Tensor) and out.requires_grad):
            return out
        q = self._quant(site, "output_grad")
        if q is None:
            return out
        check_fits(element(q), out.dtype)
        return _Apply.apply(out, None, self._rounders[site, "output_grad"])

    def op(self, op: str, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        args = list(args)
        self._promoted = None
        if self._unchecked:
            for t in (*args, *kwargs.values()):
                for u in (t if isinstance(t, (list, tuple)) else (t,)):
                    self._unchecked.pop(id(u), None)
        st = self.stack
        if op in LINEAR.values() or op == "embedding":
            w = args[1] if len(args) > 1 else kwargs.get("weight")
            site = site_of(st, op, w)
            gemms = self._gemm_rounders(site) if op == "linear" else None
            if gemms is not None:
                return self._linear_gemms(func, args, kwargs, site, w, gemms)
            if op != "embedding":
                args[0] = self._round(site, "input", args[0], op)
            if len(args) > 1:
                args[1] = self._round(site, "weight", w, op)
            else:
                kwargs["weight"] = self._round(site, "weight", w, op)
            return self._run(func, args, kwargs, site, w if id(w) in st.owner else None)
        if op == "einsum":
            eq, ops = einsum_operands(args)
            if len(ops) != 2:
                self.seen(f"einsum with {len(ops)} operands", "not emulated")
                return func(*args, **kwargs)
            site = site_of(st, op, ops[1])
            kb = b_kind(st, ops[1])
            a = self._round(site, "input", ops[0], op)
            b = self._round(site, kb, ops[1], op)
            return self._run(func, [eq, a, b], kwargs, site,
                             ops[1] if kb == "weight" else None)
        if op == "sdpa":
            return self._sdpa(func, args, kwargs)
        i = 1 if op in ("addmm", "baddbmm") else 0  # input + a @ b: a, b at 1, 2
        a, b = args[i], args[i + 1]  # matmul, mm, bmm, Tensor.__matmul__
        kb = b_kind(st, b)
        site = site_of(st, op, b if kb == "weight" else None)
        args[i] = self._round(site, "input", a, op)
        args[i + 1] = self._round(site, kb, b, op)
        return self._run(func, args, kwargs, site, b if kb == "weight" else None)

    def _gemm_rounders(self, site: str) -> Any:
        """The rounders of the GEMM operands of the linear layer ``site`` (None: the
        policy names no GEMM formats for it, or it is one of the last ``keep_last``)."""
        if site not in self._gemms:
            quants = None if site in self._kept else self.policy.gemm_quants(site)
            self._gemms[site] = None if quants is None else gemm_rounders(
                quants, self._rng, axes=TORCH_AXES)
            for op, q in (quants or {}).items():
                if q is not None:
                    self.points.append({"layer": site, "role": op, "quant": str(q)})
        return self._gemms[site]

    def _linear_gemms(self, func: Any, args: list[Any], kwargs: dict[str, Any], site: str,
                      w: Any, gemms: Any) -> Any:
        """``F.linear`` with the role roundings, then each GEMM reading its operands as the
        policy's ``gemms`` say (:class:`_Gemms`)."""
        names = ("input", "weight", "bias")
        kw = dict(zip(names, args))
        kw.update(kwargs)
        x = self._round(site, "input", kw["input"], "linear")
        wr = self._round(site, "weight", kw["weight"], "linear")

        def linear(x: Any, w: Any, bias: Any = None) -> Any:
            return _Gemms.apply(x, w, bias, gemms)

        return self._run(linear, [x, wr, kw.get("bias")], {}, site,
                         w if id(w) in self.stack.owner else None)

    def _sdpa(self, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Attention as two rounded matmuls around a float32 softmax (see the module
        docstring of :mod:`lowprec.torch`)."""
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
                 "enable_gqa")
        kw = dict(zip(names, args))
        kw.update(kwargs)
        q, k, v = kw["query"], kw["key"], kw["value"]
        s_site = self.stack.functional("scores")
        v_site = self.stack.functional("values")
        kinds = [(s_site, "input"), (s_site, "input_b"), (s_site, "output_grad"),
                 (v_site, "input"), (v_site, "input_b"), (v_site, "output_grad")]
        if all(self._quant(s, kd) is None for s, kd in kinds):
            return func(*args, **kwargs)  # nothing to round: PyTorch's own kernel
        if kw.get("enable_gqa"):
            self.seen("scaled_dot_product_attention(enable_gqa=True)", "not emulated")
            return func(*args, **kwargs)
        scale = kw.get("scale")
        scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
        self._promoted = None
        qr = self._round(s_site, "input", q, "sdpa")
        kr = self._round(s_site, "input_b", k, "sdpa")
        scores = self._run(torch.matmul, [qr, kr.transpose(-2, -1)], {}, s_site) * scale
        L, S = q.size(-2), k.size(-2)
        if kw.get("is_causal"):
            causal = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
        mask = kw.get("attn_mask")
        if mask is not None:
            scores = (scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool
                      else scores + mask)
        p = torch.softmax(scores, dim=-1)
        self.stated.add("softmax")
        dropout = kw.get("dropout_p") or 0.0
        if dropout > 0:
            p = torch.dropout(p, dropout, True)
        self._promoted = None
        pr = self._round(v_site, "input", p, "sdpa")
        vr = self._round(v_site, "input_b", v, "sdpa")
        return self._run(torch.matmul, [pr, vr], {}, v_site)

    # -- removal
    def remove(self) -> None:
        while self._entered:
            self._exit(None, None, None)
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self.stack.remove()

    def __enter__(self) -> Emulation:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __str__(self) -> str:
        lines = [f"{d['layer']}: {d['role']} -> {d['quant']}" for d in self.points]
        if self.stated:
            lines.append(f"computed as PyTorch computes them, not rounded: "
                         f"{', '.join(sorted(self.stated))}")
        if self.not_emulated:
            lines.append(f"not emulated: {', '.join(self.not_emulated)}")
        return "\n".join(lines)
