"""How a tensor is stored: the one vocabulary, with one name table.

A :class:`Scheme` says how one tensor is stored: a plain rounding to a format, fp16
under a loss scale, FP8 with one per-tensor scale (current or delayed), an OCP MX format
under one of its scale rules, or NVFP4, each in a rounding mode (round to nearest even,
or stochastic rounding with the ``_sr`` suffix). Every part of lowprec that names a way
of storing a tensor takes these names:

* :func:`lowprec.inspect.report` measures a tensor under a scheme (an inspect *recipe*
  is a scheme: ``lowprec.inspect.Recipe`` is :class:`Scheme`);
* :func:`lowprec.inspect.recommend` chooses among schemes, and its ``policy()`` holds
  the chosen ones (``lowprec.train.Quant.from_scheme``);
* :func:`lowprec.torch.emulate` and the trainer run them (``lowprec.train.make_rounder``);
* :func:`lowprec.quant_error.compare_schemes` and the CLI (``lowprec inspect --recipes``,
  ``lowprec inspect --list-recipes``) accept them.

Every name of :data:`SCHEMES` is accepted by all of these, except the refusals written
in the table itself (:attr:`Scheme.refused`: ``compare_schemes`` measures one tensor, so
it has no loss scale and no amax history for ``fp16_loss_scale`` and the delayed
recipes). Names: the table's (``lowprec.schemes.list_schemes()``) and, for every scheme
but ``fp16_loss_scale``, the same name with ``_sr`` (stochastic rounding of the
elements, e.g. ``bf16_sr``, ``mxfp4_rceil_sr``).

Adding a scheme is one entry in :data:`_TABLE` (a new ``kind`` also needs its quantizer
in :func:`lowprec.inspect.recipes.apply` and :func:`lowprec.train.quant.make_rounder`).

>>> get_scheme("mxfp4_rceil").kind, get_scheme("mxfp4_rceil").scale_rule
('mx', 'rceil')
>>> get_scheme("bf16_sr").mode
'stochastic'
>>> get_scheme("fp7")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown scheme 'fp7'...
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import mx, nvfp4
from ._names import did_you_mean
from .formats import FloatFormat, get_format

__all__ = ["BLOCK_VARIANT_KINDS", "GEMM_DIRECTIONS", "GEMM_OPERANDS", "KINDS",
           "NVFP4_RECIPE_KINDS", "SCHEMES", "Scheme", "get_scheme", "list_schemes",
           "parse_gemms"]

#: NVIDIA's NVFP4 training recipe's quantizers (:mod:`lowprec.recipes.nvfp4`), one kind
#: each: (block shape, random Hadamard transform first, 4over6). Their ``_sr`` is the
#: recipe's stochastic rounding with 8 random bits per element.
NVFP4_RECIPE_KINDS: dict[str, tuple[tuple[int, int], bool, bool]] = {
    "nvfp4_1x16": ((1, 16), False, False),
    "nvfp4_16x16": ((16, 16), False, False),
    "nvfp4_rht": ((1, 16), True, False),
    "nvfp4_1x16_4over6": ((1, 16), False, True),
    "nvfp4_16x16_4over6": ((16, 16), False, True),
}

#: E2M1 block variants of NVFP4 (:func:`lowprec.nvfp4.quantize` with one parameter
#: changed), one kind each: (block size, block-scale format, tensor scale or not).
#: ``nvfp4_b32``: NVFP4 with blocks of 32; ``mxfp4_ue4m3``: a UE4M3 scale per 32 values
#: and no tensor scale; ``mxfp4_ue5m3`` / ``nvfp4_ue5m3``: a UE5M3 scale per 32 / 16
#: values and no tensor scale (see docs/scaled-formats.md for the sources).
BLOCK_VARIANT_KINDS: dict[str, tuple[int, str, bool]] = {
    "nvfp4_b32": (32, "ue4m3", True),
    "mxfp4_ue4m3": (32, "ue4m3", False),
    "mxfp4_ue5m3": (32, "ue5m3", False),
    "nvfp4_ue5m3": (16, "ue5m3", False),
}

#: The kinds of scheme: plain rounding, fp16 under the loss scale, one per-tensor
#: scale from this tensor's amax or from earlier steps' amax, OCP MX blocks, NVFP4,
#: the NVFP4 recipe's quantizers and the E2M1 block variants.
KINDS = ("cast", "loss_scale", "current", "delayed", "mx", "nvfp4", *NVFP4_RECIPE_KINDS,
         *BLOCK_VARIANT_KINDS)

#: The GEMM operands of a linear layer ``Y = X W``, as ``DIRECTION.KIND``: fprop reads
#: the input and the weight, dgrad (``dX``) the output gradient and the weight, wgrad
#: (``dW``) the output gradient and the input. A policy may store each one its own way
#: (Transformer Engine's recipes); see :func:`parse_gemms`.
GEMM_OPERANDS = ("fprop.input", "fprop.weight", "dgrad.output_grad", "dgrad.weight",
                 "wgrad.output_grad", "wgrad.input")
GEMM_DIRECTIONS = ("fprop", "dgrad", "wgrad")


@dataclass(frozen=True)
class Scheme:
    """One way of storing a tensor.

    name:
        The scheme's name (``"fp16"``, ``"fp8_e4m3_delayed"``, ``"mxfp4_rceil"``).
    kind:
        One of :data:`KINDS`: ``"cast"`` (plain rounding), ``"loss_scale"`` (fp16 after
        multiplying gradients by a loss scale), ``"current"`` / ``"delayed"`` (one
        per-tensor scale, Transformer Engine's recipes), ``"mx"`` (OCP MX, a power-of-two
        scale per 32 values) or ``"nvfp4"`` (an E4M3 scale per 16 values and an FP32
        tensor scale).
    fmt:
        The element format (``"fp16"``, ``"fp8_e4m3"``), or the MX format name for ``mx``.
    description:
        One sentence for tables and ``lowprec inspect --list-recipes``.
    scale_rule:
        For ``mx``: ``floor`` (the spec's), ``ceil``, ``rceil``, ``even`` or ``trn``
        (AWS Trainium's, MXFP8 schemes only).
    mode:
        The rounding mode of the elements: ``"rne"`` or ``"stochastic"``.
    refused:
        The parts that refuse the scheme, with the reason (the only refusals there are).
    """

    name: str
    kind: str
    fmt: str
    description: str
    scale_rule: str = "floor"
    mode: str = "rne"
    #: The parts of lowprec that refuse this scheme, and why: ``((part, reason), ...)``.
    refused: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"scheme {self.name!r}: kind must be one of {KINDS}, "
                             f"got {self.kind!r}")
        if self.mode not in ("rne", "stochastic"):
            raise ValueError(f"scheme {self.name!r}: mode must be 'rne' or 'stochastic', "
                             f"got {self.mode!r}")

    @property
    def element(self) -> FloatFormat:
        """The format the stored elements are in."""
        if self.kind == "mx":
            return mx.get_mx_format(self.fmt).element
        if self.kind == "nvfp4" or self.kind in NVFP4_RECIPE_KINDS or \
                self.kind in BLOCK_VARIANT_KINDS:
            return nvfp4.ELEMENT
        return get_format(self.fmt)

    @property
    def block_size(self) -> int | None:
        """Values per block scale along the last axis (block schemes), else None."""
        if self.kind in NVFP4_RECIPE_KINDS:
            return 16
        if self.kind in BLOCK_VARIANT_KINDS:
            return BLOCK_VARIANT_KINDS[self.kind][0]
        return {"mx": 32, "nvfp4": 16}.get(self.kind)

    @property
    def bits(self) -> float:
        """Storage bits per value in a long row (block scales included)."""
        if self.kind == "mx":
            return self.element.width + 8 / 32
        if self.kind == "nvfp4":
            return 4 + 8 / 16
        if self.kind in NVFP4_RECIPE_KINDS:
            return 4 + 8 / (256 if NVFP4_RECIPE_KINDS[self.kind][0] == (16, 16) else 16)
        if self.kind in BLOCK_VARIANT_KINDS:
            return 4 + 8 / BLOCK_VARIANT_KINDS[self.kind][0]
        return float(self.element.width)


_NO_HISTORY = ("compare_schemes sees one tensor, with no earlier steps' amax: use "
               "'per_tensor:FMT' (current scaling), or inspect.report over the steps")


def _plain(name: str, desc: str) -> Scheme:
    return Scheme(name, "cast", name, desc)


#: The table: one entry per scheme (see the module docstring for adding one).
_TABLE: list[Scheme] = [
    _plain("fp32", "float32: nothing rounded (the reference)"),
    _plain("fp16", "IEEE half, rounded to nearest; overflow gives inf"),
    _plain("bf16", "bfloat16, rounded to nearest; fp32's range"),
    _plain("fp8_e4m3", "FP8 E4M3 without a scale; overflow gives NaN"),
    _plain("fp8_e5m2", "FP8 E5M2 without a scale; overflow gives inf"),
    _plain("fp6_e3m2", "FP6 E3M2 without a scale; saturates at 28"),
    _plain("fp6_e2m3", "FP6 E2M3 without a scale; saturates at 7.5"),
    _plain("fp4_e2m1", "FP4 E2M1 without a scale; saturates at 6"),
    Scheme("fp16_loss_scale", "loss_scale", "fp16",
           "fp16 after multiplying by the loss scale (given, or the one GradScaler settles on);"
           " only gradients are scaled",
           refused=(("quant_error", "compare_schemes measures one tensor as stored, with no "
                     "loss scale: use 'cast:fp16' on the scaled tensor, or "
                     "inspect.report(..., loss_scale=S)"),)),
    Scheme("fp8_e4m3_current", "current", "fp8_e4m3",
           "E4M3 with one scale from this tensor's amax (current scaling), saturating"),
    Scheme("fp8_e5m2_current", "current", "fp8_e5m2",
           "E5M2 with one scale from this tensor's amax (current scaling), saturating"),
    Scheme("fp8_e4m3_delayed", "delayed", "fp8_e4m3",
           "E4M3 with the scale from earlier steps' amax (Transformer Engine delayed scaling)",
           refused=(("quant_error", _NO_HISTORY),)),
    Scheme("fp8_e5m2_delayed", "delayed", "fp8_e5m2",
           "E5M2 with the scale from earlier steps' amax (Transformer Engine delayed scaling)",
           refused=(("quant_error", _NO_HISTORY),)),
]
for _mxf in mx.MX_FORMATS:
    if _mxf == "mxint8":
        continue
    for _rule in mx.SCALE_RULES:
        if _rule == "trn" and not _mxf.startswith("mxfp8"):
            continue  # AWS documents its rule for MXFP8 only
        _TABLE.append(Scheme(_mxf if _rule == "floor" else f"{_mxf}_{_rule}", "mx", _mxf,
                             f"OCP {_mxf.upper()}, blocks of 32, scale rule {_rule!r}", _rule))
_TABLE.append(Scheme("nvfp4", "nvfp4", "nvfp4",
                     "NVFP4: E2M1, an E4M3 scale per 16 values, an FP32 tensor scale"))
_RECIPE = "NVFP4 as NVIDIA's training recipe quantizes it (Transformer Engine): "
_TABLE += [
    Scheme("nvfp4_1x16", "nvfp4_1x16", "nvfp4", _RECIPE + "1x16 blocks (activations, "
           "gradients); _sr: 8 random bits per element"),
    Scheme("nvfp4_16x16", "nvfp4_16x16", "nvfp4", _RECIPE + "16x16 blocks (weights: W and "
           "W^T quantize alike)"),
    Scheme("nvfp4_rht", "nvfp4_rht", "nvfp4", _RECIPE + "random Hadamard transform of 16 "
           "values, then 1x16 blocks (wgrad operands; stand-alone, rotated back)"),
    Scheme("nvfp4_1x16_4over6", "nvfp4_1x16_4over6", "nvfp4", _RECIPE + "1x16 blocks, each "
           "block scaled to 6 or to 4, whichever errs less (4over6)"),
    Scheme("nvfp4_16x16_4over6", "nvfp4_16x16_4over6", "nvfp4", _RECIPE + "16x16 blocks, "
           "4over6"),
    Scheme("nvfp4_b32", "nvfp4_b32", "nvfp4",
           "NVFP4 with blocks of 32: E2M1, an E4M3 scale per 32 values, an FP32 tensor scale"),
    Scheme("mxfp4_ue4m3", "mxfp4_ue4m3", "nvfp4",
           "E2M1, a UE4M3 scale per 32 values (amax/6, rounded to nearest), no tensor scale"),
    Scheme("mxfp4_ue5m3", "mxfp4_ue5m3", "nvfp4",
           "E2M1, a UE5M3 scale per 32 values (amax/6, rounded to nearest), no tensor scale"),
    Scheme("nvfp4_ue5m3", "nvfp4_ue5m3", "nvfp4",
           "E2M1, a UE5M3 scale per 16 values (amax/6, rounded to nearest), no tensor scale"),
]

#: Every scheme of the table, by name (round to nearest even; ``NAME_sr`` is the same
#: scheme with stochastic rounding, see :func:`get_scheme`).
SCHEMES: dict[str, Scheme] = {s.name: s for s in _TABLE}


def list_schemes() -> dict[str, str]:
    """Scheme names and their one-line descriptions, in the table's order.

    >>> list_schemes()["nvfp4"]
    'NVFP4: E2M1, an E4M3 scale per 16 values, an FP32 tensor scale'
    """
    return {s.name: s.description for s in _TABLE}


def get_scheme(scheme: Scheme | str) -> Scheme:
    """A scheme by name (or a :class:`Scheme`, returned unchanged).

    ``NAME_sr`` is scheme ``NAME`` with stochastic rounding of its elements (not for
    ``fp16_loss_scale``, ``fp32`` and the 4over6 schemes, which choose between two
    round-to-nearest candidates). Unknown names raise a ValueError listing the
    valid ones.

    >>> get_scheme("fp8_e4m3_delayed").kind
    'delayed'
    """
    if isinstance(scheme, Scheme):
        return scheme
    key = scheme.strip().lower() if isinstance(scheme, str) else None
    if key in SCHEMES:
        return SCHEMES[key]
    if key is not None and key.endswith("_sr") and key[:-3] in SCHEMES:
        base = SCHEMES[key[:-3]]
        if base.kind != "loss_scale" and base.name != "fp32" and not (
                base.kind in NVFP4_RECIPE_KINDS and NVFP4_RECIPE_KINDS[base.kind][2]):
            return dataclasses.replace(base, name=key, mode="stochastic",
                                       description=base.description
                                       + "; stochastic rounding")
    raise ValueError(f"unknown scheme {scheme!r}{did_you_mean(scheme, SCHEMES)}; valid "
                     f"schemes: {', '.join(SCHEMES)} (and NAME_sr for stochastic rounding)")


def parse_gemms(spec: str | dict[str, str | None]) -> dict[str, Scheme | None]:
    """Per-GEMM operand schemes from ``"KEY=SCHEME,KEY=SCHEME..."`` (or a dict).

    ``KEY`` is a direction (``fprop``, ``dgrad``, ``wgrad``: both of its operands), a
    tensor kind (``input``, ``weight``, ``output_grad``: that tensor in every GEMM that
    reads it) or one operand (``wgrad.input``, see :data:`GEMM_OPERANDS`); later entries
    override earlier ones. ``SCHEME`` is a :data:`SCHEMES` name, or ``none`` (the GEMM
    reads the tensor as the policy stores it). Returns ``{operand: Scheme or None}`` for
    the operands named.

    >>> g = parse_gemms("input=fp8_e4m3_current,weight=fp8_e4m3_current,"
    ...                 "output_grad=fp8_e5m2_current")
    >>> g["wgrad.output_grad"].name, g["wgrad.input"].name
    ('fp8_e5m2_current', 'fp8_e4m3_current')
    >>> sorted(parse_gemms("wgrad=nvfp4_rht"))
    ['wgrad.input', 'wgrad.output_grad']
    """
    items = (list(spec.items()) if isinstance(spec, dict) else
             [tuple(p.partition("=")[::2]) for p in spec.split(",") if p.strip()])
    out: dict[str, Scheme | None] = {}
    for key, value in items:
        k = str(key).strip().lower()
        if isinstance(spec, str) and not value:
            raise ValueError(f"GEMM formats: {key!r} needs '=SCHEME' "
                             "(e.g. 'wgrad=nvfp4_rht_sr')")
        targets = [o for o in GEMM_OPERANDS if k in (o, o.split(".")[0], o.split(".")[1])]
        if not targets:
            raise ValueError(f"GEMM formats: unknown operand {key!r}; give a direction "
                             f"({', '.join(GEMM_DIRECTIONS)}), a kind (input, weight, "
                             f"output_grad) or one of {', '.join(GEMM_OPERANDS)}")
        v = None if value is None or str(value).strip().lower() == "none" else str(value)
        for t in targets:
            out[t] = None if v is None else get_scheme(v)
    return out
