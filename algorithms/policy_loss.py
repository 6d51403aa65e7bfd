"""Policy-gradient losses: per-token loss (B, T) and metrics, aggregation left to the caller.

Every loss has the signature

    fn(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low, clip_eps_high,
       dual_clip_c=0, log_ratio_clamp=20, rollout_logp=None, tis_cap=0)
       -> (per_token_loss (B, T), metrics: dict[str, scalar tensor, no gradient])

with logp (B, T) log pi_theta(a_t) (differentiable), old_logp (B, T) log pi_old(a_t) from the
trainer before the update, advantages (B, T), response_mask (B, T), rollout_logp (B, T) the
rollout engine's own log-probs of the same tokens. Common to all:

    rho_t = exp(clamp(logp - old_logp, -L, L))                    (L = log_ratio_clamp)
    w_t   = sg(min(exp(old_logp - rollout_logp), tis_cap))       truncated IS, when tis_cap > 0

w corrects for the mismatch between the rollout engine and the trainer (they never agree
exactly: sampling filters, kernels, precision); the loss is multiplied by it (as verl's TIS).
Metrics are masked means over this call's tokens (``approx_kl`` is the k3 estimate of
KL(pi_old || pi_theta), >= 0).
"""

from __future__ import annotations

import math
from typing import Callable

from mindrl.registry import Registry

POLICY_LOSSES: Registry[Callable] = Registry("policy loss")


def _ratio(ops, logp, old_logp, log_ratio_clamp):
    log_ratio = logp - old_logp
    if log_ratio_clamp and log_ratio_clamp > 0:
        log_ratio = ops.clamp(log_ratio, -log_ratio_clamp, log_ratio_clamp)
    return log_ratio, ops.exp(log_ratio)


def _tis(ops, loss, old_logp, rollout_logp, tis_cap, mask, metrics):
    """Multiply ``loss`` by the detached truncated IS weight; add its metrics."""
    if rollout_logp is None or not tis_cap or tis_cap <= 0:
        return loss, metrics
    diff = ops.stop_gradient(old_logp - rollout_logp)
    weight = ops.exp(ops.minimum(diff, math.log(tis_cap)))
    metrics["tis_weight_mean"] = ops.masked_mean(weight, mask)
    metrics["tis_capped_frac"] = ops.masked_mean(ops.as_float(diff > math.log(tis_cap), mask),
                                                 mask)
    return loss * weight, metrics


def _ratio_metrics(ops, log_ratio, ratio, mask, metrics):
    lr, r = ops.stop_gradient(log_ratio), ops.stop_gradient(ratio)
    metrics["approx_kl"] = ops.masked_mean(r - 1.0 - lr, mask)
    metrics["ratio_mean"] = ops.masked_mean(r, mask)
    # ratio > 0: padding filled with 0 cannot win the max, filled with the max cannot win the
    # min (both read 0 when the mask is empty).
    ratio_max = ops.amax(r * mask)
    metrics["ratio_max"] = ratio_max
    metrics["ratio_min"] = ops.amin(r * mask + (1.0 - mask) * ratio_max)
    return metrics


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low, clip_eps_high,
             dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None, tis_cap=0.0):
    """PPO clipped surrogate with clip-higher and dual clip.

        l_t = max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high))        (Schulman 2017; DAPO)
        l_t = min(l_t, -A c)  where A < 0, when c = dual_clip_c > 1        (Ye et al. 2020)

    Metrics: clipfrac_upper (A > 0 and rho > 1 + eps_high), clipfrac_lower (A < 0 and
    rho < 1 - eps_low), clipfrac (their sum: tokens whose gradient the clip removed),
    dual_clip_frac (A < 0 and the dual bound binds), approx_kl, ratio_mean/max/min.
    """
    mask = ops.as_float(response_mask, like=logp)
    adv = advantages
    log_ratio, ratio = _ratio(ops, logp, old_logp, log_ratio_clamp)
    unclipped = -adv * ratio
    clipped = -adv * ops.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
    loss = ops.maximum(unclipped, clipped)
    metrics = {}
    r = ops.stop_gradient(ratio)
    pos, neg = ops.as_float(adv > 0, mask), ops.as_float(adv < 0, mask)
    upper = pos * ops.as_float(r > 1.0 + clip_eps_high, mask)
    lower = neg * ops.as_float(r < 1.0 - clip_eps_low, mask)
    metrics["clipfrac_upper"] = ops.masked_mean(upper, mask)
    metrics["clipfrac_lower"] = ops.masked_mean(lower, mask)
    metrics["clipfrac"] = ops.masked_mean(upper + lower, mask)
    if dual_clip_c and dual_clip_c > 0:
        bound = -adv * dual_clip_c
        binds = neg * ops.as_float(ops.stop_gradient(loss) > ops.stop_gradient(bound), mask)
        loss = ops.where(adv < 0, ops.minimum(loss, bound), loss)
        metrics["dual_clip_frac"] = ops.masked_mean(binds, mask)
    metrics = _ratio_metrics(ops, log_ratio, ratio, mask, metrics)
    loss, metrics = _tis(ops, loss, old_logp, rollout_logp, tis_cap, mask, metrics)
    return loss, metrics


@POLICY_LOSSES.register("vanilla_pg")
def vanilla_pg(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low=0.2,
               clip_eps_high=0.2, dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None,
               tis_cap=0.0):
    """Unclipped importance-weighted policy gradient: l_t = -A rho_t.

    Its gradient is -A rho grad(logp); on-policy (logp == old_logp, rho = 1) that is exactly
    REINFORCE, -A grad(log pi). The clip options are accepted and ignored.
    """
    mask = ops.as_float(response_mask, like=logp)
    log_ratio, ratio = _ratio(ops, logp, old_logp, log_ratio_clamp)
    loss = -advantages * ratio
    metrics = {}
    metrics = _ratio_metrics(ops, log_ratio, ratio, mask, metrics)
    loss, metrics = _tis(ops, loss, old_logp, rollout_logp, tis_cap, mask, metrics)
    return loss, metrics
