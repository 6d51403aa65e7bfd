"""Policy losses: per-token loss (B, T) and metrics, aggregation left to the caller.

Every loss has the signature

    fn(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low, clip_eps_high,
       dual_clip_c=0, log_ratio_clamp=20, rollout_logp=None, tis_cap=0, **hyper)
       -> (per_token_loss (B, T), metrics: dict[str, scalar tensor, no gradient])

with logp (B, T) log pi_theta(a_t) (differentiable), old_logp (B, T) log pi_old(a_t) from the
trainer before the update, advantages (B, T), response_mask (B, T), rollout_logp (B, T) the
rollout engine's own log-probs of the same tokens. ``hyper`` carries the loss-specific options
(``tau_pos``, ``tau_neg``, ``clip_cov_ratio``, ``clip_cov_lb``, ``clip_cov_ub``,
``kl_cov_ratio``, ``ppo_kl_coef``, and ``cov_picked``: tokens chosen over the whole
mini-batch, :data:`BATCH_SELECTIONS`); every loss receives all of them and ignores those it
does not use. Rows are sequences: a sequence-level loss reduces over the last axis (a micro-batch
never splits a sequence) and puts the sequence's loss on each of its tokens, so that
``seq_mean_token_mean`` aggregation gives the paper's mean over sequences. Common to all:

    rho_t = exp(clamp(logp - old_logp, -L, L))                    (L = log_ratio_clamp, 0 = off)
    w_t   = sg(min(exp(old_logp - rollout_logp), tis_cap))       truncated IS, when tis_cap > 0

w corrects for the mismatch between the rollout engine and the trainer (they never agree
exactly: sampling filters, kernels, precision); the loss is multiplied by it (as verl's TIS).
The other rollout corrections live in :mod:`algorithms.is_correction`.
Metrics are masked means over this call's tokens (``approx_kl`` is the k3 estimate of
KL(pi_old || pi_theta), >= 0).

Registered: ``ppo_clip``, ``vanilla_pg``, ``gspo``, ``gspo_token``, ``cispo``, ``sapo``,
``clip_cov``, ``kl_cov``, ``gmpo``, ``gpg``; each docstring gives the formula, the paper and
the verl name (verl ``vanilla`` = ``ppo_clip``, verl ``geo_mean`` = ``gmpo``).
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
             dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None, tis_cap=0.0, **_):
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
               tis_cap=0.0, **_):
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


# --- sequence-level helpers ------------------------------------------------------------------
def _row_count(ops, mask):
    """(B, 1) valid tokens of each sequence, clamped to >= 1 (an empty row divides by 1)."""
    return ops.maximum(ops.sum(mask, axis=-1, keepdims=True), 1.0)


def _row_mean(ops, x, mask):
    """(B, 1) masked mean of x over each sequence's tokens (0 for an empty row)."""
    return ops.sum(x * mask, axis=-1, keepdims=True) / _row_count(ops, mask)


def _clip_metrics(ops, adv, ratio, mask, lo, hi, metrics):
    """clipfrac_upper (A > 0, ratio > hi), clipfrac_lower (A < 0, ratio < lo), clipfrac."""
    r = ops.stop_gradient(ratio)
    upper = ops.as_float(adv > 0, mask) * ops.as_float(r > hi, mask)
    lower = ops.as_float(adv < 0, mask) * ops.as_float(r < lo, mask)
    metrics["clipfrac_upper"] = ops.masked_mean(upper, mask)
    metrics["clipfrac_lower"] = ops.masked_mean(lower, mask)
    metrics["clipfrac"] = ops.masked_mean(upper + lower, mask)
    return metrics


def _finish(ops, loss, log_ratio, ratio, mask, old_logp, rollout_logp, tis_cap, metrics):
    metrics = _ratio_metrics(ops, log_ratio, ratio, mask, metrics)
    return _tis(ops, loss, old_logp, rollout_logp, tis_cap, mask, metrics)


