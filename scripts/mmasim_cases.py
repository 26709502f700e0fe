"""Run MMA-Sim on the large vector set and store digests of its outputs.

MMA-Sim (microsoft/MMA-Sim, arXiv 2511.10909) is not part of lowprec and none of it is
committed: this script exports a git mirror of it to a temporary directory, runs its
simulators on the inputs of ``tests/mmasim_inputs.py`` (splitmix64 from a seed; about
10^5 dot products per instruction and type) and stores, per key, the sha256 digest of
every 256 outputs (FP32 bit patterns, NaN canonical) and the first 2048 outputs whole,
with MMA-Sim's commit, the seed, the generator version and the wall time MMA-Sim took::

    python scripts/mmasim_cases.py [--mirror GIT_DIR] [--keys k1,k2] [--jobs 2]
    python scripts/mmasim_cases.py --case wgmma_f16_e4m3 123456   # one case, for diagnosis

(needs torch; GIT_DIR defaults to /work/.mirror/microsoft+MMA-Sim/repo, the commit must be
c785138...). Keys already in the file are kept unless named again.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import mmasim_inputs as mc  # noqa: E402

OUT = ROOT / "tests" / "data" / "mmasim_cases.npz"


def _op(key: mc.Key):
    if key.sim == "mfma":
        from mmasim.simulator.amd import mfma
        op = mfma(key.arch, key.qual)
    else:
        from mmasim.simulator import nv_ptx
        op = getattr(nv_ptx, key.sim)(key.arch, key.qual)
    return op


def run_key(key: mc.Key, lo: int, hi: int) -> np.ndarray:
    """MMA-Sim's outputs (canonical FP32 bits) of cases lo..hi-1 of ``key``."""
    import torch

    op = _op(key)
    if key.skind:  # whole m128 n8 tiles
        a, b, c, sa, sb = mc.cases(key, hi)
        t0, t1 = lo // 1024, -(-hi // 1024)
        sdt = torch.float8_e8m0fnu if key.skind == "e8m0" else torch.float8_e4m3fn
        out = []
        for t in range(t0, t1):
            if key.fmt == "fp4_e2m1":
                A = torch.tensor(a[t][:, 0::2] | (a[t][:, 1::2] << 4))
                B = torch.tensor(b[t][0::2] | (b[t][1::2] << 4))
            else:
                A = torch.tensor(a[t], dtype=torch.float32).to(op.a_type)
                B = torch.tensor(b[t], dtype=torch.float32).to(op.b_type)
            D = op(A, B, torch.tensor(c[t], dtype=torch.float32),
                   torch.tensor(sa[t]).view(sdt), torch.tensor(sb[t]).view(sdt))
            out.append(D.to(torch.float64).numpy().ravel())
        return mc.canonical_bits(np.concatenate(out))[lo - t0 * 1024:hi - t0 * 1024]
    a, b, c = mc.cases(key, hi)
    op.m = op.n = 1  # one dot product per call: the rule is per output
    d = np.empty(hi - lo)
    for i in range(lo, hi):
        A = torch.tensor(a[i:i + 1], dtype=torch.float32).to(op.a_type)
        B = torch.tensor(b[i:i + 1].T.copy(), dtype=torch.float32).to(op.b_type)
        C = torch.tensor([[c[i]]], dtype=torch.float32).to(op.c_type)
        d[i - lo] = op(A, B, C)[0, 0].to(torch.float64).item()
    return mc.canonical_bits(d)


def _work(args: tuple[str, str, int, int]) -> np.ndarray:
    src, name, lo, hi = args
    if src not in sys.path:
        sys.path.insert(0, src)
    return run_key(mc.KEYS[name], lo, hi)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", default="/work/.mirror/microsoft+MMA-Sim/repo")
    ap.add_argument("--keys", default="", help="comma-separated keys (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--n", type=int, default=0, help="fewer cases per key (a trial; not stored)")
    ap.add_argument("--case", nargs=2, metavar=("KEY", "INDEX"), help="print one case")
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "--git-dir", args.mirror, "rev-parse", "HEAD"],
                            check=True, capture_output=True, text=True).stdout.strip()
    names = [k for k in args.keys.split(",") if k] or list(mc.KEYS)
    with tempfile.TemporaryDirectory() as tmp:
        tar = subprocess.run(["git", "--git-dir", args.mirror, "archive", "HEAD", "mmasim"],
                             check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        sys.path.insert(0, tmp)
        if args.case:
            key, i = mc.KEYS[args.case[0]], int(args.case[1])
            got = run_key(key, i, i + 1)[0]
            print(f"{key.name} case {i}: MMA-Sim {commit[:7]} gives 0x{int(got):08x} "
                  f"({float(np.uint32(got).view(np.float32))!r})")
            return 0
        store = dict(np.load(OUT)) if OUT.exists() and not args.n else {}
        from concurrent.futures import ProcessPoolExecutor

        for name in names:
            key = mc.KEYS[name]
            n = args.n or key.n
            step = 1024 * max(1, -(-n // (1024 * 8 * args.jobs)))  # tile-aligned parts
            parts = [(tmp, name, lo, min(n, lo + step)) for lo in range(0, n, step)]
            t = time.time()
            if args.jobs > 1:
                with ProcessPoolExecutor(args.jobs) as pool:
                    bits = np.concatenate(list(pool.map(_work, parts)))
            else:
                bits = np.concatenate([_work(p) for p in parts])
            wall = time.time() - t
            print(f"{name}: {n} cases, MMA-Sim {wall:.1f} s wall ({args.jobs} jobs)", flush=True)
            if args.n:  # a trial: the outputs go to the temporary folder, not the store
                trial = Path(tempfile.gettempdir()) / f"mmasim-trial-{name}.npy"
                np.save(trial, bits)
                print(f"  {trial}")
                continue
            store[f"{name}/digest"] = mc.digests(bits)
            store[f"{name}/head"] = bits[:mc.HEAD]
            store[f"{name}/n"] = np.array(n)
            store[f"{name}/seconds"] = np.array(round(wall, 1))
            store[f"{name}/jobs"] = np.array(args.jobs)
            store[f"{name}/instruction"] = np.array(f"{key.sim}:{key.arch}:{key.qual}")
            store.update(commit=np.array(commit), seed=np.array(mc.SEED),
                         version=np.array(mc.VERSION), chunk=np.array(mc.CHUNK))
            np.savez_compressed(OUT, **store)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
