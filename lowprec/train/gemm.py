"""A linear layer's three GEMMs, each reading its operands as the policy says.

Transformer Engine's recipes quantize the operands of every GEMM on their own, from
the tensors as they are stored, along that GEMM's reduction axis. With the trainer's
layout (input ``h``: M x K, weight ``W``: K x N, output gradient ``g``: M x N)::

    fprop   z  = R(h) @ R(W)        h along K (axis -1), W along K (axis 0)
    dgrad   dh = R(g) @ R(W)^T      g along N (axis -1), W along N (axis 1)
    wgrad   dW = R(h)^T @ R(g)      h along M (axis 0),  g along M (axis 0)

each ``R`` the rounder of its operand (:data:`lowprec.schemes.GEMM_OPERANDS`; None: read
as stored). An operand under the random Hadamard transform (``nvfp4_rht``) is read in
the rotated domain, its partner rotated alike, so the product is that of the unrotated
tensors (the policy checks that both are rotated). In the backward pass dgrad is formed
first (only when ``h`` needs a gradient: not for the network's input), then wgrad; that
is the order in which stochastic rounding draws its random bytes.

>>> import numpy as np
>>> from lowprec.autograd import Tensor
>>> from lowprec.train.policy import get_policy
>>> r = gemm_rounders(get_policy("nvfp4").gemm_quants(), np.random.default_rng(0))
>>> h = Tensor(np.ones((16, 32), np.float32))
>>> w = Tensor(np.full((32, 16), 0.5, np.float32), requires_grad=True)
>>> z = gemm(h, w, r)
>>> z.backward(np.ones((16, 16), np.float32)); float(z.data[0, 0]), float(w.grad[0, 0])
(16.0, 16.0)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._kernels.gemm import matmul_in_order
from ..autograd import Tensor
from .policy import Quant
from .quant import Rounder, make_rounder

__all__ = ["AXES", "gemm", "gemm_rounders"]

#: Each operand's reduction axis in the trainer's layout (module docstring).
AXES = {"fprop.input": -1, "fprop.weight": 0, "dgrad.output_grad": -1, "dgrad.weight": 1,
        "wgrad.output_grad": 0, "wgrad.input": 0}

GemmRounders = dict[str, Rounder | None]
Product = Callable[[np.ndarray, np.ndarray], np.ndarray]


def gemm_rounders(quants: dict[str, Quant | None] | None, rng: np.random.Generator, *,
                  make: Callable[..., Rounder] | None = None,
                  axes: dict[str, int] | None = None) -> GemmRounders:
    """A rounder per GEMM operand (fresh state each), or None where it is read as stored.
    ``make(q, rng, axis, rotated=...)`` builds one (default :func:`make_rounder`);
    ``axes``: the reduction axes (default :data:`AXES`)."""
    make = make or make_rounder
    axes = axes or AXES
    out: GemmRounders = {}
    for op, axis in axes.items():
        q = (quants or {}).get(op)
        out[op] = None if q is None else make(q, rng, axis,
                                              rotated=q.scaling == "nvfp4_rht")
    return out


def _read(r: Rounder | None, x: np.ndarray) -> np.ndarray:
    return x if r is None else r(x)


def gemm(h: Tensor, w: Tensor, rounders: GemmRounders, product: Product | None = None
         ) -> Tensor:
    """``h @ w`` whose fprop, dgrad and wgrad GEMMs read their operands through
    ``rounders`` (module docstring); ``product`` is the matmul (float32 in k order by
    default, :mod:`lowprec._kernels.gemm`)."""
    mm = product or matmul_in_order
    out = Tensor(mm(_read(rounders["fprop.input"], h.data),
                    _read(rounders["fprop.weight"], w.data)), parents=(h, w), op="gemm")

    def gemm_backward(g: np.ndarray) -> None:
        if h.requires_grad:
            gd = _read(rounders["dgrad.output_grad"], g)
            h._add_grad(mm(gd, _read(rounders["dgrad.weight"], w.data).T))
        if w.requires_grad:
            gw = _read(rounders["wgrad.output_grad"], g)
            w._add_grad(mm(_read(rounders["wgrad.input"], h.data).T, gw))

    out._backward = gemm_backward
    return out
