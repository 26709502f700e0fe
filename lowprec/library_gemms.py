"""GPU libraries' GEMMs under their own names: the model that reproduced each bit for bit,
and what it was measured on (``lp.matmul(..., model="cublaslt_fp8")``).

One entry per library behaviour; ``lowprec validate --gpu`` re-identifies them on any GPU
(docs/gpu.md, docs/hardware/h200-2026-12-04.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .tensorcores import ARCHITECTURES, AccumulationModel, Promote

H100 = ARCHITECTURES["h100"]


@dataclass(frozen=True)
class LibraryGemm(AccumulationModel):
    """A GPU library's GEMM under its own name: the model that reproduced it bit for bit,
    and what it was measured on (``lp.matmul(..., model=name)`` runs ``model``)."""

    model: AccumulationModel | None = None
    measured: str = ""
    name: str = "library"

    def describe(self) -> str:
        return f"{self.name}: {self.measured}"


_H200 = "NVIDIA H200, driver 580.159.04, 2026-12-04 (docs/hardware/h200-2026-12-04.md)"
# Library GEMMs as measured; one entry each (validate --gpu re-identifies them on any GPU).
LIBRARY_GEMMS: dict[str, LibraryGemm] = {g.name: g for g in [
    LibraryGemm("cublaslt_fp8", Promote(name="cublaslt_fp8", every=128, inner=H100),
                "= promote(128, 'h100'); torch._scaled_mm E4M3, fp32 out, use_fast_accum=False (torch 2.11.0+cu130, "
                f"cuBLASLt), 100% of outputs at K = 64..4096; {_H200}"),
    LibraryGemm("cublaslt_fp8_fast", replace(H100, name="cublaslt_fp8_fast"),
                "= the h100 chain; torch._scaled_mm E4M3, fp32 out, use_fast_accum=True (torch 2.11.0+cu130, "
                f"cuBLASLt), 100% of outputs at K = 64..4096; {_H200}"),
    LibraryGemm("cublas", replace(H100, name="cublas"),
                "= the h100 chain; cuBLAS fp16/bf16, fp32 accumulation: cublasGemmEx fp32 out "
                "(CuPy 14.2.0) 100% at K = 32..1024; torch.matmul (2.11.0+cu130) = this, then "
                "one RNE rounding to fp16/bf16: 100% at K = 16..1024, 1019/1024 (fp16) and "
                f"1022/1024 (bf16) at K = 4096 (split-K suspected); {_H200}"),
]}
