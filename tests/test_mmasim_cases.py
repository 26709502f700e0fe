"""lowprec's instruction models against 10^5 MMA-Sim dot products per instruction and type.

The inputs are regenerated here from a seed (tests/mmasim_inputs.py); MMA-Sim's outputs
(microsoft/MMA-Sim c785138, run by scripts/mmasim_cases.py) are stored as sha256 digests
of every 256 outputs plus the first 2048 outputs whole (tests/data/mmasim_cases.npz).
Every key is compared bit for bit (NaN canonical); a failure names the first chunk that
differs and, in the stored head, the first case.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import mmasim_inputs as mc
import numpy as np
import pytest

import lowprec as lp
from lowprec import amd
from lowprec._kernels import amd as K
from lowprec.mx import MXTensor, get_mx_format
from lowprec.nvfp4 import NVFP4Tensor

DATA = Path(__file__).parent / "data" / "mmasim_cases.npz"
_AMD_INPUTS = {"fp16": "fp16", "bf16": "bf16", "fp32": "xf32", "fp8_e4m3fnuz": "fp8_e4m3fnuz",
               "fp8_e5m2fnuz": "fp8_e5m2fnuz"}


def lowprec_bits(key: mc.Key, n: int | None = None) -> np.ndarray:
    """lowprec's outputs of ``key``'s first ``n`` cases, canonical FP32 bits."""
    n = key.n if n is None else n
    if key.skind:
        a, b, c, sa, sb = mc.cases(key, n)
        out = []
        for t in range(len(a)):
            if key.fmt == "fp4_e2m1":
                codes_a, codes_b = a[t], b[t]
                mxf = "mxfp4"
            else:
                mxf = "mxfp8_e4m3" if key.fmt == "fp8_e4m3" else "mxfp8_e5m2"
                elem = get_mx_format(mxf).element
                codes_a, codes_b = lp.encode(a[t], elem), lp.encode(b[t], elem)
            if key.skind == "ue4m3":
                qa = NVFP4Tensor(codes_a.copy(), sa[t].copy(), np.float32(1), codes_a.shape, 1,
                                 16)
                qb = NVFP4Tensor(np.ascontiguousarray(codes_b), np.ascontiguousarray(sb[t]),
                                 np.float32(1), codes_b.shape, 0, 16)
            else:
                f = get_mx_format(mxf)
                qa = MXTensor(np.ascontiguousarray(codes_a, np.uint8), sa[t].copy(), f,
                              codes_a.shape, 1, key.block)
                qb = MXTensor(np.ascontiguousarray(codes_b, np.uint8), sb[t].copy(), f,
                              codes_b.shape, 0, key.block)
            out.append(lp.matmul(qa, qb, c[t], model=key.model).ravel())
        return mc.canonical_bits(np.concatenate(out)[:n])
    a, b, c = mc.cases(key, n)
    if key.sim == "mfma":  # the compiled kernel itself (auto=False: never the slow reference)
        inputs = _AMD_INPUTS[key.fmt]
        if inputs == "xf32":
            a, b = amd._truncate_xf32(a), amd._truncate_xf32(b)
        idx = np.arange(n)
        d = K.mfma_values(a, b, c, "CDNA3", inputs, amd._EMIN[inputs],
                          amd._group("CDNA3", inputs), (idx, idx), auto=False)
    else:
        d = lp.vecdot(a, b, c, inputs=key.fmt, output=key.out, model=key.model)
    return mc.canonical_bits(d)


@pytest.fixture(scope="module")
def stored():
    z = np.load(DATA)
    assert str(z["commit"]).startswith("c785138")
    assert int(z["version"]) == mc.VERSION and int(z["seed"]) == mc.SEED
    assert int(z["chunk"]) == mc.CHUNK
    return z


def _compare(key: mc.Key, got: np.ndarray, digest: np.ndarray, head: np.ndarray) -> str:
    """'' when equal, else where the first difference lies."""
    mine = mc.digests(got)
    if mine.shape == digest.shape and (mine == digest).all():
        return ""
    if mine.shape != digest.shape:
        return f"{key.name}: {len(mine)} chunks here, {len(digest)} stored"
    ch = int(np.flatnonzero((mine != digest).any(axis=1))[0])
    lo, hi = ch * mc.CHUNK, (ch + 1) * mc.CHUNK
    where = f"{key.name}: cases {lo}..{hi - 1} differ (chunk {ch} of {len(digest)})"
    if hi <= len(head):
        i = lo + int(np.flatnonzero(got[lo:hi] != head[lo:hi])[0])
        g, h = (float(np.uint32(x).view(np.float32)) for x in (got[i], head[i]))
        where += (f"; first case {i}: lowprec 0x{int(got[i]):08x} ({g!r}), MMA-Sim "
                  f"0x{int(head[i]):08x} ({h!r})")
    else:
        where += (f"; see MMA-Sim's case with python scripts/mmasim_cases.py --case "
                  f"{key.name} <index>")
    return where


# The one class where lowprec and MMA-Sim differ on the set (docs/instructions.md,
# ../shared/hardware/mma-probes.md): a negative exact sum that rounds to zero in the FP16
# output is -0 in lowprec (IEEE) and +0 in MMA-Sim (its Python float sum). Named here
# case by case, each checked to be of that class; the digests then hold every other bit.
SIGN_OF_ZERO = {"v100_mma_f16_f16": (5605, 36333, 83213)}


def _known_differences(key: mc.Key, got: np.ndarray) -> np.ndarray:
    """``got`` with the listed cases set to MMA-Sim's +0, after checking their class."""
    cases = SIGN_OF_ZERO.get(key.name, ())
    if not cases:
        return got
    a, b, c = mc.cases(key, max(cases) + 1)
    out = got.copy()
    for i in cases:
        exact = sum(Fraction(x) * Fraction(y) for x, y in zip(a[i], b[i])) + Fraction(c[i])
        assert got[i] == 0x80000000, (key.name, i, hex(int(got[i])))  # lowprec: -0
        assert -Fraction(2) ** -24 < exact < 0, (key.name, i, exact)  # below FP16's least
        out[i] = 0
    return out


