"""The H200 record of 2026-12-04, replayed on the CPU: every difference it counted is a
NaN encoding, explained by the conversion's NaN rule (lowprec/nan_rules.py), and
``encode(..., nan=rule)`` reproduces it. CUDA's software conversions (cuda_fp8.hpp etc.)
are built for the host with nvcc and held to the rules; no GPU needed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import lowprec as lp
from lowprec import validate as V
from lowprec.gpu import CONVERSIONS
from lowprec.nan_rules import NAN_RULES, nan_codes

RECORD = Path(__file__).resolve().parents[1] / "docs" / "hardware" / "h200-2026-12-04.json"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


def _all_f32_nans() -> np.ndarray:
    """Every float32 NaN bit pattern, both signs (2**24 - 2 of them)."""
    frac = np.arange(1, 1 << 23, dtype=np.uint32)
    pos = np.uint32(0x7F800000) | frac
    return np.concatenate([pos, pos | np.uint32(0x80000000)]).view(np.float32)


@pytest.fixture(scope="module")
def nans() -> np.ndarray:
    return _all_f32_nans()


_CODES: dict = {}


def _rule_codes(nans: np.ndarray, conv) -> np.ndarray:
    """nan_codes of every float32 NaN under the conversion's rule (shared by the tests)."""
    key = (conv.fmt, conv.nan_rule)
    if key not in _CODES:
        _CODES[key] = nan_codes(nans, conv.format, conv.nan_rule).astype(np.int64)
        assert _CODES[key].shape == nans.shape
    return _CODES[key]


def test_nan_rules_by_hand():
    x = np.array([np.nan, -np.nan, 1.0], np.float32)
    assert [hex(c) for c in lp.encode(x, "fp16", nan="canonical")] == ["0x7fff", "0x7fff",
                                                                      "0x3c00"]
    assert [hex(c) for c in lp.encode(x, "bf16", nan="canonical")][:2] == ["0x7fff"] * 2
    assert [hex(c) for c in lp.encode(x, "fp8_e4m3", nan="canonical")][:2] == ["0x7f"] * 2
    assert [hex(c) for c in lp.encode(x, "fp8_e4m3", nan="truncate")][:2] == ["0x7f", "0xff"]
    # E5M2 truncate: sign | 0x7e | top two fraction bits after widening (quiet bit set).
    u = np.array([0x7F800001, 0x7FA00000, 0xFFE00000, 0xFF800001], np.uint32)
    assert [hex(c) for c in lp.encode(u.view(np.float32), "fp8_e5m2", nan="truncate")] == [
        "0x7e", "0x7f", "0xff", "0xfe"]
    # float64 signalling NaNs: the quiet bit is set, the second fraction bit kept.
    snan = np.array([0x7FF0000000000001, 0xFFF4000000000000], np.uint64).view(np.float64)
    assert [hex(c) for c in lp.encode(snan, "fp8_e5m2", nan="truncate")] == ["0x7e", "0xff"]
    assert list(lp.encode(x, "fp4_e2m1", nan="max")) == [0x7, 0x7, 0x2]
    assert lp.encode(np.float32("nan"), "fp16", nan="lowprec") == 0x7E00  # the default
    assert lp.encode(1.5, "fp16", nan="canonical") == lp.encode(1.5, "fp16")


def test_nan_rule_errors_are_clear():
    with pytest.raises(ValueError, match="unknown NaN rule 'quiet'; known: lowprec, canonical"):
        lp.encode(np.nan, "fp16", nan="quiet")
    with pytest.raises(ValueError, match="fp4_e2m1 has no NaN code: use nan='max'"):
        lp.encode(np.nan, "fp4_e2m1", nan="canonical")
    with pytest.raises(ValueError, match="cannot be combined with flags="):
        lp.encode(np.nan, "fp16", nan="canonical", flags=True)


def test_every_conversion_names_a_rule_that_depends_on_sign_and_bit_21_only(nans):
    """The sweep kernel indexes the expected NaN code by (sign, fraction bit 21): true of
    every float32 conversion's rule over every 13th NaN input (1.3 million; the replay
    below uses all of them)."""
    u = nans.view(np.uint32)[::13]
    key = (((u >> 31) << 1) | ((u >> 21) & 1)).astype(np.intp)
    seen = set()
    for conv in CONVERSIONS.values():
        assert conv.nan_rule in NAN_RULES and conv.nan_source
        if conv.source != "float32" or (conv.fmt, conv.nan_rule) in seen:
            continue
        seen.add((conv.fmt, conv.nan_rule))
        hw, _ = V.nan_expectations(conv)
        assert np.array_equal(_rule_codes(nans, conv)[::13], hw.astype(np.int64)[key]), conv.name
    assert len(seen) == 10


@pytest.mark.skipif(not RECORD.exists(), reason="docs/hardware/h200-2026-12-04.json missing")
def test_recorded_sweeps_are_all_explained_nan_encodings(nans):
    """Replay: the 2026-12-04 sweeps compared each NaN input with lowprec's NaN of its
    sign. Under each conversion's hardware NaN rule, exactly the recorded number of NaN
    inputs differ from that code -- so every recorded mismatch is a NaN-encoding
    difference and the value mismatches are 0 in all 22 sweeps."""
    sweeps = json.loads(RECORD.read_text())["bench"]["sweeps"]
    assert len(sweeps) == 22
    sign = (nans.view(np.uint32) >> 31).astype(np.int64)
    for row in sweeps:
        conv = CONVERSIONS[row["name"]]
        _, default = V.nan_expectations(conv)  # lowprec's NaN per sign, as the sweep had it
        explained = int((_rule_codes(nans, conv) != default.astype(np.int64)[sign]).sum())
        value = row["mismatches"] - explained
        assert value == 0, (row["name"], row["mismatches"], explained)
        summary = V.difference_summary(value, explained, conv.nan_rule)
        assert summary.startswith(f"0 value mismatches (must be 0), {row['mismatches']} NaN")
    counts = {r["name"]: r["mismatches"] for r in sweeps}
    assert counts["f32_fp16_rn"] == 2 ** 24 - 2 and counts["f32_e4m3_sat"] == 2 ** 23 - 1
    assert counts["f32_e5m2_nosat"] == 2 ** 23 and counts["f32_e4m3_nosat"] == 0


