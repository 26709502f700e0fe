"""The kernel router (``lowprec._kernels.route``) and the cache stamp that covers
every kernel source."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lowprec._kernels import _cache, convert, engine, route, sr, vec
from lowprec._kernels.params import RNE, RTZ, STOCHASTIC, format_params
from lowprec.formats import FloatFormat, get_format, list_formats

ROOT = Path(__file__).resolve().parent.parent
_NONE = np.empty(0, np.uint64)


def test_the_stamp_covers_kernel_sources_in_sub_folders(tmp_path: Path) -> None:
    # Kernels moved into a sub-folder must still make every cached kernel stale
    # when they change (numba's own stamp covers the kernel's file only).
    stamp = _cache.sources_stamp.__wrapped__
    (tmp_path / "top.py").write_text("a = 1\n")
    sub = tmp_path / "twins" / "deeper"
    sub.mkdir(parents=True)
    (sub / "kernel.py").write_text("b = 1\n")
    before = stamp(str(tmp_path))
    (sub / "kernel.py").write_text("b = 2\n")  # a change two folders down
    after = stamp(str(tmp_path))
    assert after != before
    (sub / "kernel.py").rename(tmp_path / "twins" / "kernel.py")  # the same file moved up
    assert stamp(str(tmp_path)) not in (before, after)
    cache = tmp_path / "twins" / "__pycache__"
    cache.mkdir()
    moved = stamp(str(tmp_path))
    (cache / "kernel.cpython.py").write_text("compiled")  # not a source
    assert stamp(str(tmp_path)) == moved
    assert _cache._sources(str(tmp_path)) == ["top.py", "twins/kernel.py"]


# ------------------------------------------------------------ the table
# Written from the rules of docs/kernels.md, not from the router's output:
# float32 in, every format but fp32 and ue5m3 takes a bits32 kernel (bits32_direct's,
# its full-range table for bf16/tf32, the plain one of those without
# saturation or flushing; pow2's for e8m0); float64 in goes through float32
# rounded to odd first (odd64), except stochastic rounding, which needs every
# input bit (the scalar fast kernel, in stochastic_kernel's blocks); fp32
# itself takes fast.vec32_kernel (float32 in) or the scalar kernels.
FULL = {"bf16", "tf32"}


def _expected(name: str, mode: int, is64: bool, codes: bool, saturate: bool,
              ftz: bool) -> tuple[str, ...]:
    key = f"[({mode}, {codes})]"
    if name == "fp32":
        if mode == STOCHASTIC:
            return ("convert.stochastic_kernel",) if (is64 or ftz) else ("fast.vec32_kernel",)
        return ("fast.fast_kernel",) if (is64 or ftz) else ("fast.vec32_kernel",)
    if name == "ue5m3":  # unsigned with subnormals: no bits32 format, the compiled engine
        if mode == STOCHASTIC:
            return ("convert.stochastic_kernel",)
        return ("engine.encode_kernel" if codes else "engine.round_kernel",)
    if is64 and mode == STOCHASTIC:
        return ("convert.stochastic_kernel",)
    if name == "e8m0":
        twin = "pow2.KERNELS" + key
    elif name in FULL:
        table = "FULL_KERNELS" if (saturate or ftz) else "PLAIN_KERNELS"
        twin = f"bits32_direct.{table}{key}"
    else:
        twin = "bits32_direct.KERNELS" + key + (".addition" if mode == RNE else "")
    return ("odd64.to_float32_odd", twin) if is64 else (twin,)


def test_the_routing_table_names_the_kernel_of_every_format_mode_and_dtype() -> None:
    rows = 0
    for fmt in list_formats():
        for mode, is64, codes, saturate, ftz in itertools.product(
                range(7), (False, True), (False, True), (False, True), (False, True)):
            want = _expected(fmt.name, mode, is64, codes, saturate, ftz)
            assert route.serving(fmt, mode, is64, codes, saturate, ftz) == want, \
                (fmt.name, mode, is64, codes, saturate, ftz)
            rows += 1
        # the block quantizers' float32 passes: a bits32 kernel, from float32 and float64
        assert route.takes_bits32(fmt) == route.takes_bits32(fmt, True) == \
            (fmt.name not in ("fp32", "ue5m3")), fmt.name
    assert rows == len(list_formats()) * 7 * 16


# The arithmetic rows, from the rules of docs/arithmetic.md: add/sub/mul try the
# fused arith32 pass first in the deterministic modes for every format but fp32,
# e8m0 and ue5m3; the result is otherwise computed in float64 and rounded once by
# encode (its float64 -> codes kernels of the table above): exactly for the sums
# of fp16 and every 8/6/4-bit signed format and for the products of every signed
# format with subnormals, rounded to odd by TwoSum for the sums of bf16/tf32/fp32
# and by fma_odd/div_sqrt_odd for fma, div and sqrt; stochastic sums of
# bf16/tf32/fp32, flags=True and the formats without float64 route (e8m0: no
# subnormals, ue5m3: unsigned) take the integer kernel, whose stochastic div, sqrt
# and fma go through its fast pass first. float32 operands are checked by the
# float32 -> codes kernel rounding toward zero (where the table has one), the
# others by arith.to_code_kernel.
ARITH_OPS = ("add", "sub", "mul", "div", "sqrt", "fma")
NO_FUSED = {"fp32", "e8m0", "ue5m3"}
NO_FLOAT64 = {"e8m0", "ue5m3"}
WIDE_SUMS = {"bf16", "tf32", "fp32"}


def _expected_arith(name: str, mode: int, op: str, is64: bool, flags: bool,
                    saturate: bool, ftz: bool) -> tuple[str, ...]:
    stochastic = mode == STOCHASTIC
    names: list[str] = []
    if not flags and not stochastic and op in ("add", "sub", "mul") and name not in NO_FUSED:
        names.append(f"arith32._KERNELS[({2 if op == 'mul' else 0}, {mode}, ")  # a prefix
    float32_check = not is64 and name not in ("fp32", "ue5m3")
    names.append(_expected(name, RTZ, False, True, False, False)[0] if float32_check
                 else "arith.to_code_kernel")
    integer = ("arith_fast.sr_fast_pass", "arith.op_kernel") if (
        stochastic and op in ("div", "sqrt", "fma")) else ("arith.op_kernel",)
    if flags or name in NO_FLOAT64:
        return (*names, *integer)
    encode = _expected(name, mode, True, True, saturate, ftz)
    if op in ("add", "sub") and name in WIDE_SUMS:
        return (*names, *integer) if stochastic else (*names, "arith_fast.fma_odd_kernel", *encode)
    if op in ("add", "sub", "mul"):
        return (*names, *encode)
    if stochastic:
        return (*names, *integer)
    odd = "arith_fast.fma_odd_kernel" if op == "fma" else "arith_fast.div_sqrt_odd_kernel"
    return (*names, odd, *encode)


def test_the_routing_table_names_the_route_of_every_arithmetic_operation() -> None:
    from lowprec._kernels import route_arith

    rows = 0
    for fmt in list_formats():
        for mode, is64, i, flags, limits in itertools.product(
                range(7), (False, True), range(6), (False, True), (False, True)):
            want = _expected_arith(fmt.name, mode, ARITH_OPS[i], is64, flags, limits, limits)
            got = route_arith.serving_arith(fmt, mode, i, is64, limits, limits, flags)
            what = (fmt.name, mode, ARITH_OPS[i], is64, flags, limits)
            assert len(got) == len(want), (what, got, want)
            assert all(g == w or (w.endswith(", ") and g.startswith(w))
                       for g, w in zip(got, want)), (what, got, want)
            rows += 1
    assert rows == len(list_formats()) * 7 * 2 * 6 * 4


@pytest.mark.parametrize("final, op, fmt, mode", [
    ("integer", "add", "bf16", "stochastic"), ("integer_sr", "div", "fp16", "stochastic"),
    ("div_sqrt_odd", "sqrt", "bf16", "rtz"), ("fma_odd", "fma", "fp8_e4m3", "rup"),
    ("twosum_odd", "sub", "fp32", "rne"), ("float64", "mul", "fp32", "rdown"),
    ("float64", "add", "fp16", "rtz")])
def test_lowprec_arith_runs_the_route_the_router_names(monkeypatch: pytest.MonkeyPatch,
                                                       final: str, op: str, fmt: str,
                                                       mode: str) -> None:
    # lowprec.arith asks the router: the kernel of the route named runs, the others do not.
    import lowprec as lp
    from lowprec._kernels import params, route_arith

    f = get_format(fmt)
    i, m = ARITH_OPS.index(op), params.MODE_INT[mode]
    assert route_arith.arith_route(f, m, i, False, False, False, False).final == final
    ran: list[str] = []
    for attr in ("op_kernel", "sr_kernel", "fma_odd", "div_sqrt_odd_kernel"):
        real = getattr(route_arith, attr)
        monkeypatch.setattr(route_arith, attr,
                            lambda *a, _r=real, _n=attr: (ran.append(_n), _r(*a))[1])
    x = lp.round_to(np.linspace(0.25, 3.0, 50), f)
    args = (x,) if op == "sqrt" else (x, x[::-1]) if op != "fma" else (x, x[::-1], x)
    want = getattr(lp, op)(*args, f, mode, rng=1 if mode == "stochastic" else None,
                           flags=True)[0]
    ran.clear()
    got = getattr(lp, op)(*args, f, mode, rng=1 if mode == "stochastic" else None)
    assert np.array_equal(got, want)
    expect = {"integer": {"op_kernel"}, "integer_sr": {"sr_kernel"}, "float64": set(),
              "div_sqrt_odd": {"div_sqrt_odd_kernel"}, "fma_odd": {"fma_odd"},
              "twosum_odd": {"fma_odd"}}[final]
    assert set(ran) == expect, ran


# The kernels without a numpy twin (compiled in place), by the model or pass they serve.
COMPILED = {"exact": "matmul.exact_kernel", "unpack": "matmul.unpack_matrix",
            "sequential": "matmul.sequential_kernel", "sequential_fast": "matmul.sequential_fast",
            "pairwise": "matmul.pairwise_kernel", "blocked": "matmul.blocked_kernel",
            "tensor_core": "matmul.tensor_core_kernel", "tensor_core_grid": "tc_fast.tc_grid",
            "block_mma": "blockmma.block_mma_kernel", "inspect_measure": "inspect_stats.measure_pass",
            "inspect_fields": "inspect_stats.field_counts",
            "inspect_amax": "inspect_stats.finite_amax"}


def test_the_router_names_the_kernels_without_a_twin() -> None:
    import importlib

    from numba.core.registry import CPUDispatcher

    from lowprec._kernels import route_compiled

    assert set(route_compiled.ROUTES) == set(COMPILED)
    for name, where in COMPILED.items():
        module, attr = where.split(".")
        want = getattr(importlib.import_module(f"lowprec._kernels.{module}"), attr)
        assert route_compiled.kernel(name) is want, name
        assert isinstance(want, CPUDispatcher) or name == "tensor_core_grid"  # a driver
    with pytest.raises(KeyError, match="routes: block_mma"):
        route_compiled.kernel("sequentail")


# Outside _kernels/, a module imports only these of lowprec._kernels (docs/kernels.md,
# "Who may import what"): the routers; the entry points that ask the router
# themselves and hold the numpy twin that answers while a kernel compiles (convert,
# blocks, recipe, gemm, amd); the reference (engine, vec) and the cold path's short cut
# (quick, held equal to vec by tests/test_quick.py); and the plumbing without a
# kernel of its own to pick (params: constants and format parameters; sr: SR_BLOCK,
# the block of the random-word stream seeds are drawn for; _cache: the cache folder).
ALLOWED = {"route", "route_arith", "route_compiled", "convert", "blocks", "recipe", "gemm",
           "amd", "engine", "vec", "quick", "params", "sr", "_cache"}
#: The twins (and their parts), and warm (the router's half that compiles in the
#: background; route re-exports its names): reached through a router only.
TWINS = {"warm", "arith", "arith32", "arith_fast", "bits32", "bits32_direct", "blockmma",
         "direct_loop", "direct_params", "direct_round", "fast", "inspect_stats", "matmul",
         "memory", "odd64", "pow2", "pow2_round", "tc_fast", "tc_float", "u32"}


def kernel_imports(path: Path, package: Path = ROOT / "lowprec") -> list[tuple[int, str]]:
    """(line, module of lowprec._kernels) for every import of one in ``path``, relative
    or absolute, inside functions included (``from .._kernels import a as b``,
    ``from ._kernels.a import f``, ``import lowprec._kernels.a``)."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = ["lowprec", *path.relative_to(package).with_suffix("").parts[:-1]]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            target = [*base, *(node.module or "").split(".")] if node.module else base
            if target == ["lowprec"]:  # the package itself, then any of its modules
                found += [(node.lineno, a.name) for a in node.names if a.name == "_kernels"]
            elif target[:2] == ["lowprec", "_kernels"]:
                if len(target) > 2:
                    found.append((node.lineno, target[2]))
                else:
                    found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".")[2]) for a in node.names
                      if a.name.startswith("lowprec._kernels.")]
    return found


