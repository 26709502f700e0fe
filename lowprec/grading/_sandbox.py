"""The launcher of one submission's process (``python -I -S .../_sandbox.py CONFIG``).

Started by the grader (:mod:`lowprec.grading._driver`) with three pipes: fd 0 (the
grader's commands), fd 1 and 2 (one output pipe, of which the grader keeps a bounded
tail) and fd 3 (the answers, read in lock-step by the grader). ``CONFIG`` is a JSON object
(see :func:`lowprec.grading._driver.launcher_config`). It does, in this order, before any
submission code runs:

1. opens every folder the submission may see (the Python installation, the system's
   ``/usr``, ``/etc``, the ``lowprec`` package, a copy of the compiled kernels) while it
   still can;
2. when it runs as root, drops to the unprivileged ``nobody`` (uid and gid 65534, no
   supplementary groups): root could read every file otherwise;
3. creates new *user, mount, pid, network, IPC and UTS* namespaces (``unshare(2)``): the
   submission sees no other process, has only a loopback device that is down, and its
   own view of the files;
4. forks the namespace's first process, which builds a new root on a size-limited tmpfs
   (the folders of 1. bound read-only, an empty ``/home/student`` as the working folder
   and ``$HOME``, a fresh ``/proc``, five device files), ``pivot_root`` s into it and
   detaches the old root, so nothing else of the machine is reachable by any path;
5. enters one more user namespace in which it is an ordinary uid (1000), so the
   submission has no capability at all (no mounts, no way back to the old root), sets
   ``no_new_privs``, the resource limits (processes, open files, file size, core dumps)
   and execs the child (:mod:`lowprec.grading._child`) as the namespace's pid 1: when it
   exits, the kernel kills every process left in the namespace.

Where namespaces are unavailable (``CONFIG["isolate"]`` false, or ``unshare`` fails and
``CONFIG["require"]`` is false) steps 3-5 are replaced by the weaker fallback: an empty
working folder, the scrubbed environment, the same limits, still as ``nobody`` when run
as root. The first record on fd 3 says which (``{"sandbox": "isolated" | "fallback" |
"failed: ...", ...}``).

Only the standard library is imported here: this runs before the limits are set.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import shutil
import signal
import sys
from typing import Any

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
NOBODY = 65534
INNER_UID = 1000  #: the submission's uid inside its namespaces
HOME = "/home/student"
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
_DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)
_ARGTYPES = {
    "mount": [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
              ctypes.c_char_p],
    "umount2": [ctypes.c_char_p, ctypes.c_int],
    "unshare": [ctypes.c_int],
    "prctl": [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong],
}
for _name, _types in _ARGTYPES.items():  # Linux's; elsewhere only the fallback runs
    if hasattr(_libc, _name):
        getattr(_libc, _name).argtypes = _types


def _prctl(option: int, value: int) -> None:
    if hasattr(_libc, "prctl"):
        _libc.prctl(option, value, 0, 0, 0)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _b(s: str | None) -> bytes | None:
    return s.encode() if s is not None else None


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)), f"mount {target}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _map_ids(inside: int, outside_uid: int, outside_gid: int) -> None:
    """Map ``inside`` to this process's own uid and gid outside (allowed without privilege)."""
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{inside} {outside_uid} 1\n")
    _write("/proc/self/gid_map", f"{inside} {outside_gid} 1\n")


