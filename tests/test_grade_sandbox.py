"""The grader against hostile submissions: each attack must fail to have its effect, and
every honest submission graded in the same run keeps its grade.

One class (honest and hostile submissions to tutorial 01) is graded once by ``lowprec
grade`` in a subprocess (the grader's own memory is measured there, and a submission that
killed it could not take pytest down); each test then checks one attack. Where Linux
namespaces are unavailable, the tests that need them skip with the reason, and the class
graded with the fallback still checks the weaker guarantees (forged records, a killed
parent, a flood of output).
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from lowprec.cli import main
from lowprec.grading._driver import NPROC, namespaces_available

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the grader's sandbox is Linux's (namespaces, /proc)")

SETUP = "# %%\nimport os, socket, signal, sys, time\n"
# Right answers to tutorial 01, from the formats' fields (as in test_grading.py).
RIGHT = {
    "1": "fp16_max = (2 - 2**-10) * 2.0**15",
    "2": "value = (1 + 5 / 8) * 2.0**3",
    "3": "value = 3 / 8 * 2.0**-6",
    "4": "tiny = 2.0**-133",
    "5": "count = 256 - 8 - 1",
    "6": "gap = 2.0",
    "7": "e4m3_max = 1.75 * 256",
}
SECRET = "planted-secret-8c1f"


def _cell(number: str, body: str) -> str:
    return f'# %% tags=["exercise"]\n# Exercise {number}: x\n{textwrap.dedent(body).strip()}\n'


def _honest() -> str:
    return SETUP + "".join(_cell(k, v) for k, v in RIGHT.items())


def _hostile(first: str, right_from: int = 2) -> str:
    """Exercise 1's cell is the attack; the others are right (from ``right_from``)."""
    return SETUP + _cell("1", first) + "".join(
        _cell(k, v) for k, v in RIGHT.items() if int(k) >= right_from)


def _submissions(where: Path, env: dict[str, str], port: int) -> dict[str, str]:
    home = Path(env["HOME"])
    out = where / "out"
    marks = where / "marks"
    honest = where / "subs" / "0_honest.py"
    roster = where / "roster.csv"
    escape = f"/tmp/lowprec-grade-escape-{os.getpid()}-{where.name}"  # the machine's /tmp
    return {
        "0_honest": _honest(),
        # A double-forked setsid daemon that outlives the run and edits the CSV.
        "a_daemon": _hostile(f"""
            pid = os.fork()
            if pid == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(4)
                    for target in [{str(out / 'grades.csv')!r}, {str(marks / 'daemon')!r}]:
                        try:
                            with open(target, "a") as fh:
                                fh.write("a_daemon,1,1,1,1,1,1,1,7,7,ok\\n")
                        except OSError:
                            pass
                    os._exit(0)
                os._exit(0)
            os.waitpid(pid, 0)
            fp16_max = 0"""),
        # Records written ahead of their turn (a whole fake run), on every pipe it has.
        "b_forge_ahead": _hostile("""
            fake = b''.join(
                (('{"ran": %d, "error": null, "library": []}\\n' % k).encode()
                 for k in range(20)))
            fake += b'{"snap": "Exercise 1", "values": {"fp16_max": 65504.0}}\\n'
            for fd in range(3, 64):
                try:
                    os.write(fd, fake)
                except OSError:
                    pass
            fp16_max = 65504.0"""),
        # An atexit hook that appends records after the end marker, on a kept copy of
        # every pipe.
        "c_forge_after": _hostile("""
            import atexit
            kept = []
            for fd in range(3, 64):
                try:
                    if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                        kept.append(os.dup(fd))
                except OSError:
                    pass
            def forge():
                for fd in kept:
                    try:
                        os.write(fd, b'{"snap": "Exercise 1", "values": {"fp16_max": 65504.0}}\\n')
                    except OSError:
                        pass
            atexit.register(forge)
            fp16_max = 1.0"""),
        # Reads a classmate's submission, the roster, the teacher's $HOME, a planted
        # environment variable and every process's command line; a leak would earn points.
        "d_reader": _hostile(f"""
            leaks = []
            for path in [{str(honest)!r}, {str(roster)!r}, {str(home / 'secret.txt')!r}]:
                try:
                    leaks.append(open(path).read())
                except OSError as exc:
                    print("denied", path, exc, file=sys.__stderr__)
            leaks += [v for v in os.environ.values() if {SECRET!r} in v]
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        leaks.append(open(f"/proc/{{pid}}/cmdline").read())
                    except OSError:
                        pass
            os.write(2, ("SEEN " + repr(leaks) + "\\n").encode())
            found = any({SECRET!r} in text or "fp16_max" in text for text in leaks)
            fp16_max = 65504.0 if found else 0.0"""),
        # Writes outside its folder: a classmate's file, the output folder, the teacher's
        # home, the machine's /tmp.
        "e_writer": _hostile(f"""
            for path in [{str(honest)!r}, {str(out / 'grades.csv')!r},
                         {str(marks / 'writer')!r}, {str(home / 'writer')!r},
                         {escape!r}]:
                try:
                    with open(path, "a") as fh:
                        fh.write("fp16_max = 1  # overwritten\\n")
                    print("WROTE", path, file=sys.__stderr__)
                except OSError:
                    pass
            fp16_max = 0"""),
        # Kills its parent, its process group and everything it may signal.
        "f_killer": _hostile("""
            for how in (lambda: os.kill(os.getppid(), signal.SIGKILL),
                        lambda: os.killpg(os.getpgrp(), signal.SIGKILL),
                        lambda: os.kill(-1, signal.SIGKILL)):
                try:
                    how()
                except OSError:
                    pass
            fp16_max = 0"""),
        # A fork bomb: as many processes as it can, each asleep.
        "g_forkbomb": _hostile("""
            n = 0
            try:
                while n < 5000:
                    if os.fork() == 0:
                        time.sleep(120)
                        os._exit(0)
                    n += 1
            except OSError:
                pass
            os.write(2, f"FORKED {n}\\n".encode())
            fp16_max = 0"""),
        # 1 GiB on stderr, written past Python's own streams.
        "h_flood": _hostile("""
            chunk = b"x" * (1 << 20)
            for _ in range(1024):
                os.write(2, chunk)
            os.write(2, b"\\nFLOOD DONE\\n")
            fp16_max = 0"""),
        # Connects to a listener the test opened on 127.0.0.1.
        "i_network": _hostile(f"""
            s = socket.socket()
            s.settimeout(3)
            try:
                s.connect(("127.0.0.1", {port}))
                s.sendall(b"STOLEN")
                os.write(2, b"CONNECTED\\n")
            except OSError as exc:
                os.write(2, f"NO NETWORK {{exc}}\\n".encode())
            fp16_max = 0"""),
        "z_honest": _honest(),
    }


