"""Where numba keeps lowprec's compiled kernels: a user cache, never the package folder.

numba's default for ``cache=True`` is a ``__pycache__`` folder next to the source.
For an installed lowprec that is inside ``site-packages``, and pip does not know
those files: ``pip uninstall`` leaves ``lowprec/_kernels/__pycache__`` behind,
and the folder left over, with no ``__init__.py``, is then imported as an empty
*namespace package* ahead of a later editable install (``pip install .`` then
``pip install -e .``, the README's two commands in one environment, ended in
``ImportError: cannot import name ... (unknown location)``).

So lowprec's kernels (and only they) are cached under the user's cache folder,
``~/.cache/lowprec/`` on Linux (``$XDG_CACHE_HOME/lowprec`` where that is set), one
sub-folder per source folder, as numba's own user-wide locator does. Setting
``NUMBA_CACHE_DIR`` still wins, as numba documents (with the stamp below: numba's
own locator for that folder stamps a kernel's file only); where the user cache is
not writable, numba's usual choices follow.

A cached kernel is reused while its source stamp matches. numba's stamp is the
hash of the kernel's own file, but a kernel holds compiled copies of what it
calls and inlines from other files (``pow2``'s kernels run ``bits32_direct``'s
loop, ``arith32``'s its rounding), and this cache outlives an upgrade. So the
stamp here is also the hash of every source file of :mod:`lowprec._kernels`,
sub-folders included (:func:`sources_stamp`): a change to any of them
compiles every kernel afresh, never a stale copy.
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import Any

from numba.core import caching
from numba.misc.appdirs import AppDirs

_KERNELS_DIR = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_DIR = os.path.dirname(_KERNELS_DIR)

# The names lost their leading underscore in numba 0.61.
_USER_WIDE: Any = getattr(caching, "UserWideCacheLocator", None) or getattr(
    caching, "_UserWideCacheLocator", None)
_IMPL: Any = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
_USER_DIR: Any = getattr(caching, "UserProvidedCacheLocator", None) or getattr(
    caching, "_UserProvidedCacheLocator", None)


def cache_dir() -> str:
    """The folder that holds lowprec's compiled kernels (unless NUMBA_CACHE_DIR is set).

    >>> cache_dir().endswith("lowprec")
    True
    """
    return str(AppDirs(appname="lowprec", appauthor=False).user_cache_dir)


@functools.cache
def sources_stamp(folder: str = _KERNELS_DIR) -> str:
    """The SHA-256 of the relative paths and contents of the ``.py`` files under
    ``folder``, sub-folders included (lowprec's kernels by default; once per
    process). A kernel moved into a sub-folder, or a sub-folder's file changed,
    changes the stamp like any other source; ``__pycache__`` is not a source.

    >>> len(sources_stamp())
    64
    """
    digest = hashlib.sha256()
    for path in _sources(folder):
        with open(os.path.join(folder, path), "rb") as f:
            digest.update(path.replace(os.sep, "/").encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def _sources(folder: str) -> list[str]:
    """The ``.py`` files under ``folder`` (relative paths, sorted), every sub-folder
    but ``__pycache__`` and hidden ones walked."""
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        found += [os.path.relpath(os.path.join(top, name), folder)
                  for name in files if name.endswith(".py")]
    return sorted(found)


class _LowprecFiles:
    """For lowprec's own source files only, stamped with :func:`sources_stamp` too
    (mixed into numba's locators below)."""

    def get_source_stamp(self) -> Any:
        """numba's stamp of the kernel's own file, and :func:`sources_stamp`."""
        return super().get_source_stamp(), sources_stamp()  # type: ignore[misc]

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if not os.path.abspath(py_file).startswith(_PACKAGE_DIR + os.sep):
            return None
        return super().from_function(py_func, py_file)  # type: ignore[misc]


if _USER_WIDE is not None and _IMPL is not None:

    class LowprecCacheLocator(_LowprecFiles, _USER_WIDE):
        """numba's user-wide locator, for lowprec's own source files, in :func:`cache_dir`."""

        def __init__(self, py_func: Any, py_file: str) -> None:
            super().__init__(py_func, py_file)
            self._cache_path = os.path.join(cache_dir(), self.get_suitable_cache_subpath(py_file))

    _STAMPED: list[Any] = [LowprecCacheLocator]

    if _USER_DIR is not None:

        class LowprecUserDirLocator(_LowprecFiles, _USER_DIR):
            """numba's NUMBA_CACHE_DIR locator, for lowprec's own source files, with
            :func:`sources_stamp` in the stamp too (a folder named by NUMBA_CACHE_DIR
            must not hand back a kernel compiled from another version of what it calls)."""

        _STAMPED.insert(0, LowprecUserDirLocator)

    def install() -> None:
        """Put lowprec's NUMBA_CACHE_DIR locator first and its user-cache locator after
        numba's NUMBA_CACHE_DIR one, before the in-tree one (once)."""
        locators = _IMPL._locator_classes
        if LowprecCacheLocator not in locators:
            locators.insert(1, LowprecCacheLocator)
        if len(_STAMPED) > 1 and _STAMPED[0] not in locators:
            locators.insert(0, _STAMPED[0])

else:  # an unknown numba layout: keep numba's own choice

    def install() -> None:
        """Nothing to do: this numba has no locator list to extend."""
