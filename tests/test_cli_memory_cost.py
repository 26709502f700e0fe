"""``lowprec memory`` and ``lowprec cost``: output from real arithmetic, clear errors."""

from __future__ import annotations

import re

import pytest

from lowprec import cli


def test_memory_default_table(capsys):
    assert cli.main(["memory"]) == 0
    out = capsys.readouterr().out
    assert "mlp 32-64-64-10: 6,922 parameters" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0] in ("fp32", "fp16-amp", "bf16-pure")}
    # master, weights, grads, opt state, B/param (SGD momentum), as in the hand computations
    assert rows["fp32"][1:6] == ["0", "4", "4", "4", "12"]
    assert rows["fp16-amp"][1:6] == ["4", "2", "2", "4", "12"]
    assert rows["bf16-pure"][1:6] == ["0", "2", "2", "2", "6"]


def test_memory_transformer_adam(capsys):
    args = ["memory", "--transformer", "4096,16384,2048", "--batch", "8", "--optimizer",
            "adam", "--policies", "fp32,fp16-amp,mxfp4"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "201,326,592 parameters" in out
    b_param = {line.split()[0]: line.split()[5] for line in out.splitlines()
               if line.split() and line.split()[0] in ("fp32", "fp16-amp", "mxfp4")}
    assert b_param == {"fp32": "16", "fp16-amp": "16", "mxfp4": "16.53"}


def test_memory_detail(capsys):
    assert cli.main(["memory", "--policies", "mxfp8", "--detail"]) == 0
    out = capsys.readouterr().out
    assert "mxfp8_e4m3" in out and "weight side" in out


def test_cost_says_estimate(capsys):
    args = ["cost", "--transformer", "1024,4096,512", "--batch", "2", "--policies",
            "fp32,bf16-master"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert out.count("ESTIMATE, NOT A MEASUREMENT") == 2
    assert "bf16-master 14.77x faster" in out  # compute-bound: 989.5 / 67 TFLOP/s


@pytest.mark.parametrize("args,match", [
    (["memory", "--sizes", "3,x"], "--sizes must be comma-separated positive integers"),
    (["memory", "--transformer", "1,2"], "--transformer .* must be 3 comma-separated"),
    (["memory", "--policies", "fp32,fp7"], "--policies: unknown fp7"),
    (["memory", "--batch", "0"], "batch must be a positive integer"),
    (["memory", "--sizes", "4,4", "--transformer", "4,4,4"], "not both"),
    (["cost", "--policies", "mxfp4"], None),
])
def test_bad_input_is_one_line(args, match, capsys):
    code = cli.main(args)
    captured = capsys.readouterr()
    if match is None:  # FP4 on Hopper: no estimate, said in the table, not an error
        assert code == 0 and "unsupported" in captured.out
        return
    assert code == 2
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert re.search(match, lines[0]), lines[0]
