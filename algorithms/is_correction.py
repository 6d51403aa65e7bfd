"""Rollout-vs-trainer corrections: importance weights and rejection masks for the policy loss.

The rollout engine samples from pi_rollout; the trainer scores the same tokens as pi_old. They
never agree exactly (sampling filters such as top_p / top_k / min_p, kernels, precision), and
the gap grows into collapse when nothing corrects it. With d_t = old_logp_t - rollout_logp_t
(log pi_old / pi_rollout) and S_i = sum_t d_t over sequence i, the options (config section
``algorithm.rollout_correction``, keys named as verl's ``algorithm.rollout_correction``) are:

Importance weights ``rollout_is`` (the per-token loss is multiplied by a detached weight w):

* ``token``     w_t = exp(clamp(d_t, -20, 20))
* ``sequence``  w_t = exp(clamp(S_i, -20, 20)) on every token of sequence i
  with ``rollout_is_threshold`` = u (a number: truncated IS, w <- min(w, u); Yao et al. 2025,
  "Your efficient RL framework secretly brings you off-policy RL training") or "l_u" (a string:
  IcePop's two-sided mask, w <- w if l <= w <= u else 0; Ling team 2025, Ring-1T).

Rejection ``rollout_rs`` (comma-separated options, all must pass; the loss of a rejected token
is multiplied by 0), with k1 = -d, k2 = d^2 / 2, k3 = exp(d) - 1 - d per token (d clamped to
+-20):

* ``token_k1``          masked IS per token: keep when log l <= k1_t <= log u
* ``seq_sum_k1``        masked IS per sequence: keep when log l <= sum_t k1_t <= log u
* ``seq_mean_k1``       geometric-mean sequence mask: keep when log l <= mean_t k1_t <= log u
* ``token_k2|k3``, ``seq_sum_k2|k3``, ``seq_mean_k2|k3``, ``seq_max_k2|k3``: keep when the
  statistic <= u
  with ``rollout_rs_threshold`` one spec shared by all options or one per option, comma
  separated; k1 options take "l_u" or u alone (then l = 1/u). Note k1 = log(pi_rollout /
  pi_old): a bound u on it is a bound 1/u on the ratio w = pi_old / pi_rollout.

Off-policy sequence masking ``off_policy_seq_mask_kl`` = delta > 0 (DeepSeek-AI 2025,
DeepSeek-V3.2, eq. 9; not in verl): the tokens of sequence i with A_t < 0 are dropped when
mean_t (rollout_logp_t - sg(logp_t)) > delta, i.e. negative samples the current policy has
drifted far from.

Departure from verl: a rejected token stays in the loss normalisers (it contributes 0);
verl removes it from the response mask before counting tokens. verl's
``rollout_is_batch_normalize`` and bypass mode are not provided. Each option reports what it
did as metrics (token shares of this call): ``rollout_corr/is_weight_mean``,
``rollout_corr/is_capped_frac`` (truncated), ``rollout_corr/is_masked_frac`` (IcePop),
``rollout_corr/rs_masked_frac``, ``rollout_corr/rs_seq_masked_frac`` (share of sequences with
a rejected token), ``rollout_corr/opsm_masked_frac``.
"""

from __future__ import annotations

import functools
import math
from typing import List, Optional, Tuple

SAFETY_BOUND = 20.0
IS_LEVELS = ("token", "sequence")
RS_OPTIONS = ("token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
              "seq_mean_k1", "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3")


# --- threshold specs (plain Python; parsed once per distinct spec) ---------------------------
@functools.lru_cache(maxsize=None)
def parse_is_threshold(spec) -> Tuple[float, Optional[float]]:
    """(upper, lower or None) from u (truncate) or "l_u" (IcePop); raises ValueError."""
    if isinstance(spec, bool) or spec is None:
        raise ValueError(f"rollout_is_threshold={spec!r} must be a number u or a string 'l_u'")
    lower = None
    if isinstance(spec, str) and "_" in spec:
        lo, hi = spec.split("_", 1)
        lower, upper = _number(lo, spec), _number(hi, spec)
    else:
        upper = _number(spec, spec)
    if upper <= 0 or (lower is not None and not 0 < lower <= upper):
        raise ValueError(f"rollout_is_threshold={spec!r} needs 0 < l <= u")
    return upper, lower


