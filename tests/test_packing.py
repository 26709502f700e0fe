"""pack/unpack: round trips on every code, the documented bit layout, bad input."""

import numpy as np
import pytest

import lowprec as lp
from lowprec.formats import custom_format
from lowprec.packing import pack, packed_size, unpack

PACKED = ["fp4_e2m1", "fp6_e3m2", "fp6_e2m3", "fp8_e4m3", "fp16", "bf16", "tf32", "fp32",
          "e8m0"]


@pytest.mark.parametrize("name", PACKED)
def test_round_trip_every_code_and_random(name):
    fmt = lp.get_format(name)
    rng = np.random.default_rng(7)
    top = 1 << fmt.width
    every = np.arange(min(top, 1 << 16), dtype=np.uint64).astype(fmt.code_dtype)
    rand = rng.integers(0, top, size=1001, dtype=np.uint64).astype(fmt.code_dtype)
    for codes in (every, rand, every[:0], every[:1], every[:3], rand[:5]):
        data = pack(codes, fmt)
        assert data.dtype == np.uint8 and data.shape == (packed_size(len(codes), fmt),)
        back = unpack(data, fmt, len(codes))
        assert back.dtype == fmt.code_dtype
        np.testing.assert_array_equal(back, codes)
        np.testing.assert_array_equal(unpack(data.tobytes(), fmt, len(codes)), codes)


@pytest.mark.parametrize("e,m", [(2, 2), (3, 3), (4, 6), (5, 5)])  # widths 5, 7, 11, 11
def test_round_trip_other_widths(e, m):
    fmt = custom_format(e, m)
    codes = np.random.default_rng(1).integers(0, 1 << fmt.width, 77).astype(fmt.code_dtype)
    np.testing.assert_array_equal(unpack(pack(codes, fmt), fmt, 77), codes)


def _bit_stream(codes, width):
    """Reference layout written independently: a Python int, element k at bit k*width."""
    stream = 0
    for k, c in enumerate(codes):
        stream |= int(c) << (k * width)
    nbytes = (len(codes) * width + 7) // 8
    return list(stream.to_bytes(nbytes, "little"))


@pytest.mark.parametrize("name", ["fp4_e2m1", "fp6_e3m2", "fp16", "tf32"])
def test_layout_is_the_little_endian_bit_stream(name):
    fmt = lp.get_format(name)
    codes = np.random.default_rng(3).integers(0, 1 << fmt.width, 45).astype(fmt.code_dtype)
    assert pack(codes, fmt).tolist() == _bit_stream(codes, fmt.width)


def test_worked_example_fp4():
    # Values 1.0, -1.5, 6.0 in OCP MX FP4 E2M1 (OCP MX v1.0, Table 5):
    # 1.0 = 0b0010, -1.5 = 0b1011, 6.0 = 0b0111. Element 2i is the low nibble.
    codes = lp.encode([1.0, -1.5, 6.0], "fp4_e2m1")
    assert codes.tolist() == [0b0010, 0b1011, 0b0111]
    data = pack(codes, "fp4_e2m1")
    assert data.tolist() == [0b1011_0010, 0b0000_0111]
    assert lp.decode(unpack(data, "fp4_e2m1", 3), "fp4_e2m1").tolist() == [1.0, -1.5, 6.0]


def test_worked_example_fp6():
    # Four E3M2 codes a, b, c, d fill three bytes, least significant bits first:
    # byte0 = b[1:0] a[5:0], byte1 = c[3:0] b[5:2], byte2 = d[5:0] c[5:4].
    a, b, c, d = 0b000001, 0b111110, 0b101011, 0b010100
    data = pack([a, b, c, d], "fp6_e3m2")
    assert data.tolist() == [0b10_000001, 0b1011_1111, 0b010100_10]
    assert unpack(data, "fp6_e3m2", 4).tolist() == [a, b, c, d]


def test_bad_input():
    with pytest.raises(TypeError, match="integer"):
        pack(np.array([0.5, 1.0]), "fp4")
    with pytest.raises(ValueError, match="out of range.*0 .. 15"):
        pack(np.array([3, 16], dtype=np.uint8), "fp4")
    with pytest.raises(ValueError, match="out of range"):
        pack([-1], "fp6_e2m3")
    with pytest.raises(ValueError, match="take 2 bytes, got 3"):
        unpack(np.zeros(3, np.uint8), "fp4", 4)
    with pytest.raises(ValueError, match="take 3 bytes, got 2"):
        unpack(np.zeros(2, np.uint8), "fp6", 4)
    with pytest.raises(TypeError, match="uint8"):
        unpack(np.zeros(2, np.uint16), "fp4", 4)
    with pytest.raises(ValueError, match="padding bits"):
        unpack(np.array([0x21], np.uint8), "fp4", 1)  # a second code hides in the high nibble
    with pytest.raises(ValueError, match="count"):
        unpack(np.zeros(2, np.uint8), "fp4", -1)


def test_count_defaults_to_whole_codes():
    data = pack(np.arange(8, dtype=np.uint8), "fp6_e2m3")  # 6 bytes
    assert unpack(data, "fp6_e2m3").tolist() == list(range(8))
    assert len(unpack(pack(np.arange(5, dtype=np.uint8), "fp4"), "fp4")) == 6
