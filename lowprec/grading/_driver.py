"""The grader's side of one submission's run: start it isolated, drive it, end it.

:func:`run_cells` starts the launcher (:mod:`lowprec.grading._sandbox`, which isolates the
submission with Linux namespaces where it can) and drives the child
(:mod:`lowprec.grading._child`) in lock-step: one command, then exactly one answer line,
checked against the command (its kind and its cell or exercise). The grader decides what
counts:

* an answer that does not match the command -- a record written ahead of its turn, a
  duplicate, a line that is not JSON, anything written after ``done`` -- voids the whole
  run (status ``error``, no points): a submission cannot slip in records of its own;
* whether a cell raised and whether a by-hand exercise's cell imported lowprec are the
  grader's records (from the answers to its own ``run`` commands, and its own reading of
  the cell's source), not something the submission writes;
* output (fd 1 and 2) is read as it comes and only the last :data:`TAIL` bytes kept, so a
  submission printing gigabytes costs the grader no memory; an answer line longer than
  :data:`MAX_RECORD` is an error;
* at the end the whole session of the launcher is killed and the grader checks that no
  process of the submission's pid namespace is left (killing and reporting any it finds).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._child import library_uses

__all__ = ["Outcome", "namespaces_available", "run_cells"]

TAIL = 64 * 1024  #: bytes of the submission's output kept (the last ones)
MAX_RECORD = 16 * 2**20  #: the longest answer line accepted
NPROC, NOFILE = 64, 256  #: processes and open files per submission
DISK_MB = 256  #: the submission's writable tmpfs (and its largest file)
_SYSTEM = ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin", "/etc")
#: The launcher runs as a plain script: importing the lowprec package would start numba's
#: and BLAS's threads, and a threaded process cannot enter a new user namespace.
_LAUNCHER = (sys.executable, "-I", "-S", str(Path(__file__).with_name("_sandbox.py")))


class Violation(Exception):
    """The submission wrote to the answer channel out of turn."""


@dataclass
class Outcome:
    """What one run gave the grader."""

    records: list[dict[str, Any]] = field(default_factory=list)
    status: str = "ok"  #: ok, timeout, memory, crashed, error
    note: str = ""
    seconds: float = 0.0
    output: str = ""  #: the last TAIL bytes of the submission's stdout and stderr
    sandbox: str = ""  #: isolated, fallback (why), or failed: why
    returncode: int | None = None
    running: str = ""  #: the cell being run when the run stopped


def _package_root() -> Path:
    import lowprec

    return Path(lowprec.__file__).resolve().parent


def _covered(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _python_binds() -> list[str]:
    """The folders the Python running the grader needs (prefixes, site-packages)."""
    found: list[str] = []
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  str(Path(os.path.realpath(sys.executable)).parent.parent),
                  *(p for p in sys.path if p.rstrip("/").endswith(("site-packages",
                                                                   "dist-packages")))]
    for path in sorted({os.path.realpath(p) for p in candidates if os.path.isdir(p)}, key=len):
        if not _covered(path, found) and not _covered(path, list(_SYSTEM)):
            found.append(path)
    return found


def _world_traversable(path: str) -> bool:
    """Whether ``nobody`` can reach ``path`` (every folder above it searchable by others)."""
    p = Path(os.path.realpath(path))
    return all(os.stat(q).st_mode & stat.S_IXOTH for q in [*reversed(p.parents), p]
               if q.is_dir())


def _kernel_cache() -> str | None:
    """The teacher's compiled kernels (``lowprec warmup`` fills it), if any."""
    from .._kernels._cache import cache_dir

    return cache_dir() if os.path.isdir(cache_dir()) else None


def _kernel_dirs(cache: str | None) -> list[str]:
    """The folders of the cache that hold this lowprec's kernels (numba names them after
    the source folder: its name and the SHA-1 of its path)."""
    import hashlib

    if cache is None:
        return []
    found = []
    for dirpath, dirnames, _files in os.walk(_package_root()):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        name = f"{os.path.basename(dirpath)}_{hashlib.sha1(dirpath.encode()).hexdigest()}"
        if os.path.isdir(os.path.join(cache, name)):
            found.append(name)
    return found


