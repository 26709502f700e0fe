"""A format explorer in the browser: one self-contained, offline HTML page.

``lowprec explore --out explorer.html`` writes the page; opening the file is enough (no
server, no network). It shows, for every registered format of at most 16 bits and any
custom format given on the command line:

* a code's bit fields as buttons that flip, its value, class (zero, subnormal, normal, inf,
  NaN) and its two neighbours in value order;
* a number typed in, rounded in each of :data:`lowprec.MODES` (stochastic rounding as the
  two neighbours with their probabilities), with the error in ulps;
* a short vector quantized to an MX format or NVFP4: the shared scale and each element's
  code, value and error;
* the state in the address bar (``?format=fp8_e4m3&value=0.1``), for links from slides.

Where the numbers come from: the value of every code is computed here by
:func:`lowprec.decode` and embedded in the page (the magnitudes as little-endian float32,
base64; a code with the sign bit set is the negated magnitude, and the browser test holds
the page's table equal to ``decode`` on every code). The page's own code only looks values
up and decides between the two neighbours of a number with lowprec's rules; the browser
test (``tests/test_explorer.py``) holds that equal to :func:`lowprec.encode` on the
midpoints, their float64 neighbours and the overflow and underflow edges of every format.

>>> html = build_page()
>>> html.startswith("<!DOCTYPE html>") and "fp8_e4m3" in html
True
"""

from __future__ import annotations

import base64
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__, mx
from .formats import FloatFormat, custom_format, get_format, list_formats
from .rounding import MODES, decode, encode
from .schemes import BLOCK_VARIANT_KINDS

__all__ = ["MX_EXAMPLE", "build_page", "explorer_data", "parse_format_spec", "write_page"]

#: The vector the MX/NVFP4 panel starts with: an outlier, small values, a tie and a zero.
MX_EXAMPLE = "0.1, -0.25, 3.7, 12, 0.02, -1.5, 0, 0.75"
_PLACEHOLDER = "/*LOWPREC_DATA*/null"  # in explorer_page.js
_SCRIPT = "/*LOWPREC_SCRIPT*/"  # in explorer_page.html: where the script goes
_SPEC = re.compile(r"^e(?P<e>\d+)m(?P<m>\d+)$")


def parse_format_spec(spec: str) -> FloatFormat:
    """A registered format name, or ``eXmY`` for an IEEE-style custom format.

    >>> parse_format_spec("e4m5").width
    10
    """
    key = spec.strip().lower()
    try:
        return get_format(key)
    except ValueError:
        pass
    match = _SPEC.match(key)
    if not match:
        raise ValueError(f"--format {spec!r}: not a registered format and not eXmY "
                         f"(e.g. e4m5); registered: "
                         f"{', '.join(f.name for f in list_formats())}")
    e, m = int(match.group("e")), int(match.group("m"))
    if not (2 <= e <= 11 and 1 <= m and 1 + e + m <= 16):
        raise ValueError(f"custom format {spec!r}: the explorer takes IEEE-style eXmY with 2 to "
                         "11 exponent bits, at least 1 mantissa bit and at most 16 bits in all "
                         "(e.g. e4m5, e5m6)")
    return custom_format(e, m)


def _format_entry(f: FloatFormat, custom: bool) -> dict[str, Any]:
    """One format for the page: its parameters and the value of every magnitude code."""
    half = 1 << (f.width - 1) if f.signed else 1 << f.width
    magnitudes = decode(np.arange(half, dtype=np.uint32), f)
    dtype = "<f4" if f.fits_float32 else "<f8"
    nan_pos = nan_neg = None
    if f.has_nan:
        nan_pos = int(encode(np.float64(np.nan), f))
        nan_neg = int(encode(-np.float64(np.nan), f)) if f.signed else nan_pos
    return {
        "name": f.name, "description": f.description or "custom format", "custom": custom,
        "width": f.width, "e": f.exponent_bits, "m": f.mantissa_bits, "bias": f.bias,
        "signed": f.signed, "has_inf": f.has_inf, "nan": f.nan,
        "has_subnormals": f.has_subnormals, "has_negative_zero": f.has_negative_zero,
        "emin": f.emin, "emax": f.emax, "max": f.max, "smallest_normal": f.smallest_normal,
        "smallest_positive": f.smallest_subnormal,
        "max_code_magnitude": f.max_code_magnitude, "nan_pos": nan_pos, "nan_neg": nan_neg,
        "dtype": "f4" if dtype == "<f4" else "f8",
        "magnitudes": base64.b64encode(magnitudes.astype(dtype).tobytes()).decode("ascii"),
    }


