"""The tables README.md and docs/training.md print are what the code prints today
(scripts/readme_tables.py regenerates them)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from lowprec.train import POLICIES

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "readme_tables.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("readme_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _committed(rel: str) -> dict[str, str]:
    """The marked tables, read with a pattern of this test's own."""
    from_file = (ROOT / rel).read_text(encoding="utf-8")
    mark = re.compile(r"<!-- table:(\w+) [^>]*-->\n```text\n(.*?)```\n<!-- /table:\1 -->",
                      re.DOTALL)
    return {name: body.rstrip("\n") for name, body in mark.findall(from_file)}


def test_every_file_has_its_marked_tables(script):
    for rel, names in script.FILES.items():
        assert set(names) <= set(_committed(rel)), rel


def test_formats_table_is_what_lowprec_info_prints(script):
    assert _committed("README.md")["formats"] == script.formats_table()


def test_demo_table_is_a_fresh_demo_run(script):
    """Training is deterministic: a fresh run of all presets (600 steps, seed 0) prints
    exactly the committed table (wall-clock column excluded)."""
    fresh = script.demo_table()
    assert len(fresh.splitlines()) == 2 + len(POLICIES)
    for rel in ("README.md", "docs/training.md"):
        assert _committed(rel)["demo"] == fresh, f"{rel}: run scripts/readme_tables.py --write"


@pytest.mark.parametrize("rel", ["README.md", "docs/performance.md"])
def test_speed_rows_cite_existing_benchmarks(script, rel):
    """The README's speed summary and the full tables of docs/performance.md."""
    assert rel in script.SPEED_FILES
    text = (ROOT / rel).read_text(encoding="utf-8")
    assert script.speed_rows_cite_scripts(text) == []
    broken = text.replace("bench_train.py", "bench_gone.py")
    problems = script.speed_rows_cite_scripts(broken)  # one per row that cited bench_train
    assert problems and set(problems) == {
        "speed row cites benchmarks/bench_gone.py, which does not exist"}
    assert script.speed_rows_cite_scripts(text.replace("## Speed", "## Sped")) == [
        "no '## Speed' section"]


def test_speed_rows_are_timed_by_a_named_script(script):
    """Every row of the README's summary names the benchmark that measured it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Speed\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| what", "|---"))]
    assert len(rows) >= 8
    assert all(re.search(r"`bench_\w+\.py", row) for row in rows), rows


def test_replace_tables_rewrites_only_the_marked_body(script):
    text = ("intro\n<!-- table:formats (x) -->\n```text\nold\n```\n<!-- /table:formats -->\n"
            "outro\n")
    new = script.replace_tables(text, {"formats": "new\nlines"})
    assert new == text.replace("old", "new\nlines")
    assert script.tables_in(new) == {"formats": "new\nlines"}
    assert script.replace_tables(text, {"demo": "x"}) == text
