"""``lowprec inspect FILE``: table, CSV, figures, --recommend, and clear errors."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from lowprec import inspect
from lowprec.cli import main


@pytest.fixture()
def npz(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "model.npz"
    np.savez(path, **{"fc1/weight": (rng.standard_normal((16, 64)) * 0.1).astype(np.float32),
                      "fc1/weight_grad": (rng.standard_normal((16, 64)) * 1e-6).astype(
                          np.float32),
                      "num_batches": np.arange(3)})
    return path


def test_inspect_writes_what_report_computes(npz, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["inspect", str(npz), "--out", str(out), "--recipes", "fp16,fp8_e4m3,mxfp4",
            "--recommend"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    with np.load(npz) as d:
        tensors = {k: d[k] for k in ("fc1/weight", "fc1/weight_grad")}
    rep = inspect.report(tensors, ["fp16", "fp8_e4m3", "mxfp4"])
    with (out / "report.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["tensor"], r["recipe"], int(r["underflow"])) for r in rows] == [
        (r["tensor"], r["recipe"], r["underflow"]) for r in rep.rows]
    for name in ("heatmap.png", "histograms.png", "report.json", "recommendation.txt"):
        assert (out / name).stat().st_size > 100
    assert "skipped num_batches (int64)" in text
    assert str(rep.recommend()) in text
    assert f"output folder: {out}/" in text


def test_inspect_refuses_a_non_empty_folder_without_force(npz, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert main(["inspect", str(npz), "--out", str(out), "--recipes", "fp16"]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "keep me" and len(list(out.iterdir())) == 1
    assert main(["inspect", str(npz), "--out", str(out), "--recipes", "fp16", "--force"]) == 0
    assert (out / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("args, message", [
    (["--recipes", "fp16,mxfp3"], "unknown scheme 'mxfp3'"),
    (["--max-underflow", "5"], "--max-underflow"),
])
def test_inspect_bad_arguments(npz, tmp_path, capsys, args, message):
    out = tmp_path / "never"
    assert main(["inspect", str(npz), "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_inspect_bad_files(tmp_path, capsys):
    missing = tmp_path / "missing.npz"
    assert main(["inspect", str(missing), "--out", str(tmp_path / "o1")]) == 2
    assert "does not exist" in capsys.readouterr().err
    txt = tmp_path / "w.txt"
    txt.write_text("1 2 3")
    assert main(["inspect", str(txt), "--out", str(tmp_path / "o2")]) == 2
    assert ".npz" in capsys.readouterr().err
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip file")
    assert main(["inspect", str(broken), "--out", str(tmp_path / "o3")]) == 2
    err = capsys.readouterr().err
    assert "could not be read" in err and "Traceback" not in err
    ints = tmp_path / "ints.npz"
    np.savez(ints, a=np.arange(4))
    assert main(["inspect", str(ints), "--out", str(tmp_path / "o4")]) == 2
    assert "no floating-point tensors" in capsys.readouterr().err


def test_inspect_reads_a_torch_state_dict(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.BatchNorm1d(32))
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    assert main(["inspect", str(path), "--out", str(tmp_path / "o"), "--recipes", "bf16"]) == 0
    text = capsys.readouterr().out
    assert "0.weight" in text and "skipped 1.num_batches_tracked (torch.int64)" in text


def test_list_recipes(capsys):
    assert main(["inspect", "--list-recipes"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in inspect.RECIPES)
