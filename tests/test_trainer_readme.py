"""The Python example of docs/training.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).parents[1] / "docs" / "training.md"


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {})  # noqa: S102 (our own README example)
    out = capsys.readouterr().out
    assert "PyTorch" in out  # the fp16-amp description
    assert (tmp_path / "runs" / "amp-fast" / "run.json").is_file()
