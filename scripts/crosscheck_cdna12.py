"""Cross-check lowprec's AMD CDNA1/2 models against Khattak & Mikaitis's MATLAB models.

Source: north-numerical-computing/MATLAB-tensor-core (BSD 2-Clause), files
``experiments/data/matmul_test_<in>_binary32_words_<p>_model_<chip>.dat``, written at
commit 0d3049f ("Update experiments", 2026-06-19) by ``experiments/experiments_CDNA.m``
and ``experiments/matmul_test_CDNA.m``; read at b12b5a7 (the stored mirror's HEAD).

What those files are: **outputs of the MATLAB models, not of a GPU.** Each row is
``n error bound``: ``error = norm(C - Ctrue, inf) / norm(A, inf) / norm(B, inf)`` for a
10 x n by n x 10 product ``C`` computed by ``MI100MC``/``MI250MC``/``MI300XMC``
(``%e``: 7 significant digits), ``bound`` a formula of n. The inputs are not stored;
the script regenerates them as MATLAB's ``rng(1)`` would (Mersenne Twister, seed 1;
numpy's ``RandomState(1)`` gives the same doubles; ``rand`` fills column-major,
``randi(2)`` taken as ``ceil(2 * rand)``), runs lowprec's ``mi100:mfma`` /
``mi250:mfma`` / ``mi300:mfma`` (``lp.matmul``) on them, and compares the printed
``error`` column string for string. ``words_1`` files only (one fp16/bf16 word, alpha = 1,
C = 0); the multi-word files chain alpha-scaled products.

Result (see docs/instructions.md, AMD section): only the n = 10 rows of the fp16 MI100
and bf16 MI300X files are reproduced; every other row was computed from inputs this
script does not regenerate (a different stream state), so the files cannot decide
between rules. The script therefore also restates the two MATLAB rules and compares
them with lowprec output by output, on the regenerated inputs (``--rule-nmax``):

* ``matlab_mi210_rule`` (MI210MC = MI250MC: ``pair_wise_sum = 1``, subnormals flushed):
  equal to lowprec's ``mi250:mfma`` bit for bit once K is zero-padded.
* ``matlab_mi100_rule`` (MI100MC: ``correct_rounding = 1``, each group's products and C
  summed exactly and rounded once, RNE): not lowprec's ``mi100:mfma`` (MMA-Sim's tree of
  FP32 roundings); they differ on part of the outputs.

GEMM.m pads K with zeros to a multiple of the group size (``fma``), as software must for
an MFMA, whose K is fixed. lowprec's CDNA1/2 short last group is not zero-padded
(``_pairwise`` splits 3 products as 1 + 2, a padded group of 4 as 2 + 2), so the script
pads A and B with zeros itself (``--no-pad``: compare unpadded).

    PYTHONPATH=$PWD python scripts/crosscheck_cdna12.py [--data DIR] [--nmax N] [--no-pad]

``--data``: a folder with the .dat files (default ``tests/data/matlab_amd``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

import lowprec as lp

M = Q = 10                 # A is M x n, B is n x Q
L = 10                     # elements 10**U(-L, L)
NLIST = [int(v) for v in np.floor(np.logspace(1, 6, 20))]
# MATLAB's informat -> (lowprec format, precision t, emin, emax); MI100MC's group size
FORMATS = {"binary16": ("fp16", 11, -14, 15), "bfloat16": ("bf16", 8, -126, 127)}
MI100_GROUP = {"binary16": 4, "bfloat16": 2}
FMAX32 = 2.0 ** 127 * (2 - 2 * 2.0 ** -24)


def read_dat(path: Path) -> list[tuple[int, str, str]]:
    """Rows (n, error as printed, bound as printed) of one matmul_test .dat file."""
    rows = []
    for line in path.read_text().splitlines()[1:]:
        n, err, bound = line.split()
        rows.append((int(n), err, bound))
    return rows


def previous_pow2(x: np.ndarray) -> np.ndarray:
    return 2.0 ** np.floor(np.log2(x))


class MatlabStream:
    """MATLAB's rand/randi under rng(1), from numpy's legacy Mersenne Twister."""

    def __init__(self, seed: int = 1) -> None:
        self.rs = np.random.RandomState(seed)

    def rand(self, r: int, c: int) -> np.ndarray:
        return self.rs.random_sample(r * c).reshape(c, r).T     # column-major fill

    def randi2(self, r: int, c: int) -> np.ndarray:
        return np.ceil(2 * self.rand(r, c))


def experiment_inputs(informat: str, nmax: int):
    """Yield (n, A, B, LA, BM, Linv, Minv) as matmul_test_CDNA.m makes them (p = 1)."""
    fmt, t, emin, emax = FORMATS[informat]
    fmax = 2.0 ** emax * (2 - 2 * 2.0 ** -t)
    s = MatlabStream(1)
    for n in NLIST:
        if n > nmax:
            return
        a = 10.0 ** (s.rand(M, n) * 2 * L - L)
        b = 10.0 ** (s.rand(n, Q) * 2 * L - L)
        a = a * (s.randi2(M, n) * 2 - 3)
        b = b * (s.randi2(n, Q) * 2 - 3)
        theta = min(fmax, math.sqrt(FMAX32 / n))
        lsc = previous_pow2(theta / np.abs(a).max(axis=1, keepdims=True))
        msc = previous_pow2(theta / np.abs(b).max(axis=0, keepdims=True))
        la = lp.round_to(lsc * a, fmt)
        bm = lp.round_to(b * msc, fmt)
        yield n, a, b, la, bm, 1 / lsc, 1 / msc


def err_string(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> str:
    ctrue = a @ b
    inf = lambda x: np.abs(x).sum(axis=1).max()  # noqa: E731  norm(x, 'inf')
    return f"{inf(c - ctrue) / inf(a) / inf(b):e}"


def pad(x: np.ndarray, axis: int, group: int) -> np.ndarray:
    k = x.shape[axis]
    extra = -k % group
    if not extra:
        return x
    width = [(0, 0), (0, 0)]
    width[axis] = (0, extra)
    return np.pad(x, width)


def _rne_f32(num: int, scale: int) -> float:
    """num * 2**-scale rounded to nearest even into FP32 (subnormals kept)."""
    if num == 0:
        return 0.0
    sign, mag = (-1 if num < 0 else 1), abs(num)
    top = mag.bit_length() - 1 - scale          # exponent of the leading bit
    keep = max(top, -126) - 23                  # exponent of the last kept bit
    drop = -scale - keep                        # negative: bits to drop
    if drop < 0:
        q, r = divmod(mag, 1 << -drop)
        half = 1 << (-drop - 1)
        if r > half or (r == half and q & 1):
            q += 1
        return sign * math.ldexp(q, keep)
    return sign * math.ldexp(mag, -scale)


def matlab_mi100_rule(la: np.ndarray, bm: np.ndarray, group: int) -> np.ndarray:
    """MI100MC (correct_rounding = 1) on finite inputs: each group of ``group`` products
    (K zero-padded) and the running C summed exactly, rounded once, RNE to FP32."""
    scale = 400                                  # every product and FP32 value is k * 2**-400
    ka = [[int(math.ldexp(v, 200)) for v in row] for row in la.tolist()]
    kb = [[int(math.ldexp(v, 200)) for v in col] for col in bm.T.tolist()]
    out = np.empty((la.shape[0], bm.shape[1]))
    for i, ra in enumerate(ka):
        for j, cb in enumerate(kb):
            c = 0.0
            for lo in range(0, len(ra), group):
                s = sum(x * y for x, y in zip(ra[lo:lo + group], cb[lo:lo + group]))
                s += int(math.ldexp(c, scale))
                c = _rne_f32(s, scale)
            out[i, j] = c
    return out


def _flush32(x: np.ndarray) -> np.ndarray:
    """FP32 values below 2**-126 in magnitude to a zero of their sign (x * 0)."""
    return np.where(np.abs(x) < np.float32(2.0 ** -126), x * np.float32(0), x)


def matlab_mi210_rule(la: np.ndarray, bm: np.ndarray, emin_in: int) -> np.ndarray:
    """MI210MC / MI250MC (pair_wise_sum = 1, in/out_subnormals = 0) restated on finite
    inputs: K zero-padded to groups of 4; a product whose a or b is below
    ``2**emin_in`` is 0; products ``single(a * b)``, those below 2**-126 to +0; C below
    2**-126 to +0; the group's tree ``(p1 + p2) + (p3 + p4)`` and then ``C + tree`` in
    FP32 (RNE), every node and the accumulator below 2**-126 to a zero of its sign."""
    tiny = 2.0 ** -126
    la, bm = pad(la, 1, 4), pad(bm, 0, 4)
    acc = np.zeros((la.shape[0], bm.shape[1]), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, la.shape[1], 4):
            p = []
            for k in range(lo, lo + 4):
                a, b = la[:, k:k + 1], bm[k:k + 1, :]
                keep = (np.abs(a) >= 2.0 ** emin_in) & (np.abs(b) >= 2.0 ** emin_in)
                prod = np.float32(np.where(keep, a, 0.0) * np.where(keep, b, 0.0))
                p.append(np.where(np.abs(prod) < tiny, np.float32(0), prod))
            tree = _flush32(_flush32(p[0] + p[1]) + _flush32(p[2] + p[3]))
            acc = _flush32(np.where(np.abs(acc) < tiny, np.float32(0), acc) + tree)
    return acc


def _count(counts: dict[str, tuple[int, int]], key: str, ok: int, tot: int = 1) -> None:
    have = counts.get(key, (0, 0))
    counts[key] = (have[0] + int(ok), have[1] + tot)


def _bits_equal(x: np.ndarray, y: np.ndarray) -> tuple[int, int]:
    """(outputs with equal FP32 bits, outputs)."""
    bx = np.asarray(x, dtype=np.float32).view(np.uint32)
    by = np.asarray(y, dtype=np.float32).view(np.uint32)
    return int((bx == by).sum()), bx.size


def run(data: Path, nmax: int, rule_nmax: int, padded: bool) -> dict[str, tuple[int, int]]:
    counts: dict[str, tuple[int, int]] = {}
    for informat in FORMATS:
        fmt = FORMATS[informat][0]
        files = {chip: data / f"matmul_test_{informat}_binary32_words_1_model_{chip}.dat"
                 for chip in ("mi100", "mi250", "mi300x")}
        want = {chip: {n: e for n, e, _ in read_dat(f)} for chip, f in files.items()
                if f.exists()}
        print(f"\n{informat} (lowprec {fmt}), words_1; printed error: file / lowprec")
        print(f"{'n':>7} | {'MI100MC':>12} {'mi100:mfma':>12} {'MI100 rule':>12} | "
              f"{'MI250MC':>12} {'mi250:mfma':>12} | {'MI300XMC':>12} {'mi300:mfma':>12}")
        for n, a, b, la, bm, linv, minv in experiment_inputs(informat, nmax):
            got, outs = {}, {}
            for chip, model, grp in (("mi100", "mi100:mfma", MI100_GROUP[informat]),
                                     ("mi250", "mi250:mfma", 4), ("mi300x", "mi300:mfma", 8)):
                x, y = (pad(la, 1, grp), pad(bm, 0, grp)) if padded else (la, bm)
                outs[chip] = lp.matmul(x, y, inputs=fmt, model=model)
                got[chip] = err_string(linv * outs[chip].astype(np.float64) * minv, a, b)
            rule = "-"
            if n <= rule_nmax:
                d = matlab_mi100_rule(la, bm, MI100_GROUP[informat])
                rule = err_string(linv * d * minv, a, b)
                _count(counts, f"{informat} MI100 rule vs MI100MC file", rule == want["mi100"].get(n))
                _count(counts, f"{informat} lowprec mi100 vs MI100 rule (outputs, bits)",
                       *_bits_equal(outs["mi100"], d))
                d2 = matlab_mi210_rule(la, bm, FORMATS[informat][2])
                _count(counts, f"{informat} lowprec mi250 vs MI210 rule (outputs, bits)",
                       *_bits_equal(outs["mi250"], d2))
            for chip in got:
                if chip in want:
                    _count(counts, f"{informat} {chip} lowprec vs file",
                           got[chip] == want[chip].get(n))
            print(f"{n:>7} | {want['mi100'].get(n, '?'):>12} {got['mi100']:>12} {rule:>12} | "
                  f"{want['mi250'].get(n, '?'):>12} {got['mi250']:>12} | "
                  f"{want.get('mi300x', {}).get(n, '?'):>12} {got['mi300x']:>12}")
            sys.stdout.flush()
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path,
                    default=Path(__file__).resolve().parent.parent / "tests/data/matlab_amd")
    ap.add_argument("--nmax", type=int, default=10**6, help="largest n to run")
    ap.add_argument("--rule-nmax", type=int, default=1274,
                    help="largest n for the (slow, exact) MATLAB MI100 rule")
    ap.add_argument("--no-pad", action="store_true", help="do not zero-pad K")
    args = ap.parse_args()
    counts = run(args.data, args.nmax, args.rule_nmax, not args.no_pad)
    print("\nprinted error equal (7 significant digits):")
    for key, (ok, tot) in counts.items():
        print(f"  {key}: {ok} / {tot}")


if __name__ == "__main__":
    main()