def test_no_module_outside_the_kernels_imports_a_twin() -> None:
    package = ROOT / "lowprec"
    kernels = package / "_kernels"
    # every module of _kernels is one or the other, so a new one must be placed
    names = {p.stem for p in kernels.glob("*.py") if p.stem != "__init__"}
    assert names == ALLOWED | TWINS, names ^ (ALLOWED | TWINS)
    assert not ALLOWED & TWINS
    bad, seen = [], set()
    for path in sorted(package.rglob("*.py")):
        if kernels in path.parents:
            continue
        for line, name in kernel_imports(path, package):
            seen.add(name)
            if name not in ALLOWED:
                bad.append(f"{path.relative_to(package)}:{line} imports _kernels.{name}")
    assert bad == []
    assert {"route", "route_arith", "route_compiled", "convert"} <= seen  # the check sees imports


def test_every_numba_kernel_lives_under_the_kernels() -> None:
    # Outside _kernels/ numba is imported only to listen to its compile events
    # (lowprec warmup's progress), never to compile a kernel.
    import ast

    package = ROOT / "lowprec"
    used = set()
    for path in sorted(package.rglob("*.py")):
        if package / "_kernels" in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            used |= {(path.relative_to(package).as_posix(), n) for n in names
                     if n.split(".")[0] == "numba"}
    assert used == {("commands/_compiling.py", "numba.core")}, used