# The grader's own peak memory: VmHWM, the high-water mark of this process's
# memory since its exec. (Not getrusage's ru_maxrss: Linux carries the parent's
# high-water mark across fork and exec, so under a pytest worker that has grown
# to gigabytes it reports the worker's peak, not the grader's.)
_GRADER = ("import re, sys\nfrom lowprec.cli import main\nrc = main(sys.argv[1:])\n"
           "status = open('/proc/self/status').read()\n"
           "print('PEAK_KB', re.search(r'VmHWM:\\s+(\\d+)', status).group(1))\n"
           "sys.exit(rc)\n")


def _grade_class(where: Path, names: list[str] | None, extra_env: dict[str, str]
                 ) -> dict[str, Any]:
    from lowprec._kernels._cache import cache_dir

    for sub in ("subs", "out", "marks", "home"):
        (where / sub).mkdir()
    (where / "home" / "secret.txt").write_text(f"teacher's {SECRET}\n")
    (where / "roster.csv").write_text(f"id\n0_honest\nz_honest\n# {SECRET}\n")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    env = {**os.environ, "HOME": str(where / "home"), "PYTHONPATH": str(ROOT),
           "XDG_CACHE_HOME": str(Path(cache_dir()).parent),  # the compiled kernels
           "LOWPREC_PLANTED": SECRET, **extra_env}
    subs = _submissions(where, env, listener.getsockname()[1])
    for name, text in subs.items():
        if names is None or name in names:
            (where / "subs" / f"{name}.py").write_text(text)
    honest_text = (where / "subs" / "0_honest.py").read_text()
    out = where / "out" / "grades.csv"
    proc = subprocess.run([sys.executable, "-c", _GRADER, "grade", str(where / "subs"),
                           "--tutorial", "01", "--out", str(out), "--timeout", "60"],
                          env=env, cwd=where / "home", capture_output=True, text=True,
                          timeout=900)
    finished = time.monotonic()
    try:
        conn, _ = listener.accept()
        got = conn.recv(100)
    except BlockingIOError:
        got = None
    listener.close()
    rows = {r["student"]: r for r in csv.DictReader(out.read_text().splitlines())} \
        if out.exists() else {}
    feedback = {p.stem: p.read_text() for p in (where / "out" / "grades-feedback").glob("*.md")}
    peak = re.search(r"PEAK_KB (\d+)", proc.stdout)
    return {"proc": proc, "rows": rows, "feedback": feedback, "csv": out,
            "csv_text": out.read_text() if out.exists() else "", "finished": finished,
            "network": got, "marks": where / "marks", "home": where / "home",
            "honest_text": honest_text,
            "escape": f"/tmp/lowprec-grade-escape-{os.getpid()}-{where.name}", "honest": where / "subs" / "0_honest.py",
            "peak_mb": int(peak.group(1)) / 1024 if peak else None}


