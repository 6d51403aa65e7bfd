"""The first Python code that runs inside the sandbox (standalone: imports nothing from mindrl).

``python -I _runner.py SPEC_JSON`` reads the snippet from stdin, then, in this order: follows
the spec's mount plan (fresh tmpfs over the scratch directories, empty read-only tmpfs over the
hidden paths, the interpreter's paths bound again read-only; see ``sandbox.mount_plan``), only
when the spec asks, i.e. the ``unshare`` fallback running as root (bubblewrap does its own
mounts), sets the resource limits, changes to the working directory, drops to the spec's
unprivileged uid (which also drops every capability) and runs the snippet as ``__main__``.

Exit status: the snippet's own (``sys.exit``), 1 for an uncaught exception (traceback on stderr,
as ``python FILE`` prints it), :data:`MEMORY_EXIT` for an uncaught ``MemoryError``, 125 when the
setup itself failed (the parent reports that as an error, never as the snippet's fault).
"""

import json
import os
import resource
import sys
import traceback

MEMORY_EXIT = 86
SETUP_EXIT = 125
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384


def _mounts(spec):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def mount(src, dst, fstype, flags, data):
        if libc.mount(src, dst.encode(), fstype, flags, data) != 0:
            raise OSError(f"mount on {dst} failed (errno {ctypes.get_errno()})")

    plan = spec["plan"]
    # the bound paths are opened before the first mount: a tmpfs over /tmp would hide them
    keep = {op[1]: os.open(op[1], os.O_PATH) for op in plan if op[0] == "bind"}
    for op in plan:
        what, path = op[0], op[-1] if op[0] == "symlink" else op[1]
        if what == "tmpfs":                     # over an existing path (the plan checked)
            mount(b"tmpfs", path, b"tmpfs", MS_NOSUID | MS_NODEV,
                  f"size={op[3]},mode={op[2]:o}".encode())
        elif what == "dir":
            if not os.path.isdir(path):
                os.mkdir(path)
            os.chmod(path, op[2])
        elif what == "bind":
            fd = keep.pop(path)
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, mode=0o755, exist_ok=True)
            elif not os.path.exists(path):
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
            mount(f"/proc/self/fd/{fd}".encode(), path, None, MS_BIND | MS_REC, None)
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
            os.close(fd)
        elif what == "symlink":
            os.symlink(op[1], path)
        elif what == "file":
            mount(b"/dev/null", path, None, MS_BIND, None)
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
        elif what == "remount_ro":
            mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
        else:
            raise ValueError(f"unknown mount op {what!r}")
    # the root mount read-only in this mount namespace (submounts stay as they were; the uid
    # drop below leaves the snippet unable to write where root alone could)
    libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)


def _limits(spec):
    cpu = int(spec["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))       # SIGXCPU, then SIGKILL
    mem = int(spec["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    fsize = int(spec["file_bytes"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    if spec.get("max_procs"):
        n = int(spec["max_procs"])
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))


def _init():
    """As pid 1 of the namespace (the unshare fallback): fork the snippet's process, reap
    orphans until it ends, and exit with its status (128 + N when signal N killed it). pid 1
    stays root and outside the snippet's reach; when it exits the kernel kills every process
    left in the namespace."""
    child = os.fork()
    if child == 0:
        return
    for fd in (0, 1, 2):
        os.close(fd)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(SETUP_EXIT)
        if pid == child:
            os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status)
                     else os.WEXITSTATUS(status))


def _report(e):
    """The traceback as ``python snippet.py`` prints it (this runner's frame left out)."""
    try:
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
    except BaseException:  # noqa: BLE001  (e.g. no memory left to format it)
        os.write(2, f"{type(e).__name__}\n".encode())


def main():
    spec = json.loads(sys.argv[1])
    code = sys.stdin.buffer.read()
    try:
        if spec.get("mount"):
            _mounts(spec)
        if spec.get("init"):
            _init()
        _limits(spec)
        os.makedirs(spec["workdir"], exist_ok=True)
        uid = spec.get("uid")
        if uid is not None:
            os.chown(spec["workdir"], uid, uid)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)              # after this no capability is left
        os.chdir(spec["workdir"])
        os.umask(0o077)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    except Exception as e:  # noqa: BLE001
        sys.stderr.write(f"sandbox setup failed: {e}\n")
        sys.stderr.flush()
        os._exit(SETUP_EXIT)
    sys.argv = ["snippet.py"]
    sys.path.insert(0, spec["workdir"])
    namespace = {"__name__": "__main__", "__file__": "snippet.py", "__builtins__": __builtins__}
    status = 0
    try:
        exec(compile(code, "snippet.py", "exec"), namespace)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            sys.stderr.write(f"{e.code}\n")
    except MemoryError as e:
        _report(e)
        status = MEMORY_EXIT
    except BaseException as e:  # noqa: BLE001  (the snippet's own error, reported like python)
        _report(e)
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(status & 0xFF)


if __name__ == "__main__":
    main()
