"""Start ``mindrl serve-rewards`` on a free loopback port for a test, and stop it."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, headers=None, raw=None, timeout=30):
    """(status, parsed JSON or text) of one request; never raises on an HTTP error status."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, text = resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


def spawn_server(*args, env=None, ready_s=60.0):
    """``(process, base URL)`` of a server started with ``args``, once /health answers; its
    stdout and stderr go to ``process.stdout`` (text)."""
    port = free_port()
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]),
                    OMP_NUM_THREADS="1", **(env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "mindrl", "serve-rewards", "--port", str(port),
                             *args], env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}: {proc.stdout.read()}")
            try:
                if http("GET", base + "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server did not answer /health in time")
            time.sleep(0.1)
    except BaseException:
        stop_server(proc)
        raise
    return proc, base


def stop_server(proc, timeout=15.0):
    """SIGTERM, then SIGKILL after ``timeout`` seconds; returns the exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    return proc.returncode


@contextmanager
def reward_server(*args, env=None, ready_s=60.0):
    """Yield the base URL of a running server started with ``args``; stop it afterwards."""
    proc, base = spawn_server(*args, env=env, ready_s=ready_s)
    try:
        yield base
    finally:
        stop_server(proc)
