"""The RL loop (GRPO family, and PPO with a critic: see :mod:`mindrl.trainer.ppo`), shared by
both backends.

One step, as data (shapes: B = prompts x n rollouts, T = longest response)::

    prompts --engine.generate(n per prompt)--> rollouts (ids, engine log-probs, finish reasons)
    rollouts --rewards pool--> reward (B,), one column per component
    [dynamic sampling: drop groups whose rewards all agree, refill from the stream]
    rollouts --backend.logprobs--> old_logp (B, T) [, ref_logp (B, T) when KL is on]
                                   [, teacher_logp (B, T) with algorithm.distill.teacher]
    reward --algorithms.compute_advantages--> advantages (B, T)       NumPy float64
    [distillation: advantages - coef * (student - teacher log-probs), algorithms.distill]
    for epoch, mini-batch: backend.train_step(micro-batches, global normalisers)
    backend.named_weights() --engine.load_weights--> next rollout (engines with their own copy)
    metrics.jsonl / TensorBoard, validation every m steps, checkpoint every k steps

Data parallel (torchrun / msrun): every rank takes its own slice of the prompts, so groups stay
whole on one rank; batch-level statistics (REINFORCE++ whitening, normalisers, metrics) are
gathered across ranks, so a 2-rank run computes what a 1-rank run with the same global batch
computes.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Dict, List, Tuple

import numpy as np

from mindrl.trainer import profile
from mindrl.trainer.base import (Scored, Trainer, group_all_equal, run_trainer, score_rollouts,
                                 stats)
from mindrl.backends.batching import micro_batch_rows
from mindrl.trainer.rollout_log import save_step_rollouts
from mindrl.types import LossNormalizers, Rollouts, TrainBatch, pad_token_batch

log = logging.getLogger("mindrl.train")


class RLTrainer(Trainer):
    kind = "grpo"

    def __init__(self, cfg):
        if cfg.algorithm.distill.teacher:       # the teacher's files, before any model loads
            from mindrl.models.tiny import check_model_dir, resolve_model_path
            from mindrl.trainer.teacher import check_teacher

            student = resolve_model_path(cfg.model.path)
            check_model_dir(student)
            check_teacher(cfg.algorithm.distill.teacher, student)
        from mindrl.trainer.async_rollout import AheadRollout, effective_config

        super().__init__(effective_config(cfg))
        # rollout.async_ahead: the next batch is sampled while this step updates
        self.ahead = AheadRollout(self) if cfg.rollout.async_ahead else None
        if cfg.rollout.mode == "async_ray":     # rollout workers on Ray feed a bounded queue
            from mindrl.trainer.async_ray import RayRollout

            self.ahead = RayRollout(self)
        self.truncation = self.check_truncation()
        self.replay = cfg.model.moe.routing_replay       # none | rollout | old
        if self.replay == "rollout":                     # the engine records expert choices
            self.engine.record_routes = True

    def check_truncation(self):
        """The rollout's top-k / min-p / top-p (or None). Engines report log-probs under that
        truncated distribution; a backend that cannot score it is warned about once, here."""
        from algorithms.truncation import Truncation

        trunc = Truncation.from_rollout(self.cfg.rollout)
        if trunc is not None and not hasattr(self.backend, "truncation") and self.is_main:
            log.warning("%s: backend=%s scores the untruncated distribution; the engine samples "
                        "(and reports log-probs) under the truncation, so importance ratios and "
                        "the rollout-vs-trainer gap will be off (set them to off: top_p=1, "
                        "top_k=-1, min_p=0)", trunc.describe(), self.cfg.backend)
        return trunc

    # ----------------------------------------------------------------- one step
    def collect(self) -> Tuple[List[Dict], Rollouts, Scored, Dict[str, float]]:
        """Rollouts for this rank's prompts, scored; dynamic sampling drops uninformative
        groups and refills from the stream (padding with dropped groups when the budget runs
        out, so every rank trains on the same number of rollouts)."""
        if self.ahead is not None:          # sampled during the previous step's update
            return self.ahead.collect()
        ds = self.cfg.algorithm.dynamic_sampling
        n = self.cfg.rollout.n
        kept_rows, spare = [], []
        m: Dict[str, float] = {"time/rollout": 0.0, "time/reward": 0.0}
        generated = dropped = 0
        for attempt in range(1 + (ds.max_refill_batches if ds.enabled else 0)):
            rows = self._take_rows()
            prompt_ids = [self.encode(r["problem"]) for r in rows]
            ro, sc, t_gen, t_score = self.generate_and_score(rows, prompt_ids, attempt)
            m["time/rollout"] += t_gen
            m["time/reward"] += t_score
            generated += len(rows)
            if not ds.enabled:
                return rows, ro, sc, m
            flat = group_all_equal(sc.total, ro.group_index)
            for g, row in enumerate(rows):
                sel = np.arange(g * n, (g + 1) * n)
                item = (row, ro.select(sel), sc.select(sel))
                (spare if flat[g] else kept_rows).append(item)
            dropped += int(flat.sum())
            if len(kept_rows) >= self.local_prompts:
                break
        kept = kept_rows[:self.local_prompts]
        kept += spare[:self.local_prompts - len(kept)]
        m["dynamic_sampling/kept_fraction"] = (generated - dropped) / max(generated, 1)
        m["dynamic_sampling/batches"] = attempt + 1
        m["dynamic_sampling/filled_with_flat"] = max(0, self.local_prompts - len(kept_rows))
        rows = [k[0] for k in kept]
        ro = Rollouts.concat([k[1] for k in kept])
        sc = Scored.concat([k[2] for k in kept])
        return rows, ro, sc, m

    def generate_and_score(self, rows: List[Dict], prompt_ids: List[List[int]],
                           attempt: int) -> Tuple[Rollouts, Scored, float, float]:
        """(rollouts, their scores, generation s, scoring s not hidden behind generation).
        With ``reward.overlap_chunks`` > 1 the groups are generated chunk by chunk in a thread
        while this thread scores the finished chunks (:mod:`mindrl.trainer.overlap`)."""
        from mindrl.trainer.overlap import chunk_bounds, pipelined, score_while_generating

        chunks = self.cfg.reward.overlap_chunks
        if self.cfg.reward.overlap_groups:      # the config refused it with chunks > 1
            return score_while_generating(self, rows, prompt_ids, attempt)
        if chunks <= 1:
            t0 = time.perf_counter()
            ro = self.generate(prompt_ids, attempt)
            t1 = time.perf_counter()
            sc = score_rollouts(self.scorer, rows, ro)
            return ro, sc, t1 - t0, time.perf_counter() - t1
        parts, scores, t_gen, t_score = pipelined(
            chunk_bounds(len(prompt_ids), chunks),
            lambda c, a, b: self.generate(prompt_ids[a:b], attempt, first=a, chunk=c),
            lambda a, b, ro: score_rollouts(self.scorer, rows[a:b], ro))
        return Rollouts.concat(parts), Scored.concat(scores), t_gen, t_score

    def generate(self, prompt_ids: List[List[int]], attempt: int, first: int = 0,
                 chunk: int = 0) -> Rollouts:
        """Samples of ``prompt_ids`` (this rank's prompts ``first``.. of the step; ``chunk`` > 0
        shifts the batch seed, so the chunks of one step draw different streams)."""
        sample = self.engine.generate
        if self.cfg.tools.enabled:          # multi-turn with tools (mindrl.tools.multi_turn)
            from mindrl.tools.multi_turn import trainer_sampler

            sample = trainer_sampler(self)
        if not self.cfg.rollout.batch_invariant:
            sp = self.sampling(attempt)
            if chunk:
                sp = dataclasses.replace(sp, seed=sp.seed + 7919 * chunk)
            return sample(prompt_ids, sp)
        parts = []
        for g, ids in enumerate(prompt_ids, start=first):
            index = self.rank * self.local_prompts + g          # global prompt index
            seed = ((self.cfg.rollout.seed * 1_000_003 + self.step) * 1009 + attempt) * 65_537 \
                + index
            parts.append(sample([ids], self.sampling(attempt, seed=seed)))
        return Rollouts.concat(parts)

    def run_step(self) -> Dict[str, float]:
        from algorithms import compute_advantages, kl_penalty_numpy

        cfg, a = self.cfg, self.cfg.algorithm
        t_step = time.perf_counter()
        rows, ro, sc, metrics = self.collect()
        # a step whose rewards are mostly None trains on nothing: stop, naming the answer field
        from mindrl.data.preflight import check_step_unscorable

        check_step_unscorable({k: self.gather(v) for k, v in sc.components.items()},
                              cfg.data.step_max_unscorable, self.step + 1,
                              cfg.data.answer_field, cfg.data.train_file)
        P = max(len(p) for p in ro.prompt_ids)
        T = max(1, int(ro.response_lengths.max()))
        tokens = pad_token_batch(ro.prompt_ids, ro.response_ids, self.pad_id, P, T)
        if self.replay == "rollout":        # R3: the rollout's expert choices, every forward
            from mindrl.models.moe import layout_routes

            tokens.routing = layout_routes(ro.routed_experts, [len(p) for p in ro.prompt_ids],
                                           P, T)
            if tokens.routing is None:
                raise RuntimeError("model.moe.routing_replay=rollout: the engine returned no "
                                   "expert choices")
        elif self.replay == "old":          # R2: the policy's own, before this update
            tokens.routing = self.backend.record_routes(tokens, cfg.train.micro_batch_size)
        mask = tokens.response_mask
        if ro.loss_masks:                   # tool outputs: not trained on, not in any count
            from mindrl.tools.multi_turn import apply_loss_masks, pop_tool_metrics

            apply_loss_masks(mask, ro)
            metrics.update(pop_tool_metrics(self))
        rollout_logp = np.zeros_like(mask)
        for i, lp in enumerate(ro.logprobs):
            rollout_logp[i, :len(lp)] = lp

        temp = cfg.rollout.temperature or 1.0
        mb = cfg.train.micro_batch_size
        single_pass = cfg.train.ppo_epochs == 1 and (cfg.train.mini_batch_size in (0, len(ro) *
                                                                                   self.world))
        t0 = time.perf_counter()
        if cfg.train.recompute_old_logp or not single_pass:
            kw = {"truncated": True} if self.truncation is not None and \
                hasattr(self.backend, "truncation") else {}
            old_logp = self.backend.logprobs(tokens, temperature=temp, micro_batch_size=mb, **kw)
            gap = np.abs(old_logp - rollout_logp) * mask
            tok = self.allsum(mask.sum())
            metrics["rollout/logprob_gap_mean"] = float(self.allsum(gap.sum()) / max(tok, 1))
            metrics["rollout/logprob_gap_max"] = float(gap.max()) if gap.size else 0.0
        else:
            old_logp = None
        metrics["time/old_logprobs"] = time.perf_counter() - t0
        ref_logp = None
        t0 = time.perf_counter()
        if a.kl.coef > 0:
            ref_logp = self.backend.logprobs(tokens, temperature=temp, reference=True,
                                             micro_batch_size=mb)
        metrics["time/ref_logprobs"] = time.perf_counter() - t0
        values = None
        if a.adv_estimator == "gae":       # PPO: the critic's V_old (see trainer/ppo.py)
            from mindrl.trainer import ppo

            t0 = time.perf_counter()
            values = ppo.old_values(self, tokens)
            metrics["time/values"] = time.perf_counter() - t0
        teacher_logp = self.teacher_logprobs(tokens, old_logp, rollout_logp, metrics)
        t_adv = time.perf_counter()

        # Advantages over the global batch (identical on every rank), then this rank's rows.
        token_kl = None
        if a.kl.coef > 0 and a.kl.in_reward:
            base = old_logp if old_logp is not None else rollout_logp
            token_kl = kl_penalty_numpy(base, ref_logp, a.kl.estimator, a.kl.log_ratio_clip,
                                        a.kl.value_clip) * mask
            metrics["kl"] = float(self.allsum(token_kl.sum()) / max(self.allsum(mask.sum()), 1))
        adv_T = cfg.rollout.max_new_tokens
        pad_T = lambda x: np.pad(x, ((0, 0), (0, adv_T - x.shape[1])))  # noqa: E731
        g_rewards = self.gather(sc.total)
        g_groups = self.gather(ro.group_index.astype(np.int64) + self.rank * self.local_prompts)
        g_mask = self.gather(pad_T(mask))
        g_kl = self.gather(pad_T(token_kl)) if token_kl is not None else None
        g_values = self.gather(pad_T(values)) if values is not None else None
        if a.adv_estimator == "gdpo":       # each reward component normalised on its own
            from algorithms.multi_reward import component_weights, compute_multi_reward_advantages

            adv = compute_multi_reward_advantages(
                "gdpo", total=g_rewards, components={k: self.gather(v) for k, v in
                                                     sc.components.items()},
                weights=component_weights(self.scorer), none_as=cfg.reward.none_as,
                group_index=g_groups, response_mask=g_mask, std_eps=a.std_eps,
                std_ddof=a.std_ddof)
        else:
            adv = compute_advantages(a.adv_estimator, rewards=g_rewards, group_index=g_groups,
                                     response_mask=g_mask, token_kl=g_kl, std_eps=a.std_eps,
                                     std_ddof=a.std_ddof, gamma=a.gamma, passk_k=a.passk_k,
                                     kl_coef=a.kl.coef, values=g_values, lam=a.lam,
                                     whiten_advantages=a.whiten_advantages)
        B = len(ro)
        adv = adv[self.rank * B:(self.rank + 1) * B, :T]
        if a.distill.teacher:               # distillation: task_weight x A [- coef x k1]
            from algorithms.distill import distill_advantages

            d = a.distill
            adv = distill_advantages(
                adv, mask, task_weight=d.task_weight, coef=d.coef,
                student_logp=old_logp if old_logp is not None else rollout_logp,
                teacher_logp=teacher_logp if d.mode == "advantage" else None)
        adv = adv.astype(np.float32) * mask
        save_step_rollouts(self, rows, ro, sc, adv, mask)          # logging.save_rollouts

        batch = TrainBatch(tokens, adv, old_logp,
                           ref_logp if (a.kl.coef > 0 and not a.kl.in_reward) else None,
                           rollout_logp, teacher_logp=teacher_logp
                           if a.distill.mode == "loss" else None)
        metrics["time/advantages"] = time.perf_counter() - t_adv
        profile.backend_reset(self.backend)
        t0 = time.perf_counter()
        if values is not None:              # PPO: the critic's step, then the policy's
            from mindrl.types import ValueBatch

            rets = ppo.returns_for(self, g_rewards, g_values, g_mask, g_kl)
            rets = rets[self.rank * B:(self.rank + 1) * B, :T].astype(np.float32) * mask
            metrics.update(ppo.value_metrics(self, values, rets, mask))
            metrics.update(ppo.critic_update(self, ValueBatch(tokens, values, rets)))
            metrics["time/critic_update"] = time.perf_counter() - t0
            t0 = time.perf_counter()
        warming = values is not None and self.step < cfg.critic.warmup_steps
        train_m = {} if warming else self.update(batch)
        metrics["time/update"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if self.engine_needs_sync and self.ahead is None:   # async: before the next sampling
            self.sync_engine()
        metrics["time/weight_sync"] = metrics.get("time/weight_sync", 0.0) + \
            time.perf_counter() - t0
        metrics.update(train_m)
        if self.replay != "none":           # replayed routes the trainer would have flipped
            flips = self.backend.route_flip_fraction()
            if flips is not None:
                metrics["moe/route_flip_frac"] = flips
        metrics.update(self.rollout_metrics(ro, sc, adv, mask))
        metrics["time/step"] = time.perf_counter() - t_step
        n_tok = float(self.allsum(ro.response_lengths.sum()))
        metrics["throughput/tokens_per_s"] = n_tok / max(metrics["time/step"], 1e-9)
        if profile.enabled(cfg):
            profile.finish(self, metrics)
        gap = metrics.get("rollout/logprob_gap_mean")
        if gap is not None and gap > cfg.rollout.logprob_gap_warn and self.is_main \
                and self.ahead is None:     # async: the gap is one update's drift, by design
            log.warning("step %d: rollout-vs-trainer log-prob gap %.4f nats exceeds "
                        "rollout.logprob_gap_warn=%.3f: the engine and the trainer disagree "
                        "(stale weights or mismatched sampling%s)", self.step + 1, gap,
                        cfg.rollout.logprob_gap_warn,
                        f"; truncated sampling: {self.truncation.describe()}"
                        if self.truncation is not None else "")
        return metrics

    def teacher_logprobs(self, tokens, old_logp, rollout_logp, metrics):
        """(B, T) the teacher's log-probs of the sampled tokens (``algorithm.distill``; None when
        off, or with ``estimator=full``: then the backend computes the exact KL from the
        teacher's logits in its training micro-batches), in the reference model's
        micro-batches; adds ``distill/reverse_kl``, the token mean
        (all ranks) of log pi_student - log pi_teacher on the sampled tokens (k1)."""
        d = self.cfg.algorithm.distill
        if not d.teacher or d.estimator == "full":  # full: the backend's micro-batches
            return None
        t0 = time.perf_counter()
        teacher_logp = self.backend.logprobs(tokens, temperature=d.teacher_temperature,
                                             teacher=True,
                                             micro_batch_size=self.cfg.train.micro_batch_size)
        metrics["time/teacher_logprobs"] = time.perf_counter() - t0
        from algorithms.distill import reverse_kl_k1

        mask = tokens.response_mask
        student = old_logp if old_logp is not None else rollout_logp
        kl = reverse_kl_k1(student, teacher_logp, mask)
        metrics["distill/reverse_kl"] = float(self.allsum(kl.sum()) /
                                              max(self.allsum(mask.sum()), 1))
        return teacher_logp

    def mini_batches(self, batch, seed: int, entropy_coef=None):
        """(micro-batches, global loss normalisers) of each mini-batch of each epoch: this
        rank's rows shuffled per epoch (``seed``), cut into micro-batches by count or by token
        budget. The policy and the PPO critic (trainer/ppo.py) step through the same layout."""
        cfg = self.cfg
        B = len(batch)
        mini = (cfg.train.mini_batch_size // self.world) if cfg.train.mini_batch_size else B
        mb = max(1, min(cfg.train.micro_batch_size, mini))
        rng = np.random.default_rng(seed)
        for epoch in range(cfg.train.ppo_epochs):
            order = rng.permutation(B) if (mini < B or epoch > 0) else np.arange(B)
            for start in range(0, B, mini):
                rows = order[start:start + mini]
                part = batch.rows(rows)
                if isinstance(part, TrainBatch):     # the policy's (not the critic's) step
                    part = select_tokens(self, part, fresh=epoch == 0 and start == 0)
                norm = LossNormalizers(
                    global_tokens=float(self.allsum(part.tokens.response_mask.sum())),
                    global_seqs=float(self.allsum(len(rows))),
                    max_len=float(cfg.rollout.max_new_tokens), entropy_coef=entropy_coef)
                # a backend that pads to compiled shapes counts the padded lengths
                padded = getattr(self.backend, "budget_lengths", None)
                lengths = padded(part.tokens) if padded is not None and \
                    cfg.train.max_tokens_per_micro_batch > 0 else \
                    part.tokens.attention_mask.sum(axis=1)
                micro = [part.rows(idx) for idx in micro_batch_rows(
                    lengths, count=mb,
                    max_tokens=cfg.train.max_tokens_per_micro_batch,
                    packed=cfg.train.padding_free,
                    by_length=getattr(self.backend, "trims_micro_batches", False) and
                    not cfg.train.padding_free)]
                yield micro, norm

    def update(self, batch: TrainBatch) -> Dict[str, float]:
        ctrl = self.entropy_control
        ent_coef = None if ctrl is None else ctrl.coefficient
        acc: Dict[str, List[float]] = {}
        for micro, norm in self.mini_batches(batch, self.cfg.train.seed * 7919 + self.step,
                                             ent_coef):
            for k, v in self.backend.train_step(micro, norm).items():
                acc.setdefault(k, []).append(float(v))
        out = {k: float(np.mean(v)) for k, v in acc.items()}
        if ctrl is not None:            # this step's coefficient, then the next step's
            out["entropy_control/coef"] = ent_coef
            out["entropy_control/next_coef"] = ctrl.update(out["entropy"])
        return out

    # ----------------------------------------------------------------- entropy control
    @property
    def entropy_control(self):
        """The adaptive entropy controller (``algorithm.entropy_control``), or None."""
        ec = self.cfg.algorithm.entropy_control
        if not ec.enabled:
            return None
        if getattr(self, "_entropy_control", None) is None:
            from algorithms.entropy_control import AdaptiveEntropyController

            self._entropy_control = AdaptiveEntropyController(
                ec.target, ec.delta, ec.max_coef, init_coef=self.cfg.algorithm.entropy_coef)
        return self._entropy_control

    def trainer_state(self) -> Dict:
        state = super().trainer_state()
        if self.entropy_control is not None:
            state["entropy_control"] = self.entropy_control.state_dict()
        if self.ahead is not None:          # the batch sampled ahead: resume trains on it
            state["async_rollout"] = self.ahead.state()
        return state

    def validate(self) -> Dict[str, float]:
        if self.ahead is not None and not self.ahead.process:
            self.ahead.settle()             # the engine is free; synced before this step's
            self._engine_fresh = False      # update, so synced again to validate
        return super().validate()

    def close(self) -> None:
        if getattr(self, "ahead", None) is not None:
            self.ahead.close()
        super().close()

    def maybe_resume(self, logger) -> None:
        super().maybe_resume(logger)
        if self.resume_from is not None and self.ahead is not None:
            from mindrl.trainer.checkpoint import read_trainer_state

            self.ahead.load_state(read_trainer_state(self.resume_from).get("async_rollout"))
        if self.resume_from is not None and self.entropy_control is not None:
            from mindrl.trainer.checkpoint import read_trainer_state

            state = read_trainer_state(self.resume_from).get("entropy_control")
            if state is not None:       # absent: a checkpoint saved with control off
                self.entropy_control.load_state_dict(state)

    def global_stats(self, prefix: str, x: np.ndarray) -> Dict[str, float]:
        """Mean/std/max/min over all ranks' values (ranks may hold different counts)."""
        x = np.asarray(x, dtype=np.float64)
        if self.world == 1:
            return stats(prefix, x)
        n, s1, s2 = self.allsum([x.size, x.sum(), np.square(x).sum()])
        hi = self.gather(np.array([x.max() if x.size else -np.inf]))
        lo = self.gather(np.array([x.min() if x.size else np.inf]))
        if n == 0:
            return {}
        mean = s1 / n
        return {f"{prefix}/mean": float(mean),
                f"{prefix}/std": float(np.sqrt(max(s2 / n - mean ** 2, 0.0))),
                f"{prefix}/max": float(hi.max()), f"{prefix}/min": float(lo.min())}

    def rollout_metrics(self, ro: Rollouts, sc: Scored, adv: np.ndarray,
                        mask: np.ndarray) -> Dict[str, float]:
        lengths = ro.response_lengths.astype(np.float64)
        g = lambda x: self.gather(np.asarray(x, dtype=np.float64))  # noqa: E731
        all_len, all_rew = g(lengths), g(sc.total)
        trunc = g([f == "length" for f in ro.finish_reasons])
        m = {"response_length/mean": float(all_len.mean()),
             "response_length/max": float(all_len.max()),
             "response_length/truncated_fraction": float(trunc.mean())}
        m.update(stats("reward", all_rew))
        for name, vals in sc.components.items():
            allv = g(vals)
            m[f"reward/{name}/mean"] = float(np.nanmean(allv)) if np.isfinite(allv).any() else \
                float("nan")
        if self.val_reward in sc.components:
            comp = g(sc.components[self.val_reward])
            m["accuracy"] = float(np.mean(np.nan_to_num(comp, nan=-np.inf) >=
                                          self.cfg.validation.correct_threshold))
        m.update(self.global_stats("advantage", adv[mask > 0]))
        for k, v in sc.metrics.items():
            m[f"reward/{k}"] = float(self.allsum(v))
        return m