def test_the_import_check_sees_a_planted_twin(tmp_path: Path) -> None:
    pkg = tmp_path / "lowprec" / "sub"
    pkg.mkdir(parents=True)
    planted = pkg / "mod.py"
    planted.write_text("from .._kernels import route, bits32 as b\n"
                       "def f():\n    from .._kernels.odd64 import supports\n"
                       "import lowprec._kernels.fast\nfrom lowprec._kernels import tc_fast\n"
                       "from ..other import _kernels\nfrom .. import _kernels, formats\n")
    assert sorted(kernel_imports(planted, tmp_path / "lowprec")) == [
        (1, "bits32"), (1, "route"), (3, "odd64"), (4, "fast"), (5, "tc_fast"), (7, "_kernels")]


# ------------------------------------------------- twins against the reference
def _inputs(fmt: Any, is64: bool, rng: np.random.Generator, size: int) -> np.ndarray:
    """Bit patterns around every value (or a sample of them) of ``fmt``, the
    midpoints between neighbours, specials and random patterns."""
    P = format_params(fmt)
    codes = np.arange(1 << fmt.width) if fmt.width <= 8 else rng.integers(0, 1 << fmt.width, size)
    v = np.unique(vec.decode(P, codes))
    v = v[np.isfinite(v)]
    mids = (v[1:] + v[:-1]) / 2
    ft, ut = (np.float64, np.uint64) if is64 else (np.float32, np.uint32)
    with np.errstate(over="ignore"):
        base = np.concatenate([v, mids, -v, -mids, 3 * v, [np.inf, -np.inf, np.nan, 0.0, -0.0,
                                                          5e-324, 1e-45, 3e38]]).astype(ft)
    b = base.view(ut)
    top = np.iinfo(ut).max
    quiet_nan = 0x7FF8000000000001 if is64 else 0x7F800001
    return np.concatenate([b, b + ut(1), b - ut(1), rng.integers(0, top, size, dtype=ut),
                           np.array([quiet_nan, quiet_nan | (1 << (63 if is64 else 31))], ut)])


