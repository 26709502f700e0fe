"""The kernel router (``lowprec._kernels.route``) and the cache stamp that covers
every kernel source."""

from __future__ import annotations

from pathlib import Path

from lowprec._kernels import _cache


def test_the_stamp_covers_kernel_sources_in_sub_folders(tmp_path: Path) -> None:
    # Kernels moved into a sub-folder must still make every cached kernel stale
    # when they change (numba's own stamp covers the kernel's file only).
    stamp = _cache.sources_stamp.__wrapped__
    (tmp_path / "top.py").write_text("a = 1\n")
    sub = tmp_path / "twins" / "deeper"
    sub.mkdir(parents=True)
    (sub / "kernel.py").write_text("b = 1\n")
    before = stamp(str(tmp_path))
    (sub / "kernel.py").write_text("b = 2\n")  # a change two folders down
    after = stamp(str(tmp_path))
    assert after != before
    (sub / "kernel.py").rename(tmp_path / "twins" / "kernel.py")  # the same file moved up
    assert stamp(str(tmp_path)) not in (before, after)
    cache = tmp_path / "twins" / "__pycache__"
    cache.mkdir()
    moved = stamp(str(tmp_path))
    (cache / "kernel.cpython.py").write_text("compiled")  # not a source
    assert stamp(str(tmp_path)) == moved
    assert _cache._sources(str(tmp_path)) == ["top.py", "twins/kernel.py"]
