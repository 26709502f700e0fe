"""The Python examples in docs/readme/scaled.md run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parents[1] / "docs" / "readme" / "scaled.md"


@pytest.mark.skipif(not DOC.exists(), reason="docs/readme/scaled.md not in this checkout")
def test_readme_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert blocks
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {})  # noqa: S102 (our own docs)
