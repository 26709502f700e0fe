"""lowprec.validate without a GPU: the emulator-side parts, the report, the CLI."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from lowprec import decode, encode, get_format
from lowprec import validate as V
from lowprec.cli import main
from lowprec.gpu import CONVERSIONS
from lowprec.gpu._runtime import available
from lowprec.gpu._tables import build_table


@pytest.fixture(scope="module")
def quick_report():
    return V.run(quick=True, log=lambda s: None)


def test_step_tables_reproduce_the_emulator(quick_report):
    rows = quick_report["tables"]["rows"]
    assert len(rows) == sum(c.source == "float32" for c in CONVERSIONS.values()) + 2
    assert [r["name"] for r in rows if r["mismatches"]] == []
    assert all(r["steps"] >= 2 for r in rows)


def test_emulator_agrees_with_ml_dtypes(quick_report):
    rows = quick_report["ml_dtypes_check"]["rows"]
    assert {r["format"] for r in rows} >= {"fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"}
    assert [(r["format"], r["first"]) for r in rows if r["mismatches"]] == []


@pytest.mark.parametrize("name", ["f32_e4m3_nosat", "f32_e5m2_sat", "f32_e2m1_rz",
                                  "f32_e8m0_ru_nosat", "f32_bf16_rd"])
def test_table_lookup_equals_emulator_on_a_stride_of_all_inputs(name):
    """Every 1021st float32 bit pattern (4.2 million inputs), table against emulator."""
    conv = CONVERSIONS[name]
    table = build_table(conv.emulate, 32, 1 << conv.format.width)
    u = np.arange(0, 1 << 32, 1021, dtype=np.uint64).astype(np.uint32)
    want = conv.emulate(u.view(np.float32)).astype(np.int64)
    sign, mag = (u >> 31).astype(np.int64), u & np.uint32(0x7FFFFFFF)
    finite = mag <= 0x7F800000
    got = table.nan_expect[sign]
    got[finite] = table.lookup(sign[finite], mag[finite])
    lo, hi = table.lo_hi()  # the device's view of the same table
    code = want[finite]
    s = sign[finite]
    assert np.array_equal(got, want), hex(int(u[np.flatnonzero(got != want)[0]]))
    assert np.all((lo[s, code] <= mag[finite]) & (mag[finite] <= hi[s, code]))


def test_twins_follow_cuda_conventions():
    nan = np.array([np.nan, -np.nan], dtype=np.float32)
    # fp4/fp6: CUDA saturates and gives +MAXNORM for NaN (cuda_fp6.h, cuda_fp4.h).
    assert list(CONVERSIONS["f32_e2m1_rn"].emulate(nan)) == [0x7, 0x7]
    assert CONVERSIONS["f32_e2m1_rn"].emulate(np.array([np.inf], np.float32))[0] == 0x7
    # e8m0: |x| rounded; NaN -> 0xFF; below 2**-127 (zero too) clipped to 2**-127.
    e8 = CONVERSIONS["f32_e8m0_ru_sat"].emulate(np.array([-3.0, 0.0, np.nan], np.float32))
    assert list(e8) == [0x7F + 2, 0x00, 0xFF]
    # FP8 E4M3 without saturation overflows to NaN, with it to 448.
    big = np.array([1000.0], np.float32)
    assert CONVERSIONS["f32_e4m3_nosat"].emulate(big)[0] == 0x7F
    assert CONVERSIONS["f32_e4m3_sat"].emulate(big)[0] == 0x7E


def test_explain_and_ulp_distance():
    # IEEE 754 binary16: 1.0 is 0x3C00 (exponent 01111, fraction 0).
    assert V.explain_code(0x3C00, "fp16") == "0x3c00 = 0|01111|0000000000 = 1.0"
    fmt = get_format("fp16")
    # From -smallest subnormal (0x8001) to +smallest subnormal (0x0001): two steps (via 0).
    assert V.ulp_distance(np.array([0x0001]), np.array([0x8001]), fmt)[0] == 2
    assert V.ulp_distance(np.array([0x3C01]), np.array([0x3C00]), fmt)[0] == 1


def test_gemm_match_models_against_exact_and_float32_arithmetic():
    """match_models counts outputs bit for bit: an exact sum rounded once (Fractions) is
    reproduced only by 'exact', sequential float32 additions only by 'sequential'."""
    from lowprec import _validate_gemm as G

    rng = np.random.default_rng(1)
    fmt = get_format("fp8_e4m3")
    a, b = G.operands(fmt, (4, 64), rng), G.operands(fmt, (64, 3), rng)
    av, bv = decode(a, fmt), decode(b, fmt)
    exact = [[sum(Fraction(float(av[i, k])) * Fraction(float(bv[k, j])) for k in range(64))
              for j in range(3)] for i in range(4)]
    once = np.array([[float(v) for v in row] for row in exact]).astype(np.float32)
    models = {"exact": "exact", "sequential": "sequential"}
    got = G.match_models(av, bv, once, inputs="fp8_e4m3", models=models)
    assert got["exact"] == 12
    acc = np.zeros((4, 3), np.float32)
    for k in range(64):  # products of e4m3 values are exact in float32
        acc = acc + np.outer(av[:, k], bv[k, :]).astype(np.float32)
    got = G.match_models(av, bv, acc, inputs="fp8_e4m3", models=models)
    assert got["sequential"] == 12
    assert G.behaves_like(got, 12) == "sequential on 12/12 outputs"


def test_report_files(quick_report, tmp_path):
    j, m = V.write_report(quick_report, tmp_path)
    data = json.loads(j.read_text())
    assert data["gpu"] is False and data["tables"]["rows"]
    text = m.read_text()
    assert "No GPU part was run" in text and "f32_e4m3_sat" in text


@pytest.mark.skipif(available(), reason="a GPU is available here")
def test_cli_validate_gpu_fails_clearly_without_gpu(tmp_path, capsys):
    rc = main(["validate", "--gpu", "--quick", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc != 0
    assert "--gpu needs CuPy and an NVIDIA GPU" in err
    assert not (tmp_path / "validation.json").exists()


def test_cli_validate_emulator_only(tmp_path, capsys):
    assert main(["validate", "--quick", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "validation.md").exists() and (tmp_path / "validation.json").exists()
    assert "wrote" in capsys.readouterr().out


def test_encode_twin_is_lowprec_encode():
    x = np.array([1.0, 1.0 + 2.0 ** -11, 70000.0], np.float32)
    assert np.array_equal(CONVERSIONS["f32_fp16_rn"].emulate(x), encode(x, "fp16", "rne"))
    assert np.array_equal(CONVERSIONS["f32_fp16_rz"].emulate(x), encode(x, "fp16", "rtz"))


@pytest.mark.skipif(available(), reason="a GPU is available here")
def test_gpu_functions_say_why_they_cannot_run():
    import lowprec.gpu as lg

    calls = [
        lambda: lg.convert(np.zeros(3, np.float32), "fp16"),
        lambda: lg.widen(np.zeros(3, np.uint8), "fp8_e4m3"),
        lambda: lg.arith("add", "bf16", np.zeros(2, np.uint16), np.zeros(2, np.uint16)),
        lambda: lg.matmul(np.zeros((2, 2), np.uint8), np.zeros((2, 2), np.uint8), "fp8_e4m3"),
    ]
    for call in calls:
        with pytest.raises(lg.GPUUnavailableError, match="lowprec.gpu cannot run: "):
            call()
    assert lg.available() is False and lg.unavailable_reason()


def test_gpu_report_plumbing_with_a_stand_in_device(monkeypatch, tmp_path):
    """The --gpu code path end to end, with the device replaced by a stand-in that
    answers like the emulator except for planted mismatches: checks that the one
    hardware run cannot die on report plumbing, and that planted mismatches are
    found, re-checked and explained. (It says nothing about any GPU.)"""
    import sys
    import types

    import ml_dtypes

    from lowprec.gpu import _runtime as rt

    fake_cupy = types.SimpleNamespace(
        asnumpy=np.asarray, asarray=np.asarray, matmul=np.matmul, float16=np.float16,
        cuda=types.SimpleNamespace(Device=lambda *a: types.SimpleNamespace(synchronize=lambda: None)))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(rt, "require", lambda: None)
    monkeypatch.setattr(rt, "device_info", lambda: {
        "name": "stand-in", "compute_capability": "90", "driver_cuda_version": "0",
        "runtime_cuda_version": "0", "cupy_version": "0"})
    monkeypatch.setattr(rt, "convert_bits", lambda conv, bits: conv.emulate(
        bits.view(np.float32 if bits.dtype == np.uint32 else np.float64), hardware_nan=True))

    def widen(codes, fmt):
        b = next(b for b in V.BACK_CONVERSIONS.values() if b.fmt == fmt)
        dt = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}[b.to]
        with np.errstate(all="ignore"):
            return decode(codes, fmt).astype(dt).view(np.uint32 if b.to == "fp32" else np.uint16), b.to
    monkeypatch.setattr(rt, "widen", widen)

    def arith(op, fmt, *ops):
        vals = [decode(o, fmt).astype(np.float64) for o in ops]
        with np.errstate(all="ignore"):
            exact = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
                     "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
                     "div_rn": lambda a, b: a / b, "fma": lambda a, b, c: a * b + c,
                     "sqrt": np.sqrt, "sqrt_rn": np.sqrt}[op](*vals)
        return encode(exact, fmt, "rne")
    monkeypatch.setattr(rt, "arith", arith)

    def sweep_conversion(conv, lo, hi, nan_expect, is_nan, start, count, cap=1024,
                         nan_default=None):
        # One planted mismatch per chunk: the input 1.0 + start/2**32 answered one code up;
        # and 5 NaN results per chunk that follow the hardware NaN rule, not lowprec's.
        u = np.array([0x3F800000 + (start >> 24)], dtype=np.uint32)
        code = conv.emulate(u.view(np.float32)).astype(np.uint64) + np.uint64(1)
        key = (code << np.uint64(32)) | u.astype(np.uint64)
        return np.array([count, 1, 0, 1, 1, 5], dtype=np.uint64), key
    monkeypatch.setattr(rt, "sweep_conversion", sweep_conversion)

    def sweep_arith(fmt, op, lo, hi, is_nan, start, count, seed=0, cap=1024):
        a, b = np.uint64(0x3C00), np.uint64(0x4000)
        key = (np.uint64(0x4201) << np.uint64(48)) | (a << np.uint64(16)) | b
        return np.array([count, 1, 0, 1, 1], dtype=np.uint64), np.array([key])
    monkeypatch.setattr(rt, "sweep_arith", sweep_arith)

    def matmul(a, b, fmt, *, out="float32", engine="mma"):
        if engine == "wgmma":
            raise rt.GPUUnavailableError("stand-in has no sm_90a")
        f = get_format(fmt)
        exact = decode(a, f).astype(np.float64) @ decode(b, f).astype(np.float64)
        return exact.astype(np.float16 if out == "float16" else np.float32)
    monkeypatch.setattr(rt, "matmul", matmul)

    # lowprec.arith is the real one; the GEMM candidates are one model that runs and one
    # that refuses these operands (lowprec.matmul's real kernels).
    from lowprec import _validate_gemm as G

    monkeypatch.setattr(G, "candidates", lambda inputs, k: {
        "exact": "exact", "broken": "v100"})  # v100 has no FP8 or bf16 rule: a ValueError

    report = V.run(gpu=True, quick=True, log=lambda s: None)
    sweeps = {r["name"]: r for r in report["conversion_sweeps"]}
    assert sweeps["f32_fp16_rn"]["mismatches"] == 4  # one per 2**30 chunk
    assert sweeps["f32_fp16_rn"]["recorded_confirmed_by_emulator"] == 4
    assert sweeps["f32_fp16_rn"]["ulp_histogram_of_recorded"] == {"+1": 4}
    assert "GPU 0x3c01" in sweeps["f32_fp16_rn"]["first"][0]
    assert all(r["mismatches"] == 0 for r in report["conversion_samples"])
    assert all(r["mismatches"] == 0 for r in report["back_conversions"])
    add = next(r for r in report["arithmetic"]["sweeps"] if (r["format"], r["op"]) == ("fp16", "add"))
    assert add["mismatches"] == 4 and "0x4201" in add["first"][0]
    fp16_rn = sweeps["f32_fp16_rn"]
    assert fp16_rn["value_mismatches"] == 4 and fp16_rn["nan_encoding_differences"] == 20
    assert fp16_rn["summary"].startswith("4 value mismatches (must be 0), 20 NaN-encoding "
                                         "differences (explained: the GPU's NaN rule 'canonical'")
    gemm = {(r["format"], r["gemm"]): r for r in report["gemm"]}
    assert "error" in gemm[("fp8_e4m3", "wgmma m64n8k32")]
    e5 = next(r for r in report["gemm"] if r["format"] == "fp8_e5m2" and "error" not in r)
    assert e5["behaves_like"] == f"exact on {e5['outputs']}/{e5['outputs']} outputs"
    assert e5["models_not_run"]["broken"].startswith("not run: ")
    assert report["library_gemm"][0]["skipped"]  # no torch CUDA device here
    # The planted 1 + 2 -> 0x4201 is confirmed wrong by lowprec.arith (which says 0x4200).
    assert add["recorded_confirmed_by_lowprec_arith"] == add["recorded"]
    exact_ops = [r for r in report["arithmetic"]["samples"] if r["op"] in ("add", "sub", "mul")]
    assert exact_ops and all(r["mismatches_vs_lowprec_arith"] == 0 for r in exact_ops)
    _, m = V.write_report(report, tmp_path)
    text = m.read_text()
    assert "stand-in" in text and "First mismatches" in text and "lowprec.gpu GEMM kernels" in text