# --- sequence-ratio losses ------------------------------------------------------------------
@POLICY_LOSSES.register("gspo")
def gspo(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low, clip_eps_high,
         dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None, tis_cap=0.0, **_):
    """GSPO (Zheng et al. 2025, arXiv 2507.18071), sequence form.

        s_i = exp(min(mean_t (logp - old_logp), L))  geometric mean of the token ratios
        A_i = mean_t A_t                              (GRPO advantages are constant per row)
        l_i = max(-A_i s_i, -A_i clip(s_i, 1 - eps_low, 1 + eps_high)), on each token of row i

    The gradient flows through s_i (1/|y_i| sum_t grad logp_t). Use loss_agg_mode
    ``seq_mean_token_mean`` for the paper's mean over sequences. The log of s_i is clamped
    from above only, at ``log_ratio_clamp`` (verl clamps at 10). Clip metrics count tokens of
    clipped sequences.
    """
    mask = ops.as_float(response_mask, like=logp)
    log_ratio = logp - old_logp
    log_s = _row_mean(ops, log_ratio, mask)                                    # (B, 1)
    if log_ratio_clamp and log_ratio_clamp > 0:
        log_s = ops.minimum(log_s, log_ratio_clamp)
    s = ops.exp(log_s)
    adv = _row_mean(ops, advantages, mask)                                     # (B, 1)
    seq_loss = ops.maximum(-adv * s, -adv * ops.clamp(s, 1.0 - clip_eps_low, 1.0 + clip_eps_high))
    loss = seq_loss + ops.zeros_like(logp)                                     # (B, T)
    s_tok = s + ops.zeros_like(logp)
    adv_tok = adv + ops.zeros_like(logp)
    metrics = _clip_metrics(ops, adv_tok, s_tok, mask, 1.0 - clip_eps_low, 1.0 + clip_eps_high, {})
    metrics["seq_ratio_mean"] = ops.masked_mean(ops.stop_gradient(s_tok), mask)
    _, ratio = _ratio(ops, logp, old_logp, 20.0)
    return _finish(ops, loss, log_ratio, ratio, mask, old_logp, rollout_logp, tis_cap, metrics)


@POLICY_LOSSES.register("gspo_token")
def gspo_token(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low, clip_eps_high,
               dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None, tis_cap=0.0, **_):
    """GSPO-token (Zheng et al. 2025, eq. 13; verl ``gspo``): token advantages allowed.

        s_it = sg(s_i) * pi_theta(y_t) / sg(pi_theta(y_t))   (value s_i, gradient s_i grad logp_t)
        l_t  = max(-A_t s_it, -A_t clip(s_it, 1 - eps_low, 1 + eps_high))

    log s_it is clamped from above at ``log_ratio_clamp`` (verl: 10). With advantages constant
    per sequence and ``seq_mean_token_mean`` it has the value and gradient of ``gspo``.
    """
    mask = ops.as_float(response_mask, like=logp)
    log_ratio = logp - old_logp
    log_s = ops.stop_gradient(_row_mean(ops, log_ratio, mask))
    log_s_tok = logp - ops.stop_gradient(logp) + log_s
    if log_ratio_clamp and log_ratio_clamp > 0:
        log_s_tok = ops.minimum(log_s_tok, log_ratio_clamp)
    s = ops.exp(log_s_tok)
    adv = advantages
    loss = ops.maximum(-adv * s, -adv * ops.clamp(s, 1.0 - clip_eps_low, 1.0 + clip_eps_high))
    metrics = _clip_metrics(ops, adv, s, mask, 1.0 - clip_eps_low, 1.0 + clip_eps_high, {})
    metrics["seq_ratio_mean"] = ops.masked_mean(ops.stop_gradient(s), mask)
    _, ratio = _ratio(ops, logp, old_logp, 20.0)
    return _finish(ops, loss, log_ratio, ratio, mask, old_logp, rollout_logp, tis_cap, metrics)


