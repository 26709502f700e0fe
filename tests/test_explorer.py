"""The format explorer page, loaded in a real browser (headless Chromium).

Every number the page shows is compared with lowprec's engine: the value of every code of
every format (``decode``), every rounding mode on midpoints, their float64 neighbours and
the overflow/underflow edges (``encode``), stochastic rounding's two neighbours and odds
(drawn from ``encode(..., "stochastic")`` itself), the MX and NVFP4 panel
(``lowprec.mx.quantize``, ``lowprec.nvfp4.quantize``), and a screenshot that is not blank.

Chromium comes from Debian: ``apt-get install -y chromium``. Without it these tests skip
with a loud reason, except under CI (``CI`` set), where a missing browser is a failure.
"""

from __future__ import annotations

import html
import math
import os
import re
import shutil
import subprocess
import urllib.parse
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import lowprec as lp
from lowprec import explorer

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_MAX_URL = 100_000  # one command-line argument may hold 128 KiB on Linux


def _browser() -> str:
    for name in _BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    reason = ("NO BROWSER: the explorer's browser tests need headless Chromium "
              "(apt-get install -y chromium); they did NOT run")
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("explorer") / "explorer.html"
    explorer.write_page(path, [explorer.parse_format_spec("e4m5")])
    return path


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-dev-shm-usage", "--virtual-time-budget=10000", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _dom(page: Path, **query: str) -> str:
    url = page.as_uri() + "?" + urllib.parse.urlencode(query, safe=",:;")
    assert len(url) < _MAX_URL
    return _run(["--dump-dom", url]).stdout


def _text(dom: str, element_id: str) -> str:
    m = re.search(rf'id="{re.escape(element_id)}"[^>]*>(.*?)</', dom, re.S)
    assert m, f"element #{element_id} missing from the page"
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip()


def _selftest(dom: str) -> dict:
    import json

    m = re.search(r'<pre id="selftest"[^>]*>(.*?)</pre>', dom, re.S)
    assert m and m.group(1).strip(), "the page wrote no self-test output"
    return json.loads(html.unescape(m.group(1)))


def _num(text: str) -> float:
    return float(text.replace("−", "-"))


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


def _formats() -> list[lp.FloatFormat]:
    return [f for f in lp.list_formats() if f.width <= 16] + [explorer.parse_format_spec("e4m5")]


# ------------------------------------------------------------ every code
def test_every_code_of_every_format_equals_decode(page: Path) -> None:
    out = _selftest(_dom(page, selftest="decode"))
    for f in _formats():
        bits = out[f.name]
        values = np.frombuffer(bytes.fromhex(bits), dtype=">f8").astype(np.float64)
        expected = lp.decode(np.arange(1 << f.width, dtype=np.uint32), f)
        assert values.shape == expected.shape, f.name
        both_nan = np.isnan(values) & np.isnan(expected)
        same = (values == expected) & (np.signbit(values) == np.signbit(expected))
        bad = np.flatnonzero(~(same | both_nan))
        assert bad.size == 0, (f"{f.name}: the page's value of code {int(bad[0]):#x} is "
                               f"{values[bad[0]]!r}, decode gives {expected[bad[0]]!r}")


# ------------------------------------------------------------ rounding
def _cases(f: lp.FloatFormat, rng: np.random.Generator) -> list[float]:
    """Exact values, midpoints and their float64 neighbours, edges; both signs."""
    mags = lp.decode(np.arange(f.max_code_magnitude + 1, dtype=np.uint32), f)
    beyond = f.max + 2.0 ** (f.emax - f.mantissa_bits)
    ladder = np.append(mags, beyond)
    mids = (ladder[:-1] + ladder[1:]) / 2  # exact in float64 for these formats
    if mids.size > 300:
        pick = rng.choice(mids.size, 300, replace=False)
        mids = np.concatenate([mids[pick], mids[:20], mids[-20:]])
        mags = np.concatenate([mags[rng.choice(mags.size, 60, replace=False)], mags[-5:]])
    near = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
    edges = [beyond, np.nextafter(beyond, 0), 2 * beyond, 1e300, np.inf, 0.0, 1e-300,
             f.smallest_subnormal / 2, f.smallest_subnormal / 3, f.smallest_subnormal * 0.75]
    xs = np.concatenate([mags, near, edges, rng.uniform(0, f.max, 40)])
    xs = np.concatenate([xs, -xs])
    return [float(x) for x in xs] + [float("nan")]