@functools.lru_cache(maxsize=None)
def parse_rs(options, thresholds) -> Tuple[Tuple[str, Optional[float], float], ...]:
    """((option, lower, upper), ...) from "opt1,opt2" and "spec" or "spec1,spec2".

    For k1 options lower/upper are LOG bounds on the k1 statistic; for k2/k3 lower is None and
    upper the plain bound. Raises ValueError naming the bad part.
    """
    names: List[str] = []
    for name in (p.strip() for p in str(options).split(",")):
        if not name:
            continue
        if name not in RS_OPTIONS:
            raise ValueError(f"rollout_rs option '{name}' is unknown; valid: "
                             + ", ".join(RS_OPTIONS))
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError(f"rollout_rs={options!r} names no option")
    if thresholds is None or isinstance(thresholds, bool):
        raise ValueError("rollout_rs needs rollout_rs_threshold")
    specs = [p.strip() for p in str(thresholds).split(",") if p.strip()]
    if len(specs) == 1:
        specs = specs * len(names)
    if len(specs) != len(names):
        raise ValueError(f"rollout_rs_threshold={thresholds!r} gives {len(specs)} thresholds "
                         f"for {len(names)} rollout_rs options")
    out = []
    for name, spec in zip(names, specs):
        if name.endswith("k1"):
            lo, hi = spec.split("_", 1) if "_" in spec else (None, spec)
            upper = _number(hi, spec)
            lower = 1.0 / upper if lo is None else _number(lo, spec)
            if not 0 < lower <= upper:
                raise ValueError(f"rollout_rs_threshold '{spec}' for {name} needs 0 < l <= u")
            out.append((name, math.log(lower), math.log(upper)))
        else:
            if "_" in spec:
                raise ValueError(f"rollout_rs_threshold '{spec}' for {name} takes one upper "
                                 "bound (no '_')")
            upper = _number(spec, spec)
            if upper <= 0:
                raise ValueError(f"rollout_rs_threshold '{spec}' for {name} must be > 0")
            out.append((name, None, upper))
    return tuple(out)


def _number(text, spec) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ValueError(f"threshold {spec!r}: '{text}' is not a number") from None


def is_enabled(rc) -> bool:
    """Whether a ``RolloutCorrectionConfig`` (duck-typed) asks for any correction."""
    return rc is not None and bool(rc.rollout_is or rc.rollout_rs or rc.off_policy_seq_mask_kl)


def needs_rollout_logp(cfg) -> bool:
    """Whether the loss of an ``AlgorithmConfig`` reads the rollout engine's log-probs."""
    return bool(cfg.tis_cap) or is_enabled(getattr(cfg, "rollout_correction", None))


# --- the correction ------------------------------------------------------------------------
def _seq_stat(ops, kind, value, mask):
    if kind == "sum":
        return ops.sum(value * mask, axis=-1, keepdims=True)
    if kind == "mean":
        return ops.sum(value * mask, axis=-1, keepdims=True) / ops.maximum(
            ops.sum(mask, axis=-1, keepdims=True), 1.0)
    return ops.amax(value * mask, axis=-1, keepdims=True)   # max of k2/k3 >= 0; empty row -> 0


def importance_weights(ops, log_ratio, mask, level: str, threshold):
    """(w (B, T) detached, zero on padding; metrics) for ``rollout_is`` = level."""
    upper, lower = parse_is_threshold(threshold)
    log_ratio = ops.stop_gradient(log_ratio)
    if level == "token":
        raw = ops.exp(ops.clamp(log_ratio, -SAFETY_BOUND, SAFETY_BOUND))
    elif level == "sequence":
        total = ops.sum(log_ratio * mask, axis=-1, keepdims=True)
        raw = ops.exp(ops.clamp(total, -SAFETY_BOUND, SAFETY_BOUND)) + ops.zeros_like(log_ratio)
    else:
        raise ValueError(f"rollout_is='{level}' must be one of {IS_LEVELS}")
    raw = raw * mask
    metrics = {}
    if lower is None:
        w = ops.minimum(raw, upper)
        metrics["rollout_corr/is_capped_frac"] = ops.masked_mean(ops.as_float(raw > upper, mask),
                                                                 mask)
    else:
        inside = ops.as_float(raw >= lower, mask) * ops.as_float(raw <= upper, mask)
        w = raw * inside
        metrics["rollout_corr/is_masked_frac"] = ops.masked_mean(1.0 - inside, mask)
    metrics["rollout_corr/is_weight_mean"] = ops.masked_mean(w, mask)
    return ops.stop_gradient(w), metrics


