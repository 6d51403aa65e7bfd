"""Generalised Advantage Estimation (Schulman et al. 2016) for PPO with a critic, on the host in
NumPy float64. Registered as the advantage estimator ``gae``; unlike the group estimators it
needs per-token values V (B, T) from the critic, passed to :func:`compute_advantages` as
``values``.

Per rollout, over its response tokens t = 0..L-1 (mask m):

    c_t      = r * [t = last response token] - kl_coef * kl_t        (token reward)
    delta_t  = c_t + gamma * V_{t+1} - V_t                            (V_L = 0: the episode ends)
    A_t      = delta_t + gamma * lam * A_{t+1}                        (A_L = 0)
    R_t      = A_t + V_t                                              (the critic's target)

Padding (m = 0) is skipped: the recursion carries V_{t+1} and A_{t+1} from the next valid token,
so a mask with holes gives the same numbers as the same tokens without the holes. With
gamma = lam = 1 (Open-Reasoner-Zero) A_t = r - V_t (no KL): the outcome minus the value.

The advantages are then whitened over the valid tokens of the whole batch (``whiten_advantages``,
verl always whitens): (A - mean) / (std + std_eps), std with ``std_ddof``. Departure from verl:
verl divides by sqrt(var + 1e-8) (``masked_whiten``); we use the same eps / ddof convention as
the REINFORCE++ estimators so one pair of options governs every whitening. The returns are
never whitened.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .advantages import ADV_ESTIMATORS, _last_token_index, _whiten


def outcome_token_rewards(rewards: np.ndarray, mask: np.ndarray,
                          token_kl: Optional[np.ndarray] = None,
                          kl_coef: float = 0.0) -> np.ndarray:
    """(B, T) token rewards c: the outcome reward r_i on each row's last valid token, minus
    ``kl_coef * token_kl`` on every valid token (KL in the reward); 0 on padding."""
    rewards = np.asarray(rewards, np.float64).reshape(-1)
    mask = np.asarray(mask, np.float64)
    c = np.zeros_like(mask)
    rows = np.nonzero(mask.sum(axis=1) > 0)[0]
    c[rows, _last_token_index(mask)[rows]] = rewards[rows]
    if token_kl is not None and kl_coef:
        c = c - kl_coef * np.asarray(token_kl, np.float64) * mask
    return c


def gae(token_rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, gamma: float,
        lam: float) -> Tuple[np.ndarray, np.ndarray]:
    """(advantages (B, T), returns (B, T)) float64, un-whitened, 0 on padding.

    token_rewards, values, mask: (B, T). The recursion runs right to left and skips padding
    (see the module docstring)."""
    c = np.asarray(token_rewards, np.float64)
    v = np.asarray(values, np.float64)
    m = np.asarray(mask, np.float64)
    if not c.shape == v.shape == m.shape or m.ndim != 2:
        raise ValueError(f"token_rewards {c.shape}, values {v.shape} and mask {m.shape} must "
                         f"be the same (B, T) shape")
    B, T = m.shape
    adv = np.zeros((B, T))
    next_value = np.zeros(B)      # V_{t+1} of the next valid token (0 after the last)
    next_adv = np.zeros(B)        # A_{t+1}
    for t in range(T - 1, -1, -1):
        delta = c[:, t] + gamma * next_value - v[:, t]
        a_t = delta + gamma * lam * next_adv
        valid = m[:, t] > 0
        adv[:, t] = np.where(valid, a_t, 0.0)
        next_value = np.where(valid, v[:, t], next_value)
        next_adv = np.where(valid, a_t, next_adv)
    returns = (adv + v) * m
    return adv, returns


def gae_returns(rewards, values, mask, *, gamma: float = 1.0, lam: float = 1.0,
                token_kl=None, kl_coef: float = 0.0) -> np.ndarray:
    """The critic's targets R = A + V (B, T) for outcome ``rewards`` (B,) (un-whitened A)."""
    c = outcome_token_rewards(rewards, mask, token_kl, kl_coef)
    return gae(c, values, mask, gamma, lam)[1]


@ADV_ESTIMATORS.register("gae")
def gae_estimator(rewards, group_index, mask, token_kl=None, values=None, *,
                  gamma: float = 1.0, lam: float = 1.0, kl_coef: float = 0.0,
                  whiten_advantages: bool = True, std_eps: float = 1e-6, std_ddof: int = 1):
    """PPO's GAE advantages from the critic's ``values`` (B, T); whitened over the batch when
    ``whiten_advantages``. Ignores groups (rollout.n may be 1)."""
    if values is None:
        raise ValueError("adv_estimator 'gae' needs the critic's per-token values (values=...)")
    values = np.asarray(values, np.float64)
    if values.shape != mask.shape:
        raise ValueError(f"values {values.shape} must match the response mask {mask.shape}")
    c = outcome_token_rewards(rewards, mask, token_kl, kl_coef)
    adv, _ = gae(c, values, mask, gamma, lam)
    return _whiten(adv, mask, std_eps, std_ddof) if whiten_advantages else adv
