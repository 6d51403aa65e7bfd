"""Asynchronous rollouts on Ray (``rollout.mode=async_ray``): ``rollout.workers`` actors, each
with its own engine, sample and score groups (one prompt x ``rollout.n`` samples) while the
trainer updates; a step takes its batch as soon as ``train.prompts_per_step`` groups are ready.

Topology (one trainer process, the Ray driver)::

    trainer --ray.put(each changed tensor)--> WeightStore (version, {name: (changed at, ref)})
    trainer --run(group)--> RolloutWorker i: load weights_latest if newer, generate, score
            <--(group, version, rollouts, scores)-- bounded queue (in flight + ready)
    step s: take the prompts_per_step ready groups of the oldest versions; top up the queue

Staleness (theta_v = the policy after v updates; a group's version is the v the worker held
when it started the group): the batch of step s trains theta_s, so a sample of version v lags
s - v updates. With k = ``rollout.max_staleness`` and B = ``train.prompts_per_step``:

- not started: groups are consumed oldest first, B per step, so the group at queue position p
  (0-based, counted before step s takes its batch) trains at step s + p // B, and a group
  started now (version >= s) lags at most p // B. The queue (groups in flight + ready) is
  therefore kept below min(``rollout.queue_size``, (k + 1) x B) before a step takes its batch
  and below min(queue_size, k x B) after, while that step updates;
- dropped: a finished group that still lags more than k when a step looks at it (a slow group
  overtaken by later ones) is dropped, counted in ``rollout/dropped_groups``, and its prompt
  is sampled again.

Weight sync: at the start of each step the trainer publishes its weights as a new version:
every tensor that changed since the last version goes into the object store (one ``ray.put``
each), and a small :class:`WeightStore` actor keeps the manifest, name -> (version it last
changed at, ref). Each worker asks the store for the latest version when it starts a group and
fetches and loads only the tensors that changed after the version it holds (all of them after a
restart). A group may so start with a newer policy than the one it was issued under, which
only lowers its lag.

Engines (:func:`worker_engine`, each worker process holds its own model): ``backend=torch``
with ``rollout.engine=native`` runs the native torch engine; ``backend=mindspore`` with
``native`` runs the native MindSpore sampler over a fresh copy of the policy
(:func:`mindrl.backends.mindspore.backend.rollout_sampler`: one MindSpore runtime thread per
worker, ``train.threads``, and the host pipeline in the calling thread, as in the trainer; each
worker compiles its own prefill/decode graphs once per bucket, in its first groups);
``rollout.engine=vllm`` (either backend) runs an in-process vLLM engine
(:class:`mindrl.rollout.vllm_engine.VLLMEngine`, oneDNN weight repacking off so reloads reach
the linear layers). The pushed weights are the torch backend's tensors (``named_tensors``) or
the MindSpore backend's float32 NumPy arrays (``named_weights``), under Hugging Face names; each
engine's ``load_weights`` takes either.

Placement: with ``device=cpu`` every process shares the host's cores. With ``device=cuda`` or
``ascend`` the trainer keeps the accelerator it was started on and worker i runs on
``rollout.worker_devices[i % len]``: its process sees only that one (``CUDA_VISIBLE_DEVICES`` /
``ASCEND_RT_VISIBLE_DEVICES`` through the actor's runtime environment, Ray's own setting of
them turned off), so its engine's device 0 is it (:func:`worker_options`).

Loss: the workers' per-token log-probs are the behaviour log-probs (``Rollouts.logprobs``); as
with ``rollout.async_ahead``, token-level truncated IS against them is turned on unless
``algorithm.rollout_correction`` or ``algorithm.tis_cap`` says otherwise
(:func:`mindrl.trainer.async_rollout.effective_config`).

Faults: workers are Ray actors with ``max_restarts=rollout.max_restarts``. When a worker's
process dies, its groups in flight fail with ``RayActorError``; they are issued again (to the
workers alive first), the worker is probed until Ray has restarted it (its ``__init__`` reloads
the model; the next group loads the latest weights), and the run goes on.

Metrics per step: ``rollout/staleness`` (mean) and ``rollout/staleness_max`` of the batch's
samples, ``rollout/queue_ready`` / ``rollout/queue_in_flight`` (groups, when the step took its
batch), ``rollout/dropped_groups`` (this step), ``rollout/groups_reissued`` and
``rollout/worker_restarts`` (totals), ``time/trainer_idle`` (seconds the step waited for
groups), ``time/worker_idle`` (idle seconds per worker that ended during this step: a worker
with an empty queue waits for the trainer).

Checkpoints hold the queue (:meth:`RayRollout.state`): the scored groups ready to train, and
the prompts of the groups in flight, which a resumed run samples again (the first step after a
resume reports ``rollout/ready_from_checkpoint`` and ``rollout/resampled_after_resume``).

Partial rollouts (``rollout.partial_rollouts``, :func:`sample_partial`): a generation still
running when a newer version is published stops at a token boundary, loads it and continues;
each token keeps its behaviour log-prob and its version (``rollout/token_staleness``).

LoRA: a version is the adapters alone; each worker merges them into its own copy of the adapted
base weights (:meth:`RolloutWorker.refresh`), so the push is a few percent of the model.

Not yet: several trainer ranks, backend=mindformers.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import pickle
import sys
import time
from typing import Deque, Dict, List, Optional, Tuple

import numpy as np

log = logging.getLogger("mindrl.train")

PROBE_INTERVAL_S = 0.5          # between checks of a worker that Ray is restarting
PROBE_LIMIT = 240               # give a worker up after this many failed checks (~2 min)


@dataclasses.dataclass
class Group:
    """One prompt to sample ``rollout.n`` times."""

    gid: int                    # issue order (never reused)
    row: Dict                   # the data row (columns for the reward)
    prompt_ids: List[int]
    seed: int
    attempts: int = 0           # issues that failed because a worker died


@dataclasses.dataclass
class Finished:
    """A sampled, scored group from a worker."""

    group: Group
    version: int                # the policy version (trainer step) it was sampled with
    rollouts: object            # Rollouts, n rows, group_index 0
    scored: object              # mindrl.trainer.base.Scored
    worker: int
    pid: int
    idle_s: float               # the worker's idle time before it started this group
    busy_s: float
    # partial rollouts: the policy version of each response token, per row (empty: every token
    # is of ``version``), and how many times the group's generation was resumed
    token_versions: List[np.ndarray] = dataclasses.field(default_factory=list)
    resumes: int = 0


def token_versions(f: Finished) -> List[np.ndarray]:
    """The policy version of each response token of ``f``, per row."""
    if f.token_versions:
        return list(f.token_versions)
    return [np.full(len(r), f.version, np.int64) for r in f.rollouts.response_ids]


def lag_ok(step: int, version: int, k: int) -> bool:
    """A sample of policy ``version`` may train the update of ``step`` (lag <= k)."""
    return 0 <= step - version <= k


def queue_cap(k: int, batch: int, queue_size: int, after_take: bool) -> int:
    """The most groups in flight + ready: before a step takes its batch (the batch included)
    and after (while the step updates). See the module docstring."""
    depth = (k if after_take else k + 1) * batch
    return min(queue_size, depth) if queue_size else depth


class WeightStore:
    """The latest (version, [ref to the weights]) (a Ray actor)."""

    def __init__(self):
        self.version, self.boxed = -1, None

    def publish(self, version: int, boxed) -> int:
        self.version, self.boxed = version, boxed
        return version

    def latest(self):
        return self.version, self.boxed

    def latest_version(self) -> int:
        return self.version


# the variable that makes one accelerator visible to a process, and the one that keeps Ray
# from setting it itself (Ray sets it for actors that request its GPU resources; the workers
# request none: their placement is rollout.worker_devices)
VISIBLE = {"cuda": ("CUDA_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"),
           "ascend": ("ASCEND_RT_VISIBLE_DEVICES",
                      "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES")}


def worker_options(cfg, index: int) -> Dict:
    """Ray actor options of rollout worker ``index``: on an accelerator, its process sees only
    ``rollout.worker_devices[index % len]`` (so its engine's device 0 is that one)."""
    devices = list(cfg.rollout.worker_devices)
    if cfg.device not in VISIBLE or not devices:
        return {}
    visible, noset = VISIBLE[cfg.device]
    dev = str(devices[index % len(devices)])
    return {"runtime_env": {"env_vars": {visible: dev, noset: "1"}}}


def same_tensor(a, b) -> bool:
    """Bitwise-equal tensors (torch) or arrays (NumPy) of the same shape and dtype."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    import torch

    return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)


def adapted_names(adapters) -> set:
    """The base weights (``<path>.weight``) that LoRA adapters ``<path>.lora_A.weight`` adapt."""
    tail = ".lora_A.weight"
    return {k[:-len(tail)] + ".weight" for k in adapters if k.endswith(tail)}


def base_weights(model_path: str, names) -> Dict[str, np.ndarray]:
    """float32 arrays of the tensors ``names`` in the safetensors files of ``model_path``."""
    from pathlib import Path

    from safetensors import safe_open

    out: Dict[str, np.ndarray] = {}
    for f in sorted(Path(model_path).glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for k in set(st.keys()) & set(names):
                out[k] = st.get_tensor(k).float().numpy()
    missing = sorted(set(names) - set(out))
    if missing:
        raise RuntimeError(f"{model_path}: the base model has no {missing[:3]} (adapted by LoRA)")
    return out


def sample_partial(engine, prompt_ids: List[int], sampling, hold: int, refresh, newer):
    """Partial rollouts: ``sampling.n`` samples of one prompt whose generation is interrupted
    when the trainer publishes a newer policy and continued under it.

    ``hold``: the policy version the engine holds now; ``refresh()`` loads the latest policy
    into the engine and returns its version; ``newer()`` is True once a version newer than the
    engine's is published. Native engines take ``newer`` as their ``interrupt`` (polled between
    decode steps: the rows still decoding stop at that token boundary); an engine without it
    (vLLM) decodes segments of ``check_tokens`` tokens (``newer.check_tokens``) and looks in
    between. The rows left are continued by one call over their prefixes (prompt + tokens so
    far, ``n = 1`` each), so every token keeps the log-prob of the policy that sampled it;
    vLLM's prefix cache (on in the workers) serves the prefixes' full blocks again.

    Returns (Rollouts of the n rows, version of each response token per row, resumes: the
    times the generation went on under a newer policy than before; a segment boundary without
    a new version is not one)."""
    import inspect

    from mindrl.types import Rollouts

    n, T = sampling.n, sampling.max_new_tokens
    params = inspect.signature(engine.generate).parameters
    native = "interrupt" in params
    resp: List[List[int]] = [[] for _ in range(n)]
    logp: List[List[np.ndarray]] = [[] for _ in range(n)]
    vers: List[List[np.ndarray]] = [[] for _ in range(n)]
    reasons = ["length"] * n
    todo, resumes, calls, version = list(range(n)), 0, 0, hold
    prompts, sp = [list(prompt_ids)], sampling          # the first call: n samples of the prompt
    while True:
        kw = {}
        if native:
            kw["interrupt"] = newer
            if "done_tokens" in params and resumes:
                kw["done_tokens"] = [len(resp[r]) for r in todo]
        else:
            sp = dataclasses.replace(sp, max_new_tokens=min(sp.max_new_tokens,
                                                            newer.check_tokens))
        ro = engine.generate(prompts, sp, **kw)
        left = []
        for j, r in enumerate(todo):
            room = T - len(resp[r])
            ids = list(ro.response_ids[j][:room])
            resp[r] += ids
            logp[r].append(np.asarray(ro.logprobs[j][:room], np.float32))
            vers[r].append(np.full(len(ids), version, np.int64))
            if ro.finish_reasons[j] == "stop" and len(ids) == len(ro.response_ids[j]):
                reasons[r] = "stop"
            elif len(resp[r]) < T:
                left.append(r)              # interrupted, or a segment ended: go on
        todo = left
        if not todo:
            break
        calls += 1                          # the rest go on under the latest policy
        latest = refresh()
        resumes += latest != version        # a resume = a new policy, not a segment boundary
        version = latest
        prompts = [list(prompt_ids) + resp[r] for r in todo]
        seed = None if sampling.seed is None else sampling.seed + 7919 * calls
        sp = dataclasses.replace(sampling, n=1, seed=seed,
                                 max_new_tokens=max(T - len(resp[r]) for r in todo))
    texts = []
    tok = getattr(engine, "tokenizer", None)
    if tok is not None:
        texts = [tok.decode(r, skip_special_tokens=True) for r in resp]
    ro = Rollouts(prompt_ids=[list(prompt_ids) for _ in range(n)], response_ids=resp,
                  logprobs=[np.concatenate(x) for x in logp], finish_reasons=reasons,
                  group_index=np.zeros(n, np.int64), texts=texts)
    return ro, [np.concatenate(v) for v in vers], resumes


class NewerPolicy:
    """``newer()`` polled by a generating worker: asks the :class:`WeightStore` every
    ``check_tokens`` calls whether a version newer than ``worker.version`` is out."""

    def __init__(self, worker, check_tokens: int):
        self.worker, self.check_tokens, self.calls = worker, max(1, int(check_tokens)), 0

    def __call__(self) -> bool:
        import ray

        self.calls += 1
        if self.calls % self.check_tokens:
            return False
        return ray.get(self.worker.store.latest_version.remote()) > self.worker.version


def worker_engine(cfg, model_path: str):
    """The engine of one rollout worker process, by ``backend`` and ``rollout.engine``: vLLM
    (either backend; weights arrive as torch tensors or NumPy arrays), the native torch engine,
    or the native MindSpore sampler over the worker's own copy of the model. A worker's engine
    never runs LoRA itself: with ``model.lora`` on it receives merged weights (see
    :meth:`RolloutWorker.refresh`)."""
    if cfg.model.lora.enabled:
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(
            cfg.model, lora=dataclasses.replace(cfg.model.lora, enabled=False)))
    if cfg.rollout.engine == "vllm":
        from mindrl.rollout.vllm_engine import VLLMEngine

        return VLLMEngine(cfg, model_path)
    if cfg.backend == "mindspore":
        from mindrl.backends.mindspore.backend import rollout_sampler

        return rollout_sampler(cfg, model_path)
    import torch

    from mindrl.rollout.native_torch import NativeTorchEngine

    torch.set_num_threads(max(1, cfg.train.threads))
    engine = NativeTorchEngine.from_config(cfg, model_path)
    engine.model.requires_grad_(False)
    return engine


class RolloutWorker:
    """One engine and one reward scorer (a Ray actor): samples and scores a group per call."""

    def __init__(self, args, index: int):
        cfg, model_path, store_name, sys_path, setup = args
        import ray

        store = ray.get_actor(store_name)   # by name: a handle in the arguments makes Ray log
        env = worker_options(cfg, index).get("runtime_env", {}).get("env_vars", {})
        os.environ.update(env)          # before any framework import (Ray sets them too)
        self.visible = {k: os.environ.get(k) for k in env}
        for p in sys_path:              # the driver's imports (dotted reward paths, tests)
            if p not in sys.path:
                sys.path.append(p)
        from rewards import build_scorer

        self.engine = worker_engine(cfg, model_path)
        if setup is not None:
            pickle.loads(setup)(getattr(self.engine, "model", self.engine))
        self.scorer = build_scorer(cfg.reward)
        self.index, self.store, self.version = index, store, -1
        # LoRA: the adapted layers' base weights (read once) and the adapters as last loaded
        self.model_path, self.base, self.adapters = model_path, None, {}
        self.partial = cfg.rollout.partial_rollouts
        self.check_tokens = cfg.rollout.partial_check_tokens
        self.last_end = time.perf_counter()

    def pid(self) -> int:
        return os.getpid()

    def engine_name(self) -> str:
        return type(self.engine).__name__

    def placement(self) -> str:
        """Where this worker's engine runs: its device, and the visible-devices variable."""
        where = str(getattr(self.engine, "device", "") or "")
        env = ", ".join(f"{k}={v}" for k, v in self.visible.items() if "NOSET" not in k)
        return " ".join(x for x in (where, f"({env})" if env else "") if x) or "host"

    def run(self, group: Group, sampling) -> Finished:
        from mindrl.trainer.base import score_rollouts

        t0 = time.perf_counter()
        idle = t0 - self.last_end
        version = self.refresh()
        versions, resumes = [], 0
        if self.partial:
            ro, versions, resumes = sample_partial(
                self.engine, group.prompt_ids, sampling, version, self.refresh,
                NewerPolicy(self, self.check_tokens))
        else:
            ro = self.engine.generate([group.prompt_ids], sampling)
        sc = score_rollouts(self.scorer, [group.row], ro)
        self.last_end = time.perf_counter()
        return Finished(group, version, ro, sc, self.index, os.getpid(), idle,
                        self.last_end - t0, versions, resumes)

    def refresh(self) -> int:
        """Load the latest published policy if it is newer than the engine's; its version. Only
        the tensors that changed after the engine's version are fetched and loaded."""
        import ray

        if ray.get(self.store.latest_version.remote()) == self.version:
            return self.version                 # the cheap question first (no manifest)
        version, boxed = ray.get(self.store.latest.remote())
        if version != self.version:
            push = boxed[0]
            need = [n for n, (changed, _) in push["tensors"].items() if changed > self.version]
            fresh = dict(zip(need, ray.get([push["tensors"][n][1] for n in need])))
            if push["kind"] == "adapters":      # LoRA: W0 + s B A, for the adapted layers only
                from mindrl.backends.lora import merge

                self.adapters.update(fresh)
                if self.base is None:
                    self.base = base_weights(self.model_path, adapted_names(self.adapters))
                moved = adapted_names({n.replace(".lora_B.", ".lora_A."): 0 for n in fresh})
                if moved:
                    self.engine.load_weights(merge(((n, self.base[n]) for n in sorted(moved)),
                                                   self.adapters, push["scale"]))
            elif fresh:
                self.engine.load_weights(fresh.items())
            self.version = version
        return self.version

    def close(self) -> None:
        close = getattr(self.scorer, "close", None)
        if close is not None:
            close()


