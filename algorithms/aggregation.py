"""Loss aggregation: a per-token loss l (B, T) and mask m (B, T) -> one scalar.

Kept apart from the losses, with every normaliser passed explicitly, so that the partial losses
of the micro-batches of all ranks SUM to the loss of the whole (mini-)batch; the gradients then
sum too. The caller counts once per optimizer step and passes the same numbers to every
micro-batch: ``global_tokens`` = sum of m over the whole batch (all micro-batches, all ranks),
``global_seqs`` = number of sequences in it, ``max_len`` = the constant length budget
(rollout.max_new_tokens). Left as None they default to this call's own counts (single batch).
Data-parallel gradient *averaging* divides by the world size R: multiply each rank's loss by R
(or all-reduce with SUM) to keep the full-batch gradient.

* ``token_mean``               sum_{i,t} m l / global_tokens           (DAPO, verl default)
* ``seq_mean_token_sum``       sum_i (sum_t m l) / global_seqs
* ``seq_mean_token_mean``      sum_i (sum_t m l / sum_t m) / global_seqs   (GRPO paper)
* ``seq_mean_token_sum_norm``  sum_{i,t} m l / (global_seqs * max_len)  (Dr. GRPO)

A sequence with no valid tokens contributes 0 (its token count is clamped to 1). Departure for
Dr. GRPO: verl divides the token sum by max_len only; the paper's code (oat) also averages over
sequences, which keeps the scale independent of the batch size, so we do that.
"""

from __future__ import annotations

from typing import Callable, Optional

from mindrl.registry import Registry

AGG_MODES: Registry[Callable] = Registry("loss aggregation mode")


@AGG_MODES.register("token_mean")
def token_mean(ops, loss, mask, *, global_tokens, global_seqs, max_len):
    return ops.sum(loss * mask) / global_tokens


@AGG_MODES.register("seq_mean_token_sum")
def seq_mean_token_sum(ops, loss, mask, *, global_tokens, global_seqs, max_len):
    return ops.sum(loss * mask) / global_seqs


@AGG_MODES.register("seq_mean_token_mean")
def seq_mean_token_mean(ops, loss, mask, *, global_tokens, global_seqs, max_len):
    per_seq = ops.sum(loss * mask, axis=-1) / ops.maximum(ops.sum(mask, axis=-1), 1.0)
    return ops.sum(per_seq) / global_seqs


@AGG_MODES.register("seq_mean_token_sum_norm")
def seq_mean_token_sum_norm(ops, loss, mask, *, global_tokens, global_seqs, max_len):
    return ops.sum(loss * mask) / (global_seqs * max_len)


def aggregate(ops, loss, mask, mode: str = "token_mean", *, global_tokens: Optional[float] = None,
              global_seqs: Optional[float] = None, max_len: Optional[float] = None):
    """Scalar loss from per-token ``loss`` (B, T) under ``mask`` (B, T) with ``mode``.

    Normalisers are plain numbers (Python or NumPy); None means "this call's own count"
    (sum of mask, number of rows, number of columns). ``global_tokens`` is clamped to >= 1.
    """
    fn = AGG_MODES.get(mode)
    mask = ops.as_float(mask, like=loss)
    # Given normalisers are plain floats (no host sync, graph-mode safe); a missing token
    # count is computed in the backend from this call's mask.
    tokens = ops.maximum(ops.sum(mask), 1.0) if global_tokens is None \
        else max(float(global_tokens), 1.0)
    seqs = max(float(mask.shape[0] if global_seqs is None else global_seqs), 1.0)
    length = max(float(mask.shape[-1] if max_len is None else max_len), 1.0)
    return fn(ops, loss, mask, global_tokens=tokens, global_seqs=seqs, max_len=length)
