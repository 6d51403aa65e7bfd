"""Token entropy of the policy from its logits: H = logsumexp(z) - sum_v softmax(z)_v z_v.

Stable form: z' = z - max(z) (max without gradient; H is shift-invariant), lse = log sum exp z',
p = exp(z' - lse), H = lse - sum p z'. Used as a bonus (``algorithm.entropy_coef``) and metric.
"""

from __future__ import annotations


def entropy_from_logits(ops, logits):
    """(B, T, V) logits -> (B, T) entropy in nats."""
    z = logits - ops.stop_gradient(ops.amax(logits, axis=-1, keepdims=True))
    lse = ops.log(ops.sum(ops.exp(z), axis=-1, keepdims=True))
    p = ops.exp(z - lse)
    return ops.squeeze_last(lse) - ops.sum(p * z, axis=-1)
