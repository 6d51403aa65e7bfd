"""Where launch/install_peers_plugins.sh puts verl, OpenRLHF and TRL, and how tests run them."""

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PEERS = REPO / "tests" / ".peers"
RESULT_TAG = "@@RESULT "


def peer_dir(name: str) -> Path:
    d = PEERS / name
    assert (d / ".mindrl-peer").is_file(), (
        f"{name} is not installed for the plugin tests: run `bash launch/install_peers_plugins.sh` "
        f"(installs it into {d}, outside the venv)")
    return d


def run_checks(script: str, *args: str, env=None, timeout: float = 600) -> dict:
    """Run tests/integrations/<script> in a fresh interpreter; return its @@RESULT JSON."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]),
                    OMP_NUM_THREADS="1", **(env or {}))
    proc = subprocess.run([sys.executable, str(HERE / script), *args], env=full_env,
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_TAG)]
    assert proc.returncode == 0 and lines, (
        f"{script} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(lines[-1][len(RESULT_TAG):])
