"""Berkeley TestFloat 3e conversion vectors: f32_to_f16, f64_to_f16, f32_to_bf16.

The vectors live in ``../shared/testfloat/`` next to the checkout (see its
README.md); without it, the subset shipped in ``tests/data/testfloat`` (see
``tests/data/README.md``) runs instead. Each line is ``input result flags`` in hex.
Every result must match bit for bit (an expected NaN matches any NaN: payloads
follow SoftFloat's x86 conventions, which IEEE 754 does not require) and so must
every exception flag (inexact, underflow with tininess after rounding, overflow,
invalid).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from _shared_data import data_dir, missing

import lowprec as lp

# ``../shared/testfloat`` next to the checkout (LOWPREC_SHARED overrides it), else the
# subset shipped in tests/data/testfloat.
VECTORS, FULL = data_dir("testfloat")
MODES = ["rne", "rna", "rtz", "rdown", "rup", "odd"]
CASES = [("f32_to_f16", "fp16", np.float32), ("f64_to_f16", "fp16", np.float64),
         ("f32_to_bf16", "bf16", np.float32)]
FLAG_NAMES = {0x01: "inexact", 0x02: "underflow", 0x04: "overflow", 0x08: "infinite",
              0x10: "invalid"}


def _load(path: Path, in_dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with gzip.open(path, "rt") as f:
        tokens = f.read().split()
    bits_dtype = np.uint64 if in_dtype == np.float64 else np.uint32
    x = np.array([int(t, 16) for t in tokens[0::3]], dtype=bits_dtype).view(in_dtype)
    result = np.array([int(t, 16) for t in tokens[1::3]], dtype=np.uint16)
    flags = np.array([int(t, 16) for t in tokens[2::3]], dtype=np.uint8)
    return x, result, flags


def _flag_text(f: int) -> str:
    return "|".join(name for bit, name in FLAG_NAMES.items() if f & bit) or "none"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op,fmt,in_dtype", CASES, ids=[c[0] for c in CASES])
def test_testfloat_conversion(op: str, fmt: str, in_dtype: type, mode: str) -> None:
    path = VECTORS / f"{op}.{mode}.txt.gz"
    if not path.exists():
        pytest.skip(missing(path))
    x, want, want_flags = _load(path, in_dtype)
    assert x.size >= (100_000 if FULL else 1900)
    got, got_flags = lp.encode(x, fmt, mode, flags=True)

    want_nan = np.isnan(lp.decode(want, fmt))
    got_nan = np.isnan(lp.decode(got, fmt))
    ok = np.where(want_nan, got_nan, got == want)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (
        f"{op} {mode}: {bad.size} of {x.size} results differ; first: input "
        f"{x.view(np.uint64 if in_dtype == np.float64 else np.uint32)[bad[0]]:#x} "
        f"expected {want[bad[0]]:#06x}, got {got[bad[0]]:#06x}"
    )
    bad = np.flatnonzero(got_flags != want_flags)
    assert bad.size == 0, (
        f"{op} {mode}: {bad.size} of {x.size} flag sets differ; first: input "
        f"{x.view(np.uint64 if in_dtype == np.float64 else np.uint32)[bad[0]]:#x} "
        f"expected {_flag_text(int(want_flags[bad[0]]))}, "
        f"got {_flag_text(int(got_flags[bad[0]]))}"
    )
    # The vectors do exercise the interesting flags (else this test proves little).
    # (f32 -> bf16 cannot overflow when rounding toward zero: same exponent range.)
    expected = (0x01, 0x02, 0x10) if (fmt == "bf16" and mode in ("rtz", "odd")) else (
        0x01, 0x02, 0x04, 0x10)
    for bit in expected:
        assert (want_flags & bit).any(), f"{op} {mode}: no case raises {FLAG_NAMES[bit]}"


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"])
def test_signaling_nan_raises_invalid(fmt: str) -> None:
    """IEEE 754 7.2: converting a signaling NaN signals invalid; a quiet NaN does not.

    Regression test (the engine once reported no flag for signaling NaNs; found
    with the TestFloat vectors above)."""
    snan32 = np.array([0x7F800001, 0xFF800001, 0x7FBFFFFF], dtype=np.uint32).view(np.float32)
    qnan32 = np.array([0x7FC00000, 0xFFC00001, 0x7FFFFFFF], dtype=np.uint32).view(np.float32)
    snan64 = np.array([0x7FF0000000000001, 0xFFF7FFFFFFFFFFFF], dtype=np.uint64).view(np.float64)
    qnan64 = np.array([0x7FF8000000000000, 0xFFF8000000000001], dtype=np.uint64).view(np.float64)
    for x, want in ((snan32, 0x10), (qnan32, 0), (snan64, 0x10), (qnan64, 0)):
        codes, flags = lp.encode(x, fmt, flags=True)
        assert np.isnan(lp.decode(codes, fmt)).all()
        assert (flags == want).all(), (fmt, x.view(np.uint64 if x.itemsize == 8 else np.uint32),
                                       flags)
