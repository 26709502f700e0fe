"""The autograder on submissions built from the teacher's tutorial 01 (and variants of it).

Right answers come from the teacher's solutions or from formulas written here (the IEEE
layout as exact arithmetic), never from the checkers; wrong answers are the classic
mistakes the checkers name. Each submission runs in a real subprocess.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from lowprec import tutorials
from lowprec.cli import main
from lowprec.grading import exercise_spec, grade_submission, open_tutorial, read_submission
from lowprec.grading.handouts import write_assignments
from lowprec.grading.variants import read_roster, variant_text

SETUP = "# %%\nimport lowprec as lp\nfrom lowprec import exercises\n"


def _cell(label: str, body: str) -> str:
    return f'# %% tags=["exercise"]\n# {label}\n{textwrap.dedent(body).strip()}\n'


def _submission(tmp: Path, name: str, cells: list[str]) -> Path:
    path = tmp / name
    path.write_text(SETUP + "\n".join(cells), encoding="utf-8")
    return path


# The teacher's answers to tutorial 01, from its fields (not from lowprec).
RIGHT_01 = {
    "1": "fp16_max = (2 - 2**-10) * 2.0**15",
    "2": "value = (1 + 5 / 8) * 2.0**3",
    "3": "value = 3 / 8 * 2.0**-6",
    "4": "tiny = 2.0**-133",
    "5": "count = 256 - 8 - 1",
    "6": "gap = 2.0",
    "7": "e4m3_max = 1.75 * 256",
}


@pytest.fixture(scope="module")
def spec01() -> list:
    return exercise_spec(open_tutorial("01"))


def test_spec_comes_from_the_teachers_check_cells(spec01: list) -> None:
    assert [e.number for e in spec01] == ["1", "2", "3", "4", "5", "6", "7"]
    assert spec01[1].checks[0].answers == ("value",)
    assert "check_decode" in spec01[1].checks[0].call
    # 'by hand' is what the exercise text says (see docs/tutorials.md)
    assert [e.number for e in spec01 if e.by_hand] == ["1", "2", "7"]


def test_full_marks_for_the_teachers_version_py_and_ipynb(tmp_path: Path) -> None:
    jupytext = pytest.importorskip("jupytext")
    subs = tmp_path / "subs"
    subs.mkdir()
    teacher = open_tutorial("01")
    (subs / "teacher_py.py").write_text(teacher, encoding="utf-8")
    jupytext.write(jupytext.reads(teacher, fmt="py:percent"), subs / "teacher_nb.ipynb")
    out = tmp_path / "grades.csv"
    assert main(["grade", str(subs), "--tutorial", "01", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert len(rows) == 2
    for row in rows:
        assert row["total"] == "7" and row["max"] == "7" and row["status"] == "ok", row
        assert all(row[f"ex{k}"] == "1" for k in range(1, 8))
    feedback = (tmp_path / "grades-feedback" / "teacher_nb.md").read_text()
    assert "Total: 7 / 7" in feedback and feedback.count("Correct:") == 7


def test_known_wrong_answers_get_exact_points_and_reasons(tmp_path: Path, spec01: list) -> None:
    cells = [
        _cell("Exercise 1: the largest fp16", "fp16_max = 2**16 - 1"),        # the integer
        _cell("Exercise 2: decode by hand",                                   # a lookup
              'value = float(lp.decode(0b0_1010_101, "fp8_e4m3"))'),
        _cell("Exercise 3: a subnormal", "value = 1 / 0"),                    # raises
        _cell("Exercise 4: the smallest positive bf16", RIGHT_01["4"]),
        _cell("Exercise 5: counting values", "count = 256"),                  # every code
        _cell("Exercise 6: the gap at 256", "gap = (2.0"),                    # syntax error
        _cell("Exercise 7: the largest E4M3", RIGHT_01["7"]),
        "# %%\nexercises.check_max('fp8_e4m3', 0)  # edited checks change nothing\n",
    ]
    r = grade_submission(_submission(tmp_path, "mixed.py", cells), spec01, timeout=60)
    assert r.status == "ok", r.note
    points = {e.number: e.points for e in r.exercises}
    assert points == {"1": 0, "2": 0, "3": 0, "4": 1, "5": 0, "6": 0, "7": 1}
    assert r.total == 2
    fb = {e.number: " ".join(e.feedback) for e in r.exercises}
    assert "unsigned integer" in fb["1"]
    # feedback teaches without the answer; the teacher's version has it
    assert "65504" not in fb["1"] and "65504" in " ".join(r.exercises[0].solution)
    assert "13.0" not in fb["2"]
    from lowprec.grading.report import feedback_text

    assert "65504" not in feedback_text(r, "01")
    assert "Solution: the largest finite fp16 is 65504" in feedback_text(r, "01", reveal=True)
    assert "by hand" in fb["2"] and "`lp`" in fb["2"]
    assert "ZeroDivisionError" in fb["3"] and "line 2" in fb["3"]
    assert "counted every code" in fb["5"]
    assert "SyntaxError" in fb["6"]
    assert fb["4"].startswith("Correct")


def test_an_infinite_loop_is_stopped_and_costs_the_rest(tmp_path: Path, spec01: list) -> None:
    cells = [_cell("Exercise 1: the largest fp16", RIGHT_01["1"]),
             _cell("Exercise 2: decode by hand", RIGHT_01["2"]),
             _cell("Exercise 3: a subnormal", "while True:\n    pass"),
             _cell("Exercise 4: the smallest positive bf16", RIGHT_01["4"])]
    r = grade_submission(_submission(tmp_path, "loop.py", cells), spec01, timeout=8)
    assert r.status == "timeout"
    assert "time limit (8 s)" in r.note and "Exercise 3" in r.note
    assert [e.points for e in r.exercises] == [1, 1, 0, 0, 0, 0, 0]
    assert "time limit" in r.exercises[3].feedback[0]
    assert r.seconds < 60


def test_invalid_python_and_unreadable_notebooks_get_zero(tmp_path: Path, spec01: list) -> None:
    bad = tmp_path / "garbage.py"
    bad.write_text("this is not python at all (\n", encoding="utf-8")
    r = grade_submission(bad, spec01, timeout=60)
    assert r.total == 0 and "not valid Python" in r.note
    assert all("SyntaxError" in e.feedback[0] for e in r.exercises)
    nb = tmp_path / "broken.ipynb"
    nb.write_text("{not json", encoding="utf-8")
    r = grade_submission(nb, spec01, timeout=60)
    assert r.status == "unreadable" and r.total == 0 and "not a valid notebook" in r.note


def test_the_memory_limit_stops_a_greedy_cell(tmp_path: Path, spec01: list) -> None:
    path = _submission(tmp_path, "greedy.py", [
        _cell("Exercise 1: x", "blob = bytearray(16 * 2**30)\nfp16_max = 65504.0"),
        _cell("Exercise 2: x", RIGHT_01["2"])])
    r = grade_submission(path, spec01, timeout=60, memory_mb=3072)
    assert r.exercises[0].points == 0 and "MemoryError" in r.exercises[0].feedback[0]
    assert r.exercises[1].points == 1  # the run went on


def test_a_run_that_never_defines_an_answer(tmp_path: Path, spec01: list) -> None:
    path = _submission(tmp_path, "quits.py", [_cell("Exercise 1: x", RIGHT_01["1"]),
                                              _cell("Exercise 2: x", "import os\nos._exit(3)")])
    r = grade_submission(path, spec01, timeout=60)
    assert r.status == "crashed" and r.exercises[0].points == 1
    assert all(e.points == 0 for e in r.exercises[1:])
    assert "stopped" in r.exercises[1].feedback[0]


def test_tutorial_12_the_grader_defines_the_teachers_lowprec_values(tmp_path: Path) -> None:
    """Exercise 3 of tutorial 12 reads `layer` and `qat_policy`, which the teacher's cells
    define from lowprec alone: the grader defines them itself when the run cannot give them
    (here: the submission never ran those cells; in a full run they are not numbers)."""
    spec = exercise_spec(open_tutorial("12"))
    assert [e.number for e in spec] == ["1", "2", "3"]
    check = spec[2].checks[0]
    assert check.answers == ("qat_bytes",)
    assert [name for name, _ in check.teacher] == ["layer", "qat_policy"]
    # FP32 master 4 + MXFP4 weights (4 + 8/32 bits) / 8 + FP32 gradients 4 + Adam 2 * 4
    right = 4 + (4 + 8 / 32) / 8 + 4 + 2 * 4
    cells = [_cell("Exercise 1: one weight on the grid", "w_03 = 0.5"),  # 0.3 > 0.25: up
             _cell("Exercise 2: bits per weight", "bits = 4"),          # no scale share
             _cell("Exercise 3: bytes per parameter", f"qat_bytes = {right!r}")]
    r = grade_submission(_submission(tmp_path, "s12.py", cells), spec, timeout=120)
    assert [e.points for e in r.exercises] == [1, 0, 1], [e.feedback for e in r.exercises]
    assert "scale" in r.exercises[1].feedback[0] and "4.25" not in r.exercises[1].feedback[0]
    cells[2] = _cell("Exercise 3: bytes per parameter", f"qat_bytes = {right - 4!r}")
    r = grade_submission(_submission(tmp_path, "s12b.py", cells), spec, timeout=120)
    assert r.exercises[2].points == 0
    assert "master" in r.exercises[2].feedback[0] and "16.53" not in r.exercises[2].feedback[0]


def test_notebook_values_still_come_from_the_run_when_readable(spec01: list) -> None:
    """`act` (tutorials 03 and 04) is a readable array: it is taken from the student's run;
    the teacher's definition is only the fallback."""
    spec03 = exercise_spec(open_tutorial("03"))
    check = spec03[1].checks[0]
    assert check.context == ("act",) and [n for n, _ in check.teacher] == ["act"]
    assert all(not c.teacher for e in spec01 for c in e.checks)


