"""Run model-written Python as hostile input: one process per call, limited and isolated.

Each call starts ``python -I mindrl/tools/_runner.py`` (the project's interpreter, so the
snippet sees the same packages as the trainer, read-only) inside one of three isolations:

``bwrap``
    bubblewrap: new network, pid, ipc and uts namespaces (no network at all, not even
    loopback; the snippet sees only its own processes), a new mount namespace with ``/``
    bound read-only, a fresh size-capped tmpfs on ``/tmp``, ``/var/tmp`` and ``/dev/shm``,
    empty tmpfs over every hidden path (the run directory, checkpoints, ``$HOME``, ``/root``,
    ``/home``, anything in ``hide_paths``), ``--die-with-parent`` and ``--new-session``. Then
    what the interpreter needs is bound again, read-only, where those mounts cover it: its
    prefixes (the venv, ``sys.base_prefix``), its import path and this project's packages, the
    symlinks on the way rebuilt (:func:`mount_plan`), so the interpreter, the venv and the
    checkout may live under /tmp, under $HOME or in a conda prefix, and nothing else there is
    seen.
``unshare``
    the fallback (util-linux ``unshare``): the same namespaces, ``--kill-child``; the runner
    (root inside) mounts the same tmpfs itself and remounts ``/`` read-only before dropping
    privileges.
``none``
    resource limits and the uid drop only: the snippet can use the network and read what the
    unprivileged uid can read. Tool RL refuses this unless ``tools.sandbox.allow_unisolated``;
    as root it is refused outright when the uid drop is impossible (the snippet would run as
    root outside any namespace: ``kill(-1, SIGKILL)`` would end every process on the machine).

In every mode the runner sets RLIMIT_CPU (SIGXCPU at ``cpu_s``, SIGKILL one second later),
RLIMIT_AS (``memory_mb``), RLIMIT_FSIZE, RLIMIT_NOFILE, no core files, and, when the trainer runs
as root, switches to a uid of its own per pool slot (:func:`uid_base` + slot) with RLIMIT_NPROC,
so a fork bomb stops at ``max_procs`` processes and cannot starve the other slots. The parent
enforces the wall time (SIGKILL to the whole process group), keeps at most ``output_bytes`` of
stdout+stderr (``truncated``) and kills a call that writes more than ``kill_output_bytes``.
After every call, as root, every process still owned by the slot's uid is killed, so none
outlives its call even with ``isolation=none``.

Verdicts: ``ok`` (exit 0), ``error`` (non-zero exit: an exception, ``sys.exit(3)``),
``timeout`` (wall time, or CPU time: SIGXCPU, or SIGKILL after at least ``cpu_s`` of wall
time), ``memory`` (an uncaught ``MemoryError``), ``killed`` (any other signal, e.g. the snippet
killed itself or the OOM killer; or too much output).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import selectors
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import List, Optional, Sequence, Tuple

from mindrl.errors import ConfigError

log = logging.getLogger("mindrl.tools")

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_runner.py")
MEMORY_EXIT, SETUP_EXIT = 86, 125          # keep equal to _runner.py's
ISOLATIONS = ("auto", "bwrap", "unshare", "none")
VERDICTS = ("ok", "error", "timeout", "memory", "killed")
UID_BASE = 61000
MAX_SLOTS = 64


def uid_base(pid: int = 0) -> int:
    """First sandbox uid of this process: 61000 + 64 * (pid mod 64), so that two trainers on one
    machine rarely share uids (a shared uid would let one's clean-up kill the other's calls)."""
    return UID_BASE + MAX_SLOTS * ((pid or os.getpid()) % 64)
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
WORKDIR = "/tmp/work"


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 10.0           # wall time of one call
    cpu_s: float = 0.0                # CPU seconds per process (0 = timeout_s)
    memory_mb: int = 1024             # address space per process
    output_bytes: int = 16384         # stdout + stderr kept
    kill_output_bytes: int = 1 << 20  # a call writing more is killed
    max_procs: int = 16               # processes of one slot (enforced when running as root)
    scratch_mb: int = 64              # size of each scratch tmpfs; also the largest file

    def check(self) -> "SandboxLimits":
        for key in ("timeout_s", "memory_mb", "output_bytes", "max_procs", "scratch_mb"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"sandbox limit {key}={getattr(self, key)} must be > 0")
        return self

    @property
    def cpu_seconds(self) -> int:
        return max(1, int(round(self.cpu_s or self.timeout_s)))


@dataclass
class SandboxResult:
    verdict: str                      # one of VERDICTS
    stdout: str
    stderr: str
    returncode: int                   # the launcher's exit status (-N: killed by signal N)
    truncated: bool                   # output was cut at output_bytes
    wall_s: float
    isolation: str
    detail: str = ""                  # why, in words (signal name, limit hit)

    @property
    def output(self) -> str:
        """What a model sees: stdout, then stderr, as a terminal would interleave them."""
        return self.stdout + self.stderr


# ---------------------------------------------------------------------------- isolation
def _probe(cmd: Sequence[str]) -> bool:
    try:
        return subprocess.run(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@lru_cache(maxsize=None)
def available(kind: str) -> bool:
    """Whether isolation ``kind`` works on this machine (probed once per process)."""
    if kind == "none":
        return True
    if kind == "bwrap":
        exe = shutil.which("bwrap")
        return bool(exe) and _probe([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                     "--tmpfs", "/tmp", "--unshare-net", "--unshare-pid",
                                     "--die-with-parent", "--new-session", "true"])
    if kind == "unshare":
        exe = shutil.which("unshare")
        return bool(exe) and os.geteuid() == 0 and _probe(
            [exe, "--net", "--pid", "--ipc", "--uts", "--mount", "--mount-proc", "--fork",
             "--kill-child", "true"])
    raise ConfigError(f"unknown sandbox isolation '{kind}'; valid: {', '.join(ISOLATIONS)}")


def resolve_isolation(requested: str = "auto") -> str:
    """The isolation to use: ``auto`` takes the strongest available; a named one must work."""
    if requested == "auto":
        return next(k for k in ("bwrap", "unshare", "none") if available(k))
    if requested not in ISOLATIONS:
        raise ConfigError(f"tools.sandbox.isolation={requested!r}; valid: {', '.join(ISOLATIONS)}")
    if not available(requested):
        how = {"bwrap": "install bubblewrap (apt-get install bubblewrap)",
               "unshare": "run as root with util-linux unshare"}.get(requested, "")
        raise ConfigError(f"tools.sandbox.isolation={requested} is not available on this "
                          f"machine ({how}); use isolation=auto to take the best available")
    return requested


def describe(isolation: str, drop_uid: Optional[bool] = None) -> str:
    """The startup line saying which isolation is active."""
    root = os.geteuid() == 0 if drop_uid is None else drop_uid
    text = {"bwrap": "bubblewrap (network+pid+mount namespaces, read-only /, tmpfs scratch)",
            "unshare": "unshare fallback (network+pid+mount namespaces, rlimits, read-only /)",
            "none": "NONE: rlimits only, the snippet can reach the network and readable files"
            }[isolation]
    uid = "per-slot uid with a process cap" if root else \
        "no uid drop (not root, or the interpreter is unreachable)"
    return f"sandbox isolation: {isolation}: {text}; {uid}"


_PROBE = r"""
import importlib.util, json, os, sys
out = {"prefix": [sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix],
       "path": [p for p in sys.path if p], "project": [], "libs": []}
