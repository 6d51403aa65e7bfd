"""The RL objective the backends minimise, assembled from the registered parts:

    L = agg(l^pg) + [kl.coef * agg(KL_est(logp, ref_logp))  if kl.coef > 0 and not kl.in_reward]
                  - entropy_coef * agg(H)
                  [+ distill.coef * agg(r * sg(logp - teacher_logp))  with teacher_logp given]
                  [+ distill.coef * agg(KL_full)  with teacher_kl given (estimator full)]

with one aggregation mode (``algorithm.loss_agg_mode``) and the same explicit normalisers for
every term, so micro-batch and rank partials sum to the full-batch loss. The per-token
policy loss l^pg is multiplied by the detached rollout-correction factor of
:mod:`algorithms.is_correction` (importance weights, rejection masks) when
``algorithm.rollout_correction`` asks for one. The distillation term (``algorithm.distill.mode``
= loss) is :func:`algorithms.distill.distill_loss`.
"""

from __future__ import annotations

from .aggregation import aggregate
from .distill import distill_loss
from .is_correction import rollout_correction
from .kl import kl_penalty
from .policy_loss import POLICY_LOSSES

#: ``AlgorithmConfig`` fields every policy loss receives as keywords (verl's names for the
#: loss-specific ones); a loss ignores those it does not use.
LOSS_HYPER = ("clip_eps_low", "clip_eps_high", "dual_clip_c", "log_ratio_clamp", "tis_cap",
              "tau_pos", "tau_neg", "clip_cov_ratio", "clip_cov_lb", "clip_cov_ub",
              "kl_cov_ratio", "ppo_kl_coef")


def loss_hyper(cfg) -> dict:
    """The policy-loss keyword arguments of an ``AlgorithmConfig`` (duck-typed; fields it
    lacks are left to the loss's defaults)."""
    return {k: getattr(cfg, k) for k in LOSS_HYPER if hasattr(cfg, k)}


def rl_loss(ops, *, logp, old_logp, advantages, response_mask, ref_logp=None,
            rollout_logp=None, entropy=None, cfg, global_tokens=None, global_seqs=None,
            max_len=None, teacher_logp=None, entropy_coef=None, teacher_kl=None,
            cov_picked=None):
    """Scalar loss and metrics for one micro-batch.

    logp (B, T) differentiable, float32 or wider (compute it in fp32 from bf16 logits);
    old_logp, advantages, ref_logp, rollout_logp (B, T) constants, tensors or NumPy arrays
    (cast to logp's dtype and device);
    entropy (B, T) differentiable token entropy or None; ``cfg`` an ``AlgorithmConfig``
    (duck-typed: policy_loss, the :data:`LOSS_HYPER` fields, rollout_correction,
    kl.{coef, estimator, in_reward, log_ratio_clip, value_clip}, entropy_coef,
    loss_agg_mode, distill.coef). Metrics are scalar tensors without gradient: the policy loss's
    own plus pg_loss, kl (when a reference is given), entropy (when given), distill_kl (the
    current k1 to the teacher, when ``teacher_logp`` (B, T) is given: the distillation loss term;
    with ``teacher_kl`` (B, T), the differentiable exact per-position reverse KL of
    :func:`algorithms.distill.full_reverse_kl`, the term is ``coef * agg(teacher_kl)`` and
    distill_kl its token mean).
    ``entropy_coef`` (a number or a scalar tensor) replaces ``cfg.entropy_coef`` for this step
    (adaptive entropy control, :mod:`algorithms.entropy_control`): the bonus term is then in
    the graph even while the coefficient is 0, so a compiled step need not be rebuilt.
    ``cov_picked`` (B, T): the tokens a covariance loss (clip_cov, kl_cov) picked over the
    whole mini-batch (:func:`algorithms.policy_loss.batch_token_selection`); None = picked
    over this call's tokens.
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
    per_token, metrics = policy(ops, logp, old_logp, advantages, mask,
                                rollout_logp=rollout_logp, cov_picked=cov_picked,
                                **loss_hyper(cfg))
    if rollout_logp is not None:
        factor, corr_metrics = rollout_correction(
            ops, logp=logp, old_logp=old_logp, rollout_logp=rollout_logp, advantages=advantages,
            mask=mask, rc=getattr(cfg, "rollout_correction", None))
        if factor is not None:
            per_token = per_token * factor
            metrics.update(corr_metrics)
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
    if teacher_logp is not None:
        teacher_logp = ops.as_float(teacher_logp, like=logp)
        per_tok = distill_loss(ops, logp, old_logp, teacher_logp, cfg.log_ratio_clamp)
        metrics["distill_kl"] = ops.masked_mean(ops.stop_gradient(logp - teacher_logp), mask)
        loss = loss + cfg.distill.coef * aggregate(ops, per_tok, mask, cfg.loss_agg_mode, **norms)
    if teacher_kl is not None:
        metrics["distill_kl"] = ops.masked_mean(ops.stop_gradient(teacher_kl), mask)
        loss = loss + cfg.distill.coef * aggregate(ops, teacher_kl, mask, cfg.loss_agg_mode,
                                                   **norms)
    if entropy is not None:
        metrics["entropy"] = ops.masked_mean(ops.stop_gradient(entropy), mask)
        if entropy_coef is not None or cfg.entropy_coef:
            coef = cfg.entropy_coef if entropy_coef is None else entropy_coef
            loss = loss - coef * aggregate(ops, entropy, mask, cfg.loss_agg_mode, **norms)
    return loss, metrics
