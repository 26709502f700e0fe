"""The first call, cold: each of issue #39's targets against its limit.

Every measurement is a fresh Python process whose NUMBA_CACHE_DIR is an empty
temporary folder (numba has compiled nothing yet), so what a newcomer meets on
a first run is what is timed:

* the first ``round_to``, ``encode`` (float32 and float64 input) and ``decode``
  of every registered format in every mode: one process per mode, the
  formats in turn; the worst call of each mode is reported (limit 1 s), and
  ``import lowprec`` on its own line;
* ``lowprec explain 0.1``, ``lowprec info fp8_e4m3``, ``lowprec explore``
  (writing its page): the whole command, Python's start included (limit 1 s);
* ``lowprec demo`` (``--demo``; limit 20 s with the install, which
  ``--install`` adds: ``pip install --no-deps`` of this checkout into a fresh
  virtual environment that sees this one's packages).

The cold processes run with ``LOWPREC_COLD=numpy`` (served by the numpy
engine, no background compile left running into a deleted cache folder);
``--warm`` runs them with the default instead (background compiles), waits
for those, and runs the first step again with the cache they filled. Timings on a machine shared with other work vary; run it a
few times and read the worst line. Usage:

    python benchmarks/bench_coldstart.py [--demo] [--install] [--modes rne,rtz] [--warm] [--options]

``--options`` first times the designs docs/kernels.md compares (the
specialised kernels, one generic kernel, the numpy engine), compiling in
place.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import numpy as np
import lowprec as lp
out = {"import": (time.perf_counter() - t0, time.process_time() - c0)}
mode = sys.argv[1]
x = np.linspace(-600, 600, 10001, dtype=np.float32)
worst = {}
for fmt in lp.list_formats():
    kw = {"rng": 0} if mode == "stochastic" else {}
    for verb, fn in (("round_to", lambda: lp.round_to(x, fmt, mode, **kw)),
                     ("encode f32", lambda: lp.encode(x, fmt, mode, saturate=True, **kw)),
                     ("encode f64", lambda: lp.encode(x.astype(np.float64), fmt, mode,
                                                     saturate=True, **kw)),
                     ("decode", lambda: lp.decode(np.arange(min(1 << fmt.width, 1 << 16)),
                                                  fmt))):
        t, c = time.perf_counter(), time.process_time()
        fn()
        dt = time.perf_counter() - t
        if dt > worst.get(verb, (0, 0, ""))[0]:
            worst[verb] = (dt, time.process_time() - c, fmt.name)
out["worst"] = worst
out["total"] = (time.perf_counter() - t0, time.process_time() - c0)
if len(sys.argv) > 2:  # wait for the background compiles (the warm run needs them)
    from lowprec._kernels import route
    route.wait()
print(json.dumps(out))
"""


OPTIONS = r"""
import json, time
import numpy as np
import lowprec
from lowprec._kernels import convert, engine, vec
from lowprec._kernels.params import RNE, RTZ, format_params
f = lowprec.get_format("fp8_e4m3")
P = format_params(f)
b = (np.random.default_rng(0).standard_normal(10**6).astype(np.float32) * 100).view(np.uint32)
codes = np.empty(b.shape, np.uint8)
no = np.empty(0, np.uint64)
out = {}
def timed(name, fn):
    t = time.perf_counter(); fn(); out[name] = time.perf_counter() - t
gen = lambda m, n: engine.encode_kernel(P, b[:n], False, m, False, False, no, codes[:n],
                                        np.empty(0, np.uint8), False)
def by_numpy(m, n):
    for a in range(0, n, vec.CHUNK):
        vec.convert(P, b[a:min(a + vec.CHUNK, n)], m, False, False)
for name, fn in (("specialised", lambda m, n: convert.to_codes(f, b[:n], m, codes[:n])),
                 ("generic", gen), ("numpy", by_numpy)):
    timed(name + " first", lambda: fn(RNE, 10))
    timed(name + " next mode", lambda: fn(RTZ, 10))
    timed(name + " 1e6 warm", lambda: fn(RNE, b.shape[0]))
print(json.dumps(out))
"""


def options() -> None:
    """The designs' cold and warm costs (docs/kernels.md's table), compiled in place."""
    print("options: first call (cold), next mode (cold), 10^6 values (warm); fp8_e4m3 codes")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(_env(cache), LOWPREC_COLD="compile")
        res = subprocess.run([sys.executable, "-c", OPTIONS], env=env, capture_output=True,
                             text=True, check=True, timeout=3600)
    for name, seconds in json.loads(res.stdout.strip().splitlines()[-1]).items():
        print(f"  {name:<30} {seconds:9.4f} s", flush=True)


