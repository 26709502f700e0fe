"""`lowprec demo` and `lowprec train` from the command line; output folders are safe."""

from __future__ import annotations

import pytest

from lowprec.cli import main
from lowprec.demo import choose_out_dir
from lowprec.train import load_run


def test_train_subcommand_writes_a_run(tmp_path, capsys):
    pytest.importorskip("sklearn")
    out = tmp_path / "runs"
    rc = main(["train", "--policy", "fp16-amp", "--task", "digits", "--steps", "30",
               "--seed", "1", "--out", str(out)])
    assert rc == 0
    r = load_run(out / "fp16-amp")
    assert (r.policy, r.task, r.steps, r.seed) == ("fp16-amp", "digits", 30, 1)
    assert "fp16-amp" in capsys.readouterr().out


def test_demo_runs_and_prints_the_table(tmp_path, capsys):
    out = tmp_path / "demo"
    rc = main(["demo", "--steps", "20", "--policies", "fp32,fp16-naive", "--out", str(out),
               "--no-figures"])
    assert rc == 0
    text = capsys.readouterr()
    assert "grads underflowed %" in text.out and "fp16-naive" in text.out
    assert "fp32" in text.err  # the progress bar goes to stderr
    assert load_run(out / "fp16-naive").steps == 20
    # a second demo into the same folder needs --force, and is refused before training
    again = ["demo", "--steps", "5", "--policies", "fp32", "--out", str(out), "--no-figures"]
    assert main(again) == 2
    text = capsys.readouterr()
    assert "not empty; pass --force" in text.err and "fp32" not in text.err
    assert load_run(out / "fp32").steps == 20  # untouched
    assert main([*again, "--force"]) == 0
    assert load_run(out / "fp32").steps == 5


def test_demo_refuses_a_users_folder(tmp_path, capsys):
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("precious")
    rc = main(["demo", "--steps", "5", "--policies", "fp32", "--out", str(mine)])
    assert rc == 2
    assert "is not empty; pass --force" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["chapter1.tex"]


def test_default_folder_is_fresh_when_taken(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert str(choose_out_dir(None)) == "lowprec-demo"
    assert str(choose_out_dir(None)) == "lowprec-demo"  # still empty: used again
    (tmp_path / "lowprec-demo" / "notes.txt").write_text("someone else's")
    assert str(choose_out_dir(None)) == "lowprec-demo-2"
    assert (tmp_path / "lowprec-demo-2").is_dir()


def test_unknown_policy_is_rejected(capsys):
    assert main(["train", "--policy", "fp16"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'fp16' (did you mean fp16-amp or fp16-naive?)" in err


def test_train_refuses_an_existing_folder_before_training(tmp_path, capsys):
    mine = tmp_path / "runs"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert main(["train", "--steps", "5", "--out", str(mine)]) == 2
    text = capsys.readouterr()
    assert "not empty; pass --force" in text.err
    assert "fp16-amp" not in text.err and text.out == ""  # no progress bar: no training ran
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert main(["train", "--steps", "5", "--out", str(mine), "--force"]) == 0
    assert load_run(mine / "fp16-amp").steps == 5
    assert (mine / "notes.txt").read_text() == "mine"
