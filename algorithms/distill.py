"""On-policy distillation: a teacher scores the student's own rollouts, token by token.

For a response sampled from the student pi_s, with s_t = log pi_s(a_t | x, a_<t) and
q_t = log pi_t(a_t | x, a_<t) the teacher's log-prob of the same token, the per-token reverse KL
KL(pi_s || pi_t) at step t is estimated on the sampled token by

    k1_t = s_t - q_t                 (unbiased on samples from pi_s; one token can be negative)

Two ways to train on it (``algorithm.distill.mode``):

* ``advantage`` (Thinking Machines, "On-Policy Distillation", 2025; Agarwal et al., "On-Policy
  Distillation of Language Models" (GKD), 2024, with lambda = 1 and the reverse KL): the
  per-token advantage is

      A_t = task_weight * A^task_t - coef * k1_t

  with s_t the sampling policy's log-probs (the trainer's ``old_logp`` when it recomputes them,
  else the engine's), undiscounted (each token is scored on its own, as in the blog), and the
  sum goes through the usual policy loss (clip, corrections, aggregation). ``task_weight = 0``
  is pure distillation.

* ``loss``: an extra term of the loss, with the same aggregation and normalisers as the policy
  loss,

      L += coef * agg( r_t * sg(logp_t - q_t) ),   r_t = exp(logp_t - old_logp_t)

  (r_t = 1 in value when strictly on-policy, where old_logp = sg(logp)). Its value is the
  (importance-weighted) k1 estimate; its gradient coef * r_t * k1_t * grad log pi_s(a_t) is the
  score-function gradient of the per-token reverse KL (E_a~pi_s[grad log pi_s] = 0, so the
  plain k1 would have no useful gradient of its own). The task advantage (times task_weight)
  still drives the policy loss.

The estimator (``algorithm.distill.estimator``): ``sampled`` is the k1 above, one sample per
position; ``full`` replaces it by the exact reverse KL over the whole vocabulary at every
response position of the student's rollout,

    KL_t = sum_v p_s(v | x, a_<t) (log p_s(v | x, a_<t) - log p_t(v | x, a_<t))

(:func:`full_reverse_kl`, from both models' logits in the same micro-batch, the teacher's
without gradient), added to the loss as ``coef * agg(KL_t)`` with gradient through p_s: no
sampling variance (GKD's token-level divergence with lambda = 1 and the reverse KL). It is a
loss term only (mode ``loss``). The positions are those of the rollout (the old policy's when
the trainer takes several updates per batch), without an importance weight.

Departures: the k1 of a token does not flow to earlier tokens (no return over the sequence),
as in the blog (discount 0); the log ratio in r_t is clamped to +-``log_ratio_clamp`` like the
policy losses'.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

DISTILL_MODES = ("advantage", "loss")
DISTILL_ESTIMATORS = ("sampled", "full")


def reverse_kl_k1(student_logp, teacher_logp, mask) -> np.ndarray:
    """(B, T) float64 per-token k1 estimate s - q of KL(pi_s || pi_t) on the sampled tokens,
    0 at padding (host side: the metric and the ``advantage`` mode)."""
    s = np.asarray(student_logp, np.float64)
    q = np.asarray(teacher_logp, np.float64)
    return (s - q) * np.asarray(mask, np.float64)


def full_reverse_kl(ops, student_logits, teacher_logits):
    """(..., V) logits of the student (differentiable) and of the teacher (a constant; it is
    stopped here too) -> (...) exact KL(p_s || p_t) = sum_v p_s (log p_s - log p_t) in nats."""
    log_s = ops.log_softmax(student_logits)
    log_t = ops.stop_gradient(ops.log_softmax(teacher_logits))
    return ops.sum(ops.exp(log_s) * (log_s - log_t), axis=-1)


def distill_advantages(task_advantages, mask, *, task_weight: float, coef: float = 0.0,
                       student_logp: Optional[np.ndarray] = None,
                       teacher_logp: Optional[np.ndarray] = None) -> np.ndarray:
    """(B, T) float64 ``task_weight * A^task - coef * (s - q)``, 0 at padding. With
    ``teacher_logp`` None (the ``loss`` mode) only the task advantage is scaled."""
    m = np.asarray(mask, np.float64)
    adv = task_weight * np.asarray(task_advantages, np.float64) * m
    if teacher_logp is not None and coef:
        adv = adv - coef * reverse_kl_k1(student_logp, teacher_logp, m)
    return adv


def distill_loss(ops, logp, old_logp, teacher_logp, log_ratio_clamp: float = 20.0):
    """(B, T) per-token ``r * sg(logp - teacher_logp)`` with r = exp(clamp(logp - old_logp)):
    in value the importance-weighted k1, in gradient the score-function gradient of the reverse
    KL to the teacher. ``logp`` differentiable; ``old_logp`` and ``teacher_logp`` constants of
    logp's dtype (pass ``ops.stop_gradient(logp)`` as ``old_logp`` when on-policy)."""
    log_ratio = logp - old_logp
    if log_ratio_clamp and log_ratio_clamp > 0:
        log_ratio = ops.clamp(log_ratio, -log_ratio_clamp, log_ratio_clamp)
    return ops.exp(log_ratio) * ops.stop_gradient(logp - teacher_logp)
