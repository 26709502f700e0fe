"""Precision policies: which format holds each kind of tensor in training.

A :class:`Policy` names, for each role a tensor plays in training, how it is
stored (a :class:`Quant`: format, rounding mode, scaling) or ``None`` for
"kept in float32, not rounded":

==================  ==============================================================
``master``          the weights the optimizer updates (``None``: no master copy;
                    the optimizer writes the low-precision ``weights`` directly,
                    rounding every update with ``weights.mode``)
``weights``         the copy of the weights the matmuls read
``activations``     every layer's output (and the network's input)
``act_grads``       the gradient with respect to every layer's output
``weight_grads``    the gradient with respect to weights and biases
``optimizer_state`` momentum / Adam moments
==================  ==============================================================

plus the matmul accumulation (``accumulate``) and the loss scaling
(``"none"``, ``"static"``, ``"dynamic"`` = PyTorch's GradScaler).

``gemms`` adds what each GEMM of a linear layer reads (Transformer Engine's recipes):
fprop, dgrad and wgrad quantize their operands on their own, from the tensors as the
roles store them, along their own reduction axis (:data:`lowprec.schemes.GEMM_OPERANDS`;
:meth:`Policy.with_gemms` takes :func:`lowprec.schemes.parse_gemms`'s spec), and the last
``keep_last`` linear layers leave those formats out.

>>> from lowprec.train import get_policy
>>> get_policy("fp16-amp").loss_scaling
'dynamic'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypedDict

from .._names import did_you_mean
from ..formats import get_format
from ..rounding import check_mode
from ..schemes import (
    BLOCK_VARIANT_KINDS,
    GEMM_DIRECTIONS,
    GEMM_OPERANDS,
    NVFP4_RECIPE_KINDS,
    parse_gemms,
)

__all__ = ["POLICIES", "Policy", "Quant", "get_policy", "list_policies"]

#: ``nvfp4_1x16`` ... : the NVFP4 recipe's quantizers (:data:`lowprec.schemes.NVFP4_RECIPE_KINDS`).
#: ``nvfp4_b32`` ... : the E2M1 block variants (:data:`lowprec.schemes.BLOCK_VARIANT_KINDS`).
SCALINGS = ("none", "current", "delayed", "mx", "nvfp4", *NVFP4_RECIPE_KINDS,
            *BLOCK_VARIANT_KINDS)
_NVFP4_LIKE = ("nvfp4", *NVFP4_RECIPE_KINDS, *BLOCK_VARIANT_KINDS)
#: The roles of a policy, and the kind of captured tensor each one rounds in
#: :func:`lowprec.torch.emulate` (``lowprec.inspect`` names tensors by kind).
ROLE_OF_KIND = {"input": "activations", "input_b": "activations", "weight": "weights",
                "output_grad": "act_grads", "weight_grad": "weight_grads"}
LOSS_SCALINGS = ("none", "static", "dynamic")
#: MX element formats by their OCP name (used with ``scaling="mx"``).
MX_FORMATS = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4")


@dataclass(frozen=True)
class Quant:
    """How one kind of tensor is stored.

    format:
        A lowprec format name (``"fp16"``, ``"bf16"``, ``"fp8_e4m3"``) or, with
        ``scaling="mx"``, an MX format name (``"mxfp8_e4m3"``, ``"mxfp4"``).
    mode:
        Rounding mode (see :data:`lowprec.MODES`); ``"stochastic"`` draws from
        the run's seeded generator.
    scaling:
        ``"none"`` (round the values as they are), ``"current"`` (one scale per tensor
        from its own amax), ``"delayed"`` (one scale per
        tensor from the amax history, FP8 recipes; :mod:`lowprec.scaling`) or
        ``"mx"`` (one power-of-two scale per block of 32; :mod:`lowprec.mx`) or
        ``"nvfp4"`` (format ``"nvfp4"``: E2M1 values, one E4M3 scale per block of 16 and
        an FP32 tensor scale; :mod:`lowprec.nvfp4`), or one of the NVFP4 recipe's
        quantizers (format ``"nvfp4"``; ``"nvfp4_1x16"``, ``"nvfp4_16x16"``,
        ``"nvfp4_rht"``, ``"nvfp4_1x16_4over6"``, ``"nvfp4_16x16_4over6"``:
        :mod:`lowprec.recipes.nvfp4`, whose stochastic rounding uses 8 random bits),
        or one of the E2M1 block variants (format ``"nvfp4"``; ``"nvfp4_b32"``,
        ``"mxfp4_ue4m3"``, ``"mxfp4_ue5m3"``, ``"nvfp4_ue5m3"``:
        :data:`lowprec.schemes.BLOCK_VARIANT_KINDS`).
    scale_rule:
        The MX scale rule (``floor``, ``ceil``, ``rceil``, ``even``, ``trn``;
        :data:`lowprec.mx.SCALE_RULES`).

    Every :mod:`lowprec.schemes` name is a Quant: :meth:`from_scheme`.
    """

    format: str
    mode: str = "rne"
    scaling: str = "none"
    scale_rule: str = "floor"

    @classmethod
    def from_scheme(cls, scheme: Any) -> Quant:
        """The Quant that stores a tensor as a :mod:`lowprec.schemes` scheme (a name or a
        :class:`~lowprec.schemes.Scheme`). ``fp16_loss_scale`` is fp16 (the loss scale is
        the policy's ``loss_scaling``).

        >>> str(Quant.from_scheme("mxfp4_rceil")), str(Quant.from_scheme("fp8_e4m3_current"))
        ('mxfp4 (rceil scale rule)', 'fp8_e4m3 (current scaling)')
        """
        from ..schemes import get_scheme

        s = get_scheme(scheme)
        scaling = {"cast": "none", "loss_scale": "none"}.get(s.kind, s.kind)
        return cls(s.fmt, s.mode, scaling, s.scale_rule if s.kind == "mx" else "floor")

    @property
    def scheme(self) -> str:
        """The :mod:`lowprec.schemes` name of this Quant (``_sr`` for stochastic
        rounding; other modes are not schemes and give ``FORMAT[MODE]``)."""
        base = self.format
        if self.scaling in ("current", "delayed"):
            base += "_" + self.scaling
        elif self.scaling in NVFP4_RECIPE_KINDS or self.scaling in BLOCK_VARIANT_KINDS:
            base = self.scaling
        elif self.scaling == "mx" and self.scale_rule != "floor":
            base += "_" + self.scale_rule
        return base + {"rne": "", "stochastic": "_sr"}.get(self.mode, f"[{self.mode}]")

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", check_mode(self.mode))
        if self.scaling not in SCALINGS:
            raise ValueError(f"scaling must be one of {SCALINGS}, got {self.scaling!r}")
        if self.scaling == "mx":
            if self.format not in MX_FORMATS:
                raise ValueError(f"MX format must be one of {MX_FORMATS}, got {self.format!r}")
            from ..mx import SCALE_RULES

            if self.scale_rule not in SCALE_RULES:
                raise ValueError(f"scale_rule must be one of {tuple(SCALE_RULES)}, "
                                 f"got {self.scale_rule!r}")
        elif self.scaling in _NVFP4_LIKE:
            if self.format != "nvfp4":
                raise ValueError(f"scaling={self.scaling!r} needs format 'nvfp4', "
                                 f"got {self.format!r}")
            if self.scaling in NVFP4_RECIPE_KINDS and self.mode not in ("rne", "stochastic"):
                raise ValueError(f"{self.scaling} rounds 'rne' or 'stochastic', "
                                 f"got {self.mode!r}")
            if self.scaling.endswith("4over6") and self.mode != "rne":
                raise ValueError("4over6 picks between round-to-nearest candidates: mode "
                                 "must be 'rne'")
        else:
            object.__setattr__(self, "format", get_format(self.format).name)

    def __str__(self) -> str:
        s = self.format
        if self.scaling in NVFP4_RECIPE_KINDS or self.scaling in BLOCK_VARIANT_KINDS:
            s = self.scaling
        elif self.scaling in ("delayed", "current"):
            s += f" ({self.scaling} scaling)"
        elif self.scaling == "mx" and self.scale_rule != "floor":
            s += f" ({self.scale_rule} scale rule)"
        if self.mode != "rne":
            s += f" [{self.mode}]"
        return s


@dataclass(frozen=True)
class Policy:
    """A complete precision recipe for training (see the module docstring for the roles)."""

    name: str
    description: str
    master: Quant | None = None
    weights: Quant | None = None
    activations: Quant | None = None
    act_grads: Quant | None = None
    weight_grads: Quant | None = None
    optimizer_state: Quant | None = None
    #: ``"fp32"``: float32 products and sums over the exactly rounded inputs, added in k
    #: order (a loop without fused multiply-adds, not the BLAS, whose order depends on the
    #: processor: the same bits on every machine); ``"fp64"``: the same in float64, result
    #: rounded to float32; any other value is a :func:`lowprec.matmul` accumulation model,
    #: ``"MODEL"`` (accumulating in FP32) or ``"FORMAT:MODEL"`` (e.g. ``"fp16:sequential"``),
    #: with the activations' format as the inputs' format.
    accumulate: str = "fp32"
    loss_scaling: str = "none"
    #: The constant scale of ``loss_scaling="static"``.
    static_scale: float = 2.0**12
    #: GradScaler settings for ``loss_scaling="dynamic"`` (PyTorch's defaults).
    init_scale: float = 2.0**16
    growth_interval: int = 2000
    tags: tuple[str, ...] = field(default=())
    #: Per-layer choices that override the roles above, ``(layer, kind, Quant or None)``
    #: (``layer`` a site as :func:`lowprec.torch.emulate` names it, e.g. a name of
    #: ``model.named_modules()``; ``kind`` a key of :data:`ROLE_OF_KIND`: ``input``,
    #: ``input_b``, ``weight``, ``output_grad``, ``weight_grad``; ``None``: that tensor is
    #: not rounded).
    #: :func:`lowprec.torch.emulate` applies them; lowprec's own trainer refuses them.
    layers: tuple[tuple[str, str, Quant | None], ...] = field(default=())
    #: What each GEMM of a linear layer reads, ``(operand, Quant or None)`` with
    #: ``operand`` one of :data:`lowprec.schemes.GEMM_OPERANDS` (``"fprop.input"``,
    #: ``"wgrad.output_grad"``...): quantized from the tensor as the roles store it, along
    #: that GEMM's reduction axis; an operand not named is read as stored. ``layers``
    #: entries may name these operands too (per layer, :func:`lowprec.torch.emulate`).
    gemms: tuple[tuple[str, Quant | None], ...] = field(default=())
    #: The last ``keep_last`` linear layers leave ``gemms`` out (the NVFP4 recipe keeps
    #: the last layers in BF16).
    keep_last: int = 0

    def __post_init__(self) -> None:
        if self.loss_scaling not in LOSS_SCALINGS:
            raise ValueError(
                f"loss_scaling must be one of {LOSS_SCALINGS}, got {self.loss_scaling!r}"
            )
        for role in ("master", "weights", "activations", "act_grads", "weight_grads",
                     "optimizer_state"):
            q = getattr(self, role)
            if q is not None and not isinstance(q, Quant):
                raise TypeError(f"{role} must be a Quant or None, got {type(q).__name__}")
        for entry in self.layers:
            if (len(entry) != 3 or entry[1] not in (*ROLE_OF_KIND, *GEMM_OPERANDS)
                    or not (entry[2] is None or isinstance(entry[2], Quant))):
                raise ValueError(f"layers holds (layer, kind, Quant or None) with a kind of "
                                 f"{tuple(ROLE_OF_KIND) + GEMM_OPERANDS}, got {entry!r}")
        for pair in self.gemms:
            if (len(pair) != 2 or pair[0] not in GEMM_OPERANDS
                    or not (pair[1] is None or isinstance(pair[1], Quant))):
                raise ValueError(f"gemms holds (operand, Quant or None) with an operand of "
                                 f"{GEMM_OPERANDS}, got {pair!r}")
        if int(self.keep_last) != self.keep_last or self.keep_last < 0:
            raise ValueError(f"keep_last must be an integer >= 0, got {self.keep_last!r}")
        _check_rht(dict(self.gemms), "gemms")
        if self.master is not None and self.master.scaling != "none":
            raise ValueError("master weights cannot use a scaled format")
        if self.master is None and self.weights is not None and self.weights.scaling != "none":
            raise ValueError("scaled weight formats need a master copy (master=Quant('fp32'))")

    def quant(self, layer: str, kind: str) -> Quant | None:
        """How ``layer`` stores its tensor of ``kind`` (a key of :data:`ROLE_OF_KIND`):
        its per-layer choice, else the role's (``input`` -> ``activations``...)."""
        for name, k, q in self.layers:
            if name == layer and k == kind:
                return q
        default: Quant | None = getattr(self, ROLE_OF_KIND[kind])
        return default

    def gemm_quants(self, layer: str | None = None) -> dict[str, Quant | None] | None:
        """What each GEMM operand of ``layer`` reads (its per-layer entries over
        ``gemms``), or None when the policy names no GEMM formats for it."""
        chosen = dict(self.gemms)
        for name, k, q in self.layers:
            if name == layer and k in GEMM_OPERANDS:
                chosen[k] = q
        if all(q is None for q in chosen.values()):
            return None
        _check_rht(chosen, f"layer {layer!r}")
        return {op: chosen.get(op) for op in GEMM_OPERANDS}

    def with_gemms(self, spec: str | dict[str, str | None], *, keep_last: int | None = None,
                   name: str | None = None) -> Policy:
        """A copy whose GEMMs read ``spec`` (:func:`lowprec.schemes.parse_gemms`: e.g.
        ``"fprop=fp8_e4m3_current,dgrad=fp8_e5m2_current"``), over the current ``gemms``.

        >>> p = get_policy("bf16-master").with_gemms("wgrad=nvfp4_rht_sr", name="x")
        >>> [(op, str(q)) for op, q in p.gemms]
        [('wgrad.output_grad', 'nvfp4_rht [stochastic]'), ('wgrad.input', 'nvfp4_rht [stochastic]')]
        """
        chosen = dict(self.gemms)
        for op, s in parse_gemms(spec).items():
            chosen[op] = None if s is None else Quant.from_scheme(s)
        gemms = tuple((op, chosen[op]) for op in GEMM_OPERANDS if op in chosen)
        return dataclasses.replace(self, gemms=gemms, name=name or self.name,
                                   keep_last=self.keep_last if keep_last is None else keep_last)

    def replace(self, **changes: Any) -> Policy:
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON-ready values (what ``run.json`` stores)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Policy:
        roles = ("master", "weights", "activations", "act_grads", "weight_grads",
                 "optimizer_state")
        kw: dict[str, Any] = {k: (Quant(**v) if k in roles and v is not None else v)
                              for k, v in d.items()}
        kw["tags"] = tuple(kw.get("tags", ()))
        kw["layers"] = tuple((str(a), str(r), None if q is None else Quant(**q))
                             for a, r, q in kw.get("layers", ()))
        kw["gemms"] = tuple((str(o), None if q is None else Quant(**q))
                            for o, q in kw.get("gemms", ()))
        return cls(**kw)


def _check_rht(chosen: dict[str, Quant | None], where: str) -> None:
    """The random Hadamard transform cancels in a GEMM only when both of its operands
    are rotated alike: both or neither."""
    for d in GEMM_DIRECTIONS:
        ops = [o for o in GEMM_OPERANDS if o.startswith(d + ".")]
        rot = [(q is not None and q.scaling == "nvfp4_rht") for q in (chosen.get(o) for o in ops)]
        if rot[0] != rot[1]:
            raise ValueError(f"{where}: {d} rotates one operand with the random Hadamard "
                             f"transform (nvfp4_rht) and not the other; the transform cancels "
                             f"in the product only when both operands are rotated: give both "
                             f"{ops[0]} and {ops[1]} an nvfp4_rht scheme, or neither")


class _Roles(TypedDict):
    """The roles :func:`_everything` fills (``master`` stays separate)."""

    weights: Quant
    activations: Quant
    act_grads: Quant
    weight_grads: Quant
    optimizer_state: Quant


def _everything(q: Quant, *, weights: Quant | None = None,
                optimizer_state: Quant | None = None) -> _Roles:
    """Every role but ``master`` in ``q``, except ``weights``/``optimizer_state`` if given."""
    return {"weights": q if weights is None else weights, "activations": q,
            "act_grads": q, "weight_grads": q,
            "optimizer_state": q if optimizer_state is None else optimizer_state}


FP32 = Quant("fp32")
FP16 = Quant("fp16")
BF16 = Quant("bf16")

_PRESETS: list[Policy] = [
    Policy("fp32", "the float32 baseline: nothing is rounded below float32"),
    Policy("fp16-naive",
           "everything in FP16, no loss scaling, no master copy: small gradients underflow "
           "and small updates are lost", **_everything(FP16)),
    Policy("fp16-master",
           "FP16 compute with an FP32 master copy but no loss scaling: updates are kept, "
           "gradients still underflow", master=FP32,
           **_everything(FP16, optimizer_state=FP32)),
    Policy("fp16-static",
           "FP32 master + a constant loss scale (2^12): gradients shifted into FP16's range",
           master=FP32, loss_scaling="static",
           **_everything(FP16, optimizer_state=FP32)),
    Policy("fp16-amp",
           "FP32 master + dynamic loss scaling (PyTorch GradScaler defaults): mixed "
           "precision as PyTorch AMP does it", master=FP32, loss_scaling="dynamic",
           **_everything(FP16, optimizer_state=FP32)),
    Policy("bf16-pure",
           "everything in bfloat16, no master copy: FP32's range, so no underflow, but "
           "8 bits of precision lose small updates", **_everything(BF16)),
    Policy("bf16-pure-sr",
           "bf16-pure with stochastic rounding of the weight update: small updates survive "
           "on average", **_everything(BF16, weights=Quant("bf16", "stochastic"))),
    Policy("bf16-master",
           "bfloat16 compute with an FP32 master copy (the usual bf16 recipe, no scaling)",
           master=FP32, **_everything(BF16, optimizer_state=FP32)),
    Policy("fp8",
           "FP8 as in Transformer Engine: E4M3 weights and activations, E5M2 activation "
           "gradients, each with delayed per-tensor scaling; FP32 master, weight gradients "
           "and biases",
           master=FP32, weights=Quant("fp8_e4m3", scaling="delayed"),
           activations=Quant("fp8_e4m3", scaling="delayed"),
           act_grads=Quant("fp8_e5m2", scaling="delayed"), optimizer_state=FP32,
           tags=("scaled",)),
    Policy("mxfp8",
           "OCP MXFP8: E4M3 weights and activations, E5M2 activation gradients, one "
           "power-of-two scale per 32 values; FP32 master and biases",
           master=FP32, weights=Quant("mxfp8_e4m3", scaling="mx"),
           activations=Quant("mxfp8_e4m3", scaling="mx"),
           act_grads=Quant("mxfp8_e5m2", scaling="mx"), optimizer_state=FP32,
           tags=("scaled",)),
    Policy("mxfp4",
           "OCP MXFP4 (E2M1, scale per 32) for weights and activations, MXFP8 E5M2 "
           "activation gradients; FP32 master and biases",
           master=FP32, weights=Quant("mxfp4", scaling="mx"),
           activations=Quant("mxfp4", scaling="mx"),
           act_grads=Quant("mxfp8_e5m2", scaling="mx"), optimizer_state=FP32,
           tags=("scaled",)),
    Policy("nvfp4",
           "NVIDIA's NVFP4 recipe (Transformer Engine): bf16 tensors and FP32 master; GEMMs "
           "read NVFP4: 1x16 inputs and gradients, 16x16 weights, gradients stochastically "
           "rounded (8 bits), wgrad operands Hadamard-rotated; the last layer stays bf16",
           master=FP32, optimizer_state=FP32, weights=BF16, activations=BF16, act_grads=BF16,
           gemms=(("fprop.input", Quant("nvfp4", scaling="nvfp4_1x16")),
                  ("fprop.weight", Quant("nvfp4", scaling="nvfp4_16x16")),
                  ("dgrad.output_grad", Quant("nvfp4", "stochastic", "nvfp4_1x16")),
                  ("dgrad.weight", Quant("nvfp4", scaling="nvfp4_16x16")),
                  ("wgrad.output_grad", Quant("nvfp4", "stochastic", "nvfp4_rht")),
                  ("wgrad.input", Quant("nvfp4", scaling="nvfp4_rht"))),
           keep_last=1, tags=("scaled", "gemms")),
    Policy("mxfp8-torchao",
           "MXFP8 training as torchao's MXLinear does it: bf16 tensors and FP32 master; every "
           "GEMM operand quantized to MXFP8 E4M3 (floor scale rule) from the bf16 tensor "
           "along that GEMM's reduction axis",
           master=FP32, optimizer_state=FP32, weights=BF16, activations=BF16, act_grads=BF16,
           gemms=tuple((op, Quant("mxfp8_e4m3", scaling="mx")) for op in GEMM_OPERANDS),
           tags=("scaled", "gemms")),
]

#: The named presets, by name.
POLICIES: dict[str, Policy] = {p.name: p for p in _PRESETS}


def get_policy(policy: str | Policy) -> Policy:
    """A preset by name (or a :class:`Policy`, returned unchanged)."""
    if isinstance(policy, Policy):
        return policy
    try:
        return POLICIES[policy]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown policy {policy!r}{did_you_mean(policy, POLICIES)}; "
            f"presets: {', '.join(POLICIES)}"
        ) from None


def list_policies() -> dict[str, str]:
    """Preset names and one-line descriptions, in the demo's order."""
    return {p.name: p.description for p in _PRESETS}