@POLICY_LOSSES.register("gmpo")
def gmpo(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low, clip_eps_high,
         dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None, tis_cap=0.0, **_):
    """GMPO (Zhao et al. 2025, arXiv 2507.20673; verl ``geo_mean``): geometric-mean ratio,
    clipped per token in log space.

        d_t  = logp - old_logp,  c_t = clamp(d_t, -eps_low, eps_high)   (LOG-space bounds)
        d'_t = sgn(A_t) min(sgn(A_t) d_t, sgn(A_t) c_t)                 (pessimistic side)
        r_i  = exp(mean_t d'_t),  A_i = mean_t A_t,  l_i = -A_i r_i, on each token of row i

    The paper's clip range is (-0.4, 0.4) in log space: set clip_eps_low = clip_eps_high =
    0.4. verl averages l_i over sequences whatever loss_agg_mode says; here use
    ``seq_mean_token_mean`` for that. Tokens with A_t = 0 contribute d'_t = 0.
    """
    mask = ops.as_float(response_mask, like=logp)
    log_ratio = logp - old_logp
    if log_ratio_clamp and log_ratio_clamp > 0:
        log_ratio = ops.clamp(log_ratio, -log_ratio_clamp, log_ratio_clamp)
    sgn = ops.sign(advantages)
    clipped = ops.clamp(log_ratio, -clip_eps_low, clip_eps_high)
    d = sgn * ops.minimum(sgn * log_ratio, sgn * clipped)
    r = ops.exp(_row_mean(ops, d, mask))                                       # (B, 1)
    adv = _row_mean(ops, advantages, mask)
    loss = -adv * r + ops.zeros_like(logp)
    lr_sg = ops.stop_gradient(log_ratio)
    out = ops.as_float(lr_sg != ops.stop_gradient(clipped), mask)
    upper = out * ops.as_float(advantages > 0, mask)
    lower = out * ops.as_float(advantages < 0, mask)
    metrics = {"clipfrac_upper": ops.masked_mean(upper, mask),
               "clipfrac_lower": ops.masked_mean(lower, mask),
               "clipfrac": ops.masked_mean(upper + lower, mask),
               "seq_ratio_mean": ops.masked_mean(ops.stop_gradient(r + ops.zeros_like(logp)),
                                                 mask)}
    return _finish(ops, loss, log_ratio, ops.exp(log_ratio), mask, old_logp, rollout_logp,
                   tis_cap, metrics)


# --- token-level losses ---------------------------------------------------------------------
@POLICY_LOSSES.register("cispo")
def cispo(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low, clip_eps_high,
          dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None, tis_cap=0.0, **_):
    """CISPO (MiniMax-M1, arXiv 2506.13585; verl ``cispo``): clipped, detached IS weight times
    the log-prob, so every token keeps a gradient.

        l_t = -sg(clip(rho_t, 1 - eps_low, 1 + eps_high)) A_t logp_t

    The paper leaves the lower side open: clip_eps_low >= 1 is allowed for this loss.
    ``clipfrac`` = share of tokens whose ratio the clip changed.
    """
    mask = ops.as_float(response_mask, like=logp)
    log_ratio, ratio = _ratio(ops, logp, old_logp, log_ratio_clamp)
    weight = ops.stop_gradient(ops.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high))
    loss = -weight * advantages * logp
    r = ops.stop_gradient(ratio)
    changed = ops.as_float(r > 1.0 + clip_eps_high, mask) + ops.as_float(r < 1.0 - clip_eps_low,
                                                                         mask)
    metrics = {"clipfrac": ops.masked_mean(changed, mask)}
    return _finish(ops, loss, log_ratio, ratio, mask, old_logp, rollout_logp, tis_cap, metrics)


@POLICY_LOSSES.register("sapo")
def sapo(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low=0.2, clip_eps_high=0.2,
         dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None, tis_cap=0.0, tau_pos=1.0,
         tau_neg=1.05, **_):
    """SAPO (Gao et al. 2025, arXiv 2511.20347; verl ``sapo``): a soft sigmoid gate instead
    of the hard clip.

        tau_t = tau_pos if A_t > 0 else tau_neg
        f(rho) = sigmoid(tau (rho - 1)) * 4 / tau        (slope 1 at rho = 1, as the PG term)
        l_t  = -f(rho_t) A_t

    The clip options are ignored. verl always aggregates SAPO with seq-mean-token-mean; here
    ``loss_agg_mode`` decides (set seq_mean_token_mean for verl's behaviour).
    """
    mask = ops.as_float(response_mask, like=logp)
    log_ratio, ratio = _ratio(ops, logp, old_logp, log_ratio_clamp)
    pos = ops.as_float(advantages > 0, logp)
    tau = tau_neg + (tau_pos - tau_neg) * pos
    gate = ops.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
    loss = -gate * advantages
    metrics = {"sapo_gate_mean": ops.masked_mean(ops.stop_gradient(gate), mask)}
    return _finish(ops, loss, log_ratio, ratio, mask, old_logp, rollout_logp, tis_cap, metrics)


