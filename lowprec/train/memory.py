"""Exact memory per tensor role for a model under a precision policy (no training needed).

Mixed precision is often sold as "half the memory". Counting the bytes of each tensor role
shows where that holds and where it does not:

==================  ================================================================
``master``          the FP32 copy the optimizer updates (only if the policy has one)
``weights``         the weights the matmuls read: the low-precision copy of the master,
                    or, without a master, the only copy (biases of a policy whose
                    weights are block-scaled are read from the master, no copy)
``weight_grads``    one gradient per weight and bias
``optimizer_state`` SGD momentum (one value per parameter) or Adam's two moments
``activations``     what the backward pass keeps per batch element: the input of every
                    linear layer (the weight gradient is ``input.T @ grad``); ReLU's
                    backward reuses its output, which is already the next layer's input
==================  ================================================================

The first four are *weight-side* (they scale with the parameters), the last one scales
with the batch. Every count is exact: a value of a ``w``-bit format costs ``w / 8`` bytes
densely packed, a block-scaled tensor adds its scales (OCP MX: one E8M0 byte per 32
values along the block axis, a ragged last block padded; NVFP4: one E4M3 byte per 16
values plus a 4-byte FP32 tensor scale), a delayed-scaled FP8 tensor adds its FP32 scale
and its amax history (1024 FP32 values, Transformer Engine's default). Activation
gradients are transient (one layer's worth at a time) and not counted.

The lesson, per parameter with SGD momentum / Adam (exact, from :func:`memory`):
FP32 costs 12 / 16 bytes; fp16-amp and bf16-master (FP32 master, 16-bit weights and
gradients, FP32 state) also 12 / 16 -- nothing saved on the weight side; the FP8 and MX
recipes (FP32 master *and* FP32 weight gradients) go *up*: mxfp8 13.03 / 17.03 and mxfp4
12.53 / 16.53 per parameter on a large layer, fp8 13 / 17 plus a 4 KiB amax history per
tensor; only the recipes without a master copy (fp16-naive, bf16-pure) halve it, to 6 / 8. The saving of
mixed precision is in the activations: 2 bytes per value instead of 4, 1 in FP8.

>>> from lowprec.train import memory
>>> t = memory((32, 64, 10), "fp16-amp", batch=64, optimizer="adam")
>>> t.n_params, t.bytes_of("master"), t.bytes_of("weights"), t.weight_side_per_param()
(2762, 11048, 5524, Fraction(16, 1))
>>> memory((32, 64, 10), "fp32", optimizer="adam").weight_side_per_param()
Fraction(16, 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..formats import get_format
from ..schemes import BLOCK_VARIANT_KINDS
from .policy import Policy, Quant, get_policy

__all__ = ["ROLES", "Linear", "MemoryRow", "MemoryTable", "ModelShape", "memory",
           "mlp_shape", "tensor_bytes", "transformer_layer"]

ROLES = ("master", "weights", "weight_grads", "optimizer_state", "activations")
WEIGHT_SIDE = ROLES[:4]
#: Optimizer -> number of state tensors per parameter tensor.
OPTIMIZER_STATES = {"sgd": 1, "adam": 2}
#: Length of a delayed-scaling amax history (Transformer Engine 2.x default).
AMAX_HISTORY = 1024
_MX_ELEMENT = {"mxfp8_e4m3": "fp8_e4m3", "mxfp8_e5m2": "fp8_e5m2", "mxfp6_e3m2": "fp6_e3m2",
               "mxfp6_e2m3": "fp6_e2m3", "mxfp4": "fp4_e2m1"}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tensor_bytes(shape: tuple[int, ...], q: Quant | None, axis: int = -1) -> int:
    """Bytes of one tensor of ``shape`` stored as ``q`` says (``None``: float32).

    ``axis`` is the block axis of block-scaled formats (MX: 32 values, NVFP4: 16).

    >>> tensor_bytes((64, 10), None), tensor_bytes((64, 10), Quant("fp16"))
    (2560, 1280)
    >>> tensor_bytes((64, 10), Quant("mxfp4", scaling="mx"), axis=0)  # 2 blocks x 10 cols
    340
    """
    n = 1
    for d in shape:
        n *= int(d)
    if q is None:
        return 4 * n
    if q.scaling == "none":
        return _ceil_div(n * get_format(q.format).width, 8)
    if q.scaling == "delayed":
        return _ceil_div(n * get_format(q.format).width, 8) + 4 + 4 * AMAX_HISTORY
    if q.scaling == "current":  # one FP32 scale
        return _ceil_div(n * get_format(q.format).width, 8) + 4
    block, width, extra = ((32, get_format(_MX_ELEMENT[q.format]).width, 0) if q.scaling == "mx"
                           else (16, 4, 4))  # nvfp4: E2M1 elements, one FP32 tensor scale
    if q.scaling in BLOCK_VARIANT_KINDS:  # E2M1 block variants: their block, FP32 scale or none
        variant = BLOCK_VARIANT_KINDS[q.scaling]
        block, width, extra = variant[0], 4, 4 if variant[2] else 0
    length = int(shape[axis]) if shape else 1
    n_blocks = _ceil_div(length, block) * (n // length if length else 0)
    return extra + n_blocks + _ceil_div(n_blocks * block * width, 8)


@dataclass(frozen=True)
class Linear:
    """One matmul layer: ``y = x @ W (+ b)`` with ``W`` of shape ``(n_in, n_out)``."""

    name: str
    n_in: int
    n_out: int
    bias: bool = True

    @property
    def n_params(self) -> int:
        return self.n_in * self.n_out + (self.n_out if self.bias else 0)


@dataclass(frozen=True)
class ModelShape:
    """The shapes memory depends on: the linear layers, and the activations kept for the
    backward pass as ``(name, width)`` -- ``width`` values per token, ``tokens`` tokens
    per batch element (1 for an MLP, the sequence length for a transformer)."""

    name: str
    linears: tuple[Linear, ...]
    saved: tuple[tuple[str, int], ...]
    tokens: int = 1

    @property
    def n_params(self) -> int:
        return sum(layer.n_params for layer in self.linears)


def mlp_shape(sizes: Sequence[int]) -> ModelShape:
    """The trainer's MLP (:class:`lowprec.train.model.Network`): widths, input first."""
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"sizes must be at least two positive layer widths, got {sizes}")
    linears = tuple(Linear(f"fc{i + 1}", a, b) for i, (a, b) in enumerate(zip(sizes, sizes[1:])))
    return ModelShape("mlp " + "-".join(map(str, sizes)), linears,
                      tuple((f"{lin.name} input", lin.n_in) for lin in linears))


