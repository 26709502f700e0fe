#!/usr/bin/env bash
# h200_check.sh -- the one hardware run of lowprec.gpu: GPU tests, the full
# validation (`lowprec validate --gpu`) and the GPU benchmark, in under 5
# minutes, on a machine with an NVIDIA H200 (CuPy 14 for CUDA 13, numpy,
# ml_dtypes installed; nothing can be downloaded there).
#
# Writes docs/hardware/h200.md and docs/hardware/h200.json in the copy of the
# repository it runs in, and copies them (with the logs) to $OUT when $OUT is
# set, so that they come back from the device tool. It never writes made-up
# numbers: every figure in h200.md is read from this run's output.
#
# HOW THE LEAD RUNS IT (device tool, from the repository root on the dev machine)
# Run it on main after merging the arith branch: validation then also compares
# with lowprec.arith (random operands, codes=True) and every lowprec.matmul
# accumulation model (list_models()); without them those rows say so. Their
# numba kernels compile on first use there (about a minute, inside `validate`).
#
# 0. numba: lowprec's CPU emulator needs numba (>= 0.60). The H200 image lists
#    numba and llvmlite, but its numpy (2.5.x when last seen) may be newer than
#    that numba supports. The script tests `import numba` + one lowprec.encode
#    there first and only then falls back to wheels carried in .whl/. To carry
#    them (a few tens of MB; do this once, here):
#       echo /.whl/ >> .git/info/exclude
#       python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --implementation cp --platform manylinux_2_28_x86_64 \
#         --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#         --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
#         -d .whl numba==0.68.1 llvmlite==0.50.0
#    (the versions /work/venv uses; if that numba refuses the image's numpy, add
#    numpy==2.4.6 to the same command: the wheels go to /tmp/site, ahead of
#    the image's packages, and CuPy 14 runs on numpy 2.4.)
# 1. Call the device tool once:
#       run(command="bash scripts/h200_check.sh", carry=[".whl"], timeout_s=420)
#    (leave carry out if you did not make .whl). Expected 3-4 minutes; the steps'
#    own limits (90 + 200 + 70 + 30 s) end it before 420 s, with the report
#    written from whatever finished.
# 2. The files come back under the reply's files_at: h200.md, h200.json,
#    validation.json, bench.json, log.txt. Copy h200.md and h200.json to
#    docs/hardware/ and commit them; read log.txt if a step failed.
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
step() {  # step NAME TIMEOUT_S CMD...: run, log, remember the exit status
    local name=$1 limit=$2; shift 2
    echo "=== $name ($(date -u +%T))" | tee -a "$LOG"
    timeout "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    echo "=== $name: exit $rc" | tee -a "$LOG"
    STATUS+=("$name=$rc")
}
emulator_ok() { "$PY" -c "import numba, lowprec; lowprec.encode(1.0, 'fp16')" >>"$LOG" 2>&1; }

# --- environment -----------------------------------------------------------------
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
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

# --- the three parts ---------------------------------------------------------------
# -o addopts="": no pytest-xdist needed on the GPU machine (pyproject asks for -n auto)
step pytest 90 "$PY" -m pytest -q -o addopts="" -p no:cacheprovider tests/test_gpu_device.py \
    tests/test_gpu_compile.py tests/test_gpu_validate.py -rs
step validate 200 "$PY" -m lowprec validate --gpu --out "$WORK/validation"
step bench 70 "$PY" benchmarks/bench_gpu.py --json "$WORK/bench.json"
# Which tensor-core instructions the FP8 kernels become on this GPU (SASS):
# mma.sync (sm_90) and the experimental wgmma kernel (sm_90a).
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
    L += ["", "| exhaustive sweep (2^32 inputs) | seconds | mismatches |", "|---|---|---|"]
    L += [f"| {r['name']} | {r['seconds']:.2f} | {r['mismatches']} |" for r in bench["sweeps"]]
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
    cp "$WORK/validation/validation.json" "$WORK/bench.json" "$OUT/" 2>/dev/null
fi
echo "steps: ${STATUS[*]}"
tail -5 "$LOG"
