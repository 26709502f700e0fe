"""Quantization-aware training (QAT) against post-training quantization (PTQ).

Both end with the same model format for inference: the weight matrices stored in
MXFP4, NVFP4 or FP8 (E4M3, one power-of-two scale per tensor), biases and activations in
float32 (weight-only quantization, the common first step of low-bit inference).

PTQ
    Train in float32, then quantize the trained weights once. The network never saw the
    rounding, so every weight moves by up to half a step of its grid at once.
QAT
    Train with the weights *fake-quantized* in the forward pass: the matmuls read
    ``dequantize(quantize(W))`` (MX blocks of 32 and NVFP4 blocks of 16 along the input
    axis; FP8 with Transformer Engine's delayed per-tensor scale), while the optimizer
    updates an FP32 master copy. The rounding has no useful derivative (zero almost
    everywhere), so the gradient passes it *straight through* as if it were the
    identity (:func:`lowprec.autograd.round_value`). The loss the optimizer sees is the
    loss of the quantized network, so training steers towards weights that still work
    after rounding -- QAT is low-precision *training* whose product is a low-precision
    *inference* model.

This is the trainer itself with a policy that rounds only the weights
(:func:`qat_policy`); :func:`evaluate` runs the inference model on the held-out set.

>>> r = compare_qat_ptq(formats=("mxfp4",), steps=30)
>>> [row.format for row in r.rows], r.rows[0].ptq_loss > 0
(['mxfp4'], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import mx, nvfp4, scaling
from .._kernels.gemm import matmul_in_order
from ..autograd import Tensor, cross_entropy, mse
from ..autograd.tensor import matmul
from .data import Task, get_task
from .policy import Policy, Quant
from .runner import train

__all__ = ["INFERENCE_FORMATS", "QATComparison", "QATRow", "compare_qat_ptq", "evaluate",
           "fake_quantize", "qat_policy"]

#: Inference format name -> how QAT rounds the weights while training.
INFERENCE_FORMATS: dict[str, Quant] = {
    "mxfp4": Quant("mxfp4", scaling="mx"),
    "nvfp4": Quant("nvfp4", scaling="nvfp4"),
    "fp8": Quant("fp8_e4m3", scaling="delayed"),
}


def _check_format(fmt: str) -> str:
    if fmt not in INFERENCE_FORMATS:
        raise ValueError(f"inference format must be one of {tuple(INFERENCE_FORMATS)}, "
                         f"got {fmt!r}")
    return fmt


def fake_quantize(w: np.ndarray, fmt: str) -> np.ndarray:
    """``w`` (a weight matrix, inputs along axis 0) quantized to ``fmt`` and dequantized
    to float32: what the inference model computes with.

    >>> import numpy as np
    >>> fake_quantize(np.array([[0.3], [-1.0], [6.0]], np.float32), "mxfp4").ravel().tolist()
    [0.5, -1.0, 6.0]
    """
    _check_format(fmt)
    w = np.asarray(w, dtype=np.float32)
    if fmt == "mxfp4":
        out = mx.quantize(w, "mxfp4", axis=0, block_size=32).dequantize()
    elif fmt == "nvfp4":
        out = nvfp4.quantize(w, axis=0, block_size=16).dequantize()
    else:  # the current power-of-two scale, as the trainer evaluates delayed scaling
        out = scaling.quantize_per_tensor(w, "fp8_e4m3", power_of_two=True).dequantize()
    return np.asarray(out, dtype=np.float32)


def qat_policy(fmt: str) -> Policy:
    """The training policy of QAT for inference format ``fmt``: FP32 master, the weights
    fake-quantized in the forward pass, everything else float32."""
    q = INFERENCE_FORMATS[_check_format(fmt)]
    return Policy(f"qat-{fmt}", f"QAT for {fmt} inference: weights fake-quantized in the "
                  "forward pass, straight-through gradient into an FP32 master copy",
                  master=Quant("fp32"), weights=q)


def evaluate(params: Sequence[np.ndarray], task: Task, fmt: str | None = None
             ) -> tuple[float, float | None]:
    """Held-out (loss, accuracy) of the MLP ``params`` (``[W1, b1, W2, b2, ...]``) with its
    weight matrices quantized to ``fmt`` (``None``: float32 as they are). Accuracy is
    ``None`` for a regression task."""
    h = Tensor(task.x_test)
    n = len(params) // 2
    for i in range(n):
        w = params[2 * i] if fmt is None else fake_quantize(params[2 * i], fmt)
        z = matmul(h, Tensor(np.asarray(w, dtype=np.float32)), matmul_in_order) \
            + Tensor(params[2 * i + 1])
        h = z.relu() if i < n - 1 else z
    with np.errstate(over="ignore", invalid="ignore"):
        if task.kind == "classification":
            loss = float(cross_entropy(h, task.y_test).data)
            return loss, float(np.mean(h.data.argmax(axis=1) == task.y_test))
        return float(mse(h, task.y_test).data), None


@dataclass(frozen=True)
class QATRow:
    """One inference format: held-out loss and accuracy of PTQ and QAT."""

    format: str
    ptq_loss: float
    ptq_acc: float | None
    qat_loss: float
    qat_acc: float | None
    #: QAT's FP32 master weights evaluated without quantization (for reference).
    qat_master_loss: float


@dataclass(frozen=True)
class QATComparison:
    """FP32 training, then PTQ and QAT per inference format (same task, seed, steps)."""

    task: str
    steps: int
    seed: int
    fp32_loss: float
    fp32_acc: float | None
    rows: tuple[QATRow, ...]

    def __str__(self) -> str:
        def acc(a: float | None) -> str:
            return "-" if a is None else f"{100 * a:.1f}"

        head = ("inference weights", "PTQ loss", "PTQ acc %", "QAT loss", "QAT acc %",
                "QAT master fp32 loss")
        rows = [head, ("fp32 (no quantization)", f"{self.fp32_loss:.4f}", acc(self.fp32_acc),
                       "", "", "")]
        for r in self.rows:
            rows.append((r.format, f"{r.ptq_loss:.4f}", acc(r.ptq_acc), f"{r.qat_loss:.4f}",
                         acc(r.qat_acc), f"{r.qat_master_loss:.4f}"))
        widths = [max(len(cells[i]) for cells in rows) for i in range(len(head))]
        lines = [f"QAT vs PTQ: task {self.task!r}, {self.steps} steps, seed {self.seed}; "
                 "held-out loss and accuracy, weights quantized, activations float32"]
        for k, cells in enumerate(rows):
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)


def compare_qat_ptq(task: str | Task = "underflow", *,
                    formats: Sequence[str] = tuple(INFERENCE_FORMATS), steps: int = 600,
                    seed: int = 0, optimizer: str = "sgd") -> QATComparison:
    """Train once in FP32 and once per format with QAT, on the same task, seed and steps;
    evaluate every model at its inference format (see the module docstring).

    The underflow task is built with ``grad_exp=0`` (its gradient knob is irrelevant
    here: everything but the weights is float32).
    """
    for f in formats:
        _check_format(f)
    if isinstance(task, str):
        task = get_task(task, seed, **({"grad_exp": 0} if task == "underflow" else {}))
    fp32 = train("fp32", task, steps=steps, seed=seed, optimizer=optimizer, record=False)
    fp32_loss, fp32_acc = evaluate(fp32.params, task)
    rows = []
    for f in formats:
        ptq_loss, ptq_acc = evaluate(fp32.params, task, f)
        qat = train(qat_policy(f), task, steps=steps, seed=seed, optimizer=optimizer,
                    record=False)
        qat_loss, qat_acc = evaluate(qat.params, task, f)
        rows.append(QATRow(f, ptq_loss, ptq_acc, qat_loss, qat_acc,
                           evaluate(qat.params, task)[0]))
    return QATComparison(task.name, steps, seed, fp32_loss, fp32_acc, tuple(rows))