def transformer_layer(d_model: int, d_ff: int, seq: int, *, bias: bool = False) -> ModelShape:
    """One transformer block's linear layers (Q, K, V, output projection, MLP up and down)
    and the linear-layer inputs kept for backward, per sequence of ``seq`` tokens.

    Counted: the block input (read by Q, K and V, kept once), the attention output (the
    output projection's input), the MLP input and the MLP's hidden activation (the down
    projection's input). Not counted: attention scores (FlashAttention recomputes them),
    norms and softmax statistics.

    >>> t = transformer_layer(4096, 16384, 2048)
    >>> t.n_params, [w for _, w in t.saved]
    (201326592, [4096, 4096, 4096, 16384])
    """
    for name, v in (("d_model", d_model), ("d_ff", d_ff), ("seq", seq)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    d, f = int(d_model), int(d_ff)
    linears = tuple(Linear(n, a, b, bias) for n, a, b in (
        ("q", d, d), ("k", d, d), ("v", d, d), ("out", d, d), ("up", d, f), ("down", f, d)))
    saved = (("block input (q, k, v)", d), ("attention output", d), ("mlp input", d),
             ("mlp hidden (down input)", f))
    return ModelShape(f"transformer layer d_model={d} d_ff={f} seq={seq}", linears, saved,
                      int(seq))


@dataclass(frozen=True)
class MemoryRow:
    """One role: its format and its exact bytes (weight-side: for the whole model;
    activations: for the whole batch)."""

    role: str
    format: str
    bytes: int


@dataclass(frozen=True)
class MemoryTable:
    """The bytes of every tensor role of one model under one policy (see the module)."""

    model: str
    policy: str
    optimizer: str
    batch: int
    n_params: int
    rows: tuple[MemoryRow, ...]

    def bytes_of(self, role: str) -> int:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        return sum(r.bytes for r in self.rows if r.role == role)

    def weight_side_bytes(self) -> int:
        """Master + weights + weight gradients + optimizer state."""
        return sum(self.bytes_of(r) for r in WEIGHT_SIDE)

    def weight_side_per_param(self) -> Fraction:
        """Weight-side bytes per parameter, exactly."""
        return Fraction(self.weight_side_bytes(), self.n_params)

    def activation_bytes_per_example(self) -> Fraction:
        """Activation bytes per batch element (per-tensor scale overhead shared out)."""
        return Fraction(self.bytes_of("activations"), self.batch)

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self.rows)

    def __str__(self) -> str:
        lines = [f"{self.model}, policy {self.policy}, optimizer {self.optimizer}, "
                 f"batch {self.batch}: {self.n_params:,} parameters"]
        header = ("role", "stored as", "bytes", "per parameter")
        rows = [header]
        for role in ROLES:
            fmts = sorted({r.format for r in self.rows if r.role == role}) or ["-"]
            b = self.bytes_of(role)
            per = (Fraction(b, self.batch), "per batch element") if role == "activations" \
                else (Fraction(b, self.n_params), "")
            rows.append((role, ", ".join(fmts), f"{b:,}",
                         f"{float(per[0]):.4g}" + (f" {per[1]}" if per[1] else "")))
        rows.append(("weight side", "", f"{self.weight_side_bytes():,}",
                     f"{float(self.weight_side_per_param()):.4g}"))
        rows.append(("total", "", f"{self.total_bytes:,}", ""))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for k, r in enumerate(rows):
            lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths))).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)


