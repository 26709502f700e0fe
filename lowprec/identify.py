"""Naming the semantics of someone's hardware from its outputs.

``identify_conversion(x, codes, fmt)`` says which lowprec rounding semantics
(mode, saturation, subnormal inputs and outputs flushed or kept) reproduce the
codes some hardware or library produced for ``x``; ``identify_dot(a, b, c, d,
inputs=...)`` says which GPU architecture model (or, when none fits, which
``tensor_core(...)`` parameters) reproduces measured dot products ``d = a·b + c``.
Both return an :class:`Identification`: the best candidate, the fraction of
cases it explains, every candidate tried, and the first input on which the two
best disagree.

Readers for the text layout of the measured tensor-core files
(``../shared/tensorcores``: hexadecimal float32 rows, 32-character bit lines)
are here too.
"""

from __future__ import annotations

import gzip
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .formats import FloatFormat, get_format
from .matmul import ARCHITECTURES, get_model, tensor_core, vecdot
from .rounding import decode, encode

__all__ = [
    "Identification",
    "TensorCoreCase",
    "identify_conversion",
    "identify_dot",
    "iter_tensorcore_files",
    "read_array",
]


# --------------------------------------------------------------------- readers
def _open_text(path: Path):
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def read_array(path: str | Path, key: str | None = None) -> np.ndarray:
    """An array from ``.npy``, ``.npz`` (``key`` or its only array) or the text layout
    of ``../shared/tensorcores`` (``.txt``/``.txt.gz``): lines of space-separated
    hexadecimal float32 bit patterns, or lines of 32 ``0``/``1`` characters (float32
    bits). Text files give float64 values, one row per line (a column for bit lines).

    >>> import tempfile, os, numpy as np
    >>> p = os.path.join(tempfile.mkdtemp(), "c.txt")
    >>> _ = open(p, "w").write("00111111100000000000000000000000\\n")
    >>> read_array(p).tolist()
    [1.0]
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"no such file {str(p)!r}")
    name = p.name.lower()
    if name.endswith(".npy"):
        return np.load(p, allow_pickle=False)
    if name.endswith(".npz"):
        with np.load(p, allow_pickle=False) as z:
            keys = list(z.keys())
            if key is None and len(keys) != 1:
                raise ValueError(f"{p.name} holds {keys}; name one")
            if key is not None and key not in keys:
                raise ValueError(f"{p.name} has no array {key!r}; it holds {keys}")
            return z[key or keys[0]]
    if not (name.endswith(".txt") or name.endswith(".txt.gz")):
        raise ValueError(f"{p.name}: expected a .npy, .npz, .txt or .txt.gz file")
    with _open_text(p) as f:
        lines = [ln.split() for ln in f if ln.strip()]
    if not lines:
        raise ValueError(f"{p.name} is empty")
    try:
        if all(len(t) == 1 and len(t[0]) == 32 and set(t[0]) <= {"0", "1"} for t in lines):
            bits = np.array([int(t[0], 2) for t in lines], dtype=np.uint32)
            return bits.view(np.float32).astype(np.float64)
        width = len(lines[0])
        if any(len(t) != width for t in lines):
            raise ValueError(f"{p.name}: lines have different numbers of values")
        bits = np.array([[int(v, 16) for v in t] for t in lines], dtype=np.uint32)
    except ValueError as e:
        raise ValueError(f"{p.name}: not hexadecimal float32 rows or 32-bit lines ({e})") from None
    return bits.view(np.float32).astype(np.float64)


# lowprec format names of the folders of ../shared/tensorcores.
_FOLDER_FORMATS = {"fp16": "fp16", "bf16": "bf16", "tf32": "tf32", "E4M3": "fp8_e4m3",
                   "E5M2": "fp8_e5m2"}


@dataclass(frozen=True)
class TensorCoreCase:
    """One measured file set: ``d = a·b + c`` for ``inputs`` and ``output`` on ``gpu``."""

    gpu: str
    inputs: str
    output: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray


def iter_tensorcore_files(root: str | Path) -> Iterator[TensorCoreCase]:
    """Every GPU x format x output of a folder laid out like ``../shared/tensorcores``.

    Follows the source's notes: H100 FP8 lines with FP32 output were measured with
    ``wgmma`` and C = 0, so C is zero there.
    """
    root = Path(root)
    for gdir in sorted(p for p in root.iterdir() if p.is_dir()):
        for fdir in sorted(p for p in gdir.iterdir() if p.is_dir()):
            gpu, folder = gdir.name, fdir.name
            if folder not in _FOLDER_FORMATS:
                continue
            a = read_array(fdir / f"a_{gpu}_{folder}.txt.gz")
            b = read_array(fdir / f"b_{gpu}_{folder}.txt.gz")
            c = read_array(fdir / f"c_{gpu}_fp32.txt.gz")
            for out in ("fp32", "fp16"):
                dpath = fdir / f"d_{gpu}_{out}.txt.gz"
                if not dpath.is_file():
                    continue
                cc = np.zeros_like(c) if (gpu == "H100" and folder in ("E4M3", "E5M2")
                                          and out == "fp32") else c
                yield TensorCoreCase(gpu, _FOLDER_FORMATS[folder], out, a, b, cc,
                                     read_array(dpath))
