"""The tensor-core block FMA of ``_kernels.matmul.hw_block``, vectorised across outputs.

For finite inputs and a rule with C aligned with the products (every chip but
Blackwell's FP8 ``mma.sync``), one row of outputs is computed at a time with the
output index innermost, so the compiler vectorises every step across outputs:

1. ``emax[j]``: the largest nominal exponent of C and the non-zero products
   (nominal exponents precomputed; a zero element's is far below any real one);
2. every product truncated at ``lsb = emax - frac_bits`` with one variable shift
   (``|p| << 32 >> (lsb - exp + 32)``: products have at most 22 bits, the shift
   left at most ``frac_bits - 2m`` <= 30), C truncated in float64 (exact);
3. the integer sum normalised into the hardware's precision with float64 bit
   operations: truncation (``rtz``) or round-to-nearest-even (``rne``) of the
   float64 value ``S * 2**lsb`` (exact: ``S`` has fewer than 53 bits).

A result outside the C/D format's normal range (subnormal, overflow) is
recomputed by the exact scalar engine (``_normalise``); the results are the
same bits as ``tensor_core_kernel``'s (``tests/test_tc_fast.py``).

``tc_grid`` runs the float64-lane twin of ``tc_rows`` (``tc_float.tcf_rows``:
products, truncations and block sums in float64, exact where ``tc_float.fits``
proves it, which every chip's rule does) and this int64 one elsewhere.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import tc_float
from .engine import convert_one, decode_one
from .matmul import _normalise, convert
from .params import NAN_IEEE, RNE, RTZ, FormatParams
from .tc_float import _add

_jit = njit(cache=True, nogil=True)
_U0 = np.uint64(0)
_FP32 = FormatParams(m=23, emin=-126, bias=127, max_mag=0x7F7FFFFF, sign_bit=1 << 31, has_inf=1,
                     nan_kind=NAN_IEEE, subnormals=1, exp_bits=8)
NO_EXP = -(1 << 20)  # nominal exponent of a zero element


@_jit
def nominal(sig, exp, m, emin):
    """Nominal exponents (zero elements: NO_EXP)."""
    out = np.empty(sig.shape, np.int64)
    for i in range(sig.shape[0]):
        for k in range(sig.shape[1]):
            out[i, k] = max(exp[i, k] + m, emin) if sig[i, k] != 0 else NO_EXP
    return out


@_jit
def tc_rows(Pc, Ph, Po, asig, aexp, anom, bsig, bexp, bnom, cc, mode, i0, i1, out, block,
            frac_bits, hw_rne, every, Pw):
    """Rows i0..i1 of ``out`` (M x N codes of Po); B given as (K, N) arrays.

    ``every > 0``: the accumulator restarts every ``every`` products and is added
    into a wide accumulator (format Pw, rounded in ``mode``) starting at C."""
    K = asig.shape[1]
    N = bsig.shape[1]
    drop = 52 - Ph.m  # float64 fraction bits below the hardware's precision
    low = (np.int64(1) << drop) - 1
    lo_e, hi_e = Pc.emin, (Pc.max_mag >> Pc.m) - Pc.bias  # C/D's normal range
    acc = np.empty(N, np.float64)
    emax = np.empty(N, np.int64)
    S = np.empty(N, np.int64)
    wide = np.empty(N, np.int64)
    step = every if every > 0 else max(K, 1)
    for i in range(i0, i1):
        for j in range(N):
            wide[j] = cc[i * N + j]
        for c0 in range(0, max(K, 1), step):
            c1 = min(c0 + step, K)
            for j in range(N):
                acc[j] = 0.0 if every > 0 else decode_one(Pc, wide[j])
            for k0 in range(c0, c1, block):
                k1 = min(k0 + block, c1)
                for j in range(N):  # C's nominal exponent
                    v = acc[j]
                    e = ((np.float64(v).view(np.int64) >> 52) & 0x7FF) - 1023
                    emax[j] = max(e, lo_e) if v != 0.0 and np.isfinite(v) else NO_EXP
                for k in range(k0, k1):
                    ea = anom[i, k]
                    brow = bnom[k]
                    for j in range(N):
                        emax[j] = max(emax[j], ea + brow[j])
                for j in range(N):  # C truncated at lsb (exact in float64)
                    lsb = emax[j] - frac_bits
                    sc = np.int64((1023 - lsb) << 52).view(np.float64)
                    S[j] = np.int64(acc[j] * sc) if emax[j] > NO_EXP // 2 else 0
                for k in range(k0, k1):
                    sa, xa = asig[i, k], aexp[i, k]
                    bs, bx = bsig[k], bexp[k]
                    for j in range(N):
                        p = sa * bs[j]
                        sh = emax[j] - frac_bits - xa - bx[j] + 32
                        sh = min(max(sh, 0), 63)
                        t = (abs(p) << 32) >> sh
                        mask = p >> 63
                        S[j] += (t ^ mask) - mask
                for j in range(N):
                    if emax[j] <= NO_EXP // 2 or not np.isfinite(acc[j]):
                        continue  # C + no non-zero product, or an inf C: C unchanged
                    lsb = emax[j] - frac_bits
                    v = np.float64(S[j]) * np.int64((1023 + lsb) << 52).view(np.float64)
                    bits = np.float64(v).view(np.int64)
                    e0 = ((bits >> 52) & 0x7FF) - 1023
                    if hw_rne:
                        bits = (bits + (low >> 1) + ((bits >> drop) & 1)) & ~low
                    else:
                        bits = bits & ~low
                    r = np.int64(bits).view(np.float64)
                    e = ((bits >> 52) & 0x7FF) - 1023
                    if S[j] == 0:
                        acc[j] = 0.0
                    elif e0 < lo_e or e > hi_e or lsb < -1000 or lsb > 1000:
                        code = _normalise(Ph, S[j], lsb, RNE if hw_rne else RTZ)
                        code = convert(Ph, Pc, code, RNE)[0]
                        acc[j] = decode_one(Pc, code)
                    else:
                        acc[j] = r
            for j in range(N):
                code = convert_one(Pc, np.float64(acc[j]).view(np.int64), True, RNE, False,
                                   False, _U0)[0]
                if every > 0:
                    part = convert(Pc, Pw, code, mode)[0]
                    wide[j] = _add(Pw, wide[j], part, mode)
                else:
                    wide[j] = code
        for j in range(N):
            out[i * N + j] = convert(Pw if every > 0 else Pc, Po, wide[j], mode)[0]


def tc_grid(Pi, Pc, Ph, Pw, Po, fin, asig, aexp, bsig, bexp, cc, mode, out, tc, every):
    """Every output of an M x N matmul (``bsig``, ``bexp``: B transposed, N x K) into
    ``out`` (M * N codes of Po, row-major), rows split among threads."""
    from concurrent.futures import ThreadPoolExecutor

    from .._runtime import _threads

    m, emin = fin.mantissa_bits, fin.emin
    M, N = asig.shape[0], bsig.shape[0]
    nt = max(1, min(_threads(), (M * N) // 4096, M))
    cuts = [M * t // nt for t in range(nt + 1)]
    hi_c = (Pc.max_mag >> Pc.m) - Pc.bias
    if tc_float.fits(m, emin, fin.emax, Pc.emin, hi_c, tc.block, tc.frac_bits):
        pdt = np.float32 if tc_float.narrow_powers(emin, fin.emax, Pc.emin, hi_c) else np.float64
        K = asig.shape[1]
        af, pa = np.empty((M, K)), np.empty((M, K), pdt)
        bf, pb = np.empty((K, N)), np.empty((K, N), pdt)
        tc_float.prep(asig, aexp, m, emin, False, af, pa)
        tc_float.prep(bsig, bexp, m, emin, True, bf, pb)
        w32 = every > 0 and mode == RNE and Pw == Pc == _FP32  # float32 adds are those adds

        def run(t: int) -> None:
            tc_float.tcf_rows(Pc, Ph, Po, Pw, af, pa, bf, pb, cc, mode, cuts[t], cuts[t + 1],
                              out, tc.block, tc.frac_bits, tc.hw_mode == "rne", every, w32)
    else:
        anom = nominal(asig, aexp, m, emin)
        bsig_t, bexp_t = np.ascontiguousarray(bsig.T), np.ascontiguousarray(bexp.T)
        bnom = nominal(bsig_t, bexp_t, m, emin)

        def run(t: int) -> None:
            tc_rows(Pc, Ph, Po, asig, aexp, anom, bsig_t, bexp_t, bnom, cc, mode, cuts[t],
                    cuts[t + 1], out, tc.block, tc.frac_bits, tc.hw_mode == "rne", every, Pw)

    if nt == 1:
        run(0)
    else:
        with ThreadPoolExecutor(max_workers=nt) as pool:
            list(pool.map(run, range(nt)))
