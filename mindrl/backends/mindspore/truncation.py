"""MindSpore form of :mod:`algorithms.truncation` (traced into the backend's graphs): the
policy's logits under the rollout's top-k / min-p / top-p masks, with kernels that run on CPU
(``ops.topk`` sorts for top-p; no one-hot or scatter: the scored token is kept through its own
term in the normaliser)."""

from __future__ import annotations

import math

from mindspore import dtype as mstype, ops

from algorithms.truncation import FILL, Truncation


def keep_float(z, trunc: Truncation):
    """(B, T, V) tempered logits (no gradient) -> (B, T, V) float 1 where the sampler may draw."""
    V = z.shape[-1]
    keep = ops.ones_like(z)
    if 1 <= trunc.top_k < V:
        kth = ops.topk(z, trunc.top_k)[0][..., trunc.top_k - 1:trunc.top_k]
        keep = keep * ops.cast(z >= kth, z.dtype)
    if trunc.min_p > 0.0:
        keep = keep * ops.cast(z >= z.max(-1, keepdims=True) + math.log(trunc.min_p), z.dtype)
    if trunc.top_p < 1.0:
        zk = z + (1.0 - keep) * FILL
        p = ops.softmax(zk - zk.max(-1, keepdims=True), -1)
        s = ops.topk(p, V)[0]                                   # descending
        n_keep = ops.cast(ops.cumsum(s, -1) - s < trunc.top_p, mstype.int32).sum(-1,
                                                                              keepdims=True)
        thr = ops.gather_elements(s, 2, n_keep - 1)
        keep = keep * ops.cast(p >= thr, z.dtype)
    return keep


def truncated_logits_and_logp(logits, targets, trunc):
    """(B, T, V) tempered logits, (B, T) ids -> (logits with cut tokens at FILL (B, T, V),
    log q(target) (B, T), the target kept even when cut). ``trunc`` None: the plain
    log-softmax."""
    if trunc is None:
        logp = ops.gather_elements(ops.log_softmax(logits, -1), 2,
                                   targets.expand_dims(-1)).squeeze(-1)
        return logits, logp
    keep = ops.stop_gradient(keep_float(ops.stop_gradient(logits), trunc))
    cut = logits + (1.0 - keep) * FILL
    idx = targets.expand_dims(-1)
    z_t = ops.gather_elements(logits, 2, idx).squeeze(-1)                    # (B, T)
    kept_t = ops.gather_elements(keep, 2, idx).squeeze(-1)
    m = ops.stop_gradient(cut.max(-1))
    # sum over the kept tokens, plus the target's own term when it was cut
    total = ops.exp(cut - m.expand_dims(-1)).sum(-1) + (1.0 - kept_t) * ops.exp(z_t - m)
    return cut, z_t - m - ops.log(total)
