"""Rollout one step ahead (``rollout.async_ahead=1``): the next batch is sampled in a background
thread while the trainer updates on this one.

Timeline (theta_k = the policy after k updates; the engine holds its own copy of the weights)::

    step k:  batch k ready -> engine <- theta_k -> thread: sample batch k+1 with theta_k
             this thread:   score batch k, old log-probs, advantages, update theta_k -> theta_k+1

Batch k (k >= 1) was sampled by theta_k-1 and trains theta_k: off-policy by one update
(``rollout/staleness`` = 1; 0 for the first step, sampled in line). The behaviour log-probs are
the engine's own (``Rollouts.logprobs``, computed by theta_k-1 while sampling), the ratio's
old log-probs follow ``train.recompute_old_logp`` as on-policy, and the gap between the two is
what ``algorithm.rollout_correction`` weights: with nothing set there,
:func:`effective_config` turns on token-level truncated IS, w_t = min(pi_theta_k(y_t) /
pi_theta_k-1(y_t), rollout_is_threshold) (Yao et al. 2025, "Your efficient RL framework secretly
brings you off-policy RL training"; verl's one-step-off-policy recipe does the same).

Where the sampling runs (``rollout.async_sampler``): ``process`` (CPU), a child process with
its own copy of the weights in shared memory, written by this process at each sync, so the
two share no GIL; ``thread``, a background thread over a private copy of the model (torch ops
release the GIL, the Python between them does not: on a busy CPU the two threads mostly take
turns). Every batch, the first included, is sampled by that engine; ``trainer.engine`` stays
the policy's own for validation. Scoring stays in the training thread (the reward pool's time
limit needs it).
Resume is exact: a checkpoint stores the batch sampled ahead (its rows, tokens and log-probs
in ``trainer.json``), so the run resumed at step k trains on what the uninterrupted run did.
One process only (a checkpoint is written by rank 0 and holds one rank's batch).
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Dict, List, Optional, Tuple

import numpy as np

from mindrl.types import Rollouts


def effective_config(cfg):
    """``cfg`` with the default correction of a stale rollout: token-level truncated IS
    (``algorithm.rollout_correction.rollout_is=token`` at ``rollout_is_threshold``) when
    ``rollout.async_ahead`` is on (or ``rollout.mode=async_ray``) and neither ``rollout_is``
    nor ``algorithm.tis_cap`` is set; unchanged otherwise."""
    a = cfg.algorithm
    stale = cfg.rollout.async_ahead or getattr(cfg.rollout, "mode", "sync") == "async_ray"
    if not stale or a.rollout_correction.rollout_is or a.tis_cap:
        return cfg
    rc = dataclasses.replace(a.rollout_correction, rollout_is="token")
    return dataclasses.replace(cfg, algorithm=dataclasses.replace(a, rollout_correction=rc))


def rollouts_to_json(ro: Rollouts) -> Dict:
    return {"prompt_ids": ro.prompt_ids, "response_ids": ro.response_ids,
            "logprobs": [np.asarray(x, np.float32).tolist() for x in ro.logprobs],
            "finish_reasons": list(ro.finish_reasons), "group_index": ro.group_index.tolist(),
            "texts": list(ro.texts)}


def rollouts_from_json(d: Dict) -> Rollouts:
    # float32 -> Python float -> JSON -> float32 is exact
    return Rollouts(prompt_ids=d["prompt_ids"], response_ids=d["response_ids"],
                    logprobs=[np.asarray(x, np.float32) for x in d["logprobs"]],
                    finish_reasons=d["finish_reasons"],
                    group_index=np.asarray(d["group_index"], np.int64), texts=d["texts"])


class AheadRollout:
    """The background sampler of one :class:`mindrl.trainer.rl.RLTrainer`: gives each step its
    batch (:meth:`collect`) and starts the next one."""

    def __init__(self, trainer):
        self.tr = trainer
        if trainer.world > 1:
            from mindrl.errors import ConfigError

            raise ConfigError("rollout.async_ahead=1 runs in one process only (its checkpoint "
                              f"holds one rank's prefetched batch); this run has {trainer.world} "
                              "ranks")
        self.process = trainer.cfg.rollout.async_sampler == "process"
        self.child_setup = None         # process: a picklable fn(model) run in the child first
        self.sampler: Optional[SamplerProcess] = None   # started at the first batch
        if not self.process and getattr(trainer.engine, "shared", True):
            trainer.engine = private_engine(trainer)
        self.engine_version: Optional[int] = None       # the policy step the engine holds
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="mindrl-rollout-ahead")
        # (rows, future of (rollouts, generation s), policy step that sampled it)
        self.pending: Optional[Tuple[List[Dict], Future, int]] = None

    # ----------------------------------------------------------------- one step
    def sync(self) -> float:
        """Engine <- the trainer's current weights (no sampling may be running); seconds."""
        t0 = time.perf_counter()
        if self.engine_version != self.tr.step:
            if not self.process:
                self.tr.sync_engine()
            elif self.sampler is None:
                self.sampler = SamplerProcess(self.tr, self.child_setup)
            else:
                self.sampler.load(self.tr.backend.named_tensors())
            self.engine_version = self.tr.step
        return time.perf_counter() - t0

    def collect(self):
        """(rows, rollouts, scores, metrics) of this step; starts sampling the next batch."""
        from mindrl.trainer.base import score_rollouts

        tr = self.tr
        m: Dict[str, float] = {}
        t0 = time.perf_counter()
        if self.pending is None:            # first step (or resumed without a batch): in line
            m["time/weight_sync"] = self.sync()
            t0 = time.perf_counter()
            rows = tr._take_rows()
            ro, _ = self._sample(rows, tr.step)
            version = tr.step
            m["time/rollout"] = time.perf_counter() - t0
        else:
            rows, fut, version = self.pending
            self.pending = None
            ro, t_gen = fut.result()
            m["time/rollout"] = time.perf_counter() - t0      # what the step waited for
            m["time/rollout_background"] = t_gen
        m["time/weight_sync"] = m.get("time/weight_sync", 0.0) + self.sync()
        if tr.step + 1 < tr.cfg.train.steps:
            self.launch(tr.step + 1)
        t0 = time.perf_counter()
        sc = score_rollouts(tr.scorer, rows, ro)
        m["time/reward"] = time.perf_counter() - t0
        m["rollout/staleness"] = float(tr.step - version)
        return rows, ro, sc, m

    def launch(self, step: int) -> None:
        """Take the rows of ``step`` now (this thread: the stream's state stays in order) and
        sample them in the background with the weights the engine holds."""
        rows = self.tr._take_rows()
        prompt_ids = [self.tr.encode(r["problem"]) for r in rows]     # the tokenizer: here
        if self.process:
            fut = self.sampler.submit(prompt_ids, self._sampling(step))
        else:
            fut = self.pool.submit(self._generate, prompt_ids, self._sampling(step))
        self.pending = (rows, fut, self.engine_version)

    def _sampling(self, step: int):
        saved, self.tr.step = self.tr.step, step        # the seed of the step it is for
        try:
            return self.tr.sampling(0)
        finally:
            self.tr.step = saved

    def _sample(self, rows, step) -> Tuple[Rollouts, float]:
        prompt_ids = [self.tr.encode(r["problem"]) for r in rows]
        if self.process:
            return self.sampler.submit(prompt_ids, self._sampling(step)).result()
        return self._generate(prompt_ids, self._sampling(step))

    def _generate(self, prompt_ids, sp) -> Tuple[Rollouts, float]:
        import torch

        torch.set_num_threads(max(1, self.tr.cfg.train.threads))     # per thread under OpenMP
        t0 = time.perf_counter()
        ro = self.tr.engine.generate(prompt_ids, sp)
        return ro, time.perf_counter() - t0

    # ----------------------------------------------------------------- validation, state
    def settle(self) -> None:
        """Wait until the background sampling is done (before anything else uses the
        engine); its batch stays pending."""
        if self.pending is not None:
            self.pending[1].result()

    def state(self) -> Optional[Dict]:
        """The pending batch, for the checkpoint (None when there is none)."""
        if self.pending is None:
            return None
        rows, fut, version = self.pending
        ro, t_gen = fut.result()
        return {"rows": rows, "rollouts": rollouts_to_json(ro), "version": version,
                "seconds": t_gen}

    def load_state(self, state: Optional[Dict]) -> None:
        self.engine_version = None                      # resumed weights: sync before sampling
        if not state:
            self.pending = None
            return
        fut: Future = Future()
        fut.set_result((rollouts_from_json(state["rollouts"]), float(state["seconds"])))
        self.pending = (state["rows"], fut, int(state["version"]))

    def close(self) -> None:
        self.settle()
        self.pool.shutdown(wait=True)
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None