@POLICY_LOSSES.register("gpg")
def gpg(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low=0.2, clip_eps_high=0.2,
        dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None, tis_cap=0.0, **_):
    """GPG (Chu et al. 2025, arXiv 2504.02546; verl ``gpg``): plain policy gradient on the
    log-prob, no ratio and no clip: l_t = -A_t logp_t. Ratio metrics are reported only."""
    mask = ops.as_float(response_mask, like=logp)
    log_ratio, ratio = _ratio(ops, logp, old_logp, log_ratio_clamp)
    loss = -advantages * logp
    return _finish(ops, loss, log_ratio, ratio, mask, old_logp, rollout_logp, tis_cap, {})


# --- covariance-selected tokens (Cui et al. 2025, "The Entropy Mechanism of RL for LLMs") ----
#: Weyl-sequence step (golden ratio): frac(p * PHI) spreads positions p evenly over [0, 1).
_PHI = 0.6180339887498949


def _centred_cov(ops, advantages, logp, mask):
    """(A_t - mean A) (logp_t - mean logp) over this call's valid tokens, no gradient."""
    lp = ops.stop_gradient(logp)
    adv = ops.stop_gradient(advantages)
    return (adv - ops.masked_mean(adv, mask)) * (lp - ops.masked_mean(lp, mask))


def _first_k(ops, key, eligible, k):
    """1 where ``eligible`` and the element is among the k smallest keys of the eligible ones
    (k a scalar tensor); static shapes, no data-dependent top-k."""
    big = ops.amax(ops.abs(key)) + 1.0
    ranked = ops.rank_flat(ops.where(eligible > 0, key, big + ops.zeros_like(key)))
    return eligible * ops.as_float(ranked < k, eligible)


def _clip_cov_picked(ops, logp, old_logp, advantages, mask, *, clip_eps_low, clip_eps_high,
                     log_ratio_clamp=20.0, clip_cov_ratio=0.0002, clip_cov_lb=1.0,
                     clip_cov_ub=5.0, **_):
    """clip_cov's picked tokens (1 = gradient removed) over all the tokens it is given."""
    adv = advantages
    _, ratio = _ratio(ops, ops.stop_gradient(logp), old_logp, log_ratio_clamp)
    unclipped = -adv * ratio
    clipped = -adv * ops.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
    by_clip = ops.as_float(clipped > unclipped, mask)
    cov = _centred_cov(ops, adv, logp, mask)
    band = (mask * (1.0 - by_clip) * ops.as_float(cov > clip_cov_lb, mask)
            * ops.as_float(cov < clip_cov_ub, mask))
    n_sel = ops.maximum(ops.floor(clip_cov_ratio * ops.sum(mask)), 1.0)
    pos = ops.flat_positions(mask) * _PHI
    key = pos - ops.floor(pos)
    return _first_k(ops, key, band, n_sel)


def _kl_cov_picked(ops, logp, old_logp, advantages, mask, *, kl_cov_ratio=0.0002, **_):
    """kl_cov's picked tokens (1 = KL penalty on) over all the tokens it is given."""
    cov = _centred_cov(ops, advantages, logp, mask)
    k = ops.maximum(ops.floor(kl_cov_ratio * ops.sum(mask)), 1.0)
    return _first_k(ops, -cov, mask, k)


#: Losses whose token choice is a statistic across rows (means, ranks over all the tokens):
#: ``fn(ops, logp, old_logp, advantages, mask, **hyper) -> picked (B, T)``. The trainer runs
#: it once over the whole mini-batch (:func:`batch_token_selection`) and hands each
#: micro-batch its rows' part as ``cov_picked``, so the choice does not depend on how the
#: mini-batch is cut (in order, by length, packed, per rank) or on the backend.
BATCH_SELECTIONS = {"clip_cov": _clip_cov_picked, "kl_cov": _kl_cov_picked}


def batch_token_selection(policy_loss: str, logp, old_logp, advantages, mask, hyper: dict):
    """(B, T) float32 picked tokens of ``policy_loss`` over this whole batch, computed on the
    host in float64 (NumPy), or None when the loss has no cross-row statistic. ``logp`` is
    the current policy's (no gradient), ``old_logp`` the pre-update one (None: = logp)."""
    import numpy as np

    from .ops import get_ops

    fn = BATCH_SELECTIONS.get(policy_loss)
    if fn is None:
        return None
    f64 = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731
    logp = f64(logp)
    old = logp if old_logp is None else f64(old_logp)
    picked = fn(get_ops("numpy"), logp, old, f64(advantages), f64(mask), **hyper)
    return np.asarray(picked, dtype=np.float32)


