"""The compiled RL micro-batch step of :class:`~mindrl.backends.mindspore.backend.MindSporeBackend`:
``algorithms.rl_loss`` (policy loss, KL, entropy, importance correction) traced into one
``mindspore.jit`` graph with the forward and backward (fused mode), or, when rl_loss does not
compile, a compiled forward and backward around the loss in PyNative (split mode). Loss
normalisers enter as a tensor (the reciprocal of the mode's divisor), so one graph serves
every step of a bucket shape. So does the entropy-bonus coefficient (a scalar input), which
adaptive entropy control changes from step to step."""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

from mindrl.backends.mindspore.buckets import budget_rows, pad2, repad, trim_response
from mindrl.backends.mindspore.truncation import truncated_logits_and_logp
from mindrl.types import LossNormalizers, TrainBatch, bucket


class RLStepMixin:
    """``train_step`` and the compiled RL step it runs."""

    def _metric_keys(self, has_old: bool, has_ref: bool, has_roll: bool,
                     has_teach: bool = False) -> List[str]:
        """The metric names ``rl_loss`` returns for this configuration (a NumPy dry run)."""
        from algorithms.ops import get_ops
        from algorithms.rl_loss import rl_loss

        npo = get_ops("numpy")
        z = np.zeros((1, 2))
        _, metrics = rl_loss(npo, logp=z, old_logp=z, advantages=z, response_mask=z + 1,
                             ref_logp=z if has_ref else None,
                             rollout_logp=z if has_roll else None, entropy=z,
                             cfg=self.cfg.algorithm, global_tokens=1.0, global_seqs=1.0,
                             max_len=1.0, teacher_logp=z if has_teach else None,
                             teacher_kl=z if self._full_kl() else None)
        return sorted(metrics)

    def _full_kl(self) -> bool:
        """``algorithm.distill.estimator=full`` with a teacher: the exact reverse KL from both
        models' logits inside the step (a constant of the run, so no key of its own)."""
        return self.teacher is not None and self.cfg.algorithm.distill.estimator == "full"

    def _train_fn(self, has_old: bool, has_ref: bool, has_roll: bool, has_teach: bool = False,
                  has_pick: bool = False, update: bool = False, chunk: int = 0):
        """The compiled RL micro-batch step for this combination of optional inputs:
        ``fn(ids, pos, att, targets, mask, adv, old, ref, roll, teach, pick, inv_norm,
        ent_coef, aux_w [, hyper]) -> vector`` (``pick``: the tokens a covariance loss picked
        over the whole mini-batch, ``TrainBatch.cov_picked``; ``aux_w``: with
        ``model.moe.aux_loss_coef`` the (E,) weights E f / R of the mini-batch's expert shares
        (:meth:`_moe_balance`), else an unused scalar)
        (``[loss, *metrics]`` in ``keys`` order, plus ``[grad_norm, updated]`` with ``update``;
        see :meth:`_fused_step`). ``chunk`` > 0: the step with the LM head in chunks of that
        many tokens (:mod:`~mindrl.backends.mindspore.chunked_head`; never with ``update``).
        Returns (fn, keys)."""
        from algorithms.distill import full_reverse_kl
        from algorithms.entropy import entropy_from_logits
        from algorithms.rl_loss import rl_loss

        o, acfg = self.ops, self.cfg.algorithm
        keys = self._metric_keys(has_old, has_ref, has_roll, has_teach)
        adaptive = acfg.entropy_control.enabled      # the coefficient is the input ent_coef
        ent_grad = bool(acfg.entropy_coef) or adaptive
        model = self.model
        temp = self.cfg.rollout.temperature
        inv_temp = 1.0 / (temp if temp > 0 else 1.0)   # the rollout's temperature, a constant
        full, teacher = self._full_kl(), self.teacher
        inv_t_temp = 1.0 / acfg.distill.teacher_temperature

        trunc = self.truncation          # the rollout's top-k / min-p / top-p (or None)
        aux_coef = float(self.cfg.model.moe.aux_loss_coef)
        if aux_coef and not chunk and (full or self.train_mode != "fused"):
            from mindrl.errors import UserError

            raise UserError("model.moe.aux_loss_coef > 0 on backend=mindspore needs the fused "
                            "RL step without algorithm.distill.estimator=full")
        rl_keys = keys                   # rl_loss's metrics (moe/aux_loss: from the pre-pass)

        def scored(ids, pos, att, targets):
            logits = model.response_logits(ids, pos, att, targets.shape[1]) * inv_temp
            logits, logp = truncated_logits_and_logp(logits, targets, trunc)  # (B, T)
            entropy = entropy_from_logits(o, logits if ent_grad else ops.stop_gradient(logits))
            return logits, logp, entropy

        def token_logp_entropy(ids, pos, att, targets):
            _, logp, entropy = scored(ids, pos, att, targets)
            return logp, entropy

        def token_logp_entropy_kl(ids, pos, att, targets):
            """``full``: also the exact reverse KL to the teacher (B, T), differentiable
            through the student (the teacher's logits from the same inputs, no gradient)."""
            logits, logp, entropy = scored(ids, pos, att, targets)
            t_logits = ops.stop_gradient(
                teacher.response_logits(ids, pos, att, targets.shape[1]) * inv_t_temp)
            return logp, entropy, full_reverse_kl(o, logits, t_logits)

        def loss_from(logp, entropy, mask, adv, old, ref, roll, teach, pick, inv_norm, ent_coef,
                      kl=None):
            loss, metrics = rl_loss(
                o, logp=logp, old_logp=old if has_old else ops.stop_gradient(logp),
                advantages=adv, response_mask=mask, ref_logp=ref if has_ref else None,
                rollout_logp=roll if has_roll else None, entropy=entropy, cfg=acfg,
                global_tokens=1.0, global_seqs=1.0, max_len=1.0,
                teacher_logp=teach if has_teach else None,
                entropy_coef=ent_coef if adaptive else None, teacher_kl=kl,
                cov_picked=pick if has_pick else None)
            out = ()
            for k in rl_keys:
                v = metrics[k] * inv_norm if k == "pg_loss" else metrics[k]
                out = out + (ops.stop_gradient(v),)
            return loss * inv_norm, out

        if chunk:
            key = ("rl", has_old, has_ref, has_roll, has_teach, has_pick, "chunked", chunk)
            if key not in self._train_fns:
                self._train_fns[key] = self._chunked_rl_step(
                    chunk, loss_from, ent_grad, inv_temp, aux_coef, inv_t_temp if full else None)
            return self._train_fns[key], keys
        if self.train_mode == "fused" and full:
            def loss_fn(ids, pos, att, targets, mask, adv, old, ref, roll, teach, pick, inv_norm,
                        ent_coef, aux_w):
                logp, entropy, kl = token_logp_entropy_kl(ids, pos, att, targets)
                return loss_from(logp, entropy, mask, adv, old, ref, roll, teach, pick,
                                 inv_norm, ent_coef, kl)

            key = ("rl", has_old, has_ref, has_roll, has_teach, has_pick, update)
            return self._fused_step(key, loss_fn, update), keys
        if self.train_mode == "fused" and aux_coef:
            def loss_fn(ids, pos, att, targets, mask, adv, old, ref, roll, teach, pick, inv_norm,
                        ent_coef, aux_w):
                logits, psum = model.response_logits_and_router(ids, pos, att,
                                                                targets.shape[1])
                logits, logp = truncated_logits_and_logp(logits * inv_temp, targets, trunc)
                entropy = entropy_from_logits(o, logits if ent_grad
                                              else ops.stop_gradient(logits))
                loss, out = loss_from(logp, entropy, mask, adv, old, ref, roll, teach, pick,
                                      inv_norm, ent_coef)
                # this micro-batch's part of the mini-batch's aux (the parts sum to it)
                return loss + aux_coef * (psum * aux_w).sum(), out

            key = ("rl", has_old, has_ref, has_roll, has_teach, has_pick, update)
            return self._fused_step(key, loss_fn, update), keys
        if self.train_mode == "fused":
            def loss_fn(ids, pos, att, targets, mask, adv, old, ref, roll, teach, pick, inv_norm,
                        ent_coef, aux_w):
                logp, entropy = token_logp_entropy(ids, pos, att, targets)
                return loss_from(logp, entropy, mask, adv, old, ref, roll, teach, pick,
                                 inv_norm, ent_coef)

            key = ("rl", has_old, has_ref, has_roll, has_teach, has_pick, update)
            return self._fused_step(key, loss_fn, update), keys

        key = ("rl", has_old, has_ref, has_roll, has_teach, has_pick, "split")
        if key in self._train_fns:
            return self._train_fns[key], keys
        # split: compiled forward; rl_loss and its gradient w.r.t. (logp, entropy) in PyNative;
        # compiled backward of the surrogate sum(logp * dL/dlogp + entropy * dL/dH).
        # With ``full`` the exact KL is a third output of the forward, with its own cotangent.
        accumulate = self.optimizer.accumulate_in_graph
        forward = ms.jit(token_logp_entropy_kl if full else token_logp_entropy)
        loss_grad = ms.value_and_grad(loss_from, (0, 1, 11) if full else (0, 1), None,
                                      has_aux=True)

        def surrogate(ids, pos, att, targets, g_logp, g_ent):
            logp, entropy = token_logp_entropy(ids, pos, att, targets)
            return (logp * g_logp).sum() + (entropy * g_ent).sum()

        def surrogate_kl(ids, pos, att, targets, g_logp, g_ent, g_kl):
            logp, entropy, kl = token_logp_entropy_kl(ids, pos, att, targets)
            return (logp * g_logp).sum() + (entropy * g_ent).sum() + (kl * g_kl).sum()

        sur_grad = ms.grad(surrogate_kl if full else surrogate, None, self.params)

        @ms.jit
        def backward(ids, pos, att, targets, g_logp, g_ent):
            grads = sur_grad(ids, pos, att, targets, g_logp, g_ent)
            accumulate(grads)
            return g_logp.sum()

        @ms.jit
        def backward_kl(ids, pos, att, targets, g_logp, g_ent, g_kl):
            grads = sur_grad(ids, pos, att, targets, g_logp, g_ent, g_kl)
            accumulate(grads)
            return g_logp.sum()

        def step(ids, pos, att, targets, mask, adv, old, ref, roll, teach, pick, inv_norm,
                 ent_coef, aux_w):
            outs = forward(ids, pos, att, targets)
            (loss, aux), cot = loss_grad(*outs[:2], mask, adv, old, ref, roll, teach, pick,
                                         inv_norm, ent_coef, *outs[2:])
            (backward_kl if full else backward)(ids, pos, att, targets, *cot)
            return ops.concat([loss.reshape((1,))] + [v.reshape((1,)) for v in aux], 0)

        self._train_fns[key] = step
        return step, keys

    def _chunked_rl_step(self, chunk: int, loss_from, ent_grad: bool, inv_temp: float,
                         aux_coef: float, inv_t_temp=None):
        """The RL micro-batch step with the head in chunks
        (:meth:`~mindrl.backends.mindspore.chunked_head.ChunkedHeadMixin._chunked_step`): the
        same inputs and outputs as the fused step without update. ``loss_from`` is the fused
        step's loss (``rl_loss``); ``inv_t_temp`` not None: the exact distillation KL to the
        teacher at that inverse temperature, a chunk at a time beside the log-probs."""
        from mindrl.backends.mindspore.compiled import step_vector

        full = inv_t_temp is not None
        if full:
            def loss_kl(logp, entropy, kl, mask, adv, old, ref, roll, teach, pick, inv_norm,
                        ent_coef):
                return loss_from(logp, entropy, mask, adv, old, ref, roll, teach, pick,
                                 inv_norm, ent_coef, kl)
        loss_grad = ms.value_and_grad(loss_kl if full else loss_from,
                                      (0, 1, 2) if full else (0, 1), None, has_aux=True)

        def loss_grads(*args):
            (loss, metrics), grads = loss_grad(*args)
            return (loss, metrics) + grads

        run = self._chunked_step(chunk, loss_grads, entropy=True, ent_grad=ent_grad,
                                 inv_temp=inv_temp, trunc=self.truncation, aux_coef=aux_coef,
                                 teacher=self.teacher if full else None,
                                 inv_t_temp=inv_t_temp if full else 1.0)

        def step(ids, pos, att, targets, mask, adv, old, ref, roll, teach, pick, inv_norm,
                 ent_coef, aux_w):
            loss, metrics = run(ids, pos, att, targets, mask,
                                (mask, adv, old, ref, roll, teach, pick, inv_norm, ent_coef),
                                aux_w)
            return step_vector(loss, metrics)

        return step

    def _rl_inputs(self, micro_batches: List[TrainBatch], norm: LossNormalizers):
        from algorithms.is_correction import needs_rollout_logp

        first = micro_batches[0]
        flags = (first.old_logp is not None, first.ref_logp is not None,
                 first.rollout_logp is not None and needs_rollout_logp(self.cfg.algorithm),
                 getattr(first, "teacher_logp", None) is not None,
                 getattr(first, "cov_picked", None) is not None)
        budget = self.cfg.train.max_tokens_per_micro_batch
        if budget > 0:      # each micro-batch its own shape: rows x its own length bucket
            micro_batches, shapes = self._budget_shapes(micro_batches, budget)
        else:               # one shape for every micro-batch of the step
            rows = max(self.cfg.train.micro_batch_size, max(len(m) for m in micro_batches))
            shapes = [self._shape([m.tokens for m in micro_batches], rows)] * len(micro_batches)
        inv_norm = Tensor(np.float32(1.0 / norm.divisor(self.cfg.algorithm.loss_agg_mode)))
        coef = self.cfg.algorithm.entropy_coef if norm.entropy_coef is None else norm.entropy_coef
        ent_coef = Tensor(np.float32(coef))
        inputs = []
        aux_w = Tensor(np.float32(0.0))            # unused without model.moe.aux_loss_coef
        for mb, (rows, P, T) in zip(micro_batches, shapes):
            tb = repad(mb.tokens, rows, P, T, self.pad_id)
            f = lambda a: Tensor(pad2(a, rows, T))  # noqa: E731
            args = self._inputs(tb) + (f(mb.advantages), f(mb.old_logp), f(mb.ref_logp),
                                       f(mb.rollout_logp), f(getattr(mb, "teacher_logp", None)),
                                       f(getattr(mb, "cov_picked", None)), inv_norm, ent_coef)
            inputs.append([args, float(mb.tokens.response_mask.sum())])
        if self.cfg.model.moe.aux_loss_coef:
            aux_w = self._moe_balance([a for a, _ in inputs], shapes)
        return flags, shapes, [(args + (aux_w,), n) for args, n in inputs]

    def _moe_balance(self, inputs, shapes) -> Tensor:
        """The pre-pass of ``model.moe.aux_loss_coef`` (the loss is stated in
        :mod:`mindrl.backends.torch.moe_balance`): the mini-batch's native top-k counts and
        router-probability sums over MoE layers and real tokens, from a compiled no-grad
        forward of each micro-batch (routes replayed as in training), summed over ranks.
        Returns the (E,) weights E f / R of each micro-batch's probability sums; keeps the
        mini-batch's aux value E sum f P for the metric ``moe/aux_loss``."""
        if self._router_fn is None:
            model = self.model

            def router_stats(ids, pos, att):
                return model.router_stats(ids, pos, att)

            self._router_fn = ms.jit(router_stats)
        layers = len(self.spec.moe_layer_ids)
        total = None
        for args, shape in zip(inputs, shapes):
            ids, pos, att = args[:3]
            st = self._timed("router_stats", shape, self._router_fn, ids, pos,
                             att).asnumpy().astype(np.float64)
            part = np.concatenate([st.reshape(-1), [layers * float(att.asnumpy().sum())]])
            total = part if total is None else total + part
        total = self.all_reduce_sum(total)
        E = (total.size - 1) // 2
        rows = max(total[-1], 1.0)
        f, P = total[:E] / rows, total[E:2 * E] / rows
        self._aux_value = float(E * np.sum(f * P))
        return Tensor((E * f / rows).astype(np.float32))

    def _budget_shapes(self, micro_batches: List[TrainBatch], budget: int):
        """``train.max_tokens_per_micro_batch``: each micro-batch cut to its own longest
        response and padded to (rows, prompt bucket, its response bucket), rows rounded up to a
        power of two within the budget (:func:`budget_rows`). The trainer cut the rows by
        :meth:`budget_lengths`, so rows x padded length stays within the budget unless one
        row alone exceeds it."""
        import dataclasses

        out, shapes = [], []
        for mb in micro_batches:
            tb = mb.tokens
            own = max(int(tb.response_mask.sum(axis=1).max()), 1)
            T = bucket(own, self.response_buckets)
            P = bucket(tb.prompt_len, self.prompt_buckets)
            cut = min(T, tb.response_len)
            fields = {f.name: getattr(mb, f.name)[:, :cut] for f in dataclasses.fields(mb)
                      if f.name != "tokens" and getattr(mb, f.name) is not None}
            out.append(dataclasses.replace(mb, tokens=trim_response(tb, cut), **fields))
            shapes.append((budget_rows(len(mb), P + T, budget), P, T))
        return out, shapes

    def train_step(self, micro_batches: List[TrainBatch], norm: LossNormalizers) -> Dict[str, float]:
        """Forward/backward each micro-batch of the RL loss (compiled, bucket-padded),
        all-reduce (SUM) the accumulated gradients across ranks, clip, AdamW, schedule. A
        non-finite loss or grad norm skips the update (``update_skipped`` = 1). Metrics are
        global.

        Fused mode on one rank: the last micro-batch's graph also runs the optimizer step, so a
        one-micro-batch step is a single compiled call and a single host sync."""
        out = self._optimizer_step("rl", *self._rl_inputs(micro_batches, norm))
        if self.cfg.model.moe.aux_loss_coef:
            out["moe/aux_loss"] = self._aux_value       # the mini-batch's (all ranks)
        return out
