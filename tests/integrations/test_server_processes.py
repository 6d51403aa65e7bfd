"""Every process the reward server starts ends with it: after kill -9 of its forkserver (the
workers it forked die with it and are replaced; the server goes on serving) and after SIGTERM
under load (workers busy on long items, burst workers started). Processes are counted from
/proc: the server's descendants before each fault, and which of them still live after it."""

import os
import signal
import threading
import time

import pytest

from server_util import http, spawn_server, stop_server


def _stat(pid):
    """(state, parent pid) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _alive(pid):
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _descendants(root):
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                children.setdefault(st[1], []).append(int(name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _left_alive(pids, within_s=8.0):
    deadline = time.monotonic() + within_s
    while True:
        alive = [p for p in pids if _alive(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _load(base, items, result):
    def post():
        try:
            result["r"] = http("POST", base + "/score", {"completions": items}, timeout=120)
        except OSError as e:          # the server went away mid-request
            result["r"] = e
    t = threading.Thread(target=post, daemon=True)
    t.start()
    return t


def _describe(pids):
    return [(p, _stat(p)) for p in pids]


@pytest.mark.slow
def test_kill_9_of_the_forkserver_leaves_no_worker_behind():
    proc, base = spawn_server("--workers", "2", "--timeout", "60", "--max-burst-workers", "0",
                              "--reward", "pathological_rewards:slow_len")
    try:
        result = {}
        _load(base, ["spin:30", "spin:30", "abc"], result)   # both workers busy (state R)
        time.sleep(1.5)
        workers = http("GET", base + "/health")[1]["worker_pids"]
        forkserver = {_stat(p)[1] for p in workers}
        assert len(forkserver) == 1 and proc.pid not in forkserver, _describe(workers)
        fs = forkserver.pop()
        before = [fs] + _descendants(fs)        # the forkserver and every worker it forked
        assert set(workers) <= set(before) and fs in _descendants(proc.pid)
        os.kill(fs, signal.SIGKILL)
        left = _left_alive(before)
        assert not left, f"still running after kill -9 of the forkserver: {_describe(left)}"
        # the server replaces its workers and serves again
        status, body = http("POST", base + "/score", {"completions": ["abcd"]}, timeout=60)
        assert status == 200 and body["rewards"] == [4.0], body
        now = _descendants(proc.pid)
        assert not set(now) & set(before)
    finally:
        final = _descendants(proc.pid) if proc.poll() is None else []
        stop_server(proc)
    assert not _left_alive(final), _describe(final)


@pytest.mark.slow
def test_sigterm_under_load_leaves_no_process_behind():
    proc, base = spawn_server("--workers", "2", "--timeout", "60", "--shutdown-grace", "1",
                              "--reward", "pathological_rewards:slow_len")
    try:
        results = [{} for _ in range(4)]
        for r in results:                                    # stragglers: burst workers start
            _load(base, ["spin:30"] * 4 + ["abc"], r)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)                     # while burst workers start
        before = _descendants(proc.pid)
        assert len(before) >= 4, _describe(before)           # forkserver + 2 + burst workers
        proc.wait(timeout=20)
        before = sorted(set(before) | set(_descendants(proc.pid)))
    finally:
        stop_server(proc)
    left = _left_alive(before)
    assert not left, f"still running after the server's SIGTERM: {_describe(left)}"


@pytest.mark.slow
def test_kill_9_of_the_server_under_load_leaves_no_process_behind():
    # no handler runs: the forkserver sees its parent go and exits, and its workers die with it
    proc, base = spawn_server("--workers", "2", "--timeout", "60",
                              "--reward", "pathological_rewards:slow_len")
    try:
        result = {}
        _load(base, ["spin:30"] * 4 + ["abc"], result)
        time.sleep(1.5)
        before = _descendants(proc.pid)
        assert len(before) >= 3, _describe(before)           # forkserver + 2 workers at least
        proc.kill()
        proc.wait(timeout=20)
    finally:
        stop_server(proc)
    left = _left_alive(before)
    assert not left, f"still running after kill -9 of the server: {_describe(left)}"