@pytest.mark.parametrize("name", list(mc.KEYS))
def test_model_equals_mmasim_on_1e5_cases(stored, name):
    key = mc.KEYS[name]
    assert key.n >= 100_000
    if f"{name}/digest" not in stored:
        pytest.fail(f"{name}: no stored MMA-Sim outputs; run scripts/mmasim_cases.py")
    assert int(stored[f"{name}/n"]) == key.n
    head, digest = stored[f"{name}/head"], stored[f"{name}/digest"]
    assert len(head) == mc.HEAD and (mc.digests(head) == digest[:mc.HEAD // mc.CHUNK]).all(), \
        f"{name}: the stored head and digests disagree (a damaged file)"
    got = _known_differences(key, lowprec_bits(key))
    assert len(got) == key.n
    msg = _compare(key, got, digest, head)
    assert not msg, msg


def test_a_flipped_bit_is_found(stored):
    """The comparison can fail: one output bit changed is named, in the head and beyond."""
    key = mc.KEYS["wgmma_f16_e4m3"]
    got = lowprec_bits(key, 4 * mc.CHUNK)
    digest, head = stored[f"{key.name}/digest"][:4], stored[f"{key.name}/head"]
    assert _compare(key, got, digest, head) == ""
    bad = got.copy()
    bad[300] ^= np.uint32(1)
    msg = _compare(key, bad, digest, head)
    assert "cases 256..511 differ" in msg and "first case 300" in msg
    tail = stored[f"{key.name}/digest"][-1:]
    assert "see MMA-Sim's case" in _compare(key, bad[256:512], tail, head[:0])


def test_generator_is_splitmix64():
    """The words are splitmix64's (Rosetta Code's published sequence for seed 1234567),
    counter-based, so the inputs do not depend on numpy's Generator streams."""
    g = np.uint64(0x9E3779B97F4A7C15)
    ctr = np.uint64(1234567) + np.arange(1, 6, dtype=np.uint64) * g
    assert [int(w) for w in mc._mix(ctr)] == [6457827717110365317, 3203168211198807973,
                                              9817491932198370423, 4593380528125082431,
                                              16408922859458223821]
    st = mc.Stream(37, "wgmma_f16_e4m3")
    w = st.words(3, (10,))
    assert (st.words(3, (4,)) == w[:4]).all() and (st.words(4, (10,)) != w).all()


@pytest.mark.parametrize("name", list(mc.KEYS))
def test_inputs_are_values_of_their_format(name):
    key = mc.KEYS[name]
    x = mc.cases(key, 2048)
    if key.skind:
        a, b = x[0], x[1]
        if key.fmt == "fp4_e2m1":
            assert a.max() == 15 and b.min() == 0
            return
    else:
        a, b, c = x
        fout = "fp32" if key.out == "fp32" else "fp16"
        assert np.array_equal(lp.round_to(c, fout), c) and (c == 0).any()
    fmt = "fp32" if key.fmt == "fp32" else key.fmt
    for v in (a, b):
        fin = v[np.isfinite(v)]
        assert np.array_equal(lp.round_to(fin, fmt), fin)
        sub = (fin != 0) & (np.abs(fin) < 2.0 ** mc.FMT[key.fmt].emin)
        assert sub.any()
    if key.sim == "mfma":
        assert (a == 0).any() and np.isnan(a).any()
    else:
        assert (a != 0).all() and (b != 0).all() and np.isfinite(a).all()