try:
    from importlib.metadata import distribution
    names = (distribution(sys.argv[1]).read_text("top_level.txt") or sys.argv[1]).split()
except Exception:
    names = [sys.argv[1]]
for name in names:
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    if spec is not None and spec.submodule_search_locations:
        out["project"] += list(spec.submodule_search_locations)
    elif spec is not None and spec.origin and os.path.isabs(spec.origin):
        out["project"].append(spec.origin)
try:
    with open("/proc/self/maps") as f:
        for line in f:
            field = line.rstrip("\n").split(None, 5)
            if len(field) == 6 and field[5].startswith("/"):
                out["libs"].append(os.path.dirname(field[5]))
except OSError:
    pass
print(json.dumps(out))
"""


@lru_cache(maxsize=None)
def interpreter_paths(python: str) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """What the interpreter ``python`` reads when the sandbox starts it (``-I``), as
    (installation, imports): its prefixes (``sys.prefix``, ``sys.base_prefix``, the exec
    prefixes) with its own directory; then its import path (``sys.path``, ``.pth`` entries
    included), the directories of this project's top-level packages as it finds them (an
    editable install maps them into the checkout) and of the shared libraries it has mapped
    (e.g. a ``libpython`` found through an absolute RUNPATH). Existing paths only."""
    try:
        out = subprocess.run([python, "-I", "-c", _PROBE, __name__.split(".")[0]],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise ConfigError(f"sandbox interpreter {python} does not run: {e}") from None
    try:
        found = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"sandbox interpreter {python} is not a working Python (exit status "
                          f"{out.returncode}: {last})") from None
    here = os.path.dirname(os.path.abspath(python))
    install = [here] + [p for p in found["prefix"] if os.path.exists(p)]
    imports = [p for p in found["path"] + found["project"] + found["libs"]
               if os.path.isabs(p) and os.path.exists(p)]
    return tuple(dict.fromkeys(install)), tuple(dict.fromkeys(imports))


def _walk(path: str, links: dict, hops: int = 0) -> str:
    """``path`` with its symlinks resolved one component at a time; every symlink met on the
    way (also inside a link's target) goes into ``links`` as path -> target as written, so that
    the same path can be rebuilt inside the sandbox."""
    if hops > 40:
        raise ConfigError(f"sandbox: too many levels of symbolic links in {path}")
    cur = "/"
    for part in os.path.abspath(path).split("/"):
        if not part:
            continue
        nxt = os.path.join(cur, part)
        if os.path.islink(nxt):
            links[nxt] = os.readlink(nxt)
            cur = _walk(os.path.join(cur, links[nxt]), links, hops + 1)
        else:
            cur = nxt
    return cur


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def mount_plan(scratch: Sequence[str], hide: Sequence[str], expose: Sequence[str],
               links: dict, scratch_bytes: int) -> List[list]:
    """The mounts that build the sandbox's view on top of a read-only ``/``, in order; bwrap
    and the runner (unshare fallback) both follow it.

    ``scratch`` directories get a fresh tmpfs of their own, ``hide`` paths an empty read-only
    one (a file: /dev/null); ``expose`` paths (real paths: the interpreter, its packages) are
    bound read-only again where a mask covers them, and the symlinks in ``links`` recreated, so
    that an interpreter under /tmp or $HOME still starts and nothing else there is seen. Each
    path is decided by the nearest path above it in the plan: an expose under a mask is bound,
    a mask under an expose (a run directory inside a bound checkout) is mounted; the rest is
    already as wanted. Parents come before children, missing directories are made 0755 (the
    unprivileged uid passes through), hidden tmpfs are made read-only last.

    Ops: ``["tmpfs", path, mode, bytes]``, ``["dir", path, mode]``, ``["bind", path]``,
    ``["symlink", target, path]``, ``["file", path]``, ``["remount_ro", path]``."""
    kind = {}
    for s in scratch:
        kind[s] = "scratch"
    for h in hide:
        if os.path.lexists(h):
            kind.setdefault(h, "hide" if os.path.isdir(h) else "file")
    for e in expose:
        kind[e] = "bind"
    for link in links:
        kind[link] = "symlink"

    def above(p: str, among) -> Optional[str]:
        """The nearest path of ``among`` strictly above ``p``."""
        best = None
        for q in among:
            if q != p and _under(p, q) and (best is None or len(q) > len(best)):
                best = q
        return best

    masks = ("scratch", "hide", "file")
    kept = [p for p in kind
            if (kind.get(above(p, kind)) in (None, "bind")) == (kind[p] in masks)]
    kept_masks = [p for p in kept if kind[p] in ("scratch", "hide")]
    ops: List[list] = []
    made = set()
    for p in sorted(kept, key=lambda p: (p.rstrip("/").count("/"), p)):
        k = kind[p]
        if k == "scratch":
            ops.append(["tmpfs", p, 0o1777, scratch_bytes])
        elif k == "hide":
            ops.append(["tmpfs", p, 0o555, 65536])
        elif k == "file":
            ops.append(["file", p])
        else:
            top = above(p, kept_masks)
            parents, d = [], os.path.dirname(p)
            while d != top and _under(d, top):
                parents.append(d)
                d = os.path.dirname(d)
            for d in reversed(parents):
                if d not in made:
                    made.add(d)
                    ops.append(["dir", d, 0o755])
            ops.append(["bind", p] if k == "bind" else ["symlink", links[p], p])
    ops += [["remount_ro", p] for p in kept if kind[p] == "hide"]
    return ops


def _world_traversable(path: str) -> bool:
    """Whether every directory above ``path`` lets any user through (o+x)."""
    p = os.path.dirname(path)
    while p and p != "/":
        if not os.stat(p).st_mode & 0o001:
            return False
        p = os.path.dirname(p)
    return True


def _closed_ancestor(path: str) -> Optional[str]:
    """The topmost directory above ``path`` that other users cannot pass through (no o+x),
    or None."""
    closed, p = None, os.path.dirname(path)
    while p and p != "/":
        if not os.stat(p).st_mode & 0o001:
            closed = p
        p = os.path.dirname(p)
    return closed


def default_hidden(extra: Sequence[str] = ()) -> List[str]:
    """The home, /root, /home and ``extra``, symlinks resolved. A path under /tmp is kept: it
    matters when it lies inside something the sandbox binds again (a run directory inside a
    checkout under /tmp)."""
    paths = [os.path.expanduser("~"), "/root", "/home"] + [os.path.abspath(p) for p in extra if p]
    out: List[str] = []
    for p in paths:
        p = os.path.realpath(p)
        if p not in out and p != "/" and p not in SCRATCH:
            out.append(p)
    return out


def _bwrap_args(op: list) -> List[str]:
    """One op of :func:`mount_plan` as bubblewrap options."""
    what, path = op[0], op[-1] if op[0] == "symlink" else op[1]
    if what == "tmpfs":
        return ["--perms", f"{op[2]:04o}", "--size", str(op[3]), "--tmpfs", path]
    if what == "dir":
        return ["--perms", f"{op[2]:04o}", "--dir", path]
    if what == "bind":
        return ["--ro-bind", path, path]
    if what == "symlink":
        return ["--symlink", op[1], path]
    if what == "file":
        return ["--ro-bind", "/dev/null", path]
    return ["--remount-ro", path]


# ------------------------------------------------------------------------------ one call
class Sandbox:
    """Runs snippets one call at a time; :class:`SandboxPool` runs several in parallel."""

    def __init__(self, limits: SandboxLimits = SandboxLimits(), isolation: str = "auto",
                 hide_paths: Sequence[str] = (), python: Optional[str] = None):
        self.limits = limits.check()
        self.isolation = resolve_isolation(isolation)
        self.hide = default_hidden(hide_paths)
        self.python = os.path.abspath(python or sys.executable)
        self.uid_base = uid_base()
        # the interpreter's installation and import path, and the runner's folder (bwrap starts
        # it after the mounts), stay visible read-only inside the masked paths; symlinks on the
        # way (a venv reached through a link) are rebuilt there
        install, imports = interpreter_paths(self.python)
        self.links: dict = {}
        real_install = {_walk(p, self.links) for p in install}
        real_python = _walk(self.python, self.links)
        self.expose = sorted(real_install | {os.path.dirname(real_python)} |
                             {_walk(p, self.links) for p in imports + (os.path.dirname(RUNNER),)})
        # without mounts, the uid drop needs an interpreter the unprivileged uid can reach
        # (the runner is read by this uid before the drop)
        self.drop_uid = os.geteuid() == 0 and (self.isolation != "none" or all(
            _world_traversable(p) for p in sorted(real_install) + [real_python]))
        if self.drop_uid and self.isolation != "none":
            # an installation under a directory closed to other users (a venv in a mode-700
            # checkout, e.g. one made by mktemp -d): hide that directory like the home and
            # re-expose the installation alone, so the unprivileged uid can import its packages
            for e in self.expose:
                closed = _closed_ancestor(e)
                if closed and not any(_under(closed, h) for h in self.hide + list(SCRATCH)):
                    self.hide.append(closed)
        if os.geteuid() == 0 and not self.drop_uid:
            # root without a pid namespace could signal or overwrite anything on the machine
            raise ConfigError(
                f"tools.sandbox.isolation=none as root needs an interpreter that the "
                f"unprivileged sandbox uid can reach, and {self.python} lies under a directory "
                f"closed to other users; install bubblewrap or use isolation=auto")

    def command(self, limits: SandboxLimits, slot: int) -> List[str]:
        root = self.drop_uid
        scratch = [s for s in SCRATCH if os.path.isdir(s)]
        plan = mount_plan(scratch, self.hide, self.expose, self.links, limits.scratch_mb << 20) \
            if self.isolation != "none" else []
        spec = {"cpu_s": limits.cpu_seconds, "memory_mb": limits.memory_mb,
                "file_bytes": limits.scratch_mb << 20,
                "max_procs": limits.max_procs if root else 0,
                "uid": self.uid_base + slot if root else None, "workdir": WORKDIR,
                "mount": self.isolation == "unshare", "init": self.isolation == "unshare",
                "plan": plan}
        inner = [self.python, "-I", RUNNER, json.dumps(spec)]
        if self.isolation == "bwrap":
            cmd = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev",
                   "--proc", "/proc"]
            for op in plan:
                cmd += _bwrap_args(op)
            cmd += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                    "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                    "--hostname", "sandbox", "--chdir", "/"]
            return cmd + inner
        if self.isolation == "unshare":
            return [shutil.which("unshare") or "unshare", "--net", "--pid", "--ipc", "--uts",
                    "--mount", "--mount-proc", "--fork", "--kill-child"] + inner
        return inner

    def run(self, code: str, limits: Optional[SandboxLimits] = None, slot: int = 0
            ) -> SandboxResult:
        lim = (limits or self.limits).check()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORKDIR, "LANG": "C.UTF-8",
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
        if self.isolation == "none":
            # no mount namespace: give the snippet a host directory of its own
            import tempfile

            workdir = tempfile.mkdtemp(prefix="mindrl-sandbox-")
            cmd = self.command(lim, slot)
            spec = json.loads(cmd[-1])
            spec["workdir"] = workdir
            cmd[-1] = json.dumps(spec)
        else:
            workdir, cmd = None, self.command(lim, slot)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, start_new_session=True,
                                    close_fds=True)
        except OSError as e:
            return SandboxResult("error", "", f"sandbox could not start: {e}\n", -1, False, 0.0,
                                 self.isolation, "launch failed")
        try:
            out, err, truncated, why = self._communicate(proc, code.encode("utf-8", "replace"),
                                                         lim, t0)
        finally:
            self._kill_all(proc, slot)
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        wall = time.monotonic() - t0
        rc = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        verdict, detail = self._verdict(rc, why, wall, lim)
        return SandboxResult(verdict, out.decode("utf-8", "replace"),
                             err.decode("utf-8", "replace"), rc, truncated, wall,
                             self.isolation, detail)

    def _communicate(self, proc: subprocess.Popen, code: bytes, lim: SandboxLimits, t0: float
                     ) -> Tuple[bytes, bytes, bool, str]:
        try:
            proc.stdin.write(code)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        bufs = {out_fd: bytearray(), err_fd: bytearray()}
        total, truncated, why = 0, False, ""
        sel = selectors.DefaultSelector()
        for f in (proc.stdout, proc.stderr):
            os.set_blocking(f.fileno(), False)
            sel.register(f.fileno(), selectors.EVENT_READ)
        deadline = t0 + lim.timeout_s
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                why = "wall"
                break
            for key, _ in sel.select(timeout=min(left, 0.5)):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                room = lim.output_bytes - sum(len(b) for b in bufs.values())
                if room > 0:
                    bufs[key.fd] += chunk[:room]
                truncated = truncated or len(chunk) > room
                total += len(chunk)
            if total > lim.kill_output_bytes:
                why = "output"
                break
        sel.close()
        if not why:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                why = "wall"
        for f in (proc.stdout, proc.stderr):
            f.close()
        return bytes(bufs[out_fd]), bytes(bufs[err_fd]), truncated, why

    def _kill_all(self, proc: subprocess.Popen, slot: int) -> None:
        """SIGKILL the call's process group, then (as root) every process of the slot's uid."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        if self.drop_uid:
            kill_uid(self.uid_base + slot)

    @staticmethod
    def _verdict(rc: int, why: str, wall: float, lim: SandboxLimits) -> Tuple[str, str]:
        if why == "wall":
            return "timeout", f"wall time {lim.timeout_s:g}s"
        if why == "output":
            return "killed", f"output over {lim.kill_output_bytes} bytes"
        sig = -rc if rc < 0 else (rc - 128 if 128 < rc < 160 else 0)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and wall >= lim.cpu_seconds):
            return "timeout", f"CPU time {lim.cpu_seconds}s"
        if sig:
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            return "killed", name
        if rc == 0:
            return "ok", ""
        if rc == MEMORY_EXIT:
            return "memory", f"MemoryError under {lim.memory_mb} MB"
        if rc == SETUP_EXIT:
            return "error", "sandbox setup failed"
        return "error", f"exit status {rc}"


