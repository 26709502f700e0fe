"""Models of NVIDIA tensor cores: the block-FMA rule and one parameter table per chip.

One MMA instruction computes ``D = A·B + C`` for a short dot product of length
``k`` (4 to 32). The hardware does not add the products one by one; measured
on real GPUs (Fasi, Higham, Mikaitis & Pranesh 2021; Khattak & Mikaitis 2025;
the files in ``../shared/tensorcores``), one block FMA of ``block`` products does:

1. **products exact**: every ``a_k * b_k`` is formed without rounding;
2. **align to the largest nominal exponent**: the exponent of C, or ``e_a + e_b``
   for a product (whose significand lies in [1, 4), so the true leading bit may
   be one higher), whichever is largest, *not* the true leading bit of the sum;
3. **keep a fixed number of fraction bits below it** (``23 + align_bits``; a few
   extra bits on Ampere and later, 13 in all on the FP8 units of Ada and Hopper)
   and **truncate** every term toward zero (sign-magnitude alignment);
4. **sum exactly** (carries are kept);
5. **normalise once**, truncating into FP32 (or rounding to nearest into FP16
   when the instruction's C and D are FP16).

A K longer than one block chains blocks: each block's D is the next one's C, as a
K-loop of MMAs does. Blackwell's FP8 unit differs in one point the published
configuration misses: it normalises the products' sum (truncating into FP32)
*before* C takes part, then adds C with an ordinary round-to-nearest FP32 addition
(``c_late=True``). That rule reproduces all 10,000 measured B200 FP8 cases; the
published rule (C aligned with the products, truncated) reproduces 64-65%.

``ARCHITECTURES`` holds the table; :func:`get_architecture` accepts chip names
(``h200`` is Hopper; ``l40s``, ``l4``, ``rtx4090`` are Ada; ``a2``, ``a10``,
``a30`` are Ampere). ``TensorCore`` is the rule with free parameters for
what-if models; :func:`lowprec.matmul.tensor_core` builds one.
"""

from __future__ import annotations

from dataclasses import dataclass

from .formats import FloatFormat, get_format

__all__ = [
    "ARCHITECTURES",
    "AccumulationModel",
    "Architecture",
    "TensorCore",
    "get_architecture",
    "input_family",
]


@dataclass(frozen=True)
class AccumulationModel:
    """Base class: how the products of a dot product are added."""

    name: str

    def describe(self) -> str:
        return f"{self.name}: {(type(self).__doc__ or '').strip().splitlines()[0]}"


@dataclass(frozen=True)
class TensorCore(AccumulationModel):
    """NVIDIA tensor-core block FMA: `block` exact products and C aligned to the largest
    nominal exponent, truncated, summed exactly, normalised once.

    Parameters
    ----------
    block:
        Products fused per block FMA (one instruction's k, or the hardware's
        inner width when an instruction is wider).
    align_bits:
        Extra alignment bits: every term is truncated to ``p + align_bits``
        fraction bits below the largest nominal exponent, where ``p`` is
        ``acc_mantissa_bits`` or FP32's 23 (0 on V100, 1 on Ampere/Ada, 2 on
        Hopper/Blackwell; 0 on the 13-bit FP8 units of Ada and Hopper).
    acc_mantissa_bits:
        Fraction bits of the normalised block sum (None: those of the MMA's
        C/D format, 23 for FP32). 13 on the FP8 units of Ada and Hopper.
    hw_mode:
        Rounding of the normalised sum (``rtz``: truncation, as measured for
        FP32 outputs; ``rne`` for FP16 outputs).
    c_late:
        False: C is aligned and truncated with the products (all chips except
        B200 FP8). True: the products' sum is normalised first (``hw_mode`` into
        ``acc_mantissa_bits`` bits with FP32's exponent range), then C is added
        with one round-to-nearest-even addition in the C/D format.
    source:
        Where the parameters come from.
    """

    block: int = 4
    align_bits: int = 0
    acc_mantissa_bits: int | None = None
    hw_mode: str = "rtz"
    c_late: bool = False
    source: str = ""
    name: str = "tensor_core"

    @property
    def frac_bits(self) -> int:
        """Fraction bits kept below the largest nominal exponent."""
        return (23 if self.acc_mantissa_bits is None else self.acc_mantissa_bits) + self.align_bits

    def describe(self) -> str:
        acc = ("the C/D format's" if self.acc_mantissa_bits is None
               else str(self.acc_mantissa_bits))
        late = ("; C added after normalisation (RNE)" if self.c_late
                else "; C aligned with the products")
        return (f"{self.name}: block FMA of {self.block} products, {self.frac_bits} fraction "
                f"bits below the largest nominal exponent, truncated; {acc} fraction bits after "
                f"{self.hw_mode} normalisation{late}. Source: {self.source}")