# ------------------------------------------------------------ variants
def _fields_answers(text: str) -> dict[str, str]:
    """Right answers to a variant of tutorial 01, from the numbers in its check calls."""
    calls = {e.number: e.checks[0].call for e in exercise_spec(text)}
    e1, m1 = map(int, re.search(r"custom_format\((\d+), (\d+)\)", calls["1"]).groups())
    bias = lambda e: 2 ** (e - 1) - 1  # noqa: E731
    code2 = int(re.search(r"check_decode\((\d+)", calls["2"]).group(1))
    code3 = int(re.search(r"check_decode\((\d+)", calls["3"]).group(1))
    e4, m4 = map(int, re.search(r"custom_format\((\d+), (\d+)\)", calls["4"]).groups())
    e5, m5 = map(int, re.search(r"custom_format\((\d+), (\d+)\)", calls["5"]).groups())
    x6 = float(re.search(r"'bf16', ([0-9.e+-]+)", calls["6"]).group(1))
    e7, m7 = map(int, re.search(r"custom_format\((\d+), (\d+), has_inf=False\)",
                                calls["7"]).groups())

    def e4m3(code: int) -> Fraction:
        s, ef, mf = code >> 7, (code >> 3) & 15, code & 7
        mag = Fraction(mf, 8) * Fraction(2) ** -6 if ef == 0 else \
            (1 + Fraction(mf, 8)) * Fraction(2) ** (ef - 7)
        return -mag if s else mag

    top7 = 2**e7 - 1 - bias(e7)
    answers = {
        "1": (2 - Fraction(2) ** -m1) * Fraction(2) ** (2**e1 - 2 - bias(e1)),
        "2": e4m3(code2), "3": e4m3(code3),
        "4": Fraction(2) ** (1 - bias(e4) - m4),
        "5": 2 ** (1 + e5 + m5) - 2 ** (m5 + 1) - 1,
        "6": Fraction(2) ** (math.frexp(x6)[1] - 1 - 7),  # bf16: 7 mantissa bits
        "7": (2 - Fraction(2) ** (1 - m7)) * Fraction(2) ** top7,
    }
    # the variable each check reads: the variant's own name (e5m6_max, e5m2fn_max, ...)
    names = {k: re.search(r"(\w+)\)$", c).group(1) for k, c in calls.items()}
    assert names["1"] == f"e{e1}m{m1}_max" and names["7"] == f"e{e7}m{m7}fn_max", names
    return {k: f"{names[k]} = {float(v)!r}" for k, v in answers.items()}


