"""README.md: the Python tour runs as written, and the install commands stay first."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks
    for code in blocks:
        exec(compile(code, str(README), "exec"), {})  # noqa: S102 (our own README)
    out = capsys.readouterr().out
    assert "0.1 in bf16 (rne): 0.10009765625" in out
    assert "inf 0x5" in out


def test_readme_opens_with_the_two_commands():
    first = README.read_text().split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first[0].startswith("pip install . && lowprec demo")
    test_command = first[1].split("#")[0].strip()
    assert test_command == 'pip install -e ".[test,torch]" && pytest'
    ci = (README.parent / ".ci" / "run").read_text()
    assert ci.rstrip().splitlines()[-1] == test_command
