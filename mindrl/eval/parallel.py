"""Data-parallel evaluation on Ray: K workers, each with its own engine, one shard each.

The driver keeps one chunk in flight per worker and grades/writes each result as it arrives, so
``samples.jsonl`` grows while the run goes (resume works after a crash). A worker that dies
(its process exits, the node drops it) is replaced by a fresh actor, which rebuilds its engine,
and the chunk it held is redone; after ``max_restarts`` replacements of one worker its shard is
lost and the run fails (never a smaller denominator). The merge is deterministic: samples are
keyed by (benchmark, problem id, sample index), not by arrival order.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List

from mindrl.eval.engines import Chunk, EngineSpec
from mindrl.eval.settings import EvalError

# Environment passed to workers: thread counts and quiet logs (PLATFORM.md: 1 thread each).
WORKER_ENV_KEYS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "GLOG_v", "VLLM_LOGGING_LEVEL",
                   "TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_HUB_OFFLINE",
                   "TOKENIZERS_PARALLELISM", "VLLM_ENABLE_V1_MULTIPROCESSING", "RAY_AUTH_MODE",
                   "PYTHONPATH", "MINDRL_CACHE")


class EvalWorker:
    """A Ray actor body: builds an engine once, then generates chunks."""

    def __init__(self, factory: Callable[[EngineSpec], Any], spec: EngineSpec):
        import torch  # noqa: PLC0415 (the engines are torch-based; 1 thread per worker)

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        self.spec = spec
        self.engine = factory(spec)
        self._tok = None

    def _decode(self, ids):
        if self._tok is None:
            from transformers import AutoTokenizer  # noqa: PLC0415

            self._tok = AutoTokenizer.from_pretrained(self.spec.model_dir)
        return self._tok.decode(ids, skip_special_tokens=True)

    def pid(self) -> int:
        return os.getpid()

    def generate(self, chunk: Chunk) -> List[Dict[str, Any]]:
        from mindrl.eval.engines import generate_chunk  # noqa: PLC0415

        return generate_chunk(self.engine, chunk, self.spec, self._decode)


def _ray_init(workers: int, address: str = ""):
    """Ray for the workers: an existing session, a cluster at ``address`` ('auto' or
    host:port), or a new one on this machine. Returns (ray, started_here)."""
    import ray  # noqa: PLC0415

    if ray.is_initialized():
        return ray, False
    from mindrl.distributed.ray_launch import LaunchError, join_ray  # noqa: PLC0415

    try:
        return join_ray(address, key="ray_address", log_to_driver=False,
                        num_cpus=max(2, workers)), True
    except LaunchError as e:
        raise EvalError(str(e)) from None


def run_sharded(shards: List[List[Chunk]], factory, spec: EngineSpec,
                on_chunk: Callable[[Chunk, List[Dict[str, Any]]], None], max_restarts: int = 2,
                log: Callable[[str], None] = print, shutdown: bool = True, address: str = "",
                resource: str = "") -> Dict[int, int]:
    """Generate every chunk of every shard on its own worker; returns restarts per shard.
    ``resource``: an accelerator resource (GPU, NPU) each worker takes one of."""
    ray, started = _ray_init(len(shards), address)
    from ray.exceptions import RayActorError  # noqa: PLC0415

    env = {k: os.environ[k] for k in WORKER_ENV_KEYS if k in os.environ}
    env.setdefault("OMP_NUM_THREADS", "1")
    Actor = ray.remote(num_cpus=1, max_restarts=0)(EvalWorker)
    resource = "" if resource == "CPU" else resource
    extra = {"resources": {resource: 1}} if resource and resource != "GPU" else {}
    if resource == "GPU":
        extra = {"num_gpus": 1}

    def new_actor():
        return Actor.options(runtime_env={"env_vars": env}, **extra).remote(factory, spec)

    restarts = {s: 0 for s in range(len(shards))}
    actors: Dict[int, Any] = {}
    pending: Dict[Any, tuple] = {}            # object ref -> (shard, chunk position)
    try:
        for s, chunks in enumerate(shards):
            if chunks:
                actors[s] = new_actor()
                pending[actors[s].generate.remote(chunks[0])] = (s, 0)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            ref = ready[0]
            s, ci = pending.pop(ref)
            try:
                outs = ray.get(ref)
            except RayActorError as e:
                restarts[s] += 1
                if restarts[s] > max_restarts:
                    raise EvalError(f"worker {s} died {restarts[s]} times; its shard "
                                    f"({sum(len(c) for c in shards[s])} samples) is lost: "
                                    f"{type(e).__name__}") from None
                log(f"[eval] worker {s} died ({type(e).__name__}); restarting it "
                    f"({restarts[s]}/{max_restarts}) and redoing chunk {ci}")
                ray.kill(actors[s], no_restart=True)
                actors[s] = new_actor()
                pending[actors[s].generate.remote(shards[s][ci])] = (s, ci)
                continue
            on_chunk(shards[s][ci], outs)
            if ci + 1 < len(shards[s]):
                pending[actors[s].generate.remote(shards[s][ci + 1])] = (s, ci + 1)
    finally:
        for a in actors.values():
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 (already dead)
                pass
        if started and shutdown:
            ray.shutdown()
    return restarts
