"""The compiled SFT micro-batch step: masked next-token NLL on the response tokens
(``algorithms.sft_nll``, token mean over the global token count), logits at temperature 1;
with ``train.logprob_chunk_tokens`` the head in chunks
(:mod:`~mindrl.backends.mindspore.chunked_head`), the same loss on the same log-probs."""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

from mindrl.backends.mindspore.buckets import repad
from mindrl.backends.mindspore.compiled import step_vector, token_logp
from mindrl.types import LossNormalizers, TokenBatch


class SFTStepMixin:
    """``sft_step`` and the compiled SFT step it runs."""

    def _sft_fn(self, update: bool = False, chunk: int = 0):
        """The compiled SFT micro-batch step ``fn(ids, pos, att, targets, mask, inv_norm[,
        hyper])``: loss = sum(mask * -logp) * inv_norm (``algorithms.sft_nll``, token mean over
        the global token count given as its reciprocal), logits at temperature 1; aux = this
        micro-batch's mean NLL. ``chunk`` > 0: the head in chunks of that many tokens (never
        with ``update``). Returns (fn, ["nll"])."""
        from algorithms.preference import sft_nll

        o, model = self.ops, self.model

        def loss_from(logp, mask, inv_norm):
            loss = sft_nll(o, logp, mask, "token_mean", global_tokens=1.0) * inv_norm
            nll = -(logp * mask).sum() / ops.maximum(mask.sum(), 1.0)
            return loss, (ops.stop_gradient(nll),)

        if chunk:
            key = ("sft", "chunked", chunk)
            if key not in self._train_fns:
                loss_grad = ms.value_and_grad(loss_from, 0, None, has_aux=True)

                def loss_grads(logp, mask, inv_norm):
                    (loss, aux), grads = loss_grad(logp, mask, inv_norm)
                    return loss, aux, grads   # one position: one tensor

                run = self._chunked_step(chunk, loss_grads)
                unused = Tensor(np.float32(0.0))

                def step(ids, pos, att, targets, mask, inv_norm):
                    return step_vector(*run(ids, pos, att, targets, mask, (mask, inv_norm),
                                            unused))

                self._train_fns[key] = step
            return self._train_fns[key], ["nll"]

        def loss_fn(ids, pos, att, targets, mask, inv_norm):
            logp = token_logp(model.response_logits(ids, pos, att, targets.shape[1]), targets)
            return loss_from(logp, mask, inv_norm)

        return self._fused_step(("sft", update), loss_fn, update), ["nll"]

    def _sft_inputs(self, micro_batches: List[TokenBatch], norm: LossNormalizers):
        rows = max(self.cfg.train.micro_batch_size, max(len(m) for m in micro_batches))
        shape = self._shape(micro_batches, rows)
        _, P, T = shape
        inv_norm = Tensor(np.float32(1.0 / norm.divisor("token_mean")))
        inputs = [(self._inputs(repad(tb, rows, P, T, self.pad_id)) + (inv_norm,),
                   float(tb.response_mask.sum())) for tb in micro_batches]
        return (), shape, inputs

    def sft_step(self, micro_batches: List[TokenBatch], norm: LossNormalizers) -> Dict[str, float]:
        """One optimizer step of masked next-token NLL on the response tokens (token mean over
        ``norm.global_tokens``, logits at temperature 1), compiled once per bucket like
        :meth:`train_step` and sharing its optimizer state, accumulation, all-reduce, clipping,
        schedule and non-finite skip. Metrics as the torch backend's: ``loss`` (the global mean
        NLL), ``nll``, grad_norm, lr, update_skipped, response_tokens."""
        return self._optimizer_step("sft", *self._sft_inputs(micro_batches, norm))
