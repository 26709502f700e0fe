"""README.md: the Python tour runs as written, and the install commands stay first."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _expected_outputs(code: str) -> list[str]:
    """The ``# -> ...`` comment of every print() line of the tour, in order."""
    return [line.split("# -> ", 1)[1].strip() for line in code.splitlines()
            if line.lstrip().startswith("print(")]


def _matches(expected: str, got: str) -> bool:
    """``got`` equals ``expected``, where ``...`` in ``expected`` stands for any text."""
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


def test_readme_tour_prints_what_its_comments_say(capsys):
    """Every print() in the tour carries its output as a ``# -> ...`` comment: the first
    line it prints, exactly (``...`` stands for digits left out)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    tour = blocks[0]
    expected = _expected_outputs(tour)
    assert len(expected) >= 8
    outputs = []
    namespace: dict = {}
    for statement in re.split(r"\n(?=print\()", tour):  # one print() per chunk
        exec(compile(statement, str(README), "exec"), namespace)  # noqa: S102 (our README)
        out = capsys.readouterr().out
        if statement.startswith("print("):
            outputs.append(out.splitlines()[0])
    assert len(outputs) == len(expected)
    wrong = [(e, g) for e, g in zip(expected, outputs) if not _matches(e, g)]
    assert wrong == []


def test_the_matcher_can_fail():
    assert _matches("[0.1, ...e-06]", "[0.1, 9.9e-06]")
    assert not _matches("inf 0x5", "inf 0x4")
    assert not _matches("0.12 0.0079", "0.12 0.0079 extra")


def test_readme_python_blocks_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks
    for code in blocks:
        exec(compile(code, str(README), "exec"), {})  # noqa: S102 (our own README)
    capsys.readouterr()


def test_readme_opens_with_the_two_commands():
    first = README.read_text().split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first[0].startswith("pip install . && lowprec demo")
    test_command = first[1].split("#")[0].strip()
    assert test_command == 'pip install -e ".[test,torch]" && pytest'
    ci = (README.parent / ".ci" / "run").read_text()
    assert ci.rstrip().splitlines()[-1] == test_command
    assert "trap" in ci and "CI run time" in ci  # CI prints its own run time at its end


def test_readme_stays_short():
    """Readable in minutes: measurements live in docs/ (performance.md, correctness.md,
    tensorcores.md), the README keeps one short summary, and no table cell runs long."""
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    cells = [cell for line in text.splitlines() if line.startswith("|")
             for cell in line.strip("|").split(" | ")]
    assert cells and max(len(c) for c in cells) <= 300, max(cells, key=len)
    docs = README.parent / "docs"
    for page in ("performance.md", "correctness.md", "tensorcores.md"):
        assert f"(docs/{page}" in text and (docs / page).is_file(), page


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a Markdown page's headings: lower case, punctuation dropped,
    spaces to hyphens."""
    heads = re.findall(r"^#+ (.*)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def test_anchor_rule():
    assert _anchors(README) >= {"a-short-tour", "the-main-job-lowprec-demo", "speed"}


def test_readme_links_resolve():
    """Every relative link of the README and of the pages that took its measurements
    names a file that exists, and a heading of it where the link names one."""
    root = README.parent
    pages = [README] + [root / "docs" / p for p in ("performance.md", "tensorcores.md",
                                                   "formats.md")]
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)]*))?\)", page.read_text()):
            if "://" in target:
                continue
            path = page.parent / target if target else page
            assert path.exists(), (page.name, target)
            if anchor and path.suffix == ".md":
                assert anchor in _anchors(path), (page.name, target, anchor)
