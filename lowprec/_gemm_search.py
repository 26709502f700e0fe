"""The search inside :func:`lowprec.gemm_identify.identify_gemm`: candidates as FP32
expressions over tensor-core runs, their evaluation on a sub-grid, and the search for a
separating input (see that module's docstring for what is identified and how)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .formats import FloatFormat
from .instructions import INSTRUCTIONS
from .matmul import matmul, vecdot
from .rounding import round_to
from .tensorcores import ARCHITECTURES, Architecture, TensorCore

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