# Input families a tensor core takes (lowprec format name -> table key).
_FAMILIES = {"fp16": "fp16", "bf16": "bf16", "tf32": "tf32", "fp8_e4m3": "fp8",
             "fp8_e5m2": "fp8"}


def input_family(fmt: FloatFormat | str) -> str:
    """The tensor-core input family of a format: fp16, bf16, tf32 or fp8.

    >>> input_family("fp8_e5m2")
    'fp8'
    """
    f = get_format(fmt)
    if f.name not in _FAMILIES:
        raise ValueError(f"tensor cores take inputs in {', '.join(_FAMILIES)}; got {f.name!r}")
    return _FAMILIES[f.name]


_FASI = "Fasi, Higham, Mikaitis & Pranesh 2021 (PeerJ Comput. Sci. 7:e330)"
_KM = ("Khattak & Mikaitis 2025 (arXiv 2512.07004) and their MATLAB models "
       "(github north-numerical-computing/MATLAB-tensor-core, models/{}TC.m: fma, neab, frmode)")
_FIT = ("lowprec's fit to the measured files in ../shared/tensorcores "
        "(scripts/tensorcore_match.py)")


@dataclass(frozen=True)
class Architecture(AccumulationModel):
    """A GPU architecture: one TensorCore rule per input family and C/D format."""

    chips: tuple[str, ...] = ()
    rules: tuple[tuple[tuple[str, str], TensorCore], ...] = ()
    measured: tuple[tuple[tuple[str, str], str], ...] = ()

    def supported(self) -> list[str]:
        """``"inputs->output"`` for every combination the chip has."""
        return [f"{fam}->{out}" for (fam, out), _ in self.rules]

    def rule(self, inputs: FloatFormat | str, out: str = "fp32") -> TensorCore:
        """The block-FMA rule for ``inputs`` with C/D in ``out`` (fp32 or fp16).

        >>> get_architecture("h200").rule("fp8_e4m3").block
        32
        """
        fam = input_family(inputs)
        for key, tc in self.rules:
            if key == (fam, out):
                return tc
        raise ValueError(f"{self.name} has no {fam} tensor-core MMA with {out} output; it "
                         f"supports {', '.join(self.supported())}")

    def accuracy_note(self, inputs: FloatFormat | str, out: str = "fp32") -> str:
        """How well the rule is known to match measurements ('' when 100%)."""
        fam = input_family(inputs)
        return dict(self.measured).get((fam, out), "")

    def describe(self) -> str:
        chips = f" (also {', '.join(self.chips)})" if self.chips else ""
        parts = []
        for (fam, out), tc in self.rules:
            late = ", C added after" if tc.c_late else ""
            acc = f", {tc.acc_mantissa_bits}-bit sum" if tc.acc_mantissa_bits else ""
            parts.append(f"{fam}->{out}: block {tc.block}, {tc.frac_bits} bits, "
                         f"{tc.hw_mode}{acc}{late}")
        srcs = sorted({tc.source for _, tc in self.rules})
        return f"{self.name}{chips}: " + "; ".join(parts) + ". Sources: " + " | ".join(srcs)


def _tc(arch: str, block: int, align_bits: int, source: str, *, acc: int | None = None,
        mode: str = "rtz", c_late: bool = False) -> TensorCore:
    return TensorCore(name=arch, block=block, align_bits=align_bits, acc_mantissa_bits=acc,
                      hw_mode=mode, c_late=c_late, source=source)


def _arch(name: str, chips: tuple[str, ...], rules: dict[tuple[str, str], TensorCore],
          measured: dict[tuple[str, str], str] | None = None) -> Architecture:
    return Architecture(name=name, chips=chips, rules=tuple(rules.items()),
                        measured=tuple((measured or {}).items()))


