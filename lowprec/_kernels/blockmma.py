"""Compiled kernel of ``lowprec.blockmma``: Blackwell block-scaled MMA, bit for bit.

Operands arrive unpacked: element significands ``asig`` (signed, 0 for zero)
and lsb exponents ``aexp`` (value = sig * 2**exp), nominal exponents ``anom``
(the element's exponent clamped to its format's emin, as in
``_kernels.matmul.hw_block``), and per block of K a scale significand ``ssig``
(1 for E8M0) with lsb exponent ``sexp`` and nominal exponent ``snom``. A scale
code that is NaN has ``ssig = -1``.

``kind = 0`` (``mxf8f6f4``, k = 32): every product with its scales' exponents is a
term; ``kind = 1`` (``mxf4nvf4``, k = 64): each group of 16 products is summed
exactly and multiplied by its scales, its nominal exponent being the scales'.
Terms and C are aligned to the largest nominal exponent, truncated to
``frac_bits`` fraction bits below it, summed exactly and normalised once into
FP32 toward zero; instruction after instruction along K, each D the next C.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .arith import FINITE, INF, QNAN, finish, inf_result, nan_result, unpack
from .matmul import _normalise, _truncate
from .params import RNE, RTZ

_jit = njit(cache=True, nogil=True)
_U0 = np.uint64(0)
_NONE = -(1 << 40)


@_jit
def _nan(Pc):
    return finish(Pc, nan_result(0), RNE, False, False, _U0)[0]


@_jit
def block_mma_kernel(Pc, asig, aexp, anom, bsig, bexp, bnom, aspec, bspec, sa_sig, sa_exp,
                     sa_nom, sb_sig, sb_exp, sb_nom, block, kind, k_instr, frac_bits, ia, ib,
                     cc, n0, n1, out):
    """Outputs n0..n1: row ia[n] of A, row ib[n] of B (B transposed), C code cc[n].

    ``aspec``/``bspec``: 0 finite, 1 +inf, 2 -inf, 3 NaN for every element."""
    K = asig.shape[1]
    for n in range(n0, n1):
        i, j = ia[n], ib[n]
        acc = cc[n]
        for k0 in range(0, K, k_instr):
            k1 = min(k0 + k_instr, K)
            kc, nc, sc, ec = unpack(Pc, acc)
            # NaN and inf: a NaN scale or operand, inf * 0, infinities of both signs.
            st = 3 if kc >= QNAN else (0 if kc != INF else (2 if nc else 1))
            for k in range(k0, k1):
                if sa_sig[i, k // block] < 0 or sb_sig[j, k // block] < 0:
                    st = 3
                    break
                xa, xb = aspec[i, k], bspec[j, k]
                if xa == 0 and xb == 0:
                    continue
                if xa == 3 or xb == 3 or (xa != 0 and bsig[j, k] == 0 and xb == 0) or (
                        xb != 0 and asig[i, k] == 0 and xa == 0):
                    st = 3
                    break
                na = (xa == 2) if xa != 0 else asig[i, k] < 0
                nb = (xb == 2) if xb != 0 else bsig[j, k] < 0
                s = 2 if na != nb else 1
                if st != 0 and st != s:
                    st = 3
                    break
                st = s
            if st == 3:
                acc = _nan(Pc)
                continue
            if st != 0:
                acc = finish(Pc, inf_result(st == 2, 0), RNE, False, False, _U0)[0]
                continue
            emax = _NONE
            if kc == FINITE:
                emax = max(ec + Pc.m, Pc.emin)
            if kind == 0:
                for k in range(k0, k1):
                    if asig[i, k] * bsig[j, k] != 0:
                        g = k // block
                        e = anom[i, k] + bnom[j, k] + sa_nom[i, g] + sb_nom[j, g]
                        emax = max(emax, e)
            else:
                for g0 in range(k0, k1, 16):
                    g = g0 // block
                    emax = max(emax, sa_nom[i, g] + sb_nom[j, g])
            if emax == _NONE:
                continue  # C + no non-zero product: C unchanged (a -0 stays)
            lsb = emax - frac_bits
            S = np.int64(0)
            if kc == FINITE:
                t = _truncate(sc, ec, lsb)
                S += -t if nc else t
            if kind == 0:
                for k in range(k0, k1):
                    p = asig[i, k] * bsig[j, k]
                    if p != 0:
                        g = k // block
                        t = _truncate(abs(p) * sa_sig[i, g] * sb_sig[j, g],
                                      aexp[i, k] + bexp[j, k] + sa_exp[i, g] + sb_exp[j, g],
                                      lsb)
                        S += -t if p < 0 else t
            else:
                for g0 in range(k0, k1, 16):
                    # The group's exact sum at the smallest lsb of its products.
                    base = 1 << 20
                    for k in range(g0, min(g0 + 16, k1)):
                        if asig[i, k] * bsig[j, k] != 0:
                            base = min(base, aexp[i, k] + bexp[j, k])
                    if base == 1 << 20:
                        continue
                    G = np.int64(0)
                    for k in range(g0, min(g0 + 16, k1)):
                        p = asig[i, k] * bsig[j, k]
                        if p != 0:
                            G += p << (aexp[i, k] + bexp[j, k] - base)
                    if G == 0:
                        continue
                    g = g0 // block
                    t = _truncate(abs(G) * sa_sig[i, g] * sb_sig[j, g],
                                  base + sa_exp[i, g] + sb_exp[j, g], lsb)
                    S += -t if G < 0 else t
            acc = _normalise(Pc, S, lsb, RTZ)
        out[n] = acc
