"""The trainer's matmul: float32 (or float64) products and sums in k order, bit for bit
as a scalar loop computes them, so training gives the same bits on every processor."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lowprec._kernels.gemm import matmul_in_order

ROOT = Path(__file__).resolve().parents[1]


def _scalar_loop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The definition, one numpy scalar operation at a time (each rounds to the dtype)."""
    t = a.dtype.type
    out = np.zeros((a.shape[0], b.shape[1]), a.dtype)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            s = t(0)
            for k in range(a.shape[1]):
                s = t(s + t(a[i, k] * b[k, j]))
            out[i, j] = s
    return out


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 9), (40, 7, 3), (3, 5, 40), (20, 33, 1),
                                   (17, 64, 18)])
def test_equals_the_scalar_loop(dtype, shape):
    m, k, n = shape
    rng = np.random.default_rng(list(shape))
    # Magnitudes spread over 2**+-20, so the order of the sums changes the result.
    a = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-20, 20, (m, k))).astype(dtype)
    b = (rng.standard_normal((k, n)) * 2.0 ** rng.integers(-20, 20, (k, n))).astype(dtype)
    with np.errstate(all="ignore"):
        ref = _scalar_loop(a, b)
    assert _same_bits(matmul_in_order(a, b), ref)
    # Strided operands (the backward pass reads transposes) give the same bits.
    assert _same_bits(matmul_in_order(np.asfortranarray(a), np.asfortranarray(b)), ref)
    # b.T @ a.T is ref.T: the same products (multiplication commutes), summed in the same order.
    assert _same_bits(matmul_in_order(np.ascontiguousarray(b.T), np.ascontiguousarray(a.T)),
                      np.ascontiguousarray(ref.T))
    assert _same_bits(matmul_in_order(b.T, a.T), np.ascontiguousarray(ref.T))


def test_order_is_k_order_not_exact():
    """(1e8 + 1) - 1e8 is 0 in float32 when added in k order; the exact sum is 1."""
    a = np.array([[1e8, 1.0, -1e8], [1e8, -1e8, 1.0]], np.float32)
    b = np.ones((3, 1), np.float32)
    assert matmul_in_order(a, b).ravel().tolist() == [0.0, 1.0]


def test_operands_promote_as_numpy_does_at_least_to_float32():
    a = np.array([[0.1, 0.2]], np.float32)
    b = np.array([[3.0], [1.0]])
    got = matmul_in_order(a, b)  # float64: float32 0.1 and 0.2, exactly, times float64 values
    assert got.dtype == np.float64 and got[0, 0] == _scalar_loop(a.astype(np.float64), b)[0, 0]
    half = matmul_in_order(a.astype(np.float16), b.astype(np.float16))
    assert half.dtype == np.float32
    assert _same_bits(half, _scalar_loop(a.astype(np.float16).astype(np.float32),
                                         b.astype(np.float32)))
    assert matmul_in_order(np.eye(2, dtype=int), np.ones((2, 1), bool)).dtype == np.float64


def test_specials_follow_ieee():
    a = np.array([[np.inf, 1.0], [np.nan, 0.0], [np.inf, -np.inf], [0.0, 0.0]], np.float32)
    b = np.array([[1.0], [1.0]], np.float32)
    with np.errstate(invalid="ignore"):
        ref = _scalar_loop(a, b)
        got = matmul_in_order(a, b)
    assert np.array_equal(got, ref, equal_nan=True)
    assert np.isinf(got[0, 0]) and np.isnan(got[1, 0]) and np.isnan(got[2, 0])
    assert got[3, 0] == 0 and not np.signbit(got[3, 0])


def test_bad_operands_are_refused_clearly():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"\(m, k\) and \(k, n\); got shapes \(2, 3\) and \(2, 3\)"):
        matmul_in_order(x, x)
    with pytest.raises(TypeError, match="needs real operands .*; got float32 and complex128"):
        matmul_in_order(x, np.ones((3, 2), complex))
    with pytest.raises(ValueError, match="2-D"):
        matmul_in_order(np.ones(3, np.float32), x)


_RUN = """
import numpy as np
from lowprec.train import train
rng = np.random.default_rng(7)
a, b = rng.standard_normal((64, 256)).astype(np.float32), rng.standard_normal((256, 64)).astype(np.float32)
print((a @ b).tobytes().hex()[:4096])
for p in ("fp32", "fp16-amp", "bf16-master"):
    r = train(p, "underflow", steps=40, seed=3, eval_every=20)
    print(p, [float(x).hex() for x in r.history["loss"] + r.history["eval_loss"]])
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="OPENBLAS_CORETYPE=Prescott names an x86-64 kernel")
def test_training_does_not_depend_on_the_blas_kernel():
    """The same runs under the BLAS's own kernel for this processor and under its plain
    SSE3 one (which adds in another order, without fused multiply-adds): numpy's matmul
    differs, the training runs do not."""
    outs = []
    for env in ({}, {"OPENBLAS_CORETYPE": "Prescott"}):
        proc = subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True,
                              env={**os.environ, **env}, cwd=ROOT, timeout=600)
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout.splitlines())
    (blas0, *runs0), (blas1, *runs1) = outs
    assert runs0 == runs1
    if blas0 == blas1:
        pytest.skip("this numpy's BLAS gives the same float32 matmul under both kernels, so "
                    "the comparison shows nothing here (the training runs did agree)")