# ----------------------------------------------------------- the parameter table
# Every number below is reproduced bit for bit by the measured files (5,000 cases
# per GPU, format and output; README "model vs measured GPU") unless `measured`
# says otherwise. block: the source's `fma`; align_bits: the source's `neab`
# (its neab = -10 is our 13-bit sum with align_bits 0).
_V, _A, _ADA, _H, _B = (_KM.format(n) for n in ("V100", "A100", "Ada", "H100", "B200"))
_FP8_16 = ("FP16 output of FP8 inputs: no published model; lowprec's best rule (products "
           "normalised, rounded to FP16, then + C in FP16) matches about 80% of the measured "
           "cases (README table)")

ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in [
    _arch("v100", (), {
        ("fp16", "fp32"): _tc("v100", 4, 0, f"{_FASI}; {_V}"),
        ("fp16", "fp16"): _tc("v100", 4, 0, f"{_V} (frmode rne for FP16 output)", mode="rne"),
    }),
    _arch("a100", ("a2", "a10", "a30"), {
        ("fp16", "fp32"): _tc("a100", 8, 1, _A),
        ("fp16", "fp16"): _tc("a100", 8, 1, _A, mode="rne"),
        ("bf16", "fp32"): _tc("a100", 8, 1, _A),
        ("tf32", "fp32"): _tc("a100", 4, 1, _A),
    }),
    _arch("ada", ("l40s", "l4", "rtx4090"), {
        ("fp16", "fp32"): _tc("ada", 8, 1, _ADA),
        ("fp16", "fp16"): _tc("ada", 8, 1, _ADA, mode="rne"),
        ("bf16", "fp32"): _tc("ada", 8, 1, _ADA),
        ("tf32", "fp32"): _tc("ada", 4, 1, _ADA),
        ("fp8", "fp32"): _tc("ada", 16, 0, _ADA, acc=13),
        ("fp8", "fp16"): _tc("ada", 16, -10, f"{_ADA}: block 16, neab -10 (13 bits); FP16 "
                                             f"rounding of every block's D: {_FIT}", mode="rne"),
    }),
    _arch("h100", ("h200", "hopper"), {
        ("fp16", "fp32"): _tc("h100", 16, 2, _H),
        ("fp16", "fp16"): _tc("h100", 16, 2, _H, mode="rne"),
        ("bf16", "fp32"): _tc("h100", 16, 2, _H),
        ("tf32", "fp32"): _tc("h100", 8, 2, _H),
        ("fp8", "fp32"): _tc("h100", 32, 0, _H, acc=13),
        ("fp8", "fp16"): _tc("h100", 32, 2, f"{_FIT} (approximate)", c_late=True),
    }, {("fp8", "fp16"): _FP8_16}),
    _arch("b200", ("blackwell",), {
        ("fp16", "fp32"): _tc("b200", 16, 2, _B),
        ("fp16", "fp16"): _tc("b200", 16, 2, _B, mode="rne"),
        ("bf16", "fp32"): _tc("b200", 16, 2, _B),
        ("tf32", "fp32"): _tc("b200", 8, 2, _B),
        ("fp8", "fp32"): _tc("b200", 32, 2, f"{_B}: fma 32, neab 2; C added after the "
                                           f"products' RZ normalisation with RNE: {_FIT}",
                             c_late=True),
        ("fp8", "fp16"): _tc("b200", 32, 2, f"{_FIT} (approximate)", c_late=True),
    }, {("fp8", "fp16"): _FP8_16}),
]}

_CHIPS = {chip: arch for arch in ARCHITECTURES.values() for chip in (arch.name, *arch.chips)}


def get_architecture(name: str) -> Architecture:
    """The architecture of a chip name (``"h200"`` -> Hopper's ``h100`` table).

    >>> get_architecture("L40S").name
    'ada'
    """
    key = name.strip().lower()
    if key not in _CHIPS:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(sorted(_CHIPS))}")
    return _CHIPS[key]


def chip_names() -> list[str]:
    """Every chip name :func:`get_architecture` accepts."""
    return sorted(_CHIPS)


# ------------------------------------------------- the models beside the tensor cores
@dataclass(frozen=True)
class Exact(AccumulationModel):
    """Exact sum of the exact products, rounded once to the output format."""

    name: str = "exact"


@dataclass(frozen=True)
class Sequential(AccumulationModel):
    """acc = fma(a_k, b_k, acc) for k in order from acc = C, each step rounded to `accumulate`."""

    name: str = "sequential"


@dataclass(frozen=True)
class Pairwise(AccumulationModel):
    """Products rounded to `accumulate`, then added as a balanced binary tree."""

    name: str = "pairwise"


@dataclass(frozen=True)
class Blocked(AccumulationModel):
    """Sequential fma within blocks of k_block products; block sums added in order."""

    k_block: int = 32
    name: str = "blocked"

    def describe(self) -> str:
        return f"{self.name}(k_block={self.k_block}): " + super().describe().split(": ", 1)[1]


@dataclass(frozen=True)
class Promote(AccumulationModel):
    """Tensor-core partial sums over `every` products, each added (rounded in `mode`)
    into an `accumulate`-format (FP32) accumulator on the CUDA cores, which starts at C."""

    every: int = 128
    inner: TensorCore | Architecture | None = None
    name: str = "promote"

    def describe(self) -> str:
        inner = self.inner.name if self.inner is not None else "h100"
        return (f"{self.name}: partial sums of {self.every} products in the {inner} tensor-core "
                "model, promoted into an FP32 accumulator (DeepSeek-V3 technical report, "
                "arXiv 2412.19437, Sec. 3.3.2: 'increasing accumulation precision', N_C = 128)")
