"""How a recipe's workers are started: one process, torchrun, msrun, or a launcher per node on Ray.

``mindrl launch RECIPE`` (and ``bash launch/run_grpo.sh RECIPE``) resolve the recipe first, so a
bad key stops here before any worker starts, then pick the launcher from ``distributed.*``:

- ``single``: ``python -m mindrl <command>`` in this process's place.
- ``torchrun`` / ``msrun``: the per-node launcher of the backend, for this node
  (``NNODES``, ``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` from the environment override the
  recipe, as cluster schedulers set them).
- ``ray``: this process becomes a Ray driver that reserves one bundle per node (STRICT_SPREAD)
  and runs the per-node launcher on each node, rank 0's address as the rendezvous
  (:mod:`mindrl.distributed.ray_launch`).

The plan and the commands themselves are built in :mod:`mindrl.distributed.plan`
(:func:`node_argv` is the one place that knows the flags of torchrun and msrun).
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from mindrl.distributed.plan import (COMMANDS, REPO, LaunchPlan, node_argv,  # noqa: F401
                                     plan_launch, preflight, worker_env)


def launch(recipe: str, overrides: Sequence[str], command: str = "train") -> int:
    """Resolve the recipe, then run (or become) the launcher it asks for; returns the exit code."""
    from mindrl.config.loader import load_config

    cfg = load_config(recipe, list(overrides))
    plan = plan_launch(cfg, recipe, overrides, command)
    preflight(cfg, plan)
    if plan.launcher == "ray":
        from mindrl.distributed.ray_launch import run_on_ray

        return run_on_ray(plan)
    argv = node_argv(plan, plan.node_rank, plan.master_addr, plan.master_port)
    print(f"mindrl launch: {plan.launcher} node {plan.node_rank}/{plan.nnodes}: "
          + " ".join(argv), file=sys.stderr, flush=True)
    os.execve(argv[0], argv, worker_env())
    return 0  # not reached
