"""``identify_gemm``: a library GEMM's instruction model, promotion, split-K and K tail.

Ground truths are built here from ``lp.matmul`` calls and float32 additions written
out in the test (not through ``identify_gemm``'s own evaluator), on random operands with
a wide exponent range; identify_gemm must name the truth (or an expression equal to it)
first with every output explained, and score a deliberately wrong candidate below 1.
"""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp
from lowprec.cli import main
from lowprec.gemm_identify import GemmCandidate, identify_gemm, run_candidate
from lowprec.matmul import promote


def _operands(rng, m, k, n, fmt, spread=5):
    """Random values with a wide exponent range, and a scale of their own for every
    run of 32 along K (so partial sums over different K ranges differ in magnitude and
    the order of their FP32 additions shows in the result)."""
    blocks = -(-k // 32)
    ea = np.repeat(rng.integers(-spread, spread + 1, (m, blocks)), 32, axis=1)[:, :k]
    eb = np.repeat(rng.integers(-spread, spread + 1, (blocks, n)), 32, axis=0)[:k]
    a = rng.standard_normal((m, k)) * np.exp2(ea + rng.integers(-1, 2, (m, k)))
    b = rng.standard_normal((k, n)) * np.exp2(eb + rng.integers(-1, 2, (k, n)))
    return lp.round_to(a, fmt), lp.round_to(b, fmt)


def _split_k(a, b, c, s, fmt, model, order="sequential"):
    """Split-K by hand: s chunks of ceil(K/s), C into the first chunk's MMA, the FP32
    partial results added in chunk order (or reversed) with numpy float32 additions."""
    k = a.shape[1]
    size = -(-k // s)
    parts = []
    for i, lo in enumerate(range(0, k, size)):
        hi = min(lo + size, k)
        parts.append(lp.matmul(a[:, lo:hi], b[lo:hi], c if i == 0 else None, inputs=fmt,
                               model=model).astype(np.float32))
    if order == "reversed":
        parts = parts[::-1]
    acc = parts[0]
    for p in parts[1:]:
        acc = acc + p
    return acc.astype(np.float64)


def _frac(ident, cand):
    """The fraction identify_gemm gave a candidate (or the expression equal to it)."""
    for c, frac, _ in ident.candidates:
        if c == cand or cand in ident.equivalent.get(c.label(), []):
            return frac
    raise AssertionError(f"{cand.label()} was not tried")


def _by_label(label):
    """The candidate of a label such as ``h100 promote 128, split-K 2 (sequential)``."""
    kw = {}
    for part in label.split(", "):
        if part.startswith("split-K"):
            kw["split_k"] = int(part.split()[1])
            kw["reduction"] = part.split("(")[1].rstrip(")")
        else:
            words = part.split()
            kw["model"] = words[0]
            if "promote" in words:
                kw["promote"] = int(words[words.index("promote") + 1])
    return GemmCandidate(**kw)


def _names_truth(ident, truth):
    return ident.best == truth or truth in ident.equivalent.get(ident.best.label(), [])


CASES = {
    "wgmma fp8 promote 128": dict(
        fmt="fp8_e4m3", shape=(24, 512, 20), c=False,
        make=lambda a, b, c: lp.matmul(a, b, inputs="fp8_e4m3", model=promote(128, "h100:wgmma")),
        truth=GemmCandidate("h100", promote=128), wrong=GemmCandidate("h100")),
    "wgmma fp8 fast accumulation": dict(
        fmt="fp8_e4m3", shape=(24, 384, 20), c=False,
        make=lambda a, b, c: lp.matmul(a, b, inputs="fp8_e4m3", model="h100:wgmma"),
        truth=GemmCandidate("h100"), wrong=GemmCandidate("h100", promote=128)),
    "a100 fp16 with C": dict(
        fmt="fp16", shape=(32, 256, 16), c=True,
        make=lambda a, b, c: lp.matmul(a, b, c, inputs="fp16", model="a100"),
        truth=GemmCandidate("a100"), wrong=GemmCandidate("h100")),
    "split-K 2 with C": dict(
        fmt="fp16", shape=(16, 512, 24), c=True,
        make=lambda a, b, c: _split_k(a, b, c, 2, "fp16", "h100"),
        truth=GemmCandidate("h100", split_k=2), wrong=GemmCandidate("h100")),
    "split-K 4 reversed, fp8": dict(
        fmt="fp8_e4m3", shape=(16, 512, 16), c=True,
        make=lambda a, b, c: _split_k(a, b, c, 4, "fp8_e4m3", "h100", "reversed"),
        truth=GemmCandidate("h100", split_k=4, reduction="reversed"),
        wrong=GemmCandidate("h100", split_k=4)),
    "split-K 4 without C": dict(
        fmt="bf16", shape=(20, 256, 20), c=False,
        make=lambda a, b, c: _split_k(a, b, None, 4, "bf16", "b200"),
        truth=GemmCandidate("h100", split_k=4), wrong=GemmCandidate("h100", split_k=2)),
    "dropped tail of 8": dict(
        fmt="fp16", shape=(16, 300, 16), c=False,
        make=lambda a, b, c: lp.matmul(a[:, :296], b[:296], inputs="fp16", model="h100"),
        truth=GemmCandidate("h100", tail=8), wrong=GemmCandidate("h100", tail=16)),
    "exact": dict(
        fmt="fp8_e5m2", shape=(16, 256, 16), c=False,
        make=lambda a, b, c: lp.matmul(a, b, inputs="fp8_e5m2", model="exact"),
        truth=GemmCandidate("exact"), wrong=GemmCandidate("sequential")),
}


@pytest.mark.parametrize("name", list(CASES))
def test_names_the_ground_truth(name):
    case = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    m, k, n = case["shape"]
    a, b = _operands(rng, m, k, n, case["fmt"])
    c = (rng.standard_normal((m, n)) * 4).astype(np.float32).astype(np.float64) \
        if case["c"] else None
    d = case["make"](a, b, c)
    ident = identify_gemm(a, b, c, d, inputs=case["fmt"], separate=False)
    assert _names_truth(ident, case["truth"]), str(ident)
    assert ident.explained == 1.0 and ident.n == m * n
    assert _frac(ident, case["wrong"]) < 1.0
    # the evaluator agrees with the hand-built truth on every output
    got = run_candidate(a, b, c, ident.best, inputs=case["fmt"])
    np.testing.assert_array_equal(got.astype(np.float32).view(np.uint32),
                                  d.astype(np.float32).view(np.uint32))


def test_instruction_aliases_and_library_names():
    rng = np.random.default_rng(5)
    a, b = _operands(rng, 16, 256, 16, "fp8_e4m3")
    d = lp.matmul(a, b, inputs="fp8_e4m3", model="cublaslt_fp8")
    ident = identify_gemm(a, b, None, d, inputs="fp8_e4m3", separate=False)
    assert ident.best == GemmCandidate("h100", promote=128)
    assert "h100:wgmma" in ident.aliases["h100"]
    assert "cublaslt_fp8" in ident.name(ident.best)
    # Blackwell's FP8 rules are other candidates, and they do not explain these outputs
    assert _frac(ident, GemmCandidate("b200", promote=128)) < 1.0
    assert _frac(ident, GemmCandidate("b200:tcgen05", promote=128)) < 1.0
    # restricted to named models: the instruction's own name is the candidate's
    only = identify_gemm(a, b, None, d, inputs="fp8_e4m3", models=["h100:wgmma", "b200"],
                         separate=False)
    assert only.best == GemmCandidate("h100:wgmma", promote=128) and only.explained == 1.0
    assert {c.model for c, _, _ in only.candidates} == {"h100:wgmma", "b200"}


def test_fp16_output_accumulators():
    rng = np.random.default_rng(9)
    a, b = _operands(rng, 16, 256, 16, "fp16")
    d16 = lp.matmul(a, b, inputs="fp16", output="fp16", model="a100")  # FP16 C/D MMA
    ident = identify_gemm(a, b, None, d16, inputs="fp16", output="fp16", separate=False)
    assert ident.best == GemmCandidate("a100", accumulate="fp16") and ident.explained == 1.0
    d32 = lp.round_to(lp.matmul(a, b, inputs="fp16", model="h100"), "fp16")  # FP32, rounded
    ident = identify_gemm(a, b, None, d32, inputs="fp16", output="fp16", separate=False)
    # the FP32 rules differ in their last bits only, which the FP16 rounding hides: they
    # tie, and every FP16-accumulator candidate but exact's (one rounding to FP16,
    # against FP32 then FP16) is told apart
    assert ident.explained == 1.0
    assert GemmCandidate("h100") in [ident.best, *ident.ties]
    assert all(c.accumulate == "fp32" for c in [ident.best, *ident.ties] if c.model != "exact")
    assert _frac(ident, GemmCandidate("h100", accumulate="fp16")) < 1.0


def test_tf32_from_fp32_operands():
    """FP32 data through a TF32 GEMM: the hardware truncates the operands; identify_gemm
    with operand_rounding="rtz" explains every output, with "rne" it does not."""
    rng = np.random.default_rng(32)
    a = rng.standard_normal((16, 128)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal((128, 16)).astype(np.float32).astype(np.float64)
    d = lp.matmul(a, b, inputs="tf32", model="a100", operand_rounding="rtz")
    ident = identify_gemm(a, b, None, d, inputs="tf32", operand_rounding="rtz",
                          separate=False)
    assert ident.best == GemmCandidate("a100") and ident.explained == 1.0
    rne = identify_gemm(a, b, None, d, inputs="tf32", operand_rounding="rne", separate=False)
    assert rne.explained < 0.5
    with pytest.raises(ValueError, match="is not a value of inputs='tf32'"):
        identify_gemm(a, b, None, d, inputs="tf32")


def test_run_candidate_matches_lowprec_promote_with_c():
    rng = np.random.default_rng(3)
    a, b = _operands(rng, 8, 384, 8, "fp8_e4m3")
    c = rng.standard_normal((8, 8)).astype(np.float32).astype(np.float64)
    want = lp.matmul(a, b, c, inputs="fp8_e4m3", model=promote(128, "h100"))
    got = run_candidate(a, b, c, GemmCandidate("h100", promote=128, c_at="first"),
                        inputs="fp8_e4m3")
    np.testing.assert_array_equal(got, want)
    other = run_candidate(a, b, c, GemmCandidate("h100", promote=128, c_at="last"),
                          inputs="fp8_e4m3")
    assert (other != want).any()


def test_ties_come_with_a_separating_input():
    """Plain normal operands: promote(128) and split-K variants of it agree on every
    output; the separating input makes them differ, checked by running each of them."""
    rng = np.random.default_rng(0)
    a = lp.round_to(rng.standard_normal((32, 512)), "fp8_e4m3")
    b = lp.round_to(rng.standard_normal((512, 32)), "fp8_e4m3")
    d = lp.matmul(a, b, inputs="fp8_e4m3", model=promote(128))
    ident = identify_gemm(a, b, None, d, inputs="fp8_e4m3")
    assert ident.explained == 1.0 and ident.ties, str(ident)
    sep = ident.separating
    assert sep is not None and sep["differ"] and not sep["unseparated"]
    assert sep["a"].shape[1] == 512 and sep["a"].shape[0] >= 16 and sep["c"] is None
    tied = [ident.best, *ident.ties[:7]]
    outs = {t.label(): run_candidate(sep["a"], sep["b"], None, t, inputs="fp8_e4m3")
            for t in tied}
    # the best's D there is lowprec's promote model, computed independently
    np.testing.assert_array_equal(outs[ident.best.label()],
                                  lp.matmul(sep["a"], sep["b"], inputs="fp8_e4m3",
                                            model=promote(128)))
    labels = list(outs)
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            assert (outs[labels[i]] != outs[labels[j]]).any(), (labels[i], labels[j])
    for x, y, i, j in sep["differ"]:
        assert outs[x][i, j] != outs[y][i, j]
    assert "separating input" in str(ident)


@pytest.mark.parametrize("bad, match", [
    (dict(b=np.ones((7, 4))), "A must be \\(M, K\\) and B \\(K, N\\)"),
    (dict(d=np.ones((4, 5))), "D must have shape"),
    (dict(c=np.ones((3, 4))), "C must have shape"),
    (dict(a=np.full((4, 8), 0.1)), "is not a value of inputs='fp8_e4m3'"),
    (dict(a=np.where(np.eye(4, 8) > 0, np.nan, 1.0)), "needs finite A, B and C"),
    (dict(d=np.full((4, 4), 0.1)), "is not a value of output='fp16'"),
    (dict(c=np.full((4, 4), 0.1)), "is not an FP32 value"),
    (dict(output="fp8_e4m3"), "output must be one of"),
    (dict(models=["v100"]), "do not take inputs=fp8_e4m3"),
    (dict(promote=(0,)), "positive integers"),
    (dict(a="text"), "A must be an array of numbers"),
])
def test_bad_inputs(bad, match):
    args = dict(a=np.ones((4, 8)), b=np.ones((8, 4)), c=None, d=np.full((4, 4), 8.0),
                inputs="fp8_e4m3", output="fp16")
    args.update(bad)
    kw = {k: v for k, v in args.items() if k not in ("a", "b", "c", "d")}
    with pytest.raises((ValueError, TypeError), match=match):
        identify_gemm(args["a"], args["b"], args["c"], args["d"], **kw)


def test_cli(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a = lp.round_to(rng.standard_normal((24, 512)), "fp8_e4m3")
    b = lp.round_to(rng.standard_normal((512, 24)), "fp8_e4m3")
    c = rng.standard_normal((24, 24)).astype(np.float32).astype(np.float64)
    d = _split_k(a, b, c, 2, "fp8_e4m3", "h100")
    for name, x in (("A", a), ("B", b), ("C", c), ("D", d)):
        np.save(tmp_path / f"{name}.npy", x)
    files = [str(tmp_path / f"{n}.npy") for n in ("A", "B", "D")]
    sep = tmp_path / "sep.npz"
    code = main(["validate", "identify", "gemm", *files, "--c", str(tmp_path / "C.npy"),
                 "--inputs", "fp8_e4m3", "--separating-out", str(sep)])
    out = capsys.readouterr().out
    assert code == 0
    # split-K 2 with C in the first MMA is promote(256) with C in the first MMA
    assert "best h100 promote 256" in out and "explains 576/576" in out
    assert "the same arithmetic as: h100, split-K 2 (sequential)" in out
    assert "no ties: nothing written" in out and not sep.exists()
    # an existing file is not overwritten without --force
    sep.write_text("keep")
    code = main(["validate", "identify", "gemm", *files, "--inputs", "fp8_e4m3",
                 "--separating-out", str(sep)])
    err = capsys.readouterr().err
    assert code == 2 and "exists; pass --force" in err and sep.read_text() == "keep"
    # ties (promote(128) and split-K variants on plain normal operands): with --force the
    # separating input replaces the file, and the tied candidates' D in it differ
    np.save(tmp_path / "D2.npy", lp.matmul(a, b, inputs="fp8_e4m3", model=promote(128)))
    code = main(["validate", "identify", "gemm", files[0], files[1], str(tmp_path / "D2.npy"),
                 "--inputs", "fp8_e4m3", "--separating-out", str(sep), "--force"])
    out = capsys.readouterr().out
    assert code == 0 and "separating input written" in out
    with np.load(sep) as z:
        assert z["a"].shape[1] == 512 and z["b"].shape[0] == 512 and "c" not in z
        labels = list(z["labels"])
        assert len(labels) >= 2 and labels[0] == "h100 promote 128"
        for i in range(1, len(labels)):
            assert (z["d_0"] != z[f"d_{i}"]).any()
            again = run_candidate(z["a"], z["b"], None, _by_label(labels[i]),
                                  inputs="fp8_e4m3")
            np.testing.assert_array_equal(again, z[f"d_{i}"])
    # a shape mismatch: one line, no traceback
    np.save(tmp_path / "Bbad.npy", b[:100])
    code = main(["validate", "identify", "gemm", files[0], str(tmp_path / "Bbad.npy"),
                 files[2], "--inputs", "fp8_e4m3"])
    err = capsys.readouterr().err
    assert code == 2 and "A must be (M, K)" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_narrow_output_given_as_fp32_is_named_in_a_note() -> None:
    """A bf16 D read with output="fp32" explains almost nothing; the result says why."""
    rng = np.random.default_rng(4)
    a = lp.round_to(rng.standard_normal((8, 64)), "bf16")
    b = lp.round_to(rng.standard_normal((64, 8)), "bf16")
    d = lp.matmul(a, b, inputs="bf16", output="bf16", model="h100")
    wrong = identify_gemm(a, b, None, d, inputs="bf16", separate=False)
    assert wrong.explained < 0.5
    assert wrong.notes == ["every finite D value is a bf16 value: if the library wrote bf16, "
                           "pass output='bf16'"]
    assert "note: every finite D value is a bf16 value" in str(wrong)
    right = identify_gemm(a, b, None, d, inputs="bf16", output="bf16", separate=False)
    assert right.explained == 1.0 and right.notes == []
