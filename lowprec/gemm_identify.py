"""Which GEMM produced these outputs: a library's fingerprint from (A, B, C, D) of any size.

``identify_gemm(a, b, c, d, inputs="fp8_e4m3")`` names, from a user's own matrices and the
D their GPU library returned, the four things that decide a GEMM's bits:

* the **instruction model**: every entry of :data:`lowprec.instructions.INSTRUCTIONS` and
  every chip model of :data:`lowprec.tensorcores.ARCHITECTURES` that takes these input and
  output types (models with the same rule are one candidate; their names are aliases),
  with ``exact`` and ``sequential`` as references;
* the **promotion interval**: the tensor-core accumulator restarted every ``N`` products
  and its partial sum added into an FP32 register (:func:`lowprec.matmul.promote`,
  cuBLASLt's FP8 default with ``N = 128``; "fast accumulation" is no promotion);
* **split-K**: K cut into ``s`` chunks of ``ceil(K/s)``, each accumulated by the model, the
  FP32 partial results summed in chunk order, as a pairwise tree or in reverse order, C
  entering the first chunk's MMA, the start of the sum or its end (the epilogue);
* a **dropped K tail**: the last ``K mod t`` elements ignored (a K-loop that runs
  ``K // t`` whole tiles; lowprec's issue #37 names triton-lang/triton#2752 and #2767 as
  this bug class; not checked here against those threads).

Every candidate is an expression over *leaves* (one chained tensor-core run over a range
of k, computed by :func:`lowprec.matmul.matmul`) joined by FP32 round-to-nearest
additions; candidates whose expressions are equal (``promote(128)`` on K = 512 is split-K 4
summed in order from C) are one candidate with several names. Candidates are ranked by the
fraction of outputs each reproduces bit for bit (NaN equals NaN): first on a sub-grid of
about 256 outputs, the survivors on 4,096, then on all. When two or more candidates
explain everything, a search over adversarial dot products (wide exponent ranges,
cancelling halves, one large product among tiny ones) finds a *separating input*: a
small (A, B, C) with the user's K on which the tied candidates give different D, to run
on the same library call.

Signed zero is not told apart: a sum that starts from +0 (``promote`` with no C) counts
as the sum without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .formats import FloatFormat, get_format
from .instructions import INSTRUCTIONS
from .library_gemms import LIBRARY_GEMMS
from .matmul import _exact_codes, _operand_mode, matmul, vecdot
from .rounding import round_to
from .tensorcores import ARCHITECTURES, Architecture, Promote, TensorCore

__all__ = ["GemmCandidate", "GemmIdentification", "identify_gemm", "run_candidate"]

_REDUCTIONS = ("sequential", "tree", "reversed")
_C_AT = ("mma", "first", "last")
_OUTPUTS = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class GemmCandidate:
    """One way a library may compute ``D = A·B + C``.

    Attributes
    ----------
    model:
        ``"exact"``, ``"sequential"``, a chip (``"h100"``) or an instruction
        (``"h100:wgmma"``): how each leaf adds its products.
    promote:
        None (fast accumulation), or the interval N: the accumulator restarts every N
        products and its FP32 value is added into the running FP32 sum.
    split_k:
        Number of K chunks (``ceil(K/s)`` each, the last shorter); 1: no split.
    reduction:
        How the chunks' FP32 partial results are summed: ``sequential`` (chunk order),
        ``tree`` (pairwise, neighbours first) or ``reversed``.
    c_at:
        Where C enters: ``mma`` (the first MMA's C operand), ``first`` (the FP32 sum
        starts at C) or ``last`` (added to the finished sum, as an epilogue does).
    tail:
        None, or t: K is cut down to a multiple of t (the last ``K mod t`` dropped).
    accumulate:
        ``fp32``, or the output format when that is FP16 and the MMA's C/D are FP16
        (or a sequential sum runs in FP16): only without split, promotion or tail.
    """

    model: str
    promote: int | None = None
    split_k: int = 1
    reduction: str = "sequential"
    c_at: str = "mma"
    tail: int | None = None
    accumulate: str = "fp32"

    def label(self) -> str:
        """A one-line name, e.g. ``h100 promote 128, split-K 2 (tree), C last``.

        >>> GemmCandidate("h100", promote=128).label()
        'h100 promote 128'
        """
        parts = [self.model + (" (FP16 accumulator)" if self.accumulate != "fp32" else "")
                 + (f" promote {self.promote}" if self.promote else "")]
        if self.split_k > 1:
            parts.append(f"split-K {self.split_k} ({self.reduction})")
        if self.c_at != "mma":
            parts.append(f"C {self.c_at}")
        if self.tail:
            parts.append(f"K cut to a multiple of {self.tail}")
        return ", ".join(parts)

    def complexity(self) -> int:
        """How many departures from one plain chained MMA run this candidate makes."""
        return (int(self.promote is not None) + int(self.split_k > 1) + int(self.c_at != "mma")
                + int(self.tail is not None) + int(self.accumulate != "fp32")
                + int(self.reduction != "sequential"))


# ------------------------------------------------------------------ expressions
# A node is ("leaf", model, lo, hi, with_c, acc16), ("c",) or ("add", left, right).
Node = tuple


def _leaf(model: str, lo: int, hi: int, with_c: bool, acc16: bool = False) -> Node:
    return ("leaf", model, lo, hi, with_c, acc16)


def _chain(nodes: Sequence[Node]) -> Node:
    out = nodes[0]
    for n in nodes[1:]:
        out = ("add", out, n)
    return out


def _tree(nodes: Sequence[Node]) -> Node:
    if len(nodes) == 1:
        return nodes[0]
    half = 1 << (max(len(nodes) - 1, 1).bit_length() - 1)  # largest power of two below
    return ("add", _tree(nodes[:half]), _tree(nodes[half:]))


def _k_used(cand: GemmCandidate, k_len: int) -> int:
    return k_len - k_len % cand.tail if cand.tail else k_len


def _expression(cand: GemmCandidate, k_len: int, has_c: bool, model_key: str) -> Node:
    """The candidate as a tree of leaves and FP32 additions over K = ``k_len``."""
    k = _k_used(cand, k_len)
    if k <= 0:
        raise ValueError(f"{cand.label()}: no K left (K = {k_len})")
    size = -(-k // cand.split_k)
    chunks = [(lo, min(lo + size, k)) for lo in range(0, k, size)]
    c_mma = has_c and cand.c_at == "mma"
    partials = []
    for idx, (lo, hi) in enumerate(chunks):
        step = cand.promote or (hi - lo)
        segs = [(s, min(s + step, hi)) for s in range(lo, hi, step)]
        leaves = [_leaf(model_key, s0, s1, c_mma and idx == 0 and j == 0,
                        cand.accumulate != "fp32") for j, (s0, s1) in enumerate(segs)]
        if has_c and cand.c_at == "first" and len(chunks) == 1:
            leaves = [("c",), *leaves]
        partials.append(_chain(leaves))
    if len(partials) == 1:
        total = partials[0]
    else:
        if has_c and cand.c_at == "first":
            ordered = partials[::-1] if cand.reduction == "reversed" else partials
            total = (_chain([("c",), *ordered]) if cand.reduction != "tree"
                     else ("add", ("c",), _tree(partials)))
        elif cand.reduction == "tree":
            total = _tree(partials)
        else:
            total = _chain(partials[::-1] if cand.reduction == "reversed" else partials)
    if has_c and cand.c_at == "last":
        total = ("add", total, ("c",))
    return total


def _canonical(node: Node) -> str:
    """A string equal for expressions equal up to the commutativity of one addition."""
    if node[0] == "leaf":
        _, model, lo, hi, with_c, acc16 = node
        return f"{model}[{lo}:{hi}]{'+C' if with_c else ''}{'/16' if acc16 else ''}"
    if node[0] == "c":
        return "C"
    a, b = sorted((_canonical(node[1]), _canonical(node[2])))
    return f"({a} + {b})"


def _leaves(node: Node) -> list[Node]:
    if node[0] == "leaf":
        return [node]
    if node[0] == "c":
        return []
    return _leaves(node[1]) + _leaves(node[2])


# ------------------------------------------------------------------ evaluation
class _Problem:
    """Operands on which candidates are evaluated: a grid (A rows x B columns) or pairs
    (row r of A with column r of B); leaves are cached."""

    def __init__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray | None, fin: FloatFormat,
                 fout: FloatFormat, models: dict[str, Any], pairs: bool = False) -> None:
        self.a, self.b, self.c, self.fin, self.fout = a, b, c, fin, fout
        self.models, self.pairs = models, pairs
        self.cache: dict[tuple, np.ndarray] = {}
        self.c32 = None if c is None else c.astype(np.float32).ravel()

    def leaf(self, node: Node) -> np.ndarray:
        key = node[1:]
        if key not in self.cache:
            _, model, lo, hi, with_c, acc16 = node
            acc = self.fout.name if acc16 else "fp32"
            c = self.c if with_c else None
            kw = {"inputs": self.fin, "accumulate": acc, "output": acc,
                  "model": self.models[model]}
            if self.pairs:
                got = vecdot(self.a[:, lo:hi], self.b[lo:hi, :].T, c, **kw)
            else:
                got = matmul(self.a[:, lo:hi], self.b[lo:hi, :], c, **kw)
            self.cache[key] = np.asarray(got, dtype=np.float64).ravel()
        return self.cache[key]

    def value(self, node: Node) -> np.ndarray:
        """float32 values (or the leaf's float64 values of a 16-bit accumulator)."""
        if node[0] == "leaf":
            return self.leaf(node)
        if node[0] == "c":
            assert self.c32 is not None
            return self.c32
        with np.errstate(over="ignore", invalid="ignore"):
            return (np.asarray(self.value(node[1]), dtype=np.float32)
                    + np.asarray(self.value(node[2]), dtype=np.float32))

    def run(self, expr: Node) -> np.ndarray:
        """The output values (float64) of an expression."""
        v = np.asarray(self.value(expr), dtype=np.float64)
        if expr[0] == "leaf" and expr[5]:
            return v
        return v if self.fout.name == "fp32" else np.asarray(round_to(v, self.fout),
                                                             dtype=np.float64)


def _differ(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Different values (a +0 against a -0 does not count: see the module docstring)."""
    return ~_same(x, y) & ~((x == 0) & (y == 0))


def _same(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bit-equal as float32 (every output format is a subset), NaN equal to NaN."""
    with np.errstate(over="ignore", invalid="ignore"):
        xb, yb = x.astype(np.float32).view(np.uint32), y.astype(np.float32).view(np.uint32)
    return (xb == yb) | (np.isnan(x) & np.isnan(y))


# ------------------------------------------------------------------ candidates
def _rule_key(tc: TensorCore) -> tuple:
    return (tc.block, tc.align_bits, tc.acc_mantissa_bits, tc.hw_mode, tc.c_late)


def _model_groups(fin: FloatFormat, fout: FloatFormat,
                  names: Iterable[str] | None) -> dict[str, tuple[Any, list[str], bool]]:
    """name -> (model object, aliases, has an FP16-output rule) for the models taking
    these types; models with equal rules are one entry under the first name."""
    pool: list[tuple[str, Any]] = [(n, a) for n, a in ARCHITECTURES.items()]
    pool += [(n, a) for n, a in INSTRUCTIONS.items()]
    wanted = None if names is None else [n.strip().lower() for n in names]
    groups: dict[tuple, tuple[str, Any, list[str], bool]] = {}
    for name, arch in pool:
        if wanted is not None and name not in wanted:
            continue
        try:
            key32 = _rule_key(arch.rule(fin, "fp32"))
        except ValueError:
            continue
        has16 = True
        key16: tuple | None = None
        if fout.name == "fp16":
            try:
                key16 = _rule_key(arch.rule(fin, "fp16"))
            except ValueError:
                has16 = False
        gkey = (key32, key16)
        if gkey in groups:
            groups[gkey][2].append(name)
        else:
            groups[gkey] = (name, arch, [], has16 and fout.name == "fp16")
    out = {first: (arch, aliases, has16) for first, arch, aliases, has16 in groups.values()}
    for ref in ("exact", "sequential"):
        if wanted is None or ref in wanted:
            out[ref] = (ref, [], fout.name == "fp16")
    if wanted is not None:
        unknown = [n for n in wanted if n not in out and not any(n in v[1] for v in out.values())]
        if unknown:
            raise ValueError(f"models {unknown} do not take inputs={fin.name} with "
                             f"output={fout.name} (or are unknown); known: "
                             f"{', '.join([*ARCHITECTURES, *INSTRUCTIONS, 'exact', 'sequential'])}")
    return out


def _enumerate(k_len: int, has_c: bool, groups: dict[str, tuple[Any, list[str], bool]],
               fout: FloatFormat, promotes: Sequence[int], splits: Sequence[int],
               tails: Sequence[int]) -> list[GemmCandidate]:
    out = []
    tail_opts: list[int | None] = [None, *sorted({t for t in tails if 0 < k_len % t < k_len})]
    c_opts = list(_C_AT) if has_c else ["mma"]
    for tail in tail_opts:
        k = k_len - k_len % tail if tail else k_len
        for s in [1, *sorted({s for s in splits if 1 < s <= k})]:
            chunk = -(-k // s)
            for prom in [None, *sorted({p for p in promotes if 0 < p < chunk})]:
                for red in (_REDUCTIONS if s > 2 else ("sequential",) if s == 1
                            else ("sequential", "reversed")):
                    for c_at in c_opts:
                        for name, (mdl, _, has16) in groups.items():
                            if prom and not isinstance(mdl, (Architecture, TensorCore)):
                                continue
                            if name == "exact" and has_c and c_at == "mma":
                                continue  # the exact model takes no C operand
                            accs = ["fp32"]
                            if has16 and s == 1 and not prom and c_at == "mma" and not tail:
                                accs.append(fout.name)
                            for acc in accs:
                                out.append(GemmCandidate(name, prom, s, red, c_at, tail, acc))
    out.sort(key=GemmCandidate.complexity)  # stable: simpler candidates first
    return out


@dataclass
class _Entry:
    cand: GemmCandidate
    expr: Node
    canon: str
    equivalent: list[GemmCandidate] = field(default_factory=list)
    frac: float = 0.0
    n: int = 0
    stage: int = 0
    out: np.ndarray | None = None


# ------------------------------------------------------------------ result
@dataclass
class GemmIdentification:
    """What :func:`identify_gemm` found.

    Attributes
    ----------
    best:
        The best candidate (simplest first among equals).
    explained, n:
        Fraction of the ``n`` outputs it was checked on that it reproduces (n = M*N
        when it survived to the last stage).
    candidates:
        ``(candidate, fraction, outputs checked)`` for every candidate, best first.
    equivalent:
        For each candidate label, the other candidates that compute the very same
        expression (e.g. ``promote(128)`` and split-K 4 summed from C).
    aliases:
        Model name -> other names with the same rule (``h100`` -> ``h100:wgmma``, ...).
    ties:
        Candidates other than ``best`` that also reproduce every output checked.
    unconfirmed:
        Candidates that explained every sampled output but were left out of the later
        stages by ``max_survivors``.
    separating:
        None without ties; else ``{"a", "b", "c", "outputs": {label: D}, "differ":
        [(label, label, row, col)], "unseparated": [(label, label)]}``: a small GEMM
        with the user's K on which the tied candidates give different D.
    """

    best: GemmCandidate
    explained: float
    n: int
    candidates: list[tuple[GemmCandidate, float, int]]
    equivalent: dict[str, list[GemmCandidate]]
    aliases: dict[str, list[str]]
    ties: list[GemmCandidate]
    separating: dict[str, Any] | None
    shape: tuple[int, int, int] = (0, 0, 0)
    inputs: str = ""
    output: str = ""
    library_names: dict[str, str] = field(default_factory=dict)
    unconfirmed: int = 0

    def name(self, cand: GemmCandidate) -> str:
        """A candidate's label with its model's aliases and library names."""
        text = cand.label()
        al = self.aliases.get(cand.model, [])
        if al:
            text += f" [= {', '.join(al)}]"
        lib = self.library_names.get(cand.label())
        if lib:
            text += f" [{lib}]"
        return text

    def __str__(self) -> str:
        m, k, n = self.shape
        lines = [f"GEMM {m}x{k}x{n} ({self.inputs} inputs, {self.output} output): best "
                 f"{self.name(self.best)} explains {round(self.explained * self.n)}/{self.n} "
                 f"outputs ({self.explained:.2%})"]
        eq = self.equivalent.get(self.best.label(), [])
        if eq:
            lines.append("  the same arithmetic as: " + "; ".join(c.label() for c in eq[:4])
                         + (" ..." if len(eq) > 4 else ""))
        if self.ties:
            lines.append("  also explains everything: " + "; ".join(self.name(t)
                                                                     for t in self.ties[:6])
                         + (f" (+{len(self.ties) - 6})" if len(self.ties) > 6 else ""))
        if self.unconfirmed:
            lines.append(f"  {self.unconfirmed} more candidates explained every sampled output "
                         "but were not run on all (raise max_survivors)")
        shown = 0
        for cand, frac, cnt in self.candidates[1:]:
            if cand in self.ties:
                continue
            lines.append(f"  then {self.name(cand)}: {frac:.2%} of {cnt}")
            shown += 1
            if shown == 5:
                break
        s = self.separating
        if s is not None:
            rows, kk = s["a"].shape
            lines.append(f"  separating input: A {rows}x{kk}, B {kk}x{s['b'].shape[1]}"
                         + ("" if s["c"] is None else ", C") + f"; the candidates differ at "
                         f"{len(s['differ'])} (pair, output) places")
            for x, y, i, j in s["differ"][:4]:
                lines.append(f"    D[{i},{j}]: {x} gives {float(s['outputs'][x][i, j])!r}, "
                             f"{y} gives {float(s['outputs'][y][i, j])!r}")
            for x, y in s["unseparated"][:3]:
                lines.append(f"    no input found that separates {x} from {y}")
        return "\n".join(lines)

    def save_separating(self, path: str | Path, *, force: bool = False) -> Path:
        """Write the separating input and each tied candidate's D to an ``.npz``: arrays
        ``a``, ``b``, ``c`` (when C is used), ``d_0``, ``d_1``, ... and ``labels``."""
        if self.separating is None:
            raise ValueError("no separating input: no two candidates tie")
        p = Path(path)
        if p.exists() and not force:
            raise ValueError(f"{p} exists; pass force=True (--force) to overwrite it")
        s = self.separating
        arrays: dict[str, Any] = {"a": s["a"], "b": s["b"]}
        if s["c"] is not None:
            arrays["c"] = s["c"]
        labels = list(s["outputs"])
        for i, lab in enumerate(labels):
            arrays[f"d_{i}"] = s["outputs"][lab]
        arrays["labels"] = np.array(labels)
        with open(p, "wb") as f:
            np.savez(f, **arrays)
        return p


# ------------------------------------------------------------------ checks
def _check(a: Any, b: Any, c: Any, d: Any, fin: FloatFormat, fout: FloatFormat,
           operand_rounding: str | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    arrs: list[np.ndarray | None] = []
    for name, x in (("A", a), ("B", b), ("C", c), ("D", d)):
        if x is None:
            arrs.append(None)
            continue
        try:
            v = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be an array of numbers, got "
                            f"{type(x).__name__}") from None
        arrs.append(v)
    av, bv, cv, dv = arrs
    assert av is not None and bv is not None and dv is not None
    if av.ndim != 2 or bv.ndim != 2 or av.shape[1] != bv.shape[0]:
        raise ValueError(f"A must be (M, K) and B (K, N), got shapes {av.shape} and {bv.shape}")
    m, k, n = av.shape[0], av.shape[1], bv.shape[1]
    if min(m, k, n) == 0:
        raise ValueError(f"empty GEMM: M, K, N = {m}, {k}, {n}")
    if dv.shape != (m, n):
        raise ValueError(f"D must have shape (M, N) = {(m, n)}, got {dv.shape}")
    if cv is not None and cv.shape != (m, n):
        raise ValueError(f"C must have shape (M, N) = {(m, n)} or be None, got {cv.shape}")
    for name, x in (("A", av), ("B", bv), ("C", cv)):
        if x is not None and not np.isfinite(x).all():
            idx = [int(i) for i in np.argwhere(~np.isfinite(x))[0]]
            raise ValueError(f"{name}{idx} = {float(x[tuple(idx)])!r}: identify_gemm needs "
                             "finite A, B and C (a NaN or inf output says nothing about the "
                             "order of the additions)")
    if operand_rounding is not None:  # the hardware's conversion (TF32: truncation)
        av = np.asarray(round_to(av, fin, _operand_mode(operand_rounding)), dtype=np.float64)
        bv = np.asarray(round_to(bv, fin, _operand_mode(operand_rounding)), dtype=np.float64)
    _exact_codes(av, fin, "A")
    _exact_codes(bv, fin, "B")
    if cv is not None:
        with np.errstate(over="ignore"):
            bad = cv.astype(np.float32).astype(np.float64) != cv
        if bad.any():
            idx = [int(i) for i in np.argwhere(bad)[0]]
            raise ValueError(f"C{idx} = {float(cv[tuple(idx)])!r} is not an FP32 value")
    with np.errstate(over="ignore", invalid="ignore"):
        back = np.asarray(round_to(dv, fout), dtype=np.float64)
    bad = ~((back == dv) | np.isnan(dv))
    if bad.any():
        idx = [int(i) for i in np.argwhere(bad)[0]]
        raise ValueError(f"D{idx} = {float(dv[tuple(idx)])!r} is not a value of "
                         f"output={fout.name!r}")
    return av, bv, cv, dv


# ------------------------------------------------------------------ separation
def _trial_rows(rng: np.random.Generator, rows: int, k_len: int, fin: FloatFormat,
                has_c: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Adversarial dot products: wide ranges, cancelling halves, one large product among
    tiny ones, sparse rows; C zero, tiny or comparable."""
    lo_e, hi_e = max(fin.emin + 2, -24), min(fin.emax - 1, 12)
    span = max(1, min(hi_e - lo_e, 14))
    a = np.empty((rows, k_len))
    b = np.empty((rows, k_len))
    for r in range(rows):
        kind = r % 7
        x = rng.standard_normal(k_len)
        y = rng.standard_normal(k_len)
        if kind == 0:  # wide exponent range
            x *= np.exp2(rng.integers(-span // 2, span // 2 + 1, k_len))
        elif kind == 1:  # the second half cancels the first
            half = k_len // 2
            x[half:2 * half] = -x[:half]
            y[:] = 1.0
            x += rng.standard_normal(k_len) * 2.0 ** -int(rng.integers(6, 14))
        elif kind == 2:  # one big product, many tiny ones
            x *= 2.0 ** -int(rng.integers(5, span + 1))
            x[int(rng.integers(0, k_len))] = 2.0 ** int(rng.integers(1, 4))
        elif kind == 3:  # sparse
            keep = rng.random(k_len) < 0.1
            x = np.where(keep, x * np.exp2(rng.integers(-span // 2, span // 2 + 1, k_len)), 0)
        elif kind == 4:  # large head, tail of small products (promotion boundaries)
            x[: max(1, k_len // 8)] *= 2.0 ** int(rng.integers(3, 7))
        else:  # blocks of 2^j elements at their own scales: partial sums far apart
            bs = 1 << int(rng.integers(3, max(4, min(9, k_len.bit_length()))))
            nb = -(-k_len // bs)
            ea = np.repeat(rng.integers(-span // 2, span // 2 + 1, nb), bs)[:k_len]
            eb = np.repeat(rng.integers(-span // 2, span // 2 + 1, nb), bs)[:k_len]
            x *= np.exp2(ea)
            y *= np.exp2(eb)
            if kind == 6 and nb > 1:  # one block cancels another exactly
                i, j = rng.choice(nb, 2, replace=False)
                li, lj = min(bs, k_len - i * bs), min(bs, k_len - j * bs)
                w = min(li, lj)
                x[j * bs:j * bs + w] = -x[i * bs:i * bs + w]
                y[j * bs:j * bs + w] = y[i * bs:i * bs + w]
        scale = 2.0 ** int(rng.integers(-2, 3))
        a[r] = round_to(np.clip(x * scale, -fin.max, fin.max), fin)
        b[r] = round_to(np.clip(y, -fin.max, fin.max), fin)
    c = None
    if has_c:
        mags = np.exp2(rng.integers(-12, 8, rows).astype(np.float64))
        c = (rng.standard_normal(rows) * mags * (rng.random(rows) < 0.8)).astype(np.float32)
        c = c.astype(np.float64)
    return a, b.T.copy(), c


def _separate(entries: list[_Entry], k_len: int, has_c: bool, fin: FloatFormat,
              fout: FloatFormat, models: dict[str, Any], seed: int, batches: int,
              keep_rows: int = 16, pad: int = 16) -> dict[str, Any]:
    """A small GEMM with K = k_len on which the tied entries' outputs differ pairwise."""
    rng = np.random.default_rng(seed)
    pairs = {(i, j) for i in range(len(entries)) for j in range(i + 1, len(entries))}
    kept_a: list[np.ndarray] = []
    kept_b: list[np.ndarray] = []
    kept_c: list[float] = []
    for _ in range(batches):
        if not pairs or len(kept_a) >= keep_rows:
            break
        a, bt, c = _trial_rows(rng, 40, k_len, fin, has_c)
        prob = _Problem(a, bt, c, fin, fout, models, pairs=True)
        outs = [prob.run(e.expr) for e in entries]
        for r in range(a.shape[0]):
            split = {(i, j) for (i, j) in pairs if _differ(outs[i][r:r + 1],
                                                            outs[j][r:r + 1])[0]}
            if split and len(kept_a) < keep_rows:
                kept_a.append(a[r])
                kept_b.append(bt[:, r])
                kept_c.append(float(c[r]) if c is not None else 0.0)
                pairs -= split
    if len(kept_a) < pad:  # a GEMM of at least pad x pad, so a library runs its GEMM path
        a, bt, c = _trial_rows(rng, pad - len(kept_a), k_len, fin, has_c)
        kept_a += list(a)
        kept_b += list(bt.T)
        kept_c += [0.0] * len(a) if c is None else [float(v) for v in c]
    sa = np.array(kept_a)
    sb = np.array(kept_b).T.copy()
    sc = np.diag(kept_c) if has_c else None
    prob = _Problem(sa, sb, sc, fin, fout, models)
    r = sa.shape[0]
    grid = {e.cand.label(): prob.run(e.expr).reshape(r, r) for e in entries}
    labels = list(grid)
    differ = []
    unseparated = []
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            d = _differ(grid[labels[i]], grid[labels[j]])
            if d.any():
                ii, jj = (int(v) for v in np.argwhere(d)[0])
                differ.append((labels[i], labels[j], ii, jj))
            else:
                unseparated.append((labels[i], labels[j]))
    return {"a": sa, "b": sb, "c": sc, "outputs": grid, "differ": differ,
            "unseparated": unseparated}


# ------------------------------------------------------------------ the search
def _library_names(k_len: int, has_c: bool, groups: dict[str, tuple[Any, list[str], bool]]
                   ) -> dict[str, str]:
    """Canonical expression -> library GEMM name (``cublaslt_fp8`` = promote(128, h100))."""
    out: dict[str, str] = {}
    for name, lib in LIBRARY_GEMMS.items():
        mdl = lib.model
        if isinstance(mdl, Promote) and isinstance(mdl.inner, Architecture):
            cand = GemmCandidate(mdl.inner.name, promote=mdl.every, c_at="first")
        elif isinstance(mdl, Architecture):
            cand = GemmCandidate(mdl.name)
        else:
            continue
        key = next((g for g, v in groups.items() if g == cand.model or cand.model in v[1]),
                   None)
        if key is None or (cand.promote and cand.promote >= k_len):
            continue
        canon = _canonical(_expression(replace(cand, model=key), k_len, has_c, key))
        out[canon] = name if canon not in out else f"{out[canon]}, {name}"
    return out


def identify_gemm(a: Any, b: Any, c: Any, d: Any, *, inputs: FloatFormat | str,
                  output: FloatFormat | str = "fp32", models: Iterable[str] | None = None,
                  promote: Sequence[int] = (32, 64, 128, 256, 512, 1024),
                  split_k: Sequence[int] = (2, 3, 4, 8, 16),
                  tails: Sequence[int] = (8, 16, 32, 64, 128),
                  sample: int = 256, max_survivors: int = 24, separate: bool = True,
                  seed: int = 0, trials: int = 25, operand_rounding: str | None = None,
                  progress: Callable[[str], None] | None = None) -> GemmIdentification:
    """Which instruction model, promotion interval, split-K and K tail reproduce a GEMM.

    ``a`` (M, K) and ``b`` (K, N) hold values of ``inputs``, ``c`` (M, N) FP32 values or
    None, ``d`` (M, N) the library's output in ``output`` (fp32, fp16 or bf16). Every
    candidate (see the module docstring) is run on a sub-grid of about ``sample``
    outputs, the survivors on 4,096, then on all M*N; the result ranks them by the
    fraction of outputs reproduced bit for bit and, when several explain everything,
    holds a small separating GEMM (``separate=False`` skips that search).
    ``operand_rounding`` (None: A and B must already be values of ``inputs``) converts
    them first: ``"rtz"`` with ``inputs="tf32"`` is what a TF32 tensor core does to FP32
    operands (see :func:`lowprec.matmul.matmul`).

    >>> import numpy as np, lowprec as lp
    >>> from lowprec.matmul import promote
    >>> rng = np.random.default_rng(0)
    >>> a = lp.round_to(rng.standard_normal((8, 512)), "fp8_e4m3")
    >>> b = lp.round_to(rng.standard_normal((512, 8)), "fp8_e4m3")
    >>> d = lp.matmul(a, b, inputs="fp8_e4m3", model=promote(128))
    >>> ident = identify_gemm(a, b, None, d, inputs="fp8_e4m3", separate=False)
    >>> ident.best.label(), ident.explained
    ('h100 promote 128', 1.0)
    """
    fin, fout = get_format(inputs), get_format(output)
    if fout.name not in _OUTPUTS:
        raise ValueError(f"output must be one of {', '.join(_OUTPUTS)}, got {fout.name!r}")
    for name, seq in (("promote", promote), ("split_k", split_k), ("tails", tails)):
        if any(not isinstance(v, (int, np.integer)) or v < 1 for v in seq):
            raise ValueError(f"{name} must hold positive integers, got {list(seq)}")
    if sample < 1 or max_survivors < 1:
        raise ValueError("sample and max_survivors must be >= 1")
    av, bv, cv, dv = _check(a, b, c, d, fin, fout, operand_rounding)
    m, k_len, n = av.shape[0], av.shape[1], bv.shape[1]
    has_c = cv is not None
    groups = _model_groups(fin, fout, models)
    if not groups:
        raise ValueError(f"no model takes inputs={fin.name} with output={fout.name}")
    mobj = {name: v[0] for name, v in groups.items()}
    say = progress or (lambda _msg: None)

    entries: dict[str, _Entry] = {}
    order: list[_Entry] = []
    for cand in _enumerate(k_len, has_c, groups, fout, promote, split_k, tails):
        expr = _expression(cand, k_len, has_c, cand.model)
        canon = _canonical(expr)
        if canon in entries:
            entries[canon].equivalent.append(cand)
            continue
        e = _Entry(cand, expr, canon)
        entries[canon] = e
        order.append(e)
    say(f"{len(order)} distinct candidates")

    rng = np.random.default_rng(seed)
    side = max(1, int(math.isqrt(sample)))
    stages: list[tuple[np.ndarray, np.ndarray]] = []
    for s in (side, 64):
        r, cc = min(m, s), min(n, s)
        if r * cc < m * n and (not stages or r * cc > stages[-1][0].size * stages[-1][1].size):
            stages.append((np.sort(rng.choice(m, r, replace=False)),
                           np.sort(rng.choice(n, cc, replace=False))))
    stages.append((np.arange(m), np.arange(n)))

    alive = order
    unconfirmed = 0
    for level, (rows, cols) in enumerate(stages, start=1):
        sub_c = None if cv is None else cv[np.ix_(rows, cols)]
        prob = _Problem(av[rows], bv[:, cols], sub_c, fin, fout, mobj)
        want = dv[np.ix_(rows, cols)].ravel()
        for e in alive:
            e.out = prob.run(e.expr)
            e.frac = float(_same(e.out, want).mean())
            e.n, e.stage = want.size, level
        top = max(e.frac for e in alive)
        if level == len(stages):
            break
        keep = [e for e in alive if e.frac == top] if top == 1.0 else sorted(
            [e for e in alive if e.frac >= top - 0.05], key=lambda e: -e.frac)
        if top == 1.0:
            unconfirmed += max(0, len(keep) - max_survivors)
        alive = keep[:max_survivors]
        say(f"stage {level}: {want.size} outputs, best {top:.2%}, {len(alive)} go on")

    ranked = sorted(order, key=lambda e: (-e.stage, -e.frac, e.cand.complexity()))
    best = ranked[0]
    assert best.out is not None
    ties = [e for e in ranked[1:] if e.stage == best.stage and e.out is not None
            and best.frac == 1.0 and e.frac == 1.0 and _same(e.out, best.out).all()]
    separating = None
    if separate and ties:
        say(f"searching a separating input for {1 + len(ties)} candidates")
        separating = _separate([best, *ties[:7]], k_len, has_c, fin, fout, mobj, seed, trials,
                               pad=min(16, m, n))
    libs = _library_names(k_len, has_c, groups)
    return GemmIdentification(
        best=best.cand, explained=best.frac, n=best.n,
        candidates=[(e.cand, e.frac, e.n) for e in ranked],
        equivalent={e.cand.label(): e.equivalent for e in order if e.equivalent},
        aliases={name: v[1] for name, v in groups.items() if v[1]},
        ties=[e.cand for e in ties], separating=separating, shape=(m, k_len, n),
        inputs=fin.name, output=fout.name,
        library_names={e.cand.label(): libs[e.canon] for e in order if e.canon in libs},
        unconfirmed=unconfirmed)


def run_candidate(a: Any, b: Any, c: Any, candidate: GemmCandidate, *,
                  inputs: FloatFormat | str, output: FloatFormat | str = "fp32") -> np.ndarray:
    """D of one candidate on (A, B, C): what the library it names would return.

    >>> import numpy as np
    >>> a = np.array([[1.0, 2.0**24, 1.0, -2.0**24]]); b = np.ones((4, 1))
    >>> run = lambda cand: float(run_candidate(a, b, None, cand, inputs="fp32")[0, 0])
    >>> run(GemmCandidate("sequential")), run(GemmCandidate("sequential", split_k=2))
    (0.0, 1.0)
    """
    fin, fout = get_format(inputs), get_format(output)
    if fout.name not in _OUTPUTS:
        raise ValueError(f"output must be one of {', '.join(_OUTPUTS)}, got {fout.name!r}")
    if not isinstance(candidate, GemmCandidate):
        raise TypeError(f"candidate must be a GemmCandidate, got {type(candidate).__name__}")
    if candidate.reduction not in _REDUCTIONS or candidate.c_at not in _C_AT:
        raise ValueError(f"reduction must be one of {_REDUCTIONS} and c_at one of {_C_AT}")
    av = np.asarray(a, dtype=np.float64)
    bv = np.asarray(b, dtype=np.float64)
    if av.ndim != 2 or bv.ndim != 2 or av.shape[1] != bv.shape[0]:
        raise ValueError(f"A must be (M, K) and B (K, N), got shapes {av.shape} and {bv.shape}")
    m, n = av.shape[0], bv.shape[1]
    _exact_codes(av, fin, "A")
    _exact_codes(bv, fin, "B")
    cv = None if c is None else np.broadcast_to(np.asarray(c, dtype=np.float64), (m, n))
    from .matmul import get_model

    mdl = candidate.model if candidate.model in ("exact", "sequential") else get_model(
        candidate.model)
    prob = _Problem(av, bv, cv, fin, fout, {candidate.model: mdl})
    expr = _expression(candidate, av.shape[1], cv is not None, candidate.model)
    return prob.run(expr).reshape(m, n)