def _env(home: str, pythonpath: str, cache: str) -> dict[str, str]:
    """The submission's whole environment: nothing of the teacher's."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "USER": "student",
            "LANG": "C.UTF-8", "TMPDIR": "/tmp", "PYTHONPATH": pythonpath,
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": home + "/.config/matplotlib", "XDG_CACHE_HOME": cache,
            "LOWPREC_TUTORIAL_OUT": home + "/figures"}


def launcher_config(*, isolate: bool, require: bool, workdir: str, probe: bool = False,
                    why: str = "", kernels: str | None = None) -> dict[str, Any]:
    """The launcher's CONFIG (see :mod:`lowprec.grading._sandbox`)."""
    package = _package_root()
    binds = [(p, p) for p in (*_SYSTEM, *_python_binds())
             if os.path.exists(p) and not os.path.islink(p)]
    links = [(p, os.readlink(p)) for p in _SYSTEM if os.path.islink(p)]
    # At its own path: numba's cache of compiled kernels is keyed by the source's path.
    binds.append((str(package), str(package)))
    cfg: dict[str, Any] = {
        "isolate": isolate, "require": require, "probe": probe, "why": why,
        "binds": binds, "links": links, "mountpoint": "/tmp", "disk_mb": DISK_MB,
        "kernels": kernels, "kernel_dirs": _kernel_dirs(kernels), "python": sys.executable, "workdir": workdir,
        "nproc": NPROC, "nofile": NOFILE, "fsize": DISK_MB * 2**20,
        "drop_root": os.geteuid() == 0 and all(
            _world_traversable(p) for p in (sys.executable, str(package), workdir)),
    }
    if isolate:
        cfg["env"] = _env("/home/student", str(package.parent), "/home/student/.cache")
    else:  # the fallback: the teacher's own cache (the submission could write it anyway)
        cfg["env"] = _env(workdir, str(package.parent),
                          str(Path(kernels).parent) if kernels else workdir + "/.cache")
    return cfg


def namespaces_available() -> tuple[bool, str]:
    """Whether submissions can be isolated here (a real trial of the launcher, once per
    process), and why not.

    ``LOWPREC_GRADE_NO_NAMESPACES=1`` answers no (to try the fallback on a machine that has
    namespaces)."""
    if os.environ.get("LOWPREC_GRADE_NO_NAMESPACES") == "1":
        return False, "LOWPREC_GRADE_NO_NAMESPACES=1 is set"
    return _trial()