def test_sample_accounting_counts_nan_encodings_apart():
    conv = CONVERSIONS["f32_e5m2_sat"]
    x = np.array([1.0, -np.nan, np.nan, 70000.0, 3.0], np.float32)
    got = conv.emulate(x, hardware_nan=True).copy()
    row = V.sample_accounting(conv, x, got)
    assert (row["value_mismatches"], row["nan_encoding_differences"]) == (0, 2)
    assert "NaN: canonical on 2/2 NaN inputs" in row["behaves_like"]
    got[4] += 1  # one value wrong
    got[1] = 0xFE  # a NaN, but not the rule's
    row = V.sample_accounting(conv, x, got)
    assert (row["value_mismatches"], row["nan_codes_outside_rule"]) == (1, 1)
    assert row["summary"].startswith("1 value mismatches (must be 0), 1 NaN-encoding")
    assert row["summary"].endswith("1 NaN codes outside that rule (must be 0)")


_SOFT_MAIN = r"""
#include <cuda_fp8.h>
#include <cuda_fp6.h>
#include <cuda_fp4.h>
#include <cstdio>
#include <cstring>
int main() {  // stdin: float64 bit patterns (hex); stdout: 8 codes per input
    unsigned long long u;
    while (scanf("%llx", &u) == 1) {
        double x; memcpy(&x, &u, 8);
        printf("%x %x %x %x %x %x %x %x\n",
            __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3),
            __nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E4M3),
            __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2),
            __nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E5M2),
            __nv_cvt_double_to_fp4(x, __NV_E2M1, cudaRoundNearest),
            __nv_cvt_double_to_fp6(x, __NV_E2M3, cudaRoundZero),
            __nv_cvt_double_to_fp6(x, __NV_E3M2, cudaRoundNearest),
            __nv_cvt_double_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf));
    }
    return 0;
}
"""


@pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) is not installed")
def test_rules_equal_cudas_software_conversions(tmp_path):
    """CUDA's own header code (host build) on NaN inputs: float32 NaNs widened as the
    GPU's cvt.f64.f32 does (payload kept, quiet bit set) and raw float64 NaNs, signalling
    ones included, against the catalogue's rules for the software conversions."""
    src = tmp_path / "soft.cu"
    src.write_text(_SOFT_MAIN)
    exe = tmp_path / "soft"
    subprocess.run([NVCC, str(src), "-o", str(exe)], check=True, capture_output=True, text=True)
    rng = np.random.default_rng(4)
    f32 = rng.integers(1, 1 << 23, size=2000, dtype=np.uint32) | np.uint32(0x7F800000)
    f32[::2] |= np.uint32(0x80000000)
    f32 = np.concatenate([f32, np.array([0x7F800001, 0x7FFFFFFF, 0xFFA00000], np.uint32)])
    x32 = f32.view(np.float32)
    widened = (((f32.astype(np.uint64) & np.uint64(0x80000000)) << np.uint64(32))
               | np.uint64(0x7FF8000000000000)
               | ((f32.astype(np.uint64) & np.uint64(0x7FFFFF)) << np.uint64(29)))
    f64 = rng.integers(1, 1 << 52, size=2000, dtype=np.uint64) | np.uint64(0x7FF0000000000000)
    f64[::2] |= np.uint64(1 << 63)
    f64[:8] = np.uint64(0x7FF0000000000001)  # signalling, top fraction bits zero
    bits = np.concatenate([widened, f64])
    out = subprocess.run([str(exe)], input="\n".join(f"{int(b):x}" for b in bits) + "\n",
                         check=True, capture_output=True, text=True).stdout.split("\n")
    got = np.array([[int(t, 16) for t in line.split()] for line in out if line.strip()])
    assert got.shape == (bits.size, 8)
    xs = [x32, f64.view(np.float64)]
    n32 = x32.size
    for col, fmt, rule in [(0, "fp8_e4m3", "truncate"), (1, "fp8_e4m3", "truncate"),
                           (2, "fp8_e5m2", "truncate"), (3, "fp8_e5m2", "truncate"),
                           (4, "fp4_e2m1", "max"), (5, "fp6_e2m3", "max"),
                           (6, "fp6_e3m2", "max"), (7, "e8m0", "canonical")]:
        want = np.concatenate([nan_codes(x, fmt, rule) for x in xs]).astype(np.int64)
        bad = np.flatnonzero(got[:, col] != want)
        assert bad.size == 0, (fmt, rule, hex(int(bits[bad[0]])), got[bad[0], col],
                               want[bad[0]], "float32" if bad[0] < n32 else "float64")
    # And the catalogue uses these rules for these conversions.
    assert CONVERSIONS["f32_e5m2_nosat"].nan_rule == "truncate"
    assert CONVERSIONS["f64_e4m3_sat"].nan_rule == "truncate"
    assert CONVERSIONS["f32_e3m2_rn"].nan_rule == "max"
