"""Naming the semantics of someone's hardware from its outputs.

``identify_conversion(x, codes, fmt)`` says which lowprec rounding semantics
(mode, saturation, subnormal inputs and outputs flushed or kept) reproduce the
codes some hardware or library produced for ``x``; ``identify_dot(a, b, c, d,
inputs=...)`` says which GPU architecture model (or, when none fits, which
``tensor_core(...)`` parameters) reproduces measured dot products ``d = a·b + c``.
Both return an :class:`Identification`: the best candidate, the fraction of
cases it explains, every candidate tried, and the first input on which the two
best disagree.

Readers for the text layout of the measured tensor-core files
(``../shared/tensorcores``: hexadecimal float32 rows, 32-character bit lines)
are here too.
"""

from __future__ import annotations

import gzip
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .formats import FloatFormat, get_format
from .matmul import ARCHITECTURES, _exact_codes, tensor_core, vecdot
from .rounding import decode, encode

__all__ = [
    "Identification",
    "TensorCoreCase",
    "conversion_probe",
    "identify_conversion",
    "identify_dot",
    "iter_tensorcore_files",
    "read_array",
]


# --------------------------------------------------------------------- readers
def _open_text(path: Path):
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def read_array(path: str | Path, key: str | None = None) -> np.ndarray:
    """An array from ``.npy``, ``.npz`` (``key`` or its only array) or the text layout
    of ``../shared/tensorcores`` (``.txt``/``.txt.gz``): lines of space-separated
    hexadecimal float32 bit patterns, or lines of 32 ``0``/``1`` characters (float32
    bits). Text files give float64 values, one row per line (a column for bit lines).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.txt"
    >>> _ = p.write_text("00111111100000000000000000000000\\n3f800000 40000000\\n"[:33])
    >>> read_array(p).tolist()
    [1.0]
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"no such file {str(p)!r}")
    name = p.name.lower()
    if name.endswith(".npy"):
        return np.load(p, allow_pickle=False)
    if name.endswith(".npz"):
        with np.load(p, allow_pickle=False) as z:
            keys = list(z.keys())
            if key is None and len(keys) != 1:
                raise ValueError(f"{p.name} holds {keys}; name one")
            if key is not None and key not in keys:
                raise ValueError(f"{p.name} has no array {key!r}; it holds {keys}")
            return z[key or keys[0]]
    if not (name.endswith(".txt") or name.endswith(".txt.gz")):
        raise ValueError(f"{p.name}: expected a .npy, .npz, .txt or .txt.gz file")
    with _open_text(p) as f:
        lines = [ln.split() for ln in f if ln.strip()]
    if not lines:
        raise ValueError(f"{p.name} is empty")
    try:
        if all(len(t) == 1 and len(t[0]) == 32 and set(t[0]) <= {"0", "1"} for t in lines):
            bits = np.array([int(t[0], 2) for t in lines], dtype=np.uint32)
            return bits.view(np.float32).astype(np.float64)
        width = len(lines[0])
        if any(len(t) != width for t in lines):
            raise ValueError(f"{p.name}: lines have different numbers of values")
        bits = np.array([[int(v, 16) for v in t] for t in lines], dtype=np.uint32)
    except ValueError as e:
        raise ValueError(f"{p.name}: not hexadecimal float32 rows or 32-bit lines ({e})") from None
    return bits.view(np.float32).astype(np.float64)


# lowprec format names of the folders of ../shared/tensorcores.
_FOLDER_FORMATS = {"fp16": "fp16", "bf16": "bf16", "tf32": "tf32", "E4M3": "fp8_e4m3",
                   "E5M2": "fp8_e5m2"}


@dataclass(frozen=True)
class TensorCoreCase:
    """One measured file set: ``d = a·b + c`` for ``inputs`` and ``output`` on ``gpu``."""

    gpu: str
    inputs: str
    output: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray


def iter_tensorcore_files(root: str | Path) -> Iterator[TensorCoreCase]:
    """Every GPU x format x output of a folder laid out like ``../shared/tensorcores``.

    Follows the source's notes: H100 FP8 lines with FP32 output were measured with
    ``wgmma`` and C = 0, so C is zero there.
    """
    root = Path(root)
    for gdir in sorted(p for p in root.iterdir() if p.is_dir()):
        for fdir in sorted(p for p in gdir.iterdir() if p.is_dir()):
            gpu, folder = gdir.name, fdir.name
            if folder not in _FOLDER_FORMATS:
                continue
            a = read_array(fdir / f"a_{gpu}_{folder}.txt.gz")
            b = read_array(fdir / f"b_{gpu}_{folder}.txt.gz")
            c = read_array(fdir / f"c_{gpu}_fp32.txt.gz")
            for out in ("fp32", "fp16"):
                dpath = fdir / f"d_{gpu}_{out}.txt.gz"
                if not dpath.is_file():
                    continue
                cc = np.zeros_like(c) if (gpu == "H100" and folder in ("E4M3", "E5M2")
                                          and out == "fp32") else c
                yield TensorCoreCase(gpu, _FOLDER_FORMATS[folder], out, a, b, cc,
                                     read_array(dpath))


# -------------------------------------------------------------- identification
@dataclass
class Identification:
    """Which semantics reproduce measured outputs.

    Attributes
    ----------
    best:
        The semantics of the best candidate, e.g. ``{"mode": "rne", "saturate":
        False, ...}`` or ``{"model": "h100"}``.
    explained:
        Fraction of the cases the best candidate reproduces bit for bit.
    candidates:
        Every candidate tried with its fraction, best first.
    separating:
        The first case on which the best and the runner-up (the best candidate
        whose outputs differ from the best's somewhere) disagree: its index,
        its inputs, both candidates' outputs and the measured one; None when
        every candidate gives the best's outputs.
    ties:
        Candidates whose outputs equal the best's on every case: these inputs
        cannot tell them apart.
    """

    what: str
    best: dict[str, Any]
    explained: float
    candidates: list[tuple[dict[str, Any], float]]
    separating: dict[str, Any] | None
    ties: list[dict[str, Any]] = field(default_factory=list)
    n: int = 0

    def __str__(self) -> str:
        lines = [f"{self.what}: best {_fmt(self.best)} explains "
                 f"{round(self.explained * self.n)}/{self.n} cases ({self.explained:.2%})"]
        if self.ties:
            lines.append("  indistinguishable on these inputs: "
                         + "; ".join(_fmt(t) for t in self.ties[:4])
                         + (" ..." if len(self.ties) > 4 else ""))
        for cand, frac in self.candidates[1:4]:
            if cand not in self.ties:
                lines.append(f"  then {_fmt(cand)}: {frac:.2%}")
        if self.separating is not None:
            s = self.separating
            lines.append(f"  they differ first on case {s['index']} ({s['input']}): best gives "
                         f"{s['best']}, runner-up {s['runner_up']}, measured {s['measured']}")
        return "\n".join(lines)


def _fmt(d: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in d.items()) + "}"


def _rank(what: str, tried: list[tuple[dict[str, Any], np.ndarray]], same: Callable[
          [np.ndarray], np.ndarray], describe: Callable[[int, np.ndarray], tuple[str, Any]],
          measured_at: Callable[[int], Any]) -> Identification:
    """Rank candidates (semantics, outputs) by the fraction of cases they reproduce;
    ``same(outputs)`` gives the per-case match, ``describe(i, outputs)`` the input
    and the candidate's output at case i. Order of ``tried`` breaks ties."""
    scored = []
    for order, (sem, out) in enumerate(tried):
        ok = same(out)
        scored.append((-float(ok.mean()) if ok.size else 0.0, order, sem, out))
    scored.sort(key=lambda t: (t[0], t[1]))
    _, _, best, best_out = scored[0]
    n = int(np.size(same(best_out)))
    ties, runner = [], None
    for _, _, sem, out in scored[1:]:
        differ = ~_equal_outputs(out, best_out)
        if not differ.any():
            ties.append(sem)
        elif runner is None:
            runner = (sem, out, int(np.argmax(differ)))
    separating = None
    if runner is not None:
        sem, out, i = runner
        separating = {"index": i, "input": describe(i, best_out)[0],
                      "best": describe(i, best_out)[1], "runner_up": describe(i, out)[1],
                      "runner_up_semantics": sem, "measured": measured_at(i)}
    return Identification(what=what, best=best, explained=-scored[0][0],
                          candidates=[(sem, -neg) for neg, _, sem, _ in scored],
                          separating=separating, ties=ties, n=n)


def _equal_outputs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return (x.view(np.uint64 if x.itemsize == 8 else np.uint32)
                == y.view(np.uint64 if y.itemsize == 8 else np.uint32)) | (
                    np.isnan(x) & np.isnan(y))
    return x == y


_CONVERSION_MODES = ("rne", "rna", "rtz", "rup", "rdown", "odd")


def conversion_probe(fmt: FloatFormat | str, dtype: Any = np.float32) -> np.ndarray:
    """Inputs that tell conversion semantics apart: every finite value of ``fmt``
    (when it has at most 16 bits), the midpoints between neighbours and one step of
    ``dtype`` to each side, values past the largest finite one, subnormals of
    ``dtype``, infinities and NaN. Send them through the hardware, then call
    :func:`identify_conversion`.

    >>> x = conversion_probe("fp8_e4m3")
    >>> x.dtype, bool(np.isnan(x).any()), bool((x > 448).any())
    (dtype('float32'), True, True)
    """
    f = get_format(fmt)
    dt = np.dtype(dtype)
    if f.width <= 16:
        vals = decode(np.arange(1 << f.width, dtype=f.code_dtype), f)
    else:
        rng = np.random.default_rng(0)
        vals = decode(rng.integers(0, 1 << f.width, 1 << 14, dtype=np.uint64).astype(f.code_dtype), f)
    pos = np.unique(vals[np.isfinite(vals) & (vals >= 0)])
    mids = (pos[1:] + pos[:-1]) / 2
    top = float(pos[-1])
    extra = np.array([top * 1.0625, top * 1.5, top * 4, np.inf, np.nan,
                      float(np.finfo(dt).tiny) / 2, float(np.finfo(dt).tiny) * 0.75])
    with np.errstate(over="ignore"):
        mids_dt = mids.astype(dt)
        near = np.concatenate([np.nextafter(mids_dt, np.array(np.inf, dt)),
                               np.nextafter(mids_dt, np.array(0, dt))])
        x = np.concatenate([pos.astype(dt), mids_dt, near, extra.astype(dt)])
    return np.concatenate([x, -x])


def identify_conversion(x: Any, codes: Any, fmt: FloatFormat | str) -> Identification:
    """Which lowprec conversion semantics reproduce ``codes`` = hardware(``x``).

    Tries every rounding mode, with and without ``saturate``, with subnormal
    inputs (of ``x``'s float32/float64 type) kept or flushed to zero and with
    subnormal outputs kept or flushed. NaN outputs match any NaN code (payloads
    and NaN signs are not compared); ``best["nan"]`` says what NaN inputs gave.

    >>> import numpy as np
    >>> x = np.array([1.0, 1.5 * 2**-8, 1000.0, 2.0**-20, np.inf], dtype=np.float32)
    >>> ident = identify_conversion(x, x.astype(np.float16).view(np.uint16), "fp16")
    >>> ident.best["mode"], ident.best["saturate"], ident.explained
    ('rne', False, 1.0)
    """
    f = get_format(fmt)
    xv = np.asarray(x)
    if xv.dtype not in (np.float32, np.float64):
        raise ValueError(f"x must be float32 or float64 values, got dtype {xv.dtype}")
    cv = np.asarray(codes)
    if cv.shape != xv.shape:
        raise ValueError(f"codes must have x's shape {xv.shape}, got {cv.shape}")
    if cv.dtype.kind not in "iu":
        raise ValueError(f"codes must be integers (the bit patterns of {f.name}), got dtype "
                         f"{cv.dtype}")
    if cv.size and (int(cv.min()) < 0 or int(cv.max()) >= 1 << f.width):
        raise ValueError(f"codes must lie in 0 .. {(1 << f.width) - 1} for {f.name}")
    xv, cv = xv.ravel(), cv.ravel().astype(np.int64)
    nan_note = None
    if f.nan == "none" and np.isnan(xv).any():  # fp4/fp6: no NaN code to emulate
        nan_in = np.isnan(xv)
        vals, counts = np.unique(cv[nan_in], return_counts=True)
        nan_note = f"NaN inputs gave 0x{int(vals[np.argmax(counts)]):x}" + (
            "" if vals.size == 1 else f" ({vals.size} different codes)")
        xv, cv = xv[~nan_in], cv[~nan_in]
    tiny = np.finfo(xv.dtype).tiny
    flushed = np.where(np.abs(xv) < tiny, np.copysign(np.zeros_like(xv), xv), xv)
    measured_nan = np.isnan(decode(cv.astype(f.code_dtype), f)) if cv.size else cv.astype(bool)
    tried = []
    for mode, sat, sub_in, sub_out in itertools.product(_CONVERSION_MODES, (False, True),
                                                        ("kept", "flushed"), ("kept", "flushed")):
        src = xv if sub_in == "kept" else flushed
        try:
            out = np.asarray(encode(src, f, mode, saturate=sat, subnormals=sub_out == "kept"),
                             dtype=np.int64)
        except ValueError:
            continue  # semantics lowprec refuses for these inputs (e.g. overflow in fp4)
        tried.append(({"mode": mode, "saturate": sat, "subnormal_inputs": sub_in,
                       "subnormal_outputs": sub_out}, out))

    if not tried:
        raise ValueError(f"no lowprec conversion semantics to {f.name} apply to these inputs")

    def same(out: np.ndarray) -> np.ndarray:
        nan = np.isnan(decode(out.astype(f.code_dtype), f)) if out.size else out.astype(bool)
        return (out == cv) | (nan & measured_nan)

    digits = (f.width + 3) // 4
    ident = _rank(f"conversion to {f.name}", tried, same,
                  lambda i, out: (f"x = {float(xv[i])!r}", f"0x{int(out[i]):0{digits}x}"),
                  lambda i: f"0x{int(cv[i]):0{digits}x}")
    nan_in = np.isnan(xv)
    if nan_note is not None:
        ident.best["nan"] = nan_note
    elif nan_in.any():
        ident.best["nan"] = ("NaN" if measured_nan[nan_in].all()
                             else f"not always NaN ({int((~measured_nan[nan_in]).sum())} cases)")
    return ident


def _dot_candidates(k_len: int) -> list[tuple[dict[str, Any], Any]]:
    """What-if tensor cores: block sizes, alignment bits, normalisation, C placement."""
    out = []
    blocks = sorted({b for b in (2, 4, 8, 16, 32) if b <= k_len} | {max(k_len, 1)})
    for blk, acc, align, hw, late in itertools.product(blocks, (None, 13), (0, 1, 2, 3),
                                                       ("rtz", "rne"), (False, True)):
        sem = {"model": "tensor_core", "block": blk, "align_bits": align,
               "acc_mantissa_bits": acc, "hw_mode": hw, "c_late": late}
        out.append((sem, tensor_core(blk, align, acc_mantissa_bits=acc, hw_mode=hw,
                                     c_late=late)))
    return out


def identify_dot(a: Any, b: Any, c: Any, d: Any, *, inputs: FloatFormat | str,
                 output: FloatFormat | str = "fp32", search: bool | None = None
                 ) -> Identification:
    """Which accumulation model reproduces measured dot products ``d = a·b + c``.

    ``a`` and ``b`` (N, K) hold values of ``inputs`` (one dot product per row),
    ``c`` (N,) the accumulator input (None: zero) and ``d`` (N,) the measured
    results in ``output`` (fp32 or fp16; values as floats). Every GPU
    architecture model that has this combination is tried, with ``exact`` and
    ``sequential`` as references; when none explains every case (or with
    ``search=True``) a grid of ``tensor_core(...)`` parameters is tried too.

    >>> import numpy as np, lowprec as lp
    >>> rng = np.random.default_rng(0)
    >>> a = lp.round_to(rng.standard_normal((300, 16)), "fp16")
    >>> b = lp.round_to(rng.standard_normal((300, 16)), "fp16")
    >>> d = lp.vecdot(a, b, inputs="fp16", model="h100")
    >>> ident = identify_dot(a, b, None, d, inputs="fp16")
    >>> ident.best["model"] in ("h100", "b200"), ident.explained
    (True, 1.0)
    """
    fin, fout = get_format(inputs), get_format(output)
    av, bv = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if av.ndim != 2 or av.shape != bv.shape:
        raise ValueError(f"a and b must be (N, K) arrays of the same shape, got {av.shape} and "
                         f"{bv.shape}")
    dv = np.asarray(d, dtype=np.float64).ravel()
    if dv.shape != (av.shape[0],):
        raise ValueError(f"d must hold one value per row of a ({av.shape[0]}), got shape "
                         f"{np.shape(d)}")
    _exact_codes(av, fin, "a")  # a ValueError naming the first value not of `inputs`
    _exact_codes(bv, fin, "b")
    cv = None if c is None else np.asarray(c, dtype=np.float64).ravel()
    if cv is not None and cv.shape != dv.shape:
        raise ValueError(f"c must hold one value per row of a ({av.shape[0]}), got shape "
                         f"{np.shape(c)}")
    tried: list[tuple[dict[str, Any], np.ndarray]] = []

    def run(sem: dict[str, Any], model: Any) -> None:
        try:
            got = vecdot(av, bv, cv, inputs=fin, output=fout, model=model)
        except ValueError:
            return  # a combination this model does not have
        tried.append((sem, got))

    for name in ARCHITECTURES:
        run({"model": name}, name)
    for name in ("exact", "sequential"):
        if cv is None or name == "sequential":
            run({"model": name}, name)
    bits = dv.astype(np.float32).view(np.uint32)

    def same(out: np.ndarray) -> np.ndarray:
        return (out.astype(np.float32).view(np.uint32) == bits) | (np.isnan(out) & np.isnan(dv))

    if not tried:
        raise ValueError(f"no model takes inputs={fin.name} with output={fout.name}")
    best_frac = max(float(same(out).mean()) for _, out in tried)
    if search or (search is None and best_frac < 1.0):
        for sem, model in _dot_candidates(av.shape[1]):
            run(sem, model)

    def describe(i: int, out: np.ndarray) -> tuple[str, Any]:
        cs = "0" if cv is None else repr(float(cv[i]))
        return (f"a={av[i].tolist()}, b={bv[i].tolist()}, c={cs}", float(out[i]))

    return _rank(f"dot products ({fin.name} inputs, {fout.name} output)", tried, same,
                 describe, lambda i: float(dv[i]))

