"""What the CUDA sources provide, as plain data (no CuPy needed).

Each :class:`Conversion` names one kernel of ``convert.cu`` and says what the
emulator must do to give the same answer: the format, rounding mode and
saturation to pass to :func:`lowprec.encode`, and how CUDA's documented
conventions differ from lowprec's defaults (``twin`` below). The validation
uses these entries both with and without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..formats import FloatFormat, get_format
from ..nan_rules import nan_codes
from ..rounding import encode

KERNEL_DIR = Path(__file__).parent
#: The CUDA sources for sm_89+ (CuPy RawModule); each compiles on its own.
SOURCES = ("convert.cu", "arith.cu", "gemm_fp8.cu")
#: Sources that need the sm_90a target (wgmma): compiled by lowprec with NVRTC.
SOURCES_SM90A = ("gemm_fp8_wgmma.cu",)


@dataclass(frozen=True)
class Conversion:
    """One hardware conversion ``source -> fmt`` and its emulated twin.

    ``twin`` is ``"plain"`` (``encode(x, fmt, mode, saturate=saturate)``),
    ``"nan_to_max"`` (fp6/fp4: CUDA gives +MAXNORM for NaN inputs, and always
    saturates) or ``"abs"`` (e8m0: CUDA rounds ``|x|`` and clips results below
    2**-127, zero included, to 2**-127, where lowprec gives NaN for zero and
    negative numbers; NaN gives 0xFF).
    """

    name: str
    source: str  # "float32" or "float64"
    fmt: str
    mode: str
    saturate: bool
    cuda: str  # the CUDA function or PTX instruction that runs
    twin: str = "plain"
    #: The code NaN inputs get on the GPU (a rule of lowprec.nan_rules.NAN_RULES).
    nan_rule: str = "lowprec"
    #: Where the NaN rule comes from.
    nan_source: str = ""

    @property
    def format(self) -> FloatFormat:
        return get_format(self.fmt)

    @property
    def kernel(self) -> str:
        return "cvt_" + self.name

    def emulate(self, x: np.ndarray, *, hardware_nan: bool = False) -> np.ndarray:
        """The emulator's codes for float32/float64 inputs ``x`` (CUDA's conventions).

        NaN inputs get lowprec's NaN code (sign kept, quiet NaN) unless
        ``hardware_nan``, which gives the GPU's (:attr:`nan_rule`).
        """
        x = np.asarray(x)
        codes = self._emulate(x)
        if hardware_nan and self.nan_rule != "lowprec":
            nan = np.isnan(x)
            if nan.any():
                codes = np.array(codes)
                codes[nan] = nan_codes(x[nan], self.format, self.nan_rule)
        return codes

    def _emulate(self, x: np.ndarray) -> np.ndarray:
        fmt = self.format
        if self.twin == "plain":
            return encode(x, fmt, self.mode, saturate=self.saturate)
        nan = np.isnan(x)
        if self.twin == "nan_to_max":
            codes = encode(np.where(nan, 0, x), fmt, self.mode, saturate=True)
            codes[nan] = fmt.max_code_magnitude
            return codes
        if self.twin == "abs":
            mag = np.abs(np.where(nan, 1, x))
            mag[mag == 0] = np.finfo(mag.dtype).smallest_subnormal  # CUDA: clipped to 2**-127
            codes = encode(mag, fmt, self.mode, saturate=self.saturate)
            codes[nan] = 0xFF
            return codes
        raise ValueError(f"unknown twin {self.twin!r}")


# Where each NaN rule was read (lowprec/nan_rules.py describes the rules).
_PTX_NAN = {
    "f32": "PTX cvt returns NVIDIA's canonical NaN; the H200 sweeps (2026-12-04) agree: every "
           "float32 NaN input differed from lowprec's sign-kept quiet NaN, in both signs for "
           "fp16/bf16/E5M2 and only for negative NaNs for E4M3 (whose canonical NaN 0x7f is "
           "lowprec's +NaN)",
    "f64": "PTX cvt returns NVIDIA's canonical NaN (the float64 path is not yet checked "
           "on hardware)",
}
_SOFT_NAN = ("cuda_fp8.hpp __nv_cvt_double_to_fp8: E4M3 NaN -> sign|0x7f, E5M2 NaN -> "
             "sign|0x7e|second fraction bit; the H200 E5M2 nosat sweep's 8,388,608 = 2**23 "
             "(the float32 NaNs with fraction bit 21 set) confirms that cvt.f64.f32 keeps "
             "the payload")


def _conversions() -> dict[str, Conversion]:
    out: list[Conversion] = []
    ptx_mode = {"rn": "rne", "rz": "rtz", "rd": "rdown", "ru": "rup"}
    ptx_name = {"rn": "rn", "rz": "rz", "rd": "rm", "ru": "rp"}
    for src, s in (("float32", "f32"), ("float64", "f64")):
        for fmt in ("fp16", "bf16"):
            for m, mode in ptx_mode.items():
                out.append(Conversion(f"{s}_{fmt}_{m}", src, fmt, mode, False,
                                      f"cvt.{ptx_name[m]}.{fmt.replace('fp16', 'f16')}.{s}",
                                      nan_rule="canonical", nan_source=_PTX_NAN[s]))
        for kind, fmt in (("e4m3", "fp8_e4m3"), ("e5m2", "fp8_e5m2")):
            for sat in (True, False):
                tag = "sat" if sat else "nosat"
                hw = src == "float32" and sat
                how = "__nv_cvt_float_to_fp8" if hw else "__nv_cvt_double_to_fp8"
                fast = ("cvt.rn.satfinite + fix-up = " if src == "float32" and not sat
                        else "")
                out.append(Conversion(f"{s}_{kind}_{tag}", src, fmt, "rne", sat,
                                      f"{fast}{how}(__NV_{'SATFINITE' if sat else 'NOSAT'}, "
                                      f"__NV_{kind.upper()})",
                                      nan_rule="canonical" if hw else "truncate",
                                      nan_source=_PTX_NAN["f32"] if hw else _SOFT_NAN))
    for kind, fmt, fn in (("e2m1", "fp4_e2m1", "fp4"), ("e2m3", "fp6_e2m3", "fp6"),
                          ("e3m2", "fp6_e3m2", "fp6")):
        for m, mode, cu in (("rn", "rne", "cudaRoundNearest"), ("rz", "rtz", "cudaRoundZero")):
            out.append(Conversion(f"f32_{kind}_{m}", "float32", fmt, mode, True,
                                  f"integer rounding = __nv_cvt_double_to_{fn}"
                                  f"(__NV_{kind.upper()}, {cu})",
                                  twin="nan_to_max", nan_rule="max",
                                  nan_source=f"cuda_{fn}.hpp: 'NaN converts to positive "
                                  f"{fn.upper()}_MAXNORM'; H200 sweeps: 0 mismatches"))
    for m, mode, cu in (("rz", "rtz", "cudaRoundZero"), ("ru", "rup", "cudaRoundPosInf")):
        for sat in (True, False):
            tag = "sat" if sat else "nosat"
            out.append(Conversion(f"f32_e8m0_{m}_{tag}", "float32", "e8m0", mode, sat,
                                  f"__nv_cvt_double_to_e8m0(__NV_{'SATFINITE' if sat else 'NOSAT'}"
                                  f", {cu})", twin="abs", nan_rule="canonical",
                                  nan_source="cuda_fp8.hpp: NaN -> 0xFF; H200 sweeps: 0 "
                                  "mismatches"))
    return {c.name: c for c in out}


CONVERSIONS: dict[str, Conversion] = _conversions()


@dataclass(frozen=True)
class BackConversion:
    """A hardware conversion from a format's codes to a wider format's bits."""

    name: str
    fmt: str
    to: str  # "fp32", "fp16" or "bf16"
    cuda: str

    @property
    def kernel(self) -> str:
        return "back_" + self.name


BACK_CONVERSIONS: dict[str, BackConversion] = {
    b.name: b for b in (
        BackConversion("fp16_f32", "fp16", "fp32", "cvt.f32.f16"),
        BackConversion("bf16_f32", "bf16", "fp32", "bits << 16"),
        BackConversion("e4m3_fp16", "fp8_e4m3", "fp16", "__nv_cvt_fp8_to_halfraw(__NV_E4M3)"),
        BackConversion("e5m2_fp16", "fp8_e5m2", "fp16", "__nv_cvt_fp8_to_halfraw(__NV_E5M2)"),
        BackConversion("e2m1_fp16", "fp4_e2m1", "fp16", "__nv_cvt_fp4_to_halfraw(__NV_E2M1)"),
        BackConversion("e2m3_fp16", "fp6_e2m3", "fp16", "__nv_cvt_fp6_to_halfraw(__NV_E2M3)"),
        BackConversion("e3m2_fp16", "fp6_e3m2", "fp16", "__nv_cvt_fp6_to_halfraw(__NV_E3M2)"),
        BackConversion("e8m0_bf16", "e8m0", "bf16", "__nv_cvt_e8m0_to_bf16raw"),
    )
}

#: fp16/bf16 operations in arith.cu: name -> (arity, CUDA function, exact op for sweeps).
ARITH_OPS: dict[str, tuple[int, str]] = {
    "add": (2, "__hadd_rn"),
    "sub": (2, "__hsub_rn"),
    "mul": (2, "__hmul_rn"),
    "div": (2, "__hdiv (float32 approximation)"),
    "div_rn": (2, "div.rn.f32 + cvt.rn (correctly rounded)"),
    "fma": (3, "__hfma"),
    "sqrt": (1, "hsqrt (float32 approximation)"),
    "sqrt_rn": (1, "sqrt.rn.f32 + cvt.rn (correctly rounded)"),
}
ARITH_FORMATS = ("fp16", "bf16")
#: Operations whose sweeps run on the device (exact reference computed there).
SWEEP_OPS = ("add", "sub", "mul", "div", "div_rn", "fma")
GEMM_FP8_KERNELS = {"fp8_e4m3": "gemm_e4m3_f32", "fp8_e5m2": "gemm_e5m2_f32"}
#: The same products through wgmma (sm_90a, QGMMA): the h100 model on every H200 output.
WGMMA_FP8_KERNELS = {"fp8_e4m3": "wgmma_e4m3_f32", "fp8_e5m2": "wgmma_e5m2_f32"}
