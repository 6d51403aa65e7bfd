"""Run a test command, pass its output through, then say its wall time and peak RSS, repeat its
closing line (pytest's summary) last, and exit with its status.

    python .ci/timed.py LABEL COMMAND [ARG ...]

The peak RSS is ``ru_maxrss`` of the command as ``wait4`` reports it: the largest resident set
of that process and of the descendants it waited for.
"""

import os
import subprocess
import sys
import time


def main() -> int:
    label, cmd = sys.argv[1], sys.argv[2:]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = sys.stdout.buffer
    tail = b""
    while True:
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        out.write(chunk)
        out.flush()
        tail = (tail + chunk)[-8192:]
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    lines = [ln for ln in tail.decode("utf-8", "replace").splitlines() if ln.strip()]
    print(f"[ci] {label}: wall {int(wall // 60)} min {wall % 60:.0f} s; peak RSS of the pytest "
          f"process {usage.ru_maxrss / 2**20:.2f} GiB ({usage.ru_maxrss} kB); exit status {code}")
    if lines:
        print(lines[-1])
    sys.stdout.flush()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