def _drop_root() -> None:
    """Root reads everything: become ``nobody`` first (no groups, no capabilities)."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        # a changed uid makes the process undumpable, its /proc files root's: undo that,
        # or it cannot write its own uid_map
        _prctl(PR_SET_DUMPABLE, 1)


def _limits(cfg: dict[str, Any]) -> None:
    for name, value in (("RLIMIT_NPROC", cfg["nproc"]), ("RLIMIT_NOFILE", cfg["nofile"]),
                        ("RLIMIT_FSIZE", cfg["fsize"]), ("RLIMIT_CORE", 0)):
        resource.setrlimit(getattr(resource, name), (value, value))


def _bind(fd: int, target: str, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()  # noqa: SIM115 - an empty mount point
    mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    last: OSError | None = None
    for extra in (0, MS_NOEXEC):  # flags the source mount has must be kept
        try:
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
                  | extra)
            return
        except OSError as exc:
            last = exc
    assert last is not None
    raise last


def _kernels(root: str, fd: int, names: list[str]) -> None:
    """A private copy of the teacher's compiled kernels of this lowprec (the folders
    ``names`` of the cache) at ``~/.cache/lowprec``; what the submission compiles stays
    on its tmpfs, thrown away at the end: numba's cache index is a pickle, and one written
    by a submission must never be loaded by the grader or the next submission. (An overlay
    would not do: numba needs to write in the folders it loads from.)"""
    lower = root + "/.kernels"
    _bind(fd, lower, True)
    for name in names:
        try:
            shutil.copytree(f"{lower}/{name}", f"{root}{HOME}/.cache/lowprec/{name}")
        except (OSError, shutil.Error) as exc:
            print(f"lowprec grade: compiled kernels not copied ({exc})", file=sys.stderr,
                  flush=True)
    _check(_libc.umount2(lower.encode(), MNT_DETACH), "umount the kernels")
    os.rmdir(lower)


def _build_root(cfg: dict[str, Any], fds: list[tuple[int, str, bool]], kernels: int | None
                ) -> None:
    """The new root: a tmpfs with the read-only binds, ``/proc``, ``/dev`` and the home."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = cfg["mountpoint"]
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, f"size={cfg['disk_mb']}m,mode=755")
    for fd, path, is_dir in fds:
        _bind(fd, root + path, is_dir)
    for name, target in cfg["links"]:
        os.makedirs(os.path.dirname(root + name), exist_ok=True)
        os.symlink(target, root + name)
    dev = root + "/dev"
    os.makedirs(dev, exist_ok=True)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    for name in _DEVICES:
        open(f"{dev}/{name}", "a").close()  # noqa: SIM115
        mount(f"/dev/{name}", f"{dev}/{name}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    os.makedirs(root + "/tmp", mode=0o1777, exist_ok=True)
    os.chmod(root + "/tmp", 0o1777)
    os.makedirs(root + HOME, exist_ok=True)
    if kernels is not None:
        _kernels(root, kernels, cfg["kernel_dirs"])
    os.makedirs(root + "/proc", exist_ok=True)
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(0, f"pivot_root: unknown system call number on {platform.machine()}")
    _check(_libc.syscall(number, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount the old root")
    os.chdir(HOME)


def _open_sources(cfg: dict[str, Any]) -> tuple[list[tuple[int, str, bool]], int | None]:
    fds = []
    for source, target in cfg["binds"]:
        is_dir = os.path.isdir(source)
        flags = os.O_PATH | (os.O_DIRECTORY if is_dir else 0)
        fds.append((os.open(source, flags), target, is_dir))
    kernels = None
    if cfg.get("kernels"):
        with __import__("contextlib").suppress(OSError):
            kernels = os.open(cfg["kernels"], os.O_PATH | os.O_DIRECTORY)
    return fds, kernels


def _report(record: dict[str, Any]) -> None:
    os.write(3, (json.dumps(record) + "\n").encode())


def _die_with_parent(parent: int | None) -> None:
    """Be killed when the parent process ends, and end now if ``parent`` (its pid, or
    None where it cannot be seen: pid 1 of a new namespace) is gone already. Asked
    again after every change of user ids or capabilities, which clears it (prctl(2)):
    without that, a grader killed while a submission ran left the sandbox running."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(70)


def _exec_child(cfg: dict[str, Any], parent: int | None) -> None:
    _limits(cfg)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _die_with_parent(parent)  # (after the last change of credentials; execve keeps it)
    os.execve(cfg["python"], [cfg["python"], "-m", "lowprec.grading._child"], cfg["env"])


def _wait(pid: int) -> int:
    """Wait for ``pid``; its exit status as a shell gives it (128 + signal)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return 1
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status)
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)


def _namespace_init(cfg: dict[str, Any], fds: list[tuple[int, str, bool]],
                    kernels: int | None) -> None:
    """pid 1 of the new namespaces: build the root, lose every privilege, run the child."""
    try:
        _die_with_parent(None)
        _build_root(cfg, fds, kernels)
        for fd, _, _ in fds:
            os.close(fd)
        if kernels is not None:
            os.close(kernels)
        _check(_libc.unshare(CLONE_NEWUSER), "unshare (the unprivileged user)")
        _map_ids(INNER_UID, 0, 0)
        os.setsid()
        _report({"sandbox": "isolated", "pidns": os.stat("/proc/self/ns/pid").st_ino})
        if cfg.get("probe"):
            os._exit(0)
        _exec_child(cfg, None)  # (its parent is outside its pid namespace: no pid to check)
    except BaseException as exc:  # noqa: B036 - reported to the grader, then exit
        _report({"sandbox": f"failed: {exc}"})
    os._exit(70)


def _namespaces(cfg: dict[str, Any], ready: int, mapped: int) -> None:
    """The first process in the new namespaces (its child is their pid 1)."""
    try:
        launcher = os.getppid()
        _die_with_parent(launcher)
        root = os.geteuid() == 0
        if root:
            os.setgroups([])
        uid, gid = os.geteuid(), os.getegid()
        _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET
                             | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        if root:  # the launcher maps this namespace's root to nobody
            os.write(ready, b"1")
            if os.read(mapped, 1) != b"1":
                raise OSError(0, "the launcher could not map the user ids")
        else:
            _map_ids(0, uid, gid)
        # Opened here, in the new mount namespace, while the files are still reachable
        # (as root: the owner of /root); then root becomes nobody for good.
        fds, kernels = _open_sources(cfg)
        if root:
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)  # uid 0 inside is nobody (65534) outside
            _prctl(PR_SET_DUMPABLE, 1)  # its /proc files stay its own
        _die_with_parent(launcher)  # (the new user ids cleared it)
        pid = os.fork()
        if pid == 0:
            _namespace_init(cfg, fds, kernels)
        for fd in (0, 1, 2, 3):
            os.close(fd)
        os._exit(_wait(pid))
    except BaseException as exc:  # noqa: B036 - reported to the grader, then exit
        _report({"sandbox": f"failed: {exc}"})
    os._exit(70)


