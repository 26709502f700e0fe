"""Every Python block in docs/*.md runs as written (the blocks of one page share a
namespace, in a fresh temporary folder); GPU blocks run where a GPU is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = sorted((Path(__file__).resolve().parents[1] / "docs").glob("*.md"))


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"),
                      flags=re.DOTALL | re.MULTILINE)


PAGES = [p for p in DOCS if python_blocks(p)]


def test_the_docs_have_examples():
    assert len(PAGES) >= 5, [p.name for p in DOCS]


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_docs_python_blocks_run(page, tmp_path, monkeypatch, capsys):
    blocks = python_blocks(page)
    if any(re.search(r"^\s*import cupy", b, flags=re.MULTILINE) for b in blocks):
        import lowprec.gpu as lg

        if not lg.available():
            pytest.skip(f"{page.name} runs on a GPU: {lg.unavailable_reason()}")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for code in blocks:
        exec(compile(code, str(page), "exec"), namespace)  # noqa: S102 (our own docs)
    capsys.readouterr()
