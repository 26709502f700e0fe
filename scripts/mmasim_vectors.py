"""Test vectors from MMA-Sim's own Python, for tests/test_instructions.py.

MMA-Sim (microsoft/MMA-Sim, arXiv 2511.10909) is not part of lowprec: fetch it,
point ``--mmasim`` at its checkout, and this script runs its simulators on random
and adversarial inputs and stores inputs and outputs (bit patterns) with the
commit they came from::

    git clone https://github.com/microsoft/MMA-Sim /tmp/mmasim   # commit c785138
    python scripts/mmasim_vectors.py --mmasim /tmp/mmasim --commit c785138 \\
        --out tests/data/mmasim_vectors.npz

Inputs avoid zero elements: MMA-Sim lets a zero product take part in the
alignment, lowprec does not (../shared/hardware/mma-probes.md); that class is
documented, not averaged in. Each instruction gets ``--calls`` calls of its full
m x n tile (every output one dot product of the instruction's k).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

# (key, MMA-Sim class, arch, qualifier, lowprec model, element format, output)
PLAIN = [
    ("wgmma_f16_e4m3", "wgmma", "Hopper", "m64n8k32.f16.e4m3.e4m3", "h100:wgmma",
     "fp8_e4m3", "fp16"),
    ("wgmma_f32_e5m2", "wgmma", "Hopper", "m64n8k32.f32.e5m2.e5m2", "h100:wgmma",
     "fp8_e5m2", "fp32"),
    ("tcgen05_f32_e4m3", "tcgen05mma", "Blackwell", "m64n8k32.f32.e4m3.e4m3", "b200:tcgen05",
     "fp8_e4m3", "fp32"),
    ("tcgen05_f16_e5m2", "tcgen05mma", "Blackwell", "m64n8k32.f16.e5m2.e5m2", "b200:tcgen05",
     "fp8_e5m2", "fp16"),
]
# (key, arch, qualifier, element format, scale kind, block)
SCALED = [
    ("bs_mxf8f6f4_e4m3", "Blackwell", "m128n8k32.block32.f32.e4m3.e4m3.ue8m0", "fp8_e4m3",
     "e8m0", 32),
    ("bs_mxf8f6f4_e5m2", "Blackwell", "m128n8k32.block32.f32.e5m2.e5m2.ue8m0", "fp8_e5m2",
     "e8m0", 32),
]

# (key, qualifier, scale kind, block): E2M1 elements given as codes (a and b hold codes)
FP4 = [
    ("bs_mxf4nvf4_ue4m3_16", "m128n8k64.block16.f32.e2m1.e2m1.ue4m3", "ue4m3", 16),
    ("bs_mxf4nvf4_e8m0_32", "m128n8k64.block32.f32.e2m1.e2m1.ue8m0", "e8m0", 32),
]


def _values(rng: np.random.Generator, shape: tuple[int, ...], fmt: str) -> np.ndarray:
    """Non-zero values of fmt: normal draws, wide exponents, subnormals, the largest."""
    import lowprec as lp

    f = lp.get_format(fmt)
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-4, 4, shape)
    wide = rng.random(shape) < 0.15
    x[wide] *= 2.0 ** rng.integers(f.emin - f.mantissa_bits, f.emax, int(wide.sum()))
    big = rng.random(shape) < 0.02
    x[big] = np.sign(x[big]) * f.max
    v = lp.round_to(x, fmt, saturate=True)
    v[v == 0] = f.smallest_subnormal
    return v


def _c_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    c = rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 12, shape)
    c[rng.random(shape) < 0.2] = 0.0
    return c.astype(np.float32).astype(np.float64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mmasim", required=True, help="checkout of microsoft/MMA-Sim")
    ap.add_argument("--commit", required=True, help="its commit (stored with the vectors)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--seed", type=int, default=37)
    args = ap.parse_args()
    sys.path.insert(0, args.mmasim)
    import torch
    from mmasim.simulator import nv_ptx as sim

    rng = np.random.default_rng(args.seed)
    store: dict[str, np.ndarray] = {"commit": np.array(args.commit)}
    tdt = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
    for key, cls, arch, qual, model, fmt, out in PLAIN:
        op = getattr(sim, cls)(arch, qual)
        As, Bs, Cs, Ds = [], [], [], []
        for _ in range(args.calls):
            A = _values(rng, (op.m, op.k), fmt)
            B = _values(rng, (op.k, op.n), fmt)
            C = _c_values(rng, (op.m, op.n))
            cdt = torch.float16 if out == "fp16" else torch.float32
            Ct = torch.tensor(C, dtype=torch.float32).to(cdt)
            D = op(torch.tensor(A, dtype=torch.float32).to(tdt[fmt]),
                   torch.tensor(B, dtype=torch.float32).to(tdt[fmt]), Ct)
            for i in range(op.m):
                for j in range(op.n):
                    As.append(A[i])
                    Bs.append(B[:, j])
            Cs.append(Ct.to(torch.float64).numpy().ravel())
            Ds.append(D.to(torch.float64).numpy().ravel())
        store[f"{key}/a"] = np.array(As, np.float32)
        store[f"{key}/b"] = np.array(Bs, np.float32)
        store[f"{key}/c"] = np.concatenate(Cs).astype(np.float32)
        store[f"{key}/d"] = np.concatenate(Ds).astype(np.float32)
        store[f"{key}/meta"] = np.array([model, fmt, out, f"{cls}:{arch}:{qual}"])
        print(key, len(As), "cases", flush=True)
    for key, arch, qual, fmt, skind, block in SCALED:
        op = sim.tcgen05mma_block_scale(arch, qual)
        As, Bs, Cs, Ds, SAs, SBs = [], [], [], [], [], []
        for _ in range(args.calls):
            A = _values(rng, (op.m, op.k), fmt)
            B = _values(rng, (op.k, op.n), fmt)
            C = _c_values(rng, (op.m, op.n))
            ea = rng.integers(127 - 40, 127 + 40, (op.m, op.k // block))
            eb = rng.integers(127 - 40, 127 + 40, (op.k // block, op.n))
            sa = torch.tensor(2.0 ** (ea - 127.0), dtype=torch.float32).to(torch.float8_e8m0fnu)
            sb = torch.tensor(2.0 ** (eb - 127.0), dtype=torch.float32).to(torch.float8_e8m0fnu)
            D = op(torch.tensor(A, dtype=torch.float32).to(tdt[fmt]),
                   torch.tensor(B, dtype=torch.float32).to(tdt[fmt]),
                   torch.tensor(C, dtype=torch.float32), sa, sb)
            for i in range(op.m):
                for j in range(op.n):
                    As.append(A[i])
                    Bs.append(B[:, j])
                    SAs.append(ea[i])
                    SBs.append(eb[:, j])
            Cs.append(C.ravel())
            Ds.append(D.to(torch.float64).numpy().ravel())
        store[f"{key}/a"] = np.array(As, np.float32)
        store[f"{key}/b"] = np.array(Bs, np.float32)
        store[f"{key}/sa"] = np.array(SAs, np.uint8)
        store[f"{key}/sb"] = np.array(SBs, np.uint8)
        store[f"{key}/c"] = np.concatenate(Cs).astype(np.float32)
        store[f"{key}/d"] = np.concatenate(Ds).astype(np.float32)
        store[f"{key}/meta"] = np.array(["b200", fmt, "fp32", f"tcgen05mma_block_scale:{arch}:"
                                         f"{qual}", skind, str(block)])
        print(key, len(As), "cases", flush=True)
    for key, qual, skind, block in FP4:
        op = sim.tcgen05mma_block_scale("Blackwell", qual)
        As, Bs, Cs, Ds, SAs, SBs = [], [], [], [], [], []
        for _ in range(args.calls):
            A = rng.integers(0, 16, (op.m, op.k)).astype(np.uint8)   # E2M1 codes
            B = rng.integers(0, 16, (op.k, op.n)).astype(np.uint8)
            C = _c_values(rng, (op.m, op.n))
            nb = op.k // block
            if skind == "e8m0":
                ea = rng.integers(127 - 30, 127 + 30, (op.m, nb))
                eb = rng.integers(127 - 30, 127 + 30, (nb, op.n))
                sa = torch.tensor(ea.astype(np.uint8)).view(torch.float8_e8m0fnu)
                sb = torch.tensor(eb.astype(np.uint8)).view(torch.float8_e8m0fnu)
            else:  # UE4M3: positive codes, NaN (0x7F) left out
                ea = rng.integers(0, 0x7F, (op.m, nb))
                eb = rng.integers(0, 0x7F, (nb, op.n))
                sa = torch.tensor(ea.astype(np.uint8)).view(torch.float8_e4m3fn)
                sb = torch.tensor(eb.astype(np.uint8)).view(torch.float8_e4m3fn)
            pa = torch.tensor(A[:, 0::2] | (A[:, 1::2] << 4))
            pb = torch.tensor(B[0::2] | (B[1::2] << 4))
            D = op(pa, pb, torch.tensor(C, dtype=torch.float32), sa, sb)
            for i in range(op.m):
                for j in range(op.n):
                    As.append(A[i])
                    Bs.append(B[:, j])
                    SAs.append(ea[i])
                    SBs.append(eb[:, j])
            Cs.append(C.ravel())
            Ds.append(D.to(torch.float64).numpy().ravel())
        store[f"{key}/a"] = np.array(As, np.uint8)
        store[f"{key}/b"] = np.array(Bs, np.uint8)
        store[f"{key}/sa"] = np.array(SAs, np.uint8)
        store[f"{key}/sb"] = np.array(SBs, np.uint8)
        store[f"{key}/c"] = np.concatenate(Cs).astype(np.float32)
        store[f"{key}/d"] = np.concatenate(Ds).astype(np.float32)
        store[f"{key}/meta"] = np.array(["b200", "fp4_e2m1", "fp32", f"tcgen05mma_block_scale:"
                                         f"Blackwell:{qual}", skind, str(block)])
        print(key, len(As), "cases", flush=True)
    np.savez_compressed(args.out, **store)
    return 0


if __name__ == "__main__":
    sys.exit(main())