def _reference(P: Any, b: np.ndarray, mode: int, saturate: bool, ftz: bool,
               words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """engine.convert_one of every element (codes, flags, status), compiled."""
    n = b.shape[0]
    codes, flags, status = np.zeros(n, np.int64), np.zeros(n, np.uint8), np.zeros(n, np.uint8)
    start = 0
    while start < n:  # the kernel stops at an element without a code: note it, go on
        bad, st = engine.encode_kernel(P, b[start:], b.dtype == np.uint64, mode, saturate, ftz,
                                       words[start:] if words.shape[0] else words,
                                       codes[start:], flags[start:], True)
        if bad < 0:
            break
        status[start + bad] = st
        codes[start + bad] = 0
        start += bad + 1
    return codes, flags, status


def test_the_numpy_engine_is_the_reference_bit_for_bit() -> None:
    # vec serves the first calls: every registered format (and an unsigned
    # one), every mode, float32 and float64 in, saturate and flush-to-zero:
    # codes, flags and statuses equal round_pack's, values decode_one's.
    rng = np.random.default_rng(39)
    fmts = [*list_formats(), FloatFormat("u_e4m3", 4, 3, 7, signed=False, has_inf=False,
                                         nan="none", has_subnormals=True)]
    for fmt in fmts:
        P = format_params(fmt)
        for is64 in (False, True):
            b = _inputs(fmt, is64, rng, 300)
            seeds = rng.integers(0, 2**63, -(-b.shape[0] // sr.SR_BLOCK), dtype=np.uint64)
            for mode in range(7):
                words = vec.sr_words(seeds, 0, b.shape[0]) if mode == STOCHASTIC else _NONE
                for saturate, ftz in itertools.product((False, True), (False, True)):
                    got = vec.convert(P, b, mode, saturate, ftz,
                                      words if mode == STOCHASTIC else None)
                    want = _reference(P, b, mode, saturate, ftz, words)
                    ok = want[2] == 0
                    what = (fmt.name, is64, mode, saturate, ftz)
                    assert np.array_equal(got[2], want[2]), what
                    assert np.array_equal(got[0][ok], want[0][ok]), what
                    assert np.array_equal(got[1][ok], want[1][ok]), what
        codes = np.arange(min(1 << fmt.width, 1 << 16), dtype=np.uint32)
        values = np.empty(codes.shape)
        engine.decode_kernel(P, codes, values)
        assert np.array_equal(vec.decode(P, codes).view(np.uint64), values.view(np.uint64))


def test_the_numpy_round_pack_is_the_reference_on_wide_significands() -> None:
    # explain() rounds exact rationals through vec.round_pack: 62-bit
    # significands (beyond float64's exact integers) and sticky bits.
    rng = np.random.default_rng(62)
    n = 300
    sig = rng.integers(1, 1 << 62, n, dtype=np.int64) >> rng.integers(0, 62, n)
    sig[sig == 0] = 1
    sig[:4] = [(1 << 62) - 1, (1 << 53) + 1, (1 << 61), 3]
    lsb = rng.integers(-200, 20, n) - 61
    neg = rng.integers(0, 2, n).astype(bool)
    sticky = rng.integers(0, 2, n).astype(np.int64)
    words = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    for name in ("fp8_e4m3", "bf16", "fp4_e2m1", "fp8_e5m2fnuz", "e8m0"):
        P = format_params(get_format(name))
        for mode in range(7):
            got = vec.round_pack(P, neg, sig, lsb, mode, False, False, words, sticky)
            for i in range(n):
                want = engine.round_pack(P, bool(neg[i]), sig[i], int(lsb[i]), bool(sticky[i]),
                                         mode, False, False, words[i])
                assert (got[0][i], got[1][i], got[2][i]) == tuple(map(int, want)), (name, mode, i)


def test_the_numpy_words_are_the_kernels_words() -> None:
    seeds = np.random.default_rng(1).integers(0, 2**64 - 1, 3, dtype=np.uint64)
    n = 2 * sr.SR_BLOCK + 77
    assert np.array_equal(vec.sr_words(seeds, 0, n), sr.sr_expand(seeds, n))
    assert np.array_equal(vec.sr_words(seeds, 5000, 100), sr.sr_expand(seeds, n)[5000:5100])


def _twin_rows(modes: tuple[int, ...]) -> list[tuple]:
    """One row per distinct compiled kernel the table routes float32 input to."""
    rows, seen = [], set()
    for fmt in list_formats():
        for mode, codes, saturate, ftz in itertools.product(modes, (False, True), (False, True),
                                                            (False, True)):
            name = route.serving(fmt, mode, False, codes, saturate, ftz)
            if name not in seen:
                seen.add(name)
                rows.append((fmt, mode, codes, saturate, ftz))
    return rows


def _check_twin(fmt: Any, mode: int, codes: bool, saturate: bool, ftz: bool) -> None:
    P = format_params(fmt)
    rng = np.random.default_rng(mode)
    b = _inputs(fmt, False, rng, 2000)
    if not fmt.has_nan:
        b = b[~np.isnan(b.view(np.float32))]
    seeds = rng.integers(0, 2**63, -(-b.shape[0] // sr.SR_BLOCK), dtype=np.uint64)
    words = vec.sr_words(seeds, 0, b.shape[0]) if mode == STOCHASTIC else _NONE
    want_codes, _, status = _reference(P, b, mode, saturate, ftz, words)
    assert not status.any()
    out = np.empty(b.shape[0], fmt.code_dtype if codes else np.float32)
    path = convert.to_codes if codes else convert.to_values
    assert path(fmt, b, mode, out, saturate=saturate, ftz=ftz, seeds=seeds) == (-1, 0)
    if codes:
        assert np.array_equal(out, want_codes.astype(fmt.code_dtype))
    else:
        want = vec.decode(P, want_codes).astype(np.float32)
        assert np.array_equal(out.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("row", _twin_rows((RNE,)), ids=lambda r: f"{r[0].name}-{r[1:]}")
def test_every_routed_twin_in_rne_is_the_reference(row: tuple) -> None:
    _check_twin(*row)


@pytest.mark.slow
@pytest.mark.parametrize("row", _twin_rows(tuple(range(7))), ids=lambda r: f"{r[0].name}-{r[1:]}")
def test_every_routed_twin_is_the_reference(row: tuple) -> None:
    _check_twin(*row)


# ------------------------------------------------------- the first call
_FIRST = """
import time, numpy as np
import lowprec as lp
from lowprec._kernels import route, warm
x = np.linspace(-500, 500, 20001, dtype=np.float32)
t = time.perf_counter()
r = lp.round_to(x, "fp8_e5m2", "rtz")
c = lp.encode(x.astype(np.float64), "fp8_e5m2", "rtz")
first = time.perf_counter() - t
served = dict(route._READY)
route.wait()
again = lp.round_to(x, "fp8_e5m2", "rtz")
print(first, sum(served.values()), len(served), all(route._READY.values()),
      warm._Compiler.started, np.array_equal(r.view(np.uint32), again.view(np.uint32)),
      np.array_equal(lp.decode(c, "fp8_e5m2"), r.astype(np.float64)))
"""


def test_a_cold_first_call_is_served_without_compiling(tmp_path: Path) -> None:
    # An empty numba cache: the first calls are served by the numpy engine
    # (nothing compiled in the calling process), the kernels are compiled in
    # the background, and a later call runs them with the same bits.
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("LOWPREC_COLD", None)
    done = subprocess.run([sys.executable, "-c", _FIRST], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    _, compiled, asked, ready, processes, same, decoded = done.stdout.split()
    assert (int(compiled), int(asked)) == (0, 3)  # bits32 to values, odd64 and bits32 to codes
    assert processes == "1"  # one compiler process for the three, asked one after another
    assert ready == same == decoded == "True"
    # (how long the first calls took is benchmarks/bench_coldstart.py's to measure)


def test_the_twins_special_codes_are_the_compiled_engines() -> None:
    # The twins' parameters hold the codes of infinity, NaN and overflow, asked
    # of vec (nothing compiled); the compiled engine gives the same ones.
    from lowprec._kernels import bits32

    for fmt in list_formats():
        P = format_params(fmt)
        for mode, saturate, ftz in itertools.product(range(7), (False, True), (False, True)):
            got = bits32.special_codes(fmt, mode, saturate, ftz)
            for name, pos_bits in (("inf", 0x7F800000), ("nan", 0x7FC00000)):
                for sign in (1, -1):
                    bits = pos_bits | (0x80000000 if sign < 0 else 0)
                    code, _, status = engine.convert_one(P, bits, False, mode, saturate, ftz,
                                                         np.uint64(0))
                    if fmt.signed or name != "nan":
                        assert got[name, sign] == (code if status == 0 else 0), (fmt.name, name)
            for sign in (1, -1):
                want = engine._overflow(P, sign < 0, mode, saturate)[0]
                assert got["ovf", sign] == want, (fmt.name, mode, saturate)


def _run_cold(script: str, x: np.ndarray, tmp_path: Path) -> str:
    """Run ``script`` (argv: x.npy, cold.npz) in a fresh process with an empty numba
    cache and LOWPREC_COLD=numpy (nothing compiles); its stdout, stripped."""
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT),
               LOWPREC_COLD="numpy")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "x.npy"),
                           str(tmp_path / "cold.npz")], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    return done.stdout.strip()


_BLOCKS = """
import sys, numpy as np
from lowprec import mx, nvfp4
from lowprec._kernels import blocks
x = np.load(sys.argv[1])
out = {}
for f in ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4", "mxint8"):
    for mode in ("rne", "rup", "odd"):
        q = mx.quantize(x, f, mode=mode)
        out[f"{f}-{mode}"] = np.concatenate([q.codes.ravel(), q.scales.ravel()])
        out[f"{f}-{mode}-values"] = q.dequantize(np.float32)
for mode, rng in (("rne", None), ("stochastic", 7)):
    q = nvfp4.quantize(np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0), mode=mode, rng=rng)
    out[f"nvfp4-{mode}"] = np.concatenate([q.codes.ravel(), q.scales.ravel()])
    out[f"nvfp4-{mode}-values"] = q.dequantize(np.float32)
compiled = [k for k in ("_mx_chunk", "_nvfp4_chunk", "nvfp4_block_amax", "_dequantize",
                        "twos_complement") if getattr(blocks, k).overloads]
np.savez(sys.argv[2], **out)
print(",".join(compiled) or "none")
"""


def test_cold_block_quantizers_are_served_by_their_reference(tmp_path: Path) -> None:
    # MX and NVFP4 ask the router too: with nothing compiled (an empty numba cache,
    # LOWPREC_COLD=numpy), no block kernel compiles in the calling process and the
    # numpy references answer with the compiled kernels' bits, random words included.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((96, 80)) * 10.0 ** rng.integers(-9, 9, (96, 80))).astype(np.float32)
    x[4, :32] = 0.0
    x[5, 7], x[6, 40], x[7, 0] = np.inf, np.nan, -np.inf
    assert _run_cold(_BLOCKS, x, tmp_path) == "none"
    from lowprec import mx, nvfp4
    from lowprec._kernels import blocks

    cold = np.load(tmp_path / "cold.npz")
    for f in ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4", "mxint8"):
        for mode in ("rne", "rup", "odd"):
            q = mx.quantize(x, f, mode=mode)
            assert np.array_equal(cold[f"{f}-{mode}"],
                                  np.concatenate([q.codes.ravel(), q.scales.ravel()]),
                                  equal_nan=True), (f, mode)
            assert np.array_equal(cold[f"{f}-{mode}-values"], q.dequantize(np.float32),
                                  equal_nan=True), (f, mode)
    for mode, seed in (("rne", None), ("stochastic", 7)):
        q = nvfp4.quantize(np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0), mode=mode,
                           rng=seed)
        assert np.array_equal(cold[f"nvfp4-{mode}"],
                              np.concatenate([q.codes.ravel(), q.scales.ravel()]),
                              equal_nan=True), mode
        assert np.array_equal(cold[f"nvfp4-{mode}-values"], q.dequantize(np.float32)), mode
    # ...and here (LOWPREC_COLD=compile) the block kernels did the work
    assert blocks._mx_chunk.overloads and blocks._nvfp4_chunk.overloads


def test_no_module_over_500_lines():
    """Issue #39: every file under lowprec/ stays readable (at most 500 lines)."""
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in (ROOT / "lowprec").rglob("*.py")}
    assert len(sizes) > 50, "the package's sources were not found"
    assert {p: n for p, n in sizes.items() if n > 500} == {}


# ------------------------------------------- the recipe's and the trainer's kernels
def _specials(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """float32 values over many binades with zeros of both signs, NaN, inf and the
    largest and smallest magnitudes sprinkled in."""
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 30, shape)).astype(np.float32)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, 40, replace=False)
    flat[picks] = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45,
                            -1e-45, 1.17e-38] * 4, np.float32)
    return x