def rejection_mask(ops, log_ratio, mask, options, thresholds):
    """(keep (B, T) in {0, 1}, 1 on padding; metrics) for ``rollout_rs`` = options."""
    d = ops.clamp(ops.stop_gradient(log_ratio), -SAFETY_BOUND, SAFETY_BOUND)
    per_token = {"k1": -d, "k2": 0.5 * ops.square(d), "k3": ops.exp(d) - 1.0 - d}
    keep = ops.ones_like(d)
    for name, lower, upper in parse_rs(options, thresholds):
        level, est = name.rsplit("_", 1)
        stat = per_token[est] if level == "token" else \
            _seq_stat(ops, level.split("_")[1], per_token[est], mask)
        ok = ops.as_float(stat <= upper, d)
        if lower is not None:
            ok = ok * ops.as_float(stat >= lower, d)
        keep = keep * (ok + ops.zeros_like(d))
    dropped = mask * (1.0 - keep)
    rows = ops.as_float(ops.sum(mask, axis=-1) > 0, d)
    seq_hit = ops.as_float(ops.sum(dropped, axis=-1) > 0, d)
    metrics = {"rollout_corr/rs_masked_frac": ops.masked_mean(dropped, mask),
               "rollout_corr/rs_seq_masked_frac": ops.sum(seq_hit) / ops.maximum(ops.sum(rows),
                                                                                 1.0)}
    return keep, metrics


def off_policy_sequence_mask(ops, logp, rollout_logp, advantages, mask, delta: float):
    """(keep (B, T); metrics): DeepSeek-V3.2's mask, 0 where A_t < 0 and the sequence's mean
    log(pi_rollout / pi_theta) over its tokens exceeds delta."""
    gap = ops.stop_gradient(rollout_logp - logp)
    far = ops.as_float(ops.sum(gap * mask, axis=-1, keepdims=True)
                       / ops.maximum(ops.sum(mask, axis=-1, keepdims=True), 1.0) > delta, mask)
    drop = far * ops.as_float(advantages < 0, mask)
    keep = 1.0 - drop
    return keep, {"rollout_corr/opsm_masked_frac": ops.masked_mean(drop, mask)}


def rollout_correction(ops, *, logp, old_logp, rollout_logp, advantages, mask, rc):
    """(factor (B, T) or None, metrics): the detached factor the per-token policy loss is
    multiplied by under the ``RolloutCorrectionConfig`` ``rc`` (duck-typed: rollout_is,
    rollout_is_threshold, rollout_rs, rollout_rs_threshold, off_policy_seq_mask_kl)."""
    if not is_enabled(rc):
        return None, {}
    log_ratio = old_logp - rollout_logp
    factor, metrics = ops.ones_like(logp), {}
    if rc.rollout_is:
        w, m = importance_weights(ops, log_ratio, mask, rc.rollout_is, rc.rollout_is_threshold)
        factor = factor * w
        metrics.update(m)
    if rc.rollout_rs:
        keep, m = rejection_mask(ops, log_ratio, mask, rc.rollout_rs, rc.rollout_rs_threshold)
        factor = factor * keep
        metrics.update(m)
    if rc.off_policy_seq_mask_kl:
        keep, m = off_policy_sequence_mask(ops, logp, rollout_logp, advantages, mask,
                                           rc.off_policy_seq_mask_kl)
        factor = factor * keep
        metrics.update(m)
    return ops.stop_gradient(factor), metrics