def private_engine(trainer):
    """A native engine over its own copy of the policy (the trainer's weights, synced), so that
    sampling can run while the policy trains."""
    from mindrl.rollout.native_torch import NativeTorchEngine

    engine = NativeTorchEngine.from_config(trainer.cfg, str(trainer.model_path))
    engine.model.requires_grad_(False)
    engine.load_weights(trainer.backend.named_tensors())
    return engine


class _Reply:
    """The child's answer to one request, read on the first ``result()``."""

    def __init__(self, conn):
        self.conn, self.value = conn, None

    def result(self):
        if self.value is None:
            kind, *payload = self.conn.recv()
            if kind == "error":
                raise RuntimeError(f"rollout.async_sampler=process: the sampler failed:\n"
                                   f"{payload[0]}")
            self.value = tuple(payload)
        return self.value


class SamplerProcess:
    """A native engine in a child process (spawned, CPU). Its weights are tensors in shared
    memory: :meth:`load` writes the trainer's into them while the child is idle, the child
    copies them into its model before each batch."""

    def __init__(self, trainer, setup=None):
        import torch
        import torch.multiprocessing as mp

        cfg = trainer.cfg
        self.shared = {name: t.detach().to("cpu").clone().share_memory_()
                       for name, t in trainer.backend.named_tensors()}
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_sampler_main, daemon=True, name="mindrl-sampler",
            args=(child, cfg, str(trainer.model_path), self.shared, setup))
        self.proc.start()
        child.close()
        self._torch = torch

    def load(self, named_tensors) -> None:
        with self._torch.no_grad():
            for name, t in named_tensors:
                self.shared[name].copy_(t.detach())

    def submit(self, prompt_ids, sampling) -> _Reply:
        self.conn.send(("generate", prompt_ids, sampling))
        return _Reply(self.conn)

    def close(self) -> None:
        try:
            self.conn.send(("stop",))
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(timeout=30)
        if self.proc.is_alive():
            self.proc.kill()


def _sampler_main(conn, cfg, path, shared, setup) -> None:
    """The child: load the model, then answer ("generate", prompt_ids, sampling) requests with
    ("ok", rollouts, seconds) until ("stop",)."""
    import traceback

    from mindrl.rollout.native_torch import NativeTorchEngine

    engine = NativeTorchEngine.from_config(cfg, path)      # CPU, train.threads threads
    engine.model.requires_grad_(False)
    if setup is not None:
        setup(engine.model)
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            break
        try:
            engine.load_weights(shared.items())
            t0 = time.perf_counter()
            ro = engine.generate(msg[1], msg[2])
            conn.send(("ok", ro, time.perf_counter() - t0))
        except Exception:                   # noqa: BLE001 - reported in the trainer
            conn.send(("error", traceback.format_exc()))
