"""The torch backend's 2-rank tests share one torchrun launch (torchrun_suite_worker.py): it
runs the parts the session's selected tests need, each test then reads its part's output."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# the fixture each part's test uses -> the part of torchrun_suite_worker.py
TORCHRUN_PARTS = {"ddp_run": "ddp", "moe_ddp_run": "moe", "fsdp_run": "fsdp"}


@pytest.fixture(scope="session")
def torchrun_suite(request, tiny_dir, tmp_path_factory):
    """One ``torchrun --nproc_per_node 2`` for the session: (output folder, cache folder)."""
    items = request.session.items
    parts = [part for fixture, part in TORCHRUN_PARTS.items()
             if any(fixture in getattr(item, "fixturenames", ()) for item in items)]
    out = tmp_path_factory.mktemp("torchrun")
    cache = str(Path(tiny_dir).parent)
    if "moe" in parts:                              # built once, here, not by 2 ranks
        from mindrl.models.tiny import resolve_model_path

        resolve_model_path("builtin:tiny-qwen3-moe", cache_dir=cache)
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": f"{HERE.parents[2]}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("torchrun")), "--standalone", "--nproc_per_node",
         "2", str(HERE / "torchrun_suite_worker.py"), tiny_dir, cache, str(out),
         ",".join(parts)], cwd=out, env=env, capture_output=True, text=True, timeout=600,
        check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, cache


@pytest.fixture
def ddp_run(torchrun_suite):
    return torchrun_suite[0] / "ddp"


@pytest.fixture
def moe_ddp_run(torchrun_suite):
    out, cache = torchrun_suite
    return out / "moe", cache


@pytest.fixture
def fsdp_run(torchrun_suite):
    return torchrun_suite[0] / "fsdp"