@POLICY_LOSSES.register("clip_cov")
def clip_cov(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low, clip_eps_high,
             dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None, tis_cap=0.0,
             clip_cov_ratio=0.0002, clip_cov_lb=1.0, clip_cov_ub=5.0, cov_picked=None, **_):
    """Clip-Cov (Cui et al. 2025, arXiv 2505.22617; verl ``clip_cov``): PPO clip, plus the
    gradient of a few high-covariance tokens removed.

        cov_t = (A_t - mean A)(logp_t - mean logp)  over the mini-batch's valid tokens
        band  = tokens with clip_cov_lb < cov_t < clip_cov_ub not already clipped by PPO
        n_sel = max(floor(clip_cov_ratio * valid tokens), 1) tokens of the band are picked
        l_t   = max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high)) * (0 if picked else 1)

    ``cov_picked`` (B, T): the picked tokens, chosen over the whole mini-batch by
    :func:`batch_token_selection` (the trainer passes them); None = chosen over this call's
    tokens. Departure: verl picks per micro-batch, the n_sel band tokens at random
    (torch.randperm); here the pick follows a fixed pseudo-random order of token positions
    (frac(p * 0.618...)), so the loss is a deterministic function of its inputs, compiles
    into a graph and is identical on both backends. When the band holds at most n_sel tokens
    (the usual case) every band token is picked. Metrics: ``cov_selected_frac`` and PPO
    clipfracs.
    """
    mask = ops.as_float(response_mask, like=logp)
    adv = advantages
    log_ratio, ratio = _ratio(ops, logp, old_logp, log_ratio_clamp)
    unclipped = -adv * ratio
    clipped = -adv * ops.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
    if cov_picked is None:
        picked = _clip_cov_picked(ops, logp, old_logp, adv, mask, clip_eps_low=clip_eps_low,
                                  clip_eps_high=clip_eps_high, log_ratio_clamp=log_ratio_clamp,
                                  clip_cov_ratio=clip_cov_ratio, clip_cov_lb=clip_cov_lb,
                                  clip_cov_ub=clip_cov_ub)
    else:
        picked = ops.as_float(cov_picked, like=logp) * mask
    loss = ops.maximum(unclipped, clipped) * (1.0 - picked)
    metrics = _clip_metrics(ops, adv, ratio, mask, 1.0 - clip_eps_low, 1.0 + clip_eps_high, {})
    metrics["cov_selected_frac"] = ops.masked_mean(picked, mask)
    return _finish(ops, loss, log_ratio, ratio, mask, old_logp, rollout_logp, tis_cap, metrics)


@POLICY_LOSSES.register("kl_cov")
def kl_cov(ops, logp, old_logp, advantages, response_mask, *, clip_eps_low=0.2,
           clip_eps_high=0.2, dual_clip_c=0.0, log_ratio_clamp=20.0, rollout_logp=None,
           tis_cap=0.0, kl_cov_ratio=0.0002, ppo_kl_coef=1.0, cov_picked=None, **_):
    """KL-Cov (Cui et al. 2025, arXiv 2505.22617; verl ``kl_cov``): no clip; the top
    ``kl_cov_ratio`` share of tokens by covariance get a KL penalty.

        cov_t = (A_t - mean A)(logp_t - mean logp)  over the mini-batch's valid tokens
        k     = max(floor(kl_cov_ratio * valid tokens), 1) tokens with the largest cov_t
        l_t   = -A_t rho_t + ppo_kl_coef |logp_t - old_logp_t| * [t among the k]

    ``cov_picked`` as in :func:`clip_cov` (verl picks per micro-batch). Ties in cov are
    broken by position (verl: torch.topk's order). Metric ``cov_selected_frac``.
    """
    mask = ops.as_float(response_mask, like=logp)
    log_ratio, ratio = _ratio(ops, logp, old_logp, log_ratio_clamp)
    if cov_picked is None:
        picked = _kl_cov_picked(ops, logp, old_logp, advantages, mask, kl_cov_ratio=kl_cov_ratio)
    else:
        picked = ops.as_float(cov_picked, like=logp) * mask
    loss = -advantages * ratio + ppo_kl_coef * ops.abs(log_ratio) * picked
    metrics = {"cov_selected_frac": ops.masked_mean(picked, mask)}
    return _finish(ops, loss, log_ratio, ratio, mask, old_logp, rollout_logp, tis_cap, metrics)
