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

Torch ops release the GIL, so generation and the update overlap on two cores; the Python
between ops does not. Scoring stays in this thread (the reward pool's time limit needs it).
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
    ``rollout.async_ahead`` is on and neither ``rollout_is`` nor ``algorithm.tis_cap`` is set;
    unchanged otherwise."""
    a = cfg.algorithm
    if not cfg.rollout.async_ahead or a.rollout_correction.rollout_is or a.tis_cap:
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
        if getattr(trainer.engine, "shared", True):
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
            self.tr.sync_engine()
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
        fut = self.pool.submit(self._generate, prompt_ids, self._sampling(step))
        self.pending = (rows, fut, self.engine_version)

    def _sampling(self, step: int):
        saved, self.tr.step = self.tr.step, step        # the seed of the step it is for
        try:
            return self.tr.sampling(0)
        finally:
            self.tr.step = saved

    def _sample(self, rows, step) -> Tuple[Rollouts, float]:
        return self._generate([self.tr.encode(r["problem"]) for r in rows], self._sampling(step))

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


def private_engine(trainer):
    """A native engine over its own copy of the policy (the trainer's weights, synced), so that
    sampling can run while the policy trains."""
    from transformers import AutoModelForCausalLM

    from mindrl.rollout.native_torch import NativeTorchEngine
    from mindrl.torch_device import DTYPES

    cfg, backend = trainer.cfg, trainer.backend
    model = AutoModelForCausalLM.from_pretrained(
        trainer.model_path, local_files_only=True, dtype=DTYPES[cfg.model.dtype],
        trust_remote_code=cfg.model.trust_remote_code).to(backend.device).eval()
    model.requires_grad_(False)
    engine = NativeTorchEngine(model, backend.tokenizer, device=backend.device, shared=False)
    engine.load_weights(backend.named_tensors())
    return engine

