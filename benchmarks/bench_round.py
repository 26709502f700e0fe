"""Speed of lowprec.round_to against the memory limit and ml_dtypes, in one run.

For each format and data set, ``--n`` float32 values are rounded by
``lowprec.round_to`` in every mode, on 1 and 2 threads, into a fresh array and
into an existing one (``out=``). Next to each row, measured right before it on
the same array:

* ``astype``: numpy's ``x.astype(np.float32)`` (allocate and write the same
  bytes), the limit for a fresh result;
* ``copyto``: ``np.copyto(out, x)`` into an existing array, the limit with ``out=``;
* ``ml_dtypes``: ``x.astype(dtype)`` into the format's ml_dtypes type (numpy's
  float16 for fp16), round-to-nearest-even only;
* CPFloat's ``cpfloatf`` (one thread, into an existing array: compared with
  ``out=``, each over the copy timed alternately with it, ``np.copyto`` here and
  ``memcpy`` in CPFloat's process) in every mode, when ``--cpfloat`` names
  CPFloat's ``src/`` folder: ``git clone
  https://github.com/north-numerical-computing/cpfloat`` is all it takes (it is
  header-only; ``cpfloat_driver.c`` here is compiled against it with ``cc``).

Data sets: ``normal8`` (standard normal times 8: fp4 and fp6 overflow on a good
part of it) and ``loguniform`` (magnitudes log-uniform between the format's
smallest subnormal and its largest value, random signs).

Rates are M values/s (wall clock, the best of ``--repeats`` timings; ``--stat
median`` for the median). A mode's lowprec timings on 1 and 2 threads alternate
with each other and with one of its limit on the same array (and ml_dtypes', for
rne), and a cell's ratio is taken between timings of one alternation: on a
shared machine absolute rates move with the load (printed at the top, from
``os.getloadavg``), and another tenant's work only ever adds time, so the best
of paired timings is the estimate that moves least.
Targets of issue 13: fresh >= 0.8x astype, ``out=`` >= 0.6x copyto, 2 threads
>= 1.6x one thread at 10**7 values.

Before the table, the machine's own ceilings from the same run: how much of
``astype``'s time a fresh array's page faults take (``np.empty`` + ``fill``), and
how much faster a plain compiled copy runs on two threads than on one.

    python benchmarks/bench_round.py --quick            # a few formats, 10**6 values
    python benchmarks/bench_round.py                    # everything, 10**7 values
    python benchmarks/bench_round.py --formats fp4_e2m1 --modes rne rtz
    python benchmarks/bench_round.py --cpfloat ~/cpfloat/src --readme docs/performance.md  # its table
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

import numpy as np

import lowprec as lp
from lowprec.formats import reference_dtype

FORMATS = [name for name, f in lp.FORMATS.items() if f.width <= 16] + ["tf32"]
QUICK_FORMATS = ["fp16", "bf16", "fp8_e4m3", "fp4_e2m1"]
MODES = list(lp.MODES)
DATASETS = ["normal8", "loguniform"]


#: How a figure is taken from its timings (``--stat``).
STATS: dict[str, Callable[[list[float]], float]] = {"min": min, "median": statistics.median}


def paired(fns: list[Callable[[], object]], n: int, repeats: int, stat: str = "min"
           ) -> list[float]:
    """M values/s of each of ``fns``, timed in turn ``repeats`` times (after one
    warm-up each), so that a change of load hits all of them alike."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ts in zip(fns, times):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [n / STATS[stat](ts) / 1e6 for ts in times]


