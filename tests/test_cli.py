"""The lowprec command line, through main([...])."""

import pytest

import lowprec as lp
from lowprec.cli import main


def test_explain_one_format(capsys):
    assert main(["explain", "0.1", "--format", "bf16"]) == 0
    out = capsys.readouterr().out
    e = lp.explain("0.1", "bf16")
    assert out.strip() == str(e).strip()
    assert "0x3dcd = 0|01111011|1001101" in out


def test_explain_several_formats_and_mode(capsys):
    # "--" ends the options, so that a negative value is not taken for one.
    assert main(["explain", "-f", "fp16,fp8_e4m3", "-f", "fp4", "--mode", "rtz",
                 "--", "0.1", "-1/3"]) == 0
    out = capsys.readouterr().out
    blocks = out.strip().split("\n\n")
    assert len(blocks) == 6
    assert blocks[1] == str(lp.explain("0.1", "fp8_e4m3", "rtz"))
    assert "(rtz)" in blocks[5] and "fp4_e2m1" in blocks[5]


def test_explain_default_formats_and_stochastic(capsys):
    assert main(["explain", "1e-3"]) == 0
    out = capsys.readouterr().out
    for name in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2"):
        assert f" in {name} (rne)" in out
    assert main(["explain", "0.3", "-f", "fp8_e4m3", "-m", "stochastic", "--seed", "4"]) == 0
    assert capsys.readouterr().out.strip() == str(
        lp.explain("0.3", "fp8_e4m3", "stochastic", rng=4))


@pytest.mark.parametrize("argv, message", [
    (["explain", "0.1", "--format", "fp7"], "unknown format 'fp7'"),
    (["explain", "0.1", "-f", "bf16", "--mode", "banker"], "unknown rounding mode"),
    (["explain", "abc", "-f", "bf16"], "abc"),
    (["info", "fp7"], "unknown format 'fp7'"),
])
def test_errors_exit_2_with_message(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lowprec {argv[0]}: error:") and message in err
    assert err.count("\n") == 1  # one line


def test_info_detail_and_table(capsys):
    assert main(["info", "fp8_e4m3"]) == 0
    out = capsys.readouterr().out
    assert "448.0" in out and "OCP" in out and "bias    7" in out
    assert main(["info", "fp4"]) == 0
    out = capsys.readouterr().out
    assert "0x07=6" in out and "0x0f=-6" in out and "2 per byte" in out
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in lp.FORMATS)
    assert main(["info", "fp16", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "fp16" in out and "bf16" in out and "fp32" not in out


def test_info_names_the_reference_dtype_without_importing_ml_dtypes():
    """`lowprec info` is a one-second command: it names ml_dtypes' dtype for a
    format from the table, without importing ml_dtypes (half a second)."""
    import subprocess
    import sys

    code = ("import sys; from lowprec.cli import main; main(['info', 'fp8_e4m3']); "
            "main(['info', 'bf16']); print('ml_dtypes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "numpy/ml_dtypes float8_e4m3fn" in out and "numpy/ml_dtypes bfloat16" in out
    assert out.splitlines()[-1] == "False"
    from lowprec.formats import _REFERENCE_DTYPES, reference_dtype

    for name, dtype_name in _REFERENCE_DTYPES.items():  # the table names the real dtypes
        ref = reference_dtype(name)
        assert ref is not None and ref.name == dtype_name