@pytest.mark.parametrize("bf16", [True, False])
def test_the_hadamard_butterfly_twin_is_the_kernel(bf16: bool) -> None:
    from lowprec._kernels import recipe

    rng = np.random.default_rng(5)
    for n in (4, 16, 64):
        signs = rng.choice([-1.0, 1.0], n)
        x = _specials(rng, (3 * n, 2 * n))
        got, want = np.empty(x.size, np.float32), np.empty(x.size, np.float32)
        recipe._fwht_groups(x.reshape(-1), signs, 1.0 / np.sqrt(n), bf16, want)
        got[:] = recipe._fwht_reference(x.reshape(-1, n), signs, 1.0 / np.sqrt(n), bf16).ravel()
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), n
        out_t = np.empty(x.shape[::-1], np.float32)
        recipe._fwht_columns(x, signs, 1.0 / np.sqrt(n), bf16, out_t)
        ref_t = np.empty_like(out_t)
        ref_t[:] = recipe._fwht_reference(np.ascontiguousarray(x.T).reshape(-1, n), signs,
                                          1.0 / np.sqrt(n), bf16).reshape(out_t.shape)
        assert np.array_equal(ref_t.view(np.uint32), out_t.view(np.uint32)), n


@pytest.mark.parametrize("tr", [1, 16])
def test_the_nvfp4_tile_twins_are_the_kernels(tr: int) -> None:
    from lowprec._kernels import blocks, recipe

    rng = np.random.default_rng(11)
    x = _specials(rng, (64, 96))
    x[16:32, 32:48] = 0.0  # an all-zero tile
    x[48:64, :16] = 1.0  # a finite tile for the ties below
    amax = np.empty((64 // tr, 6), np.float32)
    bad = np.empty(amax.shape, np.bool_)
    recipe.tile_amax(x, tr, amax, bad)  # (warm: the kernel)
    row_amax, row_bad = np.empty(64 * 6, np.float32), np.empty(64 * 6, np.bool_)
    blocks.nvfp4_block_amax(x.reshape(-1), 96, 16, row_amax, row_bad)
    mag = x.reshape(-1, 16).view(np.uint32) & np.uint32(0x7FFFFFFF)
    assert np.array_equal(row_bad, (mag >= 0x7F800000).any(axis=1))
    finite = np.where(np.isfinite(x.reshape(-1, 16)), np.abs(x.reshape(-1, 16)), 0).max(axis=1)
    assert np.array_equal(row_amax, finite)
    assert bad.sum() > 0 and (~bad).sum() > 0
    # scales over a wide range, saturating products, every byte of random bits
    enc = (2.0 ** rng.integers(-20, 40, amax.shape)).astype(np.float32)
    rbits = rng.integers(0, 256, x.size, dtype=np.uint8)
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -1.25, -1.75,
                     -2.5, -3.5, -5.0, 7.0, -0.0], np.float32)  # every tie of E2M1, both signs
    x[48, :16] = ties / enc[48 // tr, 0]  # enc is a power of two: exact
    for stochastic in (False, True):
        want = np.empty(x.shape, np.uint8)
        recipe._tile_codes(x, tr, enc, bad, rbits, stochastic, want)
        got = recipe._tile_codes_reference(x, tr, enc, bad, rbits, stochastic)
        assert np.array_equal(got, want), stochastic
        assert len(np.unique(want)) == 16  # every E2M1 code of both signs occurs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_in_order_gemm_twin_is_the_kernel(dtype: Any) -> None:
    from lowprec._kernels import gemm

    rng = np.random.default_rng(3)
    a = _specials(rng, (9, 37)).astype(dtype)
    b = _specials(rng, (37, 13)).astype(dtype)
    a[0, :] = [1e8, 1.0, -1e8] * 12 + [0.5]  # cancellation in k order
    a[1, :] = -0.0  # every product a zero, some negative: the sum is +0 from the zeroed row
    want = np.zeros((9, 13), dtype)
    gemm._kernel(a, b, want)
    zero = want[1] == 0
    assert zero.any() and np.signbit(a[1, 0] * b[0][zero]).any()
    assert not np.signbit(want[1][zero]).any()
    got = np.zeros((9, 13), dtype)
    gemm._in_order_numpy(a, b, got)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


_RECIPE = """
import sys, numpy as np
from lowprec import hadamard
from lowprec._kernels import blocks, gemm, recipe
from lowprec._kernels.gemm import matmul_in_order
from lowprec.recipes import nvfp4
x = np.load(sys.argv[1])
rb = np.arange(x.size, dtype=np.uint64).astype(np.uint8) * np.uint8(37)
out = {"rht": hadamard.rht(x), "rht0": hadamard.rht(x, axis=0),
       "rht32": hadamard.rht(x, precision="float32"),
       "mm": matmul_in_order(x[:, :40], x[:, :40].T.copy()),
       "mm64": matmul_in_order(x[:, :40].astype(np.float64), x[:, :40].T.astype(np.float64))}
for bs in ((1, 16), (16, 16)):
    for rnd in ("rne", "stochastic"):
        q = nvfp4.quantize(x, bs, rnd, rbits=rb if rnd == "stochastic" else None)
        out[f"{bs}-{rnd}"] = np.concatenate([q.codes.ravel(), q.scales.ravel()])
kernels = [recipe._fwht_groups, recipe._fwht_columns, recipe._tile_codes, gemm._kernel,
           blocks.nvfp4_block_amax, blocks._nvfp4_chunk]
np.savez(sys.argv[2], **out)
print(",".join(k.__name__ for k in kernels if k.overloads) or "none")
"""


def test_cold_recipe_kernels_are_served_by_their_reference(tmp_path: Path) -> None:
    """With nothing compiled (LOWPREC_COLD=numpy), the Hadamard transform, the recipe's
    NVFP4 quantizer and the trainer's GEMM answer from their numpy twins, bit for bit
    what the compiled kernels give here."""
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((48, 64)) * 2.0 ** rng.integers(-12, 12, (48, 64))).astype(
        np.float32)
    x[5, 7], x[6, 40] = np.inf, np.nan
    x[16:32, :16] = 0.0
    assert _run_cold(_RECIPE, x, tmp_path) == "none"
    from lowprec import hadamard
    from lowprec._kernels.gemm import matmul_in_order
    from lowprec.recipes import nvfp4 as recipe_nvfp4

    cold = np.load(tmp_path / "cold.npz")
    rb = np.arange(x.size, dtype=np.uint64).astype(np.uint8) * np.uint8(37)
    warm = {"rht": hadamard.rht(x), "rht0": hadamard.rht(x, axis=0),
            "rht32": hadamard.rht(x, precision="float32"),
            "mm": matmul_in_order(x[:, :40], x[:, :40].T.copy()),
            "mm64": matmul_in_order(x[:, :40].astype(np.float64),
                                    x[:, :40].T.astype(np.float64))}
    for bs in ((1, 16), (16, 16)):
        for rnd in ("rne", "stochastic"):
            q = recipe_nvfp4.quantize(x, bs, rnd, rbits=rb if rnd == "stochastic" else None)
            warm[f"{bs}-{rnd}"] = np.concatenate([q.codes.ravel(), q.scales.ravel()])
    assert sorted(cold.files) == sorted(warm)
    for k, v in warm.items():
        v = np.ascontiguousarray(v)
        assert cold[k].dtype == v.dtype and np.array_equal(
            np.ascontiguousarray(cold[k]).view(np.uint8), v.view(np.uint8)), k


