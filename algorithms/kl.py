"""Per-token KL estimators between the policy and a frozen reference (Schulman, "Approximating
KL divergence", 2020). With d = log pi(a) - log pi_ref(a) for a sampled token a ~ pi:

* ``k1``  d                   unbiased, high variance, can be negative;
* ``k2``  d^2 / 2             biased, low variance, >= 0;
* ``k3``  exp(-d) - 1 + d     unbiased, low variance, >= 0 (verl "low_var_kl", GRPO paper).

:func:`kl_penalty` optionally clamps d to [-c, c] first (``algorithm.kl.log_ratio_clip``) and the
estimate to [-v, v] after (``algorithm.kl.value_clip``); 0 turns either off. Departure from
verl: verl's k3 always clamps d to +-20 and the estimate to +-10; here both clips are
options, off by default (set log_ratio_clip=20, value_clip=10 to match verl). A clamp stops the
gradient of the clamped entries, which is the point of it. The penalty goes into the loss
(``rl_loss``) or, with ``algorithm.kl.in_reward``, into the REINFORCE++ token rewards.
"""

from __future__ import annotations

from typing import Callable

from mindrl.registry import Registry

KL_ESTIMATORS: Registry[Callable] = Registry("KL estimator")


@KL_ESTIMATORS.register("k1")
def k1(ops, log_ratio):
    """d = log pi - log pi_ref."""
    return log_ratio


@KL_ESTIMATORS.register("k2")
def k2(ops, log_ratio):
    """d^2 / 2."""
    return 0.5 * ops.square(log_ratio)


@KL_ESTIMATORS.register("k3")
def k3(ops, log_ratio):
    """exp(-d) - 1 + d = pi_ref/pi - 1 - log(pi_ref/pi)."""
    return ops.exp(-log_ratio) - 1.0 + log_ratio


def kl_penalty(ops, logp, ref_logp, estimator: str = "k3", log_ratio_clip: float = 0.0,
               value_clip: float = 0.0):
    """(B, T) per-token KL estimate of pi (``logp``) from pi_ref (``ref_logp``)."""
    fn = KL_ESTIMATORS.get(estimator)
    log_ratio = logp - ref_logp
    if log_ratio_clip and log_ratio_clip > 0:
        log_ratio = ops.clamp(log_ratio, -log_ratio_clip, log_ratio_clip)
    kl = fn(ops, log_ratio)
    if value_clip and value_clip > 0:
        kl = ops.clamp(kl, -value_clip, value_clip)
    return kl


def kl_penalty_numpy(logp, ref_logp, estimator: str = "k3", log_ratio_clip: float = 0.0,
                     value_clip: float = 0.0):
    """:func:`kl_penalty` on the host in float64: (B, T) arrays in, (B, T) array out.

    For folding the KL into REINFORCE++ token rewards (``algorithm.kl.in_reward``).
    """
    import numpy as np

    from .ops import get_ops

    return kl_penalty(get_ops("numpy"), np.asarray(logp, np.float64),
                      np.asarray(ref_logp, np.float64), estimator, log_ratio_clip, value_clip)
