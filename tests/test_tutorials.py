"""The tutorials run, are well formed, and their student versions are right.

Every tutorial (solutions included) runs as a script in a subprocess on the Agg
backend, as CI and a student without Jupyter would run it.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lowprec import cli, tutorials
from lowprec.tutorials import SOLUTION_TAG, parse_cells, student_version

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))
IDS = [p.stem for p in TUTORIALS]


def _env(out: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(MPLBACKEND="Agg", LOWPREC_TUTORIAL_OUT=str(out),
               PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
               PYTHONWARNINGS="error")
    return env


def _run(path: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path)], cwd=cwd, env=_env(cwd / "figures"),
                          capture_output=True, text=True, timeout=240, check=False)


def test_there_are_tutorials():
    assert len(TUTORIALS) >= 2, f"expected tutorials in {ROOT / 'tutorials'}"
    numbers = [int(p.name[:2]) for p in TUTORIALS]
    assert len(set(numbers)) == len(numbers) and all(1 <= n <= 99 for n in numbers)


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_tutorial_runs_and_its_solutions_pass(path, tmp_path):
    result = _run(path, tmp_path)
    assert result.returncode == 0, (
        f"{path.name} failed:\n--- stdout (end) ---\n{result.stdout[-3000:]}\n"
        f"--- stderr ---\n{result.stderr[-5000:]}")
    text = path.read_text(encoding="utf-8")
    n_checks = len(re.findall(r"^exercises\.check_\w+\(", text, flags=re.MULTILINE))
    assert n_checks >= 1, f"{path.name} has no checking calls"
    assert result.stdout.count("Correct:") == n_checks, (
        f"{path.name}: {n_checks} checking calls but "
        f"{result.stdout.count('Correct:')} 'Correct:' lines")
    # Every figure the tutorial shows was saved.
    names = re.findall(r"show\(\w+, \"([^\"]+)\"\)", text)
    for name in names:
        png = tmp_path / "figures" / f"{name}.png"
        assert png.is_file() and png.stat().st_size > 5000, f"{path.name}: {png} missing or empty"


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_tutorial_structure(path):
    text = path.read_text(encoding="utf-8")
    cells = parse_cells(text)
    body = [c for c in cells if c.kind != "header"]
    intro = body[0]
    assert intro.kind == "markdown", f"{path.name} must open with a markdown cell"
    for part in ("What you will do", "What you will learn", "What you need"):
        assert part in intro.source, f"{path.name}: opening cell lacks '{part}'"
    solutions = [c for c in body if SOLUTION_TAG in c.tags]
    assert solutions, f"{path.name} has no exercises (cells tagged 'solution')"
    assert "## Exercises" in text
    for k, cell in enumerate(body):
        if SOLUTION_TAG not in cell.tags:
            continue
        # A code solution names its exercise; a written (markdown) answer follows the question.
        where = cell.source if cell.kind == "code" else body[k - 1].source
        assert re.search(r"Exercise \d+", where), (
            f"{path.name}: solution cell without an 'Exercise N' label:\n{cell.source[:200]}")
    # Only lowprec's public API and no helpers defined outside solution cells.
    for cell in body:
        if cell.kind != "code":
            continue
        tree = ast.parse(cell.source)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                    node.module or ""]
                names = [a.name for a in node.names]
                for m in mods + names:
                    assert not re.search(r"(^|\.)_", m), f"{path.name}: private import {m}"
                for m in mods:
                    assert m.split(".")[0] not in ("urllib", "requests", "http", "socket"), (
                        f"{path.name}: tutorials are offline, found import {m}")
            if SOLUTION_TAG not in cell.tags and isinstance(
                    node, (ast.FunctionDef, ast.ClassDef)):
                pytest.fail(f"{path.name}: defines {node.name}(); helpers belong in lowprec")
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not (
                    node.attr.startswith("__")):
                pytest.fail(f"{path.name}: uses private attribute .{node.attr}")
    # Seeded: no unseeded generator, no global numpy seed.
    assert not re.search(r"default_rng\(\s*\)", text), f"{path.name}: unseeded default_rng()"
    assert "np.random.seed" not in text and "np.random.rand" not in text


@pytest.mark.parametrize("path", TUTORIALS, ids=IDS)
def test_student_version_has_no_solutions(path):
    teacher = path.read_text(encoding="utf-8")
    student = student_version(teacher)
    compile(student, path.name, "exec")
    assert "BEGIN SOLUTION" not in student and f'"{SOLUTION_TAG}"' not in student
    cells = parse_cells(teacher)
    n_code = sum(SOLUTION_TAG in c.tags and c.kind == "code" for c in cells)
    n_written = sum(SOLUTION_TAG in c.tags and c.kind == "markdown" for c in cells)
    assert student.count("raise NotImplementedError(") == n_code
    assert student.count(": write your answer here.*") == n_written
    # Outside the exercise cells nothing changes.
    t_cells, s_cells = parse_cells(teacher), parse_cells(student)
    assert len(t_cells) == len(s_cells)
    for t, s in zip(t_cells, s_cells):
        if SOLUTION_TAG not in t.tags:
            assert t.text() == s.text()


def test_student_version_stops_at_the_first_exercise(tmp_path):
    written = tutorials.write_student_versions(tmp_path / "student")
    result = _run(written[0], tmp_path)
    assert result.returncode != 0
    assert "NotImplementedError: Exercise 1" in result.stderr, result.stderr[-2000:]


# ----------------------------------------------------- the converter itself
TEACHER = '''# ---
# jupyter:
#   jupytext:
#     text_representation:
#       format_name: percent
# ---

# %% [markdown]
# ### Exercise 1: add
# Store 1 + 1 in `two`.

# %% tags=["solution"]
# Exercise 1: add
# BEGIN SOLUTION
helper = 1
two = helper + 1
# END SOLUTION

# %%
print(two)

# %% [markdown]
# ### Exercise 2: a loop

# %% tags=["solution"]
total = 0
for i in range(3):
    # BEGIN SOLUTION
    total += i
    # END SOLUTION
print(total)

# %% [markdown]
# ### Exercise 3: why?

# %% [markdown] tags=["solution"]
# Because.

# %% tags=["solution"]
# Exercise 4: no markers; the comment block is the instruction.

answer = 42

# %%
print(answer)
'''


def test_student_version_of_a_small_script():
    student = student_version(TEACHER)
    assert student.startswith("# ---\n# jupyter:")
    cells = parse_cells(student)
    ex = [c for c in cells if "exercise" in c.tags]
    assert len(ex) == 4
    assert ex[0].lines[0] == "# Exercise 1: add"
    assert ex[0].lines[1] == "# Your code here. Later cells use: two"  # not `helper`
    assert ex[0].lines[2] == (
        "raise NotImplementedError('Exercise 1: add (write your code here)')")
    # An indented region keeps its indentation and the code around it.
    assert ex[1].lines[:3] == ["total = 0", "for i in range(3):",
                               ("    raise NotImplementedError('Exercise 2: a loop (write your "
                                "code here)')")]
    assert ex[1].lines[3] == "print(total)"
    assert ex[2].kind == "markdown" and "write your answer here" in ex[2].source
    assert "Because" not in student
    assert ex[3].lines[0].startswith("# Exercise 4: no markers")
    assert "answer = 42" not in student
    assert "Later cells use: answer" in ex[3].source
    compile(student, "student.py", "exec")
    # Unchanged cells come through byte for byte; a second pass changes nothing.
    assert student_version(student) == student


@pytest.mark.parametrize("bad, message", [
    ("# %% tags=[\"solution\"]\n# BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("# %% tags=[\"solution\"]\nx = 1\n# END SOLUTION\n", "without BEGIN"),
    ("# %% tags=[\"solution\"]\n# BEGIN SOLUTION\n# BEGIN SOLUTION\n", "nested"),
    ("x = 1\n# %%\n", "before the first"),
    ("# %% tags=[solution]\nx = 1\n", "JSON"),
])
def test_malformed_scripts_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        student_version(bad)


def test_cli_student_refuses_to_overwrite(tmp_path, capsys):
    dest = tmp_path / "student"
    assert cli.main(["tutorials", "student", str(dest)]) == 0
    first = dest / TUTORIALS[0].name
    first.write_text("my work", encoding="utf-8")
    assert cli.main(["tutorials", "student", str(dest)]) == 2
    assert "not empty; pass --force" in capsys.readouterr().err
    assert first.read_text(encoding="utf-8") == "my work"
    assert cli.main(["tutorials", "student", str(dest), "--force"]) == 0
    assert "NotImplementedError" in first.read_text(encoding="utf-8")
    assert cli.main(["tutorials", "student"]) == 2
    assert cli.main(["tutorials", "list"]) == 0
    assert TUTORIALS[0].name in capsys.readouterr().out


def test_missing_source_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tutorials.list_tutorials(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no tutorials"):
        tutorials.list_tutorials(tmp_path)


def test_render_executes_a_notebook_with_its_figures(tmp_path, capfd):
    pytest.importorskip("jupytext", reason="needs the 'tutorials' extra")
    pytest.importorskip("nbclient", reason="needs the 'tutorials' extra")
    pytest.importorskip("ipykernel", reason="needs the 'tutorials' extra")
    import json

    first = TUTORIALS[0]
    written = tutorials.render_notebooks(tmp_path, only=[first.name[:2]])
    nb = json.loads(written[0].read_text(encoding="utf-8"))
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    images = sum("image/png" in o.get("data", {}) for o in outputs)
    shown = len(re.findall(r"show\(\w+, \"", first.read_text(encoding="utf-8")))
    assert images == shown, f"{images} images in the notebook, {shown} show() calls"
    assert not any(o.get("output_type") == "error" for o in outputs)
    assert any("Correct:" in "".join(o.get("text", "")) for o in outputs)
    # the kernel (a child process, writing to this process's stderr) runs on Unix
    # sockets: no warning about unencrypted TCP
    if os.name == "posix":
        err = capfd.readouterr().err
        assert "without encryption" not in err, err


def test_render_without_jupytext_says_what_to_install(tmp_path):
    try:
        import jupytext  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="lowprec\\[tutorials\\]"):
            tutorials.render_notebooks(tmp_path)
    else:
        written = tutorials.render_notebooks(tmp_path, student=True)
        assert len(written) == len(TUTORIALS) and all(p.suffix == ".ipynb" for p in written)
