"""numba caches lowprec's kernels in the user's cache folder, never inside the package.

A cache inside an installed package outlives ``pip uninstall`` (pip does not know the
files) and the folder left behind is imported as an empty namespace package ahead of a
later editable install. These tests run fresh processes with their own cache folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import lowprec

PACKAGE = Path(lowprec.__file__).parent
ROOT = PACKAGE.parent

_SCRIPT = """
import io
import numpy as np
import lowprec as lp
from lowprec.commands._compiling import compile_notice
with compile_notice("info", io.StringIO()) as compiles:
    lp.round_to(np.array([0.1, 300.0]), "fp8_e4m3", "rtz")  # float64 input: odd64's path
print(compiles.done)
"""


def _run(cache_home: Path) -> int:
    """The number of lowprec kernels a fresh process compiles for _SCRIPT."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    # compiled in place (not served by the numpy engine while a background
    # process compiles, the default: tests/test_route.py tests that)
    env.update(XDG_CACHE_HOME=str(cache_home), PYTHONPATH=str(ROOT), LOWPREC_COLD="compile")
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    return int(done.stdout)


def _newer_in_package(since: float) -> list[Path]:
    return [p for p in PACKAGE.rglob("*.nb[ic]") if p.stat().st_mtime >= since]


def test_kernels_are_cached_in_the_user_cache_folder(tmp_path: Path) -> None:
    start = time.time() - 1
    assert _run(tmp_path) >= 1  # an empty cache: compiled
    written = list((tmp_path / "lowprec").rglob("*.nbi"))
    assert any(p.name.startswith("odd64.to_float32_odd") for p in written), written
    assert _newer_in_package(start) == []  # nothing new next to the sources
    assert _run(tmp_path) == 0  # a second process loads what the first wrote


def test_the_locator_takes_lowprec_files_only_and_numba_cache_dir_first() -> None:
    from lowprec._kernels import _cache, engine

    locators = _cache._IMPL._locator_classes
    # lowprec's NUMBA_CACHE_DIR locator first (numba's own next, for other code), then
    # lowprec's user-cache locator
    assert locators[0] is _cache.LowprecUserDirLocator
    assert locators[1].__name__.lstrip("_") == "UserProvidedCacheLocator"  # NUMBA_CACHE_DIR
    assert locators.index(_cache.LowprecCacheLocator) == 2
    found = _cache.LowprecCacheLocator.from_function(engine.round_pack.py_func, engine.__file__)
    assert found is not None and found.get_cache_path().startswith(_cache.cache_dir())
    assert _cache.LowprecCacheLocator.from_function(_run, __file__) is None  # not lowprec


def test_the_stamp_covers_every_kernel_source(tmp_path: Path) -> None:
    # A kernel's compiled code holds what it calls and inlines from other files,
    # so its cache entry must go stale when any kernel source changes, not only
    # its own file (numba's stamp).
    from lowprec._kernels import _cache, engine

    found = _cache.LowprecCacheLocator.from_function(engine.round_pack.py_func, engine.__file__)
    _, every = found.get_source_stamp()
    assert every == _cache.sources_stamp(str(PACKAGE / "_kernels"))
    # the same under NUMBA_CACHE_DIR (numba's own locator there stamps one file)
    from numba.core import config

    saved = config.CACHE_DIR
    config.CACHE_DIR = str(tmp_path / "numba")
    try:
        user = _cache.LowprecUserDirLocator.from_function(engine.round_pack.py_func,
                                                          engine.__file__)
        assert user is not None and user.get_cache_path().startswith(config.CACHE_DIR)
        assert user.get_source_stamp()[1] == every
        assert _cache.LowprecUserDirLocator.from_function(_run, __file__) is None
    finally:
        config.CACHE_DIR = saved
    for name, text in (("a.py", "x = 1\n"), ("b.py", "y = 2\n"), ("notes.txt", "-")):
        (tmp_path / name).write_text(text)
    before = _cache.sources_stamp.__wrapped__(str(tmp_path))
    (tmp_path / "notes.txt").write_text("other")  # not a source
    os.utime(tmp_path / "a.py", (1, 1))  # a touch alone
    assert _cache.sources_stamp.__wrapped__(str(tmp_path)) == before
    (tmp_path / "b.py").write_text("y = 3\n")  # another file's code
    assert _cache.sources_stamp.__wrapped__(str(tmp_path)) != before
