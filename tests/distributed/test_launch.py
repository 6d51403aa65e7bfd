"""The launcher plan: which command each node runs, environment overrides, early config errors,
and a Ray cluster that cannot hold the run failing with its resources named."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mindrl.config.loader import load_config
from mindrl.config.schema import ConfigError
from mindrl.distributed.launch import REPO, node_argv, plan_launch

BIN = Path(sys.executable).parent


def plan(overrides, env=None, command="train"):
    cfg = load_config(None, overrides)
    return plan_launch(cfg, "r.yaml", ["train.lr=1e-6"], command, env=env or {})


def test_single_process_when_one_worker():
    p = plan([])
    assert p.launcher == "single"
    assert node_argv(p, 0, p.master_addr, p.master_port) == [
        sys.executable, "-m", "mindrl", "train", "r.yaml", "train.lr=1e-6"]


def test_torchrun_flags_and_environment_overrides():
    p = plan(["distributed.nproc=8", "distributed.nnodes=2", "distributed.master_addr=10.0.0.1"],
             env={"NODE_RANK": "1", "MASTER_PORT": "6000"}, command="sft")
    assert (p.launcher, p.node_rank, p.master_addr, p.master_port) == ("torchrun", 1, "10.0.0.1", 6000)
    assert node_argv(p, p.node_rank, p.master_addr, p.master_port) == [
        str(BIN / "torchrun"), "--nproc_per_node", "8", "--nnodes", "2", "--node_rank", "1",
        "--master_addr", "10.0.0.1", "--master_port", "6000", "-m", "mindrl", "sft", "r.yaml",
        "train.lr=1e-6"]


def test_msrun_counts_all_workers_and_logs_per_node(monkeypatch):
    monkeypatch.delenv("MSRUN_JOIN", raising=False)
    p = plan(["backend=mindspore", "distributed.nproc=8", "logging.output_dir=/runs/x"],
             env={"NNODES": "4", "NODE_RANK": "3", "MASTER_ADDR": "node0"})
    assert (p.launcher, p.nnodes) == ("msrun", 4)
    argv = node_argv(p, 3, "node0", 29500)
    assert argv[:13] == [str(BIN / "msrun"), "--worker_num", "32", "--local_worker_num", "8",
                         "--master_addr", "node0", "--master_port", "29500", "--node_rank", "3",
                         "--log_dir", "/runs/x/launch_logs/node3"]
    assert argv[13:] == ["--join", "True", str(REPO / "launch" / "train_entry.py"), "train",
                         "r.yaml", "train.lr=1e-6"]


def test_ray_runs_the_backend_launcher_on_each_node():
    p = plan(["backend=mindspore", "device=ascend", "distributed.launcher=ray",
              "distributed.nnodes=4", "distributed.nproc=8"])
    assert (p.launcher, p.node_launcher) == ("ray", "msrun")
    assert p.ray["resource"] == "NPU" and p.ray["address"] == "auto"
    assert plan(["distributed.launcher=ray", "device=cuda"]).ray["resource"] == "GPU"
    assert plan(["distributed.launcher=ray"]).ray["resource"] == ""
    assert plan(["distributed.launcher=ray"]).node_launcher == "torchrun"


@pytest.mark.parametrize("overrides, env, needle", [
    (["distributed.launcher=msrun"], {}, "backend=mindspore"),
    (["distributed.master_port=0"], {}, "distributed.master_port=0"),
    (["distributed.nnodes=2"], {"NODE_RANK": "2"}, "NODE_RANK=2"),
    (["backend=mindspore", "train.fsdp=true"], {}, "train.fsdp=true shards a torch model"),
])
def test_bad_launch_settings_are_named(overrides, env, needle):
    with pytest.raises(ConfigError, match=needle):
        plan(overrides, env=env)


def test_launch_stops_on_a_bad_key_before_any_worker(tmp_path):
    res = subprocess.run([sys.executable, "-m", "mindrl", "launch", "grpo_tiny_demo",
                          "distributed.nprocs=2"], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    assert res.returncode == 2
    assert "distributed.nprocs" in res.stderr and "distributed.nproc" in res.stderr
    assert "torchrun" not in res.stderr


def test_ray_launch_names_an_unreachable_cluster():
    res = subprocess.run([sys.executable, "-m", "mindrl", "launch", "grpo_tiny_demo",
                          "distributed.launcher=ray", "distributed.ray_address=127.0.0.1:1"],
                         capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert res.returncode == 2
    assert "no Ray cluster at distributed.ray_address='127.0.0.1:1'" in res.stderr


@pytest.mark.slow
def test_run_sft_sh_launches_the_sft_loop(tmp_path):
    """launch/run_sft.sh = run_grpo.sh's launcher with `mindrl sft` as the worker command."""
    out = tmp_path / "sft"
    res = subprocess.run(["bash", str(REPO / "launch" / "run_sft.sh"), "sft_tiny_demo",
                          "model.path=builtin:tiny", "train.steps=2", "validation.every=0",
                          "logging.progress_bar=false", "logging.plot=false",
                          "logging.tensorboard=false", f"logging.output_dir={out}"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "mindrl launch: single node 0/1:" in res.stderr and " -m mindrl sft " in res.stderr
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["nll"] > 0 and r["response_tokens"] > 0 for r in rows)   # SFT metrics
    res = subprocess.run(["bash", str(REPO / "launch" / "run_dpo.sh")], capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 2 and "usage: bash launch/run_dpo.sh RECIPE" in res.stderr


def test_launch_checks_the_model_before_starting_workers():
    res = subprocess.run([sys.executable, "-m", "mindrl", "launch", "grpo_tiny_demo",
                          "distributed.nproc=2", "model.path=/nonexistent/qwen"],
                         capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert res.returncode == 2
    assert "model directory /nonexistent/qwen does not exist" in res.stderr
    assert "before starting 1 node(s) x 2 workers" in res.stderr and "torchrun" not in res.stderr


@pytest.mark.slow
def test_local_ray_is_its_own_even_when_another_run_has_one(tmp_path):
    """Two runs on one machine that each start a one-machine Ray (rollout.mode=async_ray, sharded
    evaluation): the second gets its own instance instead of failing to join the first's
    ("num_cpus ... must not be provided")."""
    code = ("import os, sys, time\nos.environ['RAY_AUTH_MODE'] = 'disabled'\n"
            "from mindrl.distributed.ray_launch import join_ray\n"
            "ray = join_ray('local', log_to_driver=False, num_cpus=2)\n"
            "print('gcs', ray.get_runtime_context().gcs_address, flush=True)\n"
            "sys.stdin.read()\nray.shutdown()\n")      # holds its Ray until stdin closes
    first = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        line = first.stdout.readline()
        assert line.startswith("gcs "), line
        second = subprocess.run([sys.executable, "-c", code], input="", capture_output=True,
                                text=True, timeout=120)
        assert second.returncode == 0, second.stderr[-2000:]
        other = [x for x in second.stdout.splitlines() if x.startswith("gcs ")]
        assert other and other[0] != line.strip(), (other, line)
    finally:
        first.stdin.close()
        first.wait(timeout=60)