_ARITH = """
import sys, numpy as np, lowprec as lp
from lowprec._kernels import arith32, route
x = np.load(sys.argv[1])
out = {}
for fmt in ("fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1"):
    a = lp.round_to(x[0], fmt, saturate=True)
    b = lp.round_to(x[1], fmt, saturate=True)
    for op in ("add", "sub", "mul"):
        for mode in ("rne", "rtz", "rdown", "rup"):
            for dt in (np.float32, np.float64):
                out[f"{fmt}-{op}-{mode}-{dt.__name__}"] = getattr(lp, op)(
                    a.astype(dt), b.astype(dt), fmt, mode)
a, b = lp.round_to(x[0], "bf16"), lp.round_to(x[1], "bf16")
out["bf16-mul"] = lp.mul(a, b, "bf16")
out["bf16-add"] = lp.add(a, b, "bf16")
out["bf16-sub-rdown"] = lp.sub(a, a, "bf16", "rdown")
c = lp.round_to(x[1], "fp16", saturate=True)
out["fp16-fma"] = lp.fma(c, c, -c, "fp16", "rup")
out["scalar"] = np.float64(lp.add(0.5, 0.25, "fp8_e4m3"))
out["nan"] = lp.add(np.float32([np.nan, 1.0]), np.float64([1.0, np.nan]), "fp16")
try:
    lp.add(np.float32([0.1]), np.float32([1.0]), "fp16")
except ValueError as e:
    out["error"] = np.array(str(e))
compiled = [n for n, k in route._names()[1].items() if k.overloads]
compiled += [repr(key) for key, k in arith32._KERNELS.items() if k.overloads]
np.savez(sys.argv[2], **out)
print(",".join(map(str, compiled)) or "none")
"""


