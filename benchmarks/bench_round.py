"""Speed of lowprec.round_to against ml_dtypes (and gfloat, pychop), in one run.

For each format, 10**7 float32 values (standard normal) are rounded by

* the reference: ml_dtypes' ``x.astype(dtype).astype(np.float32)`` round trip
  (numpy's float16 for fp16), which is round-to-nearest-even only;
* ``lowprec.round_to(x, fmt, mode)`` in every mode;
* gfloat's ``round_ndarray`` and pychop's ``Chop`` when importable (they are
  slow, so on ``--slow-n`` values; rates are per value, so they compare).

Each timing is the median of ``--repeats`` runs, printed in M values/s, with
the ratios the requirements of issue 2 are about:

* ``rne/ref``: round_to in rne against the reference (required >= 1);
* ``worst/rne``: the slowest other mode against rne (required >= 0.5);
* target: every mode >= 300 M values/s for fp8 and fp16.

It also checks that round_to(rne) equals the reference bit for bit on the
data, and measures the peak extra memory of one round_to call (tracemalloc,
which sees numpy's allocations) against the input's size (required <= 3x).

    python benchmarks/bench_round.py                 # everything, 10**7 values
    python benchmarks/bench_round.py --n 1000000 --formats fp8_e4m3 bf16
    LOWPREC_NUM_THREADS=1 python benchmarks/bench_round.py   # one thread
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc

import numpy as np

import lowprec as lp
from lowprec.formats import reference_dtype

FORMATS = ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp4_e2m1"]
MODES = list(lp.MODES)
GFLOAT = {"fp16": "format_info_binary16", "bf16": "format_info_bfloat16",
          "fp8_e4m3": "format_info_ocp_e4m3", "fp8_e5m2": "format_info_ocp_e5m2",
          "fp6_e3m2": "format_info_ocp_e3m2", "fp4_e2m1": "format_info_ocp_e2m1"}


CLOCK = time.perf_counter


def rate(fn, n: int, repeats: int) -> float:
    """Median M values/s of fn() over repeats (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t = CLOCK()
        fn()
        times.append(CLOCK() - t)
    return n / statistics.median(times) / 1e6


def peak_memory_ratio(fn, nbytes: int) -> float:
    """Peak memory allocated during fn() (result included), over the input's size."""
    fn()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del result
    return peak / nbytes


def reference(fmt: str):
    dt = reference_dtype(fmt)
    return None if dt is None else (lambda x: x.astype(dt).astype(np.float32))


def third_party(fmt: str, xs: np.ndarray, repeats: int) -> dict[str, float]:
    """rne rates of gfloat and pychop on xs, where installed."""
    out = {}
    try:
        import gfloat
        import gfloat.formats

        fi = getattr(gfloat.formats, GFLOAT[fmt])
        out["gfloat"] = rate(lambda: gfloat.round_ndarray(fi, xs), xs.size, repeats)
    except ImportError:
        pass
    try:
        import pychop

        pychop.backend("numpy")
        f = lp.get_format(fmt)
        # IEEE-style (e, m) format of the same widths: pychop has no fn/fnuz variants.
        chop = pychop.Chop(f.exponent_bits, f.mantissa_bits, rmode=1)

        def run_chop():
            with np.errstate(over="ignore", invalid="ignore"):  # pychop's own warnings
                return chop(xs)

        out["pychop"] = rate(run_chop, xs.size, repeats)
    except ImportError:
        pass
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=10**7, help="values per format (default 10**7)")
    p.add_argument("--slow-n", type=int, default=10**6, help="values for gfloat/pychop")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--formats", nargs="+", default=FORMATS)
    p.add_argument("--modes", nargs="+", default=MODES)
    p.add_argument("--no-others", action="store_true", help="skip gfloat and pychop")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall: elapsed time (default); cpu: CPU time of all threads, "
                   "i.e. M values per CPU-second, which other load on the machine "
                   "barely changes (use with LOWPREC_NUM_THREADS=1 to compare with "
                   "single-threaded libraries)")
    args = p.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter

    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal(args.n).astype(np.float32)
    threads = os.environ.get("LOWPREC_NUM_THREADS", f"auto ({os.cpu_count()} CPUs)")
    unit = "M values per CPU-second" if args.clock == "cpu" else "M values/s (wall clock)"
    print(f"round_to on {args.n:,} float32 values (standard normal), median of "
          f"{args.repeats}; lowprec threads: {threads}; {unit}\n")
    cols = ["format", "ref"] + args.modes + ["rne/ref", "worst/rne", "mem/input", "ok"]
    rows = []
    problems = []
    others = {}
    for fmt in args.formats:
        ref = reference(fmt)
        r_ref = rate(lambda r=ref: r(x), x.size, args.repeats) if ref else float("nan")
        if ref is not None:
            got = lp.round_to(x, fmt)
            want = ref(x)
            if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                bad = int(np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))[0])
                problems.append(f"{fmt}: round_to != reference at x[{bad}] = {x[bad]!r}")
        rates = {}
        for mode in args.modes:
            kw = {"rng": 1} if mode == "stochastic" else {}
            rates[mode] = rate(lambda f=fmt, m=mode, k=kw: lp.round_to(x, f, m, **k),
                               x.size, args.repeats)
        mem = max(peak_memory_ratio(
            lambda f=fmt, m=mode: lp.round_to(x, f, m, **({"rng": 1} if m == "stochastic" else {})),
            x.nbytes) for mode in ("rne", "stochastic") if mode in args.modes)
        rne = rates.get("rne", float("nan"))
        worst = min((v for k, v in rates.items() if k != "rne"), default=rne)
        ok = []
        if ref and rne < r_ref:
            ok.append("rne<ref")
        if worst < rne / 2:
            ok.append("mode<rne/2")
        if fmt in ("fp16", "fp8_e4m3", "fp8_e5m2") and min(rates.values()) < 300:
            ok.append("<300")
        if mem > 3:
            ok.append("mem>3x")
        rows.append([fmt, f"{r_ref:.0f}"] + [f"{rates[m]:.0f}" for m in args.modes]
                    + [f"{rne / r_ref:.2f}" if ref else "-", f"{worst / rne:.2f}",
                       f"{mem:.2f}", ",".join(ok) or "yes"])
        if not args.no_others:
            others[fmt] = third_party(fmt, x[: args.slow_n], max(1, args.repeats // 2))
    widths = [max(len(str(r[i])) for r in [cols] + rows) for i in range(len(cols))]
    for k, r in enumerate([cols] + rows):
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print("\nref = ml_dtypes astype round trip (numpy float16 for fp16), rne only; "
          "ok lists missed requirements/targets.")
    if others and any(others.values()):
        print(f"\nOther libraries, rne, on {args.slow_n:,} values (M values/s; "
              "ratio = lowprec rne / library):")
        for fmt, res in others.items():
            rne_rate = float(rows[args.formats.index(fmt)][2 + args.modes.index("rne")]) \
                if "rne" in args.modes else float("nan")
            print("  " + fmt.ljust(9) + "  ".join(
                f"{lib} {v:7.2f} (x{rne_rate / v:,.0f})" for lib, v in res.items()))
    if problems:
        print("\nMISMATCHES:\n  " + "\n  ".join(problems))
    else:
        print("\nround_to(rne) == reference bit for bit on all values, every format with one.")


if __name__ == "__main__":
    main()
