"""The launch plan and the commands it runs: :func:`plan_launch` decides launcher, node counts and
rendezvous from the config and the environment; :func:`node_argv` is the one place that knows
the flags of torchrun and msrun; :func:`preflight` checks the model directory before any worker
starts. Starts nothing itself: :mod:`mindrl.distributed.launch` (this node) and
:mod:`mindrl.distributed.ray_launch` (every node, via Ray) run what it builds.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("train", "sft", "dpo", "simpo", "pref")


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to start the workers of one run on every node."""

    command: str                     # mindrl subcommand each worker runs (train, sft, ...)
    recipe: str
    overrides: tuple
    backend: str
    launcher: str                    # single, torchrun, msrun, ray
    node_launcher: str               # what runs on each node: single, torchrun, msrun
    nproc: int
    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int
    log_dir: str                     # msrun worker logs, Ray per-node logs
    python: str = sys.executable
    ray: Dict[str, object] = field(default_factory=dict)

    def worker_args(self) -> List[str]:
        return [self.command, self.recipe, *self.overrides]


def plan_launch(cfg, recipe: str, overrides: Sequence[str], command: str = "train",
                env: Optional[Mapping[str, str]] = None) -> LaunchPlan:
    """Decide launcher, node counts and rendezvous from the config and the environment."""
    from mindrl.config.schema import ConfigError

    if command not in COMMANDS:
        raise ConfigError(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
    env = os.environ if env is None else env
    d = cfg.distributed
    nnodes = int(env.get("NNODES", d.nnodes))
    node_rank = int(env.get("NODE_RANK", 0))
    if not 0 <= node_rank < nnodes:
        raise ConfigError(f"NODE_RANK={node_rank} is outside 0..{nnodes - 1} "
                          f"(distributed.nnodes / NNODES = {nnodes})")
    native = "torchrun" if cfg.backend == "torch" else "msrun"
    launcher = d.launcher
    if launcher == "none":
        launcher = "single" if d.nproc == 1 and nnodes == 1 else native
    node_launcher = native if launcher == "ray" else launcher
    # absolute: node actors and workers run elsewhere (the checkout root, a raylet's directory)
    log_dir = str(Path(env.get("MSRUN_LOG_DIR") or
                       Path(cfg.logging.output_dir) / "launch_logs").resolve())
    if Path(recipe).is_file():
        recipe = str(Path(recipe).resolve())
    resource = d.ray_resource
    if resource == "auto":
        resource = {"ascend": "NPU", "cuda": "GPU"}.get(cfg.device, "")
    return LaunchPlan(
        command=command, recipe=str(recipe), overrides=tuple(overrides), backend=cfg.backend,
        launcher=launcher, node_launcher=node_launcher, nproc=d.nproc, nnodes=nnodes,
        node_rank=node_rank, master_addr=env.get("MASTER_ADDR", d.master_addr),
        master_port=int(env.get("MASTER_PORT", d.master_port)), log_dir=log_dir,
        ray={"address": d.ray_address, "resource": resource,
             "placement_timeout_s": d.ray_placement_timeout_s})


def node_argv(plan: LaunchPlan, node_rank: int, master_addr: str, master_port: int) -> List[str]:
    """The command that starts this run's workers on node ``node_rank``."""
    bindir = Path(plan.python).parent
    if plan.node_launcher == "single":
        return [plan.python, "-m", "mindrl", *plan.worker_args()]
    if plan.node_launcher == "torchrun":
        return [str(bindir / "torchrun"), "--nproc_per_node", str(plan.nproc),
                "--nnodes", str(plan.nnodes), "--node_rank", str(node_rank),
                "--master_addr", master_addr, "--master_port", str(master_port),
                "-m", "mindrl", *plan.worker_args()]
    if plan.node_launcher == "msrun":
        return [str(bindir / "msrun"), "--worker_num", str(plan.nproc * plan.nnodes),
                "--local_worker_num", str(plan.nproc), "--master_addr", master_addr,
                "--master_port", str(master_port), "--node_rank", str(node_rank),
                "--log_dir", str(Path(plan.log_dir) / f"node{node_rank}"),
                "--join", os.environ.get("MSRUN_JOIN", "True"),
                str(REPO / "launch" / "train_entry.py"), *plan.worker_args()]
    raise ValueError(f"unknown node launcher {plan.node_launcher!r}")


def worker_env(base: Optional[Mapping[str, str]] = None,
               bindir: Optional[str] = None) -> Dict[str, str]:
    """Environment of launched workers: the launcher's venv bin first on PATH (msrun starts
    ``python`` from PATH) and the checkout importable."""
    env = dict(os.environ if base is None else base)
    bindir = bindir or str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def preflight(cfg, plan: LaunchPlan) -> None:
    """Before any worker starts on any node: the model directory the workers will read
    (this node sees the paths the workers see: a node of the job, or a shared filesystem;
    ``MINDRL_SKIP_PREFLIGHT=1`` skips it for a launch host that does not)."""
    from mindrl.errors import LaunchError
    from mindrl.paths import check_model_dir

    if plan.launcher == "single" or os.environ.get("MINDRL_SKIP_PREFLIGHT") == "1":
        return                       # one process checks it itself, at once
    if cfg.model.path.startswith("builtin:"):
        return
    try:
        check_model_dir(cfg.model.path)
    except FileNotFoundError as e:
        raise LaunchError(f"{e} (checked before starting {plan.nnodes} node(s) x {plan.nproc} "
                          "workers; MINDRL_SKIP_PREFLIGHT=1 skips this check)") from None
