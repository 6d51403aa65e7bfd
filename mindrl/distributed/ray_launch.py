"""Multi-node runs on a Ray cluster: one per-node launcher (msrun or torchrun) on each node.

The driver (``mindrl launch RECIPE distributed.launcher=ray``, on any node of the cluster)

1. joins the cluster (``distributed.ray_address``: ``auto`` is the cluster that ``ray start``
   made on this node; ``local`` starts a one-machine Ray for trying it out),
2. reserves ``nnodes`` bundles of ``{CPU: 1, <NPU|GPU>: nproc}`` with STRICT_SPREAD (one per
   node) and fails with the cluster's resources named when they do not fit in
   ``distributed.ray_placement_timeout_s``,
3. starts a small actor in each bundle, takes node 0's IP as the rendezvous address (and a free
   port there when ``distributed.master_port`` is 0),
4. runs the node's launcher command in each actor (the same checkout and venv path on every
   node, as with a shared filesystem), each line echoed to the driver with a ``[node i]`` prefix
   and kept in ``<log_dir>/ray_node<i>.log``,
5. waits: the first node that exits non-zero stops the others (SIGTERM, so the trainer writes a
   checkpoint, then SIGKILL after a grace period) and its exit code is the run's; Ctrl-C on the
   driver does the same.

Training itself is unchanged: the workers are ordinary torchrun / msrun ranks.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

from mindrl.distributed.plan import REPO, LaunchPlan, node_argv, worker_env
from mindrl.errors import LaunchError  # noqa: F401  (re-exported: ray_launch.LaunchError)

GRACE_S = 60.0
# Environment the driver hands to every node (thread counts, log levels, caches, auth).
FORWARD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "GLOG_v", "VLLM_LOGGING_LEVEL",
               "TRANSFORMERS_VERBOSITY", "HF_HUB_OFFLINE", "HF_HOME", "HF_HUB_DISABLE_PROGRESS_BARS",
               "TOKENIZERS_PARALLELISM", "RAY_AUTH_MODE", "MINDRL_CACHE", "MSRUN_JOIN",
               "MS_DEV_HOST_BLOCKING_RUN", "HCCL_CONNECT_TIMEOUT", "HCCL_IF_IP",
               "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "PYTHONPATH")
FORWARD_PREFIXES = ("NCCL_", "HCCL_", "GLOO_", "VLLM_", "TORCH_", "MS_", "ASCEND_", "MINDRL_")


def forwarded_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k in FORWARD_ENV or k.startswith(FORWARD_PREFIXES)}


class NodeRunner:
    """Ray actor body: runs one node's launcher command as a child process group."""

    def __init__(self, node_rank: int):
        self.node_rank = node_rank
        self.proc: Optional[subprocess.Popen] = None
        self.stopping = False

    def ip(self) -> str:
        import ray  # noqa: PLC0415

        return ray.util.get_node_ip_address()

    def free_port(self) -> int:
        import socket  # noqa: PLC0415

        with socket.socket() as s:
            s.bind(("", 0))
            return s.getsockname()[1]

    def run(self, argv: List[str], cwd: str, env: Dict[str, str], log_path: str) -> int:
        host = self.ip()
        for need in (argv[0], cwd):
            if not os.path.exists(need):
                print(f"[node {self.node_rank}] {need} does not exist on {host}: mindrl on Ray "
                      "expects the same checkout and venv path on every node", flush=True)
                return 2
        full_env = dict(os.environ)
        full_env.update(env)
        # the launcher's own venv first on PATH (msrun starts `python` from PATH)
        full_env = worker_env(full_env, bindir=str(Path(argv[0]).parent))
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"$ {' '.join(argv)}\n")
            if self.stopping:              # terminate() came first: never start
                return 143
            self.proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True, bufsize=1,
                                         errors="replace", start_new_session=True)
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                print(f"[node {self.node_rank}] {line}", end="", flush=True)
            return self.proc.wait()

    def terminate(self, grace_s: float = GRACE_S) -> Optional[int]:
        """SIGTERM the node's process group (trainers that finish their step checkpoint on it,
        best effort), SIGKILL after grace."""
        self.stopping = True
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            return self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()
        except ProcessLookupError:
            return self.proc.poll()


def unreachable(address: str, timeout: float = 5.0) -> Optional[str]:
    """Why a ``host:port`` Ray address cannot be reached (None when it answers, or for 'auto' /
    'local'). ``ray.init`` itself retries an unreachable GCS for minutes before failing."""
    import socket  # noqa: PLC0415

    if address in ("", "auto", "local") or address.startswith("ray://"):
        return None
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return f"{address!r} is not host:port"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return None
    except OSError as e:
        return f"{address} does not answer ({e})"