def _expected(x: float, f: lp.FloatFormat, mode: str, sat: bool) -> int | None:
    try:
        return int(lp.encode(np.float64(x), f, mode, saturate=sat))
    except ValueError:  # NaN into a format without NaN
        return None


def test_rounding_in_every_mode_equals_encode(page: Path) -> None:
    rng = np.random.default_rng(15)
    groups, current, expected_all = [], "", {}
    for f in _formats():
        xs = _cases(f, rng)
        expected_all[f.name] = xs
        piece = f.name + ":" + ",".join(repr(x) for x in xs)
        if current and len(current) + len(piece) > _MAX_URL - 2000:
            groups.append(current)
            current = ""
        current = piece if not current else current + ";" + piece
    groups.append(current)
    checked = 0
    stochastic_cases = []
    for group in groups:
        out = _selftest(_dom(page, selftest="round", cases=group))
        for name, res in out.items():
            f = explorer.parse_format_spec(name)
            xs = expected_all[name]
            for sat in (False, True):
                for mode in lp.MODES:
                    got = res[mode + ("+sat" if sat else "")]
                    assert len(got) == len(xs)
                    if mode == "stochastic":
                        stochastic_cases += [(f, x, tuple(g), sat) for x, g in zip(xs, got)
                                             if g is not None]
                        continue
                    for x, g in zip(xs, got):
                        want = _expected(x, f, mode, sat)
                        assert g == want, (f"{name} {mode} saturate={sat}: the page rounds "
                                           f"{x!r} to {g!r}, lowprec.encode gives {want!r}")
                        checked += 1
    assert checked > 20_000
    _check_stochastic(stochastic_cases, rng)


def _check_stochastic(cases: list, rng: np.random.Generator) -> None:
    """The page's two neighbours and odds against the engine's own stochastic draws."""
    by_format: dict[str, list] = {}
    for f, x, got, sat in cases:
        if not sat and not math.isnan(x):
            by_format.setdefault(f.name, []).append((f, x, got))
    n = 4000
    for items in by_format.values():
        pick = rng.choice(len(items), min(25, len(items)), replace=False)
        for k in pick:
            f, x, (lo, hi, p_up) = items[k]
            draws = lp.encode(np.full(n, x), f, "stochastic", rng=int(rng.integers(1 << 31)))
            seen = set(int(c) for c in np.unique(draws))
            assert seen <= {lo, hi}, f"{f.name} {x!r}: page says {lo:#x}/{hi:#x}, engine drew {seen}"
            if lo == hi:  # exact, or beyond the top: no choice to make
                continue
            ups = int(np.count_nonzero(draws == hi))
            sigma = math.sqrt(n * p_up * (1 - p_up)) + 1e-9
            assert abs(ups - n * p_up) <= 6 * sigma + 1, (f.name, x, ups, p_up)
            # and the odds are the exact fraction of the way from the lower neighbour
            lv, hv = float(lp.decode(np.uint32(lo), f)), float(lp.decode(np.uint32(hi), f))
            if lo != hi and math.isfinite(hv) and math.isfinite(lv):
                exact = Fraction(abs(x)) - Fraction(abs(lv))
                assert abs(float(exact / (Fraction(abs(hv)) - Fraction(abs(lv)))) - p_up) < 1e-12