def test_cold_arithmetic_is_served_without_compiling(tmp_path: Path) -> None:
    """add/sub/mul/fma where float64 holds the exact result or its rounding to odd:
    with nothing compiled (LOWPREC_COLD=numpy) the operands are checked by the numpy
    engine, the bf16 sums and fma rounded to odd by numpy's TwoSum and the result
    rounded by the numpy engine, bit for bit what the compiled routes give here."""
    import lowprec as lp

    rng = np.random.default_rng(12)
    x = (rng.standard_normal((2, 4000)) * 2.0 ** rng.integers(-20, 8, (2, 4000)))
    x[:, :8] = [[0.0, -0.0, np.inf, -np.inf, 3.0, 1.0, -1.0, 0.0],
                [-0.0, -0.0, 1.0, np.inf, 1.0, -1.0, 1.0, 0.0]]
    assert _run_cold(_ARITH, x, tmp_path) == "none"
    cold = np.load(tmp_path / "cold.npz")
    n = 0
    for fmt in ("fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1"):
        a = lp.round_to(x[0], fmt, saturate=True)
        b = lp.round_to(x[1], fmt, saturate=True)
        for op in ("add", "sub", "mul"):
            for mode in ("rne", "rtz", "rdown", "rup"):
                for dt in (np.float32, np.float64):
                    want = getattr(lp, op)(a.astype(dt), b.astype(dt), fmt, mode)
                    got = cold[f"{fmt}-{op}-{mode}-{dt.__name__}"]
                    assert got.dtype == want.dtype
                    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (fmt, op)
                    n += 1
    a, b = lp.round_to(x[0], "bf16"), lp.round_to(x[1], "bf16")
    assert np.array_equal(cold["bf16-mul"], lp.mul(a, b, "bf16"), equal_nan=True)
    assert np.array_equal(cold["bf16-add"], lp.add(a, b, "bf16"), equal_nan=True)
    sub = lp.sub(a, a, "bf16", "rdown")
    assert np.array_equal(cold["bf16-sub-rdown"].view(np.uint32), sub.view(np.uint32))
    assert np.signbit(sub[np.isfinite(a)]).all()  # x - x is -0 rounding down
    c = lp.round_to(x[1], "fp16", saturate=True)
    fma = lp.fma(c, c, -c, "fp16", "rup")
    assert np.array_equal(cold["fp16-fma"].view(np.uint8), fma.view(np.uint8))
    assert float(cold["scalar"]) == 0.75
    nan = lp.add(np.float32([np.nan, 1.0]), np.float64([1.0, np.nan]), "fp16")
    assert cold["nan"].dtype == nan.dtype and np.isnan(cold["nan"]).all() and np.isnan(nan).all()
    assert "is not a value of fp16" in str(cold["error"])
    assert n == 120


def test_arithmetic_kernels_made_on_demand_have_names_the_compiler_process_finds() -> None:
    from lowprec import get_format
    from lowprec._kernels import arith, arith32, params

    for op in (arith.ADD, arith.MUL):
        k = arith32.kernel_for(op, get_format("fp16"), params.RNE)
        name = route.kernel_name(k)
        assert name.startswith("arith32._KERNELS[(")
        assert route._kernel_named(name) is k
    assert route._kernel_named(route.kernel_name(arith.to_code_kernel)) is arith.to_code_kernel
    from lowprec._kernels import arith_fast  # the float64 routes' kernels, asked cold too

    for k in (arith_fast.fma_odd_kernel, arith_fast.div_sqrt_odd_kernel):
        assert route._kernel_named(route.kernel_name(k)) is k