def test_variants_are_reproducible_and_differ() -> None:
    teacher = open_tutorial("01")
    a1, a2 = (variant_text(teacher, "01", "alice", 2026) for _ in range(2))
    assert a1 == a2
    others = {variant_text(teacher, "01", s, 2026).description for s in ["bob", "carol", "dan"]}
    assert a1.description not in others
    assert variant_text(teacher, "01", "alice", 2027).description != a1.description
    for student in [f"s{k}" for k in range(40)]:  # every draw applies to the text
        text = variant_text(teacher, "01", student, 1).text
        assert len(exercise_spec(text)) == 7
        for t in ("02", "04", "06", "09", "10"):
            teacher_t = open_tutorial(t)
            variant = variant_text(teacher_t, t, student, 1)
            assert variant.changes
            assert [e.number for e in exercise_spec(variant.text)] == \
                [e.number for e in exercise_spec(teacher_t)]


def test_variant_submissions_are_graded_against_their_own_variant(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\nalice,Alice\nbob,Bob\ncarol,Carol\n", encoding="utf-8")
    assert read_roster(roster) == ["alice", "bob", "carol"]
    seed = 2026
    teacher = open_tutorial("01")
    alice = _fields_answers(variant_text(teacher, "01", "alice", seed).text)
    bob = _fields_answers(variant_text(teacher, "01", "bob", seed).text)
    differ = sorted(k for k in alice if alice[k] != bob[k])
    assert differ, "alice and bob drew the same numbers"
    subs = tmp_path / "subs"
    subs.mkdir()
    labels = {e.number: e.label for e in exercise_spec(teacher)}
    _submission(subs, "alice.py", [_cell(labels[k], v) for k, v in alice.items()])
    _submission(subs, "bob_copied_from_alice.py", [_cell(labels[k], v) for k, v in alice.items()])
    out = tmp_path / "grades.csv"
    assert main(["grade", str(subs), "--tutorial", "01", "--roster", str(roster),
                 "--seed", str(seed), "--out", str(out)]) == 0
    rows = {r["student"]: r for r in csv.DictReader(out.read_text().splitlines())}
    assert rows["alice"]["total"] == "7", rows["alice"]
    assert float(rows["bob"]["total"]) == 7 - len(differ)
    for k in differ:
        assert rows["bob"][f"ex{k}"] == "0"
    assert rows["carol"]["status"] == "missing" and rows["carol"]["total"] == "0"
    assert "Exercise 1: E" in rows["alice"]["variant"]
    # the class summary titles the exercises as the students read them, not the teacher's
    printed = capsys.readouterr().out
    summary_1 = next(ln for ln in printed.splitlines() if ln.startswith("  Exercise 1 ("))
    drawn = {exercise_spec(variant_text(teacher, "01", s, seed).text)[0].title
             for s in ("alice", "bob", "carol")}
    assert all(t.startswith("the largest E") for t in drawn), drawn
    assert "fp16" not in summary_1 and all(t in summary_1 for t in drawn), summary_1


def test_class_summary_titles_follow_the_variants() -> None:
    """One variant for all: its title; several: counted and named (the commonest first);
    the teacher's title ('the largest fp16') never stands for numbers nobody was given."""
    from lowprec.grading.report import summary
    from lowprec.grading.run import ExerciseResult, SubmissionResult

    teacher = exercise_spec(open_tutorial("01"))[:1]
    assert teacher[0].title == "the largest fp16"

    def result(student: str, title: str, points: float) -> SubmissionResult:
        return SubmissionResult(student, f"{student}.py", [
            ExerciseResult("1", title, points, 1.0, [], "" if points else "wrong value")], "ok")

    same = summary([result("a", "the largest E5M6", 1), result("b", "the largest E5M6", 0)],
                   teacher)
    assert "Exercise 1 (the largest E5M6): 1/2 passed" in same
    assert "Most missed: Exercise 1 (the largest E5M6), 1/2" in same and "fp16" not in same
    titles = ["the largest E4M5"] * 3 + ["the largest E6M5"] * 2 + ["the largest E5M8",
                                                                     "the largest E4M9"]
    mixed = summary([result(f"s{k}", t, 0) for k, t in enumerate(titles)], teacher)
    assert ("Exercise 1 (4 variants: the largest E4M5; the largest E6M5; the largest E5M8; "
            "1 more): 0/7 passed") in mixed, mixed
    assert "fp16" not in mixed


def test_handouts_carry_each_students_variant(tmp_path: Path) -> None:
    roster = ["alice", "bob"]
    written = write_assignments(tmp_path / "h", roster, 5, only=["01"])
    assert [p.relative_to(tmp_path / "h").as_posix() for p in written] == \
        ["alice/01_anatomy.py", "bob/01_anatomy.py"]
    for student, path in zip(roster, written):
        text = path.read_text(encoding="utf-8")
        variant = variant_text(open_tutorial("01"), "01", student, 5)
        assert f"Assignment for student `{student}`" in text
        assert variant.description in text
        for check in (c for e in exercise_spec(variant.text) for c in e.checks):
            assert check.checker in text
        assert "BEGIN SOLUTION" not in text
        compile(text, str(path), "exec")
        # the words follow the student's format: variable names and titles, no teacher's ones
        e1, m1 = re.search(r"Exercise 1: E(\d+)M(\d+)", variant.description).groups()
        e7, m7 = re.search(r"Exercise 7: E(\d+)M(\d+) fn", variant.description).groups()
        assert f"store it in `e{e1}m{m1}_max`" in text and f"`e{e7}m{m7}fn_max`" in text
        assert f"### Exercise 1: the largest E{e1}M{m1}" in text
        assert f"### Exercise 7: the largest E{e7}M{m7} (fn)" in text
        assert "fp16_max" not in text and "e4m3_max" not in text
    with pytest.raises(FileExistsError):
        write_assignments(tmp_path / "h", roster, 5, only=["01"])


def test_grade_command_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sub = _submission(tmp_path, "x.py", [])
    assert main(["grade", str(sub), "--tutorial", "99", "--out", str(tmp_path / "g.csv")]) == 2
    assert "--tutorial" in capsys.readouterr().err
    roster = tmp_path / "r.csv"
    roster.write_text("id\nzed\n")
    assert main(["grade", str(sub), "--tutorial", "01", "--roster", str(roster),
                 "--out", str(tmp_path / "g.csv")]) == 2
    assert "matches no student id" in capsys.readouterr().err
    (tmp_path / "g.csv").write_text("mine")
    assert main(["grade", str(sub), "--tutorial", "01", "--out", str(tmp_path / "g.csv")]) == 2
    assert (tmp_path / "g.csv").read_text() == "mine"


def test_read_submission_cells_and_labels(tmp_path: Path) -> None:
    nb = {"cells": [{"cell_type": "markdown", "source": "# hi", "metadata": {}},
                    {"cell_type": "code", "source": ["%matplotlib inline\n", "x = 1\n"],
                     "metadata": {"tags": ["exercise"]}},
                    {"cell_type": "code", "source": "# Exercise 2: y\ny = 2", "metadata": {}}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "s.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    cells = read_submission(path)
    assert [c["label"] for c in cells] == [None, "Exercise 2"]
    assert "%matplotlib" not in cells[0]["source"]


def test_the_wheel_ships_tutorials_and_the_explorer_page(tmp_path: Path) -> None:
    """``pip install .`` installs what ``lowprec tutorials`` and ``lowprec explore`` read."""
    import zipfile

    pytest.importorskip("hatchling", reason="the build backend (pip install -e \".[test]\")")
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(tmp_path), str(root)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("lowprec-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for t in tutorials.list_tutorials():
        assert f"lowprec/tutorials_data/{t.name}" in names
    assert "lowprec/explorer_page.html" in names and "lowprec/explorer_page.js" in names
    assert "lowprec/grading/_child.py" in names


# ------------------------------------------------------------ classroom rough edges
def test_tutorials_student_only_without_a_roster(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tutorials", "student", str(tmp_path / "h"), "--only", "1", "05"]) == 0
    assert sorted(p.name[:2] for p in (tmp_path / "h").iterdir()) == ["01", "05"]
    assert main(["tutorials", "student", str(tmp_path / "bad"), "--only", "01", "42"]) == 2
    err = capsys.readouterr().err
    assert "--only 42: no such tutorial" in err and "01 02" in err
    assert not (tmp_path / "bad").exists()  # refused before the folder was made
    assert main(["tutorials", "student", str(tmp_path / "r"), "--only", "99",
                 "--roster", str(tmp_path / "missing.csv")]) == 2


def test_a_roster_that_is_not_utf8_names_the_file_and_the_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    roster = tmp_path / "class.csv"
    roster.write_bytes("id\nada\njos\u00e9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"class\.csv.*not UTF-8.*line 3.*iconv"):
        read_roster(roster)
    assert main(["tutorials", "student", str(tmp_path / "h"), "--roster", str(roster)]) == 2
    err = capsys.readouterr().err
    assert "not UTF-8" in err and "Traceback" not in err


def _lowprec_cli(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "lowprec", *argv], env=env, text=True,
                          timeout=600, **kwargs)


def test_closed_stdout_still_does_the_work(tmp_path: Path) -> None:
    """``lowprec info >&-`` and ``lowprec demo | head -1``: no traceback, exit 0, and the
    demo's files are written although nobody reads what it prints."""
    res = _lowprec_cli("info", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       preexec_fn=lambda: os.close(1))
    assert res.returncode == 0 and res.stderr == "", res.stderr
    read_end, write_end = os.pipe()
    os.close(read_end)  # head -1 that has already gone
    try:
        res = _lowprec_cli("demo", "--out", str(tmp_path / "d"), "--policies", "fp32",
                           "--steps", "5", "--no-figures", stdout=write_end,
                           stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "Exception ignored" not in res.stderr
    assert any((tmp_path / "d" / "fp32").iterdir())


# ------------------------------------------------------------ feedback for the classic mix-ups
def _feedback(check: Any, *args: Any) -> str:
    from lowprec import exercises

    with pytest.raises(exercises.ExerciseError) as err:
        check(*args)
    return err.value.feedback(reveal=False)


def test_feedback_names_the_format_the_student_mixed_up() -> None:
    import lowprec as lp
    from lowprec import exercises as ex

    # fp16's gap at 256 (10 mantissa bits: 2^8 * 2^-10) given for bf16
    text = _feedback(ex.check_spacing, "bf16", 256.0, 2.0**8 * 2.0**-10)
    assert "spacing of fp16" in text and "bf16 has 7" in text
    # the standard E4M3 max (448) given for an 'fn' E5M2 variant; the IEEE-style E4M3 max
    # ((2 - 2^-3) * 2^7 = 240) given for the 'fn' E4M3
    text = _feedback(ex.check_max, lp.custom_format(5, 2, has_inf=False), 448.0)
    assert "largest finite fp8_e4m3" in text and "'fn'" in text and "5 exponent" in text
    text = _feedback(ex.check_max, lp.custom_format(4, 3, has_inf=False), (2 - 2**-3) * 2.0**7)
    assert "IEEE-style E4M3" in text and "'fn' variant" in text
    # a subnormal decoded with the implicit 1 (0b0_0000_011 of E4M3, bias 7)
    text = _feedback(ex.check_decode, 0b0_0000_011, "fp8_e4m3", (1 + 3 / 8) * 2.0**-7)
    assert "no implicit leading 1" in text
    # a 9-bit E5M3 counted as 8 bits: 2^8 codes, less its 2 * 2^3 inf/NaN, -0 once
    for wrong in (2**8, 2**8 - 2 * 2**3 - 1):
        text = _feedback(ex.check_num_finite, lp.custom_format(5, 3), wrong)
        assert "counted 8-bit codes" in text and "9 bits" in text