# ------------------------------------------------------------ what the page shows
@pytest.mark.parametrize("name, code", [("fp8_e4m3", 0x7E), ("fp16", 0x8001), ("bf16", 0x7F80),
                                        ("fp8_e4m3fnuz", 0x80), ("e8m0", 0x00)])
def test_code_panel_shows_lowprec_values(page: Path, name: str, code: int) -> None:
    f = lp.get_format(name)
    dom = _dom(page, format=name, code=hex(code))
    v = float(lp.decode(np.uint32(code), f))
    assert _same(_num(_text(dom, "value")), v)
    cls = ("NaN" if math.isnan(v) else "inf" if math.isinf(v) else "zero" if v == 0
           else "subnormal" if abs(v) < f.smallest_normal else "normal")
    assert _text(dom, "class") == cls
    if math.isfinite(v):  # neighbours: the next values below and above among all codes
        values = lp.decode(np.arange(1 << f.width, dtype=np.uint32), f)
        finite = np.unique(values[np.isfinite(values)])
        below, above = finite[finite < v], finite[finite > v]
        lo, hi = _text(dom, "nb-lo"), _text(dom, "nb-hi")
        assert (lo == "—") == (below.size == 0) and (hi == "—") == (above.size == 0)
        if below.size:
            assert _num(lo) == below[-1]
        if above.size:
            assert _num(hi) == above[0]
    bits = format(code, f"0{f.width}b")
    shown = "".join(re.findall(r'id="bit-\d+"[^>]*>([01])<', dom))
    assert shown == bits


def test_rounding_panel_for_a_linked_state(page: Path) -> None:
    """``?format=fp8_e4m3&value=0.1`` shows every mode's result and its error in ulps."""
    dom = _dom(page, format="fp8_e4m3", value="0.1")
    f = lp.get_format("fp8_e4m3")
    lo_v, hi_v = float(lp.round_to(0.1, f, "rtz")), float(lp.round_to(0.1, f, "rup"))
    for mode in lp.MODES:
        row = re.search(rf'<tr id="round-{mode}">(.*?)</tr>', dom, re.S)
        assert row, mode
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)]
        if mode == "stochastic":
            assert _num(re.search(r'class="sr-lo">([^<]*)', row.group(1)).group(1)) == lo_v
            assert _num(re.search(r'class="sr-hi">([^<]*)', row.group(1)).group(1)) == hi_v
            p_up = float(re.search(r'class="sr-phi">([^<]*)', row.group(1)).group(1))
            assert abs(p_up - (0.1 - lo_v) / (hi_v - lo_v)) < 1e-5
            continue
        want = float(lp.round_to(0.1, f, mode))
        assert int(cells[2].split()[0], 16) == int(lp.encode(0.1, f, mode)), mode
        assert _num(cells[3]) == want, mode
        assert abs(float(cells[4]) - (want - 0.1) / (hi_v - lo_v)) < 1e-4, mode


def _check_block(dom: str, xs: list[float], fmt: str) -> None:
    """The MX/NVFP4 table and scale on the page equal lowprec.mx / lowprec.nvfp4 (NaN = NaN)."""
    rows = re.findall(r"<tr><td[^>]*>\d+</td>(.*?)</tr>", dom.split('id="mx-table"')[1], re.S)
    assert len(rows) == len(xs)
    from lowprec.schemes import BLOCK_VARIANT_KINDS

    with np.errstate(over="ignore"):  # NVFP4 takes float32: 1e40 becomes inf, as on the page
        if fmt == "nvfp4":
            t = lp.nvfp4.quantize(np.array(xs, dtype=np.float32))
        elif fmt in BLOCK_VARIANT_KINDS:  # the E2M1 block variants of NVFP4
            block, sf, ts = BLOCK_VARIANT_KINDS[fmt]
            t = lp.nvfp4.quantize(np.array(xs, dtype=np.float32), block_size=block,
                                  scale_format=sf, global_scale=None if ts else 1.0)
        else:
            t = lp.mx.quantize(np.array(xs), fmt, block_size=32)
    deq, codes = t.dequantize(), t.codes
    for k, row in enumerate(rows):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        assert int(cells[1].split()[0], 16) == int(codes[k]), (fmt, k)
        assert _same(_num(cells[3]), float(deq[k])), (fmt, k, cells[3], deq[k])
    scale = _text(dom, "mx-scale")
    for c in t.scale_codes.ravel():  # E8M0 for MX, one E4M3 per 16 values for NVFP4
        assert f"{int(c):#04x}" in scale, (fmt, scale)


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp8_e4m3", "nvfp4"])
def test_block_panel_equals_mx_and_nvfp4(page: Path, fmt: str) -> None:
    xs = [0.1, -0.25, 3.7, 12.0, 0.02, -1.5, 0.0, 0.75, 200.0, -7.0]
    _check_block(_dom(page, format="fp16", mx=",".join(map(repr, xs)), mxformat=fmt), xs, fmt)