@pytest.mark.parametrize("rdown", [False, True])
def test_the_fma_rounded_to_odd_twin_is_the_kernel(rdown: bool) -> None:
    """bf16/tf32 sums and fma go through float64 rounded to odd: the numpy twin that
    serves them while the kernel compiles gives the kernel's bits."""
    import lowprec as lp
    from lowprec._kernels import arith_fast

    rng = np.random.default_rng(9)
    n = 20000
    vals = []
    for fmt in ("bf16", "tf32"):
        f = lp.get_format(fmt)
        v = lp.decode(rng.integers(0, 1 << f.width, (3, n)), f)
        v[2, : n // 4] = -v[0, : n // 4] * v[1, : n // 4]  # exact cancellations: zeros
        vals.append(v)
    a, b, c = np.concatenate(vals, axis=1)
    b[::3] = 1.0  # the sums a + c
    c[::7] = -0.0
    zeros = []
    for bb in (b, b[:1]):
        want = np.empty(a.shape, np.float64)
        arith_fast.fma_odd_kernel(a, bb, c, rdown, want)
        got = arith_fast.fma_odd_reference(a, bb, c, rdown)
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
        zeros.append(int((want == 0).sum()))
    assert zeros[0] > 1000 and np.isnan(want).sum() > 0


# ------------------------------------------------------- AMD mfma models
# Written from the rules of lowprec/_kernels/amd.py: CDNA3's full A @ B of finite
# inputs takes the vectorised grid kernel; NaN/inf inputs, and dot products of row
# pairs (lp.vecdot), take the scalar pairs kernel (the reference's full rule per
# group). CDNA1/2 are IEEE FP32 arithmetic, NaN/inf included: grid or pairs only.
def _expected_mfma(gen: str, grid: bool, special: bool) -> tuple[str, ...]:
    if gen == "CDNA3":
        return ("amd.cdna3_grid",) if grid and not special else ("amd.cdna3_pairs",)
    return ("amd.cdna12_grid",) if grid else ("amd.cdna12_pairs",)


def test_the_routing_table_names_the_kernel_of_every_amd_model() -> None:
    from lowprec.amd import AMD_MODELS

    rows = 0
    for arch, (gen, _) in AMD_MODELS.items():
        for grid, special in itertools.product((False, True), (False, True)):
            assert route.serving_mfma(gen, grid, special) == _expected_mfma(gen, grid, special), \
                (arch, grid, special)
            rows += 1
    assert rows == 12


_MFMA = """
import sys, numpy as np
import lowprec as lp
from lowprec._kernels import amd
x = np.load(sys.argv[1])
a, b, c = x[:12, :40], x[12:52, :9], x[52:64, :9]
out = {}
for model, f in (("mi300", "fp16"), ("mi300", "fp8_e4m3fnuz"), ("mi300", "tf32"),
                 ("mi100", "bf16"), ("mi250", "fp16")):
    A, B = lp.round_to(a, f), lp.round_to(b, f)
    out[f"{model}-{f}"] = lp.matmul(A, B, c, inputs=f, model=model)
    out[f"{model}-{f}-vecdot"] = lp.vecdot(A[:9], B.T, c[0], inputs=f, model=model)
compiled = [k for k in ("cdna3_grid", "cdna3_pairs", "cdna12_grid", "cdna12_pairs")
            if getattr(amd, k).overloads]
np.savez(sys.argv[2], **out)
print(",".join(compiled) or "none")
"""


def test_cold_amd_models_are_served_by_their_reference(tmp_path: Path) -> None:
    # With nothing compiled (an empty numba cache, LOWPREC_COLD=numpy) lp.matmul and
    # lp.vecdot on the AMD models compile no mfma kernel: lowprec.amd.mfma_dot
    # answers, with the kernels' bits (here, LOWPREC_COLD=compile, the kernels run).
    rng = np.random.default_rng(11)
    x = rng.standard_normal((64, 40)) * np.exp2(rng.integers(-12, 12, (64, 40)))
    x[3, 5] = 0.0
    assert _run_cold(_MFMA, x, tmp_path) == "none"
    import lowprec as lp
    from lowprec._kernels import amd

    cold = np.load(tmp_path / "cold.npz")
    a, b, c = x[:12, :40], x[12:52, :9], x[52:64, :9]
    for model, f in (("mi300", "fp16"), ("mi300", "fp8_e4m3fnuz"), ("mi300", "tf32"),
                     ("mi100", "bf16"), ("mi250", "fp16")):
        A, B = lp.round_to(a, f), lp.round_to(b, f)
        warm = lp.matmul(A, B, c, inputs=f, model=model)
        assert np.array_equal(cold[f"{model}-{f}"].view(np.uint64), warm.view(np.uint64))
        warm = lp.vecdot(A[:9], B.T, c[0], inputs=f, model=model)
        assert np.array_equal(cold[f"{model}-{f}-vecdot"].view(np.uint64), warm.view(np.uint64))
    assert amd.cdna3_grid.overloads and amd.cdna12_grid.overloads and amd.cdna3_pairs.overloads


_MFMA_WAIT = """
import numpy as np
import lowprec as lp
from lowprec import amd as public
from lowprec._kernels import amd
public._WAIT_WORK = 100  # this small matmul counts as large
a = np.arange(-40.0, 40.0).reshape(10, 8) / 8
r = lp.matmul(a, a.T, inputs="bf16", model="mi100")
print(bool(amd.cdna12_grid.overloads), np.array_equal(r, public.mfma_matmul(a, a.T, 0.0,
                                                                             "mi100", "bf16")))
"""


def test_a_large_cold_amd_call_waits_for_the_compile(tmp_path: Path) -> None:
    # Beyond _WAIT_WORK products the reference would take longer than the compile:
    # a cold call (an empty cache, the default background policy) waits for the
    # background process and runs the kernel, loaded from the cache it filled.
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("LOWPREC_COLD", None)
    done = subprocess.run([sys.executable, "-c", _MFMA_WAIT], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    assert done.stdout.split() == ["True", "True"]