def select_tokens(trainer, part: TrainBatch, fresh: bool) -> TrainBatch:
    """A covariance loss (clip_cov, kl_cov) picks its tokens over the whole mini-batch (all
    ranks), under the weights this mini-batch's update starts from, so the pick does not
    depend on how the rows are cut into micro-batches or on the backend. ``fresh``: no update
    ran since ``old_logp`` was computed (then it is the current log-probs; else one
    no-gradient forward of the mini-batch). Other losses: ``part`` unchanged."""
    from algorithms.policy_loss import BATCH_SELECTIONS, batch_token_selection
    from algorithms.rl_loss import loss_hyper

    cfg = trainer.cfg
    if cfg.algorithm.policy_loss not in BATCH_SELECTIONS:
        return part
    if fresh and part.old_logp is not None:
        logp = part.old_logp
    else:
        kw = {"truncated": True} if getattr(trainer, "truncation", None) is not None and \
            hasattr(trainer.backend, "truncation") else {}
        logp = trainer.backend.logprobs(part.tokens, temperature=cfg.rollout.temperature or 1.0,
                                        micro_batch_size=cfg.train.micro_batch_size, **kw)
    old = logp if part.old_logp is None else part.old_logp
    mask = part.tokens.response_mask
    arrays = [np.asarray(a, np.float64) for a in (logp, old, part.advantages, mask)]
    B, T = mask.shape
    if trainer.world > 1:           # ranks' arrays share one width to be gathered
        width = max(cfg.rollout.max_new_tokens, T)
        arrays = [trainer.gather(np.pad(a, ((0, 0), (0, width - T)))) for a in arrays]
    picked = batch_token_selection(cfg.algorithm.policy_loss, *arrays, loss_hyper(cfg.algorithm))
    if trainer.world > 1:
        picked = picked[trainer.rank * B:(trainer.rank + 1) * B]
    return dataclasses.replace(part, cov_picked=picked[:, :T])


def train(cfg) -> Dict[str, float]:
    """Run RL training from a resolved config; returns the last step's metrics."""
    return run_trainer(RLTrainer, cfg)
