"""First-run compilation is visible, warm runs are silent, ``lowprec warmup`` compiles ahead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lowprec import cli

ROOT = Path(__file__).resolve().parent.parent


def lowprec(*args: str, cache: Path, cold: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(cache))
    env.pop("LOWPREC_COLD", None)
    if cold:
        env["LOWPREC_COLD"] = cold
    return subprocess.run([sys.executable, "-m", "lowprec", *args], env=env, text=True,
                          capture_output=True, timeout=600)


def test_a_cold_info_compiles_nothing(tmp_path):
    # an empty numba cache: info fp4 lists fp4's codes, decoded by the numpy
    # engine (docs/kernels.md): no kernel to compile, nothing announced
    cold = lowprec("info", "fp4", cache=tmp_path)
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr == "" and "0x07=6" in cold.stdout


def test_cold_compile_is_announced_and_a_warm_run_is_silent(tmp_path):
    # compiling in place (LOWPREC_COLD=compile), explain's encode of 0 with
    # flags compiles the reference kernel: announced, then cached
    cold = lowprec("explain", "0", "-f", "fp4", cache=tmp_path, cold="compile")
    assert cold.returncode == 0, cold.stderr
    lines = cold.stderr.splitlines()
    assert lines[0].startswith("compiling lowprec's kernels (once, about ")
    assert lines[-1].startswith("compiled ") and "cached for the next run" in lines[-1]
    warm = lowprec("explain", "0", "-f", "fp4", cache=tmp_path, cold="compile")
    assert warm.returncode == 0 and warm.stderr == "" and warm.stdout == cold.stdout


def test_warmup_runs_every_step(capsys):
    assert cli.main(["warmup", "--skip-training"]) == 0
    out = capsys.readouterr().out
    for label in ("rounding, every mode", "arithmetic", "matmul, every accumulation model",
                  "MX, NVFP4, per-tensor"):
        assert label in out
    assert "training" not in out and "lowprec warmup: done in" in out
