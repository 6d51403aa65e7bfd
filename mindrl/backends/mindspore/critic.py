"""The PPO critic of the MindSpore backend: the policy's decoder (``model.py``, any family) with a
scalar value head, its own :class:`~mindrl.backends.mindspore.optim.AdamW`, and a compiled
value step like the policy's (forward, ``algorithms.value_loss`` and backward in one
``mindspore.jit`` graph per bucket shape, gradients accumulated in the graph; all-reduced (SUM)
across msrun ranks before clipping, as the policy's). With ``train.shard_optimizer`` its
optimizer is a :class:`~mindrl.backends.mindspore.sharded_optim.ShardedAdamW` too (gradient,
moments and masters sliced over the ranks; one optimizer file per slice in checkpoints). Loss
normalisers enter as a tensor (the reciprocal of the mode's divisor), so one graph serves every
step. See
:mod:`mindrl.backends.critic_files` for the weights' origin and file."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Dict, List

import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

from mindrl.backends.critic_files import (CRITIC_DIR, CRITIC_WEIGHTS, critic_source, fresh_head,
                                          needs_critic, read_critic, write_critic)
from mindrl.backends.metrics import MetricMerger, finish
from mindrl.backends.mindspore import weights as W
from mindrl.backends.mindspore.buckets import pad2, repad
from mindrl.backends.mindspore.compiled import step_vector
from mindrl.backends.mindspore.model import Linear, Qwen2ForCausalLM, recompute_layers
from mindrl.backends.mindspore.optim import AdamW
from mindrl.backends.schedule import lr_factor
from mindrl.types import LossNormalizers, TokenBatch, ValueBatch

OPTIM_FILE = "critic_optimizer.safetensors"
STATE_FILE = "critic_state.json"


class Qwen2ValueModel(Qwen2ForCausalLM):
    """The Qwen2 decoder (``model.*``, no LM head) and ``score`` (H -> 1, float32)."""

    def __init__(self, spec, dtype=ms.float32):
        super().__init__(dataclasses.replace(spec, tie_word_embeddings=True), dtype)
        self.score = Linear(spec.hidden_size, 1, True, ms.float32)

    def response_values(self, input_ids, position_ids, key_mask, response_len: int):
        """(B, T) float32 V(s_t) at the positions that predict the last T tokens."""
        S = input_ids.shape[1]
        h = self.hidden(input_ids, position_ids, key_mask)[:, S - response_len - 1:S - 1]
        return self.score(h.astype(ms.float32)).squeeze(-1)


class MindSporeCritic:
    def __init__(self, backend):
        from algorithms.ops import get_ops

        self.backend = be = backend
        self.cfg = cfg = backend.cfg
        self.model = Qwen2ValueModel(be.spec, dtype=be.dtype)
        kind, src = critic_source(cfg, be.model_path)
        if kind == "critic":
            arrays = read_critic(src)
        else:
            arrays = {k: v for k, v in W.iter_checkpoint(src) if k.startswith("model.")}
            arrays.update(fresh_head(be.spec.hidden_size, cfg.critic.head_init_std,
                                     cfg.train.seed))
        W.load_into(self.model, arrays.items())
        if cfg.model.gradient_checkpointing:
            recompute_layers(self.model)
        self.params = self.model.trainable_params()
        t, c = cfg.train, cfg.critic
        if t.shard_optimizer and be.world > 1:
            # gradient, moments and masters sliced over the ranks, as the policy's
            from mindrl.backends.mindspore.sharded_optim import ShardedAdamW

            self.optimizer = ShardedAdamW(self.params, rank=be.rank, world=be.world,
                                          betas=tuple(t.betas), eps=t.adam_eps,
                                          weight_decay=c.weight_decay,
                                          reduce_scatter=ms.get_context("device_target") != "CPU")
        else:
            reducer = ops.AllReduce(ops.ReduceOp.SUM) if be.world > 1 else None
            self.optimizer = AdamW(self.params, betas=tuple(t.betas), eps=t.adam_eps,
                                   weight_decay=c.weight_decay, all_reduce=reducer)
        self._staged_shards = None
        self.optimizer_steps = 0
        self.ops = get_ops("mindspore")
        model = self.model

        def values_fn(ids, pos, att, targets, mask):
            return model.response_values(ids, pos, att, targets.shape[1]) * mask

        self._values_fn = ms.jit(values_fn)
        self._step_fn = None
        self.keys: List[str] = []

    # ------------------------------------------------------------------ values
    def values(self, batch: TokenBatch, micro_batch_size: int = 8) -> np.ndarray:
        """(B, T) float32 values of the response positions, 0 at padding (bucket-padded,
        compiled once per shape)."""
        be = self.backend
        rows = max(1, min(micro_batch_size, len(batch)))
        _, P, T = be._shape([batch], rows)
        out = []
        for s in range(0, len(batch), rows):
            mb = batch.rows(slice(s, s + rows))
            v = be._timed("critic_values", (rows, P, T), self._values_fn,
                          *be._inputs(repad(mb, rows, P, T, be.pad_id))).asnumpy()
            out.append(v[:len(mb), :batch.response_len])
        return np.concatenate(out).astype(np.float32)

    # ------------------------------------------------------------------ training
    def _compiled_step(self):
        """``fn(ids, pos, att, targets, mask, old, ret, inv_norm) -> [loss, *metrics]``: the
        value loss's forward and backward, the gradient added to the flat accumulator."""
        if self._step_fn is not None:
            return self._step_fn
        from algorithms.ops import get_ops
        from algorithms.value_loss import value_loss

        o, c, model = self.ops, self.cfg.critic, self.model
        npo = get_ops("numpy")
        z = np.zeros((1, 2))
        keys = sorted(value_loss(npo, values=z, old_values=z, returns=z, response_mask=z + 1,
                                 cliprange_value=c.cliprange_value,
                                 loss_agg_mode=c.loss_agg_mode)[1])

        def loss_fn(ids, pos, att, targets, mask, old, ret, inv_norm):
            v = model.response_values(ids, pos, att, targets.shape[1])
            loss, metrics = value_loss(o, values=v, old_values=old, returns=ret,
                                       response_mask=mask, cliprange_value=c.cliprange_value,
                                       loss_agg_mode=c.loss_agg_mode, global_tokens=1.0,
                                       global_seqs=1.0, max_len=1.0)
            aux = ()
            for k in keys:
                aux = aux + (ops.stop_gradient(metrics[k]),)
            return loss * inv_norm, aux

        grad_fn = ms.value_and_grad(loss_fn, None, self.params, has_aux=True)
        accumulate = self.optimizer.accumulate_in_graph

        def step(ids, pos, att, targets, mask, old, ret, inv_norm):
            (loss, aux), grads = grad_fn(ids, pos, att, targets, mask, old, ret, inv_norm)
            accumulate(grads)
            return step_vector(loss, aux)

        self.keys = keys
        self._step_fn = ms.jit(step)
        return self._step_fn

    def _accumulate(self, micro_batches: List[ValueBatch], norm: LossNormalizers):
        be = self.backend
        fn = self._compiled_step()
        rows = max(self.cfg.train.micro_batch_size, max(len(m) for m in micro_batches))
        _, P, T = be._shape([m.tokens for m in micro_batches], rows)
        inv_norm = Tensor(np.float32(1.0 / norm.divisor(self.cfg.critic.loss_agg_mode)))
        outputs = []
        missing = be._micro_batches_missing(len(micro_batches), self.optimizer)
        for mb in micro_batches:
            tb = repad(mb.tokens, rows, P, T, be.pad_id)
            f = lambda a: Tensor(pad2(a, rows, T))  # noqa: E731
            vec = be._timed("critic_step", (rows, P, T), fn, *be._inputs(tb),
                            f(mb.old_values), f(mb.returns), inv_norm)
            outputs.append((vec, float(mb.tokens.response_mask.sum())))
        for _ in range(missing):              # sharded: the others' reduces, with zeros
            self.optimizer.reduce_nothing()
        merger = MetricMerger()
        for vec, n_tok in outputs:
            merger.add(zip(["loss"] + self.keys, vec.asnumpy().astype(np.float64).tolist()),
                       n_tok)
        return merger.parts()

    def step(self, micro_batches: List[ValueBatch], norm: LossNormalizers) -> Dict[str, float]:
        """One critic optimizer step (accumulate, all-reduce, clip, AdamW at the scheduled
        critic lr). Metrics: loss, vf_clipfrac, vpred_mean, grad_norm, lr."""
        t, c = self.cfg.train, self.cfg.critic
        lr = c.lr * lr_factor(self.optimizer_steps, warmup=t.warmup_steps,
                              total=self.backend.total_steps, schedule=t.lr_schedule,
                              min_ratio=t.min_lr_ratio)
        sums, maxes, mins, tokens = self._accumulate(micro_batches, norm)
        if self.backend.world > 1:
            sums, maxes, mins, tokens = self.backend._reduce_metrics(sums, maxes, mins, tokens)
        out = finish(sums, maxes, mins, tokens)
        grad_norm = self.optimizer.grad_norm()
        if math.isfinite(grad_norm) and math.isfinite(out.get("loss", 0.0)):
            self.optimizer.apply(lr, c.grad_clip, grad_norm)
            self.optimizer_steps += 1
        else:
            self.optimizer.zero_grad()
        out.update(grad_norm=grad_norm, lr=lr)
        return out

    def gradients(self, micro_batches: List[ValueBatch], norm: LossNormalizers
                  ) -> Dict[str, np.ndarray]:
        """The summed value-loss gradient by HF name, without a step (tests)."""
        self._accumulate(micro_batches, norm)
        out = {p.name: g for p, g in zip(self.params, self.optimizer.grad_arrays())}
        self.optimizer.zero_grad()
        return out

    # ------------------------------------------------------------------ state
    def arrays(self) -> Dict[str, np.ndarray]:
        return dict(W.named_arrays(self.model))

    def stage_checkpoint(self) -> None:
        """Sharded: every rank's optimizer slice to rank 0 (collective, as the policy's)."""
        if getattr(self.optimizer, "sharded", False):
            self._staged_shards = self.optimizer.gather_shards()

    def save_state(self, directory: str) -> None:
        """Weights and AdamW state (rank 0; with a sharded optimizer one file per slice, all
        written by rank 0 after :meth:`stage_checkpoint`, else each rank its own)."""
        d = Path(directory) / CRITIC_DIR
        shards = self.backend.world if getattr(self.optimizer, "sharded", False) else 0
        if shards:
            from mindrl.backends.mindspore.sharded_optim import save_shard

            d.mkdir(parents=True, exist_ok=True)
            staged, self._staged_shards = self._staged_shards, None
            if staged is not None:
                for r, arrays in enumerate(staged):
                    save_shard(self.optimizer, str(d), r, arrays)
            else:
                save_shard(self.optimizer, str(d))
        if self.backend.rank != 0:
            return
        d.mkdir(parents=True, exist_ok=True)
        write_critic(d / CRITIC_WEIGHTS, self.arrays())
        if not shards:
            W.write_safetensors(str(d / OPTIM_FILE), self.optimizer.state_arrays(), "float32",
                                metadata={"format": "mindrl-mindspore"})
        tmp = d / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps({"optimizer_steps": self.optimizer_steps,
                                   "adam_step": self.optimizer.step,
                                   "optimizer_shards": shards}))
        os.replace(tmp, d / STATE_FILE)

    def load_state(self, directory: str) -> None:
        from mindrl.errors import UserError

        d = Path(directory) / CRITIC_DIR
        for f in (CRITIC_WEIGHTS, STATE_FILE):
            if not (d / f).is_file():
                raise UserError(f"{d / f} is missing: the checkpoint has no critic state "
                                "(was it written by a run without algorithm.adv_estimator=gae?)")
        meta = json.loads((d / STATE_FILE).read_text())
        shards = int(meta.get("optimizer_shards", 0))     # 0: one replicated file
        if not shards and not (d / OPTIM_FILE).is_file():
            raise UserError(f"{d / OPTIM_FILE} is missing: the checkpoint has no critic "
                            "optimizer state")
        W.load_into(self.model, read_critic(str(d / CRITIC_WEIGHTS)).items())
        if getattr(self.optimizer, "sharded", False):
            from mindrl.backends.mindspore.sharded_optim import load_sharded

            load_sharded(self.optimizer, str(d), meta["adam_step"], shards, OPTIM_FILE)
        elif shards:
            from mindrl.backends.mindspore.sharded_optim import replicated_arrays

            self.optimizer.load_state_arrays(
                replicated_arrays(self.optimizer.params, str(d), shards), meta["adam_step"])
        else:
            self.optimizer.load_state_arrays(W.read_safetensors(str(d / OPTIM_FILE)),
                                             meta["adam_step"])
        self.optimizer_steps = meta["optimizer_steps"]


def build_critic(backend):
    """The critic when the run needs one (``algorithm.adv_estimator: gae``), else None."""
    return MindSporeCritic(backend) if needs_critic(backend.cfg) else None
