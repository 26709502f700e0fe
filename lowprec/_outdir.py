"""One policy for every folder the command line writes into.

``demo``, ``train``, ``figures``, ``validate``, ``inspect``, ``tutorials``, ``grade`` and
``explore`` all write files. They share one rule, so nothing a user wrote is lost:

* a folder that does not exist is created;
* an existing *empty* folder is used;
* an existing non-empty folder is refused, before any work is done, unless
  ``force=True`` (the ``--force`` flag).

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> prepare_out_dir(root / "new", force=False).name
'new'
>>> (root / "new" / "notes.txt").write_text("mine")
4
>>> prepare_out_dir(root / "new", force=False)  # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
...
lowprec._outdir.OutDirError: ... is not empty; pass --force to write into it anyway
"""

from __future__ import annotations

from pathlib import Path


class OutDirError(ValueError):
    """An output folder that may not be written into (the message says why)."""


def prepare_out_dir(path: str | Path, *, force: bool = False) -> Path:
    """Create or accept the output folder ``path`` under the shared policy; return it.

    Raises `OutDirError` when ``path`` is a file, or a non-empty folder and ``force`` is
    false. Call it *before* doing any work, so a refusal costs the user nothing.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise OutDirError(f"output folder {str(folder)!r} is a file, not a folder")
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise OutDirError(f"output folder {str(folder)!r} is not empty; pass --force to "
                          "write into it anyway")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