class RayRollout:
    """The queue of scored groups behind one :class:`mindrl.trainer.rl.RLTrainer` (same
    interface as :class:`mindrl.trainer.async_rollout.AheadRollout`)."""

    process = True      # validation samples with the trainer's own engine: nothing to settle

    def __init__(self, trainer):
        import ray

        self.tr = trainer
        cfg = trainer.cfg
        r = cfg.rollout
        self.k, self.B, self.queue_size = r.max_staleness, trainer.local_prompts, r.queue_size
        self.partial = r.partial_rollouts
        self.own_ray = not ray.is_initialized()
        if self.own_ray:            # its own one-machine Ray, whatever else runs here
            from mindrl.distributed.ray_launch import join_ray

            join_ray("local", log_to_driver=False, num_cpus=max(2, os.cpu_count() or 1))
        import uuid

        self.store_name = f"mindrl-weights-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.store = ray.remote(num_cpus=0)(WeightStore).options(name=self.store_name).remote()
        actor = ray.remote(RolloutWorker)
        # the constructor's arguments are plain values (the store by its name): they travel
        # inside the actor's creation task, which a restart replays; an ObjectRef or an actor
        # handle among them would make Ray print an `E core_worker.cc` line about restarts
        # (a trainer's ``rollout_worker_setup``, a picklable fn(model), runs in each worker
        # once its model is loaded: benchmarks fix the response lengths with it)
        # (pickled apart, by value when it lives in __main__: it may need the driver's sys.path)
        from ray import cloudpickle

        setup = getattr(trainer, "rollout_worker_setup", None)
        self._init_args = (cfg, str(trainer.model_path), self.store_name, list(sys.path),
                           None if setup is None else cloudpickle.dumps(setup))
        self.workers = [actor.options(num_cpus=0, max_restarts=r.max_restarts,
                                      max_task_retries=0, **worker_options(cfg, i))
                        .remote(self._init_args, i) for i in range(r.workers)]
        self.pids = ray.get([w.pid.remote() for w in self.workers])
        self.engine_names = ray.get([w.engine_name.remote() for w in self.workers])
        self.placements = ray.get([w.placement.remote() for w in self.workers])
        log.info("rollout.mode=async_ray: %d rollout workers (%s)", len(self.workers),
                 ", ".join(f"{n} on {p}" for n, p in zip(self.engine_names, self.placements)))
        self.version: Optional[int] = None      # the version published last
        self.push_mb, self.push_skipped = 0.0, 0   # the last version: MB sent, tensors kept
        self._last: Dict[str, object] = {}      # the tensors as last published
        self._tensors: Dict[str, Tuple[int, object]] = {}  # name -> (changed at, ref)
        self.in_flight: Dict[object, Tuple[Group, int]] = {}    # ref -> (group, worker)
        self.per_worker = [0] * r.workers       # groups in flight on each worker
        self.down: Dict[int, Tuple[object, int]] = {}  # worker -> (probe ref, failed probes)
        self.dead: set = set()
        self.ready: List[Finished] = []
        self.retry: Deque[Group] = collections.deque()
        self.rows: Deque[Dict] = collections.deque()
        self.next_gid = 0
        self.dropped = self.reissued = self.restarts = 0
        self.step_dropped, self.step_idle = 0, 0.0
        self.lags: List[np.ndarray] = []       # per step: each sample's version lag
        self.sources: List[List[Tuple[int, int]]] = []  # per step: (worker, pid) of each group
        self.from_checkpoint: Optional[Dict[str, int]] = None   # set by load_state

    # ----------------------------------------------------------------- one step
    def collect(self):
        """(rows, rollouts, scores, metrics) of this step: its B groups of the oldest versions;
        then tops the queue up so that the workers sample while this step updates."""
        from mindrl.trainer.base import Scored
        from mindrl.types import Rollouts

        tr = self.tr
        m: Dict[str, float] = {}
        t0 = time.perf_counter()
        self.publish()
        m["time/weight_sync"] = time.perf_counter() - t0
        m["rollout/push_mb"] = self.push_mb
        m["rollout/push_unchanged"] = float(self.push_skipped)
        self.step_dropped, self.step_idle = 0, 0.0
        t0 = time.perf_counter()
        self.ready = [f for f in self.ready if self._keep(f)]  # waited past k updates
        self.fill(after_take=False)
        self.harvest(block=False)
        while len(self.ready) < self.B:
            self.harvest(block=True)
            self.fill(after_take=False)
        m["time/trainer_idle"] = time.perf_counter() - t0
        m["time/rollout"] = m["time/trainer_idle"]
        m["rollout/queue_ready"] = float(len(self.ready))
        m["rollout/queue_in_flight"] = float(len(self.in_flight))
        self.ready.sort(key=lambda f: (f.version, f.group.gid))
        batch, self.ready = self.ready[:self.B], self.ready[self.B:]
        self.fill(after_take=True)
        lag = np.concatenate([np.full(len(f.rollouts), tr.step - f.version, np.int64)
                              for f in batch])
        self.lags.append(lag)
        self.sources.append([(f.worker, f.pid) for f in batch])
        m["rollout/staleness"] = float(lag.mean())
        m["rollout/staleness_max"] = float(lag.max())
        if self.partial:        # per token: later tokens of a resumed group lag less
            tok_lag = np.concatenate([tr.step - v for f in batch for v in token_versions(f)])
            m["rollout/token_staleness"] = float(tok_lag.mean()) if len(tok_lag) else 0.0
            m["rollout/resumed_groups"] = float(sum(f.resumes > 0 for f in batch))
            m["rollout/resumes"] = float(sum(f.resumes for f in batch))
        m["rollout/dropped_groups"] = float(self.step_dropped)
        m["rollout/groups_reissued"] = float(self.reissued)
        m["rollout/worker_restarts"] = float(self.restarts)
        m["time/worker_idle"] = self.step_idle / max(1, len(self.workers))
        if self.from_checkpoint is not None:        # the first step after a resume
            m["rollout/ready_from_checkpoint"] = float(self.from_checkpoint["ready"])
            m["rollout/resampled_after_resume"] = float(self.from_checkpoint["resampled"])
            self.from_checkpoint = None
        m["time/reward"] = 0.0                  # scored in the workers
        rows = [f.group.row for f in batch]
        ro = Rollouts.concat([f.rollouts for f in batch])
        sc = Scored.concat([f.scored for f in batch])
        return rows, ro, sc, m

    def publish(self) -> None:
        """Publish this version: each tensor that changed since the last version goes into the
        object store (one ``ray.put`` each); the store's manifest maps every name to (the
        version it last changed at, its ref), so a worker fetches only what changed after the
        version it holds, however many versions it skipped."""
        import ray

        if self.version == self.tr.step:
            return
        push = self.payload()
        changed = {n: w for n, w in push["weights"].items()
                   if n not in self._last or not same_tensor(self._last[n], w)}
        for n, w in changed.items():
            self._tensors[n] = (self.tr.step, ray.put(w))
        self._last = push["weights"]
        self.push_mb = sum(w.nbytes for w in changed.values()) / 1e6
        self.push_skipped = len(push["weights"]) - len(changed)
        manifest = {"kind": push["kind"], "scale": push.get("scale"),
                    "tensors": dict(self._tensors)}
        ray.get(self.store.publish.remote(self.tr.step, [manifest]))
        self.version = self.tr.step

    def payload(self) -> Dict:
        """What one version sends: {"kind": "full", "weights": {HF name: tensor or array}}, or
        with LoRA {"kind": "adapters", "weights": {<path>.lora_A/B.weight: float32 array},
        "scale": alpha / r}: the adapters alone (the base never changes; each worker merges
        them into its own copy of the adapted base weights)."""
        backend = self.tr.backend
        if getattr(backend, "lora", None):
            from mindrl.backends.lora import scale

            if hasattr(backend, "named_tensors"):
                from mindrl.backends.torch.lora import adapter_tensors

                adapters = {n: t.detach().float().cpu().numpy().copy()
                            for n, t in adapter_tensors(backend.model)}
            else:
                from mindrl.backends.mindspore.lora import adapter_arrays

                adapters = dict(adapter_arrays(backend.model))
            return {"kind": "adapters", "weights": adapters, "scale": scale(backend.lora)}
        if hasattr(backend, "named_tensors"):       # torch: tensors in the model's dtype
            weights = {name: t.detach().to("cpu").clone() for name, t in backend.named_tensors()}
        else:                                       # MindSpore: float32 NumPy, HF names
            weights = dict(backend.named_weights())
        return {"kind": "full", "weights": weights}

    def fill(self, after_take: bool) -> None:
        """Issue groups while the queue is below its cap (see :func:`queue_cap`)."""
        cap = queue_cap(self.k, self.B, self.queue_size, after_take)
        while len(self.in_flight) + len(self.ready) < cap:
            w = self._pick_worker()
            if w is None:
                return
            group = self.retry.popleft() if self.retry else self._new_group()
            self._issue(group, w)

    def _new_group(self) -> Group:
        if not self.rows:
            self.rows.extend(self.tr._take_rows())
        row = self.rows.popleft()
        gid, self.next_gid = self.next_gid, self.next_gid + 1
        seed = (self.tr.cfg.rollout.seed * 1_000_003 + gid) * 64 + self.tr.rank
        return Group(gid, row, self.tr.encode(row["problem"]), seed)

    def _pick_worker(self) -> Optional[int]:
        alive = [i for i in range(len(self.workers)) if i not in self.down and
                 i not in self.dead]
        if not alive:
            return None
        return min(alive, key=lambda i: self.per_worker[i])

    def _issue(self, group: Group, w: int) -> None:
        sp = self.tr.sampling(seed=group.seed)
        ref = self.workers[w].run.remote(group, sp)
        self.in_flight[ref] = (group, w)
        self.per_worker[w] += 1

    def harvest(self, block: bool) -> None:
        """Move finished groups into the ready list (dropping those too stale to train this
        step); re-issue the groups of dead workers; probe restarting ones."""
        import ray

        refs = list(self.in_flight) + [p for p, _ in self.down.values()]
        if not refs:
            if block:
                self._no_workers()
            return
        if block:
            done, _ = ray.wait(refs, num_returns=1,
                               timeout=PROBE_INTERVAL_S if self.down else None)
            done += ray.wait(refs, num_returns=len(refs), timeout=0)[0]
        else:
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        probes = {p: w for w, (p, _) in self.down.items()}
        for ref in dict.fromkeys(done):
            if ref in probes:
                self._probe_done(ref, probes[ref])
                continue
            group, w = self.in_flight.pop(ref)
            self.per_worker[w] -= 1
            try:
                f: Finished = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
                self._worker_failed(group, w, e)
                continue
            except ray.exceptions.RayTaskError as e:
                raise RuntimeError(f"rollout.mode=async_ray: worker {w} failed:\n{e}") from None
            self.step_idle += f.idle_s
            if f.pid != self.pids[w]:       # Ray restarted it; the group waited for that
                self._restarted(w, f.pid)
            if self._keep(f):
                self.ready.append(f)
        if block and not self.in_flight and self.down:
            time.sleep(PROBE_INTERVAL_S / 5)

    def _keep(self, f: Finished) -> bool:
        """False (and the prompt queued to be sampled again) when ``f`` is too stale to train
        this step."""
        if lag_ok(self.tr.step, f.version, self.k):
            return True
        self.dropped += 1
        self.step_dropped += 1
        f.group.seed += 7919                    # sampled again, with other draws
        self.retry.append(f.group)
        return False

    def _worker_failed(self, group: Group, w: int, err) -> None:
        group.attempts += 1
        self.reissued += 1
        self.retry.appendleft(group)
        if w not in self.down and w not in self.dead:
            log.warning("rollout worker %d died (%s); re-issuing its groups, waiting for Ray to "
                        "restart it", w, type(err).__name__)
            self.down[w] = (self.workers[w].pid.remote(), 0)

    def _probe_done(self, ref, w: int) -> None:
        import ray

        try:
            pid = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            _, failed = self.down[w]
            if failed + 1 >= PROBE_LIMIT:
                del self.down[w]
                self.dead.add(w)
                log.warning("rollout worker %d did not come back; going on without it", w)
                return
            time.sleep(PROBE_INTERVAL_S)
            self.down[w] = (self.workers[w].pid.remote(), failed + 1)
            return
        del self.down[w]
        if pid != self.pids[w]:
            self._restarted(w, pid)

    def _restarted(self, w: int, pid: int) -> None:
        self.restarts += 1
        self.pids[w] = pid
        log.warning("rollout worker %d restarted (pid %d)", w, pid)

    def _no_workers(self) -> None:
        raise RuntimeError(f"rollout.mode=async_ray: all {len(self.workers)} rollout workers "
                           "died and were not restarted (rollout.max_restarts="
                           f"{self.tr.cfg.rollout.max_restarts})")

    # ----------------------------------------------------------------- validation, state
    def settle(self) -> None:
        """Nothing: the workers never touch the trainer's engine."""

    def state(self) -> Optional[Dict]:
        """The queue, for the checkpoint (JSON): the scored groups ready to train (kept, and
        trained after a resume if their lag still allows), and the prompts of the groups in
        flight or waiting to be issued again (sampled again after a resume, counted in
        ``rollout/resampled_after_resume``), in their order. The data stream's position in the
        checkpoint is past every one of them, so a resumed run neither loses nor repeats a
        prompt."""
        from mindrl.trainer.async_rollout import rollouts_to_json

        def nan_none(a):
            return [None if x != x else float(x) for x in np.asarray(a, np.float64)]

        self.harvest(block=False)        # the groups that finished during this step's update

        ready = [{"group": dataclasses.asdict(f.group), "version": f.version, "worker": f.worker,
                  "pid": f.pid, "rollouts": rollouts_to_json(f.rollouts),
                  "total": nan_none(f.scored.total),
                  "components": {k: nan_none(v) for k, v in f.scored.components.items()},
                  "metrics": {k: float(v) for k, v in f.scored.metrics.items()},
                  "token_versions": [np.asarray(v).tolist() for v in f.token_versions],
                  "resumes": f.resumes}
                 for f in self.ready]
        pending = sorted([g for g, _ in self.in_flight.values()] + list(self.retry),
                         key=lambda g: g.gid)
        return {"ready": ready, "resample": [dataclasses.asdict(g) for g in pending],
                "rows": list(self.rows), "next_gid": self.next_gid,
                "counts": {"dropped": self.dropped, "reissued": self.reissued,
                           "restarts": self.restarts}}

    def load_state(self, state: Optional[Dict]) -> None:
        """Refill the queue from a checkpoint's :meth:`state` (None: an empty queue)."""
        from mindrl.trainer.async_rollout import rollouts_from_json
        from mindrl.trainer.base import Scored

        self.version = None
        if not state:
            return

        def arr(xs):
            return np.asarray([np.nan if x is None else x for x in xs], np.float64)

        self.ready = []
        for d in state["ready"]:
            scored = Scored(arr(d["total"]), {k: arr(v) for k, v in d["components"].items()},
                            dict(d["metrics"]))
            self.ready.append(Finished(Group(**d["group"]), int(d["version"]),
                                       rollouts_from_json(d["rollouts"]), scored,
                                       int(d["worker"]), int(d["pid"]), 0.0, 0.0,
                                       [np.asarray(v, np.int64)
                                        for v in d.get("token_versions", [])],
                                       int(d.get("resumes", 0))))
        self.retry = collections.deque(Group(**d) for d in state["resample"])
        self.rows = collections.deque(state["rows"])
        self.next_gid = int(state["next_gid"])
        c = state.get("counts", {})
        self.dropped, self.reissued = int(c.get("dropped", 0)), int(c.get("reissued", 0))
        self.restarts = int(c.get("restarts", 0))
        self.from_checkpoint = {"ready": len(self.ready), "resampled": len(self.retry)}

    def close(self) -> None:
        import ray

        if not ray.is_initialized():
            return
        for w in self.workers:
            try:
                ray.get(w.close.remote(), timeout=10)
            except Exception:       # noqa: BLE001 - a dead worker has nothing to close
                pass
            ray.kill(w)
        ray.kill(self.store)
        self.workers, self.in_flight = [], {}
        if self.own_ray:
            ray.shutdown()