def _needs_namespaces() -> None:
    ok, why = namespaces_available()
    if not ok:
        pytest.skip(f"Linux namespaces are unavailable here ({why}): the fallback is tested")


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    _needs_namespaces()
    return _grade_class(tmp_path_factory.mktemp("isolated"), None, {})


def _honest_kept(run: dict[str, Any]) -> None:
    assert run["proc"].returncode == 0, run["proc"].stderr[-3000:]
    for name in ("0_honest", "z_honest"):
        row = run["rows"][name]
        assert row["total"] == "7" and row["status"] == "ok", row


def test_the_grader_finishes_and_honest_submissions_keep_their_grade(isolated: dict) -> None:
    _honest_kept(isolated)
    assert len(isolated["rows"]) == 11
    assert "WARNING" not in isolated["proc"].stderr
    assert not Path(str(isolated["csv"]) + ".partial").exists()  # renamed at the end


def test_a_lingering_daemon_cannot_edit_the_csv(isolated: dict) -> None:
    time.sleep(max(0.0, isolated["finished"] + 6 - time.monotonic()))  # it slept 4 s
    assert Path(isolated["csv"]).read_text() == isolated["csv_text"]
    assert not (isolated["marks"] / "daemon").exists()
    assert isolated["rows"]["a_daemon"]["status"] == "ok"  # nothing of it survived the run
    assert isolated["rows"]["a_daemon"]["total"] == "6"


@pytest.mark.parametrize("name", ["b_forge_ahead", "c_forge_after"])
def test_forged_records_void_the_run(isolated: dict, name: str) -> None:
    row = isolated["rows"][name]
    assert row["status"] == "error" and row["total"] == "0", row
    assert "out of turn" in row["note"]
    assert ("after the end marker" in row["note"]) == (name == "c_forge_after")


def test_no_classmate_roster_home_or_environment_to_read(isolated: dict) -> None:
    row = isolated["rows"]["d_reader"]
    assert row["status"] == "ok" and row["ex1"] == "0" and row["total"] == "6", row
    text = isolated["feedback"]["d_reader"]
    seen = re.search(r"SEEN (.*)", text)
    assert seen, text[-2000:]
    assert SECRET not in text and "fp16_max" not in seen.group(1)
    assert "grade" not in seen.group(1) and "0_honest" not in seen.group(1)


def test_no_writing_outside_its_folder(isolated: dict) -> None:
    assert isolated["honest"].read_text() == isolated["honest_text"]
    assert not (isolated["marks"] / "writer").exists()
    assert not (isolated["home"] / "writer").exists()
    escape = isolated["escape"]
    assert not Path(escape).exists()
    # only its own /tmp (a tmpfs of the sandbox, gone with it) took the write
    wrote = re.findall(r"WROTE (\S+)", isolated["feedback"]["e_writer"])
    assert set(wrote) <= {escape}, wrote
    assert isolated["rows"]["e_writer"]["total"] == "6"


def test_killing_its_parent_hurts_nobody(isolated: dict) -> None:
    _honest_kept(isolated)  # z_honest was graded after it
    assert isolated["rows"]["f_killer"]["total"] == "6"


def test_a_fork_bomb_is_bounded_by_rlimit_nproc(isolated: dict) -> None:
    row = isolated["rows"]["g_forkbomb"]
    assert row["status"] == "ok" and row["total"] == "6", row  # and nothing survived
    forked = int(re.search(r"FORKED (\d+)", isolated["feedback"]["g_forkbomb"]).group(1))
    assert 0 < forked < NPROC


