"""gemm_fp8.cu's mma.sync kernel, modelled on the CPU: its fragment loads against the PTX
ISA's fragment layout for mma.m16n8k32 with 8-bit inputs, and its C chaining against
lowprec.matmul's chained tensor-core models. No GPU needed.

Finding (issue 38, item 4): the loads put every element where the PTX ISA says
mma.m16n8k32 expects it, the stores read C back from the documented places, and the
k-blocks chain in order (each block's D is the next one's C) -- so the kernel is not what
makes the H200's HMMA results differ from the FP8 model. On sm_90 ptxas lowers this
mma.sync to HMMA.16816.F32 (the FP16 tensor-core path; SASS in
docs/hardware/h200-2026-12-04-log.txt), which needs its own model. The simplest one,
Hopper's FP16 rule on the (exactly converted) FP8 values, is ruled out below by the
record's own statistics; validate --gpu now searches tensor_core parameters for it.
"""

from __future__ import annotations

import numpy as np

import lowprec as lp
from lowprec.gpu import KERNEL_DIR

SRC = (KERNEL_DIR / "gemm_fp8.cu").read_text()


def _kernel_loads(A: np.ndarray, B: np.ndarray, row0: int, col0: int, k0: int):
    """Per lane, the four A and two B registers as gemm_fp8.cu builds them (bytes, low k
    first): a port of the kernel's index arithmetic."""
    regs = []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        a_lo, a_hi = A[row0 + g, k0 + 4 * t:], A[row0 + g + 8, k0 + 4 * t:]
        a = [a_lo[0:4], a_hi[0:4], a_lo[16:20], a_hi[16:20]]
        bc = B[k0 + 4 * t:, col0 + g]
        b = [bc[0:4], bc[16:20]]
        regs.append((a, b))
    return regs


def _ptx_a(lane: int, i: int) -> tuple[int, int]:
    """PTX ISA, mma.m16n8k32 A fragment (.e4m3/.e5m2): element a_i of a lane -> (row, col)."""
    g, t = lane >> 2, lane & 3
    row = g if (i < 4 or 8 <= i < 12) else g + 8
    col = 4 * t + (i & 3) + (16 if i >= 8 else 0)
    return row, col


def _ptx_b(lane: int, i: int) -> tuple[int, int]:
    """B fragment: element b_i -> (row = k, col = n)."""
    g, t = lane >> 2, lane & 3
    return 4 * t + (i & 3) + (16 if i >= 4 else 0), g


def _ptx_c(lane: int, i: int) -> tuple[int, int]:
    g, t = lane >> 2, lane & 3
    return g + (8 if i >= 2 else 0), 2 * t + (i & 1)


def test_the_port_follows_the_source():
    """The index expressions ported above are the kernel's (a change there fails here)."""
    for expr in ("A + (size_t)(row0 + g) * K + k0 + 4 * t",
                 "A + (size_t)(row0 + g + 8) * K + k0 + 4 * t",
                 "lp_pack4(a_lo[16], a_lo[17], a_lo[18], a_lo[19])",
                 "B + (size_t)(k0 + 4 * t) * N + col0 + g",
                 "lp_pack4(bc[16 * N], bc[17 * N], bc[18 * N], bc[19 * N])",
                 "c_lo[0] = c0; c_lo[1] = c1; c_hi[0] = c2; c_hi[1] = c3;",
                 "C + (size_t)(row0 + g + 8) * N + col0 + 2 * t",
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}"):
        assert expr in " ".join(SRC.split()), expr


def test_fragments_rebuild_every_tile_exactly():
    rng = np.random.default_rng(0)
    M, N, K = 32, 16, 64
    A = rng.integers(0, 256, size=(M, K))
    B = rng.integers(0, 256, size=(K, N))
    for row0 in (0, 16):
        for col0 in (0, 8):
            for k0 in (0, 32):
                ta, tb = np.full((16, 32), -1), np.full((32, 8), -1)
                for lane, (a, b) in enumerate(_kernel_loads(A, B, row0, col0, k0)):
                    for i in range(16):
                        r, c = _ptx_a(lane, i)
                        assert ta[r, c] == -1  # each element delivered once
                        ta[r, c] = a[i // 4][i % 4]
                    for i in range(8):
                        r, c = _ptx_b(lane, i)
                        assert tb[r, c] == -1
                        tb[r, c] = b[i // 4][i % 4]
                assert np.array_equal(ta, A[row0:row0 + 16, k0:k0 + 32])
                assert np.array_equal(tb, B[k0:k0 + 32, col0:col0 + 8])
    # C: the four accumulators of the 32 lanes cover the 16x8 tile once, where stored.
    seen = {_ptx_c(lane, i) for lane in range(32) for i in range(4)}
    assert seen == {(r, c) for r in range(16) for c in range(8)}


def test_k_blocks_chain_like_the_models():
    """The kernel's loop (D of k-block j is C of k-block j+1) equals lowprec.matmul's own
    chaining over the whole K, for the FP8 rule and for Hopper's FP16 rule."""
    from lowprec.matmul import H100

    rng = np.random.default_rng(1)
    a = lp.round_to(rng.standard_normal((16, 128)) * 4, "fp8_e4m3", saturate=True)
    b = lp.round_to(rng.standard_normal((128, 8)) * 4, "fp8_e4m3", saturate=True)
    for model in ("h100", H100.rule("fp16")):
        d = np.zeros((16, 8))
        for k0 in range(0, 128, 32):
            d = lp.matmul(a[:, k0:k0 + 32], b[k0:k0 + 32], d, inputs="fp8_e4m3", model=model)
        whole = lp.matmul(a, b, inputs="fp8_e4m3", model=model)
        assert np.array_equal(d, whole), model


def test_hmma_is_not_hoppers_fp16_rule_on_fp8_values():
    """H200 record, mma.sync E4M3 at 16x8x32 on validate's operands: the GPU equalled the
    exact sum (rounded once) on 59% of the outputs and the FP8 rule on 0-2. Hopper's FP16
    rule (16-product blocks, 25 fraction bits) on the same kind of operands equals the
    exact sum on over 90% of them: that model is not what HMMA does with FP8 inputs."""
    from lowprec import _validate_gemm as G
    from lowprec.formats import get_format
    from lowprec.matmul import H100

    f = get_format("fp8_e4m3")
    same = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        a = lp.decode(G.operands(f, (16, 32), rng), f)
        b = lp.decode(G.operands(f, (32, 8), rng), f)
        fp16_rule = lp.matmul(a, b, inputs="fp8_e4m3", model=H100.rule("fp16"))
        same.append((fp16_rule == lp.matmul(a, b, inputs="fp8_e4m3", model="exact")).mean())
    assert np.mean(same) > 0.9 > 0.59
