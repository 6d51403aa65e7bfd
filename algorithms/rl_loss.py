"""The RL objective the backends minimise, assembled from the registered parts:

    L = agg(l^pg) + [kl.coef * agg(KL_est(logp, ref_logp))  if kl.coef > 0 and not kl.in_reward]
                  - entropy_coef * agg(H)

with one aggregation mode (``algorithm.loss_agg_mode``) and the same explicit normalisers for
all three terms, so micro-batch and rank partials sum to the full-batch loss.
"""

from __future__ import annotations

from .aggregation import aggregate
from .kl import kl_penalty
from .policy_loss import POLICY_LOSSES


def rl_loss(ops, *, logp, old_logp, advantages, response_mask, ref_logp=None,
            rollout_logp=None, entropy=None, cfg, global_tokens=None, global_seqs=None,
            max_len=None):
    """Scalar loss and metrics for one micro-batch.

    logp (B, T) differentiable, float32 or wider (compute it in fp32 from bf16 logits);
    old_logp, advantages, ref_logp, rollout_logp (B, T) constants, tensors or NumPy arrays
    (cast to logp's dtype and device);
    entropy (B, T) differentiable token entropy or None; ``cfg`` an ``AlgorithmConfig``
    (duck-typed: policy_loss, clip_eps_low, clip_eps_high, dual_clip_c, log_ratio_clamp,
    tis_cap, kl.{coef, estimator, in_reward, log_ratio_clip, value_clip}, entropy_coef,
    loss_agg_mode). Metrics are scalar tensors without gradient: the policy loss's own plus
    pg_loss, kl (when a reference is given), entropy (when given).
    """
    policy = POLICY_LOSSES.get(cfg.policy_loss)
    # Constants may arrive as NumPy arrays or in another dtype: match logp (dtype, device).
    mask = ops.as_float(response_mask, like=logp)
    old_logp = ops.as_float(old_logp, like=logp)
    advantages = ops.as_float(advantages, like=logp)
    if ref_logp is not None:
        ref_logp = ops.as_float(ref_logp, like=logp)
    if rollout_logp is not None:
        rollout_logp = ops.as_float(rollout_logp, like=logp)
    norms = dict(global_tokens=global_tokens, global_seqs=global_seqs, max_len=max_len)
    per_token, metrics = policy(
        ops, logp, old_logp, advantages, mask, clip_eps_low=cfg.clip_eps_low,
        clip_eps_high=cfg.clip_eps_high, dual_clip_c=cfg.dual_clip_c,
        log_ratio_clamp=cfg.log_ratio_clamp, rollout_logp=rollout_logp, tis_cap=cfg.tis_cap)
    pg = aggregate(ops, per_token, mask, cfg.loss_agg_mode, **norms)
    loss = pg
    metrics["pg_loss"] = ops.stop_gradient(pg)
    kl_cfg = cfg.kl
    if ref_logp is not None:
        kl = kl_penalty(ops, logp, ref_logp, kl_cfg.estimator, kl_cfg.log_ratio_clip,
                        kl_cfg.value_clip)
        metrics["kl"] = ops.masked_mean(ops.stop_gradient(kl), mask)
        if kl_cfg.coef and not kl_cfg.in_reward:
            loss = loss + kl_cfg.coef * aggregate(ops, kl, mask, cfg.loss_agg_mode, **norms)
    if entropy is not None:
        metrics["entropy"] = ops.masked_mean(ops.stop_gradient(entropy), mask)
        if cfg.entropy_coef:
            loss = loss - cfg.entropy_coef * aggregate(ops, entropy, mask, cfg.loss_agg_mode,
                                                       **norms)
    return loss, metrics
