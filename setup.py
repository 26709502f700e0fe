"""Build hook: the tutorials ship inside the package.

The tutorials are kept at the top of the checkout (``tutorials/*.py``, where students and
the tests run them). A wheel (``pip install .``) copies them into ``lowprec/tutorials_data/``
so that ``lowprec tutorials list|student|render`` work from an installed package too
(``lowprec.tutorials.tutorials_dir``). Everything else is in ``pyproject.toml``.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithTutorials(build_py):
    """``build_py``, then ``tutorials/*.py`` and ``README.md`` into ``lowprec/tutorials_data``."""

    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "tutorials"
        target = Path(self.build_lib) / "lowprec" / "tutorials_data"
        self.mkpath(str(target))
        for path in sorted(source.glob("*")):
            if path.is_file() and path.suffix in (".py", ".md"):
                self.copy_file(str(path), str(target / path.name))


setup(cmdclass={"build_py": BuildPyWithTutorials})