def isolated(cfg: dict[str, Any]) -> int:
    ready_r, ready_w = os.pipe()
    mapped_r, mapped_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _namespaces(cfg, ready_w, mapped_r)
    if os.geteuid() == 0:
        ok = b"0"
        if os.read(ready_r, 1) == b"1":
            try:
                for name in ("uid_map", "gid_map"):
                    _write(f"/proc/{pid}/{name}", f"0 {NOBODY} 1\n")
                ok = b"1"
            except OSError:
                pass
        os.write(mapped_w, ok)
    for fd in (0, 1, 2, 3):  # only the child holds the pipes: EOF when it is gone
        os.close(fd)
    return _wait(pid)


def _descendants() -> list[int]:
    """This process's children (orphans of the submission come here: a subreaper)."""
    me, found = os.getpid(), []
    for entry in (os.listdir("/proc") if os.path.isdir("/proc") else []):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found


def fallback(cfg: dict[str, Any], why: str, grader: int) -> int:
    """No namespaces: an empty folder, the scrubbed environment, the limits, as nobody
    when run as root and nobody can run this Python; orphans killed at the end."""
    os.chdir(cfg["workdir"])
    if cfg["drop_root"]:  # the grader checked that nobody can run Python here
        _drop_root()
        _die_with_parent(grader)  # (the new user ids cleared it)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    launcher = os.getpid()
    pid = os.fork()
    if pid == 0:
        _die_with_parent(launcher)  # the launcher gone: stop
        if os.geteuid() == 0:  # root that cannot be nobody here: root without capabilities
            for cap in range(64):  # (so that RLIMIT_NPROC and file permissions apply)
                _prctl(PR_CAPBSET_DROP, cap)
        os.setsid()
        _report({"sandbox": "fallback", "why": why, "sid": os.getpid()})
        _exec_child(cfg, launcher)
    for fd in (0, 1, 2, 3):
        os.close(fd)
    status = _wait(pid)
    for _ in range(100):  # daemons the submission left behind were re-parented here
        left = _descendants()
        if not left:
            break
        for child in left:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
    return status


def main(argv: list[str]) -> int:
    cfg = json.loads(argv[1])
    if cfg["answer_fd"] != 3:
        os.dup2(cfg["answer_fd"], 3)
        os.close(cfg["answer_fd"])
    grader = os.getppid()
    _die_with_parent(grader)  # the grader gone: stop
    if not cfg["isolate"]:
        return fallback(cfg, cfg.get("why", "isolation was not requested"), grader)
    return isolated(cfg)


if __name__ == "__main__":
    os._exit(main(sys.argv))