@pytest.mark.parametrize("fmt", ["nvfp4_b32", "mxfp4_ue4m3", "mxfp4_ue5m3", "nvfp4_ue5m3"])
def test_block_panel_equals_the_block_variants(page: Path, fmt: str) -> None:
    """The E2M1 block variants (lowprec.schemes.BLOCK_VARIANT_KINDS) on the page equal
    lowprec.nvfp4.quantize: 20 values (two blocks of 16, or one of 32), a tiny block whose
    UE4M3 scale underflows to 0, a large one whose UE4M3 scale saturates, inf."""
    xs = [0.1, -0.25, 3.7, 12.0, 0.02, -1.5, 0.0, 0.75, 200.0, -7.0, 1e-4, 3e-5,
          5e4, -2e5, 6.0, 1e-6, -0.0, 2.5, 0.3, 9.0]
    _check_block(_dom(page, format="fp16", mx=",".join(map(repr, xs)), mxformat=fmt), xs, fmt)
    small = [1e-4, -3e-5, 2e-5]
    _check_block(_dom(page, format="fp16", mx=",".join(map(repr, small)), mxformat=fmt),
                 small, fmt)
    big = [1e6, -3e5, 1.0, float("inf")] if fmt.startswith("mxfp4") else [1e6, -3e5, 1.0]
    _check_block(_dom(page, format="fp16", mx=",".join(map(repr, big)), mxformat=fmt), big,
                 fmt)


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp8_e4m3", "nvfp4"])
def test_block_panel_takes_huge_finite_values(page: Path, fmt: str) -> None:
    """1e40 is accepted (not "not a number") and handled by the format's rules, said in words.

    Independent of the engine: the OCP scale exponent floor(log2 amax) - emax_elem, from
    exact integers; above E8M0's 127 the scale is NaN (the OCP reference code, microxcaling),
    otherwise the outlier saturates to the element's max times the scale. NVFP4 reads FP32,
    where 1e40 is inf: its block is NaN.
    """
    xs = [1e40, -3e39, 1.0, -0.5]
    dom = _dom(page, format="fp16", mx=",".join(map(repr, xs)), mxformat=fmt)
    _check_block(dom, xs, fmt)
    note = _text(dom, "mx-note")
    rows = re.findall(r"<tr><td[^>]*>\d+</td>(.*?)</tr>", dom.split('id="mx-table"')[1], re.S)
    first = _num(html.unescape(re.findall(r"<td[^>]*>(.*?)</td>", rows[0])[3]))
    if fmt == "nvfp4":
        assert math.isnan(first) and "beyond float32" in note and "0x7f" in note
        return
    mxf = lp.mx.MX_FORMATS[fmt]
    k = Fraction(10**40).numerator.bit_length() - 1 - mxf.emax_elem  # floor(log2 1e40) = 132
    assert 2**(k + mxf.emax_elem) <= 10**40 < 2**(k + mxf.emax_elem + 1)
    if k > 127:
        assert math.isnan(first) and f"2^{k}" in note and "NaN" in note
    else:
        assert first == mxf.element.max * 2.0**k and "saturate" in note


