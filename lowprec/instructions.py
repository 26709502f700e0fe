"""Tensor-core models keyed by instruction: ``"<architecture>:<instruction>"``.

One chip runs different matrix instructions with different arithmetic. Hopper
has the warp-level ``mma.sync`` and the warpgroup ``wgmma``; Blackwell has
``mma.sync`` and ``tcgen05.mma``. They agree on FP16, BF16 and TF32 inputs and
differ on FP8 (measured files and MMA-Sim, microsoft/MMA-Sim commit c785138,
arXiv 2511.10909):

* Hopper ``wgmma`` FP8: 13 fraction bits, FP32 output truncated to 13 bits
  (measured, H100 files: FP32 output was run with wgmma); with FP16 C/D, C is
  aligned with the products at 13 bits and the sum rounded once to FP16
  (MMA-Sim's rule; no measured file).
* Hopper ``mma.sync`` FP8: no source models FP32 output (MMA-Sim has no Hopper FP8
  ``mma``; the measured FP32 files are wgmma), so lowprec has none; FP16 output:
  the FP16-output files of ``../shared/tensorcores`` were run
  with ``mma.sync.m16n8k32`` (the source's ``mma_fp8_output_fp16.cu``) and the
  best rule found matches 79-85% of them (docs/arithmetic.md says what is known).
* Blackwell ``mma.sync`` FP8: products normalised first, C added late (measured,
  10,000/10,000 B200 cases: the source's FP32 harness is ``mma.sync``).
* Blackwell ``tcgen05.mma`` FP8: 25 fraction bits with C aligned, one
  normalisation (MMA-Sim; not measured on silicon).
* Ampere and Ada ``mma.sync`` split a k=16 (fp16/bf16), k=8 (tf32) or k=32 (fp8)
  instruction into two halves (MMA-Sim), which the chip tables already model as
  blocks of half the instruction's k.

The chip names (``h100``, ``b200``, ...) stay the models of
:mod:`lowprec.tensorcores`: on every (inputs, output) with a measured file they
equal the instruction the file was measured with; :data:`CUBLAS_PATH` names the
instruction cuBLAS's kernels use on each architecture. Registering a model: add
one entry to :data:`INSTRUCTIONS` (a table, one line per model).
"""

from __future__ import annotations

from .tensorcores import ARCHITECTURES, Architecture, TensorCore

__all__ = ["CUBLAS_PATH", "INSTRUCTIONS", "get_instruction"]

_MMASIM = "MMA-Sim (microsoft/MMA-Sim c785138, mmasim/simulator/nv_ptx.py: {})"
_FILES = ("measured: ../shared/tensorcores (Khattak & Mikaitis 2025; harness "
          "model_validation/CUDA/{} of north-numerical-computing/MATLAB-tensor-core)")


def _tc(name: str, block: int, frac: int, source: str, *, acc: int | None = None,
        mode: str = "rtz", c_late: bool = False) -> TensorCore:
    """A rule with ``frac`` fraction bits kept below the largest nominal exponent."""
    base = 23 if acc is None else acc
    return TensorCore(name=name, block=block, align_bits=frac - base, acc_mantissa_bits=acc,
                      hw_mode=mode, c_late=c_late, source=source)


def _derive(name: str, chip: str, replace: dict[tuple[str, str], TensorCore] | None = None,
            measured: dict[tuple[str, str], str] | None = None,
            drop: tuple[tuple[str, str], ...] = ()) -> Architecture:
    """The chip table's rules under an instruction name, some replaced or dropped."""
    base = ARCHITECTURES[chip]
    rules = dict(base.rules)
    rules.update(replace or {})
    for key in drop:
        del rules[key]
    note = dict(base.measured) if measured is None else measured
    return Architecture(name=name, chips=(), rules=tuple(rules.items()),
                        measured=tuple(note.items()))


_WG = _MMASIM.format("wgmma: 25 bits, 13 for FP8; f16 output RNE once")
_TC5 = _MMASIM.format("tcgen05mma: 25 bits, C aligned, one normalisation")

# One entry per model: "<architecture>:<instruction>" -> its rules.
INSTRUCTIONS: dict[str, Architecture] = {m.name: m for m in [
    _derive("v100:mma.sync", "v100"),
    _derive("a100:mma.sync", "a100"),  # split-K halves: block = k/2
    _derive("ada:mma.sync", "ada"),    # split-K halves: block = k/2
    _derive("h100:wgmma", "h100", {
        ("fp8", "fp16"): _tc("h100:wgmma", 32, 13, _WG, acc=None, mode="rne"),
    }, measured={("fp8", "fp16"): "MMA-Sim's rule; no measured wgmma FP16-output file"}),
    _derive("h100:mma.sync", "h100", drop=(("fp8", "fp32"),),
            measured={("fp8", "fp16"): "measured with mma.sync: best rule 79-85% "
                                       "(docs/arithmetic.md)"}),
    _derive("b200:mma.sync", "b200"),
    _derive("b200:tcgen05", "b200", {
        ("fp8", "fp32"): _tc("b200:tcgen05", 32, 25, _TC5),
        ("fp8", "fp16"): _tc("b200:tcgen05", 32, 25, _TC5, mode="rne"),
    }, measured={("fp8", "fp32"): "MMA-Sim's rule; the measured B200 files are mma.sync",
                 ("fp8", "fp16"): "MMA-Sim's rule; the measured B200 files are mma.sync"}),
]}
# Instruction aliases (PTX spellings).
_ALIASES = {"h100:mma": "h100:mma.sync", "b200:mma": "b200:mma.sync",
            "b200:tcgen05.mma": "b200:tcgen05", "h100:wgmma.mma_async": "h100:wgmma",
            "v100:mma": "v100:mma.sync", "a100:mma": "a100:mma.sync", "ada:mma": "ada:mma.sync"}

#: The instruction cuBLAS's GEMM kernels use on each architecture.
CUBLAS_PATH = {"v100": "mma.sync", "a100": "mma.sync", "ada": "mma.sync", "h100": "wgmma",
               "b200": "tcgen05"}


def get_instruction(name: str) -> Architecture | None:
    """The model of ``"<chip>:<instruction>"`` (chip aliases such as ``h200`` accepted),
    or None when ``name`` has no ``:``; a clear error for an unknown pair.

    >>> get_instruction("h200:wgmma").name
    'h100:wgmma'
    """
    if ":" not in name:
        return None
    from .tensorcores import get_architecture

    chip, _, instr = name.strip().lower().partition(":")
    try:
        arch = get_architecture(chip).name
    except ValueError:
        arch = chip
    key = _ALIASES.get(f"{arch}:{instr}", f"{arch}:{instr}")
    if key not in INSTRUCTIONS:
        raise ValueError(f"no model of instruction {name!r}; known: {', '.join(INSTRUCTIONS)}")
    return INSTRUCTIONS[key]
