#!/usr/bin/env bash
# h200_check.sh -- the one prepared hardware run of lowprec.gpu on a lent NVIDIA H200:
# `lowprec validate --gpu` (sweeps, samples, arithmetic, GEMMs, library GEMMs), the GPU
# tests and the GPU benchmark, each under its own limit, then docs/hardware/h200.md and
# docs/hardware/h200.json written from this run's output only (CuPy 14 for CUDA 13,
# numpy, ml_dtypes and, for the library GEMMs, torch on the image; nothing can be
# downloaded there).
#
# Targets (issue 38): validate <= 120 s and the GPU tests <= 120 s from a fresh machine,
# numba compile included; every conversion >= 0.90x of the device's copy bandwidth. The
# step times are printed in the log and in h200.md. Validate runs first: it compiles
# lowprec's numba kernels into ~/.cache/lowprec, which the tests then load.
#
# The record of the first run (2026-12-04, main at f8f7a64) is
# docs/hardware/h200-2026-12-04.md; this script then had 90/200/70/30 s limits and the
# GEMM section compiled 14 custom-format kernels (killed at 200 s).
#
# HOW TO RUN IT (device tool, from the repository root on the dev machine)
# 0. numba: lowprec's CPU emulator needs numba (>= 0.60). On 2026-12-04 the image's own
#    numba 0.68.0 ran with its numpy 2.5.2; the script checks `import numba` + one
#    lowprec.encode first and only then falls back to wheels carried in .whl/
#    (see git history of this header for the pip download line).
# 1. Call the device tool once, in one prepared call:
#       run(command="LOWPREC_COMMIT=<hash> bash scripts/h200_check.sh", timeout_s=560)
#    (the device's copy of the tree may have no .git: pass the commit it runs).
#    The steps' limits (240 + 150 + 90 + 30 s = 510 s) end it before 560 s, with the
#    report written from whatever finished.
# 2. The files come back under the reply's files_at: h200.md, h200.json,
#    validation.json, validation.md, bench.json, log.txt. Copy h200.md and h200.json
#    to docs/hardware/ and commit them; read log.txt if a step failed.
# 3. give_back() unless you rerun at once.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
HW=$ROOT/docs/hardware
WORK=$(mktemp -d)
LOG=$WORK/log.txt
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
STATUS=()
step() {  # step NAME TIMEOUT_S CMD...: run, log, remember the exit status and seconds
    local name=$1 limit=$2; shift 2
    echo "=== $name ($(date -u +%T), limit ${limit} s)" | tee -a "$LOG"
    local t0=$SECONDS
    timeout "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    echo "=== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$LOG"
    STATUS+=("$name=$rc/$((SECONDS - t0))s")
}
emulator_ok() { "$PY" -c "import numba, lowprec; lowprec.encode(1.0, 'fp16')" >>"$LOG" 2>&1; }

# --- environment -----------------------------------------------------------------
{ date -u +%FT%TZ; echo "lowprec commit: ${LOWPREC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
  nvcc --version | tail -2; "$PY" -c "import sys, numpy, cupy, ml_dtypes; print(sys.version);
print('numpy', numpy.__version__, 'cupy', cupy.__version__, 'ml_dtypes', ml_dtypes.__version__)"
} >"$WORK/env.txt" 2>&1
cat "$WORK/env.txt" >>"$LOG"
if ! emulator_ok; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        echo "numba unusable here: installing the carried wheels into /tmp/site" | tee -a "$LOG"
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl >>"$LOG" 2>&1
        export PYTHONPATH=$ROOT:/tmp/site
    fi
    emulator_ok || { echo "lowprec's emulator cannot run here (numba); see log" | tee -a "$LOG"; }
fi
# No GPU, no report: never leave a docs/hardware file that was not measured.
GPU_STATE=$("$PY" -c "import lowprec.gpu as g; print(g.unavailable_reason() or 'ok')" 2>&1)
echo "GPU: $GPU_STATE" | tee -a "$LOG"
if [ "$GPU_STATE" != ok ]; then
    echo "no usable GPU here: nothing written to docs/hardware" | tee -a "$LOG"
    [ -n "${OUT:-}" ] && cp "$LOG" "$OUT/"
    exit 2
fi

mkdir -p "$HW"

# --- the parts (validate first: it compiles the numba kernels the tests then load) ---
step validate 240 "$PY" -m lowprec validate --gpu --out "$WORK/validation"
# -o addopts="": no pytest-xdist needed on the GPU machine (pyproject asks for -n auto)
step pytest 150 "$PY" -m pytest -q -o addopts="" -p no:cacheprovider -m "not slow" \
    tests/test_gpu_device.py tests/test_gpu_compile.py tests/test_gpu_validate.py \
    tests/test_gpu_fast_convert.py tests/test_gpu_fragments.py tests/test_hardware_record.py -rs
