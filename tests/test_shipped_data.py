"""The reference-data subset in tests/data: what scripts/subset_shared_data.py selects,
with its licences and README, and a selection that keeps the rare cases."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import pytest
from _shared_data import SHIPPED, SOURCES, data_dir, full_set_missing, missing, shared_root

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location(
        "subset_shared_data", ROOT / "scripts" / "subset_shared_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lines(path: Path) -> list[str]:
    with gzip.open(path, "rt") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def test_the_subset_is_small_and_carries_its_licences():
    files = [p for p in SHIPPED.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 3_000_000
    assert (SHIPPED / "README.md").is_file()
    assert "Regents of the" in (SHIPPED / "testfloat" / "COPYING.txt").read_text()
    assert "Khattak and Mantas Mikaitis" in (SHIPPED / "tensorcores" / "LICENCE").read_text()
    # Every operation x mode of TestFloat, every GPU x format folder of the measurements.
    assert len(list((SHIPPED / "testfloat").glob("*.txt.gz"))) == 9 * 6
    assert len(list((SHIPPED / "tensorcores").glob("*/*/*.txt.gz"))) == 87


def _full_sets() -> Path:
    shared = shared_root()
    if not (shared / "testfloat").is_dir() or not (shared / "tensorcores").is_dir():
        pytest.skip(full_set_missing("testfloat", "tensorcores"))
    return shared


@pytest.mark.slow
def test_the_subset_is_what_the_script_selects(script):
    """Byte for byte: every committed file is a fresh selection from the full sets
    (every line of the full sets is read and classified: 8 s alone, 30 s
    on the loaded 2-core machine)."""
    fresh = script.build(_full_sets(), lines=2000, stride=10)
    stale = [rel for rel, data in fresh.items() if (SHIPPED / rel).read_bytes() != data]
    assert stale == [], "run python scripts/subset_shared_data.py"


@pytest.mark.parametrize("name", ["f16_div.rup", "f32_to_bf16.rtz", "f16_sqrt.odd"])
def test_testfloat_files_are_the_selection(script, name):
    """The same for one file of each kind, in CI: the lines of the full file that the
    selection keeps, in the file's order."""
    full = _lines(_full_sets() / "testfloat" / f"{name}.txt.gz")
    sub = _lines(SHIPPED / "testfloat" / f"{name}.txt.gz")
    budget = len(full) if name.startswith("f16_sqrt") else 2000
    assert sub == script.select_testfloat(full, budget, bf16_result="bf16" in name)
    it = iter(full)
    assert all(line in it for line in sub)


def test_tensorcore_files_are_every_tenth_line():
    folder = Path("H100") / "E4M3"
    full_dir = _full_sets() / "tensorcores" / folder
    for path in sorted(full_dir.glob("*.txt.gz")):
        assert _lines(SHIPPED / "tensorcores" / folder / path.name) == _lines(path)[::10]


def test_selection_keeps_every_stratum_and_the_budget(script):
    # 10,000 distinct sums of normal numbers, flags 00 or 01 (the values do not matter).
    common = [f"{0x3C00 + i % 1000:04X} {0x3C00 + i // 1000:04X} 4000 {i % 2:02X}"
              for i in range(10_000)]
    rare = ["7BFF 7BFF 7C00 05", "0001 8001 0000 00", "7C01 3C00 7E00 10"]
    lines = common[:5000] + rare + common[5000:]
    keep = script.select_testfloat(lines, 200, bf16_result=False)
    assert set(rare) <= set(keep)
    assert len(keep) <= 200
    assert keep == [line for line in lines if line in set(keep)]  # the file's order
    assert script.select_testfloat(lines, 200, bf16_result=False) == keep  # deterministic
    assert script.select_testfloat(rare, 200, bf16_result=False) == rare  # small: all


def test_value_classes(script):
    assert [script.value_class(t) for t in ("7C00", "7E00", "8000", "0001", "3C00")] == [
        "inf", "nan", "zero", "sub", "normal"]
    assert script.value_class("7F80", bf16=True) == "inf"
    assert script.value_class("7F800001") == "nan"
    assert script.value_class("0000000000000001") == "sub"


def test_skips_name_where_the_full_data_comes_from(monkeypatch, tmp_path):
    monkeypatch.setenv("LOWPREC_SHARED", str(tmp_path))
    assert data_dir("testfloat") == (SHIPPED / "testfloat", False)
    (tmp_path / "tensorcores").mkdir()
    assert data_dir("tensorcores") == (tmp_path / "tensorcores", True)
    for kind in SOURCES:
        text = missing(tmp_path / kind / "x.txt.gz")
        assert "LOWPREC_SHARED" in text and f"tests/data/{kind}" in text
        assert SOURCES[kind] in text
    assert "jhauser.us" in SOURCES["testfloat"]
    assert "MATLAB-tensor-core" in SOURCES["tensorcores"]
    both = full_set_missing("testfloat", "tensorcores")
    assert str(tmp_path) in both and SOURCES["testfloat"] in both
    assert SOURCES["tensorcores"] in both