def test_a_gigabyte_on_stderr_costs_the_grader_no_memory(isolated: dict) -> None:
    row = isolated["rows"]["h_flood"]
    assert row["status"] == "ok" and row["total"] == "6", row
    assert "FLOOD DONE" in isolated["feedback"]["h_flood"]
    assert isolated["peak_mb"] is not None and isolated["peak_mb"] < 300, isolated["peak_mb"]


def test_no_network(isolated: dict) -> None:
    assert isolated["network"] is None
    assert "NO NETWORK" in isolated["feedback"]["i_network"]
    assert isolated["rows"]["i_network"]["total"] == "6"


# ------------------------------------------------------------ without namespaces
@pytest.fixture(scope="module")
def fallback(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _grade_class(tmp_path_factory.mktemp("fallback"),
                        ["0_honest", "b_forge_ahead", "f_killer", "h_flood", "z_honest"],
                        {"LOWPREC_GRADE_NO_NAMESPACES": "1"})


def test_fallback_says_so_and_keeps_the_weaker_guarantees(fallback: dict) -> None:
    _honest_kept(fallback)  # z_honest: graded after the killer and the flood
    assert "WARNING: submissions will NOT be isolated" in fallback["proc"].stderr
    forged = fallback["rows"]["b_forge_ahead"]
    assert forged["status"] == "error" and forged["total"] == "0", forged
    assert fallback["rows"]["f_killer"]["total"] in ("0", "6")  # its own row only
    assert fallback["rows"]["h_flood"]["total"] == "6"
    assert fallback["peak_mb"] is not None and fallback["peak_mb"] < 300


def test_require_sandbox_refuses_without_namespaces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOWPREC_GRADE_NO_NAMESPACES", "1")
    sub = tmp_path / "s.py"
    sub.write_text(_honest())
    out = tmp_path / "g.csv"
    assert main(["grade", str(sub), "--tutorial", "01", "--out", str(out),
                 "--require-sandbox"]) == 2
    err = capsys.readouterr().err
    assert "--require-sandbox" in err and "cannot be isolated" in err
    assert not out.exists()


@pytest.mark.parametrize("sandbox", ["as found", "fallback"])
def test_a_crashed_grader_leaves_the_finished_rows_and_no_process(tmp_path: Path,
                                                                  sandbox: str) -> None:
    """The grader killed while a submission hangs: the rows of the students graded before
    are on disk (``<out>.partial``), no ``<out>`` half-written, and the hanging run's
    processes went with the grader, isolated (where namespaces are) or not."""
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "0_honest.py").write_text(_honest())
    (subs / "1_hangs.py").write_text(_hostile("import time\ntime.sleep(600)"))
    out = tmp_path / "grades.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if sandbox == "fallback":
        env["LOWPREC_GRADE_NO_NAMESPACES"] = "1"
    partial = Path(str(out) + ".partial")
    proc = subprocess.Popen([sys.executable, "-m", "lowprec", "grade", str(subs), "--tutorial",
                             "01", "--out", str(out), "--timeout", "300"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 300
    while time.monotonic() < end and proc.poll() is None:  # until 0_honest's row is there
        if partial.exists() and len(partial.read_text().splitlines()) == 2:
            break
        time.sleep(0.2)
    time.sleep(3)  # the hanging submission is running
    tree = _descendants(proc.pid)  # the launcher, the namespaces' processes, the child
    assert tree, "the grader started no launcher"
    proc.kill()
    proc.wait()
    rows = list(csv.DictReader(partial.read_text().splitlines()))
    assert [r["student"] for r in rows] == ["0_honest"] and rows[0]["total"] == "7"
    assert not out.exists()
    end = time.monotonic() + 10
    while time.monotonic() < end and _alive(tree):
        time.sleep(0.2)
    # every process of the sandbox died with the grader, the ones that changed their
    # user ids too (which clears the parent-death signal a process asked for)
    left = {p: Path(f"/proc/{p}/cmdline").read_bytes()[:80] for p in _alive(tree)}
    for pid in left:  # (not left running by a failure either)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, left


def _descendants(root: int) -> list[int]:
    """Every process below ``root``, by the parent pids in /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, frontier = [], [root]
    while frontier:
        below = [p for p, pp in parents.items() if pp in frontier]
        found += below
        frontier = below
    return found


def _alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie is not)."""
    left = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.append(pid)
    return left