step bench 90 "$PY" benchmarks/bench_gpu.py --json "$WORK/bench.json"
# Which tensor-core instructions the FP8 kernels become on this GPU (SASS):
# mma.sync (sm_90: HMMA on 2026-12-04) and the wgmma kernel (sm_90a: QGMMA).
step sass 30 bash -c "set -o pipefail; nvcc -arch=sm_90 -I lowprec/gpu -cubin lowprec/gpu/gemm_fp8.cu \
    -o $WORK/gemm.cubin && nvcc -gencode=arch=compute_90a,code=sm_90a -I lowprec/gpu -cubin \
    lowprec/gpu/gemm_fp8_wgmma.cu -o $WORK/wgmma.cubin && for f in gemm wgmma; do echo \$f:; \
    cuobjdump --dump-sass $WORK/\$f.cubin | grep -oE '\b[A-Z]*MMA[.A-Za-z0-9]*' | sort | uniq -c; \
    done > $WORK/sass.txt"

# --- the report ----------------------------------------------------------------------
"$PY" - "$WORK" "$HW" "${STATUS[*]}" <<'PYEOF' >>"$LOG" 2>&1
import json, re, sys
from pathlib import Path
work, hw, status = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
env = (work / "env.txt").read_text()
log = (work / "log.txt").read_text()
val_json = work / "validation" / "validation.json"
val_md = work / "validation" / "validation.md"
bench = json.loads((work / "bench.json").read_text()) if (work / "bench.json").exists() else None
val = json.loads(val_json.read_text()) if val_json.exists() else None
m = re.findall(r"^=+ .*(?:passed|failed|error|skipped).* in [0-9.]+s.*$|^\d+ (?:passed|failed).*$",
               log, re.M)
sass = (work / "sass.txt").read_text().strip() if (work / "sass.txt").exists() else "(not run)"
L = [f"# lowprec on {(val or {}).get('device', {}).get('name', 'an NVIDIA GPU')}", "",
     "Written by scripts/h200_check.sh from one run; every number below is that run's output.", "",
     "## Machine", "", "```", env.strip(), "```", "",
     f"Step exit codes: `{status}`", "",
     "## GPU tests", "", "```", *(m[-1:] or ["(no pytest summary found; see log.txt)"]), "```", "",
     "## SASS of the FP8 kernels: mma.sync (gemm) and wgmma (instruction counts)", "", "```", sass, "```", ""]
if bench:
    L += ["## Benchmark (benchmarks/bench_gpu.py)", "",
          f"Device-to-device copy: {bench['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s.", "",
          "| conversion | TB/s | ratio to copy | ratio to datasheet |", "|---|---|---|---|"]
    for r in bench["conversions"]:
        ds = f"{r['ratio_to_datasheet']:.2f}" if r["ratio_to_datasheet"] else "-"
        L.append(f"| {r['name']} | {r['bandwidth'] / 1e12:.2f} | {r['ratio_to_copy']:.2f} | {ds} |")
    low = bench.get("lowest_ratio_to_copy")
    if low:
        L += ["", f"Lowest ratio to copy: {low['ratio']:.2f} ({low['name']}; target >= 0.90)."]
    L += ["", "| exhaustive sweep (2^32 inputs) | seconds | mismatches (must be 0) | NaN rule | "
          "NaN-encoding differences (explained by the rule) |", "|---|---|---|---|---|"]
    L += [f"| {r['name']} | {r['seconds']:.2f} | {r['mismatches']} | {r.get('nan_rule', '-')} | "
          f"{r.get('nan_encoding_differences', '-')} |" for r in bench["sweeps"]]
    L.append("")
else:
    L += ["## Benchmark", "", "Did not complete; see log.txt.", ""]
L += ["## Validation (lowprec validate --gpu)", ""]
L += [val_md.read_text().replace("# lowprec validation report", "").strip()] if val_md.exists() \
    else ["Did not complete; see log.txt."]
(hw / "h200.md").write_text("\n".join(L) + "\n")
(hw / "h200.json").write_text(json.dumps({"env": env, "status": status, "bench": bench,
                                          "validation": val, "sass": sass}, indent=1,
                                         default=str) + "\n")
print("wrote", hw / "h200.md", hw / "h200.json")
PYEOF
if [ -n "${OUT:-}" ]; then
    cp "$HW/h200.md" "$HW/h200.json" "$LOG" "$OUT/" 2>/dev/null
    cp "$WORK/validation/validation.json" "$WORK/validation/validation.md" "$WORK/bench.json" \
        "$OUT/" 2>/dev/null
fi
echo "steps: ${STATUS[*]}"
tail -5 "$LOG"