def _env(cache: str, checkout: bool = True) -> dict[str, str]:
    """An environment with an empty numba cache (and this checkout's lowprec first)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    if checkout:
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if "PYTHONPATH" in env
                                         else "")
    else:  # the installed copy
        env.pop("PYTHONPATH", None)
    env.pop("LOWPREC_COLD", None)
    return env


def _row(what: str, seconds: float, limit: float, cpu: float | None = None) -> None:
    """A target: wall seconds against the limit, and the CPU seconds the process
    used (on a loaded machine the wall time is mostly waiting for a core)."""
    verdict = "ok" if seconds <= limit else "OVER"
    spent = f"cpu {cpu:6.2f} s" if cpu is not None else " " * 12
    print(f"{what:<56} {seconds:7.2f} s  {spent}  limit {limit:5.1f} s  {verdict}", flush=True)


def first_calls(modes: list[str], warm: bool) -> None:
    print("first round_to/encode/decode of every format, a fresh process per mode, empty cache")
    for mode in modes:
        with tempfile.TemporaryDirectory() as cache:
            args = [sys.executable, "-c", CHILD, mode] + (["wait"] if warm else [])
            env = _env(cache) if warm else dict(_env(cache), LOWPREC_COLD="numpy")
            res = subprocess.run(args, env=env, capture_output=True, text=True, check=True,
                                 timeout=3600)
            cold = json.loads(res.stdout.strip().splitlines()[-1])
            if warm:
                res = subprocess.run([sys.executable, "-c", CHILD, mode], env=_env(cache),
                                     capture_output=True, text=True, check=True, timeout=1800)
                again = json.loads(res.stdout.strip().splitlines()[-1])
        _row(f"{mode}: import lowprec (cold)", cold["import"][0], 1.0, cold["import"][1])
        for verb, (seconds, cpu, fmt) in cold["worst"].items():
            _row(f"{mode}: worst first {verb} ({fmt})", seconds, 1.0, cpu)
        _row(f"{mode}: {len(cold['worst'])} verbs x 15 formats, import included",
             cold["total"][0], 60.0, cold["total"][1])
        if warm:
            _row(f"{mode}: the same, the cache filled by the background compiles",
                 again["total"][0], 60.0, again["total"][1])


def command(args: list[str], limit: float, cwd: str, python: str = sys.executable) -> float:
    with tempfile.TemporaryDirectory() as cache:
        t, before = time.perf_counter(), _children_cpu()
        env = dict(_env(cache, python == sys.executable), LOWPREC_COLD="numpy")
        subprocess.run([python, "-m", "lowprec", *args], env=env, cwd=cwd,
                       capture_output=True, text=True, check=True, timeout=1800)
        seconds = time.perf_counter() - t
    _row("lowprec " + " ".join(args), seconds, limit, _children_cpu() - before)
    return seconds


def _children_cpu() -> float:
    """CPU seconds (user and system) of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="rne,rna,rtz,rup,rdown,odd,stochastic")
    ap.add_argument("--demo", action="store_true", help="time lowprec demo too")
    ap.add_argument("--install", action="store_true", help="and pip install . before it")
    ap.add_argument("--warm", action="store_true",
                    help="wait for the background compiles, then time a warm process too")
    ap.add_argument("--options", action="store_true",
                    help="also time the designs compared in docs/kernels.md (minutes)")
    opts = ap.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    if opts.options:
        options()
    first_calls(opts.modes.split(","), opts.warm)
    with tempfile.TemporaryDirectory() as work:
        command(["explain", "0.1", "-f", "fp8_e4m3"], 1.0, work)
        command(["info", "fp8_e4m3"], 1.0, work)
        command(["explore", "--out", str(Path(work) / "page.html")], 1.0, work)
        if opts.demo or opts.install:
            python, spent = sys.executable, 0.0
            if opts.install:
                t = time.perf_counter()
                venv = Path(work) / "venv"
                subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                                str(venv)], check=True)
                python = str(venv / "bin" / "python")
                subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps",
                                "--no-build-isolation", str(ROOT)], check=True)
                spent = time.perf_counter() - t
                _row("pip install . (a fresh venv, no dependencies fetched)", spent, 20.0)
            demo = command(["demo", "--out", str(Path(work) / "demo")], 20.0, work, python)
            _row("install and demo", spent + demo, 20.0)
    print(f"load average {os.getloadavg()[0]:.1f} at the end (measured on a shared machine)")


if __name__ == "__main__":
    main()