def kill_uid(uid: int) -> None:
    """SIGKILL every process owned by ``uid``: ``kill -9 -1`` run AS that uid reaches exactly
    the processes it may signal (its own). subprocess switches uid in the child before exec and
    fails rather than exec as root, so this can never run ``kill -1`` as root."""
    exe = shutil.which("kill") or "/bin/kill"
    cmd = [exe, "-9", "-1"] if os.path.exists(exe) else \
        [sys.executable, "-I", "-c", "import os; os.kill(-1, 9)"]
    try:
        subprocess.run(cmd, user=uid, group=uid, extra_groups=[], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10,
                       close_fds=True)
    except (OSError, subprocess.SubprocessError) as e:
        log.warning("could not clean up the processes of sandbox uid %d: %s", uid, e)


# ------------------------------------------------------------------------------- the pool
class SandboxPool:
    """``workers`` calls in flight at once (threads, each waiting on its own process), so tool
    calls run while the engine generates. Each worker owns a slot (its uid and process cap)."""

    def __init__(self, sandbox: Sandbox, workers: int = 4):
        if not 1 <= workers <= MAX_SLOTS:
            raise ConfigError(f"sandbox workers={workers} must be in 1..{MAX_SLOTS}")
        self.sandbox = sandbox
        self._slots: "queue.Queue[int]" = queue.Queue()
        for s in range(workers):
            self._slots.put(s)
        self._exec = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox")

    def submit(self, code: str, limits: Optional[SandboxLimits] = None) -> "Future[SandboxResult]":
        return self._exec.submit(self._run, code, limits)

    def _run(self, code: str, limits: Optional[SandboxLimits]) -> SandboxResult:
        slot = self._slots.get()
        try:
            return self.sandbox.run(code, limits, slot=slot)
        finally:
            self._slots.put(slot)

    def run(self, code: str, limits: Optional[SandboxLimits] = None) -> SandboxResult:
        return self.submit(code, limits).result()

    def close(self) -> None:
        self._exec.shutdown(wait=True)

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["Sandbox", "SandboxPool", "SandboxLimits", "SandboxResult", "resolve_isolation",
           "available", "describe", "VERDICTS"]
