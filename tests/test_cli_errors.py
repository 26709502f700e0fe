"""The command line never answers with a traceback (issue 14).

Every sub-command is run with bad arguments; each must exit non-zero with the documented
status, print no traceback, and say in one line on stderr what was wrong, naming the bad
argument. Most cases run in-process through ``cli.main`` (fast); a handful run as real
``python -m lowprec`` processes, and every printing command is piped into a closed pipe.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lowprec import cli
from lowprec.commands import info
from lowprec.gpu import _runtime

ROOT = Path(__file__).resolve().parent.parent
USAGE, FAILED, NO_GPU = 2, 1, 3

# (argv, expected status, text the one-line message must contain). {full} is a non-empty
# folder holding a user's file, {file} is a plain file.
CASES = [
    # top level
    (["trian"], USAGE, "did you mean train?"),
    (["--bogus"], USAGE, "--bogus"),
    (["info", "--bogus"], USAGE, "--bogus"),
    # info
    (["info", "fp8"], USAGE, "did you mean fp8_e4m3 or fp8_e5m2?"),
    (["info", "fp7"], USAGE, "unknown format 'fp7'"),
    (["info", "fp16", "half-ish"], USAGE, "'half-ish'"),
    (["info", "FP16X"], USAGE, "'FP16X' (did you mean fp16"),
    # explain: numbers
    (["explain", "abc"], USAGE, "'abc' is not a number"),
    (["explain", "1/0", "-f", "fp16"], USAGE, "'1/0' divides by zero"),
    (["explain", "1e99999999999", "-f", "fp16"], USAGE, "'1e99999999999' is too far out"),
    (["explain", "0x3c00", "-f", "fp16"], USAGE, "'0x3c00' is not a number"),
    (["explain", "1e400", "-1x"], USAGE, "-1x"),
    (["explain", "--", "-abc"], USAGE, "'-abc' is not a number"),
    (["explain"], USAGE, "VALUE"),
    # explain: names and options
    (["explain", "0.1", "-f", "fp7"], USAGE, "unknown format 'fp7'"),
    (["explain", "0.1", "-f", "fp16,fp8"], USAGE, "'fp8' (did you mean fp8_e4m3 or fp8_e5m2?)"),
    (["explain", "0.1", "-f", ","], USAGE, "--format"),
    (["explain", "0.1", "-m", "banker"], USAGE, "unknown rounding mode 'banker'"),
    (["explain", "0.1", "-m", "nearst"], USAGE, "did you mean nearest"),
    (["explain", "0.1", "--seed", "x"], USAGE, "--seed"),
    (["explain", "0.1", "--seed", "-1"], USAGE, "--seed"),
    (["explain", "0.1", "-m", "rne", "--seed", "1.5"], USAGE, "--seed"),
    # demo
    (["demo", "--steps", "0"], USAGE, "--steps"),
    (["demo", "--steps", "ten"], USAGE, "--steps"),
    (["demo", "--seed", "-3"], USAGE, "--seed"),
    (["demo", "--task", "digit"], USAGE, "did you mean digits?"),
    (["demo", "--policies", "fp16", "--out", "{new}"], USAGE, "'fp16' (did you mean fp16-amp"),
    (["demo", "--policies", ",", "--out", "{new}"], USAGE, "--policies"),
    (["demo", "--out", "{full}"], USAGE, "is not empty; pass --force"),
    (["demo", "--out", "{file}"], USAGE, "is a file"),
    # train
    (["train", "--policy", "fp12"], USAGE, "'fp12'"),
    (["train", "--policy", "bf16"], USAGE, "did you mean bf16-pure"),
    (["train", "--task", "nope"], USAGE, "'nope'"),
    (["train", "--steps", "-5"], USAGE, "--steps"),
    (["train", "--optimizer", "adm"], USAGE, "did you mean adam?"),
    (["train", "--grad-exp", "1000"], USAGE, "--grad-exp"),
    (["train", "--grad-exp", "x"], USAGE, "--grad-exp"),
    (["train", "--out", "{full}"], USAGE, "is not empty; pass --force"),
    (["train", "--out", "{file}"], USAGE, "is a file"),
    # figures
    (["figures", "nope", "--out", "{new}"], USAGE, "unknown figure(s) nope"),
    (["figures", "stochastic_roundin", "--out", "{new}"], USAGE,
     "did you mean stochastic_rounding?"),
    (["figures", "--out", "{full}"], USAGE, "is not empty; pass --force"),
    (["figures", "--out", "{file}"], USAGE, "is a file"),
    # validate
    (["validate", "--out", "{full}"], USAGE, "is not empty; pass --force"),
    (["validate", "--quick", "--out", "{file}"], USAGE, "is a file"),
    (["validate", "identify"], USAGE, "required: WHAT"),
    (["validate", "identfy"], USAGE, "did you mean identify?"),
    (["validate", "identify", "dot", "--a", "{new}", "--b", "{new}", "--d", "{new}",
      "--inputs", "fp16"], USAGE, "no such file"),
    (["validate", "identify", "dot", "--a", "{file}", "--b", "{file}", "--d", "{file}",
      "--inputs", "fp16"], USAGE, "expected a .npy, .npz, .txt or .txt.gz file"),
    (["validate", "identify", "dot", "--a", "{file}", "--b", "{file}", "--d", "{file}",
      "--inputs", "fp16", "--output", "bf16"], USAGE, "did you mean fp16?"),
    (["validate", "identify", "gemm", "{new}", "{new}", "{new}", "--inputs", "fp8_e4m3"],
     USAGE, "no such file"),
    (["validate", "identify", "gemm", "{file}", "{file}", "{file}", "--inputs", "fp8_e4m3",
      "--output", "fp61"], USAGE, "did you mean fp16?"),
    (["validate", "identify", "gemm", "{file}", "{file}", "--inputs", "fp8_e4m3"], USAGE,
     "required: D"),
    (["validate", "identify", "conversion", "--inputs", "{file}", "--codes", "{file}"],
     USAGE, "required: --format"),
    # tutorials
    (["tutorials", "lst"], USAGE, "did you mean list?"),
    (["tutorials", "student"], USAGE, "give the folder"),
    (["tutorials", "student", "{full}"], USAGE, "is not empty; pass --force"),
    (["tutorials", "list", "--source", "{new}"], FAILED, "does not exist"),
    (["tutorials", "student", "{new}", "--source", "{full}"], FAILED, "no tutorials"),
    (["tutorials", "student", "{new}", "--roster", "{new}"], USAGE, "cannot read it"),
    (["tutorials", "render", "{new}", "--roster", "{file}"], USAGE, "--roster is for"),
    # grade
    (["grade", "{file}"], USAGE, "--tutorial"),
    (["grade", "{file}", "--tutorial", "99"], USAGE, "no single tutorial matches"),
    (["grade", "{new}", "--tutorial", "01", "--out", "{new}.csv"], USAGE, "does not exist"),
    (["grade", "{file}", "--tutorial", "01", "--out", "{file}"], USAGE,
     "already exists; pass --force"),
    (["grade", "{file}", "--tutorial", "01", "--timeout", "0", "--out", "{new}.csv"], USAGE,
     "--timeout must be positive"),
    # explore
    (["explore", "--format", "e4m"], USAGE, "not a registered format"),
    (["explore", "--out", "{file}"], USAGE, "already exists; pass --force"),
    (["explore", "--out", "{full}"], USAGE, "is a folder"),
    # warmup
    (["warmup", "--fast"], USAGE, "--fast"),
    # memory and cost
    (["memory", "--sizes", "32,x"], USAGE, "'32,x'"),
    (["memory", "--policies", "fp12"], USAGE, "unknown fp12"),
    (["memory", "--batch", "-1"], USAGE, "batch"),
    (["memory", "--transformer", "1,2"], USAGE, "'1,2'"),
    (["cost", "--gpu", "a100"], USAGE, "'a100'"),
    (["cost", "--sizes", "5"], USAGE, "at least two"),
    # inspect
    (["inspect"], USAGE, "FILE is missing"),
    (["inspect", "{new}"], USAGE, "does not exist"),
    (["inspect", "{file}", "--recipes", "fp7"], USAGE, "unknown scheme 'fp7'"),
    (["inspect", "{file}", "--max-underflow", "2"], USAGE, "--max-underflow"),
]


@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    full = tmp_path / "full"
    full.mkdir()
    (full / "thesis.tex").write_text("precious")
    (tmp_path / "a-file").write_text("not a folder")
    return {"full": str(full), "file": str(tmp_path / "a-file"),
            "new": str(tmp_path / "new")}


def fill(argv: list[str], places: dict[str, str]) -> list[str]:
    return [a.format(**places) for a in argv]


def test_at_least_40_cases_covering_every_sub_command():
    assert len(CASES) >= 40
    commands = {argv[0] for argv, _, _ in CASES}
    assert set(cli.build_parser()._subparsers._group_actions[0].choices) <= commands


@pytest.mark.parametrize("argv, status, message", CASES,
                         ids=[" ".join(c[0]) for c in CASES])
def test_bad_argument_one_line_no_traceback(argv, status, message, places, capsys):
    rc = cli.main(fill(argv, places))
    out, err = capsys.readouterr()
    assert rc == status, err
    assert "Traceback" not in out + err
    assert message in err, err
    assert err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("lowprec")
    assert Path(places["full"], "thesis.tex").read_text() == "precious"  # never touched
    assert sorted(os.listdir(places["full"])) == ["thesis.tex"]


def test_gpu_without_a_gpu_is_status_3(tmp_path, capsys):
    if _runtime.unavailable_reason() is None:
        pytest.skip("a GPU is available here: --gpu works")
    assert cli.main(["validate", "--gpu", "--quick", "--out", str(tmp_path / "r")]) == NO_GPU
    assert "--gpu needs CuPy" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_interrupted_is_130_and_debug_shows_the_traceback(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(info, "run", interrupted)
    assert cli.main(["info"]) == 130
    assert capsys.readouterr().err == "lowprec info: error: interrupted\n"

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(info, "run", broken)
    assert cli.main(["info"]) == FAILED
    err = capsys.readouterr().err
    assert "Traceback" not in err and "ZeroDivisionError: a bug" in err and "--debug" in err
    assert cli.main(["info", "--debug"]) == FAILED
    assert "Traceback (most recent call last)" in capsys.readouterr().err
    assert cli.main(["--debug", "info"]) == FAILED
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_explain_beyond_float64_is_explained_exactly(capsys):
    """Decided (docs/cli.md): numbers beyond float64 are taken exactly, like every input."""
    assert cli.main(["explain", "1e400", "-f", "fp16"]) == 0
    out = capsys.readouterr().out
    assert "1e+400 in fp16 (rne): inf" in out and "overflow" in out
    assert cli.main(["explain", "-f", "fp16", "--saturate", "-1e400", "1e-400"]) == 0
    out = capsys.readouterr().out
    assert "-1e+400 in fp16 (rne): -65504.0" in out
    assert "1e-400 in fp16 (rne): 0.0" in out and "underflow" in out


def test_version_and_help_with_examples_and_defaults(capsys):
    import lowprec

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"lowprec {lowprec.__version__}"
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "exit status:" in out
    for name in cli.build_parser()._subparsers._group_actions[0].choices:
        assert cli.main([name, "--help"]) == 0
        text = capsys.readouterr().out
        assert "examples:" in text, name
    assert cli.main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for default in ("(default: fp16-amp)", "(default: underflow)", "(default: 600)",
                    "(default: sgd)", "(default: 0)"):
        assert default in text


# ------------------------------------------------------------ real processes
def lowprec(*args: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "lowprec", *args], env=env, text=True,
                          timeout=600, **kw)


@pytest.mark.parametrize("argv, status, message", [
    (["explain", "1e400", "-f", "fp16"], 0, ""),
    (["explain", "abc"], USAGE, "'abc' is not a number"),
    (["info", "fp8"], USAGE, "did you mean fp8_e4m3 or fp8_e5m2?"),
    (["train", "--steps", "5", "--out", "{full}"], USAGE, "not empty"),
])
def test_in_a_real_process(argv, status, message, places):
    res = lowprec(*fill(argv, places), capture_output=True)
    assert res.returncode == status
    assert "Traceback" not in res.stdout + res.stderr
    assert message in res.stderr


PRINTING = [["info"], ["info", "fp4"], ["explain", "0.1", "1/3"], ["--help"],
            ["tutorials", "list"], ["figures", "--list"]]


@pytest.mark.parametrize("argv", PRINTING, ids=[" ".join(a) for a in PRINTING])
def test_closed_pipe_is_quiet(argv):
    """``lowprec info | head -3``, at its worst: the reader is gone before the first byte."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        res = lowprec(*argv, stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert res.stderr == "", res.stderr  # no traceback, no "Exception ignored"
    assert res.returncode in (0, FAILED)  # argparse itself ignores a failed --help write


def test_docs_console_examples_are_what_lowprec_prints(capsys):
    """docs/cli.md: each `$ lowprec ...` line prints its documented lines ("..." = more)."""
    doc = (ROOT / "docs" / "cli.md").read_text()
    blocks = [b.split("```", 1)[0] for b in doc.split("```console\n")[1:]]
    assert blocks
    for block in blocks:
        for chunk in block.split("$ ")[1:]:
            command, *expected = chunk.strip().splitlines()
            argv = command.split()[1:]
            cli.main(argv)
            captured = capsys.readouterr()
            printed = (captured.out + captured.err).splitlines()
            for want, got in zip(expected, printed):
                assert got.startswith(want.split("...")[0]), (command, want, got)
            assert len(printed) >= len(expected)


def test_docstring_examples():
    import doctest

    from lowprec import _names, _outdir
    from lowprec.commands import _common

    for module in (_names, _common, _outdir, cli):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module.__name__