def join_ray(address: str, *, key: str = "distributed.ray_address", log_to_driver: bool = True,
             num_cpus: Optional[int] = None):
    """``ray`` connected to the cluster at ``address`` ('auto', host:port), or a new one-machine
    Ray for 'local' / '' (``num_cpus``); a cluster that cannot be reached raises
    :class:`LaunchError` naming ``key`` at once (``ray.init`` would retry for minutes)."""
    local = address in ("", "local")
    why = None if local else unreachable(address)
    if why:
        raise LaunchError(f"no Ray cluster at {key}={address!r}: {why}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")     # read at import: every node's own lines
    import ray  # noqa: PLC0415

    kwargs = dict(include_dashboard=False, configure_logging=False, log_to_driver=log_to_driver)
    if local:       # a new instance, even when another run's Ray is up on this machine
        ray.init(address="local", num_cpus=num_cpus, **kwargs)
        return ray
    try:
        ray.init(address=address, **kwargs)
    except ConnectionError as e:
        raise LaunchError(f"no Ray cluster at {key}={address!r} ({e}); start one with `ray "
                          "start --head` on the first node and `ray start --address=<head>:6379` "
                          "on the others") from e
    return ray


def _place(ray, plan: LaunchPlan):
    from ray.util.placement_group import placement_group  # noqa: PLC0415

    resource = str(plan.ray.get("resource") or "")
    bundle = {"CPU": 1.0}
    if resource:
        bundle[resource] = float(plan.nproc)
    pg = placement_group([dict(bundle) for _ in range(plan.nnodes)], strategy="STRICT_SPREAD")
    timeout = float(plan.ray.get("placement_timeout_s", 120))
    ready, _ = ray.wait([pg.ready()], timeout=timeout)
    if not ready:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        have = "; ".join(
            f"{n.get('NodeManagerAddress')}: "
            + str({k: v for k, v in (n.get("Resources") or {}).items()
                   if not k.startswith("node:") and "memory" not in k})
            for n in nodes)
        ray.util.remove_placement_group(pg)
        raise LaunchError(
            f"Ray cannot place {plan.nnodes} node(s) with {bundle} each on distinct nodes within "
            f"{timeout:.0f} s (distributed.nnodes={plan.nnodes}, distributed.nproc={plan.nproc}, "
            f"distributed.ray_resource={resource or 'none'}); the cluster has {len(nodes)} "
            f"node(s): {have}")
    return pg, bundle


def run_on_ray(plan: LaunchPlan, log=print) -> int:
    """Run the plan's per-node launcher on ``plan.nnodes`` Ray nodes; returns the exit code."""
    ray = join_ray(str(plan.ray.get("address", "auto")))
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # noqa: PLC0415

    env = forwarded_env()
    actors, pg, started = [], None, False
    stopping = {"signal": None}

    def on_signal(signum, _frame):
        stopping["signal"] = signum

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        pg, bundle = _place(ray, plan)
        Actor = ray.remote(NodeRunner)
        for i in range(plan.nnodes):
            extra = {k: v for k, v in bundle.items() if k not in ("CPU", "GPU")}
            actors.append(Actor.options(
                num_cpus=1, num_gpus=bundle.get("GPU", 0), resources=extra or None,
                max_concurrency=4, max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=i)).remote(i))
        ips = ray.get([a.ip.remote() for a in actors])
        port = plan.master_port or ray.get(actors[0].free_port.remote())
        log(f"mindrl launch: ray, {plan.nnodes} node(s) x {plan.nproc} worker(s) "
            f"({plan.node_launcher}); rendezvous {ips[0]}:{port}; nodes {', '.join(ips)}")
        if stopping["signal"] is not None:
            log(f"mindrl launch: signal {stopping['signal']} before the start: nothing started")
            return 128 + int(stopping["signal"])
        runs = {}
        started = True
        for i, a in enumerate(actors):
            argv = node_argv(plan, i, ips[0], port)
            log_path = str(Path(plan.log_dir) / f"ray_node{i}.log")
            runs[a.run.remote(argv, str(REPO), env, log_path)] = i
        pending, rc = list(runs), 0
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            if stopping["signal"] is not None:
                log(f"mindrl launch: signal {stopping['signal']}: stopping every node")
                rc = 128 + int(stopping["signal"])
                break
            for ref in done:
                try:
                    code = int(ray.get(ref))
                except ray.exceptions.RayError as e:     # the node's actor or raylet died
                    log(f"mindrl launch: node {runs[ref]} lost: {type(e).__name__}: {e}")
                    code = 1
                if code != 0:
                    log(f"mindrl launch: node {runs[ref]} exited with {code}; stopping the others")
                    rc = code
            if rc:
                break
        return rc
    finally:
        if started:      # stop what still runs (also after an error above) before the kill:
            #              ray.kill would orphan the launchers' worker processes
            try:
                ray.get([a.terminate.remote() for a in actors], timeout=GRACE_S + 30)
            except Exception as e:  # noqa: BLE001 (the actors are killed below either way)
                log(f"mindrl launch: stopping the nodes: {type(e).__name__}: {e}")
        for s, h in old.items():
            signal.signal(s, h)
        for a in actors:
            ray.kill(a)
        if pg is not None:
            ray.util.remove_placement_group(pg)
        ray.shutdown()