def dataset(name: str, fmt: lp.FloatFormat, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "normal8":
        return (rng.standard_normal(n) * 8).astype(np.float32)
    lo = fmt.smallest_subnormal_exponent
    hi = np.log2(fmt.max)
    mag = np.exp2(rng.uniform(lo, hi, n))
    sign = rng.choice(np.array([-1.0, 1.0]), n) if fmt.signed else 1.0
    return (mag * sign).astype(np.float32)


def small_call() -> str:
    """The cost of a call on 10 float32 values (median of many), lowprec against
    ml_dtypes' ``astype`` (fp8 E4M3, rne)."""
    import ml_dtypes

    x = np.linspace(-3, 3, 10).astype(np.float32)

    def median_us(fn: Callable[[], object], reps: int = 20000) -> float:
        fn()
        times = []
        for _ in range(reps):
            t = time.perf_counter_ns()
            fn()
            times.append(time.perf_counter_ns() - t)
        return statistics.median(times) / 1000

    ours = median_us(lambda: lp.round_to(x, "fp8_e4m3"))
    ml = median_us(lambda: x.astype(ml_dtypes.float8_e4m3fn))
    return (f"A call on 10 float32 values (fp8 E4M3, rne, median of 20,000): lowprec "
            f"`round_to` {ours:.2f} µs, ml_dtypes `astype` {ml:.2f} µs (target <= 2 µs).")


def with_threads(k: int, fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        old = os.environ.get("LOWPREC_NUM_THREADS")
        os.environ["LOWPREC_NUM_THREADS"] = str(k)
        try:
            return fn()
        finally:
            if old is None:
                del os.environ["LOWPREC_NUM_THREADS"]
            else:
                os.environ["LOWPREC_NUM_THREADS"] = old
    return run


# ------------------------------------------------------------- the machine
def _copy_kernel() -> Callable[[np.ndarray, np.ndarray], None]:
    """A plain element-by-element copy compiled as lowprec's kernels are (numba,
    releasing the GIL): what a kernel with no arithmetic at all would do."""
    from numba import njit

    @njit(nogil=True, boundscheck=False)
    def copy(x: np.ndarray, out: np.ndarray) -> None:
        for i in range(x.shape[0]):
            out[i] = x[i]
    return copy


def ceilings(x: np.ndarray, repeats: int, stat: str = "min") -> dict[str, float]:
    """What this machine allows any kernel, measured on ``x``:

    * ``fill``: ``np.empty`` then ``fill``, as a fraction of ``astype``'s time:
      the page faults of a fresh result (the kernel zeroes each page before the
      first write to it) are paid by any fresh result, and ``astype`` is little
      more than them;
    * ``copy2_out`` / ``copy2_fresh``: a compiled plain copy on two threads over
      one, into an existing array and into a fresh one: the most two threads can
      give where memory, not arithmetic, sets the pace.
    """
    from concurrent.futures import ThreadPoolExecutor

    copy = _copy_kernel()
    n = x.shape[0]
    half = n // 2
    buf = np.empty_like(x)
    copy(x[:8], buf[:8])
    pool = ThreadPoolExecutor(max_workers=1)

    def two(out: np.ndarray) -> np.ndarray:
        job = pool.submit(copy, x[half:], out[half:])
        copy(x[:half], out[:half])
        job.result()
        return out

    astype, fill = paired([lambda: x.astype(np.float32),
                           lambda: np.empty_like(x).fill(0)], n, repeats, stat)
    one_out, two_out = paired([lambda: copy(x, buf), lambda: two(buf)], n, repeats, stat)
    one_fresh, two_fresh = paired([lambda: copy(x, np.empty_like(x)),
                                   lambda: two(np.empty_like(x))], n, repeats, stat)
    pool.shutdown()
    return {"fill": astype / fill, "copy2_out": two_out / one_out,
            "copy2_fresh": two_fresh / one_fresh}


def ceilings_text(c: dict[str, float], n: int) -> str:
    return (f"The machine, in the same run ({n:,} float32): allocating a fresh array and "
            f"filling it (`np.empty` + `fill`) takes {c['fill']:.2f} of `astype`'s time (the "
            f"page faults any fresh result pays); a plain compiled copy runs "
            f"{c['copy2_out']:.2f}x faster on two threads than on one into an existing array "
            f"and {c['copy2_fresh']:.2f}x into a fresh one.")


# ------------------------------------------------------------------ CPFloat
# CPFloat's cpfloatf, one thread, timed by a small C driver (cpfloat_driver.c)
# compiled here against CPFloat's header-only sources (its src/ folder).
_CPFLOAT_MODES = {"rne": 1, "rna": -1, "rup": 2, "rdown": 3, "rtz": 4, "stochastic": 5, "odd": 7}


def build_cpfloat(src: str, workdir: str) -> str:
    """Compile cpfloat_driver.c against CPFloat's sources in ``src``; the binary's path."""
    exe = os.path.join(workdir, "cpfloat_driver")
    driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpfloat_driver.c")
    subprocess.run(["cc", "-O3", "-march=native", "-std=gnu99", "-w", "-I", src, driver,
                    "-o", exe, "-lm"], check=True)
    return exe


def cpfloat_rate(exe: str, data_file: str, n: int, fmt: lp.FloatFormat, mode: str,
                 repeats: int, stat: str = "min") -> tuple[float, float] | None:
    """M values/s of CPFloat on the values in data_file, and of a memcpy of the
    same bytes timed alternately with it in the same process (its limit, as
    ``np.copyto`` is lowprec's); None: no such mode.

    CPFloat models a format by precision, exponent range and whether it has
    infinities; for fn/fnuz/fp4/fp6 formats its results differ from lowprec's
    at the top of the range (this is a speed comparison)."""
    if mode not in _CPFLOAT_MODES or not (fmt.signed and fmt.has_subnormals):
        return None
    cmd = [exe, data_file, str(n), str(fmt.precision), str(fmt.emin), str(fmt.emax),
           str(int(fmt.has_inf)), str(_CPFLOAT_MODES[mode]), str(repeats)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
    # (median, bits, best, best memcpy, median memcpy)
    t, copy = (out[2], out[3]) if stat == "min" else (out[0], out[4])
    return n / float(t) / 1e6, n / float(copy) / 1e6


# --------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"10**6 values, 3 repeats, formats {' '.join(QUICK_FORMATS)}")
    p.add_argument("--n", type=int, default=None, help="values per data set (default 10**7)")
    p.add_argument("--repeats", type=int, default=None, help="timings per figure (default 5)")
    p.add_argument("--stat", choices=sorted(STATS), default="min",
                   help="a figure from its timings: the best (default) or the median")
    p.add_argument("--formats", nargs="+", default=None)
    p.add_argument("--modes", nargs="+", default=MODES)
    p.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--cpfloat", metavar="SRC",
                   help="CPFloat's src/ folder (header-only; see the module docstring)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--markdown", metavar="FILE",
                   help="also write the per-format summary as a Markdown table")
    p.add_argument("--readme", metavar="README",
                   help="replace the summary table between the file's <!-- bench_round --> "
                        "markers with this run's")
    args = p.parse_args(argv)
    n = args.n or (10**6 if args.quick else 10**7)
    repeats = args.repeats or (3 if args.quick else 5)
    formats = args.formats or (QUICK_FORMATS if args.quick else FORMATS)

    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    small = small_call()
    print(small + "\n")
    machine = ceilings(dataset("normal8", lp.get_format("fp16"), n, args.seed), repeats,
                       args.stat)
    small += "\n\n" + ceilings_text(machine, n)
    print(ceilings_text(machine, n) + "\n")
    what = "best" if args.stat == "min" else "median"
    print(f"round_to on {n:,} float32 values, {what} of {repeats}, each timing paired with "
          f"one of its limit; M values/s (wall clock); "
          f"{os.cpu_count()} CPUs, load average {load}\n")
    head = ["format", "data", "thr", "out", "limit", "ml_dt"] + args.modes + ["worst/limit"]
    rows: list[list[str]] = []
    worst = {"fresh": float("inf"), "out=": float("inf")}
    speedup: list[float] = []
    vs_cpfloat: list[float] = []
    # Per format, the worst over modes and data sets of each ratio (the summary table).
    summary: dict[str, dict[str, list[float]]] = {}
    workdir = tempfile.mkdtemp(prefix="bench_round_")
    cp_exe = build_cpfloat(args.cpfloat, workdir) if args.cpfloat else None
    for name in formats:
        fmt = lp.get_format(name)
        ref_dt = reference_dtype(fmt)
        for data in args.datasets:
            x = dataset(data, fmt, n, args.seed)
            buf = np.empty_like(x)
            limit_fn: dict[str, Callable[[], object]] = {
                "fresh": lambda x=x: x.astype(np.float32),
                "out=": lambda x=x, buf=buf: np.copyto(buf, x)}
            # Each mode's timings on every thread count alternate with one another and
            # with the limit (and, for rne into a fresh array, with ml_dtypes), so that
            # a change of load hits all of them alike.
            ml = None
            one_ratio: dict[tuple[str, str], float] = {}  # one thread, over its limit
            table: dict[tuple[int, str], list[tuple[float, float]]] = {}
            cell = summary.setdefault(name, {})
            for kind in ("fresh", "out="):
                for mode in args.modes:
                    kw: dict[str, object] = {"rng": 1} if mode == "stochastic" else {}
                    if kind == "out=":
                        kw["out"] = buf

                    def call(mode=mode, kw=kw, x=x, fmt=fmt):
                        return lp.round_to(x, fmt, mode, **kw)
                    fns = [limit_fn[kind]] + [with_threads(t, call) for t in args.threads]
                    with_ml = ref_dt is not None and kind == "fresh" and mode == "rne"
                    if with_ml:
                        fns.append(lambda x=x, dt=ref_dt: x.astype(dt))
                    got = paired(fns, n, repeats, args.stat)
                    lim, by_threads = got[0], dict(zip(args.threads, got[1:]))
                    for threads, r in by_threads.items():
                        table.setdefault((threads, kind), []).append((r, lim))
                    if 1 not in by_threads:
                        continue
                    r1 = by_threads[1]
                    one_ratio[mode, kind] = r1 / lim
                    cell.setdefault(kind + (" sr" if mode == "stochastic" else ""),
                                    []).append(r1 / lim)
                    if kind == "fresh":
                        cell.setdefault("rate", []).append(r1)
                    if with_ml:
                        ml = got[-1]
                        cell.setdefault("ml", []).append(r1 / ml)
                    for threads, r in by_threads.items():
                        if threads != 1:
                            speedup.append(r / r1)
                            cell.setdefault("threads", []).append(r / r1)
            for threads in args.threads:
                for kind in ("fresh", "out="):
                    pairs = table[threads, kind]
                    ratio = min(r / lim for r, lim in pairs)
                    if threads == 1:
                        worst[kind] = min(worst[kind], ratio)
                    rows.append([name, data, str(threads), kind,
                                 f"{max(lim for _, lim in pairs):.0f}",
                                 f"{ml:.0f}" if ml and kind == "fresh" else "-"]
                                + [f"{r:.0f}" for r, _ in pairs] + [f"{ratio:.2f}"])
            if cp_exe:
                data_file = os.path.join(workdir, "x.f32")
                x.tofile(data_file)
                cp = [cpfloat_rate(cp_exe, data_file, n, fmt, mode, repeats, args.stat)
                      for mode in args.modes]
                copies = [c[1] for c in cp if c]
                rows.append([name, data, "1", "cpfloat",
                             f"{max(copies):.0f}" if copies else "-", "-"]
                            + [f"{c[0]:.0f}" if c else "-" for c in cp] + ["-"])
                for mode, c in zip(args.modes, cp):
                    if c:
                        # CPFloat writes into an existing array: against out=, each
                        # over the limit timed with it (np.copyto, memcpy: the same copy).
                        vs = one_ratio[mode, "out="] / (c[0] / c[1])
                        vs_cpfloat.append(vs)
                        summary[name].setdefault("cpfloat", []).append(vs)
        print_table(head, rows[-(len(args.threads) * 2 * len(args.datasets)
                                 + (len(args.datasets) if args.cpfloat else 0)):],
                    first=name == formats[0])
    print(f"\nlimit: numpy astype (fresh rows) or np.copyto (out= rows), its best timing "
          f"paired with the row's (cpfloat rows: memcpy, in CPFloat's process); ml_dt: "
          f"ml_dtypes astype (rne); worst/limit: the smallest of the row's paired ratios.\n"
          f"one thread: worst fresh/astype {worst['fresh']:.2f} (target 0.8), worst "
          f"out=/copyto {worst['out=']:.2f} (target 0.6)")
    if speedup:
        print(f"two threads over one: min {min(speedup):.2f}x, median "
              f"{statistics.median(speedup):.2f}x, max {max(speedup):.2f}x (target 1.6x at 10**7)")
    if vs_cpfloat:
        print(f"lowprec (1 thread, out=) over CPFloat (1 thread, into an existing array), "
              f"each over its paired copy (np.copyto, memcpy): "
              f"min {min(vs_cpfloat):.2f}x, "
              f"median {statistics.median(vs_cpfloat):.2f}x (target >= 1)")
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(markdown(summary, n, args, load) + "\n" + small + "\n")
        print(f"summary table written to {args.markdown}")
    if args.readme:
        replace_block(args.readme, markdown(summary, n, args, load) + "\n" + small + "\n")
        print(f"summary table replaced in {args.readme}")


def replace_block(path: str, table: str) -> None:
    """Put ``table`` between the ``<!-- bench_round -->`` and ``<!-- /bench_round -->``
    lines of ``path`` (which must have them)."""
    with open(path) as fh:
        text = fh.read()
    start, end = "<!-- bench_round -->\n", "<!-- /bench_round -->"
    if start not in text or end not in text:
        raise SystemExit(f"{path} has no {start.strip()} ... {end} block to replace")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as fh:
        fh.write(head + start + table + end + tail)


def markdown(summary: dict[str, dict[str, list[float]]], n: int, args: argparse.Namespace,
             load: str) -> str:
    """The per-format summary: the worst (smallest) ratio over every mode and data
    set, one thread unless said; the table of docs/performance.md."""
    def worst(cell: dict[str, list[float]], key: str) -> str:
        """The smallest ratio, and the median in brackets (one slow timing on a
        shared machine is the smallest more often than the code is)."""
        v = cell.get(key)
        return f"{min(v):.2f}x ({statistics.median(v):.2f}x)" if v else "-"

    lines = [f"`round_to` on {n:,} float32 values, modes {', '.join(args.modes)}, data "
             f"{', '.join(args.datasets)}; each cell is the worst over them and, in brackets, the "
             f"median; the deterministic modes apart from stochastic rounding. Each figure is "
             f"the {'best' if args.stat == 'min' else 'median'} of {args.repeats or 5} timings, "
             f"each paired with one of its limit (load average {load} at the start).", "",
             "| format | M values/s (fresh, 1 thread) | fresh / `astype` | `out=` / `copyto` "
             "| stochastic: fresh, `out=` | 2 threads / 1 | `rne` / ml_dtypes "
             "| `out=` / CPFloat (1 thread) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, cell in summary.items():
        rate_lo = min(cell["rate"]) if cell.get("rate") else 0
        rate_hi = max(cell["rate"]) if cell.get("rate") else 0
        lines.append(f"| {name} | {rate_lo:.0f}–{rate_hi:.0f} | {worst(cell, 'fresh')} | "
                     f"{worst(cell, 'out=')} | {worst(cell, 'fresh sr')}, "
                     f"{worst(cell, 'out= sr')} | {worst(cell, 'threads')} | "
                     f"{worst(cell, 'ml')} | {worst(cell, 'cpfloat')} |")
    return "\n".join(lines) + "\n"


def print_table(head: list[str], rows: list[list[str]], first: bool) -> None:
    widths = [max(6, len(h)) for h in head]
    widths[1] = 10
    if first:
        print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
        print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)), flush=True)


if __name__ == "__main__":
    main()