@functools.cache
def _trial() -> tuple[bool, str]:
    if not sys.platform.startswith("linux"):
        return False, f"Linux namespaces do not exist on {sys.platform}"
    cfg = launcher_config(isolate=True, require=True, workdir="/", probe=True)
    r, w = os.pipe()
    try:
        cfg["answer_fd"] = w
        proc = subprocess.run([*_LAUNCHER, json.dumps(cfg)], pass_fds=(w,), stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the trial run failed: {exc}"
    finally:
        os.close(w)
    with os.fdopen(r, "rb") as fh:
        first = fh.readline().decode(errors="replace").strip()
    try:
        record = json.loads(first)
    except ValueError:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return False, f"the trial run gave no answer ({tail[0] if tail else proc.returncode})"
    if record.get("sandbox") != "isolated":
        return False, str(record.get("sandbox", "unknown")).removeprefix("failed: ")
    return True, ""


class _Channel:
    """The running launcher: send commands, read answers line by line, keep output tails."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        cmd_r, self.cmd_w = os.pipe()
        self.ans_r, ans_w = os.pipe()
        out_r, out_w = os.pipe()

        cfg = {**cfg, "answer_fd": ans_w}  # the launcher moves it to fd 3
        self.proc = subprocess.Popen(
            [*_LAUNCHER, json.dumps(cfg)],
            stdin=cmd_r, stdout=out_w, stderr=out_w, pass_fds=(ans_w,),
            start_new_session=True, cwd="/")
        for fd in (cmd_r, ans_w, out_w):
            os.close(fd)
        self.out_r = out_r
        os.set_blocking(self.ans_r, False)
        os.set_blocking(out_r, False)
        self.buffer = b""
        self.tail = bytearray()
        self.open = {self.ans_r, out_r}

    def send(self, command: dict[str, Any]) -> bool:
        """Write one command line; False when the child no longer reads."""
        data = (json.dumps(command) + "\n").encode()
        try:
            while data:
                n = os.write(self.cmd_w, data)
                data = data[n:]
        except (BrokenPipeError, OSError):
            return False
        return True

    def _pump(self, timeout: float) -> None:
        ready, _, _ = select.select(list(self.open), [], [], max(0.0, timeout))
        for fd in ready:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                self.open.discard(fd)
            elif fd == self.out_r:
                self.tail += chunk
                del self.tail[:-TAIL]
            else:
                self.buffer += chunk
                if len(self.buffer) > MAX_RECORD and b"\n" not in self.buffer:
                    raise Violation(f"an answer line longer than {MAX_RECORD >> 20} MiB")

    def line(self, deadline: float) -> bytes | None:
        """The next answer line; None at end of channel; TimeoutError past the deadline."""
        while b"\n" not in self.buffer:
            if self.ans_r not in self.open:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self._pump(min(left, 1.0))
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def finish(self, seconds: float) -> None:
        """Drain the output for up to ``seconds`` (the output pipe closes at exit)."""
        end = time.monotonic() + seconds
        while self.open and time.monotonic() < end:
            with contextlib.suppress(Violation):
                self._pump(end - time.monotonic())

    def close(self) -> None:
        for fd in (self.cmd_w, self.ans_r, self.out_r):
            with contextlib.suppress(OSError):
                os.close(fd)


def _expect(channel: _Channel, deadline: float, key: str, value: Any) -> dict[str, Any] | None:
    raw = channel.line(deadline)
    if raw is None:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        raise Violation("a line that is not a record") from None
    if not isinstance(record, dict) or record.get(key) != value:
        raise Violation(f"a record out of turn (expected {key}={value!r})")
    return record


def _pidns_members(inode: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}/ns/pid").st_ino == inode:
                    found.append(int(entry))
    return found


def _session_members(sid: int) -> list[int]:
    found = []
    for entry in (os.listdir("/proc") if os.path.isdir("/proc") else []):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[3]) == sid or int(fields[2]) == sid:  # session or group
                    found.append(int(entry))
    return found


def _end(channel: _Channel, pidns: int | None, sid: int | None) -> list[int]:
    """Kill the launcher's session and every process of the sandbox; those that survived."""
    proc = channel.proc
    if channel.ans_r not in channel.open:  # the child is gone: let the launcher end (its
        with contextlib.suppress(subprocess.TimeoutExpired):  # status; the fallback's
            proc.wait(timeout=5)  # launcher kills the orphans it adopted)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    sessions = [s for s in (proc.pid, sid) if s]
    members = (lambda: _pidns_members(pidns)) if pidns else (lambda: [
        p for s in sessions for p in _session_members(s) if p != os.getpid()])
    for _ in range(50):
        left = members()
        if not left:
            return []
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    return members()


def run_cells(cells: list[dict[str, Any]], exercises: list[Any], timeout: float,
              memory_mb: int, *, isolate: bool | None = None,
              require: bool = False) -> Outcome:
    """Run ``cells`` (see :func:`lowprec.grading.run.read_submission`) isolated; the
    exercise records (``exercise``, ``values``, ``unreadable``, ``cell_error``,
    ``library``) in the grader's order, and how the run went."""
    if isolate is None:
        isolate, why = namespaces_available()
    else:
        why = "" if isolate else "isolation was turned off"
    out = Outcome()
    by_label = {e.label: e for e in exercises}
    with tempfile.TemporaryDirectory(prefix="lowprec-grade-") as tmp:
        workdir = os.path.join(tmp, "work")
        os.mkdir(workdir)
        cfg = launcher_config(isolate=isolate, require=require, workdir=workdir, why=why,
                              kernels=_kernel_cache())
        os.chmod(tmp, 0o755)
        if cfg["drop_root"]:
            for dirpath, _dirs, files in os.walk(workdir):
                for name in [dirpath, *(os.path.join(dirpath, f) for f in files)]:
                    os.chown(name, 65534, 65534)
        start = time.monotonic()
        deadline = start + timeout + 10
        channel = _Channel(cfg)
        pidns: int | None = None
        sid: int | None = None
        try:
            first = channel.line(deadline)
            try:
                hello = json.loads(first) if first else {"sandbox": "failed: no answer"}
            except ValueError:
                hello = {"sandbox": "failed: an unreadable first record"}
            out.sandbox = str(hello.get("sandbox"))
            if out.sandbox == "fallback":
                out.sandbox += f" ({hello.get('why', '')})"
            ids = [hello.get(k) for k in ("pidns", "sid")]  # the launcher's, before any code
            pidns, sid = (int(v) if isinstance(v, int) else None for v in ids)
            if not out.sandbox.startswith(("isolated", "fallback")):
                out.status, out.note = "error", f"the sandbox could not start: {out.sandbox}"
            else:
                _drive(channel, cells, by_label, timeout, memory_mb, deadline, out)
        except Violation as exc:
            out.status = "error"
            out.note = (f"error: the submission wrote to the grader's answer channel out of "
                        f"turn ({exc}); forged records void the run")
            out.records = []
        except TimeoutError:
            out.status = "timeout"
        channel.finish(0.5 if out.status == "ok" else 0.0)
        survivors = _end(channel, pidns, sid)
        channel.finish(0.2)
        channel.close()
        out.seconds = time.monotonic() - start
        out.returncode = channel.proc.returncode
        out.output = channel.tail.decode(errors="replace")
    if survivors:
        out.status = "error"
        out.note = f"error: {len(survivors)} process(es) of the submission could not be killed"
    return out


def _drive(channel: _Channel, cells: list[dict[str, Any]], by_label: dict[str, Any],
           timeout: float, memory_mb: int, deadline: float, out: Outcome) -> None:
    """Drive the run; the records go to ``out.records`` as they come (a time-out keeps
    those of the exercises before it)."""
    job = {"cpu_seconds": timeout, "memory_bytes": memory_mb * 2**20,
           "cells": [{"source": c["source"], "name": c["name"]} for c in cells]}
    records = out.records
    errors: dict[str, str] = {}
    uses: dict[str, list[str]] = {}
    if not channel.send(job):
        return
    current = None

    def snap(ex: Any, label: str) -> bool:
        if not channel.send({"snap": label, "names": list(ex)}):
            return False
        rec = _expect(channel, deadline, "snap", label)
        if rec is None:
            return False
        records.append({"exercise": label, "values": rec.get("values") or {},
                        "unreadable": rec.get("unreadable") or {},
                        "cell_error": errors.get(label), "library": uses.get(label, [])})
        return True

    for index, cell in enumerate(cells):
        label = cell.get("label")
        if label in by_label:
            if current is not None and not snap(current.names, current.label):
                return
            current = by_label[label]
        by_hand = bool(label in by_label and by_label[label].by_hand)
        out.running = cell["name"]
        if not channel.send({"run": index, "by_hand": by_hand}):
            return
        rec = _expect(channel, deadline, "ran", index)
        if rec is None:
            return
        if rec.get("error"):
            error = str(rec["error"])[:2000]
            errors.setdefault(label or (current.label if current else ""), error)
            records.append({"cell": index, "error": error})
        if by_hand:
            found = [str(u) for u in rec.get("library") or []]
            uses.setdefault(str(label), []).extend(
                # what the child says, and the grader's own reading of the source
                sorted(set(found + library_uses(cell["source"], {}))))
    out.running = ""
    if current is not None and not snap(current.names, current.label):
        return
    every = [n for ex in by_label.values() for n in ex.names]
    if not snap(list(dict.fromkeys(every)), "__end__"):
        return
    if not channel.send({"end": True}) or _expect(channel, deadline, "done", True) is None:
        return
    records.append({"done": True})
    # Anything after "done" is a forgery: the child exits right after writing it.
    extra = channel.line(time.monotonic() + 5) if b"\n" in channel.buffer else None
    channel.finish(5.0)
    if extra is not None or channel.buffer.strip():
        raise Violation("a record after the end marker")
    return