def _name(q: Quant | None) -> str:
    return "fp32" if q is None else str(q)


def memory(model: Sequence[int] | ModelShape, policy: str | Policy, *, batch: int = 1,
           optimizer: str = "sgd") -> MemoryTable:
    """The exact bytes of every tensor role (see the module docstring).

    Parameters
    ----------
    model: layer widths of an MLP, input first (as :attr:`Task.sizes`), or a
        :class:`ModelShape` (e.g. :func:`transformer_layer`).
    policy: a preset name or a :class:`Policy`.
    batch: batch elements (examples, or sequences for a transformer).
    optimizer: ``"sgd"`` (with momentum: one state value per parameter) or ``"adam"`` (two).

    >>> t = memory((32, 64, 10), "bf16-pure", batch=2)
    >>> t.bytes_of("weights"), t.bytes_of("activations")   # 2762 * 2, 2 * (32 + 64) * 2
    (5524, 384)
    """
    shape = model if isinstance(model, ModelShape) else mlp_shape(model)
    p = get_policy(policy)
    if optimizer not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer must be one of {tuple(OPTIMIZER_STATES)}, got "
                         f"{optimizer!r}")
    if int(batch) != batch or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    rows: list[MemoryRow] = []

    def add(role: str, q: Quant | None, shp: tuple[int, ...], axis: int = -1) -> None:
        rows.append(MemoryRow(role, _name(q), tensor_bytes(shp, q, axis)))

    for lin in shape.linears:
        params = [((lin.n_in, lin.n_out), 0)] + ([((lin.n_out,), -1)] if lin.bias else [])
        for k, (shp, axis) in enumerate(params):
            is_bias = k == 1
            if p.master is not None:
                add("master", p.master, shp)
                if p.weights is not None and not (is_bias and p.weights.scaling != "none"):
                    add("weights", p.weights, shp, axis)
            else:
                add("weights", p.weights, shp, axis)
            add("weight_grads", p.weight_grads, shp, axis)
            for _ in range(OPTIMIZER_STATES[optimizer]):
                add("optimizer_state", p.optimizer_state, shp)
    for _, width in shape.saved:
        add("activations", p.activations, (int(batch) * shape.tokens, width))
    return MemoryTable(shape.name, p.name, optimizer, int(batch), shape.n_params, tuple(rows))