def test_fp4_minus_inf_saturates(page: Path) -> None:
    """FP4 E2M1 has neither inf nor NaN: -inf rounds to -6 in every mode (OCP MX v1.0), said
    beside the number; in an MXFP4 block, -inf makes the block's scale NaN."""
    f = lp.get_format("fp4_e2m1")
    dom = _dom(page, format="fp4_e2m1", value="-inf", mx="-inf,1,2", mxformat="mxfp4")
    for mode in lp.MODES:
        if mode == "stochastic":
            continue
        row = re.search(rf'<tr id="round-{mode}">(.*?)</tr>', dom, re.S)
        assert row, mode
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)]
        assert int(cells[2].split()[0], 16) == 0xF == int(lp.encode(-np.inf, f, mode)), mode
        assert _num(cells[3]) == -6.0 == -f.max, mode
    assert "neither infinity nor NaN: an infinity saturates to ±6" in _text(dom, "x-note")
    _check_block(dom, [-math.inf, 1.0, 2.0], "mxfp4")
    assert "NaN" in _text(dom, "mx-note") and "0xff" in _text(dom, "mx-scale")
    assert _text(dom, "url-error") == ""  # a good address: no error line
    assert _text(dom, "facts").startswith(f.description)


def test_unknown_format_in_the_address_is_said(page: Path) -> None:
    """Not a silent fp16: the message stays after the page renders (update() used to erase it)."""
    dom = _dom(page, format="fp7", mxformat="mxfp9", code="0xzz", value="1")
    err = _text(dom, "url-error")
    assert "unknown format “fp7”" in err and "fp8_e4m3" in err, err
    assert "unknown block format “mxfp9”" in err and "nvfp4" in err, err
    assert "“0xzz”" in err and "Showing fp16 and mxfp4 instead" in err, err


@pytest.mark.parametrize("bad", ["abc", "0x10"])
def test_non_number_input_is_rejected(page: Path, bad: str) -> None:
    """No rounding table of NaN results for a typo; the MX panel names the bad entry."""
    dom = _dom(page, format="fp16", value=bad, mx=f"1;{bad};3".replace(";", " "))
    assert f"“{bad}” is not a number" in _text(dom, "x-note")
    assert 'id="round-rne"' not in dom
    assert f"“{bad}” is not a number" in _text(dom, "mx-scale")
    assert _text(dom, "value") == "0.0"  # the code panel stays at code 0, not at NaN


def test_screenshot_is_not_blank(page: Path, tmp_path: Path) -> None:
    import matplotlib.image

    shot = tmp_path / "explorer.png"
    url = page.as_uri() + "?format=fp8_e4m3&value=0.1"
    _run([f"--screenshot={shot}", "--window-size=1200,1400", "--hide-scrollbars", url])
    img = matplotlib.image.imread(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    rgb = img[..., :3]
    non_white = np.mean(np.any(rgb < 0.95, axis=-1))
    colours = np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0).shape[0]
    assert non_white > 0.02, f"screenshot is almost blank ({non_white:.1%} non-white)"
    assert colours > 20, f"screenshot has only {colours} colours"


