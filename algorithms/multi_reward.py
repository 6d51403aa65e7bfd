"""Advantages from several rewards (format + accuracy, ...): GDPO's decoupled normalisation.

With K reward components r^1..r^K (B,) and weights w_k (``reward.functions[k].weight``):

* any other estimator sees only the weighted sum r = sum_k w_k r^k (``reward.none_as`` for an
  unscorable item), normalised as one reward;
* ``gdpo`` (Liu et al. 2026, "GDPO: Group reward-Decoupled Normalization Policy Optimization",
  arXiv 2601.05242; verl ``gdpo``) normalises each component within its group first, so a
  reward with a large spread cannot drown out the others:

      A^k_i = (r^k_i - mean_g r^k) / (std_g r^k + eps)      (the grpo estimator per component)
      A_i   = sum_k w_k A^k_i, on every response token
      A     = (A - mean A) / sqrt(var A + 1e-8)              over the batch's valid tokens

  (mean/var masked, var with ddof 1, as verl's masked_whiten). verl names the components in
  ``algorithm.gdpo_reward_keys`` / ``gdpo_reward_weights``; here they are the run's
  ``reward.functions`` and their weights. A group of one gets A^k = 0 (verl: r / (1 + eps)).
  Called with a single reward, ``gdpo`` is grpo followed by the batch whitening.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np

from .advantages import ADV_ESTIMATORS, compute_advantages, grpo

WHITEN_EPS = 1e-8


def whiten(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(x - mean) / sqrt(var + 1e-8) over the valid tokens (var with ddof 1), 0 on padding."""
    n = mask.sum()
    if n == 0:
        return np.zeros_like(x)
    mean = (x * mask).sum() / n
    var = (((x - mean) ** 2) * mask).sum() / max(n - 1.0, 1.0)
    return (x - mean) / np.sqrt(var + WHITEN_EPS) * mask


@ADV_ESTIMATORS.register("gdpo")
def gdpo(rewards, group_index, mask, *, std_eps: float = 1e-6, std_ddof: int = 1,
         reward_components: Optional[np.ndarray] = None,
         reward_weights: Optional[np.ndarray] = None):
    """GDPO: per-component group normalisation, weighted sum, batch whitening (see module).

    ``reward_components`` (K, B) and ``reward_weights`` (K,); without them the single reward
    ``rewards`` is the only component (weight 1).
    """
    comps = np.asarray(rewards, np.float64)[None] if reward_components is None \
        else np.asarray(reward_components, np.float64)
    weights = np.ones(len(comps)) if reward_weights is None \
        else np.asarray(reward_weights, np.float64)
    if weights.shape != (len(comps),):
        raise ValueError(f"{len(comps)} reward components but {weights.shape[0]} weights")
    total = np.zeros_like(mask, dtype=np.float64)
    for w, r in zip(weights, comps):
        total = total + w * grpo(r, group_index, mask, std_eps=std_eps, std_ddof=std_ddof)
    return whiten(total, mask)


def compute_multi_reward_advantages(estimator: str, *, total, components: Mapping[str, np.ndarray],
                                    weights: Mapping[str, float], none_as: float = 0.0,
                                    group_index, response_mask, token_kl=None,
                                    **params) -> np.ndarray:
    """Per-token advantages (B, T): ``gdpo`` from the separate components, any other estimator
    from the weighted ``total`` (via :func:`algorithms.compute_advantages`).

    components: key -> (B,) scores, NaN = unscorable (read as ``none_as``); weights: key ->
    weight. ``params`` as for compute_advantages.
    """
    if estimator != "gdpo":
        return compute_advantages(estimator, rewards=total, group_index=group_index,
                                  response_mask=response_mask, token_kl=token_kl, **params)
    keys = list(components)
    missing = [k for k in keys if k not in weights]
    if missing:
        raise ValueError(f"no weight for reward component(s) {missing}")
    comps = np.stack([np.nan_to_num(np.asarray(components[k], np.float64), nan=none_as)
                      for k in keys])
    mask = np.asarray(response_mask, np.float64)
    kw = {k: params[k] for k in ("std_eps", "std_ddof") if k in params}
    adv = gdpo(np.asarray(total, np.float64), np.asarray(group_index).reshape(-1), mask,
               reward_components=comps, reward_weights=np.array([weights[k] for k in keys]),
               **kw)
    return adv * mask


def component_weights(scorer) -> Dict[str, float]:
    """key -> weight of a reward scorer's components (``rewards.build_scorer``)."""
    return {c.key: float(c.weight) for c in scorer.components}