def explorer_data(extra: list[FloatFormat] | tuple[FloatFormat, ...] = ()) -> dict[str, Any]:
    """Everything the page shows that is not computed on the page, as JSON-ready data."""
    formats = [f for f in list_formats() if f.width <= 16]
    names = {f.name for f in formats}
    entries = [_format_entry(f, False) for f in formats]
    for f in extra:
        if f.width > 16:
            raise ValueError(f"format {f.name} has {f.width} bits; the explorer shows formats "
                             "of at most 16 bits")
        if f.name not in names:
            entries.append(_format_entry(f, True))
            names.add(f.name)
    mx_entries = [
        {"name": m.name, "element": m.element.name, "emax_elem": m.emax_elem,
         "rule": f"{m.name}: blocks of 32 {m.element.name} elements sharing one E8M0 scale "
                 f"2^(floor(log2 amax) - {m.emax_elem}) (OCP MX v1.0, the 'floor' rule); "
                 "elements rounded to nearest even, saturating (lowprec.mx.quantize)"}
        for m in mx.MX_FORMATS.values() if not m.integer
    ]
    mx_entries.append({"name": "nvfp4", "element": "fp4_e2m1", "emax_elem": 2,
                       "block": 16, "scale": "fp8_e4m3", "tensor_scale": True,
                       "rule": "nvfp4: E2M1 elements, one E4M3 scale per 16 values and one "
                               "FP32 scale per tensor, every step in FP32 "
                               "(lowprec.nvfp4.quantize)"})
    for name, (block, scale_format, tensor_scale) in BLOCK_VARIANT_KINDS.items():
        scale = {"ue4m3": "fp8_e4m3", "ue5m3": "ue5m3"}[scale_format]
        how = ("and one FP32 scale per tensor, as NVFP4" if tensor_scale else
               "= amax/6 rounded to nearest even, saturating; no tensor scale")
        mx_entries.append({
            "name": name, "element": "fp4_e2m1", "emax_elem": 2, "block": block,
            "scale": scale, "tensor_scale": tensor_scale,
            "rule": f"{name}: E2M1 elements, one {scale_format.upper()} scale per {block} "
                    f"values {how}, every step in FP32 (lowprec.nvfp4.quantize(x, "
                    f"block_size={block}, scale_format={scale_format!r}"
                    + ("" if tensor_scale else ", global_scale=1") + "))"})
    return {"version": __version__, "formats": entries, "mx": mx_entries,
            "modes": [[m, meaning] for m, meaning in MODES.items()],
            "mx_example": MX_EXAMPLE,
            "not_shown": [f.name for f in list_formats() if f.width > 16]}


def build_page(extra: list[FloatFormat] | tuple[FloatFormat, ...] = ()) -> str:
    """The explorer page as one HTML string (data embedded, no external resources)."""
    files = resources.files("lowprec")
    template = files.joinpath("explorer_page.html").read_text("utf-8")
    script = files.joinpath("explorer_page.js").read_text("utf-8")
    if _SCRIPT not in template or _PLACEHOLDER not in script or "</script" in script.lower():
        raise RuntimeError("explorer_page.html/.js have lost their script or data placeholder")
    template = template.replace(_SCRIPT, script)
    data = json.dumps(explorer_data(extra), separators=(",", ":"), allow_nan=False)
    return template.replace(_PLACEHOLDER, data.replace("</", "<\\/"))


def write_page(path: str | Path, extra: list[FloatFormat] | tuple[FloatFormat, ...] = (), *,
               force: bool = False) -> Path:
    """Write the page to ``path``; an existing file is replaced only with ``force``."""
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"--out {str(target)!r} is a folder; give a file name such as "
                         "explorer.html")
    if target.exists() and not force:
        raise ValueError(f"--out {str(target)!r} already exists; pass --force to replace it")
    html = build_page(extra)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target
