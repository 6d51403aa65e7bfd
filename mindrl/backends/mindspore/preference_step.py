"""The compiled preference micro-batch step: ``algorithms.preference_loss`` (DPO / IPO / SimPO,
plus ``pref_ftx`` x SFT) on one forward of the chosen and rejected rows stacked; with
``train.logprob_chunk_tokens`` the head in chunks (:mod:`~mindrl.backends.mindspore.chunked_head`),
the same loss on the same log-probs."""

from __future__ import annotations

from typing import Dict

import numpy as np
import mindspore as ms
from mindspore import Tensor, ops

from mindrl.backends.mindspore.buckets import pad2, repad
from mindrl.backends.mindspore.compiled import step_vector, token_logp


class PreferenceStepMixin:
    """``preference_step`` and the compiled preference step it runs."""

    def _pref_fn(self, has_ref: bool, update: bool = False, chunk: int = 0):
        """The compiled preference micro-batch step ``fn(chosen ids, pos, att, targets, mask,
        rejected ids, pos, att, targets, mask, ref_chosen, ref_rejected, inv_pairs[, hyper])``:
        ``algorithms.preference_loss`` (cfg.preference: DPO / IPO / SimPO + pref_ftx x SFT) on
        one forward of the chosen and rejected rows stacked, logits at temperature 1, with
        ``global_pairs`` = 1 and the result times ``inv_pairs`` (1 / pairs in the whole step),
        exact because the loss is (a sum over pairs) / global_pairs. ``chunk`` > 0: the head in
        chunks of that many tokens over the stacked rows (never with ``update``). Returns
        (fn, keys)."""
        from algorithms.ops import get_ops
        from algorithms.preference import preference_loss

        o, model, pcfg = self.ops, self.model, self.cfg.preference
        npo, z = get_ops("numpy"), np.zeros((1, 2))
        keys = sorted(preference_loss(npo, chosen_logp=z, chosen_mask=z + 1, rejected_logp=z,
                                      rejected_mask=z + 1, ref_chosen_logp=z if has_ref else None,
                                      ref_rejected_logp=z if has_ref else None, cfg=pcfg)[1])

        def loss_from(logp, c_mask, r_mask, ref_c, ref_r, inv_pairs):
            B = c_mask.shape[0]          # logp (2B, T): the chosen rows, then the rejected
            loss, metrics = preference_loss(
                o, chosen_logp=logp[:B], chosen_mask=c_mask, rejected_logp=logp[B:],
                rejected_mask=r_mask, ref_chosen_logp=ref_c if has_ref else None,
                ref_rejected_logp=ref_r if has_ref else None, cfg=pcfg, global_pairs=1.0)
            aux = ()
            for k in keys:
                aux = aux + (ops.stop_gradient(metrics[k]),)
            return loss * inv_pairs, aux

        if chunk:
            key = ("pref", has_ref, "chunked", chunk)
            if key not in self._train_fns:
                loss_grad = ms.value_and_grad(loss_from, 0, None, has_aux=True)

                def loss_grads(logp, c_mask, r_mask, ref_c, ref_r, inv_pairs):
                    (loss, aux), grads = loss_grad(logp, c_mask, r_mask, ref_c, ref_r,
                                                   inv_pairs)
                    return loss, aux, grads   # one position: one tensor

                run = self._chunked_step(chunk, loss_grads)
                unused = Tensor(np.float32(0.0))

                def step(c_ids, c_pos, c_att, c_tgt, c_mask, r_ids, r_pos, r_att, r_tgt, r_mask,
                         ref_c, ref_r, inv_pairs):
                    both = [Tensor(np.concatenate([c.asnumpy(), r.asnumpy()]))
                            for c, r in zip((c_ids, c_pos, c_att, c_tgt, c_mask),
                                            (r_ids, r_pos, r_att, r_tgt, r_mask))]
                    return step_vector(*run(*both, (c_mask, r_mask, ref_c, ref_r, inv_pairs),
                                            unused))

                self._train_fns[key] = step
            return self._train_fns[key], keys

        def loss_fn(c_ids, c_pos, c_att, c_tgt, c_mask, r_ids, r_pos, r_att, r_tgt, r_mask,
                    ref_c, ref_r, inv_pairs):
            tgt = ops.concat((c_tgt, r_tgt), 0)
            logits = model.response_logits(ops.concat((c_ids, r_ids), 0),
                                           ops.concat((c_pos, r_pos), 0),
                                           ops.concat((c_att, r_att), 0), tgt.shape[1])
            return loss_from(token_logp(logits, tgt), c_mask, r_mask, ref_c, ref_r, inv_pairs)

        return self._fused_step(("pref", has_ref, update), loss_fn, update), keys

    def _pref_inputs(self, micro_pairs, global_pairs: float):
        """``micro_pairs`` = [(chosen, rejected, ref_chosen or None, ref_rejected or None)]:
        chosen and rejected padded to one (prompt, response) bucket pair; rows are NOT padded
        (a padding pair would add a constant to the DPO / IPO / SimPO loss), so a smaller last
        micro-batch compiles its own shape."""
        has_ref = micro_pairs[0][2] is not None
        tbs = [tb for ch, rj, _, _ in micro_pairs for tb in (ch, rj)]
        _, P, T = self._shape(tbs, max(len(tb) for tb in tbs))
        inv_pairs = Tensor(np.float32(1.0 / max(float(global_pairs), 1.0)))
        inputs = []
        for ch, rj, ref_c, ref_r in micro_pairs:
            B = len(ch)
            args = (self._inputs(repad(ch, B, P, T, self.pad_id))
                    + self._inputs(repad(rj, B, P, T, self.pad_id))
                    + (Tensor(pad2(ref_c, B, T)), Tensor(pad2(ref_r, B, T)), inv_pairs))
            inputs.append((args, float(ch.response_mask.sum())))
        return (has_ref,), (None, P, T), inputs

    def preference_step(self, micro_pairs, global_pairs: float) -> Dict[str, float]:
        """One optimizer step of the preference loss (``algorithms.preference_loss``: DPO /
        IPO / SimPO, plus ``pref_ftx`` x SFT), as the torch backend's: ``micro_pairs`` =
        [(chosen TokenBatch, rejected TokenBatch, ref_chosen (B, T) or None, ref_rejected (B, T)
        or None)], ``global_pairs`` = pairs in the whole step (all micro-batches, all ranks).
        Compiled per bucket, same optimizer path as :meth:`train_step`."""
        return self._optimizer_step("pref", *self._pref_inputs(micro_pairs, global_pairs))