# ------------------------------------------------------------ without a browser
def test_page_is_self_contained_and_reasonably_small(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "external resource"
    assert "fetch(" not in text and "XMLHttpRequest" not in text
    size = page.stat().st_size
    assert size < 600_000, f"explorer page is {size:,} bytes"


def test_page_reads_numbers_as_python_float() -> None:
    """The page's number reader (its regular expression, run here by Python's ``re``) accepts
    exactly the decimal text Python's ``float()`` accepts, less digit separators; hex, words
    and empty boxes are "not a number" rather than a silent NaN."""
    script = (Path(explorer.__file__).parent / "explorer_page.js").read_text(encoding="utf-8")
    m = re.search(r"const NUMBER_TEXT = /(.*?)/;", script)
    assert m, "explorer_page.js has lost NUMBER_TEXT"
    number, special = re.compile(m.group(1)), re.compile(r"^([-+]?)(inf|infinity|nan)$")

    def page_accepts(text: str) -> bool:
        t = text.strip().lower()
        return bool(special.match(t) or number.match(t))

    def python_accepts(text: str) -> bool:
        try:
            float(text)
        except ValueError:
            return False
        return True

    texts = ["0.1", "-3e-5", "1e40", "+1E+40", ".5", "5.", "-0", "-0.0", "448", " 12 ", "inf",
             "-inf", "+Infinity", "NaN", "-nan", "1e400", "5e-324", "abc", "0x10", "1,5", "",
             " ", "1e", "e5", ".", "-", "1.2.3", "1e4.5", "--1", "infinit", "0b101", "1 2"]
    for text in texts:
        assert page_accepts(text) == python_accepts(text), text
    assert python_accepts("1_000") and not page_accepts("1_000")  # the one deliberate gap


def test_page_data_carries_the_block_rules() -> None:
    """What the MX/NVFP4 panel decides from, without a browser: each MX element format's
    emax (the exponent of its largest value, OCP MX v1.0 table 1) and E8M0's 2^-127..2^127,
    so that 1e40 (2^132.9) gives MXFP4 a scale exponent of 130 (no E8M0 code: NaN) and
    MXFP8 E4M3 one of 124, as ``lowprec.mx.quantize`` does."""
    data = explorer.explorer_data()
    by_name = {f["name"]: f for f in data["formats"]}
    e8 = by_name["e8m0"]
    assert (e8["emin"], e8["emax"], e8["signed"]) == (-127, 127, False)
    for entry in data["mx"]:
        element = by_name[entry["element"]]
        assert entry["emax_elem"] == math.frexp(element["max"])[1] - 1, entry["name"]
        if "scale" in entry:  # NVFP4 and its E2M1 block variants: no E8M0 scale
            continue
        k = math.frexp(1e40)[1] - 1 - entry["emax_elem"]
        t = lp.mx.quantize(np.array([1e40, 1.0]), entry["name"], block_size=32)
        assert (int(t.scale_codes.ravel()[0]) == 0xFF) == (k > 127), entry["name"]
        if k <= 127:
            assert int(t.scale_codes.ravel()[0]) == k + 127


def test_custom_format_spec_errors() -> None:
    assert explorer.parse_format_spec("e5m6").name == "e5m6"
    with pytest.raises(ValueError, match="at most 16 bits"):
        explorer.parse_format_spec("e8m10")
    with pytest.raises(ValueError, match="not a registered format"):
        explorer.parse_format_spec("fp7")
    with pytest.raises(ValueError, match="at most 16 bits"):
        explorer.explorer_data([lp.get_format("fp32")])


def test_explore_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lowprec.cli import main

    out = tmp_path / "page.html"
    assert main(["explore", "--out", str(out), "--format", "e5m6"]) == 0
    assert '"name":"e5m6"' in out.read_text(encoding="utf-8")
    assert main(["explore", "--out", str(out)]) == 2  # never replaced without --force
    assert "--force" in capsys.readouterr().err
    assert main(["explore", "--out", str(out), "--force"]) == 0
    assert main(["explore", "--out", str(tmp_path / "x.html"), "--format", "fp7"]) == 2
    assert "not a registered format" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_explore_serve(tmp_path: Path) -> None:
    import socket
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "lowprec", "explore", "--out",
                             str(tmp_path / "e.html"), "--serve", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        body = b""
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/e.html", timeout=5) as r:
                    body = r.read()
                break
            except OSError:
                time.sleep(0.2)
        assert body == (tmp_path / "e.html").read_bytes()
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
