"""What a training step would cost on a GPU: a roofline *estimate, not a measurement*.

For every linear layer and recipe, one training step does three matmuls
(``M = batch * tokens`` rows)::

    forward   y  = x @ W           2*M*K*N FLOPs   reads x, W     writes y
    dgrad     dx = dy @ W.T        2*M*K*N FLOPs   reads dy, W    writes dx
    wgrad     dW = x.T @ dy        2*M*K*N FLOPs   reads x, dy    writes dW

each in the formats the policy stores those tensors in (block scales included, exact
byte counts from :func:`lowprec.train.memory.tensor_bytes`). A matmul runs at the
tensor-core rate of the wider of its two input formats. The roofline model says it takes

    time = max(FLOPs / peak FLOP rate, bytes moved / memory bandwidth)

-- *compute-bound* when the first term wins (large matmuls: arithmetic intensity
FLOPs/byte above the GPU's ridge point ``peak / bandwidth``), *memory-bound* otherwise
(the demo's tiny layers). Everything else a real step does (kernel launches, the
elementwise ops, the optimizer, caches, clocks below boost) is ignored, so read the
numbers as upper bounds on speed and as ratios between recipes. The "2-8x faster on
tensor cores" of mixed precision holds for compute-bound layers only; a memory-bound
layer gains only what its bytes shrink.

MX and NVFP4 matmuls are charged at their element format's rate; block-scaled tensor
cores are a Blackwell feature, so on Hopper an MXFP8 matmul is assumed to run at the FP8
rate with its scales applied elsewhere, and FP4 has no estimate at all.

The peak numbers are the published datasheet figures (dense, i.e. half the "with
sparsity" figure NVIDIA prints), cited per GPU in :data:`GPUS`.

>>> est = estimate((32, 64, 64, 10), "fp16-amp", gpu="h100-sxm", batch=64)
>>> est.rows[0].layer, est.rows[0].bound
('fc1', 'memory')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .memory import ModelShape, mlp_shape, tensor_bytes
from .policy import Policy, Quant, get_policy

__all__ = ["GPUS", "GPU", "CostRow", "Estimate", "compute_class", "estimate", "get_gpu"]


@dataclass(frozen=True)
class GPU:
    """Published peak numbers of one GPU (dense tensor-core FLOP rates, in TFLOP/s)."""

    name: str
    #: compute class ("fp32" = CUDA cores without tensor cores, "tf32", "fp16" (= bf16),
    #: "fp8", "fp6", "fp4") -> dense peak TFLOP/s; a class missing = not supported.
    peak_tflops: Mapping[str, float]
    bandwidth_tbs: float
    source: str

    def peak(self, cls: str) -> float | None:
        v = self.peak_tflops.get(cls)
        return None if v is None else v * 1e12


GPUS: dict[str, GPU] = {
    # NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: FP32 67 TFLOPS; TF32 989,
    # BF16/FP16 1,979, FP8 3,958 TFLOPS "with sparsity" (dense: half); GPU memory
    # bandwidth 3.35 TB/s. Hopper has no FP6/FP4 tensor cores.
    "h100-sxm": GPU("NVIDIA H100 SXM", {"fp32": 67.0, "tf32": 494.5, "fp16": 989.5,
                                        "fp8": 1979.0}, 3.35,
                    "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)"),
    # NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: the same compute as H100 SXM
    # (FP8 3,958 TFLOPS with sparsity), 141 GB HBM3e at 4.8 TB/s.
    "h200": GPU("NVIDIA H200 SXM", {"fp32": 67.0, "tf32": 494.5, "fp16": 989.5,
                                    "fp8": 1979.0}, 4.8,
                "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM)"),
    # NVIDIA HGX B200 (per GPU, from the 8-GPU figures): FP4 tensor core 18 PFLOPS,
    # FP8/FP6 9 PFLOPS, FP16/BF16 4.5 PFLOPS, TF32 2.2 PFLOPS, all "with sparsity" (dense:
    # half); HBM3e bandwidth 8 TB/s. Its non-tensor FP32 rate is not on that sheet, so
    # an fp32 recipe has no estimate here.
    "b200": GPU("NVIDIA B200 (HGX B200)", {"tf32": 1100.0, "fp16": 2250.0, "fp8": 4500.0,
                                           "fp6": 4500.0, "fp4": 9000.0}, 8.0,
                "NVIDIA HGX B200 datasheet (per-GPU share of the 8-GPU figures)"),
}

_CLASS_ORDER = ("fp4", "fp6", "fp8", "fp16", "tf32", "fp32")
_MX_CLASS = {"mxfp8_e4m3": "fp8", "mxfp8_e5m2": "fp8", "mxfp6_e3m2": "fp6",
             "mxfp6_e2m3": "fp6", "mxfp4": "fp4"}


def compute_class(q: Quant | None) -> str:
    """The tensor-core class a matmul input stored as ``q`` needs (``None``: fp32).

    >>> compute_class(Quant("bf16")), compute_class(Quant("mxfp4", scaling="mx"))
    ('fp16', 'fp4')
    """
    if q is None:
        return "fp32"
    if q.scaling == "mx":
        return _MX_CLASS[q.format]
    if q.scaling == "nvfp4" or q.format == "nvfp4":  # NVFP4, and the recipe's quantizers
        return "fp4"
    name = q.format
    if name.startswith("fp8"):
        return "fp8"
    if name.startswith("fp6"):
        return "fp6"
    if name.startswith("fp4"):
        return "fp4"
    if name in ("fp16", "bf16"):
        return "fp16"
    if name == "tf32":
        return "tf32"
    return "fp32"


def _wider(a: str, b: str) -> str:
    return max(a, b, key=_CLASS_ORDER.index)


@dataclass(frozen=True)
class CostRow:
    """One layer: the three matmuls of a step summed (``seconds`` None: unsupported)."""

    layer: str
    flops: int
    bytes_moved: int
    compute_class: str
    seconds: float | None
    bound: str  # "compute", "memory" or "unsupported"
    measured_seconds: float | None = None

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes_moved


@dataclass(frozen=True)
class Estimate:
    """A roofline estimate of one training step, per layer (see the module docstring)."""

    model: str
    policy: str
    gpu: GPU
    batch: int
    rows: tuple[CostRow, ...]

    @property
    def seconds(self) -> float | None:
        """The whole step (None if a layer is unsupported on this GPU)."""
        if any(r.seconds is None for r in self.rows):
            return None
        return sum(r.seconds for r in self.rows if r.seconds is not None)

    def __str__(self) -> str:
        ridge = {c: p / self.gpu.bandwidth_tbs for c, p in self.gpu.peak_tflops.items()}
        lines = [f"ESTIMATE, NOT A MEASUREMENT: roofline of one training step of {self.model}, "
                 f"policy {self.policy}, batch {self.batch}, on {self.gpu.name}",
                 f"(peaks from {self.gpu.source}; ridge points "
                 + ", ".join(f"{c} {v:.0f}" for c, v in ridge.items()) + " FLOP/byte)"]
        head = ("layer", "GFLOP", "MB moved", "FLOP/byte", "runs at", "bound", "estimate us",
                "measured us")
        rows = [head]
        for r in self.rows:
            rows.append((r.layer, f"{r.flops / 1e9:.4g}", f"{r.bytes_moved / 1e6:.4g}",
                         f"{r.intensity:.1f}", r.compute_class, r.bound,
                         _us(r.seconds), "-" if r.measured_seconds is None
                         else _us(r.measured_seconds)))
        total = self.seconds
        rows.append(("step", "", "", "", "", "", _us(total), ""))
        widths = [max(len(cells[i]) for cells in rows) for i in range(len(head))]
        for k, cells in enumerate(rows):
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        lines.append("measured: none recorded" if all(r.measured_seconds is None
                                                      for r in self.rows)
                     else "measured: times passed in by the caller, from real GPU runs")
        return "\n".join(lines)


def _us(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    us = seconds * 1e6
    return f"{us:,.0f}" if us >= 1000 else f"{us:.4g}"


def get_gpu(gpu: str | GPU) -> GPU:
    if isinstance(gpu, GPU):
        return gpu
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    return GPUS[gpu]


def estimate(model: Sequence[int] | ModelShape, policy: str | Policy, *,
             gpu: str | GPU = "h100-sxm", batch: int = 1,
             measured: Mapping[str, float] | None = None) -> Estimate:
    """Roofline estimate per layer of one training step (see the module docstring).

    ``measured`` maps layer names to times really measured on that GPU (seconds), shown
    beside the estimate.
    """
    shape = model if isinstance(model, ModelShape) else mlp_shape(model)
    p = get_policy(policy)
    g = get_gpu(gpu)
    if int(batch) != batch or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    m = int(batch) * shape.tokens
    measured = dict(measured or {})
    unknown = set(measured) - {lin.name for lin in shape.linears}
    if unknown:
        raise ValueError(f"measured times for unknown layers {sorted(unknown)}; layers: "
                         f"{', '.join(lin.name for lin in shape.linears)}")
    w_q = p.weights if p.weights is not None else p.master
    gemms = p.gemm_quants() or {}
    last = len(shape.linears) - p.keep_last
    rows = []
    for i, lin in enumerate(shape.linears):
        k, n = lin.n_in, lin.n_out
        ops = gemms if i < last else {}

        def read(op: str, stored: Quant | None, shape_: tuple[int, int], axis: int,
                 gemm_axis: int) -> tuple[str, int]:
            """(compute class, bytes) of one GEMM operand: its GEMM format (``gemms``),
            blocked along that GEMM's reduction axis, else the stored tensor."""
            q = ops.get(op)  # noqa: B023 (used within this iteration only)
            if q is None:
                return compute_class(stored), tensor_bytes(shape_, stored, axis)
            return compute_class(q), tensor_bytes(shape_, q, gemm_axis)

        y_b = tensor_bytes((m, n), p.activations, -1)
        dx_b = tensor_bytes((m, k), p.act_grads, -1)
        dw_b = tensor_bytes((k, n), p.weight_grads, 0)
        (xc, xb), (wc, wb) = (read("fprop.input", p.activations, (m, k), -1, -1),
                              read("fprop.weight", w_q, (k, n), 0, 0))
        (gc, gb), (vc, vb) = (read("dgrad.output_grad", p.act_grads, (m, n), -1, -1),
                              read("dgrad.weight", w_q, (k, n), 0, 1))
        (hc, hb), (ic, ib) = (read("wgrad.output_grad", p.act_grads, (m, n), -1, 0),
                              read("wgrad.input", p.activations, (m, k), -1, 0))
        matmuls = ((_wider(xc, wc), xb + wb + y_b), (_wider(gc, vc), gb + vb + dx_b),
                   (_wider(ic, hc), ib + hb + dw_b))
        flops_each = 2 * m * k * n
        total_t: float | None = 0.0
        compute_t = memory_t = 0.0
        for cls, nbytes in matmuls:
            peak = g.peak(cls)
            if peak is None:
                total_t = None
                continue
            tc, tm = flops_each / peak, nbytes / (g.bandwidth_tbs * 1e12)
            compute_t += tc
            memory_t += tm
            if total_t is not None:
                total_t += max(tc, tm)
        cls = max((c for c, _ in matmuls), key=_CLASS_ORDER.index)
        bound = "unsupported" if total_t is None else (
            "compute" if compute_t >= memory_t else "memory")
        rows.append(CostRow(lin.name, 3 * flops_each, sum(b for _, b in matmuls), cls,
                            total_t, bound, measured.get(lin.name)))
    return Estimate(shape.name, p.name, g, int(batch), tuple(rows))
