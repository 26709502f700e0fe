"""The Python examples in docs/scaled-formats.md run."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).parents[1] / "docs" / "scaled-formats.md"


def test_readme_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert blocks
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {})  # noqa: S102 (our own docs)
