"""One assignment per student: the exercises' numbers drawn from the student id and a seed.

A variant is the teacher's tutorial with some exercises' numbers replaced (a different
format, a different number to round); :func:`variant_text` makes it. The words follow the
numbers: an exercise's title and the variable it asks for name the student's format (tutorial
01's ``fp16_max`` becomes ``e5m6_max`` for an E5M6 student, ``e4m3_max`` ``e5m2fn_max``). The handout of a
student (``lowprec tutorials student DIR --roster roster.csv --seed S``) is the student
version of that text, and the grader (``lowprec grade ... --roster roster.csv --seed S``)
checks the submission against the checks of that same text, so the two always agree.

The draw is reproducible: a SHA-256 of ``seed``, the tutorial and the student id seeds
NumPy's generator, so the same roster and seed give the same variants on any machine.
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Variant", "VARIANTS", "read_roster", "variant_rng", "variant_text"]


@dataclass(frozen=True)
class Variant:
    """A student's version of a tutorial: its text and what was changed, in words."""

    text: str
    changes: tuple[str, ...] = ()

    @property
    def description(self) -> str:
        return "; ".join(self.changes)


def variant_rng(tutorial: str, student: str, seed: int) -> np.random.Generator:
    """The generator of one student's variant (SHA-256 of seed, tutorial and id)."""
    digest = hashlib.sha256(f"lowprec/{int(seed)}/{tutorial}/{student}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


#: Tutorial number -> function(teacher's text, rng) -> Variant.
VARIANTS: dict[str, Callable[[str, np.random.Generator], Variant]] = {}


def variant_text(text: str, tutorial: str, student: str, seed: int) -> Variant:
    """The variant of ``text`` (tutorial ``tutorial``) for ``student`` under ``seed``.

    Tutorials without variants give the teacher's text unchanged.

    >>> from lowprec.grading import open_tutorial
    >>> teacher = open_tutorial("01")
    >>> a = variant_text(teacher, "01", "alice", 2026)
    >>> a == variant_text(teacher, "01", "alice", 2026)  # reproducible
    True
    >>> a.changes[0].startswith("Exercise 1: E"), len(a.changes)
    (True, 7)
    """
    make = VARIANTS.get(tutorial)
    if make is None:
        return Variant(text)
    return make(text, variant_rng(tutorial, student, seed))


_ID_COLUMNS = ("id", "student_id", "student", "username", "login", "email")


def read_roster(path: str | Path) -> list[str]:
    """Student ids from a CSV roster: the column named id/student_id/student/username/login/
    email (the first column if none is), one row per student; blank rows are skipped.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "roster.csv"
    >>> _ = path.write_text("name,id\\nAda,ada\\nAlan,alan\\n")
    >>> read_roster(path)
    ['ada', 'alan']
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ValueError(f"--roster {str(path)!r}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise ValueError(
            f"--roster {str(path)!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} on "
            f"line {line}); save it as 'CSV UTF-8' in your spreadsheet, or convert it: "
            f"iconv -f latin1 -t utf-8 {path.name} > roster-utf8.csv") from None
    rows = [r for r in csv.reader(text.splitlines()) if any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"--roster {str(path)!r} is empty; give a CSV with a column 'id'")
    header = [c.strip().lower() for c in rows[0]]
    column = next((header.index(c) for c in _ID_COLUMNS if c in header), None)
    body = rows[1:] if column is not None else rows
    column = column or 0
    ids = [r[column].strip() for r in body if len(r) > column and r[column].strip()]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"--roster {str(path)!r}: student id {duplicates[0]!r} appears twice")
    if not ids:
        raise ValueError(f"--roster {str(path)!r} lists no student ids")
    return ids


# ------------------------------------------------------------- editing the text
_HEADING = re.compile(r"^# #{2,3} ", re.M)


def _region(text: str, number: str) -> tuple[int, int]:
    """Where Exercise ``number`` is: from its ``### Exercise N:`` heading to the next heading."""
    start = text.find(f"# ### Exercise {number}:")
    if start < 0:
        raise RuntimeError(f"variant: the tutorial has no '### Exercise {number}:' heading")
    nxt = _HEADING.search(text, start + 1)
    return start, nxt.start() if nxt else len(text)


def _sub(text: str, number: str, *pairs: tuple[str, str]) -> str:
    """Replace each ``old`` by ``new`` inside Exercise ``number`` (every ``old`` must occur)."""
    a, b = _region(text, number)
    part = text[a:b]
    for old, new in pairs:
        if old not in part:
            raise RuntimeError(f"variant of Exercise {number}: {old!r} is not in the tutorial "
                               "any more; update lowprec.grading.variants")
        part = part.replace(old, new)
    return text[:a] + part + text[b:]


def _pick(rng: np.random.Generator, options: list[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _bias(e: int) -> int:
    return (1 << (e - 1)) - 1


# ------------------------------------------------------------- tutorial 01
def _variant_01(text: str, rng: np.random.Generator) -> Variant:
    changes = []
    e, m = _pick(rng, [(4, 5), (5, 6), (6, 5), (5, 8), (4, 7), (6, 6), (5, 7), (4, 9)])
    text = _sub(text, "1", (
        "fp16 has 5 exponent bits (bias 15) and 10 mantissa bits, and reserves the all-ones "
        "exponent\n# for inf and NaN. Work out its largest finite value from those facts (do "
        "not use\n# `fp16.max`) and store it in `fp16_max`.",
        f"Your format is E{e}M{m}: {e} exponent bits (bias {_bias(e)}) and {m} mantissa bits, "
        "IEEE-style\n# (the all-ones exponent is reserved for inf and NaN). Work out its "
        "largest finite value by\n# hand from those facts and store it in `fp16_max`."),
        ("the largest fp16", f"the largest E{e}M{m}"),
        ("exercises.check_fp16_max(fp16_max)",
         f"exercises.check_max(lp.custom_format({e}, {m}), fp16_max)"),
        ("fp16_max", f"e{e}m{m}_max"))  # the variable is named after the student's format
    changes.append(f"Exercise 1: E{e}M{m}")
    s, ef, mf = int(rng.integers(2)), int(rng.integers(1, 15)), int(rng.integers(8))
    code = f"0b{s}_{ef:04b}_{mf:03b}"
    text = _sub(text, "2", ("0b0_1010_101", code))
    changes.append(f"Exercise 2: code {code}")
    s, mf = int(rng.integers(2)), int(rng.integers(1, 8))
    code = f"0b{s}_0000_{mf:03b}"
    text = _sub(text, "3", ("0b0_0000_011", code))
    changes.append(f"Exercise 3: code {code}")
    e, m = _pick(rng, [(5, 10), (6, 9), (7, 8), (5, 6), (6, 5), (4, 11), (7, 6)])
    text = _sub(text, "4", (
        "bf16 has 8 exponent bits (bias 127) and 7 mantissa bits. What is the smallest positive"
        "\n# value it can hold?",
        f"E{e}M{m} has {e} exponent bits (bias {_bias(e)}) and {m} mantissa bits. What is the "
        "smallest positive\n# value it can hold?"),
        ("the smallest positive bf16", f"the smallest positive E{e}M{m}"),
        ('exercises.check_smallest_subnormal("bf16", tiny)',
         f"exercises.check_smallest_subnormal(lp.custom_format({e}, {m}), tiny)"))
    changes.append(f"Exercise 4: E{e}M{m}")
    e, m = _pick(rng, [(4, 3), (3, 4), (5, 3), (4, 4), (6, 2), (3, 5)])
    text = _sub(text, "5", (
        "How many distinct finite numbers does FP8 E5M2 have",
        f"How many distinct finite numbers does the IEEE-style E{e}M{m} (with inf and NaN) "
        "have"),
        ('exercises.check_num_finite("fp8_e5m2", count)',
         f"exercises.check_num_finite(lp.custom_format({e}, {m}), count)"))
    changes.append(f"Exercise 5: IEEE-style E{e}M{m}")
    k, j = int(rng.integers(-6, 13)), _pick(rng, [16, 32, 64, 96])
    x = 2.0**k * (1 + j / 128)
    text = _sub(text, "6", ("the gap at 256", f"the gap at {x!r}"),
                ("between 256 and", f"between {x!r} and"), ("256.0", repr(x)))
    changes.append(f"Exercise 6: x = {x!r}")
    e, m = _pick(rng, [(5, 2), (3, 4), (4, 4), (5, 3), (3, 5), (4, 2)])
    text = _sub(text, "7", (
        "Why is the largest FP8 E4M3 number 448 and not 480? Compute it from the fields and "
        "store\n# it in `e4m3_max`.",
        f"Your format is E{e}M{m} in the OCP 'fn' style: bias {_bias(e)}, no infinities, and "
        f"only the\n# all-ones code S.{'1' * e}.{'1' * m} is NaN. Compute its largest number "
        "from the fields and store\n# it in `e4m3_max`."),
        ("the largest E4M3", f"the largest E{e}M{m} (fn)"),
        ('exercises.check_max("fp8_e4m3", e4m3_max)',
         f"exercises.check_max(lp.custom_format({e}, {m}, has_inf=False), e4m3_max)"),
        ("e4m3_max", f"e{e}m{m}fn_max"))
    changes.append(f"Exercise 7: E{e}M{m} fn")
    return Variant(text, tuple(changes))


# ------------------------------------------------------------- tutorial 02
def _variant_02(text: str, rng: np.random.Generator) -> Variant:
    k, j = int(rng.integers(-2, 4)), int(rng.integers(7))
    lo, hi = 2.0**k * (1 + j / 8), 2.0**k * (1 + (j + 1) / 8)
    tie = (lo + hi) / 2
    text = _sub(text, "1", ("1.3125 lies between the E4M3 values 1.25 and 1.375.",
                            f"{tie!r} lies between the E4M3 values {lo!r} and {hi!r}."),
                ("1.3125", repr(tie)))
    start = 2 ** int(rng.integers(5, 15))
    text = _sub(text, "2", ("1024", str(start)))
    k, j = int(rng.integers(-3, 4)), _pick(rng, [j for j in range(1, 64) if j % 8])
    x = 2.0**k * (1 + j / 64)
    text = _sub(text, "3", ("1.09375", repr(x)))
    return Variant(text, (f"Exercise 1: the tie {tie!r}", f"Exercise 2: {start} + d",
                          f"Exercise 3: x = {x!r}"))


# ------------------------------------------------------------- tutorials 04, 06, 09, 10
def _comment_lines(text: str, width: int = 88) -> str:
    """``text`` wrapped into comment lines (the first line's "# " is already in place)."""
    import textwrap

    return "\n# ".join(textwrap.wrap(text, width))


def _variant_04(text: str, rng: np.random.Generator) -> Variant:
    growth = int(rng.integers(2, 6))
    events = [False] * 10
    for k in rng.choice(10, int(rng.integers(1, 4)), replace=False):
        events[int(k)] = True
    words = ", ".join("**inf**" if e else "finite" for e in events)
    text = _sub(text, "2", (
        "A GradScaler starts at 2^16 with a growth interval of 3. The steps' gradients are\n"
        "# finite, finite, **inf**, finite, finite, finite, finite, finite, finite, **inf** (in "
        "that\n# order).",
        _comment_lines(
            f"A GradScaler starts at 2^16 with a growth interval of {growth}. The steps' "
            f"gradients are {words} (in that order).")),
        ("[False, False, True, False, False, False, False, False, False, True]", repr(events)),
        ("growth_interval=3)", f"growth_interval={growth})"))
    pattern = "".join("X" if e else "." for e in events)
    return Variant(text, (f"Exercise 2: growth interval {growth}, steps {pattern} (X = inf)",))


def _variant_06(text: str, rng: np.random.Generator) -> Variant:
    e, m = _pick(rng, [(8, 7), (5, 10), (6, 5), (5, 6), (8, 4), (4, 9)])
    text = _sub(text, "1", (
        "What is the largest relative error of rounding a number in bf16's normal range to the"
        "\n# nearest bf16?",
        f"What is the largest relative error of rounding a number in E{e}M{m}'s normal range "
        f"(an IEEE-style\n# format with {m} mantissa bits) to the nearest E{e}M{m} value?"),
        ("bf16's unit roundoff", f"E{e}M{m}'s unit roundoff"),
        ('check_unit_roundoff("bf16", u)', f"check_unit_roundoff(lp.custom_format({e}, {m}), u)"))
    update = _pick(rng, [0.001, 0.002, 0.003, 0.0015, 0.0025, 0.0005, 0.005])
    text = _sub(text, "2", ("1.001", repr(1 + update)), ("0.001", repr(update)))
    return Variant(text, (f"Exercise 1: E{e}M{m}", f"Exercise 2: the update +{update!r}"))


def _variant_09(text: str, rng: np.random.Generator) -> Variant:
    value = _pick(rng, [700, 1500, 3000, 5000, 12000, 40000, 90])
    text = _sub(text, "2", ("3000", str(value)))
    return Variant(text, (f"Exercise 2: the accumulator holds about {value}",))


def _variant_10(text: str, rng: np.random.Generator) -> Variant:
    base = int(rng.integers(0x0408, 0x7BF8))
    step = _pick(rng, [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5])
    a, b = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    text = _sub(text, "1", ("0x3C03", f"0x{base + step:04X}"), ("0x3C00", f"0x{base:04X}"),
                ("0x0001", f"0x{a:04X}"), ("0x8001", f"0x{0x8000 + b:04X}"))
    return Variant(text, (f"Exercise 1: codes 0x{base + step:04X}/0x{base:04X} and "
                          f"0x{a:04X}/0x{0x8000 + b:04X}",))


VARIANTS.update({"01": _variant_01, "02": _variant_02, "04": _variant_04, "06": _variant_06,
                 "09": _variant_09, "10": _variant_10})
