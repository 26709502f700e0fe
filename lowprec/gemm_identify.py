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

from ._gemm_search import (
    _C_AT,
    _OUTPUTS,
    _REDUCTIONS,
    GemmCandidate,
    _canonical,
    _Entry,
    _enumerate,
    _expression,
    _model_groups,
    _Problem,
    _same,
    _separate,
)
from .formats import FloatFormat, get_format
from .library_gemms import LIBRARY_GEMMS
from .matmul import _exact_codes, _operand_mode
from .rounding import round_to
from .tensorcores import Architecture, Promote

__all__ = ["GemmCandidate", "GemmIdentification", "identify_gemm", "run_candidate"]


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
    notes:
        What the data itself suggests when nothing explains it (a D whose every value
        is a bf16 or fp16 value while ``output="fp32"`` was given).
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
    notes: list[str] = field(default_factory=list)

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
        lines.extend(f"  note: {note}" for note in self.notes)
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
    notes = []
    if best.frac < 1.0 and fout.name == "fp32":
        for narrow in ("bf16", "fp16"):
            finite = dv[np.isfinite(dv)]
            with np.errstate(over="ignore"):
                if finite.size and np.array_equal(round_to(finite, narrow), finite):
                    notes.append(f"every finite D value is a {narrow} value: if the library "
                                 f"wrote {narrow}, pass output={narrow!r}")
                    break
    return GemmIdentification(
        best=best.cand, explained=best.frac, n=best.n,
        candidates=[(e.cand, e.frac, e.n) for e in ranked],
        equivalent={e.cand.label(): e.equivalent for e in order if e.equivalent},
        aliases={name: v[1] for name, v in groups.items() if v[1]},
        ties=[e.cand for e in ties], separating=separating, shape=(m, k_len, n),
        inputs=fin.name, output=fout.name,
        library_names={e.cand.label(): libs[e.canon] for e in order if e.canon in libs},
        unconfirmed=unconfirmed, notes=notes)


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
