"""The critic's loss for PPO with GAE, written once against the ops namespace.

For values V (B, T) of the critic being trained, V_old (B, T) the values the advantages were
computed with and returns R (B, T) (``algorithms.gae``):

    V_clip = V_old + clip(V - V_old, -c, c)                   (c = ``cliprange_value``)
    l_t    = 0.5 * max((V - R)^2, (V_clip - R)^2)             (c <= 0: 0.5 * (V - R)^2)
    L      = agg(l)                                            (``algorithms.aggregation``)

as PPO's clipped value loss (verl ``compute_value_loss``, OpenAI baselines ppo2). Metrics:
``vf_clipfrac`` (share of valid tokens where the clipped term is larger), ``vpred_mean``.
"""

from __future__ import annotations

from .aggregation import aggregate


def value_loss(ops, *, values, old_values, returns, response_mask, cliprange_value: float,
               loss_agg_mode: str = "token_mean", global_tokens=None, global_seqs=None,
               max_len=None):
    """(scalar loss, metrics) for one micro-batch. ``values`` (B, T) differentiable;
    ``old_values``, ``returns``, ``response_mask`` (B, T) constants (arrays or tensors, cast to
    ``values``' dtype). Normalisers as in :func:`algorithms.aggregation.aggregate`."""
    mask = ops.as_float(response_mask, like=values)
    old = ops.as_float(old_values, like=values)
    ret = ops.as_float(returns, like=values)
    unclipped = ops.square(values - ret)
    if cliprange_value > 0:
        clipped_v = old + ops.clamp(values - old, -cliprange_value, cliprange_value)
        clipped = ops.square(clipped_v - ret)
        per_token = 0.5 * ops.maximum(unclipped, clipped)
        clipfrac = ops.masked_mean(ops.as_float(clipped > unclipped, mask), mask)
    else:
        per_token = 0.5 * unclipped
        clipfrac = ops.masked_mean(ops.zeros_like(mask), mask)
    loss = aggregate(ops, per_token, mask, loss_agg_mode, global_tokens=global_tokens,
                     global_seqs=global_seqs, max_len=max_len)
    metrics = {"vf_clipfrac": ops.stop_gradient(clipfrac),
               "vpred_mean": ops.masked_mean(ops.stop_gradient(values), mask)}
    return loss, metrics
